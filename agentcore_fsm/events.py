"""Events: what a stream function yields (SPEC §2) and what the loop emits (SPEC §3).

Events are slots dataclasses rather than pydantic models: two of them are built for every
streamed delta (the stream event and its ``message_update``), and a slots dataclass costs about a
quarter of a validated model to build. They are still data with one JSON form: every event class
has ``model_dump``/``model_dump_json``/``model_validate`` backed by a cached pydantic
``TypeAdapter``, with the same camelCase aliases as the messages. Construction is keyword-only
and not validated; validate at a boundary with ``model_validate`` or the ``*_ADAPTER``s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, TypeAlias, TypeVar

from pydantic import ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

from .messages import AgentMessageField, AssistantMessage, ToolCall, ToolResultMessage
from .tools import AgentToolResult

__all__ = [
    "AGENT_EVENT_ADAPTER",
    "STREAM_EVENT_ADAPTER",
    "AgentEndEvent",
    "AgentEndReason",
    "AgentEvent",
    "AgentStartEvent",
    "AssistantMessageEvent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "StreamDone",
    "StreamError",
    "StreamStart",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ThinkingDelta",
    "ThinkingEnd",
    "ThinkingStart",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "TurnEndEvent",
    "TurnStartEvent",
]

_CONFIG = ConfigDict(
    alias_generator=to_camel,
    validate_by_name=True,
    validate_by_alias=True,
    arbitrary_types_allowed=True,
)
_ADAPTERS: dict[type, TypeAdapter[Any]] = {}
E = TypeVar("E", bound="EventData")


def _adapter(cls: type) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


class EventData:
    """Mixin giving the event dataclasses pydantic's dump/validate methods."""

    __slots__ = ()
    __pydantic_config__: ClassVar[ConfigDict] = _CONFIG

    def model_dump(
        self, *, mode: Literal["json", "python"] = "python", by_alias: bool = False, **kwargs: Any
    ) -> Any:
        return _adapter(self.__class__).dump_python(self, mode=mode, by_alias=by_alias, **kwargs)

    def model_dump_json(self, *, by_alias: bool = False, **kwargs: Any) -> str:
        data: bytes = _adapter(self.__class__).dump_json(self, by_alias=by_alias, **kwargs)
        return data.decode()

    @classmethod
    def model_validate(cls: type[E], data: Any) -> E:
        result: E = _adapter(cls).validate_python(data)
        return result

    @classmethod
    def model_validate_json(cls: type[E], data: str | bytes) -> E:
        result: E = _adapter(cls).validate_json(data)
        return result


# --- stream events (SPEC §2) ----------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class StreamStart(EventData):
    type: Literal["start"] = "start"
    partial: AssistantMessage


@dataclass(slots=True, kw_only=True)
class TextStart(EventData):
    type: Literal["text_start"] = "text_start"
    content_index: int
    partial: AssistantMessage


@dataclass(slots=True, kw_only=True)
class TextDelta(EventData):
    type: Literal["text_delta"] = "text_delta"
    content_index: int
    delta: str
    partial: AssistantMessage


@dataclass(slots=True, kw_only=True)
class TextEnd(EventData):
    type: Literal["text_end"] = "text_end"
    content_index: int
    content: str
    partial: AssistantMessage


@dataclass(slots=True, kw_only=True)
class ThinkingStart(EventData):
    type: Literal["thinking_start"] = "thinking_start"
    content_index: int
    partial: AssistantMessage


@dataclass(slots=True, kw_only=True)
class ThinkingDelta(EventData):
    type: Literal["thinking_delta"] = "thinking_delta"
    content_index: int
    delta: str
    partial: AssistantMessage


@dataclass(slots=True, kw_only=True)
class ThinkingEnd(EventData):
    type: Literal["thinking_end"] = "thinking_end"
    content_index: int
    content: str
    partial: AssistantMessage


@dataclass(slots=True, kw_only=True)
class ToolCallStart(EventData):
    type: Literal["toolcall_start"] = "toolcall_start"
    content_index: int
    partial: AssistantMessage


@dataclass(slots=True, kw_only=True)
class ToolCallDelta(EventData):
    type: Literal["toolcall_delta"] = "toolcall_delta"
    content_index: int
    delta: str
    partial: AssistantMessage


@dataclass(slots=True, kw_only=True)
class ToolCallEnd(EventData):
    type: Literal["toolcall_end"] = "toolcall_end"
    content_index: int
    tool_call: ToolCall
    partial: AssistantMessage


@dataclass(slots=True, kw_only=True)
class StreamDone(EventData):
    type: Literal["done"] = "done"
    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage


@dataclass(slots=True, kw_only=True)
class StreamError(EventData):
    type: Literal["error"] = "error"
    reason: Literal["aborted", "error"]
    error: AssistantMessage


AssistantMessageEvent: TypeAlias = Annotated[
    StreamStart
    | TextStart
    | TextDelta
    | TextEnd
    | ThinkingStart
    | ThinkingDelta
    | ThinkingEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | StreamDone
    | StreamError,
    Field(discriminator="type"),
]
STREAM_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(AssistantMessageEvent)

# --- agent events (SPEC §3) -----------------------------------------------------------------

AgentEndReason: TypeAlias = Literal["completed", "stopped", "aborted", "error"]


@dataclass(slots=True, kw_only=True)
class AgentStartEvent(EventData):
    type: Literal["agent_start"] = "agent_start"


@dataclass(slots=True, kw_only=True)
class AgentEndEvent(EventData):
    type: Literal["agent_end"] = "agent_end"
    messages: list[AgentMessageField] = field(default_factory=list)
    reason: AgentEndReason = "completed"


@dataclass(slots=True, kw_only=True)
class TurnStartEvent(EventData):
    type: Literal["turn_start"] = "turn_start"


@dataclass(slots=True, kw_only=True)
class TurnEndEvent(EventData):
    type: Literal["turn_end"] = "turn_end"
    message: AgentMessageField
    tool_results: list[ToolResultMessage] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class MessageStartEvent(EventData):
    type: Literal["message_start"] = "message_start"
    message: AgentMessageField


@dataclass(slots=True, kw_only=True)
class MessageUpdateEvent(EventData):
    type: Literal["message_update"] = "message_update"
    message: AgentMessageField
    assistant_message_event: AssistantMessageEvent


@dataclass(slots=True, kw_only=True)
class MessageEndEvent(EventData):
    type: Literal["message_end"] = "message_end"
    message: AgentMessageField


@dataclass(slots=True, kw_only=True)
class ToolExecutionStartEvent(EventData):
    type: Literal["tool_execution_start"] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: Any = None


@dataclass(slots=True, kw_only=True)
class ToolExecutionUpdateEvent(EventData):
    type: Literal["tool_execution_update"] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    args: Any = None
    partial_result: AgentToolResult


@dataclass(slots=True, kw_only=True)
class ToolExecutionEndEvent(EventData):
    type: Literal["tool_execution_end"] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool


AgentEvent: TypeAlias = Annotated[
    AgentStartEvent
    | AgentEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent,
    Field(discriminator="type"),
]
AGENT_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(AgentEvent)
