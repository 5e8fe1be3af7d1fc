"""The messages handed to an agent: a prompt, and the steering and follow-up queues.

A str becomes a user message; a dict with a known role is validated into that message; anything
that is not a message raises ``TypeError`` naming the call. A queue is drained per its mode:
``"one-at-a-time"`` takes the oldest message, ``"all"`` every queued one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, Literal, TypeAlias, get_args

from agentcore_fsm.core.boundary import coerce_messages
from agentcore_fsm.core.messages import AgentMessage, ImageContent, TextContent, UserMessage

__all__ = ["QUEUE_MODES", "QueueMode", "as_message", "as_prompts", "dequeue"]

QueueMode: TypeAlias = Literal["one-at-a-time", "all"]
"""How a queue is drained: the oldest message only, or every queued message at once."""

QUEUE_MODES: frozenset[str] = frozenset(get_args(QueueMode))


def dequeue(queue: deque[AgentMessage], mode: str) -> list[AgentMessage]:
    """Drain ``queue`` per ``mode`` (nothing when it is empty)."""
    if not queue:
        return []
    if mode == "all":
        items = list(queue)
        queue.clear()
        return items
    return [queue.popleft()]


def as_message(message: AgentMessage | str, what: str) -> AgentMessage:
    """One message: a str becomes a user message; a dict with a known role is validated into
    that message; anything that is not a message raises TypeError naming ``what``."""
    if message is None or isinstance(message, (list, tuple)):
        raise TypeError(f"{what}: expected one message or a str, not {type(message).__name__}")
    return coerce_messages(message, what)[0]


def as_prompts(
    input: str | AgentMessage | Sequence[AgentMessage],
    images: Sequence[ImageContent] | None,
) -> list[AgentMessage]:
    """The prompts of ``prompt(input, images)``: a text (with optional images), one message or
    a list of messages; an empty list raises ``ValueError("No messages to prompt with")``."""
    if isinstance(input, str):
        content: list[Any] = [TextContent(text=input)]
        content.extend(images or ())
        return [UserMessage(content=content)]
    if images:
        raise TypeError("images can only be given with a text prompt")
    if input is None:
        raise TypeError("prompt(): expected a str, a message or a list of messages, not None")
    prompts = coerce_messages(input, "prompt()")
    if not prompts:
        raise ValueError("No messages to prompt with")
    return prompts
