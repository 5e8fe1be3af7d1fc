"""Which transition of a run emitted which of its events, for a recording that holds the run's
record (:meth:`~agentcore_fsm.persist.recording.RecordedRun.events_by_transition`).

A machine derived from a record notes, as it takes each transition, where among the run's
events the events of that transition begin (:attr:`~agentcore_fsm.persist.journal.DerivedRun.
emitted`). A recording's own event lines hold more than the derived events (a streamed
answer's deltas, tools' progress updates), so :func:`emitted_among` carries those places over
to the recorded events, lining the two up by type; :func:`split_at` cuts the events there.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

__all__ = ["emitted_among", "split_at"]


def emitted_among(
    recorded: Sequence[Any],
    derived: Sequence[Any],
    emitted: Sequence[int],
    streamed: Collection[str],
    look_ahead: int,
) -> list[int] | None:
    """Where each transition's events begin among the ``recorded`` events, from where they
    begin (``emitted``) among the ``derived`` ones: the same places when the two are the same
    events; else each derived event is lined up, by type, with the next recorded event of its
    type within ``look_ahead`` of the last one matched (leaving out the ``streamed`` kinds a
    record does not give back), and a transition takes the place of its first event that
    matched (of the next matched one). None when nothing lines up."""
    if not emitted:
        return None
    if [e.type for e in derived] == [e.type for e in recorded]:
        return list(emitted)
    matched = [i for i, event in enumerate(recorded) if event.type not in streamed]
    spot: list[int | None] = []  # the recorded index of each derived event
    at = 0
    for event in derived:
        ahead = matched[at : at + look_ahead + 1]
        found = [j for j, i in enumerate(ahead) if recorded[i].type == event.type]
        if not found:
            spot.append(None)
            continue
        at += found[0]
        spot.append(matched[at])
        at += 1
    if all(x is None for x in spot):
        return None
    out: list[int] = []
    for begin in emitted:
        later = [x for x in spot[begin:] if x is not None]
        out.append(later[0] if later else len(recorded))
    for i in range(len(out) - 2, -1, -1):  # never past the next transition's place
        out[i] = min(out[i], out[i + 1])
    return out


def split_at(events: Sequence[Any], emitted: Sequence[int]) -> list[list[Any]]:
    """``events`` cut at ``emitted``: for each transition, the events from its place up to the
    next one's (the events before the first transition's place go with it)."""
    out: list[list[Any]] = [[] for _ in emitted]
    if not out:
        return out
    bounds = [*emitted[1:], len(events)]
    out[0].extend(events[: emitted[0]])
    for i, (begin, end) in enumerate(zip(emitted, bounds, strict=True)):
        out[i].extend(events[begin : max(begin, end)])
    return out
