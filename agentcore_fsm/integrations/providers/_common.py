"""What the OpenAI and Anthropic stream functions share.

* :class:`StreamBuilder` owns the partial :class:`AssistantMessage` that a stream function updates
  in place, and makes the stream events as blocks open, grow and close.
* :func:`parse_tool_arguments` turns the streamed argument text of a tool call into a dict, and
  decides what malformed JSON becomes (see its docstring).
* :func:`prepare_transcript` makes a transcript safe to send: failed assistant messages keep
  only their text, and no tool call is left unanswered or answered twice.
* :class:`SdkProvider` is the skeleton of a stream function on an official SDK: it opens the
  request, feeds each chunk to a per-call translator, turns every failure into one ``error``
  event, honours the abort signal by cancelling the HTTP stream, and always closes what it opened.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any, ClassVar, Literal, TypeVar

import anyio
import anyio.lowlevel

from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.config import LlmContext, StreamOptions
from agentcore_fsm.core.events import (
    StreamDone,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from agentcore_fsm.core.messages import (
    MESSAGE_ADAPTER,
    AssistantMessage,
    ErrorKind,
    Message,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    grow_text,
)
from agentcore_fsm.core.tools import ARGUMENTS_ERROR_KEY, RAW_ARGUMENTS_KEY
from agentcore_fsm.integrations.providers.error_kinds import error_kind

__all__ = [
    "ABORTED_MESSAGE",
    "ARGUMENTS_ERROR_KEY",
    "RAW_ARGUMENTS_KEY",
    "SdkProvider",
    "StreamBuilder",
    "default_provider",
    "describe_error",
    "import_sdk",
    "parse_tool_arguments",
    "prepare_transcript",
    "set_cost",
]

ABORTED_MESSAGE = "Request was aborted"

NO_RESULT_TEXT = "No result provided"


def import_sdk(package: str) -> ModuleType:
    """Import an SDK that an optional extra provides, or raise a clear :class:`ImportError`."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise ImportError(
            f"The {package} provider needs the '{package}' package, which is not installed. "
            f"Install it with: pip install 'agentcore-fsm[{package}]'"
        ) from exc


# --- usage, cost, errors --------------------------------------------------------------------


def set_cost(model: Model, usage: Usage) -> None:
    """Fill ``usage.total_tokens`` and ``usage.cost`` from the counts and ``model.cost``.

    Prices are dollars per million tokens; ``input`` counts only uncached input tokens (cache
    reads and writes are priced on their own)."""
    usage.total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write
    price = model.cost
    cost = usage.cost
    cost.input = usage.input * price.input / 1_000_000
    cost.output = usage.output * price.output / 1_000_000
    cost.cache_read = usage.cache_read * price.cache_read / 1_000_000
    cost.cache_write = usage.cache_write * price.cache_write / 1_000_000
    cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write


def _server_message(body: Any) -> tuple[str | None, str | None]:
    """``(error type, message)`` from an API error body, whatever its nesting."""
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict):
            body = inner
        elif isinstance(inner, str) and inner:
            return None, inner
        message = body.get("message")
        kind = body.get("type") or body.get("code")
        return (
            str(kind) if kind else None,
            str(message) if message else json.dumps(body, default=str),
        )
    if isinstance(body, str) and body.strip():
        return None, body.strip()
    return None, None


def describe_error(exc: BaseException) -> str:
    """The ``error_message`` for a failed request: status code and the server's own message.

    * HTTP errors: ``HTTP 429 (rate_limit_error): Number of requests exceeded``;
    * an error event inside a stream: ``Stream error (overloaded_error): Overloaded``;
    * network failures: ``Connection error: <what the HTTP library said>``;
    * anything else: ``<ExceptionType>: <text>``.
    """
    status = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    kind, message = _server_message(body)
    if isinstance(status, int) and status >= 400:
        if message is None:
            response = getattr(exc, "response", None)
            message = (getattr(response, "text", "") or "").strip() or str(exc)
        label = f"HTTP {status} ({kind})" if kind else f"HTTP {status}"
        return f"{label}: {message}"
    if message is not None and type(exc).__name__ in ("APIError", "APIStatusError"):
        return f"Stream error ({kind}): {message}" if kind else f"Stream error: {message}"
    name = type(exc).__name__
    module = type(exc).__module__
    if name in ("APIConnectionError", "APITimeoutError") or module.startswith(
        ("httpx", "httpcore", "h11")
    ):
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        detail = str(cause) or type(cause).__name__
        if name == "APITimeoutError" or "Timeout" in type(cause).__name__:
            return f"Request timed out: {detail}"
        return f"Connection error: {detail}"
    return f"{name}: {exc}" if str(exc) else name


# --- tool arguments and transcripts ---------------------------------------------------------


def parse_tool_arguments(raw: str) -> dict[str, Any]:
    """The arguments of a streamed tool call.

    Empty text (a call without arguments) and ``null`` give ``{}``. Text that is not valid JSON,
    or JSON that is not an object, gives ``{"_raw_arguments": <the text>, "_arguments_error":
    <why>}``: the call still reaches the loop, the model's text is kept for the user and the
    model to see, and the loop's argument validation rejects it with ``<why>`` as the problem
    (``tools.validate_arguments``), whatever the tool's parameters are.
    """
    text = raw.strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        return {RAW_ARGUMENTS_KEY: raw, ARGUMENTS_ERROR_KEY: f"invalid JSON: {exc}"}
    if value is None:
        return {}
    if not isinstance(value, dict):
        kind = type(value).__name__
        return {
            RAW_ARGUMENTS_KEY: raw,
            ARGUMENTS_ERROR_KEY: f"expected a JSON object, got {kind}",
        }
    return value


def prepare_transcript(messages: list[Message]) -> list[Message]:
    """The messages as a provider should send them (the caller's objects are not changed;
    plain dicts in the wire form are accepted and validated).

    * An assistant message whose ``stop_reason`` is "error" or "aborted" keeps only its
      non-empty text: its tool calls were never run (the loop does not run the calls of a
      failed message) and its thinking may be cut short. Left with nothing, it is left out.
    * A tool result that answers no tool call of the assistant message before it is left out
      (the APIs reject it).
    * A tool call that got no result before the next user or assistant message gets a synthetic
      error result ``No result provided`` (the APIs reject an unanswered call).
    """
    out: list[Message] = []
    pending: dict[str, str] = {}  # unanswered tool call id -> tool name
    messages = [MESSAGE_ADAPTER.validate_python(m) if isinstance(m, dict) else m for m in messages]

    def flush() -> None:
        for call_id, name in pending.items():
            out.append(
                ToolResultMessage(
                    tool_call_id=call_id,
                    tool_name=name,
                    content=[TextContent(text=NO_RESULT_TEXT)],
                    is_error=True,
                )
            )
        pending.clear()

    open_ids: set[str] = set()
    for message in messages:
        role = message.role
        if role == "toolResult":
            assert isinstance(message, ToolResultMessage)
            if message.tool_call_id in open_ids:
                open_ids.discard(message.tool_call_id)
                pending.pop(message.tool_call_id, None)
                out.append(message)
            continue
        flush()
        open_ids = set()
        if isinstance(message, AssistantMessage):
            if message.stop_reason in ("error", "aborted"):
                texts = [
                    block
                    for block in message.content
                    if isinstance(block, TextContent) and block.text
                ]
                if not texts:
                    continue
                message = message.model_copy(update={"content": texts})
            for call in message.tool_calls():
                pending[call.id] = call.name
                open_ids.add(call.id)
        out.append(message)
    flush()
    return out


_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def safe_tool_id(call_id: str, limit: int = 64) -> str:
    """A tool-call id restricted to ``[a-zA-Z0-9_-]`` and ``limit`` characters (the same input
    always gives the same output, so calls and their results stay paired)."""
    return _ID_CHARS.sub("_", call_id)[:limit] or "call"


def text_of(blocks: list[Any]) -> str:
    """The non-empty text blocks of ``blocks``, one per line (other blocks are skipped)."""
    return "\n".join(b.text for b in blocks if isinstance(b, TextContent) and b.text)


# --- the partial message and its events -----------------------------------------------------


class StreamBuilder:
    """Builds the partial assistant message in place and the events that report each change.

    Blocks are opened and closed one at a time (``*_start`` ... ``*_end`` never interleave);
    :meth:`close_open` ends whatever block is open.
    """

    def __init__(self, model: Model) -> None:
        self.model = model
        self.partial = AssistantMessage(
            api=model.api, provider=model.provider, model=model.id, stop_reason="pending"
        )
        self.open_index: int | None = None
        self.raw_arguments: dict[int, str] = {}

    @property
    def content(self) -> list[Any]:
        """The partial message's content blocks (the same list, changed in place)."""
        return self.partial.content

    def start(self) -> StreamStart:
        """The ``start`` event: yield it before any block opens."""
        return StreamStart(partial=self.partial)

    def open_text(self) -> TextStart:
        """Append an empty text block and return its ``text_start`` event."""
        index = len(self.content)
        self.content.append(TextContent(text=""))
        self.open_index = index
        return TextStart(content_index=index, partial=self.partial)

    def open_thinking(self, signature: str | None = None, redacted: bool = False) -> ThinkingStart:
        """Append an empty thinking block and return its ``thinking_start`` event."""
        index = len(self.content)
        self.content.append(
            ThinkingContent(thinking="", thinking_signature=signature, redacted=redacted)
        )
        self.open_index = index
        return ThinkingStart(content_index=index, partial=self.partial)

    def open_tool_call(self, call_id: str, name: str) -> ToolCallStart:
        """Append a tool call without arguments yet and return its ``toolcall_start`` event."""
        index = len(self.content)
        self.content.append(ToolCall(id=call_id, name=name, arguments={}))
        self.raw_arguments[index] = ""
        self.open_index = index
        return ToolCallStart(content_index=index, partial=self.partial)

    def text_delta(self, index: int, delta: str) -> TextDelta:
        """Append ``delta`` to the text block at ``index``; return the ``text_delta`` event."""
        grow_text(self.content[index], delta)
        return TextDelta(content_index=index, delta=delta, partial=self.partial)

    def thinking_delta(self, index: int, delta: str) -> ThinkingDelta:
        """Append ``delta`` to the thinking block at ``index``; return its event."""
        grow_text(self.content[index], delta)
        return ThinkingDelta(content_index=index, delta=delta, partial=self.partial)

    def tool_call_delta(self, index: int, delta: str) -> ToolCallDelta:
        """Add ``delta`` to the argument text of the call at ``index`` (parsed when it
        closes); return the ``toolcall_delta`` event."""
        self.raw_arguments[index] += delta
        return ToolCallDelta(content_index=index, delta=delta, partial=self.partial)

    def close(self, index: int) -> TextEnd | ThinkingEnd | ToolCallEnd:
        """End the block at ``index`` (a tool call gets its parsed arguments); return its
        ``*_end`` event."""
        if self.open_index == index:
            self.open_index = None
        block = self.content[index]
        if isinstance(block, TextContent):
            return TextEnd(content_index=index, content=block.text, partial=self.partial)
        if isinstance(block, ThinkingContent):
            return ThinkingEnd(content_index=index, content=block.thinking, partial=self.partial)
        block.arguments = parse_tool_arguments(self.raw_arguments.get(index, ""))
        return ToolCallEnd(content_index=index, tool_call=block, partial=self.partial)

    def close_open(self) -> list[Any]:
        """The end event of the open block, if one is open (a list of zero or one events)."""
        if self.open_index is None:
            return []
        return [self.close(self.open_index)]

    def done(self, stop_reason: Literal["stop", "length", "toolUse"]) -> StreamDone:
        """Finish the message with ``stop_reason`` and its cost; return the ``done`` event."""
        set_cost(self.model, self.partial.usage)
        self.partial.stop_reason = stop_reason
        return StreamDone(reason=stop_reason, message=self.partial)

    def failed(self, message: str, kind: ErrorKind = "other") -> StreamError:
        """Finish the message as an error with ``message`` and its ``error_kind``; return the
        ``error`` event."""
        set_cost(self.model, self.partial.usage)
        self.partial.stop_reason = "error"
        self.partial.error_message = message
        self.partial.error_kind = kind
        return StreamError(reason="error", error=self.partial)

    def aborted(self) -> StreamError:
        """Finish the message as aborted; return the ``error`` event (reason "aborted")."""
        set_cost(self.model, self.partial.usage)
        self.partial.stop_reason = "aborted"
        self.partial.error_message = ABORTED_MESSAGE
        return StreamError(reason="aborted", error=self.partial)


# --- abort ----------------------------------------------------------------------------------


class AbortWatch:
    """Cancels the one await in flight (opening the request or reading the next chunk) when the
    signal fires. The cancel scope never spans a ``yield`` of the stream function."""

    def __init__(self, signal: AbortSignal | None) -> None:
        self.signal = signal
        self._scope: anyio.CancelScope | None = None
        self._remove = signal.add_callback(self._fire) if signal is not None else None

    @property
    def aborted(self) -> bool:
        """Whether the signal has fired."""
        return self.signal is not None and self.signal.aborted

    def _fire(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    @contextmanager
    def scope(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope around one await, cancelled if the signal fires (or has fired)."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self.aborted:
                scope.cancel()
            try:
                yield scope
            finally:
                self._scope = None

    def close(self) -> None:
        """Stop watching the signal (remove the callback); safe to call twice."""
        if self._remove is not None:
            self._remove()
            self._remove = None


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


_END = object()

_DEFAULTS: dict[Callable[[], Any], Any] = {}
P = TypeVar("P", bound="SdkProvider")


def default_provider(cls: Callable[[], P]) -> P:
    """The provider of class ``cls`` with default settings (a fresh client per call), made on
    first use and kept: what the module-level stream functions (``stream_openai``...) call."""
    provider = _DEFAULTS.get(cls)
    if provider is None:
        provider = _DEFAULTS[cls] = cls()
    result: P = provider
    return result


class ChunkTranslator(ABC):
    """Turns one call's SDK chunks into stream events (one translator per call)."""

    def __init__(self, builder: StreamBuilder) -> None:
        self.b = builder

    @abstractmethod
    def feed(self, chunk: Any) -> list[Any]:
        """The events for one chunk (never a terminal event)."""

    @abstractmethod
    def finish(self) -> list[Any]:
        """The events after the last chunk, ending with exactly one ``done`` or ``error``."""


class SdkProvider(ABC):
    """A stream function on an official SDK (see the module docstring).

    A provider object *is* the stream function: ``provider(model, context, options)``. Unless a
    ``client`` was given to the constructor, every call makes its own SDK client and closes it
    when the call ends, however it ends.
    """

    api: str
    sdk_name: ClassVar[str]
    """The SDK's package (``openai``, ``anthropic``): imported when a provider is made."""
    client_class: ClassVar[str]
    """The SDK's async client class, made per call unless a ``client`` was given."""
    key_variable: ClassVar[str]
    """The environment variable the API key is read from when none is given."""
    translator_class: ClassVar[type[ChunkTranslator]]
    """The class of the per-call translator of the SDK's chunks into stream events."""

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        max_retries: int,
        timeout: float | None,
        client: Any,
        extra_body: dict[str, Any] | None,
    ) -> None:
        self._sdk = import_sdk(self.sdk_name)
        self.api_key = api_key
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout = timeout
        self.client = client
        self.extra_body = dict(extra_body or {})

    def __call__(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[Any]:
        """Call ``model`` with ``context``: an async iterator of stream events that ends with
        one ``done`` or ``error`` event (failures never raise out of it)."""
        return self._run(model, context, options)

    def _api_key(self, model: Model, options: StreamOptions) -> str | None:
        """The call's API key: ``options.api_key``, else the provider's, else the
        environment's (:attr:`key_variable`)."""
        return options.api_key or self.api_key or os.environ.get(self.key_variable)

    def _make_client(self, model: Model, options: StreamOptions) -> tuple[Any, bool]:
        """``(client, owned)``: owned clients are closed at the end of the call."""
        if self.client is not None:
            return self.client, False
        client = getattr(self._sdk, self.client_class)(
            api_key=self._api_key(model, options),
            base_url=self.base_url or model.base_url or None,
            max_retries=self.max_retries,
            timeout=self.timeout,
        )
        return client, True

    @abstractmethod
    def build_payload(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> dict[str, Any]:
        """The request body, as a plain dict."""

    @abstractmethod
    async def _open(
        self, client: Any, model: Model, payload: dict[str, Any], options: StreamOptions
    ) -> Any:
        """Send the request; return the SDK's async stream."""

    @staticmethod
    def _create_arguments(
        model: Model, payload: dict[str, Any], options: StreamOptions, fields: tuple[str, ...]
    ) -> dict[str, Any]:
        """The keyword arguments of the SDK's streaming ``create`` call for ``payload``: its
        ``fields`` (read in this order) as arguments, ``stream=True``, the model's and the
        call's headers merged (the call's win), and the rest of the payload as the extra body
        (so that fields the SDK does not know still reach the server)."""
        arguments = {name: payload[name] for name in fields}
        headers = {**(model.headers or {}), **(options.headers or {})}
        extra = {k: v for k, v in payload.items() if k not in fields and k != "stream"}
        arguments.update(stream=True, extra_headers=headers or None, extra_body=extra or None)
        return arguments

    async def _run(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[Any]:
        builder = StreamBuilder(model)
        watch = AbortWatch(options.signal)
        client: Any = None
        owned = False
        stream: Any = None
        iterator: Any = None
        try:
            if watch.aborted:
                yield builder.aborted()
                return
            try:
                client, owned = self._make_client(model, options)
                payload = self.build_payload(model, context, options)
                if options.on_payload is not None:
                    replaced = await _maybe_await(options.on_payload(payload))
                    if replaced is not None:
                        payload = replaced
                with watch.scope():
                    stream = await self._open(client, model, payload, options)
                if watch.aborted:
                    await anyio.lowlevel.checkpoint()  # an outer cancellation wins
                    yield builder.aborted()
                    return
                if options.on_response is not None:
                    response = getattr(stream, "response", None)
                    await _maybe_await(
                        options.on_response(
                            {
                                "status": getattr(response, "status_code", None),
                                "headers": dict(getattr(response, "headers", {}) or {}),
                            }
                        )
                    )
                translator = self.translator_class(builder)
                yield builder.start()
                iterator = stream.__aiter__()
                while True:
                    with watch.scope():
                        chunk = await anext(iterator, _END)
                    if watch.aborted:
                        await anyio.lowlevel.checkpoint()
                        yield builder.aborted()
                        return
                    if chunk is _END:
                        break
                    for event in translator.feed(chunk):
                        yield event
                for event in translator.finish():
                    yield event
            except Exception as exc:
                if watch.aborted:
                    await anyio.lowlevel.checkpoint()
                    yield builder.aborted()
                else:
                    yield builder.failed(describe_error(exc), error_kind(exc))
        finally:
            watch.close()
            with anyio.CancelScope(shield=True):
                for closer in (
                    getattr(iterator, "aclose", None),
                    getattr(stream, "close", None),
                    getattr(client, "close", None) if owned else None,
                ):
                    if closer is None:
                        continue
                    try:
                        await _maybe_await(closer())
                    except Exception:
                        pass
