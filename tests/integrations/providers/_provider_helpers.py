"""Helpers of the provider tests: collect a stream, summarise its events, compare messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agentcore_fsm import AssistantMessage, Model
from agentcore_fsm.core.config import LlmContext, StreamOptions


async def collect(
    stream_fn: Any, model: Model, context: LlmContext, options: StreamOptions | None = None
) -> list[Any]:
    stream: AsyncIterator[Any] = stream_fn(model, context, options or StreamOptions())
    return [event async for event in stream]


def summary(events: list[Any]) -> list[tuple[Any, ...]]:
    """Each event as a tuple: its type, content index and what it carries."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        t = e.type
        if t in ("text_start", "thinking_start", "toolcall_start"):
            out.append((t, e.content_index))
        elif t in ("text_delta", "thinking_delta", "toolcall_delta"):
            out.append((t, e.content_index, e.delta))
        elif t in ("text_end", "thinking_end"):
            out.append((t, e.content_index, e.content))
        elif t == "toolcall_end":
            call = e.tool_call
            out.append((t, e.content_index, call.id, call.name, call.arguments))
        elif t == "done":
            out.append((t, e.reason))
        elif t == "error":
            out.append((t, e.reason, e.error.error_message))
        else:
            out.append((t,))
    return out


def final(events: list[Any]) -> AssistantMessage:
    last = events[-1]
    message: AssistantMessage = last.message if last.type == "done" else last.error
    return message


def dump(message: Any) -> Any:
    """A message as JSON data without its timestamp (for exact comparison)."""
    data = message.model_dump(mode="json", by_alias=True)
    data.pop("timestamp", None)
    return data


def assert_one_partial(events: list[Any]) -> None:
    """Every event carries the same partial message object, updated in place, and it is the
    final message."""
    message = final(events)
    for event in events[:-1]:
        assert event.partial is message
