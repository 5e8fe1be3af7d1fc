"""The comparison of a replay with its recording (see :mod:`agentcore_fsm.devtools.replay`):
events as the JSON a recording holds, the first difference between two values, and the
:class:`Divergence` and :class:`ReplayResult` a replay reports."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.devtools.diff_render import first_difference, side_by_side
from agentcore_fsm.persist.recording import event_data

__all__ = [
    "Divergence",
    "ReplayResult",
    "difference",
    "left_out",
    "plain_event",
    "transition_key",
    "transition_text",
]


def plain_event(event: Any) -> Any:
    """An event as JSON data (what a recording holds, a nested run's event in its JSON form
    included: :func:`~agentcore_fsm.persist.recording.event_data`), ``timestamp`` fields left
    out."""
    return _strip(to_jsonable_python(event_data(event), fallback=repr))


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # what a recording writes
    return value


def difference(want: Any, got: Any, path: str = "") -> str | None:
    """Where two JSON values first differ, as ``path: expected X, got Y``; None when equal
    (:func:`~agentcore_fsm.devtools.diff_render.first_difference`, the display a run diff
    shares)."""
    return first_difference(want, got, path)


LOOK_AHEAD = 3
"""How many recorded events (or transitions) past a divergence a left-out one is looked for."""


def left_out(
    kind: str,
    index: int,
    recorded: Sequence[Any],
    got: Any,
    labels: Sequence[str],
    why: str | None,
) -> tuple[tuple[tuple[str, str | None, str | None], ...], str | None]:
    """A replay produced at ``index`` another kind of record than the recording holds there:
    when it is one of the next recorded ones, the replay left the ones before it out; return
    the side-by-side rows that show it (the left-out ones with nothing beside them) and the
    detail that says it. Otherwise no rows and ``why`` unchanged."""
    for ahead in range(1, LOOK_AHEAD + 1):
        at = index + ahead
        if at < len(recorded) and recorded[at] == got:
            rows: list[tuple[str, str | None, str | None]]
            rows = [(f"#{i}", labels[i], None) for i in range(index, at)]
            rows.append((f"#{at}", labels[at], labels[at]))
            what = f"{kind}s #{index} to #{at - 1}" if ahead > 1 else f"{kind} #{index}"
            return tuple(rows), (
                f"the replay left out the recorded {what} ({', '.join(labels[index:at])}): "
                f"it produced #{at} ({labels[at]}) in its place"
            )
    return (), why


def transition_text(record: TransitionRecord) -> str:
    return f"{record.source} --{record.trigger}--> {record.dest}"


def transition_key(record: TransitionRecord) -> tuple[int, str, str, str]:
    return (record.index, record.trigger, record.source, record.dest)


@dataclass(frozen=True)
class Divergence:
    """The first place where a replay and its recording differ.

    ``kind``: "event" or "transition"; ``index``: its position among the recording's events
    (or transitions), ``recorded``: how many of those the recording holds. ``expected``: the
    recorded one, described (``tool_execution_end(add)``, ``executing --tools_settled-->
    turn_end``), None when the recording holds no more; ``got``: what the replay produced
    there, None when it produced nothing (``detail`` says why). ``detail``: the first field that
    differs (``result.content[0].text: expected "3", got "4"``), or why nothing came.
    ``context``: the records just before it in the recording. ``str()`` is the report."""

    kind: Literal["event", "transition"]
    index: int
    expected: str | None
    got: str | None
    detail: str | None = None
    context: tuple[str, ...] = ()
    recorded: int = 0
    side: tuple[tuple[str, str | None, str | None], ...] = ()
    """When the replay produced another kind of event or transition than the recorded one (one
    left out, one added, two swapped): the recording's next ones and what the replay produced,
    side by side (``(where, recorded, replayed)``, None: nothing there), as a run diff shows
    two runs (:mod:`agentcore_fsm.devtools.diff`)."""

    def __str__(self) -> str:
        lines = [
            f"replay diverged at {self.kind} #{self.index} (the recording has {self.recorded} "
            f"{self.kind}s):",
            f"  expected: {self.expected or 'nothing (the recording has no more)'}",
            f"  got:      {self.got or 'nothing'}",
        ]
        if self.detail:
            lines.append(f"  {self.detail}")
        if self.context:
            lines.append("recorded just before it:")
            lines += [f"  {line}" for line in self.context]
        if self.side:
            lines.append(f"the recording and the replay from {self.kind} #{self.index} on:")
            lines += side_by_side(self.side, ("recorded", "replayed"), width=36)
        return "\n".join(lines)


@dataclass
class ReplayResult:
    """What a replay produced: its ``events`` and ``transitions`` (all of them, also those
    after a divergence), the first ``divergence`` from the recording (None: identical), how many
    events and transitions the recording holds, and the script's ``notes``. ``str()`` is the
    one-line verdict or the divergence's report."""

    events: list[Any]
    transitions: list[TransitionRecord]
    divergence: Divergence | None
    recorded_events: int
    recorded_transitions: int
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """The replay produced the recorded events and transitions, and nothing else."""
        return self.divergence is None

    def summary(self) -> str:
        if self.divergence is not None:
            return str(self.divergence)
        return (
            f"replayed {self.recorded_events} events and {self.recorded_transitions} "
            f"transitions: identical"
        )

    def __str__(self) -> str:
        return self.summary()

    def check(self) -> ReplayResult:
        """Raise ``AssertionError`` with the divergence's report unless the replay was
        identical; return the result when it was."""
        if self.divergence is not None:
            raise AssertionError(self.summary())
        return self
