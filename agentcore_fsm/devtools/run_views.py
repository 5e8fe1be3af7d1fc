"""Run views read from a recording (:func:`view_of_recording`), and the steps of a run in order
(:func:`run_steps`), written as a Markdown table or a Mermaid sequence diagram. See
:mod:`agentcore_fsm.devtools.diagrams`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentcore_fsm.core.declaration import Declaration, TransitionSpec, load_declaration
from agentcore_fsm.devtools.diagram_model import (
    EXCEPTIONAL_TRIGGERS,
    MACHINE_ALIASES,
    TIMES,
    NestedView,
    RunView,
    diagram_title,
    guard_text,
    is_auto,
    run_view,
    shown_emits,
    state_notes,
    wait_text,
    wrapped_lines,
)
from agentcore_fsm.devtools.mermaid import (
    mermaid_text,
)


def view_of_recording(
    recording: Any, machine: str | None = None, run: int | None = None
) -> tuple[Declaration, RunView]:
    """The declaration and view of a recorded run (a
    :class:`~agentcore_fsm.persist.recording.RecordedRun`
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
    of (or events and not one transition), ``ValueError``.

    A recording of several runs of the loop (an Agent's prompts, one recorder) is drawn one run
    at a time, never summed into one picture: ``run`` is the run's number (1 for the first;
    default: the last, as :meth:`~agentcore_fsm.persist.recording.RecordedRun.summary` reports),
    the view's label says which (``recorded run 2 of 3``), and its outcome, error and tool errors
    are that run's. A number out of range is a ``ValueError`` naming the range. Other machines
    (the tool calls, many per run) are drawn whole."""
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
    if not recording.machines[name] and getattr(recording, "events", None):
        raise ValueError(
            f"the recording holds events but no transitions of {name!r}, so the path of the "
            f"run cannot be drawn: record them too (on_transition=recorder.on_transition, or "
            f"store=recorder.store to record the run's inputs; docs/record.md)"
        )
    decl = load_declaration(name)
    transitions = list(recording.machines[name])
    after: list[list[Any]] | None = None
    if getattr(recording, "events", None):
        after = recording.events_by_transition(name)
    times = None
    if callable(getattr(recording, "transition_times", None)):
        times = recording.transition_times(name)
    label = "recorded run"
    outcome = recording.end_reason
    error = getattr(recording, "error", None)
    failed = getattr(recording, "tool_errors", ())
    now = getattr(recording, "last_time", None)
    spans = run_spans(transitions, decl.initial) if name == recording.machine else []
    if run is not None and not 1 <= run <= max(len(spans), 1):
        raise ValueError(
            f"run {run}: the recording holds {_runs(max(len(spans), 1))} of {name!r} "
            f"(number 1 to {max(len(spans), 1)})"
        )
    if len(spans) > 1:
        number = len(spans) if run is None else run
        start, end = spans[number - 1]
        transitions = transitions[start:end]
        times = times[start:end] if times is not None else None
        label = f"recorded run {number} of {len(spans)}"
        if after is not None:
            after = after[start:end]
            mine = [e for listed in after for e in listed]
            outcome, error, failed = _outcome_of(mine)
        if times is not None:
            now = max((t for t in times if t is not None), default=now)
    events = None
    if after is not None:
        events = [[describe_event(e) for e in listed] for listed in after]
    view = run_view(
        decl,
        transitions,
        outcome=outcome,
        label=label,
        error=error,
        tool_errors=failed,
        events=events,
        times=times,
        now=now,
        events_emitted=after is not None and recording.emitted is not None,
    )
    return decl, view


def view_of_record(record: Any, label: str = "recorded run", nested: Sequence[Any] = ()) -> RunView:
    """The view of one run's record (a :class:`~agentcore_fsm.devtools.nested_records.Record`:
    its header and entries), derived from its inputs: each transition gets the events it emitted
    (and those of the inputs after it that took no transition) and its entry's timestamp as
    clock reading;
    the outcome is the record's end reason. ``nested`` as for :func:`run_view`. A damaged record
    raises :class:`~agentcore_fsm.persist.codec.RecordError`."""
    from agentcore_fsm.devtools.nested_records import without_parent
    from agentcore_fsm.persist.event_marks import split_at
    from agentcore_fsm.persist.journal import RunSnapshot, derive_run
    from agentcore_fsm.persist.recording import describe_event, run_error, tool_errors

    snapshot = RunSnapshot.of(without_parent(record.header), record.entries)
    derived = derive_run(snapshot, run_id=record.run_id)
    machine = derived.machine
    history = list(machine.history)
    emitted = split_at(derived.events, derived.emitted)  # the events each transition emitted
    events = [[describe_event(e) for e in listed] for listed in emitted]
    times: list[float | None] = [None for _ in history]
    t_done = 0
    for k, marks in enumerate(derived.marks):
        stamp = record.entries[k].get("timestamp") if k < len(record.entries) else None
        seconds = stamp / 1000 if isinstance(stamp, int) and not isinstance(stamp, bool) else None
        for t_end, _ in marks:
            for t in range(t_done, t_end):
                times[t] = seconds
            t_done = t_end
    messages = list(machine.new_messages)
    reason = record.end_reason
    return run_view(
        machine.declaration,
        history,
        outcome=reason,
        label=label,
        error=run_error(messages, reason),
        tool_errors=tool_errors(messages),
        events=events,
        times=times,
        nested=nested,
        events_emitted=True,
    )


def _nested_views(records: Any, runs: Sequence[Any]) -> list[NestedView]:
    from agentcore_fsm.devtools.nested_records import without_parent
    from agentcore_fsm.persist.journal import RunSnapshot, derive_run

    out: list[NestedView] = []
    for run in runs:
        parent = records[run.parent]
        snapshot = RunSnapshot.of(without_parent(parent.header), parent.entries[: run.step + 1])
        where = derive_run(snapshot, run_id=parent.run_id).machine.state
        inner = _nested_views(records, run.children)
        view = view_of_record(records[run.run_id], label=run.label, nested=inner)
        out.append(NestedView(run.run_id, run.label, run.step, where, view))
    return out


def view_with_nested(
    source: Any, run_id: str | None = None, run: int | None = None
) -> tuple[Declaration, RunView]:
    """The declaration and view of a run of a store or recording (see
    :func:`~agentcore_fsm.devtools.nested_records.read_records`), derived from its record, with
    the runs nested in it (:attr:`RunView.nested`: each drawn as a cluster by
    :func:`~agentcore_fsm.devtools.dot.to_dot` and
    :func:`~agentcore_fsm.devtools.mermaid.to_mermaid`). The run is ``run_id``, or the
    ``run``-th of the runs that are not nested (1 for the first; default: the last). Raises
    :class:`~agentcore_fsm.devtools.nested_records.NestedRecordError` for nested records that
    do not fit their parents, ``ValueError`` for a run the source does not hold or a damaged
    record."""
    from agentcore_fsm.devtools.nested_records import nested_runs, read_records, top_level

    records = read_records(source)
    tops = top_level(records)
    if run_id is None:
        if not tops:
            raise ValueError("no run's record (header and inputs) to draw")
        if run is not None and not 1 <= run <= len(tops):
            raise ValueError(f"run {run}: there are {_runs(len(tops))} (number 1 to {len(tops)})")
        number = len(tops) if run is None else run
        run_id = tops[number - 1]
    elif run_id not in records:
        raise ValueError(f"no run {run_id!r} to draw")
    nested = _nested_views(records, nested_runs(records, run_id))
    number = tops.index(run_id) + 1 if run_id in tops else 0
    label = f"run {run_id}" + (f" ({number} of {len(tops)})" if len(tops) > 1 else "")
    view = view_of_record(records[run_id], label=label, nested=nested)
    return load_declaration(str(records[run_id].header.get("declaration"))), view


def run_spans(transitions: Sequence[Any], initial: str) -> list[tuple[int, int]]:
    """Where each run of a machine's recorded transitions begins and ends, as ``(start,
    end)`` slices: a run begins with a transition out of the ``initial`` state (the first run
    also at index 0, whatever its source). Empty for no transitions."""
    starts = [i for i, t in enumerate(transitions) if i == 0 or t.source == initial]
    return [(a, b) for a, b in zip(starts, [*starts[1:], len(transitions)], strict=True)]


def _runs(n: int) -> str:
    return f"{n} run" + ("" if n == 1 else "s")


def _outcome_of(events: Sequence[Any]) -> tuple[str | None, str | None, list[str]]:
    """One run's outcome (its ``agent_end``'s reason), error text and tool errors, read from
    its events."""
    from agentcore_fsm.persist.recording import run_error, tool_errors

    reason: str | None = None
    messages: list[Any] = []
    for event in events:
        kind = getattr(event, "type", None)
        if kind == "agent_end":
            reason, messages = event.reason, list(event.messages)
            break
        if kind == "message_end":
            messages.append(event.message)
    results = [m for m in messages if getattr(m, "role", None) == "toolResult"]
    return reason, run_error(messages, reason), tool_errors(results)


# --- the steps of a run, in order ---------------------------------------------------------------


@dataclass(frozen=True)
class RunStep:
    """One transition of a run, as :func:`run_steps` lists it.

    ``number`` counts from 1; ``index`` is the declared transition's. ``guards`` are the guards
    of the transition taken, all of which held (``not g`` for an ``unless`` guard).
    ``passed_over`` are the transitions declared before it for the same trigger and source
    state: the engine tried those first, in order, and each had a guard that did not hold (the
    record does not say which one). ``emits`` are the emit actions the transition ran, in order
    (``agent_end`` with its reason). ``events``, for a recording, are the agent events this
    step's transition emitted, then those of the inputs after it that took no transition (a
    streamed answer): exact for a recording that holds the run's record (its inputs); for a
    recording of transition and event lines only, the events recorded after this step and before
    the next (the driver delivers an input's events once the machine has taken every transition
    it caused, so there an event can be listed a step or two late). ``auto``: a trigger the
    machine fired itself; ``exceptional``: an abort or failure; ``incident``: the step where the
    run failed or was aborted (drawn red in the run diagram). ``waited``: for a step out of a
    waiting state (:data:`WAIT_STATES`), the seconds the run spent there before it, when known
    (see :attr:`RunView.waited`); else None.
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
                emits=shown_emits(spec),
                events=view.events[n] if n < len(view.events) else (),
                auto=is_auto(decl, spec.trigger) or spec.auto,
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
        waited = wait_text(view, state)
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
    guard failed), the emit actions, and, for a recording, the step's events (``events``: those
    its transition emitted; ``events recorded after``: without the run's record, those recorded
    after the step).
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
        head.append("events" if view.events_emitted else "events recorded after")
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join(["--:"] + ["---"] * (len(head) - 1)) + "|")
    for step in steps:
        trigger = f"*{step.trigger}*" if step.auto else f"**{step.trigger}**"
        if step.incident:
            trigger += f" ({view.outcome} here)"
        passed = "; ".join(f"{guard_text(t) or '[]'} → {t.dest}" for t in step.passed_over)
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
            " Events: the agent events the step's transition emitted, then those of the "
            "inputs after it that took no transition (a streamed answer)."
            if events and view.events_emitted
            else " Events: the agent events recorded after the step; an input's events are "
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
    out += [f"    participant {ids[name]} as {mermaid_text(name)}" for name in order]
    for step in steps:
        label = mermaid_text(" ".join(x for x in (step.trigger, _bracket(step.guards)) if x))
        if step.emits:
            label += "<br/>" + mermaid_text("/ " + ", ".join(step.emits))
        if step.waited is not None:
            label += "<br/>" + mermaid_text(_waited_cell(step))
        arrow = "--" if step.exceptional else "-"
        arrow += "x" if step.incident else ">>"
        out.append(f"    {ids[step.source]}{arrow}{ids[step.dest]}: {label}")
        if step.incident:
            note = f"{view.outcome} here" + (f": {view.error}" if view.error else "")
            text = "<br/>".join(mermaid_text(line) for line in wrapped_lines(note, 6))
            out.append(f"    Note over {ids[step.source]}: {text}")
    if view.despite_tool_errors:
        _, details = state_notes(view, view.state)
        text = "<br/>".join(mermaid_text(line) for line in details)
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
