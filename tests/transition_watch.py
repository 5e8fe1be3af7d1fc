"""Watching a machine's transitions as they are taken, in the middle of a step (for tests).

The machines call nobody (``feed`` returns a step that carries the loop's transitions, see
``agentcore_fsm.core.protocol``). Tests that must look at a machine *between* two transitions of
one step (a guard evaluated mid-step, a coverage record of a tool call's machine) watch its
``history`` instead: :func:`watch_transitions` replaces it with a list that calls back on each
record appended, which the engine does right after changing state, before the transition's emit
actions run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from agentcore_fsm.core.declared import TransitionRecord

Callback = Callable[[TransitionRecord], None]


class WatchedHistory(list[TransitionRecord]):
    """A machine's ``history`` that hands each record appended to ``callbacks``, in order."""

    def __init__(self, records: Iterable[TransitionRecord], callbacks: list[Callback]) -> None:
        super().__init__(records)
        self.callbacks = callbacks

    def append(self, record: TransitionRecord) -> None:
        super().append(record)
        for callback in self.callbacks:
            callback(record)


def watch_transitions(machine: Any, callback: Callback | None) -> None:
    """Call ``callback`` with each transition ``machine`` takes from now on (after the ones
    installed before; None installs nothing)."""
    if callback is None:
        return
    history = machine.history
    if isinstance(history, WatchedHistory):
        history.callbacks.append(callback)
    else:
        machine.history = WatchedHistory(history, [callback])
