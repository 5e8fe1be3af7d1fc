"""The data model of a conversation: content blocks, messages, usage and models.

Everything here is a pydantic v2 model. Python names are snake_case; the wire form
(``model_dump(mode="json", by_alias=True)``) uses camelCase aliases so that a transcript written
by this library reads like one written by the reference implementation. Both spellings are
accepted on input.

Messages are mutable on purpose: a provider builds the streamed assistant message in place (the
*partial*), appending text to a block as deltas arrive. No assignment is validated, which keeps
that hot path cheap; construction is validated as usual. A model's validator is built when the
class is first used rather than at import (``defer_build``), which keeps ``import agentcore_fsm``
fast and costs nothing afterwards.

``str()`` of a message or a content block is one short line for people (``print(message)``,
logs): ``assistant: "Let me look." [toolUse: read(path='a.txt')]``. Long text is cut with "…",
so the line stays short whatever the message holds; ``repr()`` is pydantic's full form.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

__all__ = [
    "AgentMessage",
    "AssistantContent",
    "AssistantMessage",
    "Cost",
    "ErrorKind",
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
    "grow_text",
    "now_ms",
]

StopReason: TypeAlias = Literal["pending", "stop", "length", "toolUse", "error", "aborted"]
"""Why an assistant message ended: "stop" (the model finished), "length" (it hit the output
limit), "toolUse" (it wants its tool calls run), "error" or "aborted" (the call failed or was
aborted; ``error_message`` says why). "pending" marks a partial message still being streamed."""

ErrorKind: TypeAlias = Literal[
    "rate_limit",
    "overloaded",
    "server_error",
    "timeout",
    "context_overflow",
    "invalid_request",
    "auth",
    "other",
]
"""What kind of failure ended a request (``AssistantMessage.error_kind``, set by the providers;
docs/policies-models.md#error-kinds): "rate_limit" (HTTP 429), "overloaded" (HTTP 529, Anthropic's
``overloaded_error``), "server_error" (HTTP 5xx), "timeout" (the request timed out),
"context_overflow" (the prompt is longer than the model's context window), "invalid_request"
(another HTTP 400/404/422), "auth" (HTTP 401/403), "other" (anything else). The first four are
retryable (another model, or later, may succeed); "context_overflow" is answered by compaction
(docs/policies-models.md)."""

ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]
"""How hard a reasoning model should think (``AgentLoopConfig.reasoning``); "off" asks for no
thinking. Each provider maps the level to its own request fields."""

TEXT_LIMIT = 60
"""How many characters of a text block ``str()`` shows before cutting it with "…"."""
THINKING_LIMIT = 30
"""How many characters of a thinking block ``str()`` shows."""
VALUE_LIMIT = 30
"""How many characters of one tool-call argument value ``str()`` shows."""
MAX_ARGUMENTS = 4
"""How many arguments of a tool call ``str()`` shows (the rest become "…")."""
MAX_CALLS = 4
"""How many tool calls of an assistant message ``str()`` shows (then "+N more")."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, the last one "…" when it was cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def quote(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters and double-quoted on one line: quotes, backslashes
    and control characters (newlines too) are escaped as in JSON, and a lone surrogate as
    ``\\udXXX``, so the result always prints."""
    quoted = json.dumps(clip(text, limit), ensure_ascii=False)
    return quoted.encode("utf-8", "backslashreplace").decode("utf-8")


def _short_value(value: Any, depth: int = 0) -> str:
    """A tool-call argument value in Python notation, bounded in size and depth."""
    if isinstance(value, str):
        return repr(clip(value, VALUE_LIMIT))
    if isinstance(value, dict):
        if depth >= 1:
            return "{…}" if value else "{}"
        items = [f"{k!r}: {_short_value(v, depth + 1)}" for k, v in list(value.items())[:3]]
        return "{" + ", ".join(items + (["…"] if len(value) > 3 else [])) + "}"
    if isinstance(value, list | tuple):
        if depth >= 1:
            return "[…]" if value else "[]"
        shown = [_short_value(v, depth + 1) for v in value[:3]]
        return "[" + ", ".join(shown + (["…"] if len(value) > 3 else [])) + "]"
    return clip(repr(value), VALUE_LIMIT)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def _blocks(blocks: str | list[Any]) -> str:
    """The ``str()`` of a message's content: its blocks, space-separated, or ``(empty)``."""
    if isinstance(blocks, str):
        return quote(blocks)
    return " ".join(str(block) for block in blocks) or "(empty)"


def now_ms() -> int:
    """The current time in milliseconds since the epoch (the default of every ``timestamp``)."""
    return time.time_ns() // 1_000_000


class Wire(BaseModel):
    """Base of every model here: camelCase on the wire, snake_case in Python.

    ``model_dump(mode="json", by_alias=True)`` gives the wire form; ``model_validate`` accepts
    both spellings. Subclass it for your own wire-compatible models."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=False,
        defer_build=True,
    )


# --- content blocks -------------------------------------------------------------------------


class TextContent(Wire):
    """A block of text: ``TextContent(text="Hello")``. ``str()`` is the text, quoted and cut
    to 60 characters: ``"Hello"``.

    ``text_signature`` is an opaque value some providers attach; keep it when copying."""

    type: Literal["text"] = "text"
    text: str
    text_signature: str | None = None

    def __str__(self) -> str:
        return quote(self.text)


def grow_text(block: TextContent | ThinkingContent, delta: str) -> None:
    """Append a streamed ``delta`` to ``block``'s text (its ``thinking``, for a
    :class:`ThinkingContent`): what a provider does once per delta. The same write as
    ``block.text += delta`` (these models validate no assignment, and the field is set
    already), made without pydantic's assignment machinery, which costs about six times as
    much; ``tests/core/test_hot_path.py`` checks that the two leave equal blocks."""
    fields = block.__dict__
    if block.type == "text":
        fields["text"] += delta
    else:
        fields["thinking"] += delta


class ThinkingContent(Wire):
    """The model's reasoning, as a provider streamed it: ``ThinkingContent(thinking="...")``.

    ``thinking_signature`` is the provider's proof that the text is unaltered (needed to send
    thinking back to the same model); ``redacted=True`` marks thinking the provider returned
    encrypted (the signature then holds the data). ``str()`` shows the first 30 characters:
    ``[thinking: "Let me…"]``, or ``[thinking: redacted]``."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    thinking_signature: str | None = None
    redacted: bool = False

    def __str__(self) -> str:
        if self.redacted:
            return "[thinking: redacted]"
        return f"[thinking: {quote(self.thinking, THINKING_LIMIT)}]"


class ImageContent(Wire):
    """An image: base64-encoded ``data`` and its ``mime_type`` ("image/png", ...), for a user
    message or a tool result. A model whose ``Model.input`` lacks "image" gets a short text
    note instead. ``str()``: ``[image: image/png, 1.2 KiB]`` (the decoded size)."""

    type: Literal["image"] = "image"
    data: str
    """Base64-encoded image bytes."""
    mime_type: str

    def __str__(self) -> str:
        data = self.data.rstrip("=")
        return f"[image: {self.mime_type}, {_size(len(data) * 3 // 4)}]"


class ToolCall(Wire):
    """A call the model asks for: the tool's ``name``, its ``arguments`` (a JSON object) and an
    ``id`` that the :class:`ToolResultMessage` answering it repeats. ``str()`` reads like a
    Python call, arguments shortened: ``read(path='a.txt')``."""

    type: Literal["toolCall"] = "toolCall"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    def __str__(self) -> str:
        args = [
            f"{k if isinstance(k, str) and k.isidentifier() else repr(k)}={_short_value(v)}"
            for k, v in list(self.arguments.items())[:MAX_ARGUMENTS]
        ]
        if len(self.arguments) > MAX_ARGUMENTS:
            args.append("…")
        return f"{self.name}({', '.join(args)})"


UserContent: TypeAlias = Annotated[TextContent | ImageContent, Field(discriminator="type")]
"""A block of a user message: text or an image."""
AssistantContent: TypeAlias = Annotated[
    TextContent | ThinkingContent | ToolCall, Field(discriminator="type")
]
"""A block of an assistant message: text, thinking or a tool call."""
ToolResultContent: TypeAlias = UserContent
"""A block of a tool result: text or an image."""


# --- usage and models -----------------------------------------------------------------------


class Cost(Wire):
    """What a model call cost, in dollars, per kind of token and in ``total`` (computed by the
    providers from :class:`Usage` and :class:`ModelCost`)."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


class Usage(Wire):
    """Token counts of one model call, as the provider reported them: ``input`` (uncached
    input), ``output``, ``cache_read``, ``cache_write`` and ``total_tokens``, and their
    :class:`Cost`."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: Cost = Field(default_factory=Cost)


class ModelCost(Wire):
    """A model's prices in dollars per million tokens, per kind of token (they only feed
    ``Usage.cost``)."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


def _text_only() -> list[Literal["text", "image"]]:
    return ["text"]


class Model(Wire):
    """A model to call: ``Model(id="gpt-4o-mini", api="openai-completions", provider="openai")``.

    ``id`` is what the API is sent; ``name`` (defaults to ``id``) is for people. ``api`` and
    ``provider`` say which wire protocol and which vendor; ``base_url`` and ``headers`` reach
    the server; ``reasoning`` says the model can think, ``input`` which content kinds it reads
    ("text", "image"); ``cost`` its prices; ``context_window`` and ``max_tokens`` its limits (0:
    unknown). :func:`~agentcore_fsm.integrations.providers.models.get_model` fills all of it for
    known
    models."""

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
        """Give ``name`` the model's ``id`` when none was given."""
        if not self.name:
            self.name = self.id


# --- messages -------------------------------------------------------------------------------


class UserMessage(Wire):
    """What the user says: ``UserMessage(content="Hi")``, or a list of text and image blocks.
    ``timestamp`` is milliseconds since the epoch. ``str()``: ``user: "Hi"``."""

    role: Literal["user"] = "user"
    content: str | list[UserContent]
    timestamp: int = Field(default_factory=now_ms)

    def __str__(self) -> str:
        return f"user: {_blocks(self.content)}"


class AssistantMessage(Wire):
    """What the model answered: text, thinking and tool-call blocks in the order it produced
    them, with the ``api``/``provider``/``model`` that answered, its :class:`Usage`, why it
    stopped (:data:`StopReason`) and, for "error"/"aborted", ``error_message``.

    During streaming the provider updates one such message in place (the *partial*, with
    ``stop_reason="pending"``). ``str()`` shows the text and thinking, then, unless the model
    simply stopped, the stop reason with the tool calls and the error:
    ``assistant: "Let me look." [toolUse: read(path='a.txt')]``,
    ``assistant: [error: "HTTP 429: rate limited"]``."""

    role: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    api: str = "unknown"
    provider: str = "unknown"
    model: str = "unknown"
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    timestamp: int = Field(default_factory=now_ms)
    error_kind: ErrorKind | None = Field(default=None, exclude_if=lambda v: v is None)
    """For "error": what kind of failure it was (:data:`ErrorKind`), when the provider knows;
    None otherwise. Left out of the wire form when None (``errorKind``), so records written
    before it existed read back the same."""

    def tool_calls(self) -> list[ToolCall]:
        """The message's tool calls, in source order."""
        return [block for block in self.content if isinstance(block, ToolCall)]

    def text(self) -> str:
        """All text blocks joined (a convenience for printing)."""
        return "".join(block.text for block in self.content if isinstance(block, TextContent))

    def __str__(self) -> str:
        calls = self.tool_calls()
        shown = [str(block) for block in self.content if not isinstance(block, ToolCall)]
        line = "assistant:" + "".join(f" {part}" for part in shown)
        if self.stop_reason == "stop" and not calls and self.error_message is None:
            return line if shown else "assistant: (empty)"
        details = [str(call) for call in calls[:MAX_CALLS]]
        if len(calls) > MAX_CALLS:
            details.append(f"+{len(calls) - MAX_CALLS} more")
        if self.error_message is not None:
            details.append(quote(self.error_message))
        return f"{line} [{self.stop_reason}{': ' if details else ''}{', '.join(details)}]"


class ToolResultMessage(Wire):
    """The answer to one :class:`ToolCall`: the call's ``tool_call_id`` and ``tool_name``, the
    result's text and image blocks, ``is_error`` when the tool failed (or was never run), and
    the tool's ``details`` (anything; not sent to the model). ``added_tool_names`` lists tools
    the call made available. ``str()``: ``toolResult call_1 read: "file text"``, with
    ``(error)`` after the name when ``is_error``."""

    role: Literal["toolResult"] = "toolResult"
    tool_call_id: str
    tool_name: str
    content: list[UserContent] = Field(default_factory=list)
    details: Any = None
    usage: Usage | None = None
    added_tool_names: list[str] | None = Field(default=None, exclude_if=lambda v: not v)
    is_error: bool = False
    timestamp: int = Field(default_factory=now_ms)

    def __str__(self) -> str:
        error = " (error)" if self.is_error else ""
        return f"toolResult {self.tool_call_id} {self.tool_name}{error}: {_blocks(self.content)}"


Message: TypeAlias = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")
]
"""A message the model can see: user, assistant or tool result."""

AgentMessage: TypeAlias = Any
"""A message of the agent's transcript: a :data:`Message`, or any custom object the application
defines (anything with a ``role`` attribute). ``convert_to_llm`` decides what the model sees."""

MESSAGE_ADAPTER: TypeAdapter[UserMessage | AssistantMessage | ToolResultMessage] = TypeAdapter(
    Message, config=ConfigDict(defer_build=True)
)
"""Validates a message in either spelling into its class, chosen by ``role``:
``MESSAGE_ADAPTER.validate_python({"role": "user", "content": "Hi"})``."""
LLM_ROLES = frozenset({"user", "assistant", "toolResult"})
"""The roles of the messages a model sees (:data:`Message`)."""


def _coerce_message(value: Any) -> Any:
    """Validate a mapping with a known role into its message class; keep anything else."""
    if isinstance(value, dict) and value.get("role") in LLM_ROLES:
        return MESSAGE_ADAPTER.validate_python(value)
    return value


AgentMessageField: TypeAlias = Annotated[Any, BeforeValidator(_coerce_message)]
"""The pydantic field type of an :data:`AgentMessage` (known roles are validated on input)."""
