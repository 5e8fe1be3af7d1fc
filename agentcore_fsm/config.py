"""What a run is given: its context, its configuration and hooks, and the stream-function types.

These hold callables, so they are plain dataclasses rather than pydantic models. Every hook may
be a plain function or ``async def``; the driver awaits whatever comes back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .messages import (
    AgentMessage,
    AssistantMessage,
    Message,
    Model,
    ThinkingLevel,
    ToolResultMessage,
)
from .tools import AgentTool, ToolExecutionMode

if TYPE_CHECKING:
    from .abort import AbortSignal
    from .events import AssistantMessageEvent

__all__ = [
    "AgentContext",
    "AgentLoopConfig",
    "AgentLoopTurnUpdate",
    "LlmContext",
    "PrepareNextTurnContext",
    "ShouldStopAfterTurnContext",
    "StreamFn",
    "StreamOptions",
    "default_convert_to_llm",
]

MaybeAwaitable: TypeAlias = Any
"""A value, or an awaitable of it (hooks may be sync or async)."""


@dataclass
class AgentContext:
    """The conversation a run works on. Runs never mutate the caller's object or its lists."""

    system_prompt: str = ""
    messages: list[AgentMessage] = field(default_factory=list)
    tools: list[AgentTool] = field(default_factory=list)

    def copy(self) -> AgentContext:
        return AgentContext(self.system_prompt, list(self.messages), list(self.tools))


@dataclass
class LlmContext:
    """What a stream function sees: only user, assistant and toolResult messages."""

    system_prompt: str
    messages: list[Message]
    tools: list[AgentTool]


@dataclass
class StreamOptions:
    api_key: str | None = None
    signal: AbortSignal | None = None
    reasoning: ThinkingLevel | None = None
    session_id: str | None = None
    thinking_budgets: dict[str, int] | None = None
    transport: str | None = None
    max_retry_delay_ms: int | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    headers: dict[str, str] | None = None
    on_payload: Callable[[Any], Any] | None = None
    on_response: Callable[[Any], Any] | None = None


StreamFn: TypeAlias = Callable[
    [Model, LlmContext, StreamOptions], "AsyncIterator[AssistantMessageEvent]"
]
"""``stream_fn(model, context, options)``: an async iterator of stream events (see
docs/reference.md#the-stream-function)."""


@dataclass
class PrepareNextTurnContext:
    """Handed to ``prepare_next_turn`` and ``should_stop_after_turn`` after every turn."""

    message: AgentMessage
    tool_results: list[ToolResultMessage]
    context: AgentContext
    new_messages: list[AgentMessage]


ShouldStopAfterTurnContext = PrepareNextTurnContext


@dataclass
class AgentLoopTurnUpdate:
    """What ``prepare_next_turn`` may return: given fields replace the current ones."""

    context: AgentContext | None = None
    model: Model | None = None
    thinking_level: ThinkingLevel | None = None


def default_convert_to_llm(messages: list[AgentMessage]) -> list[Message]:
    """Keep the messages whose role the model understands (user, assistant, toolResult)."""
    return [m for m in messages if getattr(m, "role", None) in ("user", "assistant", "toolResult")]


Hook: TypeAlias = Callable[..., MaybeAwaitable]


@dataclass(kw_only=True)
class AgentLoopConfig:
    """The configuration of a run (see docs/reference.md#configuration). Only ``model`` is
    required."""

    model: Model
    convert_to_llm: Callable[[list[AgentMessage]], MaybeAwaitable] | None = None
    transform_context: Callable[[list[AgentMessage], AbortSignal | None], MaybeAwaitable] | None = (
        None
    )
    get_api_key: Callable[[str], MaybeAwaitable] | None = None
    api_key: str | None = None
    reasoning: ThinkingLevel | None = None
    session_id: str | None = None
    thinking_budgets: dict[str, int] | None = None
    transport: str | None = None
    max_retry_delay_ms: int | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    headers: dict[str, str] | None = None
    on_payload: Callable[[Any], Any] | None = None
    on_response: Callable[[Any], Any] | None = None
    tool_execution: ToolExecutionMode = "parallel"
    before_tool_call: Hook | None = None
    after_tool_call: Hook | None = None
    prepare_next_turn: Hook | None = None
    should_stop_after_turn: Hook | None = None
    get_steering_messages: Callable[[], MaybeAwaitable] | None = None
    get_follow_up_messages: Callable[[], MaybeAwaitable] | None = None


AssistantFinal: TypeAlias = AssistantMessage
StopKind: TypeAlias = Literal["completed", "stopped", "aborted", "error"]
