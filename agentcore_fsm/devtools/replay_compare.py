"""The comparison of a replay with its recording (see :mod:`agentcore_fsm.devtools.replay`):
events as the JSON a recording holds, the first difference between two values, and the
:class:`Divergence` and :class:`ReplayResult` a replay reports."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.core.messages import clip

__all__ = [
    "Divergence",
    "ReplayResult",
    "difference",
    "plain_event",
    "transition_key",
    "transition_text",
]


def plain_event(event: Any) -> Any:
    """An event as JSON data (what a recording holds), ``timestamp`` fields left out."""
    return _strip(to_jsonable_python(event.model_dump(mode="python", by_alias=True), fallback=repr))


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # what a recording writes
    return value


def _show(value: Any) -> str:
    text = clip(json.dumps(value, ensure_ascii=False, default=repr), 60)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def difference(want: Any, got: Any, path: str = "") -> str | None:
    """Where two JSON values first differ, as ``path: expected X, got Y``; None when equal."""
    where = path or "the whole value"
    if isinstance(want, dict) and isinstance(got, dict):
        for key in [*want, *(k for k in got if k not in want)]:
            sub = f"{path}.{key}" if path else str(key)
            if key not in got:
                return f"{sub}: expected {_show(want[key])}, got nothing"
            if key not in want:
                return f"{sub}: expected nothing, got {_show(got[key])}"
            found = difference(want[key], got[key], sub)
            if found is not None:
                return found
        return None
    if isinstance(want, list) and isinstance(got, list):
        for i, (a, b) in enumerate(zip(want, got, strict=False)):
            found = difference(a, b, f"{path}[{i}]")
            if found is not None:
                return found
        if len(want) != len(got):
            return f"{where}: expected {len(want)} items, got {len(got)}"
        return None
    if want == got:
        return None
    return f"{where}: expected {_show(want)}, got {_show(got)}"


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
