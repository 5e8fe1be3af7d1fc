"""A deterministic, scripted stream function: the demo's model and the one to use in tests.

Queue assistant responses; each model call plays back the next one as a real stream (``start``,
``*_start``/``*_delta``/``*_end`` for every block in chunks of ``chunk_size`` characters, then
``done``), updating one partial message in place as a real provider does::

    faux = FauxProvider([
        faux_response(tool_calls=[faux_tool_call("add", {"a": 1, "b": 2})]),
        faux_response("The sum is 3."),
    ])
    await run_agent_loop(prompts, context, config, stream_fn=faux)

A response may also be a callable ``(llm_context) -> AssistantMessage`` (to answer from what the
model was sent), or a :class:`FauxError` to end the call with an ``error`` event. An exhausted
script ends each further call with the error ``No more faux responses queued``. The signal is
honoured between chunks: the call then ends with ``stop_reason="aborted"`` and
``error_message="Request was aborted"``. ``delay`` (seconds) sleeps before every chunk.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anyio

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
    AssistantMessage,
    ErrorKind,
    Model,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    grow_text,
)

__all__ = ["FauxError", "FauxProvider", "faux_response", "faux_tool_call"]

EXHAUSTED = "No more faux responses queued"


@dataclass
class FauxError:
    """A scripted failure: the call ends with an ``error`` event carrying ``message`` and, as
    a real provider's would, its ``kind`` (``AssistantMessage.error_kind``: "rate_limit",
    "overloaded", "server_error", "timeout", "context_overflow", ...; None: not known)."""

    message: str = "Faux provider error"
    kind: ErrorKind | None = None


FauxItem = AssistantMessage | FauxError | Callable[[LlmContext], "AssistantMessage | FauxError"]


def faux_tool_call(
    name: str, arguments: dict[str, Any] | None = None, id: str | None = None
) -> ToolCall:
    """A tool-call block. Without an ``id`` its id is left empty here and given when a
    :class:`FauxProvider` plays it: ``call_1``, ``call_2``, ... numbered per provider, in the
    order it plays them, so the same script gives the same ids whatever ran before."""
    return ToolCall(id="" if id is None else id, name=name, arguments=arguments or {})


def faux_response(
    text: str | None = None,
    *,
    thinking: str | None = None,
    tool_calls: Iterable[ToolCall] = (),
    stop_reason: StopReason | None = None,
    error_message: str | None = None,
    usage: Usage | None = None,
) -> AssistantMessage:
    """A scripted assistant message: thinking, then text, then tool calls. ``stop_reason``
    defaults to ``"toolUse"`` when there are tool calls, else ``"stop"``."""
    content: list[Any] = []
    if thinking is not None:
        content.append(ThinkingContent(thinking=thinking))
    if text is not None:
        content.append(TextContent(text=text))
    calls = list(tool_calls)
    content.extend(calls)
    return AssistantMessage(
        content=content,
        stop_reason=stop_reason or ("toolUse" if calls else "stop"),
        error_message=error_message,
        usage=usage or Usage(),
    )


class FauxProvider:
    """A stream function playing back a script (see the module docstring).

    ``responses`` are played one per model call; ``chunk_size`` is the length of each streamed
    delta; ``delay`` (seconds) sleeps before every chunk; ``send_start=False`` leaves the
    ``start`` event out (to test a stream function that forgets it). :attr:`calls` keeps the
    context of every call."""

    def __init__(
        self,
        responses: Iterable[FauxItem] = (),
        *,
        chunk_size: int = 8,
        delay: float = 0.0,
        send_start: bool = True,
    ) -> None:
        self.responses: deque[FauxItem] = deque(responses)
        self.chunk_size = max(1, chunk_size)
        self.delay = delay
        self.send_start = send_start
        self.calls: list[LlmContext] = []
        """The context of every call, in order (what the model was sent)."""
        self.tool_calls_played = 0
        """How many tool calls this provider has streamed (the number of the last ``call_N``
        id it gave a call scripted without one)."""

    def queue(self, *responses: FauxItem) -> None:
        """Add ``responses`` to the end of the script."""
        self.responses.extend(responses)

    def __call__(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[Any]:
        """Play the next scripted response as a stream (an error when none is left)."""
        self.calls.append(context)
        item: Any = self.responses.popleft() if self.responses else FauxError(EXHAUSTED)
        if callable(item) and not isinstance(item, (AssistantMessage, FauxError)):
            item = item(context)
        return self._play(model, item, options)

    def _chunks(self, text: str) -> list[str]:
        n = self.chunk_size
        return [text[i : i + n] for i in range(0, len(text), n)] or [""]

    async def _play(self, model: Model, item: Any, options: StreamOptions) -> AsyncIterator[Any]:
        signal = options.signal
        partial = AssistantMessage(
            api=model.api, provider=model.provider, model=model.id, stop_reason="pending"
        )

        def aborted() -> bool:
            return signal is not None and signal.aborted

        async def pause() -> None:
            if self.delay:
                await anyio.sleep(self.delay)

        def finish_aborted() -> StreamError:
            partial.stop_reason = "aborted"
            partial.error_message = "Request was aborted"
            return StreamError(reason="aborted", error=partial)

        if isinstance(item, FauxError):
            await pause()
            partial.stop_reason = "error"
            partial.error_message = item.message
            partial.error_kind = item.kind
            partial.content = [TextContent(text="")]
            yield StreamError(reason="error", error=partial)
            return
        await pause()
        if aborted():
            yield finish_aborted()
            return
        if self.send_start:
            yield StreamStart(partial=partial)
        content = partial.content
        for block in item.content:
            if not isinstance(block, (TextContent, ThinkingContent, ToolCall)):
                continue  # nothing else streams
            index = len(content)
            if isinstance(block, ToolCall):
                self.tool_calls_played += 1
                if not block.id:
                    block = block.model_copy(update={"id": f"call_{self.tool_calls_played}"})
            opened = _Opened(block)
            content.append(opened.part)
            yield opened.start(content_index=index, partial=partial)
            for chunk in self._chunks(opened.text):
                await pause()
                if aborted():
                    yield finish_aborted()
                    return
                opened.grow(chunk)
                yield opened.delta(content_index=index, delta=chunk, partial=partial)
            yield opened.end(index, partial)
        partial.usage = item.usage
        partial.stop_reason = item.stop_reason
        partial.error_message = item.error_message
        partial.error_kind = item.error_kind
        if item.stop_reason in ("error", "aborted"):
            yield StreamError(reason=item.stop_reason, error=partial)
        else:
            yield StreamDone(reason=item.stop_reason, message=partial)


class _Opened:
    """One block of a scripted answer as it streams: the ``part`` that grows in the partial
    message, the ``text`` streamed in chunks, its ``start``/``delta`` event classes, and how a
    chunk grows it and what ends it."""

    def __init__(self, block: Any) -> None:
        self.block = block
        self.part: Any
        self.start: Any
        self.delta: Any
        if isinstance(block, TextContent):
            self.part = TextContent(text="", text_signature=block.text_signature)
            self.text, self.start, self.delta = block.text, TextStart, TextDelta
        elif isinstance(block, ThinkingContent):
            self.part = ThinkingContent(thinking="", thinking_signature=block.thinking_signature)
            self.text, self.start, self.delta = block.thinking, ThinkingStart, ThinkingDelta
        elif isinstance(block, ToolCall):
            self.part = ToolCall(id=block.id, name=block.name, arguments={})
            self.text = json.dumps(block.arguments)
            self.start, self.delta = ToolCallStart, ToolCallDelta
        else:  # pragma: no cover - the caller streams only these three
            raise TypeError(f"a scripted answer cannot stream a {type(block).__name__} block")

    def grow(self, chunk: str) -> None:
        part = self.part
        if isinstance(part, (TextContent, ThinkingContent)):
            grow_text(part, chunk)

    def end(self, index: int, partial: AssistantMessage) -> Any:
        part = self.part
        if isinstance(part, TextContent):
            return TextEnd(content_index=index, content=part.text, partial=partial)
        if isinstance(part, ThinkingContent):
            return ThinkingEnd(content_index=index, content=part.thinking, partial=partial)
        part.arguments = self.block.arguments  # parsed once the whole text has streamed
        return ToolCallEnd(content_index=index, tool_call=part, partial=partial)
