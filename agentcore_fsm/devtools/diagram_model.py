"""The model of a drawing: what a diagram of a declared machine, or of a run on it, shows.

A declaration's transitions grouped into arrows (one per pair of states, the abort and failure
transitions apart) and their labels; a **run view** (:class:`RunView`, made by :func:`run_view`
or :func:`view_of_machine`) that overlays what happened: visited states, taken transitions and
how often, the outcome, the error and tool errors, the time waited for a person; the colours.
The renderers (:mod:`~agentcore_fsm.devtools.mermaid`, :mod:`~agentcore_fsm.devtools.dot`) draw
this model; :mod:`agentcore_fsm.devtools.diagrams` documents the pictures.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agentcore_fsm.core.declaration import Declaration, TransitionSpec

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

TIMES = "\N{MULTIPLICATION SIGN}"  # a taken transition reads "2<TIMES> model_finished"
_EMITS_WIDTH = 34  # wrap emit lists after about this many characters

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
class _Redrawn:
    """A recorded transition put on the transition of this declaration that goes its way."""

    index: int
    trigger: str
    source: str
    dest: str


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
    nested: tuple[NestedView, ...] = ()
    """The runs nested in this one (an agent used as a tool: docs/multi-agent.md), each drawn
    as a cluster of the states and transitions it took (:class:`NestedView`)."""
    events_emitted: bool = False
    """``events`` are, for each step, the events its transition emitted (and those of the
    inputs after it that took no transition), known from the run's record; False: the events
    recorded after each step, which can come a step or two late (see :func:`run_steps`)."""

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


@dataclass(frozen=True)
class NestedView:
    """A run nested in another, as its diagram draws it: a cluster (a framed subgraph) holding
    the states the nested run visited and the transitions it took, with counts, labelled with
    ``label`` (the agents and calls from the outermost run: ``researcher (c1) > checker
    (c7)``), its ``run_id``, the parent's ``step`` it started at and how it ended. A dotted
    arrow goes from the parent's state ``where`` (where the parent stood while the call ran) to
    the cluster. Its own nested runs are clusters inside it (``view.nested``)."""

    run_id: str
    label: str
    step: int
    where: str
    view: RunView


def nested_title(nested: NestedView) -> str:
    """The second line of a nested run's cluster: ``run-1/1.c1 · from step 1 · 6
    transitions, ended: completed`` (the step counted from 0, as the record numbers it)."""
    view = nested.view
    return (
        f"{nested.run_id} \N{MIDDLE DOT} from step {nested.step} \N{MIDDLE DOT} "
        f"{_plural(len(view.path), 'transition')}, {_outcome_text(view)}"
    )


def nested_clusters(view: RunView) -> list[tuple[int, NestedView, int]]:
    """Every nested run below ``view``, depth first, numbered from 1: ``(number, nested,
    number of the cluster it is drawn in, 0 for the main drawing)``."""
    out: list[tuple[int, NestedView, int]] = []

    def walk(run: RunView, inside: int) -> None:
        for nested in run.nested:
            number = len(out) + 1
            out.append((number, nested, inside))
            walk(nested.view, number)

    walk(view, 0)
    return out


def taken_groups(decl: Declaration, view: RunView) -> list[ArrowGroup]:
    """The arrows a run took (with their counts): what a nested run's cluster draws."""
    return [group for group in arrow_groups(decl, view) if group.count]


def taken_label(group: ArrowGroup) -> list[str]:
    """The lines of a taken arrow in a cluster: each fired entry's count and triggers."""
    return [
        f"{entry.count}{TIMES} {' | '.join(entry.triggers)}"
        for entry in group.entries
        if entry.count
    ]


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
    nested: Sequence[NestedView] = (),
    events_emitted: bool = False,
) -> RunView:
    """Check a run's transitions against ``decl`` and summarise them for drawing.

    Each record must name a declared transition (same index, trigger, dest, and a declared
    source), and the records must chain (each starts where the previous ended; after the final
    state a new run may begin at the initial state, so the records of several runs draw as one
    picture with the counts summed; :func:`~agentcore_fsm.devtools.run_views.view_of_recording`
    hands it one run of a recording at a time). A mismatch raises ``ValueError``: the
    recording is from a different version of the declaration, and a diagram of it would
    mislead.

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
    ``nested``: the runs nested in this one (:class:`NestedView`), carried into the view.
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
            # recorded by a release whose declaration numbered its transitions otherwise: drawn
            # on the first declared transition that goes the same way, if there is one
            same = _same_way(decl, rec)
            if same is None:
                declared = f"{spec.trigger}: {'|'.join(spec.source)} -> {spec.dest}"
                raise ValueError(
                    f"{where} does not match {decl.name!r} transition #{rec.index} "
                    f"({declared}), and no transition of this declaration goes that way; was "
                    "it recorded with another version of the declaration?"
                )
            rec = records[n] = _Redrawn(same, rec.trigger, rec.source, rec.dest)
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
        nested=tuple(nested),
        events_emitted=events_emitted,
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


def wait_text(view: RunView, state: str) -> str | None:
    """``waited 2.3 s`` (``waited 4.1 s (2 waits)``, ``... so far`` while it still waits) for a
    waiting state whose time is known, else None."""
    known = view.time_waited(state)
    if known is None:
        return None
    from agentcore_fsm.persist.recording import duration_text

    total, count, still = known
    text = f"waited {duration_text(total)}"
    if count > 1:
        text += f" ({count} waits)"
    return text + (" so far" if still else "")


def view_of_machine(machine: Any) -> RunView:
    """The view of a live machine (a ``LoopMachine``: its ``declaration``, ``history``,
    ``state`` and, once it stopped, ``end_reason``; the error text and tool errors come from
    its ``new_messages``, when it has them)."""
    from agentcore_fsm.persist.recording import run_error, tool_errors

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


# --- labels -------------------------------------------------------------------------------------


@dataclass
class ArrowEntry:
    """One line group of an edge label: triggers sharing guards and emits (``abort | fail``)."""

    specs: list[TransitionSpec]
    conditions: str
    emits: tuple[str, ...]
    count: int | None = None  # in a run view: how many times it fired (None: never)

    @property
    def triggers(self) -> list[str]:
        return list(dict.fromkeys(s.trigger for s in self.specs))


@dataclass
class ArrowGroup:
    """Every transition from ``source`` to ``dest`` of one kind (normal or exceptional), drawn as
    one arrow with a stacked label: fewer arrows is what keeps a machine with abort and failure
    transitions out of every state legible."""

    source: str
    dest: str
    exceptional: bool
    entries: list[ArrowEntry] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(e.count or 0 for e in self.entries)


def guard_text(spec: TransitionSpec) -> str:
    conds = [*spec.guards, *(f"not {g}" for g in spec.unless)]
    return f"[{', '.join(conds)}]" if conds else ""


def arrow_groups(decl: Declaration, run: RunView | None) -> list[ArrowGroup]:
    """The arrows to draw, in declaration order. Within an arrow, transitions with the same
    guards and emits share a line (``abort | fail [turn_open]``), except that in a run view a
    transition that fired keeps a line of its own, with its count."""
    groups: dict[tuple[str, str, bool], ArrowGroup] = {}
    for spec in decl.transitions:
        exceptional = spec.trigger in EXCEPTIONAL_TRIGGERS
        for source in spec.source:
            key = (source, spec.dest, exceptional)
            group = groups.get(key)
            if group is None:
                group = groups[key] = ArrowGroup(source, spec.dest, exceptional)
            count = run.counts.get((spec.index, source)) if run is not None else None
            conds = guard_text(spec)
            emits = shown_emits(spec)
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
                group.entries.append(ArrowEntry([spec], conds, emits, count))
    return list(groups.values())


def shown_emits(spec: TransitionSpec) -> tuple[str, ...]:
    """The emit actions as drawn: ``agent_end`` shows the reason the transition declares."""
    if spec.reason is None:
        return spec.emits
    return tuple(f"agent_end({spec.reason})" if e == "agent_end" else e for e in spec.emits)


def emit_lines(emits: Sequence[str]) -> list[str]:
    if not emits:
        return []
    return textwrap.wrap(
        "/ " + ", ".join(emits), _EMITS_WIDTH, break_long_words=False, break_on_hyphens=False
    )


def _initial_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "None" if value is None else repr(value)


def variable_lines(decl: Declaration) -> list[str]:
    """The declared variables as drawn in a static diagram's note: ``name: type = initial``,
    and what the abort and failure arrows (which show no variables) set."""
    lines = [f"{v.name}: {v.type} = {_initial_text(v.initial)}" for v in decl.variables.values()]
    exceptional = {
        name for t in decl.transitions if t.trigger in EXCEPTIONAL_TRIGGERS for name in decl.sets(t)
    }
    if exceptional:
        listed = ", ".join(v for v in decl.variables if v in exceptional)
        lines.append(f"(abort and fail set {listed})")
    lines += [suspension_text(state, guard) for state, guard in decl.suspending_states.items()]
    return lines


def suspension_text(state: str, guard: str) -> str:
    """How a diagram says that ``state`` suspends a run when ``guard`` holds."""
    return f"{state} suspends the run [{guard}]"


def variable_text(decl: Declaration, entry: ArrowEntry) -> str:
    """Which declared variables a label line's transitions read (their guards) and may set (their
    inputs' handlers, emit actions, the destination's effect): ``reads a · sets b, c``; empty
    when none."""
    reads: dict[str, None] = {}
    sets: dict[str, None] = {}
    for spec in entry.specs:
        reads.update(dict.fromkeys(decl.reads(spec)))
        sets.update(dict.fromkeys(decl.sets(spec)))
    parts = []
    if reads:
        parts.append("reads " + ", ".join(reads))
    if sets:
        parts.append("sets " + ", ".join(sets))
    return " \N{MIDDLE DOT} ".join(parts)


def variable_label_lines(decl: Declaration, group: ArrowGroup, entry: ArrowEntry) -> list[str]:
    """:func:`variable_text` wrapped like the emit lines; none on the dashed abort and failure
    arrows (every one of them sets ``aborted`` and ``outcome``: the note says so once)."""
    if group.exceptional:
        return []
    text = variable_text(decl, entry)
    if not text:
        return []
    return textwrap.wrap(text, _EMITS_WIDTH, break_long_words=False, break_on_hyphens=False)


def is_auto(decl: Declaration, trigger: str) -> bool:
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


def wrapped_lines(text: str, lines: int = _NOTE_LINES) -> list[str]:
    """``text`` on lines of about :data:`_NOTE_WIDTH` characters, at most ``lines`` of them
    (the last ends in an ellipsis when it was cut)."""
    out = textwrap.wrap(" ".join(text.split()), _NOTE_WIDTH, break_long_words=True) or [""]
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: _NOTE_WIDTH - 1].rstrip() + "\N{HORIZONTAL ELLIPSIS}"
    return out


def state_notes(view: RunView, state: str) -> tuple[str | None, list[str]]:
    """What a run view writes inside a state, under its name: a mark (``error here``, ``final
    state``, ...) and detail lines (the error text; the tool errors a run ended well despite).
    Drawn inside the state, never beside it, so it cannot end up next to another one."""
    if state == view.incident:
        return f"{view.outcome} here", wrapped_lines(view.error) if view.error else []
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
            details += wrapped_lines(error, 2)
        if n > _TOOL_ERRORS_SHOWN:
            details.append(f"(and {n - _TOOL_ERRORS_SHOWN} more)")
    elif view.error and view.incident is None:  # ended badly without a transition to blame
        details = wrapped_lines(view.error)
    return mark, details


def state_class(run: RunView, name: str) -> str:
    if name == run.incident:
        return "incident"
    if name == run.state:
        return "warned" if run.despite_tool_errors else "current"
    return "visited" if name in run.visited else "unvisited"


def fatal_group(decl: Declaration, run: RunView | None) -> tuple[str, str, bool] | None:
    """The arrow of the run's incident step (drawn red), as ``(source, dest, exceptional)``."""
    if run is None or run.incident_step is None:
        return None
    index, source, dest = run.incident_step
    return source, dest, decl.transitions[index].trigger in EXCEPTIONAL_TRIGGERS


def edge_width(count: int) -> float:
    """How thick a taken arrow is drawn (points in DOT, pixels in Mermaid): more with more
    firings, from 3 up to 5."""
    return min(2.5 + count * 0.5, 5.0)


# --- colours (the same in the Mermaid and the DOT run views) -------------------------------------

INK = "#2d3748"
MUTED = "#718096"
PATH_COLOUR = "#2b6cb0"
FADED = "#cbd5e0"
FADED_TEXT = "#a0aec0"
EXC = "#9b5a5a"
INCIDENT = "#c53030"
_WARNED = "#c2410c"
STATE_COLOURS = {
    "incident": ("#fed7d7", INCIDENT, "3"),
    "current": ("#fde68a", "#b45309", "3"),
    "warned": ("#ffedd5", _WARNED, "3"),
    "visited": ("#dbeafe", PATH_COLOUR, "1.5"),
    "unvisited": ("#ffffff", FADED, "1"),
}
"""A run view's state classes: fill, border and border width. ``warned``: the final or current
state of a run that ended well (or goes on) despite tool errors."""


def _same_way(decl: Declaration, rec: _Record) -> int | None:
    """The index of the first transition of ``decl`` taken by ``rec.trigger`` from
    ``rec.source`` to ``rec.dest``; None when there is none."""
    for spec in decl.transitions:
        if spec.trigger == rec.trigger and spec.dest == rec.dest and rec.source in spec.source:
            return spec.index
    return None
