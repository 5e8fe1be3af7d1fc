"""Diagrams of the declared machines, and of live or recorded runs on them: the rendering.

Everything is drawn from the declarations in ``states/`` (:mod:`agentcore_fsm.declaration`), so a
diagram can never disagree with the engine. Three outputs:

* **Mermaid** ``stateDiagram-v2`` text (:func:`to_mermaid`) — needs nothing; GitHub renders it.
* **DOT** source for Graphviz (:func:`to_dot`) — written here, no Python package needed.
* **SVG/PNG** (:func:`render`) — the DOT source run through Graphviz's ``dot`` program. When it
  is not installed this raises :class:`GraphvizNotFoundError`, which names the package to install.

How a transition is labelled: the trigger in bold, then its guards in brackets (``not g`` for an
``unless`` guard): ``steering_polled [first_turn]``; on the next line(s), after a ``/``, the emit
actions it runs, in order: ``/ assistant_end, turn_end, agent_end``. To keep the picture legible,
all transitions from one state to another are drawn as one arrow with their labels stacked (a
transition declared with several sources appears on each source's arrow), and transitions on one
arrow that share guards and emits share a line: ``abort | fail [turn_open]``. Abort and failure
transitions (:data:`EXCEPTIONAL_TRIGGERS`) get arrows of their own, dashed and muted, so that the
normal flow reads first. Triggers the machine fires itself (not under ``[inputs]``) are italic.

A **run** (:class:`RunView`) overlays what happened: visited states are filled, the taken
transitions are drawn thick, each with how many times it fired, and the rest fade; the current
or final state is marked; when the run ended in error or abort, the state where that happened
(the source of the run's last transition) and that last arrow are drawn in red. Mermaid's state
diagrams cannot style an arrow, so there the path is carried by the counts and the state
classes. Build a view with :func:`run_view` (transition records), :func:`view_of_machine` (a
live ``LoopMachine``) or :func:`view_of_recording` (a recording made by
:class:`~agentcore_fsm.recorder.RunRecorder`).

Every SVG rendered here carries a comment with the SHA-256 of the DOT source it was rendered
from; :func:`svg_is_current` uses it to tell whether an SVG still matches its declaration
without comparing bytes (Graphviz versions lay out and serialise differently).

The modules around this one: :mod:`agentcore_fsm.diagram_files` keeps the committed
``diagrams/`` folder in step with the declarations, and :mod:`agentcore_fsm.diagram_cli` is the
``agentcore-fsm diagram`` command. This module is never imported by the engine; it imports only
the standard library and the declaration loader (the recording reader, when given a path).
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import subprocess
import textwrap
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .declaration import Declaration, TransitionSpec, load_declaration

__all__ = [
    "EXCEPTIONAL_TRIGGERS",
    "FORMATS",
    "MACHINE_ALIASES",
    "Format",
    "GraphvizError",
    "GraphvizNotFoundError",
    "RunView",
    "diagram_title",
    "dot_digest",
    "find_dot",
    "render",
    "render_dot",
    "run_view",
    "svg_is_current",
    "to_dot",
    "to_mermaid",
    "view_of_machine",
    "view_of_recording",
]


Format = Literal["mermaid", "dot", "svg", "png"]
FORMATS: tuple[Format, ...] = ("mermaid", "dot", "svg", "png")
MACHINE_ALIASES = {"loop": "agent_loop", "agent": "agent"}
"""Short names of the declared machines, accepted wherever a machine is named (any declaration
name is accepted too): :func:`view_of_recording` and ``agentcore-fsm diagram --machine``."""
EXCEPTIONAL_TRIGGERS = frozenset({"abort", "fail"})
"""Triggers drawn as exceptional (dashed, muted): the abort signal and failures (SPEC §4, §5)."""
ENDED_BADLY = frozenset({"aborted", "error"})

_RANKDIR = "TB"
TIMES = "\N{MULTIPLICATION SIGN}"  # a taken transition reads "2<TIMES> model_finished"
_GUTTER = 10  # points between an edge and its label
_EMITS_WIDTH = 34  # wrap emit lists after about this many characters
_SVG_MARK = re.compile(r"<!-- agentcore-fsm: rendered from (\S+) sha256=([0-9a-f]{64}) -->")

GRAPHVIZ_MISSING = (
    "Rendering {fmt} needs Graphviz's `dot` program, which was not found{where}. Install "
    "Graphviz: `sudo apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` "
    "(macOS/Homebrew), or see https://graphviz.org/download/. Mermaid and DOT output "
    "(--format mermaid|dot) need nothing."
)


class GraphvizError(RuntimeError):
    """Graphviz's ``dot`` failed to render."""


class GraphvizNotFoundError(GraphvizError):
    """Graphviz's ``dot`` is not installed (the message says how to install it)."""


# --- runs ---------------------------------------------------------------------------------------


class _Record(Protocol):
    @property
    def index(self) -> int: ...
    @property
    def trigger(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def dest(self) -> str: ...


@dataclass(frozen=True)
class RunView:
    """What a run adds to a diagram of its machine (build it with :func:`run_view`).

    ``counts`` maps ``(transition index, source state)`` to how many times that edge fired;
    ``path`` is the run's transitions in order as ``(index, source, dest)``; ``state`` is the
    current (or final) state; ``outcome`` is how the run ended (``completed``, ``stopped``,
    ``aborted``, ``error``) or None while it runs or when unknown; ``incident`` is the state
    where an abort or error happened (None otherwise), and ``incident_step`` the transition out
    of it, as ``(index, source, dest)``.
    """

    state: str
    finished: bool
    path: tuple[tuple[int, str, str], ...] = ()
    counts: dict[tuple[int, str], int] = field(default_factory=dict)
    visited: frozenset[str] = frozenset()
    outcome: str | None = None
    incident: str | None = None
    incident_step: tuple[int, str, str] | None = None
    label: str = "run"


def run_view(
    decl: Declaration,
    transitions: Iterable[_Record],
    *,
    state: str | None = None,
    outcome: str | None = None,
    label: str = "run",
) -> RunView:
    """Check a run's transitions against ``decl`` and summarise them for drawing.

    Each record must name a declared transition (same index, trigger, dest, and a declared
    source), and the records must chain (each starts where the previous ended; after the final
    state a new run may begin at the initial state, so a recording of several runs draws as one
    picture with the counts summed). A mismatch raises ``ValueError``: the recording is from a
    different version of the declaration, and a diagram of it would mislead.

    ``state`` defaults to the last record's destination (the initial state for an empty run).
    ``outcome`` (e.g. ``agent_end.reason``) defaults to ``error`` or ``aborted`` when the last
    transition's trigger is ``fail`` or ``abort``, else ``completed`` when the run reached the
    final state, else None. When the outcome is ``aborted`` or ``error``, the incident is where
    the run was when it went wrong: the source of its last ``abort``/``fail`` transition (of the
    last run, when the records hold several), else of its last transition (a model call that
    ended with an error goes ``streaming -> stopped`` on ``model_finished``).
    """
    records = list(transitions)
    counts: Counter[tuple[int, str]] = Counter()
    visited = {decl.initial}
    previous: str | None = None
    for n, rec in enumerate(records):
        where = f"transition {n} of the {label} ({rec.trigger}: {rec.source} -> {rec.dest})"
        if not 0 <= rec.index < len(decl.transitions):
            raise ValueError(f"{where}: {decl.name!r} declares no transition #{rec.index}")
        spec = decl.transitions[rec.index]
        if spec.trigger != rec.trigger or spec.dest != rec.dest or rec.source not in spec.source:
            declared = f"{spec.trigger}: {'|'.join(spec.source)} -> {spec.dest}"
            raise ValueError(
                f"{where} does not match {decl.name!r} transition #{rec.index} ({declared}); "
                "was it recorded with another version of the declaration?"
            )
        if previous is not None and rec.source != previous:
            if not (previous == decl.final and rec.source == decl.initial):
                raise ValueError(f"{where} does not start where the previous ended ({previous})")
        counts[(rec.index, rec.source)] += 1
        visited.update((rec.source, rec.dest))
        previous = rec.dest
    current = state if state is not None else (previous or decl.initial)
    if current not in decl.states:
        raise ValueError(f"{decl.name!r} has no state {current!r}")
    visited.add(current)
    last = records[-1] if records else None
    if outcome is None and last is not None:
        if last.trigger == "fail":
            outcome = "error"
        elif last.trigger == "abort":
            outcome = "aborted"
        elif current == decl.final:
            outcome = "completed"
    step: _Record | None = None
    if outcome in ENDED_BADLY and last is not None:
        begun = max(
            (
                i
                for i, r in enumerate(records)
                if r.source == decl.initial and (i == 0 or records[i - 1].dest == decl.final)
            ),
            default=0,
        )
        bad = [r for r in records[begun:] if r.trigger in EXCEPTIONAL_TRIGGERS]
        step = bad[-1] if bad else last
    return RunView(
        state=current,
        finished=current == decl.final,
        path=tuple((r.index, r.source, r.dest) for r in records),
        counts=dict(counts),
        visited=frozenset(visited),
        outcome=outcome,
        incident=step.source if step is not None else None,
        incident_step=(step.index, step.source, step.dest) if step is not None else None,
        label=label,
    )


def view_of_machine(machine: Any) -> RunView:
    """The view of a live machine (a ``LoopMachine``: its ``declaration``, ``history``,
    ``state`` and, once it stopped, ``end_reason``)."""
    return run_view(
        machine.declaration,
        machine.history,
        state=machine.state,
        outcome=getattr(machine, "end_reason", None),
        label="live run",
    )


def view_of_recording(recording: Any, machine: str | None = None) -> tuple[Declaration, RunView]:
    """The declaration and view of a recorded run (a :class:`~agentcore_fsm.recorder.RecordedRun`
    or a path to a JSONL recording). ``machine`` picks which recorded machine to draw: a
    declaration name or one of :data:`MACHINE_ALIASES` (default: the recording's main machine).
    The outcome is the last ``agent_end``'s reason. An unknown machine raises
    :class:`~agentcore_fsm.declaration.DeclarationError`; one the recording has no transitions
    of, ``ValueError``."""
    if not hasattr(recording, "machines"):
        from .recorder import load_run

        recording = load_run(recording)
    if machine is None:
        name = recording.machine
    else:
        name = MACHINE_ALIASES.get(machine, machine)
        load_declaration(name)  # a machine that is not declared: DeclarationError
    if name not in recording.machines:
        known = ", ".join(sorted(recording.machines)) or "none"
        raise ValueError(f"the recording has no transitions of {name!r} (it has: {known})")
    decl = load_declaration(name)
    view = run_view(
        decl, recording.machines[name], outcome=recording.end_reason, label="recorded run"
    )
    return decl, view


# --- labels -------------------------------------------------------------------------------------


@dataclass
class _Entry:
    """One line group of an edge label: triggers sharing guards and emits (``abort | fail``)."""

    specs: list[TransitionSpec]
    conditions: str
    emits: tuple[str, ...]
    count: int | None = None  # in a run view: how many times it fired (None: never)

    @property
    def triggers(self) -> list[str]:
        return list(dict.fromkeys(s.trigger for s in self.specs))


@dataclass
class _Group:
    """Every transition from ``source`` to ``dest`` of one kind (normal or exceptional), drawn as
    one arrow with a stacked label: fewer arrows is what keeps a machine with abort and failure
    transitions out of every state legible."""

    source: str
    dest: str
    exceptional: bool
    entries: list[_Entry] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(e.count or 0 for e in self.entries)


def _conditions(spec: TransitionSpec) -> str:
    conds = [*spec.guards, *(f"not {g}" for g in spec.unless)]
    return f"[{', '.join(conds)}]" if conds else ""


def _groups(decl: Declaration, run: RunView | None) -> list[_Group]:
    """The arrows to draw, in declaration order. Within an arrow, transitions with the same
    guards and emits share a line (``abort | fail [turn_open]``), except that in a run view a
    transition that fired keeps a line of its own, with its count."""
    groups: dict[tuple[str, str, bool], _Group] = {}
    for spec in decl.transitions:
        exceptional = spec.trigger in EXCEPTIONAL_TRIGGERS
        for source in spec.source:
            key = (source, spec.dest, exceptional)
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group(source, spec.dest, exceptional)
            count = run.counts.get((spec.index, source)) if run is not None else None
            conds = _conditions(spec)
            emits = _shown_emits(spec)
            for entry in group.entries:
                if (
                    count is None
                    and entry.count is None
                    and entry.conditions == conds
                    and entry.emits == emits
                ):
                    entry.specs.append(spec)
                    break
            else:
                group.entries.append(_Entry([spec], conds, emits, count))
    return list(groups.values())


def _shown_emits(spec: TransitionSpec) -> tuple[str, ...]:
    """The emit actions as drawn: ``agent_end`` shows the reason the transition declares."""
    if spec.reason is None:
        return spec.emits
    return tuple(f"agent_end({spec.reason})" if e == "agent_end" else e for e in spec.emits)


def _emit_lines(emits: Sequence[str]) -> list[str]:
    if not emits:
        return []
    return textwrap.wrap(
        "/ " + ", ".join(emits), _EMITS_WIDTH, break_long_words=False, break_on_hyphens=False
    )


def _is_auto(decl: Declaration, trigger: str) -> bool:
    return bool(decl.inputs) and trigger not in decl.inputs


def _outcome_text(view: RunView) -> str:
    if view.outcome is None:
        return "running" if not view.finished else "ended"
    return f"ended: {view.outcome}"


def diagram_title(decl: Declaration, view: RunView | None = None) -> str:
    """A diagram's title: for a static diagram (``view`` None) ``TITLE (states/NAME.toml)``,
    which is also how :func:`~agentcore_fsm.diagram_files.sync_embedded` recognises a copy of
    it; for a run, what the run did and how it ended."""
    if view is None:
        return f"{decl.title} (states/{decl.name}.toml)"
    n = len(view.path)
    plural = "s" if n != 1 else ""
    return f"{decl.title} — {view.label}, {n} transition{plural}, {_outcome_text(view)}"


def _state_mark(view: RunView, state: str) -> str | None:
    if state == view.incident:
        return f"{view.outcome} here"
    if state == view.state:
        return "final state" if view.finished else "current state"
    return None


# --- Mermaid ------------------------------------------------------------------------------------

_MERMAID_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MERMAID_ESCAPES = {"#": "#35;", ";": "#59;", ":": "#58;", "<": "#lt;", ">": "#gt;", '"': "#quot;"}


def _mm(text: str) -> str:
    """Text made safe inside a Mermaid label (entity codes for the characters it parses)."""
    return "".join(_MERMAID_ESCAPES.get(ch, ch) for ch in text)


_MERMAID_KEYWORDS = frozenset(
    {"state", "note", "class", "classDef", "style", "click", "scale", "default", "direction"}
)


def _mermaid_ids(decl: Declaration) -> dict[str, str]:
    """Mermaid ids: the state's name where Mermaid accepts it, else a fresh ``state_N``."""
    ids: dict[str, str] = {}
    taken = set(decl.states)
    for n, name in enumerate(decl.states):
        if _MERMAID_ID.match(name) and name not in _MERMAID_KEYWORDS:
            ids[name] = name
            continue
        alias = f"state_{n}"
        while alias in taken:
            alias += "_"
        taken.add(alias)
        ids[name] = alias
    return ids


def _entry_head(entry: _Entry) -> str:
    head = " ".join(x for x in (" | ".join(entry.triggers), entry.conditions) if x)
    return f"{entry.count}{TIMES} {head}" if entry.count is not None else head


def to_mermaid(decl: Declaration, run: RunView | None = None) -> str:
    """The machine as Mermaid ``stateDiagram-v2`` text (with ``run`` overlaid when given)."""
    ids = _mermaid_ids(decl)
    out = [
        "---",
        f"title: {json.dumps(diagram_title(decl, run), ensure_ascii=False)}",
        "---",
        "stateDiagram-v2",
        f"    %% Generated from states/{decl.name}.toml by `agentcore-fsm diagram`."
        + ("" if run is not None else " Do not edit."),
        "    direction TB",
    ]
    for name, spec in decl.states.items():
        # a state's label: its name, and in italics the effect the driver performs on entering
        # (``id : text`` would replace the name with the text, so the label is spelled out)
        if spec.effect:
            label = f"{_mm(name)}<br/><i>{_mm(spec.effect)}</i>"
            out.append(f'    state "{label}" as {ids[name]}')
        elif ids[name] != name:
            out.append(f'    state "{_mm(name)}" as {ids[name]}')
    out.append(f"    [*] --> {ids[decl.initial]}")
    for group in _groups(decl, run):
        lines: list[str] = []
        for entry in group.entries:
            lines += [_entry_head(entry), *_emit_lines(entry.emits)]
        label = "<br/>".join(_mm(line) for line in lines)
        out.append(f"    {ids[group.source]} --> {ids[group.dest]} : {label}")
    out.append(f"    {ids[decl.final]} --> [*]")
    if run is not None:
        out += [
            "    classDef visited fill:#dbeafe,stroke:#2b6cb0,color:#1a365d",
            "    classDef unvisited fill:#ffffff,stroke:#cbd5e0,color:#a0aec0",
            "    classDef current fill:#fde68a,stroke:#b45309,stroke-width:3px,font-weight:bold",
            "    classDef incident fill:#fed7d7,stroke:#c53030,stroke-width:3px,font-weight:bold",
        ]
        classes: dict[str, list[str]] = {}
        for name in decl.states:
            classes.setdefault(_state_class(run, name), []).append(ids[name])
        for cls in ("visited", "unvisited", "current", "incident"):
            if cls in classes:
                out.append(f"    class {','.join(classes[cls])} {cls}")
        for name in dict.fromkeys(x for x in (run.incident, run.state) if x is not None):
            mark = _state_mark(run, name)
            if mark:
                out.append(f"    note right of {ids[name]} : {_mm(mark)}")
    return "\n".join(out) + "\n"


def _state_class(run: RunView, name: str) -> str:
    if name == run.incident:
        return "incident"
    if name == run.state:
        return "current"
    return "visited" if name in run.visited else "unvisited"


# --- DOT ----------------------------------------------------------------------------------------

_INK = "#2d3748"
_MUTED = "#718096"
_PATH = "#2b6cb0"
_FADED = "#cbd5e0"
_FADED_TEXT = "#a0aec0"
_EXC = "#9b5a5a"
_INCIDENT = "#c53030"
_STATE_STYLE = {
    "incident": {"fillcolor": "#fed7d7", "color": _INCIDENT, "penwidth": "3"},
    "current": {"fillcolor": "#fde68a", "color": "#b45309", "penwidth": "3"},
    "visited": {"fillcolor": "#dbeafe", "color": _PATH, "penwidth": "1.5"},
    "unvisited": {"fillcolor": "#ffffff", "color": _FADED, "fontcolor": _FADED_TEXT},
}


def _q(text: str) -> str:
    """A DOT double-quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _h(text: str) -> str:
    return html.escape(text, quote=True)


def _attrs(**attrs: str) -> str:
    parts = []
    for key, value in attrs.items():
        if value.startswith("<") and value.endswith(">"):
            parts.append(f"{key}={value}")  # an HTML-like label
        else:
            parts.append(f"{key}={_q(value)}")
    return "[" + ", ".join(parts) + "]"


def _edge_label(decl: Declaration, group: _Group, run: RunView | None) -> str:
    lines: list[str] = []
    for entry in group.entries:
        triggers = []
        for trigger in entry.triggers:
            text = f"<b>{_h(trigger)}</b>"
            triggers.append(f"<i>{text}</i>" if _is_auto(decl, trigger) else text)
        head = " | ".join(triggers)
        if entry.conditions:
            head += " " + _h(entry.conditions)
        faded = run is not None and entry.count is None
        if entry.count is not None:
            head = f'<font color="{_PATH}"><b>{entry.count}{TIMES}</b></font> ' + head
        elif faded:
            head = f'<font color="{_FADED_TEXT}">{head}</font>'
        lines.append(head)
        color = _FADED_TEXT if faded else _MUTED
        for line in _emit_lines(entry.emits):
            lines.append(f'<font point-size="9" color="{color}">{_h(line)}</font>')
    return _label_table(lines)


def _label_table(lines: list[str]) -> str:
    """An HTML-like label: left-aligned lines, with a gutter on the left so that the edge the
    label belongs to (which dot routes along the label's left side) does not touch the text."""
    rows = "".join(f'<tr><td align="left">{line}</td></tr>' for line in lines)
    return (
        '<<table border="0" cellborder="0" cellspacing="0" cellpadding="0">'
        f'<tr><td rowspan="{len(lines) + 1}" width="{_GUTTER}"></td></tr>{rows}</table>>'
    )


def _node_label(decl: Declaration, name: str, view: RunView | None) -> str:
    spec = decl.states[name]
    lines = [f"<b>{_h(name)}</b>"]
    if spec.effect:
        lines.append(f'<font point-size="9" color="{_MUTED}"><i>{_h(spec.effect)}</i></font>')
    if view is not None:
        mark = _state_mark(view, name)
        if mark:
            color = _INCIDENT if name == view.incident else "#b45309"
            lines.append(f'<font point-size="10" color="{color}"><b>{_h(mark)}</b></font>')
    return "<" + "<br/>".join(lines) + ">"


def _legend(decl: Declaration, run: RunView | None) -> str:
    """How to read the picture (only the parts this machine uses)."""
    ts = decl.transitions
    parts = ["label: trigger"]
    if any(t.guards or t.unless for t in ts):
        parts[0] += " [guards]"
    if any(t.emits for t in ts):
        parts[0] += " / emitted events"
    if any(_is_auto(decl, t.trigger) for t in ts):
        parts.append("italic: fired by the machine itself")
    if any(t.trigger in EXCEPTIONAL_TRIGGERS for t in ts):
        parts.append("dashed: abort and failure")
    if run is not None:
        parts[:0] = [f"N{TIMES}: times a transition fired", "blue: the path taken"]
        if run.incident is not None:
            parts.insert(2, f"red: where it {'failed' if run.outcome == 'error' else 'aborted'}")
    return " · ".join(parts)


def to_dot(decl: Declaration, run: RunView | None = None) -> str:
    """The machine as Graphviz DOT source (with ``run`` overlaid when given)."""
    title = (
        f'<<font point-size="16"><b>{_h(diagram_title(decl, run))}</b></font><br/>'
        f'<font point-size="10" color="{_MUTED}">{_h(_legend(decl, run))}</font>>'
    )
    out = [
        f"// Generated from states/{decl.name}.toml by `agentcore-fsm diagram`. Do not edit.",
        f"digraph {_q(decl.name)} {{",
        "  graph "
        + _attrs(
            rankdir=_RANKDIR,
            fontname="Helvetica",
            label=title,
            labelloc="t",
            nodesep="0.45",
            ranksep="0.55",
            pad="0.3",
        )
        + ";",
        "  node "
        + _attrs(
            shape="box",
            style="rounded,filled",
            fillcolor="#f7fafc",
            color=_INK,
            fontname="Helvetica",
            fontsize="12",
            fontcolor=_INK,
            margin="0.15,0.06",
        )
        + ";",
        "  edge "
        + _attrs(fontname="Helvetica", fontsize="10", color=_INK, fontcolor=_INK, arrowsize="0.7")
        + ";",
        "  __start__ " + _attrs(shape="point", width="0.14", label="", color=_INK) + ";",
    ]
    for name in decl.states:
        attrs: dict[str, str] = {"label": _node_label(decl, name, run), "id": f"state-{name}"}
        if name == decl.final:
            attrs["peripheries"] = "2"
        if run is not None:
            cls = _state_class(run, name)
            attrs.update(_STATE_STYLE[cls])
            attrs["class"] = cls
        out.append(f"  {_q(name)} {_attrs(**attrs)};")
    start_attrs = {"color": _PATH, "penwidth": "2"} if run is not None and run.path else {}
    out.append(
        f"  __start__ -> {_q(decl.initial)}{' ' + _attrs(**start_attrs) if start_attrs else ''};"
    )
    fatal: tuple[str, str, bool] | None = None  # the arrow out of the incident state
    if run is not None and run.incident_step is not None:
        index, source, dest = run.incident_step
        fatal = (source, dest, decl.transitions[index].trigger in EXCEPTIONAL_TRIGGERS)
    for group in _groups(decl, run):
        attrs = {
            "label": _edge_label(decl, group, run),
            "id": f"edge-{group.source}-{group.dest}{'-x' if group.exceptional else ''}",
        }
        if group.exceptional:
            attrs.update(style="dashed", color=_EXC, fontcolor=_EXC, fontsize="9")
        if run is not None:
            if group.count:
                width = min(1.5 + group.count * 0.5, 4.0)
                color = (
                    _INCIDENT if (group.source, group.dest, group.exceptional) == fatal else _PATH
                )
                attrs.update(color=color, fontcolor=_INK, penwidth=f"{width:g}")
                attrs["class"] = "taken"
            else:
                attrs.update(color=_FADED)
        out.append(f"  {_q(group.source)} -> {_q(group.dest)} {_attrs(**attrs)};")
    out.append("}")
    return "\n".join(out) + "\n"


# --- Graphviz -----------------------------------------------------------------------------------


def find_dot(dot_binary: str | None = None) -> str | None:
    """The path of Graphviz's ``dot`` (``dot_binary`` if given and it exists), or None."""
    return shutil.which(dot_binary or "dot")


def render_dot(source: str, fmt: Literal["svg", "png"], *, dot_binary: str | None = None) -> bytes:
    """Run DOT ``source`` through Graphviz's ``dot`` and return the SVG or PNG bytes."""
    exe = find_dot(dot_binary)
    if exe is None:
        where = f" (looked for {dot_binary!r})" if dot_binary else " on PATH"
        raise GraphvizNotFoundError(GRAPHVIZ_MISSING.format(fmt=fmt.upper(), where=where))
    args = [exe, f"-T{fmt}"]
    if fmt == "png":
        args.append("-Gdpi=110")
    proc = subprocess.run(args, input=source.encode("utf-8"), capture_output=True, timeout=120)
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip()
        raise GraphvizError(f"dot -T{fmt} failed (exit {proc.returncode}): {detail}")
    return proc.stdout


def dot_digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def _stamp_svg(svg: bytes, dot_name: str, source: str) -> str:
    """The SVG text with a comment naming the DOT source (and its hash) it was rendered from."""
    text = svg.decode("utf-8")
    mark = f"<!-- agentcore-fsm: rendered from {dot_name} sha256={dot_digest(source)} -->\n"
    at = text.find("<svg")
    if at < 0:
        raise GraphvizError("dot produced no <svg> element")
    return text[:at] + mark + text[at:]


def render(
    decl: Declaration,
    fmt: Format = "mermaid",
    run: RunView | None = None,
    *,
    dot_binary: str | None = None,
) -> str | bytes:
    """The diagram of ``decl`` (and ``run``) as text (mermaid, dot, svg) or bytes (png)."""
    if fmt == "mermaid":
        return to_mermaid(decl, run)
    source = to_dot(decl, run)
    if fmt == "dot":
        return source
    if fmt == "svg":
        return _stamp_svg(
            render_dot(source, "svg", dot_binary=dot_binary), decl.name + ".dot", source
        )
    if fmt == "png":
        return render_dot(source, "png", dot_binary=dot_binary)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


# --- checking an SVG ----------------------------------------------------------------------------


def svg_is_current(svg: str, decl: Declaration, dot_source: str | None = None) -> list[str]:
    """Why the SVG ``svg`` is not a current render of ``decl`` (an empty list when it is):
    it must be well-formed XML, carry the hash of the DOT source rendered now, and name every
    state in its text."""
    dot_source = to_dot(decl) if dot_source is None else dot_source
    problems: list[str] = []
    try:
        root = ET.fromstring(svg)
    except ET.ParseError as exc:
        return [f"not well-formed XML: {exc}"]
    if not root.tag.endswith("svg"):
        problems.append(f"the root element is {root.tag!r}, not svg")
    match = _SVG_MARK.search(svg)
    if match is None:
        problems.append("no 'rendered from' comment")
    elif match.group(2) != dot_digest(dot_source):
        problems.append("rendered from an older DOT source")
    texts = {"".join(el.itertext()).strip() for el in root.iter() if el.tag.endswith("text")}
    missing = [name for name in decl.states if name not in texts]
    if missing:
        problems.append(f"states missing from the drawing: {', '.join(missing)}")
    return problems
