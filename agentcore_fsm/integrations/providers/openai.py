"""OpenAI Chat Completions (and every server that speaks it) as a stream function.

Works with OpenAI and with OpenAI-compatible servers: vLLM, Ollama, llama.cpp's server,
LM Studio, OpenRouter, ... Needs the ``openai`` package: ``pip install 'agentcore-fsm[openai]'``.
Importing this module never needs it; making a provider (or calling :func:`stream_openai`)
without it raises an :class:`ImportError` that says what to install.

::

    from agentcore_fsm.integrations.providers.models import get_model
    from agentcore_fsm.integrations.providers.openai import OpenAIProvider

    stream_fn = OpenAIProvider()            # key from options.api_key or OPENAI_API_KEY
    model = get_model("openai", "gpt-4o-mini")
    await run_agent_loop(prompts, context, AgentLoopConfig(model=model), stream_fn=stream_fn)

What is sent
    The system prompt as a ``system`` message; user text and images (``image_url`` data URLs;
    an image for a model whose ``input`` lacks "image" becomes a short text note); assistant
    text and tool calls (thinking is not sent back: Chat Completions has no field for it);
    tool results as ``tool`` messages (text only, which is all the API takes there — their
    images follow in one ``user`` message). The transcript is first made safe by
    :func:`~agentcore_fsm.integrations.providers._common.prepare_transcript` (failed assistant
    messages lose
    their tool calls). Tools are ``function`` tools with ``AgentTool.json_schema()`` as
    parameters. ``stream_options.include_usage`` is on.
    ``options.reasoning`` becomes ``reasoning_effort`` (same level names) for a model with
    ``reasoning=True``; ``options.max_tokens`` becomes ``max_completion_tokens`` for the
    "openai" provider and ``max_tokens`` for other servers (override with ``max_tokens_field``).
    ``options.headers`` and ``model.headers`` are sent as extra headers.
    ``options.session_id``, ``transport``, ``thinking_budgets`` and ``max_retry_delay_ms`` are
    not used by this API (retries are the SDK's: ``max_retries``, honouring ``retry-after``).

What comes back
    ``content`` deltas become a text block, ``reasoning_content`` / ``reasoning`` deltas (sent by
    DeepSeek, vLLM, Ollama, OpenRouter, ...) a thinking block, ``refusal`` deltas text, and each
    tool-call index a tool-call block whose argument fragments are assembled and parsed when the
    block ends (see :func:`~agentcore_fsm.integrations.providers._common.parse_tool_arguments` for
    malformed
    JSON). Blocks never interleave: a block ends when another kind of delta arrives; a fragment
    for a tool call that already ended is added to its arguments without an event. Finish
    reasons: ``stop`` → "stop" ("toolUse" when the message has tool calls, as some servers say
    ``stop`` then), ``length`` → "length", ``tool_calls``/``function_call`` → "toolUse",
    ``content_filter`` → an error; unknown reasons → "stop". A stream that ends without a finish
    reason is an error. Usage: ``input`` = prompt tokens minus cached ones, ``cache_read`` =
    cached tokens, ``cache_write`` where the server reports it, ``output`` = completion tokens;
    cost from ``model.cost``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from agentcore_fsm.core.config import LlmContext, StreamOptions
from agentcore_fsm.core.messages import (
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from agentcore_fsm.integrations.providers._common import (
    ChunkTranslator,
    SdkProvider,
    StreamBuilder,
    default_provider,
    parse_tool_arguments,
    prepare_transcript,
)
from agentcore_fsm.integrations.providers.models import OPENAI_API
from agentcore_fsm.integrations.providers.output_modes import openai_output_fields

__all__ = ["API", "OpenAIProvider", "stream_openai"]

API = OPENAI_API
IMAGE_OMITTED = "(image omitted: this model does not accept images)"
CONTENT_FILTER = (
    "The response was stopped by the provider's content filter (finish_reason 'content_filter')"
)
INCOMPLETE = "The stream ended before the response was complete (no finish_reason received)"
PLACEHOLDER_KEY = "not-needed"


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"},
    }


def _user_content(message: UserMessage, images_ok: bool) -> str | list[dict[str, Any]] | None:
    if isinstance(message.content, str):
        return message.content
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                parts.append({"type": "text", "text": block.text})
        elif images_ok:
            parts.append(_image_part(block))
        else:
            parts.append({"type": "text", "text": IMAGE_OMITTED})
    return parts or None


def convert_messages(model: Model, context: LlmContext) -> list[dict[str, Any]]:
    """Our transcript as Chat Completions ``messages``."""
    images_ok = "image" in model.input
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        out.append({"role": "system", "content": context.system_prompt})
    pending_images: list[dict[str, Any]] = []

    def flush_images() -> None:
        if pending_images:
            out.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Images returned by the tools:"},
                        *pending_images,
                    ],
                }
            )
            pending_images.clear()

    for message in prepare_transcript(context.messages):
        if isinstance(message, ToolResultMessage):
            texts = [b.text for b in message.content if isinstance(b, TextContent)]
            images = [b for b in message.content if isinstance(b, ImageContent)]
            text = "\n".join(texts)
            if images:
                if images_ok:
                    pending_images.extend(_image_part(i) for i in images)
                    text = text or "(see the attached image)"
                else:
                    text = "\n".join([*texts, IMAGE_OMITTED])
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": text})
            continue
        flush_images()
        if isinstance(message, UserMessage):
            content = _user_content(message, images_ok)
            if content is not None:
                out.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            text = "".join(b.text for b in message.content if isinstance(b, TextContent))
            calls = message.tool_calls()
            if not text and not calls:
                continue
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in calls
                ]
            out.append(entry)
    flush_images()
    return out


class _Translator(ChunkTranslator):
    def __init__(self, builder: StreamBuilder) -> None:
        super().__init__(builder)
        self.kind: str | None = None  # "text" | "thinking" | "tool" (the open block's kind)
        self.tool_blocks: dict[int, int] = {}  # tool-call index -> content index
        self.open_tool: int | None = None  # tool-call index of the open block
        self.finish_reason: str | None = None
        self.late: set[int] = set()  # content indexes of tool calls that got late fragments

    def _open_kind(self, kind: str, events: list[Any]) -> int:
        """Make sure a text or thinking block is the open one; return its content index."""
        b = self.b
        if self.kind != kind or b.open_index is None:
            events.extend(b.close_open())
            events.append(b.open_text() if kind == "text" else b.open_thinking())
            self.kind = kind
            self.open_tool = None
        assert b.open_index is not None
        return b.open_index

    def feed(self, chunk: Any) -> list[Any]:
        events: list[Any] = []
        b = self.b
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self._usage(usage)
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) not in (0, None):
                continue
            delta = choice.delta
            if delta is not None:
                reasoning = getattr(delta, "reasoning_content", None) or getattr(
                    delta, "reasoning", None
                )
                if isinstance(reasoning, str) and reasoning:
                    index = self._open_kind("thinking", events)
                    events.append(b.thinking_delta(index, reasoning))
                for text in (delta.content, getattr(delta, "refusal", None)):
                    if isinstance(text, str) and text:
                        index = self._open_kind("text", events)
                        events.append(b.text_delta(index, text))
                for call in delta.tool_calls or []:
                    self._tool_delta(call, events)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return events

    def _tool_delta(self, call: Any, events: list[Any]) -> None:
        b = self.b
        key = call.index if call.index is not None else len(self.tool_blocks)
        function = call.function
        name = (function.name if function is not None else None) or ""
        arguments = (function.arguments if function is not None else None) or ""
        index = self.tool_blocks.get(key)
        if index is None:
            events.extend(b.close_open())
            events.append(b.open_tool_call(call.id or f"call_{uuid.uuid4().hex[:24]}", name))
            index = self.tool_blocks[key] = len(b.content) - 1
            self.kind = "tool"
            self.open_tool = key
        elif key != self.open_tool:
            b.raw_arguments[index] += arguments  # a late fragment: no event after the end
            self.late.add(index)
            return
        block = b.content[index]
        if call.id and not block.id:
            block.id = call.id
        if name and not block.name:
            block.name = name
        if arguments:
            events.append(b.tool_call_delta(index, arguments))

    def _usage(self, usage: Any) -> None:
        target = self.b.partial.usage
        prompt = getattr(usage, "prompt_tokens", None) or 0
        details = getattr(usage, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
        written = (getattr(details, "cache_write_tokens", None) or 0) if details is not None else 0
        target.cache_read = cached
        target.cache_write = written
        target.input = max(0, prompt - cached - written)
        target.output = getattr(usage, "completion_tokens", None) or 0

    def finish(self) -> list[Any]:
        b = self.b
        events = b.close_open()
        # fragments that arrived after their block ended: parse the complete text again
        for index in self.late:
            b.content[index].arguments = parse_tool_arguments(b.raw_arguments[index])
        reason = self.finish_reason
        if reason is None:
            events.append(b.failed(INCOMPLETE, "server_error"))
            return events
        if reason == "content_filter":
            events.append(b.failed(CONTENT_FILTER))
            return events
        stop: Literal["stop", "length", "toolUse"]
        if reason == "length":
            stop = "length"
        elif reason in ("tool_calls", "function_call"):
            stop = "toolUse"
        else:
            stop = "toolUse" if b.partial.tool_calls() else "stop"
        events.append(b.done(stop))
        return events


class OpenAIProvider(SdkProvider):
    """Chat Completions streaming through the ``openai`` SDK's async client (see the module
    docstring for the mapping).

    ``base_url``: this argument, else ``model.base_url``, else the SDK's default (OpenAI).
    ``api_key``: ``options.api_key`` (what the loop got from ``get_api_key``/``api_key``), else
    this argument, else ``OPENAI_API_KEY``; for a model whose provider is not "openai" (a local
    server) a placeholder is sent when there is none. ``client``: an ``openai.AsyncOpenAI`` to
    use for every call (then you close it); by default each call makes its own client and closes
    it. ``extra_body`` is merged into every request (server-specific fields).
    ``include_usage=False`` leaves ``stream_options`` out, for servers that reject it.
    ``max_tokens_field`` forces the name of the output-limit field. ``max_retries`` and
    ``timeout`` (seconds) go to the SDK client.
    """

    api = API
    sdk_name = "openai"
    client_class = "AsyncOpenAI"
    key_variable = "OPENAI_API_KEY"
    translator_class = _Translator

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float | None = 600.0,
        client: Any = None,
        extra_body: dict[str, Any] | None = None,
        include_usage: bool = True,
        max_tokens_field: Literal["max_completion_tokens", "max_tokens"] | None = None,
    ) -> None:
        super().__init__(
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            timeout=timeout,
            client=client,
            extra_body=extra_body,
        )
        self.include_usage = include_usage
        self.max_tokens_field = max_tokens_field

    def _api_key(self, model: Model, options: StreamOptions) -> str | None:
        key = super()._api_key(model, options)
        if not key and model.provider != "openai":
            key = PLACEHOLDER_KEY
        return key

    def build_payload(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> dict[str, Any]:
        """The Chat Completions request body for this call (``options.on_payload`` sees it,
        and may replace it, before it is sent)."""
        payload: dict[str, Any] = {
            "model": model.id,
            "messages": convert_messages(model, context),
            "stream": True,
        }
        if self.include_usage:
            payload["stream_options"] = {"include_usage": True}
        if context.tools:
            payload["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.json_schema(),
                    },
                }
                for tool in context.tools
            ]
        if options.max_tokens is not None:
            field = self.max_tokens_field or (
                "max_completion_tokens" if model.provider == "openai" else "max_tokens"
            )
            payload[field] = options.max_tokens
        if options.temperature is not None:
            payload["temperature"] = options.temperature
        if options.reasoning and options.reasoning != "off" and model.reasoning:
            payload["reasoning_effort"] = options.reasoning
        payload.update(openai_output_fields(context))  # structured output (output_modes.py)
        payload.update(self.extra_body)
        return payload

    async def _open(
        self, client: Any, model: Model, payload: dict[str, Any], options: StreamOptions
    ) -> Any:
        fields = ("model", "messages")
        return await client.chat.completions.create(
            **self._create_arguments(model, payload, options, fields)
        )


def stream_openai(model: Model, context: LlmContext, options: StreamOptions) -> AsyncIterator[Any]:
    """The stream function with default settings (a fresh client per call)."""
    return default_provider(OpenAIProvider)(model, context, options)
