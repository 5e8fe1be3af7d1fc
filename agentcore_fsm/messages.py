"""The data model of a conversation: content blocks, messages, usage and models (SPEC §1).

Everything here is a pydantic v2 model. Python names are snake_case; the wire form
(``model_dump(mode="json", by_alias=True)``) uses camelCase aliases so that a transcript written
by this library reads like one written by the reference implementation. Both spellings are
accepted on input.

Messages are mutable on purpose: a provider builds the streamed assistant message in place (the
*partial*), appending text to a block as deltas arrive. No assignment is validated, which keeps
that hot path cheap; construction is validated as usual.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

__all__ = [
    "AgentMessage",
    "AssistantContent",
    "AssistantMessage",
    "Cost",
    "ImageContent",
    "Message",
    "Model",
    "ModelCost",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevel",
    "ToolCall",
    "ToolResultContent",
    "ToolResultMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "now_ms",
]

StopReason: TypeAlias = Literal["pending", "stop", "length", "toolUse", "error", "aborted"]
ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]


def now_ms() -> int:
    """The current time in milliseconds since the epoch (the default of every ``timestamp``)."""
    return time.time_ns() // 1_000_000


class Wire(BaseModel):
    """Base of every model here: camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=False,
    )


# --- content blocks -------------------------------------------------------------------------


class TextContent(Wire):
    type: Literal["text"] = "text"
    text: str
    text_signature: str | None = None


class ThinkingContent(Wire):
    type: Literal["thinking"] = "thinking"
    thinking: str
    thinking_signature: str | None = None
    redacted: bool = False


class ImageContent(Wire):
    type: Literal["image"] = "image"
    data: str
    """Base64-encoded image bytes."""
    mime_type: str


class ToolCall(Wire):
    type: Literal["toolCall"] = "toolCall"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


UserContent: TypeAlias = Annotated[TextContent | ImageContent, Field(discriminator="type")]
AssistantContent: TypeAlias = Annotated[
    TextContent | ThinkingContent | ToolCall, Field(discriminator="type")
]
ToolResultContent: TypeAlias = UserContent


# --- usage and models -----------------------------------------------------------------------


class Cost(Wire):
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


class Usage(Wire):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: Cost = Field(default_factory=Cost)


class ModelCost(Wire):
    """Prices in dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


def _text_only() -> list[Literal["text", "image"]]:
    return ["text"]


class Model(Wire):
    id: str
    name: str = ""
    api: str = "unknown"
    provider: str = "unknown"
    base_url: str = ""
    reasoning: bool = False
    input: list[Literal["text", "image"]] = Field(default_factory=lambda: _text_only())
    cost: ModelCost = Field(default_factory=ModelCost)
    context_window: int = 0
    max_tokens: int = 0
    headers: dict[str, str] | None = None

    def model_post_init(self, __context: Any) -> None:
        if not self.name:
            self.name = self.id


# --- messages -------------------------------------------------------------------------------


class UserMessage(Wire):
    role: Literal["user"] = "user"
    content: str | list[UserContent]
    timestamp: int = Field(default_factory=now_ms)


class AssistantMessage(Wire):
    role: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    api: str = "unknown"
    provider: str = "unknown"
    model: str = "unknown"
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    timestamp: int = Field(default_factory=now_ms)

    def tool_calls(self) -> list[ToolCall]:
        """The message's tool calls, in source order."""
        return [block for block in self.content if isinstance(block, ToolCall)]

    def text(self) -> str:
        """All text blocks joined (a convenience for printing)."""
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


class ToolResultMessage(Wire):
    role: Literal["toolResult"] = "toolResult"
    tool_call_id: str
    tool_name: str
    content: list[UserContent] = Field(default_factory=list)
    details: Any = None
    usage: Usage | None = None
    added_tool_names: list[str] | None = Field(default=None, exclude_if=lambda v: not v)
    is_error: bool = False
    timestamp: int = Field(default_factory=now_ms)


Message: TypeAlias = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")
]
"""A message the model can see: user, assistant or tool result."""

AgentMessage: TypeAlias = Any
"""A message of the agent's transcript: a :data:`Message`, or any custom object the application
defines (anything with a ``role`` attribute). ``convert_to_llm`` decides what the model sees."""

MESSAGE_ADAPTER: TypeAdapter[UserMessage | AssistantMessage | ToolResultMessage] = TypeAdapter(
    Message
)
LLM_ROLES = frozenset({"user", "assistant", "toolResult"})


def _coerce_message(value: Any) -> Any:
    """Validate a mapping with a known role into its message class; keep anything else."""
    if isinstance(value, dict) and value.get("role") in LLM_ROLES:
        return MESSAGE_ADAPTER.validate_python(value)
    return value


AgentMessageField: TypeAlias = Annotated[Any, BeforeValidator(_coerce_message)]
"""The pydantic field type of an :data:`AgentMessage` (known roles are validated on input)."""
