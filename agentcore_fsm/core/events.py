"""Events: what a stream function yields, and what the loop emits.

A stream function (a provider) yields *stream events* (:data:`AssistantMessageEvent`): ``start``,
then ``*_start``/``*_delta``/``*_end`` for each block of the answer as it grows, then exactly one
``done`` or ``error``; each carries the *partial* assistant message, updated in place. The loop
emits *agent events* (:data:`AgentEvent`) to its ``emit`` callback and to an ``Agent``'s
listeners: ``agent_start``, then turns (``turn_start`` ... ``turn_end``) holding message events
(``message_start``, ``message_update`` for each stream event, ``message_end``) and tool events
(``tool_execution_start``/``_update``/``_end``, and ``approval_requested``/``approval_decided``
for a call that waits for approval), then ``agent_end``. Dispatch on ``event.type``.

Events are slots dataclasses rather than pydantic models: two of them are built for every
streamed delta (the stream event and its ``message_update``), and a slots dataclass costs about a
quarter of a validated model to build. They are still data with one JSON form: every event class
has ``model_dump``/``model_dump_json``/``model_validate`` backed by a cached pydantic
``TypeAdapter``, with the same camelCase aliases as the messages. Construction is keyword-only
and not validated; validate at a boundary with ``model_validate`` or the ``*_ADAPTER``s. The
adapters' validators are built on first use, not at import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, TypeAlias, TypeVar

from pydantic import ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

from agentcore_fsm.core.data import Data
from agentcore_fsm.core.limits import LimitReached, RunUsage
from agentcore_fsm.core.messages import (
    AgentMessageField,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
)
from agentcore_fsm.core.tools import AgentToolResult

__all__ = [
    "AGENT_EVENT_ADAPTER",
    "STREAM_EVENT_ADAPTER",
    "AgentEndEvent",
    "AgentEndReason",
    "AgentEvent",
    "AgentStartEvent",
    "ApprovalDecidedEvent",
    "ApprovalRequestedEvent",
    "AssistantMessageEvent",
    "BlockEvent",
    "ContextCompactedEvent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "OutputPartialEvent",
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
    "ToolEvent",
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


def _is_none(value: Any) -> bool:
    return value is None


E = TypeVar("E", bound="EventData")


def _adapter(cls: type) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


class EventData(Data):
    """Mixin giving the event dataclasses pydantic's dump/validate methods (the same ones as
    the messages': ``model_dump(mode="json", by_alias=True)`` gives the camelCase wire form),
    and the ``repr``/``==`` of a dataclass (:class:`~agentcore_fsm.core.data.Data`)."""

    __slots__ = ()
    __pydantic_config__: ClassVar[ConfigDict] = _CONFIG

    def model_dump(
        self, *, mode: Literal["json", "python"] = "python", by_alias: bool = False, **kwargs: Any
    ) -> Any:
        """The event as a dict (``mode="json"``: JSON-compatible values; ``by_alias=True``:
        camelCase keys). Other keywords go to pydantic's ``TypeAdapter.dump_python``."""
        return _adapter(self.__class__).dump_python(self, mode=mode, by_alias=by_alias, **kwargs)

    def model_dump_json(self, *, by_alias: bool = False, **kwargs: Any) -> str:
        """The event as a JSON string (``by_alias=True``: camelCase keys)."""
        data: bytes = _adapter(self.__class__).dump_json(self, by_alias=by_alias, **kwargs)
        return data.decode()

    @classmethod
    def model_validate(cls: type[E], data: Any) -> E:
        """An event of this class from a dict in either spelling; raises pydantic's
        ``ValidationError`` when ``data`` does not fit."""
        result: E = _adapter(cls).validate_python(data)
        return result

    @classmethod
    def model_validate_json(cls: type[E], data: str | bytes) -> E:
        """An event of this class from JSON text (see :meth:`model_validate`)."""
        result: E = _adapter(cls).validate_json(data)
        return result


# --- stream events: what a stream function yields ------------------------------------------


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class StreamStart(EventData):
    """The first event of a model call: the (still empty) partial message exists."""

    type: Literal["start"] = "start"
    partial: AssistantMessage


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class BlockEvent(EventData):
    """What every event of one block of the answer has: the block's place in the partial
    message (``partial.content[content_index]``) and the partial message itself. The base of
    the ``text_*``, ``thinking_*`` and ``toolcall_*`` events (each names its ``type``)."""

    type: str
    content_index: int
    partial: AssistantMessage


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class TextStart(BlockEvent):
    """A text block opened at ``partial.content[content_index]``."""

    type: Literal["text_start"] = "text_start"


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class TextDelta(BlockEvent):
    """``delta`` was appended to the text block at ``content_index`` (``partial`` has it)."""

    type: Literal["text_delta"] = "text_delta"
    delta: str


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class TextEnd(BlockEvent):
    """The text block at ``content_index`` is complete; ``content`` is its whole text."""

    type: Literal["text_end"] = "text_end"
    content: str


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class ThinkingStart(BlockEvent):
    """A thinking block opened at ``partial.content[content_index]``."""

    type: Literal["thinking_start"] = "thinking_start"


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class ThinkingDelta(BlockEvent):
    """``delta`` was appended to the thinking block at ``content_index``."""

    type: Literal["thinking_delta"] = "thinking_delta"
    delta: str


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class ThinkingEnd(BlockEvent):
    """The thinking block at ``content_index`` is complete; ``content`` is its text."""

    type: Literal["thinking_end"] = "thinking_end"
    content: str


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class ToolCallStart(BlockEvent):
    """A tool-call block opened at ``partial.content[content_index]`` (its name and id
    are set; its arguments arrive as JSON text in :class:`ToolCallDelta` events)."""

    type: Literal["toolcall_start"] = "toolcall_start"


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class ToolCallDelta(BlockEvent):
    """``delta`` is the next piece of the JSON text of the call's arguments (the block's
    ``arguments`` are parsed from the whole text at :class:`ToolCallEnd`)."""

    type: Literal["toolcall_delta"] = "toolcall_delta"
    delta: str


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class ToolCallEnd(BlockEvent):
    """The tool call at ``content_index`` is complete; ``tool_call`` has its parsed
    arguments."""

    type: Literal["toolcall_end"] = "toolcall_end"
    tool_call: ToolCall


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class StreamDone(EventData):
    """The last event of a successful model call: ``message`` is the final assistant
    message and ``reason`` its stop reason."""

    type: Literal["done"] = "done"
    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class StreamError(EventData):
    """The last event of a failed (``reason="error"``) or aborted (``reason="aborted"``)
    model call: ``error`` is the final assistant message, ``stop_reason`` and
    ``error_message`` set."""

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
"""A stream event, any type: what a stream function yields."""
STREAM_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(
    AssistantMessageEvent, config=ConfigDict(defer_build=True)
)
"""Validates a stream event dict (either spelling) into its class, chosen by ``type``."""

# --- agent events: what the loop emits ------------------------------------------------------

AgentEndReason: TypeAlias = Literal["completed", "stopped", "aborted", "error", "limit"]
"""How a run ended (``AgentEndEvent.reason``)."""


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class AgentStartEvent(EventData):
    """The first event of a run."""

    type: Literal["agent_start"] = "agent_start"


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class AgentEndEvent(EventData):
    """The last event of a run: ``messages`` are all the messages the run created, in
    order, and ``reason`` says how it ended: "completed" (nothing was left to do), "stopped"
    (``should_stop_after_turn`` said so, or every result of a tool batch had
    ``terminate=True``), "aborted" (the abort signal fired) or "error" (the model call or a
    callback failed; the last assistant message's ``error_message`` says why) or "limit" (a
    usage limit was reached: ``limit`` says which; docs/policies.md#usage-limits)."""

    type: Literal["agent_end"] = "agent_end"
    messages: list[AgentMessageField] = field(default_factory=list)
    reason: AgentEndReason = "completed"
    output: Annotated[Any, Field(exclude_if=_is_none)] = None
    """A run with an output type (docs/output.md) that ended with a valid answer: the output
    as JSON data (pydantic's JSON mode: models as dicts, dates as ISO text ...); None
    otherwise, and then left out of the event's dump (a run without an output type has the
    same wire form as before). The typed value is on the run's result."""
    limit: Annotated[LimitReached | None, Field(exclude_if=_is_none)] = None
    """A run that ended with ``reason="limit"`` (docs/policies.md#usage-limits): which limit
    of its :class:`~agentcore_fsm.core.limits.UsageLimits` ended it, and the figures; None
    otherwise, and then left out of the event's dump."""
    usage: Annotated[RunUsage | None, Field(exclude_if=_is_none)] = None
    """A run with usage limits: what it used (its counters, from its limits' ``used_before``
    on); None for a run without limits, and then left out of the event's dump."""
    agent: Annotated[str | None, Field(exclude_if=_is_none)] = None
    """A run of a chain of handoffs (docs/multi-agent.md#handoff): the name of the agent that
    ran it (the last run's agent answered); None otherwise, and then left out of the event's
    dump."""


@dataclass(slots=True, kw_only=True)
class OutputPartialEvent(EventData):
    """While the model streams a structured answer (a run with an output type and a listener):
    the output so far, validated as far as it goes, as JSON data (docs/output.md). Comes right
    after the ``message_update`` that changed it; the last one of a valid answer equals the
    output that ``agent_end`` carries."""

    type: Literal["output_partial"] = "output_partial"
    output: Any = None


@dataclass(slots=True, kw_only=True)
class ContextCompactedEvent(EventData):
    """The run compacted its context (``AgentLoopConfig.compaction``; docs/policies-models.md):
    ``reason`` "overflow" (the provider said the context was too long: the request is made
    again) or "budget" (the estimate was over ``max_context_tokens``). ``dropped`` are the
    messages of the context that are no longer in it, ``indices`` their positions in the
    context before, ``kept`` how many messages it holds now, ``tokens_before`` and
    ``tokens_after`` the estimated sizes. Comes inside a turn, before its assistant message."""

    type: Literal["context_compacted"] = "context_compacted"
    reason: Literal["overflow", "budget"] = "overflow"
    dropped: list[AgentMessageField] = field(default_factory=list)
    indices: list[int] = field(default_factory=list)
    kept: int = 0
    tokens_before: int = 0
    tokens_after: int = 0


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class TurnStartEvent(EventData):
    """A turn begins: one assistant message, and the tool calls it asks for."""

    type: Literal["turn_start"] = "turn_start"


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class TurnEndEvent(EventData):
    """A turn ends: ``message`` is its assistant message and ``tool_results`` the
    results of its tool calls, in the calls' order."""

    type: Literal["turn_end"] = "turn_end"
    message: AgentMessageField
    tool_results: list[ToolResultMessage] = field(default_factory=list)


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class MessageStartEvent(EventData):
    """A message enters the transcript: a prompt, a steering or follow-up message, the
    assistant message (as its partial, as streaming begins) or a tool result."""

    type: Literal["message_start"] = "message_start"
    message: AgentMessageField


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class MessageUpdateEvent(EventData):
    """The streamed assistant message changed: ``assistant_message_event`` is the
    stream event that changed it (when its ``type`` is "text_delta", its ``delta`` is the new
    text) and ``message`` is the partial message."""

    type: Literal["message_update"] = "message_update"
    message: AgentMessageField
    assistant_message_event: AssistantMessageEvent


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class MessageEndEvent(EventData):
    """A message is complete; ``message`` is its final form (for the assistant message,
    the final message, whose ``stop_reason`` is never "pending")."""

    type: Literal["message_end"] = "message_end"
    message: AgentMessageField


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class ToolEvent(EventData):
    """What every event of one tool call has: the call's id and its tool's name. The base of
    the ``tool_execution_*`` and ``approval_*`` events (each names its ``type``)."""

    type: str
    tool_call_id: str
    tool_name: str


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class ToolExecutionStartEvent(ToolEvent):
    """A tool call begins; ``args`` are the arguments the model sent."""

    type: Literal["tool_execution_start"] = "tool_execution_start"
    args: Any = None


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class ToolExecutionUpdateEvent(ToolEvent):
    """A running tool reported progress through its ``on_update`` callback;
    ``partial_result`` is what it reported."""

    type: Literal["tool_execution_update"] = "tool_execution_update"
    args: Any = None
    partial_result: AgentToolResult


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class ToolExecutionEndEvent(ToolEvent):
    """A tool call finished: ``result`` is its result and ``is_error`` whether it
    failed (the call was rejected, the tool raised, or the run was aborted)."""

    type: Literal["tool_execution_end"] = "tool_execution_end"
    result: AgentToolResult
    is_error: bool


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class ApprovalRequestedEvent(ToolEvent):
    """A tool call waits for approval: ``args`` are the arguments as validated (what the tool
    would receive), ``reason`` why approval is asked. Comes after the call's
    ``tool_execution_start``; exactly one ``approval_decided`` follows before its
    ``tool_execution_end``."""

    type: Literal["approval_requested"] = "approval_requested"
    args: Any = None
    reason: str | None = None


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class ApprovalDecidedEvent(ToolEvent):
    """The decision about a call that waited for approval: ``approved``, ``reason``,
    ``decided_by`` (who or what decided: the approver's text, or "timeout", "abort", "no
    approver") and ``args``, the arguments the approver changed (None: unchanged)."""

    type: Literal["approval_decided"] = "approval_decided"
    approved: bool
    reason: str | None = None
    decided_by: str = "user"
    args: Any = None


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
    | ToolExecutionEndEvent
    | ApprovalRequestedEvent
    | ApprovalDecidedEvent
    | OutputPartialEvent
    | ContextCompactedEvent,
    Field(discriminator="type"),
]
"""An agent event, any type: what the loop emits."""
AGENT_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(AgentEvent, config=ConfigDict(defer_build=True))
"""Validates an agent event dict (either spelling, e.g. a line of a recording) into its class,
chosen by ``type``."""
