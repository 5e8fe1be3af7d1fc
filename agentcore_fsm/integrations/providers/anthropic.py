"""Anthropic Messages as a stream function.

Needs the ``anthropic`` package: ``pip install 'agentcore-fsm[anthropic]'``. Importing this
module never needs it; making a provider (or calling :func:`stream_anthropic`) without it raises
an :class:`ImportError` that says what to install.

::

    from agentcore_fsm.integrations.providers.anthropic import AnthropicProvider
    from agentcore_fsm.integrations.providers.models import get_model

    stream_fn = AnthropicProvider()         # key from options.api_key or ANTHROPIC_API_KEY
    model = get_model("anthropic", "claude-sonnet-4-6")
    config = AgentLoopConfig(model=model, reasoning="medium")   # thinking on
    await run_agent_loop(prompts, context, config, stream_fn=stream_fn)

What is sent
    The system prompt as a text block; user text and images (base64 ``image`` blocks; for a
    model whose ``input`` lacks "image", a short text note); assistant text, thinking and
    ``tool_use`` blocks; tool results as ``tool_result`` blocks, consecutive ones in one user
    message. Thinking goes back as a ``thinking`` block (``redacted_thinking`` when redacted)
    only when it carries a signature and came from this API, provider and model (newer models
    bind signed thinking to the model that wrote it); other thinking is sent as plain text.
    Tool-call ids are restricted to ``[a-zA-Z0-9_-]`` (64 characters), the same way for calls
    and results, so transcripts from other providers still pair up. Empty
    text blocks are left out (the API rejects them). The transcript is first made safe by
    :func:`~agentcore_fsm.integrations.providers._common.prepare_transcript` (failed assistant
    messages lose
    their tool calls). Tools carry ``AgentTool.json_schema()`` as
    ``input_schema``. With ``cache=True`` (the default) the system prompt and the last user
    message are marked ``cache_control: ephemeral``, so an agent's growing transcript is read
    from the prompt cache on each turn.

    ``max_tokens`` (required by the API) is ``options.max_tokens``, else ``model.max_tokens``,
    else 4096. Thinking is requested when ``options.reasoning`` is a level other than "off" and
    ``model.reasoning`` is true (with "off" nothing is sent, so a model whose thinking is always
    on keeps its default). Two request shapes exist, chosen by ``thinking_mode``:

    * ``"adaptive"`` — ``thinking: {"type": "adaptive"}`` and ``output_config: {"effort": ...}``
      with the level mapped by :data:`EFFORTS` ("minimal" → "low"). Claude 4.6 and later take
      this; the newest models take only this.
    * ``"budget"`` — ``thinking: {"type": "enabled", "budget_tokens": N}`` with N from
      ``options.thinking_budgets[level]`` or :data:`THINKING_BUDGETS`. When ``options.max_tokens``
      was given the budget is added to it (the answer keeps its own allowance); the total is
      capped at ``model.max_tokens`` and the budget lowered to fit below it, never under the
      API's minimum of 1024 (without room for that, thinking stays off). Claude 4.5 and older
      take only this.
    * ``"auto"`` (the default) — "budget" for the model families that need it (3.7 Sonnet, the
      4.0/4.1 models, Sonnet/Opus/Haiku 4.5), "adaptive" for every other model.

    ``temperature`` is not sent with thinking on (the API requires the default then).
    ``options.headers`` and ``model.headers`` are sent as extra headers; ``session_id``,
    ``transport`` and ``max_retry_delay_ms`` are not used (retries are the SDK's:
    ``max_retries``, honouring ``retry-after``).

What comes back
    ``text``, ``thinking`` (signatures from ``signature_delta`` are kept on the block),
    ``redacted_thinking`` (a thinking block with ``redacted=True`` and the data as its
    signature) and ``tool_use`` blocks (``input_json_delta`` fragments assembled and parsed when
    the block stops; see :func:`~agentcore_fsm.integrations.providers._common.parse_tool_arguments`
    for
    malformed JSON). Server-tool blocks are ignored. Stop reasons: ``end_turn``,
    ``stop_sequence``, ``pause_turn`` → "stop"; ``max_tokens``,
    ``model_context_window_exceeded`` → "length"; ``tool_use`` → "toolUse"; ``refusal`` → an
    error. An ``error`` event in the stream, or a stream that ends without ``message_stop``, is
    an error. Usage: input, output, cache reads and cache writes as reported (the latest
    ``message_delta`` counts win); cost from ``model.cost``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any, Literal, TypeAlias

from agentcore_fsm.core.config import LlmContext, StreamOptions
from agentcore_fsm.core.messages import (
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)
from agentcore_fsm.integrations.providers._common import (
    ChunkTranslator,
    SdkProvider,
    StreamBuilder,
    default_provider,
    prepare_transcript,
    safe_tool_id,
)
from agentcore_fsm.integrations.providers.models import ANTHROPIC_API
from agentcore_fsm.integrations.providers.output_modes import anthropic_output_fields

__all__ = [
    "API",
    "EFFORTS",
    "THINKING_BUDGETS",
    "AnthropicProvider",
    "ThinkingMode",
    "stream_anthropic",
    "thinking_settings",
]

ThinkingMode: TypeAlias = Literal["auto", "adaptive", "budget"]

API = ANTHROPIC_API
THINKING_BUDGETS: dict[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 24576,
    "max": 32000,
}
"""Default ``budget_tokens`` per thinking level (override with ``options.thinking_budgets``)."""
EFFORTS: dict[str, str] = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "max",
}
"""``output_config.effort`` per thinking level (adaptive thinking)."""
MIN_BUDGET = 1024
DEFAULT_MAX_TOKENS = 4096
IMAGE_OMITTED = "(image omitted: this model does not accept images)"
REFUSAL = "The model declined to answer (stop_reason 'refusal')"
INCOMPLETE = "The stream ended before the response was complete (no message_stop received)"
EPHEMERAL = {"type": "ephemeral"}


def _content_blocks(blocks: list[Any], images_ok: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextContent):
            if block.text:
                out.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageContent):
            if images_ok:
                out.append(
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": block.mime_type,
                            "data": block.data,
                        },
                    }
                )
            else:
                out.append({"type": "text", "text": IMAGE_OMITTED})
    return out


def _assistant_blocks(message: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    native = message.api == API and message.provider == model.provider and message.model == model.id
    out: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                out.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            if native and block.thinking_signature:
                if block.redacted:
                    out.append({"type": "redacted_thinking", "data": block.thinking_signature})
                else:
                    out.append(
                        {
                            "type": "thinking",
                            "thinking": block.thinking,
                            "signature": block.thinking_signature,
                        }
                    )
            elif block.thinking and not block.redacted:
                out.append({"type": "text", "text": block.thinking})
        else:
            out.append(
                {
                    "type": "tool_use",
                    "id": safe_tool_id(block.id),
                    "name": block.name,
                    "input": block.arguments,
                }
            )
    return out


def convert_messages(model: Model, context: LlmContext, cache: bool) -> list[dict[str, Any]]:
    """Our transcript as Messages API ``messages``."""
    images_ok = "image" in model.input
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None  # the open user message of tool results
    for message in prepare_transcript(context.messages):
        if isinstance(message, ToolResultMessage):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": safe_tool_id(message.tool_call_id),
            }
            content = _content_blocks(message.content, images_ok)
            if content:
                block["content"] = content
            if message.is_error:
                block["is_error"] = True
            if results is None:
                results = []
                out.append({"role": "user", "content": results})
            results.append(block)
            continue
        results = None
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                blocks = [{"type": "text", "text": message.content}] if message.content else []
            else:
                blocks = _content_blocks(message.content, images_ok)
            if blocks:
                out.append({"role": "user", "content": blocks})
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message, model)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
    if cache:
        for entry in reversed(out):
            if entry["role"] == "user":
                last = entry["content"][-1]
                entry["content"][-1] = {**last, "cache_control": EPHEMERAL}
                break
    return out


_BUDGET_ONLY = re.compile(
    r"claude-(3-7-sonnet|sonnet-4-0|sonnet-4-2025|opus-4-0|opus-4-2025|opus-4-1|"
    r"sonnet-4-5|opus-4-5|haiku-4-5)"
)
"""Models that take a thinking budget and not adaptive thinking (``thinking_mode="auto"``)."""


def thinking_settings(
    model: Model, options: StreamOptions, mode: ThinkingMode = "auto"
) -> tuple[int, dict[str, Any] | None, dict[str, Any] | None]:
    """``(max_tokens, thinking, output_config)`` for a request (see the module docstring)."""
    base = options.max_tokens or model.max_tokens or DEFAULT_MAX_TOKENS
    level = options.reasoning
    if not level or level == "off" or not model.reasoning:
        return base, None, None
    if mode == "auto":
        mode = "budget" if _BUDGET_ONLY.search(model.id) else "adaptive"
    if mode == "adaptive":
        return base, {"type": "adaptive"}, {"effort": EFFORTS.get(level, "medium")}
    budgets = {**THINKING_BUDGETS, **(options.thinking_budgets or {})}
    budget = budgets.get(level, THINKING_BUDGETS["medium"])
    if options.max_tokens:
        max_tokens = options.max_tokens + budget
    elif model.max_tokens:
        max_tokens = model.max_tokens
    else:
        max_tokens = DEFAULT_MAX_TOKENS + budget
    if model.max_tokens:
        max_tokens = min(max_tokens, model.max_tokens)
    budget = min(budget, max_tokens - 1)
    if budget < MIN_BUDGET:
        return max_tokens, None, None
    return max_tokens, {"type": "enabled", "budget_tokens": budget}, None


class _Translator(ChunkTranslator):
    def __init__(self, builder: StreamBuilder) -> None:
        super().__init__(builder)
        self.blocks: dict[int, int] = {}  # the API's block index -> content index
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, chunk: Any) -> list[Any]:
        b = self.b
        kind = getattr(chunk, "type", None)
        if kind == "message_start":
            self._usage(getattr(chunk.message, "usage", None))
            return []
        if kind == "content_block_start":
            block = chunk.content_block
            events = b.close_open()
            block_type = block.type
            if block_type == "text":
                events.append(b.open_text())
                self.blocks[chunk.index] = b.open_index or 0
                if block.text:
                    events.append(b.text_delta(self.blocks[chunk.index], block.text))
            elif block_type == "thinking":
                events.append(b.open_thinking(signature=getattr(block, "signature", None) or None))
                self.blocks[chunk.index] = b.open_index or 0
                if block.thinking:
                    events.append(b.thinking_delta(self.blocks[chunk.index], block.thinking))
            elif block_type == "redacted_thinking":
                events.append(b.open_thinking(signature=block.data, redacted=True))
                self.blocks[chunk.index] = b.open_index or 0
            elif block_type == "tool_use":
                events.append(b.open_tool_call(block.id, block.name))
                self.blocks[chunk.index] = b.open_index or 0
            return events
        if kind == "content_block_delta":
            index = self.blocks.get(chunk.index)
            if index is None:
                return []
            delta = chunk.delta
            delta_type = delta.type
            if delta_type == "text_delta":
                return [b.text_delta(index, delta.text)]
            if delta_type == "thinking_delta":
                return [b.thinking_delta(index, delta.thinking)]
            if delta_type == "signature_delta":
                block = b.content[index]
                block.thinking_signature = (block.thinking_signature or "") + delta.signature
                return []
            if delta_type == "input_json_delta":
                return [b.tool_call_delta(index, delta.partial_json)]
            return []
        if kind == "content_block_stop":
            index = self.blocks.get(chunk.index)
            if index is None or b.open_index != index:
                return []
            return [b.close(index)]
        if kind == "message_delta":
            reason = getattr(chunk.delta, "stop_reason", None)
            if reason:
                self.stop_reason = reason
            self._usage(getattr(chunk, "usage", None))
            return []
        if kind == "message_stop":
            self.stopped = True
        return []

    def _usage(self, usage: Any) -> None:
        if usage is None:
            return
        target = self.b.partial.usage
        for ours, theirs in (
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_write", "cache_creation_input_tokens"),
        ):
            value = getattr(usage, theirs, None)
            if isinstance(value, int):
                setattr(target, ours, value)

    def finish(self) -> list[Any]:
        b = self.b
        events = b.close_open()
        if not self.stopped:
            events.append(b.failed(INCOMPLETE, "server_error"))
            return events
        reason = self.stop_reason
        if reason == "refusal":
            events.append(b.failed(REFUSAL))
            return events
        stop: Literal["stop", "length", "toolUse"] = "stop"
        if reason in ("max_tokens", "model_context_window_exceeded"):
            stop = "length"
        elif reason == "tool_use":
            stop = "toolUse"
        events.append(b.done(stop))
        return events


class AnthropicProvider(SdkProvider):
    """Messages streaming through the ``anthropic`` SDK's async client (see the module
    docstring for the mapping).

    ``base_url``: this argument, else ``model.base_url``, else the SDK's default. ``api_key``:
    ``options.api_key``, else this argument, else ``ANTHROPIC_API_KEY``. ``client``: an
    ``anthropic.AsyncAnthropic`` to use for every call (then you close it); by default each
    call makes its own client and closes it. ``extra_body`` is merged into every request.
    ``cache`` marks the prompt-cache breakpoints; ``thinking_mode`` ("auto", "adaptive",
    "budget") picks the thinking request shape. ``max_retries`` and ``timeout`` (seconds) go to
    the SDK client.
    """

    api = API
    sdk_name = "anthropic"
    client_class = "AsyncAnthropic"
    key_variable = "ANTHROPIC_API_KEY"
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
        cache: bool = True,
        thinking_mode: ThinkingMode = "auto",
    ) -> None:
        super().__init__(
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            timeout=timeout,
            client=client,
            extra_body=extra_body,
        )
        self.cache = cache
        self.thinking_mode = thinking_mode

    def build_payload(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> dict[str, Any]:
        """The Messages request body for this call (``options.on_payload`` sees it, and may
        replace it, before it is sent)."""
        max_tokens, thinking, output_config = thinking_settings(model, options, self.thinking_mode)
        payload: dict[str, Any] = {
            "model": model.id,
            "max_tokens": max_tokens,
            "messages": convert_messages(model, context, self.cache),
            "stream": True,
        }
        if context.system_prompt:
            system: dict[str, Any] = {"type": "text", "text": context.system_prompt}
            if self.cache:
                system["cache_control"] = EPHEMERAL
            payload["system"] = [system]
        if context.tools:
            payload["tools"] = [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.json_schema(),
                }
                for tool in context.tools
            ]
        if thinking is not None:
            payload["thinking"] = thinking
            if output_config is not None:
                payload["output_config"] = output_config
        elif options.temperature is not None:
            payload["temperature"] = options.temperature
        payload.update(anthropic_output_fields(context, thinking is not None))  # output_modes.py
        payload.update(self.extra_body)
        return payload

    async def _open(
        self, client: Any, model: Model, payload: dict[str, Any], options: StreamOptions
    ) -> Any:
        fields = ("model", "max_tokens", "messages")
        return await client.messages.create(
            **self._create_arguments(model, payload, options, fields)
        )


def stream_anthropic(
    model: Model, context: LlmContext, options: StreamOptions
) -> AsyncIterator[Any]:
    """The stream function with default settings (a fresh client per call)."""
    return default_provider(AnthropicProvider)(model, context, options)
