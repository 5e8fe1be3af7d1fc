"""The Anthropic Messages stream function, through the real ``anthropic`` SDK client, against a
local server that streams the documented Messages SSE events from fixtures."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest
from _provider_helpers import assert_one_partial, collect, dump, final, summary
from _provider_sse_server import Reply, ScriptedServer
from pydantic import BaseModel

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.config import LlmContext, StreamOptions
from agentcore_fsm.core.messages import Cost, ModelCost, ThinkingContent, Usage
from agentcore_fsm.integrations.providers.anthropic import AnthropicProvider, stream_anthropic

pytestmark = pytest.mark.anyio

ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
EPHEMERAL = {"type": "ephemeral"}


class WeatherParams(BaseModel):
    city: str


async def _add(call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> Any:
    return AgentToolResult(content=[TextContent(text=str(params["a"] + params["b"]))])


async def _weather(call_id: str, params: WeatherParams, signal: Any, on_update: Any) -> Any:
    return AgentToolResult(content=[TextContent(text=f"Sunny in {params.city}")])


ADD = AgentTool(name="add", description="Add two numbers.", parameters=ADD_SCHEMA, execute=_add)
WEATHER = AgentTool(
    name="get_weather",
    description="Weather for a city.",
    parameters=WeatherParams,
    execute=_weather,
)


def model_for(server: ScriptedServer, **changes: Any) -> Model:
    fields: dict[str, Any] = {
        "id": "claude-haiku-4-5",
        "api": "anthropic-messages",
        "provider": "anthropic",
        "base_url": server.url,
        "reasoning": True,
        "input": ["text", "image"],
        "cost": ModelCost(input=3.0, output=15.0, cache_read=0.30, cache_write=3.75),
        "context_window": 200_000,
        "max_tokens": 64_000,
    }
    fields.update(changes)
    return Model(**fields)


def provider(**kwargs: Any) -> AnthropicProvider:
    kwargs.setdefault("api_key", "test-key")
    kwargs.setdefault("max_retries", 0)
    return AnthropicProvider(**kwargs)


def hello() -> LlmContext:
    return LlmContext("You are terse.", [UserMessage(content="Say hello", timestamp=1)], [])


def expected(content: list[Any], stop_reason: str, usage: Usage | None = None, **kw: Any) -> Any:
    message = AssistantMessage(
        content=content,
        api="anthropic-messages",
        provider="anthropic",
        model="claude-haiku-4-5",
        usage=usage or Usage(),
        stop_reason=stop_reason,  # type: ignore[arg-type]
        **kw,
    )
    return dump(message)


def without_usage(data: Any) -> Any:
    data.pop("usage")
    return data


# --- streams --------------------------------------------------------------------------------


async def test_text_stream_usage_cost_and_request(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/text.sse"))
    events = await collect(provider(), model_for(server), hello())
    assert summary(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hello"),
        ("text_delta", 0, ", world"),
        ("text_delta", 0, "!"),
        ("text_end", 0, "Hello, world!"),
        ("done", "stop"),
    ]
    assert_one_partial(events)
    costs = {
        "input": 12 * 3e-6,
        "output": 15 * 15e-6,
        "read": 2048 * 0.3e-6,
        "write": 310 * 3.75e-6,
    }
    usage = Usage(
        input=12,
        output=15,
        cache_read=2048,
        cache_write=310,
        total_tokens=12 + 15 + 2048 + 310,
        cost=Cost(
            input=costs["input"],
            output=costs["output"],
            cache_read=costs["read"],
            cache_write=costs["write"],
            total=sum(costs.values()),
        ),
    )
    got = dump(final(events))
    want = expected([TextContent(text="Hello, world!")], "stop", usage)
    assert got["usage"].pop("cost") == pytest.approx(want["usage"].pop("cost"))
    assert got == want
    (request,) = server.requests
    assert request.method == "POST" and request.path == "/v1/messages"
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.body == {
        "model": "claude-haiku-4-5",
        "max_tokens": 64_000,
        "stream": True,
        "system": [{"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Say hello", "cache_control": EPHEMERAL}],
            }
        ],
    }


async def test_multiple_tool_calls(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/tool_calls.sse"))
    events = await collect(provider(), model_for(server), hello())
    first_id, second_id = "toolu_01A09q90qw90lq917835lq9", "toolu_01B19r91rx91mr928946mr0"
    assert summary(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Checking both."),
        ("text_end", 0, "Checking both."),
        ("toolcall_start", 1),
        ("toolcall_delta", 1, ""),
        ("toolcall_delta", 1, '{"city": "Pa'),
        ("toolcall_delta", 1, 'ris"}'),
        ("toolcall_end", 1, first_id, "get_weather", {"city": "Paris"}),
        ("toolcall_start", 2),
        ("toolcall_delta", 2, '{"a": 2,'),
        ("toolcall_delta", 2, ' "b": 3}'),
        ("toolcall_end", 2, second_id, "add", {"a": 2, "b": 3}),
        ("done", "toolUse"),
    ]
    assert_one_partial(events)
    message = final(events)
    assert message.usage.input == 400 and message.usage.output == 89
    assert without_usage(dump(message)) == without_usage(
        expected(
            [
                TextContent(text="Checking both."),
                ToolCall(id=first_id, name="get_weather", arguments={"city": "Paris"}),
                ToolCall(id=second_id, name="add", arguments={"a": 2, "b": 3}),
            ],
            "toolUse",
        )
    )


async def test_thinking_with_signature_and_redacted_thinking(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/thinking.sse"))
    opts = StreamOptions(reasoning="medium", temperature=0.5)
    events = await collect(provider(), model_for(server), hello(), opts)
    assert summary(events) == [
        ("start",),
        ("thinking_start", 0),
        ("thinking_delta", 0, "The user greets me. "),
        ("thinking_delta", 0, "Reply briefly."),
        ("thinking_end", 0, "The user greets me. Reply briefly."),
        ("thinking_start", 1),
        ("thinking_end", 1, ""),
        ("text_start", 2),
        ("text_delta", 2, "Hi!"),
        ("text_end", 2, "Hi!"),
        ("done", "stop"),
    ]
    assert without_usage(dump(final(events))) == without_usage(
        expected(
            [
                ThinkingContent(
                    thinking="The user greets me. Reply briefly.", thinking_signature=SIGNATURE
                ),
                ThinkingContent(thinking="", thinking_signature=REDACTED, redacted=True),
                TextContent(text="Hi!"),
            ],
            "stop",
        )
    )
    body = server.bodies()[0]
    # thinking on: the default medium budget; no temperature (the API requires the default)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 64_000
    assert "temperature" not in body


@pytest.mark.parametrize(
    ("options", "model_changes", "max_tokens", "thinking"),
    [
        (StreamOptions(), {}, 64_000, None),
        (StreamOptions(reasoning="off"), {}, 64_000, None),
        (StreamOptions(reasoning="high"), {"reasoning": False}, 64_000, None),
        (StreamOptions(reasoning="low", max_tokens=1000), {}, 3048, 2048),
        (
            StreamOptions(reasoning="high", thinking_budgets={"high": 5000}, max_tokens=100),
            {},
            5100,
            5000,
        ),
        (StreamOptions(reasoning="max"), {"max_tokens": 8192}, 8192, 8191),
        (StreamOptions(reasoning="minimal"), {"max_tokens": 1024}, 1024, None),
        (StreamOptions(reasoning="medium"), {"max_tokens": 0}, 4096 + 8192, 8192),
        (StreamOptions(max_tokens=333, temperature=0.3), {}, 333, None),
    ],
)
async def test_max_tokens_and_thinking_budgets(
    server: ScriptedServer,
    options: StreamOptions,
    model_changes: dict[str, Any],
    max_tokens: int,
    thinking: int | None,
) -> None:
    server.queue(Reply(sse="anthropic/text.sse"))
    await collect(provider(), model_for(server, **model_changes), hello(), options)
    (body,) = server.bodies()
    assert body["max_tokens"] == max_tokens
    if thinking is None:
        assert "thinking" not in body
    else:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": thinking}
    assert "output_config" not in body
    if options.temperature is not None:
        assert body["temperature"] == options.temperature


@pytest.mark.parametrize(
    ("model_id", "mode", "level", "thinking", "effort"),
    [
        ("claude-opus-5-5", "auto", "minimal", {"type": "adaptive"}, "low"),
        ("claude-sonnet-4-6", "auto", "xhigh", {"type": "adaptive"}, "xhigh"),
        ("claude-opus-4-6", "auto", "max", {"type": "adaptive"}, "max"),
        ("claude-haiku-4-5", "adaptive", "medium", {"type": "adaptive"}, "medium"),
        ("claude-opus-4-6", "budget", "low", {"type": "enabled", "budget_tokens": 2048}, None),
        (
            "claude-opus-4-1-20250805",
            "auto",
            "low",
            {"type": "enabled", "budget_tokens": 2048},
            None,
        ),
    ],
)
async def test_adaptive_or_budget_thinking(
    server: ScriptedServer,
    model_id: str,
    mode: Any,
    level: Any,
    thinking: dict[str, Any],
    effort: str | None,
) -> None:
    server.queue(Reply(sse="anthropic/text.sse"))
    opts = StreamOptions(reasoning=level, temperature=0.7)
    await collect(provider(thinking_mode=mode), model_for(server, id=model_id), hello(), opts)
    (body,) = server.bodies()
    assert body["thinking"] == thinking
    assert body["max_tokens"] == 64_000
    assert "temperature" not in body
    if effort is None:
        assert "output_config" not in body
    else:
        assert body["output_config"] == {"effort": effort}


async def test_max_tokens_stop_reason(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/max_tokens.sse"))
    events = await collect(provider(), model_for(server), hello())
    assert summary(events)[-2:] == [("text_end", 0, "This answer is cut"), ("done", "length")]


async def test_refusal_is_an_error(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/refusal.sse"))
    events = await collect(provider(), model_for(server), hello())
    assert summary(events)[-1] == (
        "error",
        "error",
        "The model declined to answer (stop_reason 'refusal')",
    )
    assert final(events).content == [TextContent(text="I can't")]


async def test_malformed_tool_json(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/malformed_tool.sse"))
    events = await collect(provider(), model_for(server), hello())
    kinds = summary(events)
    assert kinds[:4] == [
        ("start",),
        ("toolcall_start", 0),
        ("toolcall_delta", 0, '{"a": 2, "b": '),
        ("toolcall_delta", 0, "3"),
    ]
    assert kinds[-1] == ("done", "toolUse")
    call = final(events).content[0]
    assert isinstance(call, ToolCall)
    assert call.arguments["_raw_arguments"] == '{"a": 2, "b": 3'
    assert call.arguments["_arguments_error"].startswith("invalid JSON: ")


async def test_malformed_tool_json_fails_validation_in_the_loop(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/malformed_tool.sse"), Reply(sse="anthropic/final_text.sse"))
    new = await run_agent_loop(
        [UserMessage(content="2+3?")],
        AgentContext("", [], [ADD]),
        AgentLoopConfig(model=model_for(server)),
        stream_fn=provider(),
    )
    result = new[2]
    assert isinstance(result, ToolResultMessage) and result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith('Validation failed for tool "add":\n')
    assert '"_raw_arguments": "{\\"a\\": 2, \\"b\\": 3"' in text
    sent = server.bodies()[1]["messages"]
    assert sent[1]["content"][0]["input"]["_raw_arguments"] == '{"a": 2, "b": 3'
    (block,) = sent[2]["content"]
    assert block["type"] == "tool_result" and block["tool_use_id"] == "toolu_bad"
    assert block["is_error"] is True
    assert block["content"][0]["text"].startswith('Validation failed for tool "add":')


# --- failures -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "fixture", "message"),
    [
        (
            400,
            "anthropic/error_400.json",
            "HTTP 400 (invalid_request_error): messages.1.content.0.tool_use.id: "
            "String should match pattern '^[a-zA-Z0-9_-]+$'",
        ),
        (
            429,
            "anthropic/error_429.json",
            "HTTP 429 (rate_limit_error): This request would exceed the rate limit for your "
            "organization of 50 input tokens per minute.",
        ),
        (500, "anthropic/error_500.json", "HTTP 500 (api_error): Internal server error"),
        (529, "anthropic/error_529.json", "HTTP 529 (overloaded_error): Overloaded"),
    ],
)
async def test_http_errors(server: ScriptedServer, status: int, fixture: str, message: str) -> None:
    server.queue(Reply(status=status, body=fixture))
    events = await collect(provider(), model_for(server), hello())
    assert summary(events) == [("error", "error", message)]
    kind = {400: "invalid_request", 429: "rate_limit", 500: "server_error", 529: "overloaded"}
    assert dump(final(events)) == expected(
        [], "error", error_message=message, error_kind=kind[status]
    )
    assert len(server.requests) == 1


async def test_retries_are_the_sdks(server: ScriptedServer) -> None:
    server.queue(
        Reply(status=529, body="anthropic/error_529.json", headers={"retry-after-ms": "1"}),
        Reply(sse="anthropic/text.sse"),
    )
    events = await collect(provider(max_retries=1), model_for(server), hello())
    assert summary(events)[-1] == ("done", "stop")
    assert len(server.requests) == 2


async def test_error_event_inside_the_stream(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/stream_error.sse"))
    events = await collect(provider(), model_for(server), hello())
    message = "Stream error (overloaded_error): Overloaded"
    assert summary(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hel"),
        ("error", "error", message),
    ]
    assert without_usage(dump(final(events))) == without_usage(
        expected([TextContent(text="Hel")], "error", error_message=message, error_kind="overloaded")
    )


async def test_stream_cut_mid_way(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/cut.sse"))
    events = await collect(provider(), model_for(server), hello())
    kinds = summary(events)
    assert kinds[:-1] == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hello"),
        ("text_delta", 0, " wor"),
    ]
    assert kinds[-1][:2] == ("error", "error")
    message = final(events)
    assert message.error_message is not None
    assert message.error_message.startswith("Connection error: ")
    assert message.content == [TextContent(text="Hello wor")]
    assert message.stop_reason == "error"


async def test_stream_ending_without_message_stop(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/no_stop.sse"))
    events = await collect(provider(), model_for(server), hello())
    assert summary(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hello"),
        ("text_delta", 0, " wor"),
        ("text_end", 0, "Hello wor"),
        (
            "error",
            "error",
            "The stream ended before the response was complete (no message_stop received)",
        ),
    ]


async def test_abort_mid_stream_cancels_the_http_stream(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/abort.sse"))
    controller = AbortController()
    events: list[Any] = []
    stream = provider()(model_for(server), hello(), StreamOptions(signal=controller.signal))
    async for event in stream:
        events.append(event)
        if event.type == "text_delta" and event.delta == ", two":
            controller.abort()
    assert summary(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Counting: one"),
        ("text_delta", 0, ", two"),
        ("error", "aborted", "Request was aborted"),
    ]
    message = final(events)
    assert message.content == [TextContent(text="Counting: one, two")]
    assert message.stop_reason == "aborted" and message.error_message == "Request was aborted"
    assert message.usage.input == 25  # what message_start reported is kept
    assert await anyio.to_thread.run_sync(server.disconnected.wait, 10)


async def test_abort_while_waiting_for_the_response(server: ScriptedServer) -> None:
    server.queue(Reply(hold=True))
    controller = AbortController()

    async def abort_once_the_server_holds_the_request() -> None:
        await anyio.to_thread.run_sync(server.waiting.wait, 10)
        controller.abort()

    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_once_the_server_holds_the_request)
        events = await collect(
            provider(), model_for(server), hello(), StreamOptions(signal=controller.signal)
        )
    assert summary(events) == [("error", "aborted", "Request was aborted")]
    assert final(events).content == []
    assert await anyio.to_thread.run_sync(server.disconnected.wait, 10)


async def test_abort_before_the_request(server: ScriptedServer) -> None:
    controller = AbortController()
    controller.abort()
    events = await collect(
        provider(), model_for(server), hello(), StreamOptions(signal=controller.signal)
    )
    assert summary(events) == [("error", "aborted", "Request was aborted")]
    assert server.requests == []


async def test_abort_in_the_agent_loop(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/abort.sse"))
    controller = AbortController()

    def emit(event: Any) -> None:
        if event.type == "message_update":
            inner = event.assistant_message_event
            if inner.type == "text_delta" and inner.delta == ", two":
                controller.abort()

    new = await run_agent_loop(
        [UserMessage(content="count")],
        AgentContext("", [], []),
        AgentLoopConfig(model=model_for(server)),
        emit,
        signal=controller.signal,
        stream_fn=provider(),
    )
    last = new[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "aborted" and last.error_message == "Request was aborted"
    assert last.content == [TextContent(text="Counting: one, two")]
    assert await anyio.to_thread.run_sync(server.disconnected.wait, 10)


# --- request mapping ------------------------------------------------------------------------


async def test_request_maps_messages_and_tools(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/text.sse"))
    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    source = {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="}
    messages: list[Any] = [
        UserMessage(content=[TextContent(text="What is this?"), image, TextContent(text="")]),
        AssistantMessage(
            api="anthropic-messages",
            provider="anthropic",
            model="claude-haiku-4-5",
            content=[
                ThinkingContent(thinking="hmm", thinking_signature="sig-1"),
                ThinkingContent(thinking="", thinking_signature="opaque", redacted=True),
                TextContent(text="Let me check."),
                ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Oslo"}),
                ToolCall(id="call|2", name="add", arguments={"a": 1, "b": 2}),
            ],
            stop_reason="toolUse",
        ),
        ToolResultMessage(
            tool_call_id="toolu_1",
            tool_name="get_weather",
            content=[TextContent(text="Rain"), image],
        ),
        ToolResultMessage(
            tool_call_id="call|2", tool_name="add", content=[TextContent(text="3")], is_error=True
        ),
        # from another provider: its thinking has no valid signature here, so it becomes text
        AssistantMessage(
            api="openai-completions",
            provider="openai",
            content=[ThinkingContent(thinking="thought elsewhere"), TextContent(text="Done.")],
        ),
        # from another Claude model: its signed thinking is bound to that model
        AssistantMessage(
            api="anthropic-messages",
            provider="anthropic",
            model="claude-opus-4-6",
            content=[
                ThinkingContent(thinking="other model", thinking_signature="sig-2"),
                ThinkingContent(thinking="", thinking_signature="opaque-2", redacted=True),
                TextContent(text="Also done."),
            ],
        ),
        UserMessage(content="and now?"),
        # a failed message: its tool call was never run and is left out, its text kept
        AssistantMessage(
            content=[TextContent(text="Partial"), ToolCall(id="toolu_9", name="add")],
            stop_reason="error",
            error_message="HTTP 500",
        ),
        UserMessage(content="try again"),
    ]
    context = LlmContext("Be helpful.", messages, [WEATHER, ADD])
    opts = StreamOptions(api_key="from-options", headers={"x-trace": "1"})
    await collect(provider(), model_for(server, headers={"x-model": "m"}), context, opts)
    (request,) = server.requests
    assert request.headers["authorization"] == "Bearer from-options"
    assert request.headers["x-trace"] == "1" and request.headers["x-model"] == "m"
    assert request.body == {
        "model": "claude-haiku-4-5",
        "max_tokens": 64_000,
        "stream": True,
        "system": [{"type": "text", "text": "Be helpful.", "cache_control": EPHEMERAL}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image", "source": source},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    },
                    {"type": "tool_use", "id": "call_2", "name": "add", "input": {"a": 1, "b": 2}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [
                            {"type": "text", "text": "Rain"},
                            {"type": "image", "source": source},
                        ],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_2",
                        "content": [{"type": "text", "text": "3"}],
                        "is_error": True,
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "thought elsewhere"},
                    {"type": "text", "text": "Done."},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "other model"},
                    {"type": "text", "text": "Also done."},
                ],
            },
            {"role": "user", "content": [{"type": "text", "text": "and now?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Partial"}]},
            {
                "role": "user",
                "content": [{"type": "text", "text": "try again", "cache_control": EPHEMERAL}],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city.",
                "input_schema": WeatherParams.model_json_schema(),
            },
            {"name": "add", "description": "Add two numbers.", "input_schema": ADD_SCHEMA},
        ],
    }


async def test_unanswered_tool_call_gets_a_synthetic_result(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/text.sse"))
    messages: list[Any] = [
        UserMessage(content="go"),
        AssistantMessage(
            content=[ToolCall(id="toolu_1", name="add", arguments={"a": 1, "b": 2})],
            stop_reason="toolUse",
        ),
        UserMessage(content="never mind"),
    ]
    await collect(provider(cache=False), model_for(server), LlmContext("", messages, []))
    (body,) = server.bodies()
    assert "system" not in body
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1, "b": 2}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "No result provided"}],
                    "is_error": True,
                }
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "never mind"}]},
    ]


# --- the agent loop over the provider -------------------------------------------------------


async def test_agent_loop_runs_a_tool_over_anthropic(server: ScriptedServer) -> None:
    server.queue(Reply(sse="anthropic/text_then_tool.sse"), Reply(sse="anthropic/final_text.sse"))
    seen: list[str] = []
    new = await run_agent_loop(
        [UserMessage(content="What is 2 + 3?", timestamp=1)],
        AgentContext("You can add.", [], [ADD]),
        AgentLoopConfig(model=model_for(server), api_key="loop-key"),
        lambda event: seen.append(event.type),
        stream_fn=provider(api_key=None),
    )
    assert [m.role for m in new] == ["user", "assistant", "toolResult", "assistant"]
    first, result, last = new[1], new[2], new[3]
    assert first.content == [
        TextContent(text="Let me add those."),
        ToolCall(id="toolu_add_1", name="add", arguments={"a": 2, "b": 3}),
    ]
    assert first.stop_reason == "toolUse"
    assert result.tool_call_id == "toolu_add_1" and result.content == [TextContent(text="5")]
    assert last.content == [TextContent(text="2 + 3 = 5.")] and last.stop_reason == "stop"
    assert last.usage.cache_read == 128 and last.usage.input == 32
    assert seen[0] == "agent_start" and seen[-1] == "agent_end"
    assert all(r.headers["authorization"] == "Bearer loop-key" for r in server.requests)
    assert server.bodies()[1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is 2 + 3?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me add those."},
                {"type": "tool_use", "id": "toolu_add_1", "name": "add", "input": {"a": 2, "b": 3}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_add_1",
                    "content": [{"type": "text", "text": "5"}],
                    "cache_control": EPHEMERAL,
                }
            ],
        },
    ]


# --- setup ----------------------------------------------------------------------------------


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ImportError) as info:
        AnthropicProvider()
    assert "pip install 'agentcore-fsm[anthropic]'" in str(info.value)


async def test_default_stream_function(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    server.queue(Reply(sse="anthropic/text.sse"))
    events = await collect(stream_anthropic, model_for(server), hello())
    assert events[-1].type == "done"
    assert server.requests[0].headers["authorization"] == "Bearer env-key"
