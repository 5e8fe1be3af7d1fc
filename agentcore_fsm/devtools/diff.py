"""Compare two runs step by step (docs/debugging.md#diff).

A run's steps are the inputs its record holds (docs/record.md), numbered from 0. Each record is
derived again (:func:`~agentcore_fsm.persist.journal.derive_run`: no model, tool or hook is
called), which gives for every step the state the machine was in after it and the events it
emitted. :func:`diff_runs` aligns the two runs on their step numbers and finds the **first
divergence**: the first step whose input differs (its kind or what it holds, timestamps left
out), or, the inputs being the same, whose state after it differs, or whose events differ
(their JSON form, timestamps left out: the first differing event is named). From there on the
rest of both runs is shown side by side, one line per step. A run with more steps than the
other diverges at the first step the other does not have.

The runs may come from recordings, stores or snapshots, and from the same or different
declarations, as long as this version can derive each (a record of a declaration this version
does not run cannot be aligned: :class:`DiffError`). The headers are compared too: the fields
that differ (the ``fork`` field aside) are listed in :attr:`RunDiff.header`, but they do not
make a divergence by themselves: two runs that took the same steps are the same run story.

Bad input raises :class:`DiffError` (a ``ValueError``) with one line naming what was wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from agentcore_fsm.core.describe import describe_event
from agentcore_fsm.devtools.diff_render import (
    DIFFERENT,
    SAME,
    first_difference,
    side_by_side,
    step_summary,
)
from agentcore_fsm.devtools.fork import ForkError, ForkResult, ForkSource, ParentRun, read_parent
from agentcore_fsm.devtools.nested_records import without_parent
from agentcore_fsm.devtools.replay_compare import plain_event
from agentcore_fsm.persist.codec import RecordError
from agentcore_fsm.persist.journal import RunSnapshot, derive_run
from agentcore_fsm.persist.store import RunStore

__all__ = [
    "DiffError",
    "DiffSource",
    "RunDiff",
    "RunSteps",
    "StepDivergence",
    "StepView",
    "diff_runs",
    "run_steps_of",
]

DiffSource = ForkSource | ForkResult | tuple[RunStore, str]
"""A run to compare: what :func:`~agentcore_fsm.devtools.fork.fork_run` forks from, a fork's
result, or a store and a run id."""


class DiffError(ValueError):
    """Two runs that cannot be compared: one line naming the run and what is wrong."""


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class StepView:
    """One step of a run: its ``number``, its ``entry`` (timestamps left out), the ``state``
    the machine was in after it, its ``events`` (JSON, timestamps left out) and their
    ``labels`` (``message_end(assistant)``)."""

    number: int
    entry: dict[str, Any]
    state: str
    events: list[Any] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    @property
    def input(self) -> str:
        return str(self.entry.get("input", "?"))

    def summary(self) -> str:
        """The step in one line: its input, in short, and the state after it."""
        return f"{step_summary(self.entry, 38)} → {self.state}"

    def data(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "summary": step_summary(self.entry),
            "state": self.state,
            "events": list(self.labels),
        }


@dataclass(frozen=True)
class RunSteps:
    """A run read for a diff: its id, header and steps."""

    run_id: str
    header: dict[str, Any]
    steps: list[StepView]


def _source(source: DiffSource, run: str | None) -> ParentRun:
    if isinstance(source, ForkResult):
        return read_parent(source.snapshot(), source.run_id)
    if isinstance(source, tuple):
        store, run_id = source
        return read_parent(store, run_id)
    return read_parent(source, run)


def run_steps_of(source: DiffSource, run: str | None = None) -> RunSteps:
    """The steps of run ``run`` of ``source`` (default: a recording's last run), derived from
    its record. Raises :class:`DiffError`."""
    try:
        parent = _source(source, run)
    except ForkError as exc:
        raise DiffError(str(exc)) from None
    header = parent.header
    snapshot = RunSnapshot(
        format=header.get("format", 0) if isinstance(header, dict) else 0,
        declaration=header.get("declaration", "") if isinstance(header, dict) else "",
        declaration_hash=header.get("declaration_hash", "") if isinstance(header, dict) else "",
        header=without_parent(header) if isinstance(header, dict) else header,
        entries=parent.entries,
    )
    try:
        derived = derive_run(snapshot, run_id=parent.run_id)
    except RecordError as exc:
        text = str(exc).splitlines()[0]
        raise DiffError(f"run {parent.run_id!r} cannot be aligned: {text}") from None
    events = derived.events
    history = derived.transitions
    initial = derived.machine.declaration.initial
    steps: list[StepView] = []
    seen_events = 0
    for number, (entry, marks) in enumerate(zip(parent.entries, derived.marks, strict=False)):
        transitions, upto = marks[-1] if marks else (0, seen_events)
        state = history[transitions - 1].dest if transitions else initial
        mine = events[seen_events:upto]
        seen_events = upto
        steps.append(
            StepView(
                number,
                _plain(entry),
                state,
                [plain_event(e) for e in mine],
                [describe_event(e) for e in mine],
            )
        )
    return RunSteps(parent.run_id, header, steps)


@dataclass(frozen=True)
class StepDivergence:
    """Where two runs first differ: the ``step``, ``what`` differs there ("input", "state",
    "event", or "length" when one run has no such step), the first differing field or value
    (``detail``), and for an event, its number within the step (``event``) and labels."""

    step: int
    what: Literal["input", "state", "event", "length"]
    detail: str
    event: int | None = None
    a: str | None = None
    b: str | None = None

    def data(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "what": self.what,
            "detail": self.detail,
            "event": self.event,
            "a": self.a,
            "b": self.b,
        }


def _compare(a: StepView, b: StepView) -> StepDivergence | None:
    names = ("A", "B")
    if a.entry != b.entry:
        detail = first_difference(a.entry, b.entry, names=names) or "the inputs differ"
        return StepDivergence(
            a.number, "input", detail, a=step_summary(a.entry), b=step_summary(b.entry)
        )
    if a.state != b.state:
        return StepDivergence(
            a.number, "state", f"state after it: A {a.state}, B {b.state}", a=a.state, b=b.state
        )
    for i in range(max(len(a.events), len(b.events))):
        left = a.events[i] if i < len(a.events) else None
        right = b.events[i] if i < len(b.events) else None
        if left != right:
            la = a.labels[i] if i < len(a.labels) else None
            lb = b.labels[i] if i < len(b.labels) else None
            if left is None or right is None:
                detail = f"A {la or 'nothing'}, B {lb or 'nothing'}"
            else:
                detail = first_difference(left, right, names=names) or "the events differ"
            return StepDivergence(a.number, "event", detail, event=i, a=la, b=lb)
    return None


def _note(found: StepDivergence) -> str:
    """What differs in a step whose two lines look alike."""
    if found.what == "event" and found.event is not None:
        return f"event #{found.event} ({found.a or 'nothing'}): {found.detail}"
    return found.detail


@dataclass(frozen=True)
class RunDiff:
    """Two runs compared (:func:`diff_runs`): ``a`` and ``b``, the ``first`` divergence (None:
    the same steps), the header fields that differ, and ``rows``: from the first divergence on,
    each step number with each run's step there (None where the run has none)."""

    a: RunSteps
    b: RunSteps
    first: StepDivergence | None
    header: list[str]
    rows: list[tuple[int, StepView | None, StepView | None]]

    @property
    def same(self) -> bool:
        """Both runs took the same steps (their headers may still differ: :attr:`header`)."""
        return self.first is None

    def text(self) -> str:
        """The report: the verdict, the first divergence, then the rest side by side."""
        a, b = self.a, self.b
        lines = [
            f"A: run {a.run_id!r} ({len(a.steps)} steps), "
            f"B: run {b.run_id!r} ({len(b.steps)} steps)"
        ]
        lines += [f"header: {field_}" for field_ in self.header]
        first = self.first
        if first is None:
            lines.append(f"the same steps ({len(a.steps)}): no divergence")
            return "\n".join(lines)
        where = f"step {first.step}"
        lines.append(f"first divergence at {where}, in its {first.what}:")
        if first.what == "event" and first.event is not None:
            lines.append(
                f"  event #{first.event} of the step: "
                f"A {first.a or 'nothing'}, B {first.b or 'nothing'}"
            )
        lines.append(f"  {first.detail}")
        lines.append(f"from {where} on ({SAME} same, {DIFFERENT} different):")
        rows = [
            (str(n), sa.summary() if sa else None, sb.summary() if sb else None)
            for n, sa, sb in self.rows
        ]
        found = [None if x is None or y is None else _compare(x, y) for _, x, y in self.rows]
        same = [
            x is not None and y is not None and f is None
            for (_, x, y), f in zip(self.rows, found, strict=True)
        ]
        notes = [
            _note(f) if f is not None and left == right else None
            for (_, left, right), f in zip(rows, found, strict=True)
        ]
        lines += side_by_side(rows, marks=same, notes=notes)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def data(self) -> dict[str, Any]:
        """The diff as JSON data (``agentcore-fsm diff --json``)."""
        return {
            "a": {"run": self.a.run_id, "steps": len(self.a.steps)},
            "b": {"run": self.b.run_id, "steps": len(self.b.steps)},
            "same": self.same,
            "header": list(self.header),
            "first": None if self.first is None else self.first.data(),
            "steps": [
                {
                    "step": n,
                    "same": sa is not None and sb is not None and _compare(sa, sb) is None,
                    "a": None if sa is None else sa.data(),
                    "b": None if sb is None else sb.data(),
                }
                for n, sa, sb in self.rows
            ],
        }


def _header_fields(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key in [*a, *(k for k in b if k not in a)]:
        if key == "fork":
            continue
        found = first_difference(_plain(a.get(key)), _plain(b.get(key)), key, ("A", "B"))
        if found is not None:
            out.append(found)
    return out


def diff_runs(
    a: DiffSource,
    b: DiffSource,
    *,
    run_a: str | None = None,
    run_b: str | None = None,
) -> RunDiff:
    """Compare run ``run_a`` of ``a`` with run ``run_b`` of ``b`` step by step (see the
    module's documentation). Raises :class:`DiffError` for a run that cannot be read or
    derived."""
    left = run_steps_of(a, run_a)
    right = run_steps_of(b, run_b)
    first: StepDivergence | None = None
    for sa, sb in zip(left.steps, right.steps, strict=False):
        first = _compare(sa, sb)
        if first is not None:
            break
    if first is None and len(left.steps) != len(right.steps):
        n = min(len(left.steps), len(right.steps))
        longer = left if len(left.steps) > n else right
        other = "B" if longer is left else "A"
        extra = longer.steps[n]
        first = StepDivergence(
            n,
            "length",
            f"{other} has no step {n} ({other} ends after {n} steps); the other: {extra.summary()}",
            a=left.steps[n].summary() if longer is left else None,
            b=right.steps[n].summary() if longer is right else None,
        )
    rows: list[tuple[int, StepView | None, StepView | None]] = []
    if first is not None:
        for n in range(first.step, max(len(left.steps), len(right.steps))):
            rows.append(
                (
                    n,
                    left.steps[n] if n < len(left.steps) else None,
                    right.steps[n] if n < len(right.steps) else None,
                )
            )
    return RunDiff(left, right, first, _header_fields(left.header, right.header), rows)
