"""Diagrams of the declared machines, and of live or recorded runs on them: the rendering.

Everything is drawn from the declarations in ``states/`` (:mod:`agentcore_fsm.core.declaration`),
so a
diagram can never disagree with the engine. Three outputs:

* **Mermaid** (:func:`to_mermaid`) — needs nothing; GitHub renders it. A declared machine is a
  ``stateDiagram-v2``; a run on it is a ``flowchart`` (:func:`run_to_mermaid`), because a state
  diagram cannot style a single arrow and a flowchart's ``linkStyle`` can.
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

A **run** (:class:`RunView`) overlays what happened, the same way in Mermaid and in DOT: visited
states are filled, the taken transitions are drawn thick and blue, each line with how many times
it fired, and the rest fade; the current or final state is marked; when the run ended in error or
abort, the state where that happened (the source of the run's last abort or failure transition)
is red and holds the error text, and the arrow of that step is red. A run that ended well
despite tool errors has its final state in orange, listing them, and says so in its title. A
state where the run waited for a person (:data:`WAIT_STATES`: ``awaiting_approval``) says how
long, when the records carry clock readings (a recording does): ``waited 2.3 s``. Every
mark is written inside its state, so none can be drawn beside the wrong one. Build a view with
:func:`run_view` (transition records), :func:`view_of_machine` (a live ``LoopMachine``) or
:func:`view_of_recording` (a recording made by
:class:`~agentcore_fsm.persist.recorder.RunRecorder`).

The **steps** of a run (:func:`run_steps`) are the ordered companion of its diagram: step 1, 2,
3 ... with the trigger, source → destination, the guards that held, the transitions tried
before it that did not hold, the emit actions, the time waited before a step out of a waiting
state and the events recorded after it. They are written
as a Markdown table (:func:`steps_markdown`; it reads in a terminal and renders on a web page)
or a Mermaid sequence diagram with the same numbers (:func:`steps_mermaid`);
``agentcore-fsm diagram --run RUN.jsonl --steps`` prints them.

Every SVG rendered here carries a comment with the SHA-256 of the DOT source it was rendered
from; :func:`svg_is_current` uses it to tell whether an SVG still matches its declaration
without comparing bytes (Graphviz versions lay out and serialise differently).

The modules around this one: :mod:`agentcore_fsm.devtools.diagram_files` keeps the committed
``diagrams/`` folder in step with the declarations, and :mod:`agentcore_fsm.cli.diagram` is the
``agentcore-fsm diagram`` command. This module is never imported by the engine; it imports only
the standard library and the declaration loader at the top (the recording module only inside
the functions that read a run).
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

from agentcore_fsm.core.declaration import Declaration, TransitionSpec, load_declaration

__all__ = [
    "EXCEPTIONAL_TRIGGERS",
    "FORMATS",
    "MACHINE_ALIASES",
    "STEPS_FORMATS",
    "WAIT_STATES",
    "Format",
    "GraphvizError",
    "GraphvizNotFoundError",
    "RunStep",
    "RunView",
    "StepsFormat",
    "diagram_title",
    "dot_digest",
    "find_dot",
    "render",
    "render_dot",
    "render_steps",
    "run_steps",
    "run_to_mermaid",
    "run_view",
    "steps_markdown",
    "steps_mermaid",
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
"""Triggers drawn as exceptional (dashed, muted): the abort signal and failures (see
docs/reference.md#abort and docs/reference.md#failures)."""
ENDED_BADLY = frozenset({"aborted", "error"})
WAIT_STATES = frozenset({"awaiting_approval"})
"""States where a run waits for a person (an approval decision: see docs/approval.md): a run view
says how long it waited there, when its records carry clock readings."""

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
    of it, as ``(index, source, dest)``; ``error`` is the error text of a run that ended in an
    error or an abort (drawn in the incident state); ``tool_errors`` the tool results that were
    errors, as ``tool: text`` (a run that ended well despite them is marked so);
    ``events``, for a recording, the labels of the agent events recorded after each step of
    ``path`` and before the next (see :func:`run_steps`), else empty. ``waited``: for each step
    of ``path`` out of a waiting state (:data:`WAIT_STATES`), the seconds spent there since the
    step before (None for the other steps, and where no clock readings were given); empty when
    none were given. ``waiting``: the seconds the run has waited so far in its current state,
    when that is a waiting state (the records stop there), else None.
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
    error: str | None = None
    tool_errors: tuple[str, ...] = ()
    events: tuple[tuple[str, ...], ...] = ()
    waited: tuple[float | None, ...] = ()
    waiting: float | None = None

    @property
    def despite_tool_errors(self) -> bool:
        """The run ended well (or is still going) although some tool results were errors."""
        return bool(self.tool_errors) and self.outcome not in ENDED_BADLY

    def time_waited(self, state: str) -> tuple[float, int, bool] | None:
        """How long the run waited in ``state``: the seconds in all, how many times it waited
        there, and whether it still waits there (the records stop in it); None when nothing is
        known (not a waiting state, never visited, or no clock readings)."""
        spans = [
            w
            for (_, source, _), w in zip(self.path, self.waited, strict=False)
            if source == state and w is not None
        ]
        still = self.waiting if state == self.state else None
        if still is not None:
            spans.append(still)
        if not spans:
            return None
        return sum(spans), len(spans), still is not None


def run_view(
    decl: Declaration,
    transitions: Iterable[_Record],
    *,
    state: str | None = None,
    outcome: str | None = None,
    label: str = "run",
    error: str | None = None,
    tool_errors: Iterable[str] = (),
    events: Sequence[Sequence[str]] | None = None,
    times: Sequence[float | None] | None = None,
    now: float | None = None,
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

    ``error`` (the error text), ``tool_errors`` and ``events`` (one list of event labels per
    record) are carried into the view as given; ``events`` of another length than the records
    raise ``ValueError``.

    ``times``: a clock reading (seconds, from any origin; None where unknown) per record, taken
    when it was recorded; the view then says how long the run waited in each waiting state
    (:data:`WAIT_STATES`): from the step into it to the step out of it. ``now``: the clock
    reading at the end of the records (a recording's last one), for a run that still waits in
    its current state. ``times`` of another length than the records raise ``ValueError``.
    """
    records = list(transitions)
    if events is not None and len(events) != len(records):
        raise ValueError(f"{len(events)} lists of events for {len(records)} transitions")
    if times is not None and len(times) != len(records):
        raise ValueError(f"{len(times)} clock readings for {len(records)} transitions")
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
    waited, waiting = _waits(records, times, now, current)
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
        error=error if error else None,
        tool_errors=tuple(tool_errors),
        events=tuple(tuple(e) for e in events) if events is not None else (),
        waited=waited,
        waiting=waiting,
    )


def _waits(
    records: Sequence[_Record],
    times: Sequence[float | None] | None,
    now: float | None,
    current: str,
) -> tuple[tuple[float | None, ...], float | None]:
    """:attr:`RunView.waited` and :attr:`RunView.waiting` from the records' clock readings."""
    if times is None:
        return (), None
    waited: list[float | None] = [None]
    for n in range(1, len(records)):
        before, after = times[n - 1], times[n]
        inside = records[n].source in WAIT_STATES and records[n - 1].dest == records[n].source
        if inside and before is not None and after is not None:
            waited.append(max(0.0, after - before))
        else:
            waited.append(None)
    waiting = None
    if records and current in WAIT_STATES and records[-1].dest == current:
        entered = times[-1]
        if entered is not None and now is not None:
            waiting = max(0.0, now - entered)
    return tuple(waited[: len(records)]), waiting


def _wait_text(view: RunView, state: str) -> str | None:
    """``waited 2.3 s`` (``waited 4.1 s (2 waits)``, ``... so far`` while it still waits) for a
    waiting state whose time is known, else None."""
    known = view.time_waited(state)
    if known is None:
        return None
    from agentcore_fsm.persist.recorder import duration_text

    total, count, still = known
    text = f"waited {duration_text(total)}"
    if count > 1:
        text += f" ({count} waits)"
    return text + (" so far" if still else "")


def view_of_machine(machine: Any) -> RunView:
    """The view of a live machine (a ``LoopMachine``: its ``declaration``, ``history``,
    ``state`` and, once it stopped, ``end_reason``; the error text and tool errors come from
    its ``new_messages``, when it has them)."""
    from agentcore_fsm.persist.recorder import run_error, tool_errors

    reason = getattr(machine, "end_reason", None)
    messages = list(getattr(machine, "new_messages", None) or ())
    return run_view(
        machine.declaration,
        machine.history,
        state=machine.state,
        outcome=reason,
        label="live run",
        error=run_error(messages, reason),
        tool_errors=tool_errors(messages),
    )


def view_of_recording(recording: Any, machine: str | None = None) -> tuple[Declaration, RunView]:
    """The declaration and view of a recorded run (a
    :class:`~agentcore_fsm.persist.recorder.RecordedRun`
    or a path to a JSONL recording). ``machine`` picks which recorded machine to draw: a
    declaration name or one of :data:`MACHINE_ALIASES` (default: the recording's main machine).
    The outcome is the last ``agent_end``'s reason, the error text and the tool errors the
    recording's (:attr:`~agentcore_fsm.persist.recording.RecordedRun.error`,
    :attr:`~agentcore_fsm.persist.recording.RecordedRun.tool_errors`), each step gets the events
    recorded after it, and the records' clock readings say how long the run waited in a waiting
    state (:data:`WAIT_STATES`). The transitions of a run whose record (header and inputs) the
    recording holds are derived from its inputs (docs/record.md), so such a recording draws
    without transition lines. An unknown machine raises
    :class:`~agentcore_fsm.core.declaration.DeclarationError`; one the recording has no transitions
    of, ``ValueError``."""
    from agentcore_fsm.persist.recording import describe_event, load_run

    if not hasattr(recording, "machines"):
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
    events = None
    if getattr(recording, "events", None):
        events = [[describe_event(e) for e in after] for after in recording.events_after(name)]
    times = None
    if callable(getattr(recording, "transition_times", None)):
        times = recording.transition_times(name)
    view = run_view(
        decl,
        recording.machines[name],
        outcome=recording.end_reason,
        label="recorded run",
        error=getattr(recording, "error", None),
        tool_errors=getattr(recording, "tool_errors", ()),
        events=events,
        times=times,
        now=getattr(recording, "last_time", None),
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


def _plural(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _outcome_text(view: RunView) -> str:
    if view.outcome is None:
        text = "running" if not view.finished else "ended"
    else:
        text = f"ended: {view.outcome}"
    if view.despite_tool_errors:
        text += f" despite {_plural(len(view.tool_errors), 'tool error')}"
    return text


def diagram_title(decl: Declaration, view: RunView | None = None) -> str:
    """A diagram's title: for a static diagram (``view`` None) ``TITLE (states/NAME.toml)``,
    which is also how :func:`~agentcore_fsm.devtools.diagram_files.sync_embedded` recognises a copy
    of
    it; for a run, what the run did and how it ended (``ended: completed despite 1 tool
    error`` when some tool results were errors)."""
    if view is None:
        return f"{decl.title} (states/{decl.name}.toml)"
    return f"{decl.title} — {view.label}, {_plural(len(view.path), 'transition')}, " + (
        _outcome_text(view)
    )


_NOTE_WIDTH = 38  # wrap the error text drawn in a state after about this many characters
_NOTE_LINES = 4  # and cut it after this many lines
_TOOL_ERRORS_SHOWN = 3


def _wrapped(text: str, lines: int = _NOTE_LINES) -> list[str]:
    """``text`` on lines of about :data:`_NOTE_WIDTH` characters, at most ``lines`` of them
    (the last ends in an ellipsis when it was cut)."""
    out = textwrap.wrap(" ".join(text.split()), _NOTE_WIDTH, break_long_words=True) or [""]
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: _NOTE_WIDTH - 1].rstrip() + "\N{HORIZONTAL ELLIPSIS}"
    return out


def _state_notes(view: RunView, state: str) -> tuple[str | None, list[str]]:
    """What a run view writes inside a state, under its name: a mark (``error here``, ``final
    state``, ...) and detail lines (the error text; the tool errors a run ended well despite).
    Drawn inside the state, never beside it, so it cannot end up next to another one."""
    if state == view.incident:
        return f"{view.outcome} here", _wrapped(view.error) if view.error else []
    if state != view.state:
        return None, []
    mark = "final state" if view.finished else "current state"
    details: list[str] = []
    if view.despite_tool_errors:
        n = len(view.tool_errors)
        done = "so far" if view.outcome is None and not view.finished else ""
        head = f"{view.outcome or 'ran'} despite {_plural(n, 'tool error')} {done}".strip()
        details.append(head + ":")
        for error in view.tool_errors[:_TOOL_ERRORS_SHOWN]:
            details += _wrapped(error, 2)
        if n > _TOOL_ERRORS_SHOWN:
            details.append(f"(and {n - _TOOL_ERRORS_SHOWN} more)")
    elif view.error and view.incident is None:  # ended badly without a transition to blame
        details = _wrapped(view.error)
    return mark, details


def _state_class(run: RunView, name: str) -> str:
    if name == run.incident:
        return "incident"
    if name == run.state:
        return "warned" if run.despite_tool_errors else "current"
    return "visited" if name in run.visited else "unvisited"


def _fatal_group(decl: Declaration, run: RunView | None) -> tuple[str, str, bool] | None:
    """The arrow of the run's incident step (drawn red), as ``(source, dest, exceptional)``."""
    if run is None or run.incident_step is None:
        return None
    index, source, dest = run.incident_step
    return source, dest, decl.transitions[index].trigger in EXCEPTIONAL_TRIGGERS


def _edge_width(count: int) -> float:
    """How thick a taken arrow is drawn (points in DOT, pixels in Mermaid): more with more
    firings, from 3 up to 5."""
    return min(2.5 + count * 0.5, 5.0)


# --- colours (the same in the Mermaid and the DOT run views) -------------------------------------

_INK = "#2d3748"
_MUTED = "#718096"
_PATH = "#2b6cb0"
_FADED = "#cbd5e0"
_FADED_TEXT = "#a0aec0"
_EXC = "#9b5a5a"
_INCIDENT = "#c53030"
_WARNED = "#c2410c"
_STATE_COLOURS = {
    "incident": ("#fed7d7", _INCIDENT, "3"),
    "current": ("#fde68a", "#b45309", "3"),
    "warned": ("#ffedd5", _WARNED, "3"),
    "visited": ("#dbeafe", _PATH, "1.5"),
    "unvisited": ("#ffffff", _FADED, "1"),
}
"""A run view's state classes: fill, border and border width. ``warned``: the final or current
state of a run that ended well (or goes on) despite tool errors."""


# --- Mermaid ------------------------------------------------------------------------------------

_MERMAID_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MERMAID_ESCAPES = {"#": "#35;", ";": "#59;", ":": "#58;", "<": "#lt;", ">": "#gt;", '"': "#quot;"}


def _mm(text: str) -> str:
    """Text made safe inside a Mermaid label (entity codes for the characters it parses)."""
    return "".join(_MERMAID_ESCAPES.get(ch, ch) for ch in text)


_MERMAID_KEYWORDS = frozenset(
    {"state", "note", "class", "classDef", "style", "click", "scale", "default", "direction"}
)
# words a flowchart reads as syntax where a node id would stand
_FLOWCHART_KEYWORDS = frozenset(
    {
        "end",
        "graph",
        "flowchart",
        "subgraph",
        "style",
        "linkstyle",
        "classdef",
        "class",
        "click",
        "call",
        "href",
        "direction",
        "default",
        "interpolate",
    }
)


def _mermaid_ids(decl: Declaration, flowchart: bool = False) -> dict[str, str]:
    """Mermaid ids: the state's name where Mermaid accepts it, else a fresh ``state_N``. In a
    flowchart a keyword (any case) cannot be an id, nor a name that starts with ``o`` or ``x``
    (``a --o b`` is an arrow with a circle end)."""
    ids: dict[str, str] = {}
    taken = set(decl.states)
    for n, name in enumerate(decl.states):
        usable = _MERMAID_ID.match(name) is not None and name not in _MERMAID_KEYWORDS
        if flowchart:
            usable = usable and name.lower() not in _FLOWCHART_KEYWORDS
            usable = usable and name[0] not in "oxOX" and not name.startswith("_")
        if usable:
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
    """The machine as Mermaid text: a ``stateDiagram-v2`` of the declaration, or with ``run``
    a ``flowchart`` of the run on it (:func:`run_to_mermaid`)."""
    if run is not None:
        return run_to_mermaid(decl, run)
    ids = _mermaid_ids(decl)
    out = [
        "---",
        f"title: {json.dumps(diagram_title(decl), ensure_ascii=False)}",
        "---",
        "stateDiagram-v2",
        f"    %% Generated from states/{decl.name}.toml by `agentcore-fsm diagram`. Do not edit.",
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
    for group in _groups(decl, None):
        lines: list[str] = []
        for entry in group.entries:
            lines += [_entry_head(entry), *_emit_lines(entry.emits)]
        label = "<br/>".join(_mm(line) for line in lines)
        out.append(f"    {ids[group.source]} --> {ids[group.dest]} : {label}")
    out.append(f"    {ids[decl.final]} --> [*]")
    return "\n".join(out) + "\n"


def _link_style(stroke: str, width: float, text: str, dashed: bool = False) -> str:
    style = f"stroke:{stroke},stroke-width:{width:g}px,color:{text}"
    return style + (",stroke-dasharray:6 4" if dashed else "")


def run_to_mermaid(decl: Declaration, run: RunView) -> str:
    """A run on its machine as a Mermaid ``flowchart``.

    A state diagram (``stateDiagram-v2``, what the static diagrams are) cannot style a single
    arrow, so a run is drawn as a flowchart, whose ``linkStyle`` can. The arrows the run took
    are thick and blue, each line with how many times it fired in front of its trigger (``4``
    and a multiplication sign); the others are thin and faded; the arrow of the step where the
    run failed or was aborted is red. Abort and failure arrows are dashed. The states are
    classed ``visited``, ``unvisited``, ``current`` (the final or current state), ``incident``
    (where it failed or was aborted: red, with the error text inside) and ``warned`` (the
    final state of a run that ended well despite tool errors: orange, with the tool errors
    inside). A waiting state (:data:`WAIT_STATES`) says, in italics, how long the run waited
    there when that is known (``waited 2.3 s``). Marks are written inside the states, never in
    notes, so none can be laid out beside the wrong state. Arrows and labels are the static
    diagram's, plus the counts.
    """
    ids = _mermaid_ids(decl, flowchart=True)
    used = set(ids.values())

    def fresh(base: str) -> str:
        while base in used:
            base += "_"
        used.add(base)
        return base

    start, end = fresh("start"), fresh("finish")
    out = [
        "---",
        f"title: {json.dumps(diagram_title(decl, run), ensure_ascii=False)}",
        "---",
        "flowchart TB",
        f"    %% A run on states/{decl.name}.toml, drawn by `agentcore-fsm diagram`: thick",
        f"    %% blue arrows were taken (N{TIMES}: times fired), faded ones were not, a red one",
        "    %% is where the run failed or was aborted; dashed: abort and failure.",
        f'    {start}((" "))',
    ]
    for name, spec in decl.states.items():
        lines = [f"<b>{_mm(name)}</b>"]
        if spec.effect:
            lines.append(f"<i>{_mm(spec.effect)}</i>")
        mark, details = _state_notes(run, name)
        if mark is not None:
            lines.append(f"<b>{_mm(mark)}</b>")
        lines += [_mm(line) for line in details]
        waited = _wait_text(run, name)
        if waited is not None:
            lines.append(f"<i>{_mm(waited)}</i>")
        out.append(f'    {ids[name]}("{"<br/>".join(lines)}")')
    out.append(f'    {end}(((" ")))')
    fatal = _fatal_group(decl, run)
    links: list[tuple[str, str, str, bool, str]] = []  # source, dest, label, dashed, style
    began = bool(run.path)
    links.append(
        (
            start,
            ids[decl.initial],
            "",
            False,
            _link_style(_PATH, 3, _INK) if began else _link_style(_FADED, 1, _FADED_TEXT),
        )
    )
    for group in _groups(decl, run):
        lines = []
        for entry in group.entries:
            head = _mm(_entry_head(entry))
            if entry.count is not None:
                head = f"<b>{head}</b>"
            lines += [head, *(_mm(line) for line in _emit_lines(entry.emits))]
        if group.count:
            red = (group.source, group.dest, group.exceptional) == fatal
            colour = _INCIDENT if red else _PATH
            style = _link_style(colour, _edge_width(group.count), _INK, group.exceptional)
        else:
            style = _link_style(_FADED, 1, _FADED_TEXT, group.exceptional)
        links.append(
            (ids[group.source], ids[group.dest], "<br/>".join(lines), group.exceptional, style)
        )
    links.append(
        (
            ids[decl.final],
            end,
            "",
            False,
            _link_style(_PATH, 3, _INK) if run.finished else _link_style(_FADED, 1, _FADED_TEXT),
        )
    )
    for source, dest, label, dashed, _ in links:
        arrow = "-.->" if dashed else "-->"
        out.append(
            f'    {source} {arrow}|"{label}"| {dest}' if label else f"    {source} {arrow} {dest}"
        )
    for number, (*_, style) in enumerate(links):
        out.append(f"    linkStyle {number} {style}")
    for cls, (fill, stroke, width) in _STATE_COLOURS.items():
        text = _FADED_TEXT if cls == "unvisited" else _INK
        out.append(
            f"    classDef {cls} fill:{fill},stroke:{stroke},stroke-width:{width}px,color:{text}"
        )
    out.append(f"    classDef terminal fill:{_INK},stroke:{_INK}")
    classes: dict[str, list[str]] = {}
    for name in decl.states:
        classes.setdefault(_state_class(run, name), []).append(ids[name])
    for cls in _STATE_COLOURS:
        if cls in classes:
            out.append(f"    class {','.join(classes[cls])} {cls}")
    out.append(f"    class {start},{end} terminal")
    return "\n".join(out) + "\n"


# --- the steps of a run, in order ---------------------------------------------------------------


@dataclass(frozen=True)
class RunStep:
    """One transition of a run, as :func:`run_steps` lists it.

    ``number`` counts from 1; ``index`` is the declared transition's. ``guards`` are the guards
    of the transition taken, all of which held (``not g`` for an ``unless`` guard).
    ``passed_over`` are the transitions declared before it for the same trigger and source
    state: the engine tried those first, in order, and each had a guard that did not hold (the
    record does not say which one). ``emits`` are the emit actions the transition ran, in
    order (``agent_end`` with its reason). ``events``, for a recording, are the agent events
    recorded after this step and before the next: the driver delivers the events of an input
    once the machine has taken every transition it caused, so an event can be listed a step or
    two after the transition that produced it. ``auto``: a trigger the machine fired itself;
    ``exceptional``: an abort or failure; ``incident``: the step where the run failed or was
    aborted (drawn red in the run diagram). ``waited``: for a step out of a waiting state
    (:data:`WAIT_STATES`), the seconds the run spent there before it, when known (see
    :attr:`RunView.waited`); else None.
    """

    number: int
    index: int
    trigger: str
    source: str
    dest: str
    guards: tuple[str, ...]
    passed_over: tuple[TransitionSpec, ...]
    emits: tuple[str, ...]
    events: tuple[str, ...] = ()
    auto: bool = False
    exceptional: bool = False
    incident: bool = False
    waited: float | None = None


def run_steps(decl: Declaration, view: RunView) -> list[RunStep]:
    """The steps of the run ``view`` shows, in the order they were taken (see :class:`RunStep`).

    This is the ordered companion of the run diagram: the diagram sums a run up on the
    machine (which arrows, how often, where it ended), the steps say which way it went, in
    what order. :func:`steps_markdown` and :func:`steps_mermaid` write them out;
    ``agentcore-fsm diagram --run RUN.jsonl --steps`` prints the Markdown.
    """
    last_incident = -1
    if view.incident_step is not None:
        last_incident = max(i for i, step in enumerate(view.path) if step == view.incident_step)
    steps: list[RunStep] = []
    for n, (index, source, dest) in enumerate(view.path):
        spec = decl.transitions[index]
        earlier = tuple(
            t for t in decl.transitions[:index] if t.trigger == spec.trigger and source in t.source
        )
        steps.append(
            RunStep(
                number=n + 1,
                index=index,
                trigger=spec.trigger,
                source=source,
                dest=dest,
                guards=(*spec.guards, *(f"not {g}" for g in spec.unless)),
                passed_over=earlier,
                emits=_shown_emits(spec),
                events=view.events[n] if n < len(view.events) else (),
                auto=_is_auto(decl, spec.trigger) or spec.auto,
                exceptional=spec.trigger in EXCEPTIONAL_TRIGGERS,
                incident=n == last_incident,
                waited=view.waited[n] if n < len(view.waited) else None,
            )
        )
    return steps


def _squeezed(labels: Sequence[str]) -> list[str]:
    """Event labels, each run of the same one given once with its count."""
    out: list[str] = []
    previous, count = None, 0
    for label in [*labels, None]:
        if label == previous:
            count += 1
            continue
        if previous is not None:
            out.append(previous if count == 1 else f"{previous} {TIMES}{count}")
        previous, count = label, 1
    return out


def _waited_cell(step: RunStep) -> str:
    """``waited 2.3 s`` for a step out of a waiting state whose time is known, else ''."""
    if step.waited is None:
        return ""
    from agentcore_fsm.persist.recorder import duration_text

    return f"waited {duration_text(step.waited)}"


def _cell(text: str) -> str:
    """Text made safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("\\", "\\\\").replace("|", "\\|")


def _view_lines(view: RunView, decl: Declaration) -> list[str]:
    """The error text, the tool errors and the time waited of a run, as lines."""
    lines = []
    if view.error:
        lines.append(f"error: {view.error}")
    if view.tool_errors:
        lines.append(f"tool errors ({len(view.tool_errors)}): " + "; ".join(view.tool_errors))
    for state in decl.states:
        waited = _wait_text(view, state)
        if waited is not None:
            lines.append(f"{state}: {waited}")
    return lines


def steps_markdown(decl: Declaration, view: RunView) -> str:
    """The steps of a run as a Markdown table, one row per transition, in order.

    The format: a heading (the run diagram's title), how the run ended with its error text
    and tool errors, then the table: ``#``, the trigger (italic when the machine fired it
    itself; ``(error here)``/``(aborted here)`` on the step where the run went wrong), ``from
    → to``, how long the run waited before a step out of a waiting state (a ``waited`` column,
    only when that is known), the guards that held, the transitions passed over (tried first, a
    guard failed), the emit actions, and, for a recording, the events recorded after the step.
    A table reads as well in a terminal as on a page that renders Markdown, and it answers
    "which way did it go, in what order" without a picture; a short key under it says how to
    read it.
    """
    out = [f"## {diagram_title(decl, view)}", ""]
    notes = _view_lines(view, decl)
    if notes:
        out += [*(f"- {_cell(line)}" for line in notes), ""]
    steps = run_steps(decl, view)
    if not steps:
        out.append("No transition was taken.")
        return "\n".join(out) + "\n"
    events = any(step.events for step in steps)
    waits = any(step.waited is not None for step in steps)
    head = ["#", "trigger", "from → to"]
    if waits:
        head.append("waited")
    head += ["guards (held)", "passed over", "emits"]
    if events:
        head.append("events recorded after")
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join(["--:"] + ["---"] * (len(head) - 1)) + "|")
    for step in steps:
        trigger = f"*{step.trigger}*" if step.auto else f"**{step.trigger}**"
        if step.incident:
            trigger += f" ({view.outcome} here)"
        passed = "; ".join(f"{_conditions(t) or '[]'} → {t.dest}" for t in step.passed_over)
        row = [str(step.number), trigger, f"{step.source} → {step.dest}"]
        if waits:
            row.append(_waited_cell(step))
        row += [", ".join(step.guards), passed, ", ".join(step.emits)]
        if events:
            row.append(", ".join(_squeezed(step.events)))
        out.append("| " + " | ".join(_cell(x) for x in row) + " |")
    out += [
        "",
        "Guards (held): the guards of the transition taken, all of which held. Passed over: "
        "the transitions declared before it for the same trigger and state, tried first; each "
        "had a guard that did not hold. Emits: its emit actions, in order. Italic triggers: "
        "fired by the machine itself."
        + (
            " Waited: how long the run waited in the state the step leaves (for a person's "
            "decision) before it was taken."
            if waits
            else ""
        )
        + (
            " Events: the agent events recorded after the step; an input's events are "
            "delivered once the machine has taken every transition it caused, so an event can "
            "be listed a step or two after the transition that produced it."
            if events
            else ""
        ),
    ]
    return "\n".join(out) + "\n"


def steps_mermaid(decl: Declaration, view: RunView) -> str:
    """The steps of a run as a Mermaid ``sequenceDiagram``: one participant per state the run
    visited (in the order it first got there), one numbered arrow per step (``autonumber``,
    the same numbers as :func:`steps_markdown`), labelled with the trigger and its guards
    (the emit actions on a second line, then the time waited before a step out of a waiting
    state). Abort and failure steps are dashed; the step where
    the run failed or was aborted ends in a cross, with a note holding the error text, and a
    run that ended well despite tool errors gets a note listing them on its final state."""
    steps = run_steps(decl, view)
    order = list(dict.fromkeys([decl.initial, *(x for s in steps for x in (s.source, s.dest))]))
    ids = {name: f"s{n}" for n, name in enumerate(order)}
    out = [
        "---",
        f"title: {json.dumps(diagram_title(decl, view), ensure_ascii=False)}",
        "---",
        "sequenceDiagram",
        f"    %% The steps of a run on states/{decl.name}.toml, drawn by `agentcore-fsm diagram`.",
        "    autonumber",
    ]
    out += [f"    participant {ids[name]} as {_mm(name)}" for name in order]
    for step in steps:
        label = _mm(" ".join(x for x in (step.trigger, _bracket(step.guards)) if x))
        if step.emits:
            label += "<br/>" + _mm("/ " + ", ".join(step.emits))
        if step.waited is not None:
            label += "<br/>" + _mm(_waited_cell(step))
        arrow = "--" if step.exceptional else "-"
        arrow += "x" if step.incident else ">>"
        out.append(f"    {ids[step.source]}{arrow}{ids[step.dest]}: {label}")
        if step.incident:
            note = f"{view.outcome} here" + (f": {view.error}" if view.error else "")
            text = "<br/>".join(_mm(line) for line in _wrapped(note, 6))
            out.append(f"    Note over {ids[step.source]}: {text}")
    if view.despite_tool_errors:
        _, details = _state_notes(view, view.state)
        text = "<br/>".join(_mm(line) for line in details)
        out.append(f"    Note over {ids[view.state]}: {text}")
    return "\n".join(out) + "\n"


def _bracket(guards: Sequence[str]) -> str:
    return f"[{', '.join(guards)}]" if guards else ""


StepsFormat = Literal["markdown", "mermaid"]
STEPS_FORMATS: tuple[StepsFormat, ...] = ("markdown", "mermaid")


def render_steps(decl: Declaration, view: RunView, fmt: StepsFormat = "markdown") -> str:
    """The steps of a run as Markdown (:func:`steps_markdown`) or Mermaid
    (:func:`steps_mermaid`)."""
    if fmt == "markdown":
        return steps_markdown(decl, view)
    if fmt == "mermaid":
        return steps_mermaid(decl, view)
    raise ValueError(f"unknown steps format {fmt!r}; expected one of {', '.join(STEPS_FORMATS)}")


# --- DOT ----------------------------------------------------------------------------------------

_STATE_STYLE = {
    cls: {"fillcolor": fill, "color": stroke, "penwidth": width}
    for cls, (fill, stroke, width) in _STATE_COLOURS.items()
}
_STATE_STYLE["unvisited"]["fontcolor"] = _FADED_TEXT


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
        mark, details = _state_notes(view, name)
        if mark is not None:
            cls = _state_class(view, name)
            color = _STATE_COLOURS[cls][1] if cls in ("incident", "warned") else "#b45309"
            lines.append(f'<font point-size="10" color="{color}"><b>{_h(mark)}</b></font>')
            lines += [f'<font point-size="9" color="{color}">{_h(d)}</font>' for d in details]
        waited = _wait_text(view, name)
        if waited is not None:
            lines.append(f'<font point-size="10" color="{_PATH}"><i>{_h(waited)}</i></font>')
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
        parts[:0] = [f"N{TIMES}: times a transition fired", "thick blue: the path taken"]
        if run.incident is not None:
            parts.insert(2, f"red: where it {'failed' if run.outcome == 'error' else 'aborted'}")
        elif run.despite_tool_errors:
            parts.insert(2, "orange: tool errors")
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
    fatal = _fatal_group(decl, run)  # the arrow out of the incident state
    for group in _groups(decl, run):
        attrs = {
            "label": _edge_label(decl, group, run),
            "id": f"edge-{group.source}-{group.dest}{'-x' if group.exceptional else ''}",
        }
        if group.exceptional:
            attrs.update(style="dashed", color=_EXC, fontcolor=_EXC, fontsize="9")
        if run is not None:
            if group.count:
                width = _edge_width(group.count)
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
