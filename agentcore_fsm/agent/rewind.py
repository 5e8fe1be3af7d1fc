"""Rewind an :class:`~agentcore_fsm.Agent`'s session to an earlier turn
(docs/debugging.md#rewind-an-agent).

A fork of a run (:mod:`agentcore_fsm.devtools.fork`) goes back to a step of one run; the
Agent's session is the transcript its runs left, and going back in it is cutting that transcript
before a turn. A **turn** begins at a user message (a prompt, or a steering or follow-up
message the user sent): turn 0 is the first user message of the transcript, turn 1 the second,
and so on; a negative number counts from the end (-1: the last turn). ``agent.rewind(turn)``
keeps the messages before that user message and drops it and everything after it, and returns
what it dropped; the next prompt goes on from there, as a fork goes on from its step.

What it does not do: it never changes a run store. A session kept in a store keeps its runs
(they are never rewritten); the next run records the rewound transcript as its context, so the
session reads back rewound once that run has started. A session whose last run was interrupted
(``agent.interrupted_run``) cannot be rewound: resume it first (or let it finish). A rewind
while a run is active raises :class:`RewindBusyError` (a ``RuntimeError``).
"""

from __future__ import annotations

from typing import Any, Protocol

from agentcore_fsm.core.messages import AgentMessage

__all__ = ["RewindBusyError", "RewindError", "Rewindable", "rewind_session", "turn_starts"]


class RewindError(ValueError):
    """A rewind that cannot be made: a turn the transcript does not have, or an interrupted
    run. Nothing was changed."""


class RewindBusyError(RuntimeError):
    """A rewind asked for while the agent runs (a ``RuntimeError``, as ``AgentBusyError``)."""


class Rewindable(Protocol):
    """What a rewind reads and sets of an agent."""

    @property
    def is_busy(self) -> bool: ...

    @property
    def interrupted_run(self) -> str | None: ...

    @property
    def state(self) -> Any: ...


def turn_starts(messages: list[AgentMessage]) -> list[int]:
    """The positions in ``messages`` where a turn begins: its user messages."""
    return [i for i, m in enumerate(messages) if getattr(m, "role", None) == "user"]


def rewind_session(agent: Rewindable, turn: int) -> list[AgentMessage]:
    """Cut ``agent``'s transcript before turn ``turn`` (see the module's documentation) and
    return the messages dropped (``Agent.rewind(turn)``). Raises :class:`RewindBusyError` while
    a run is active and :class:`RewindError` for a turn the transcript does not have or an
    interrupted run."""
    if agent.is_busy:
        raise RewindBusyError("Agent is already processing. Wait for completion before rewinding.")
    if isinstance(turn, bool) or not isinstance(turn, int):
        raise RewindError(f"a turn is a number, not {turn!r}")
    interrupted = agent.interrupted_run
    if interrupted is not None:
        raise RewindError(
            f"the session's last run {interrupted!r} was interrupted: resume it before "
            "rewinding the session"
        )
    messages = list(agent.state.messages)
    starts = turn_starts(messages)
    if not -len(starts) <= turn < len(starts):
        have = f"turns 0 to {len(starts) - 1}" if starts else "no turn"
        raise RewindError(f"the transcript has {have}; there is no turn {turn}")
    cut = starts[turn]
    agent.state.messages = messages[:cut]
    return messages[cut:]
