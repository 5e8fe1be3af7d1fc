"""Context compaction: what a run does when its transcript outgrows the model's context window
(``AgentLoopConfig.compaction``; docs/policies-models.md).

* When a request fails with ``error_kind="context_overflow"``, the run compacts its context and
  makes the request again, once: a second overflow of that request ends the run (or falls back
  to the next model, when a :class:`~agentcore_fsm.core.fallback.ModelFallback` moves on for
  "context_overflow").
* With ``max_context_tokens``, the run compacts before a request whose context is estimated
  larger than that (:func:`estimate_tokens`), at most once per request.

Compacting is the user's hook ``compact(messages, info)`` (sync or async; returns the new list
of messages) or, without one, :func:`drop_oldest_turns`. Declared in
``states/agent_loop.toml``: the state ``compacting`` waits for the hook's answer, which comes
back as the input ``context_compacted`` (a ``HookReturned`` named "compact") and is journaled, so a
replayed or resumed run has the same context. The compaction is an event,
:class:`~agentcore_fsm.core.events.ContextCompactedEvent`, with the messages it dropped.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from agentcore_fsm.core.messages import AgentMessage, Model

__all__ = [
    "CompactHook",
    "Compaction",
    "CompactionInfo",
    "CompactionReason",
    "CompactionRequest",
    "drop_oldest_turns",
    "dropped_messages",
    "estimate_tokens",
    "run_compaction",
]

CompactionReason: TypeAlias = Literal["overflow", "budget"]
"""Why a run compacts: the provider said the context is too long ("overflow"), or the estimate
is over ``max_context_tokens`` ("budget")."""


@dataclass(frozen=True, slots=True)
class CompactionInfo:
    """What a compaction hook is told: ``reason``, the ``model`` of the request, the
    ``estimated_tokens`` of the messages, the ``max_context_tokens`` setting, and for an
    overflow the provider's ``error`` text."""

    reason: CompactionReason
    model: Model
    estimated_tokens: int
    max_context_tokens: int | None
    error: str | None = None


CompactHook: TypeAlias = Callable[
    [list[AgentMessage], CompactionInfo], "list[AgentMessage] | Awaitable[list[AgentMessage]]"
]
"""``compact(messages, info) -> messages`` (sync or async): the context's messages as the next
request should have them. The system prompt is not among them (it is never dropped)."""


@dataclass(frozen=True, slots=True, init=False)
class Compaction:
    """How a run keeps its context inside the model's window.

    ``Compaction()`` compacts with :func:`drop_oldest_turns` when the provider says the
    context is too long; ``compact=hook`` uses your hook instead; ``max_context_tokens=N``
    also compacts before any request whose estimated size is over ``N`` tokens. Refused at
    construction, naming the setting: a ``compact`` that is not callable, a
    ``max_context_tokens`` that is not an int >= 1."""

    compact: CompactHook | None
    max_context_tokens: int | None

    def __init__(
        self, compact: CompactHook | None = None, *, max_context_tokens: int | None = None
    ) -> None:
        if compact is not None and not callable(compact):
            raise TypeError(
                f"Compaction: compact must be a callable (messages, info) -> messages, not "
                f"{type(compact).__name__}"
            )
        if max_context_tokens is not None:
            if isinstance(max_context_tokens, bool) or not isinstance(max_context_tokens, int):
                raise TypeError(
                    f"Compaction: max_context_tokens must be an int or None, not "
                    f"{type(max_context_tokens).__name__} ({max_context_tokens!r:.40})"
                )
            if max_context_tokens < 1:
                raise ValueError(
                    f"Compaction: max_context_tokens must be at least 1, not {max_context_tokens}"
                )
        object.__setattr__(self, "compact", compact)
        object.__setattr__(self, "max_context_tokens", max_context_tokens)


@dataclass(frozen=True, slots=True)
class CompactionRequest:
    """The ``ctx`` of the machine's ``CallHook("compact", ctx)`` effect: the settings, the
    messages to compact (a copy) and what the hook is told."""

    compaction: Compaction
    messages: list[AgentMessage]
    info: CompactionInfo


async def run_compaction(request: CompactionRequest, signal: Any = None) -> Any:
    """Perform a compaction effect: the user's hook, or :func:`drop_oldest_turns` (what it
    returns goes back to the machine unchecked; the machine checks it)."""
    hook = request.compaction.compact or drop_oldest_turns
    value: Any = hook(list(request.messages), request.info)
    if isinstance(value, Awaitable):
        value = await value
    return value


# --- sizes -----------------------------------------------------------------------------------


def _chars(message: Any) -> int:
    dump = getattr(message, "model_dump", None)
    if dump is not None:
        try:
            return len(json.dumps(dump(mode="json"), ensure_ascii=False, default=str))
        except (TypeError, ValueError):
            pass
    return len(str(message))


def estimate_tokens(messages: Sequence[Any], system_prompt: str = "") -> int:
    """The estimated size of a context in tokens: a quarter of the characters of the system
    prompt and of the JSON of each message (rounded up). Deterministic, so that a replayed run
    takes the same path; a provider's own count is usually within a factor of two of it."""
    chars = len(system_prompt)
    for message in messages:
        chars += _chars(message)
    return (chars + 3) // 4


# --- the built-in compaction -----------------------------------------------------------------


def _turns(messages: Sequence[Any]) -> list[list[int]]:
    """The messages' indices grouped in turns: a turn starts at each user message (what comes
    before the first user message is a turn of its own). A tool call and its result are always
    in the same turn (results follow their call, and only a user message starts a turn)."""
    turns: list[list[int]] = []
    for i, message in enumerate(messages):
        if not turns or getattr(message, "role", None) == "user":
            turns.append([])
        turns[-1].append(i)
    return turns


def drop_oldest_turns(messages: list[AgentMessage], info: CompactionInfo) -> list[AgentMessage]:
    """The built-in compaction: drops whole turns, oldest first, and keeps the last one (which
    starts at the latest user message).

    For "budget", it drops turns until the estimate is at most ``info.max_context_tokens``
    (or only the last turn is left); for "overflow", it drops the older half of the turns
    (at least one), then goes on as for "budget" when ``max_context_tokens`` is set. A turn is
    a user message and everything up to the next one, so a tool call is never separated from
    its result and the latest user message always stays; the system prompt is not a message
    and always stays. Nothing to drop (one turn): the messages come back as they are."""
    turns = _turns(messages)
    keep_from = 0
    if info.reason == "overflow":
        keep_from = max(1, len(turns) // 2) if len(turns) > 1 else 0
    limit = info.max_context_tokens

    def kept(first: int) -> list[AgentMessage]:
        return [messages[i] for turn in turns[first:] for i in turn]

    if limit is not None:
        while keep_from < len(turns) - 1 and estimate_tokens(kept(keep_from)) > limit:
            keep_from += 1
    return kept(keep_from)


def dropped_messages(
    before: Sequence[AgentMessage], after: Sequence[AgentMessage]
) -> tuple[list[int], list[AgentMessage]]:
    """Which of ``before`` are not in ``after`` (the same object, or an equal message): their
    indices in ``before`` and the messages."""
    ids = {id(m) for m in after}
    indices: list[int] = []
    for i, message in enumerate(before):
        if id(message) in ids:
            continue
        try:
            present = any(message == other for other in after)
        except Exception:
            present = False
        if not present:
            indices.append(i)
    return indices, [before[i] for i in indices]
