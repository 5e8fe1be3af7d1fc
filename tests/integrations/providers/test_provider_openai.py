"""The OpenAI Chat Completions stream function, through the real ``openai`` SDK client, against a
local server that streams the documented ``chat.completion.chunk`` SSE format from fixtures."""

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
from agentcore_fsm.integrations.providers.openai import OpenAIProvider, stream_openai

pytestmark = pytest.mark.anyio

ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}


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
        "id": "gpt-4o-mini",
        "api": "openai-completions",
        "provider": "openai",
        "base_url": server.url + "/v1",
        "input": ["text", "image"],
        "cost": ModelCost(input=0.15, output=0.60, cache_read=0.075),
        "context_window": 128_000,
        "max_tokens": 16_384,
    }
    fields.update(changes)
    return Model(**fields)


def provider(**kwargs: Any) -> OpenAIProvider:
    kwargs.setdefault("api_key", "test-key")
    kwargs.setdefault("max_retries", 0)
    return OpenAIProvider(**kwargs)


def hello() -> LlmContext:
    return LlmContext("You are terse.", [UserMessage(content="Say hello", timestamp=1)], [])


def expected(content: list[Any], stop_reason: str, usage: Usage | None = None, **kw: Any) -> Any:
    message = AssistantMessage(
        content=content,
        api="openai-completions",
        provider="openai",
        model="gpt-4o-mini",
        usage=usage or Usage(),
        stop_reason=stop_reason,  # type: ignore[arg-type]
        **kw,
    )
    return dump(message)


# --- streams --------------------------------------------------------------------------------


async def test_text_stream_usage_cost_and_request(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/text.sse"))
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
    # 1200 prompt tokens of which 1024 cached; 5 completion tokens
    usage = Usage(
        input=176,
        output=5,
        cache_read=1024,
        total_tokens=1205,
        cost=Cost(
            input=176 * 0.15e-6,
            output=5 * 0.60e-6,
            cache_read=1024 * 0.075e-6,
            total=176 * 0.15e-6 + 5 * 0.60e-6 + 1024 * 0.075e-6,
        ),
    )
    got = dump(final(events))
    want = expected([TextContent(text="Hello, world!")], "stop", usage)
    assert got["usage"]["cost"] == pytest.approx(want["usage"].pop("cost"))
    got["usage"].pop("cost")
    assert got == want
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.body == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hello"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_multiple_tool_calls(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/tool_calls.sse"))
    events = await collect(provider(), model_for(server), hello())
    assert summary(events) == [
        ("start",),
        ("toolcall_start", 0),
        ("toolcall_delta", 0, '{"ci'),
        ("toolcall_delta", 0, 'ty": "Par'),
        ("toolcall_delta", 0, 'is"}'),
        ("toolcall_end", 0, "call_weather_1", "get_weather", {"city": "Paris"}),
        ("toolcall_start", 1),
        ("toolcall_delta", 1, '{"a": 2, '),
        ("toolcall_delta", 1, '"b": 3}'),
        ("toolcall_end", 1, "call_add_2", "add", {"a": 2, "b": 3}),
        ("done", "toolUse"),
    ]
    assert_one_partial(events)
    got = dump(final(events))
    assert got["usage"]["input"] == 310 and got["usage"]["output"] == 42
    got.pop("usage")
    want = expected(
        [
            ToolCall(id="call_weather_1", name="get_weather", arguments={"city": "Paris"}),
            ToolCall(id="call_add_2", name="add", arguments={"a": 2, "b": 3}),
        ],
        "toolUse",
    )
    want.pop("usage")
    assert got == want


@pytest.mark.parametrize(
    ("fixture", "thinking", "text"),
    [
        ("openai/reasoning_content.sse", ["The user wants ", "a greeting."], ["Hi", " there."]),
        ("openai/reasoning_field.sse", ["Short thought."], ["Answer."]),
    ],
)
async def test_reasoning_content_becomes_thinking(
    server: ScriptedServer, fixture: str, thinking: list[str], text: list[str]
) -> None:
    server.queue(Reply(sse=fixture))
    model = model_for(server, id="deepseek-reasoner", provider="deepseek", reasoning=True)
    events = await collect(provider(), model, hello(), StreamOptions(reasoning="high"))
    assert summary(events) == [
        ("start",),
        ("thinking_start", 0),
        *[("thinking_delta", 0, t) for t in thinking],
        ("thinking_end", 0, "".join(thinking)),
        ("text_start", 1),
        *[("text_delta", 1, t) for t in text],
        ("text_end", 1, "".join(text)),
        ("done", "stop"),
    ]
    message = final(events)
    assert message.content == [
        ThinkingContent(thinking="".join(thinking)),
        TextContent(text="".join(text)),
    ]
    body = server.requests[0].body
    assert body["reasoning_effort"] == "high"


async def test_reasoning_effort_only_for_reasoning_models(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/text.sse"), Reply(sse="openai/text.sse"))
    opts = StreamOptions(reasoning="low", max_tokens=100, temperature=0.2)
    await collect(provider(), model_for(server), hello(), opts)
    await collect(provider(), model_for(server, reasoning=True), hello(), opts)
    first, second = server.bodies()
    assert "reasoning_effort" not in first
    assert first["max_completion_tokens"] == 100 and first["temperature"] == 0.2
    assert second["reasoning_effort"] == "low"


async def test_max_tokens_field_for_compatible_servers(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/text.sse"))
    model = model_for(server, provider="vllm")
    await collect(provider(), model, hello(), StreamOptions(max_tokens=64))
    (body,) = server.bodies()
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert server.requests[0].headers["authorization"] == "Bearer test-key"


async def test_length_finish_reason(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/length.sse"))
    events = await collect(provider(), model_for(server), hello())
    assert summary(events)[-2:] == [("text_end", 0, "This answer is cut"), ("done", "length")]
    assert final(events).stop_reason == "length"


async def test_content_filter_is_an_error(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/content_filter.sse"))
    events = await collect(provider(), model_for(server), hello())
    assert summary(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Partial"),
        ("text_end", 0, "Partial"),
        (
            "error",
            "error",
            "The response was stopped by the provider's content filter "
            "(finish_reason 'content_filter')",
        ),
    ]
    assert final(events).stop_reason == "error"


async def test_malformed_tool_json(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/malformed_tool.sse"))
    events = await collect(provider(), model_for(server), hello())
    raw = '{"a": 2, "b": 3'
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
    assert call.id == "call_bad_1" and call.name == "add"
    assert call.arguments["_raw_arguments"] == raw
    assert call.arguments["_arguments_error"].startswith("invalid JSON: ")
    assert set(call.arguments) == {"_raw_arguments", "_arguments_error"}


async def test_malformed_tool_json_fails_validation_in_the_loop(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/malformed_tool.sse"), Reply(sse="openai/final_text.sse"))
    context = AgentContext("", [], [ADD])
    new = await run_agent_loop(
        [UserMessage(content="2+3?")],
        context,
        AgentLoopConfig(model=model_for(server)),
        stream_fn=provider(),
    )
    result = new[2]
    assert isinstance(result, ToolResultMessage)
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith('Validation failed for tool "add":\n')
    assert "\n  - root: invalid JSON: " in text  # the parse error, not schema noise
    assert '"_raw_arguments": "{\\"a\\": 2, \\"b\\": 3"' in text
    # the model is told: the second request carries the error result
    tool_message = server.bodies()[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_bad_1"
    assert tool_message["content"].startswith('Validation failed for tool "add":')


# --- failures -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "fixture", "message"),
    [
        (
            400,
            "openai/error_400.json",
            "HTTP 400 (invalid_request_error): Invalid schema for function 'add': "
            "'object' is not valid under any of the given schemas.",
        ),
        (
            429,
            "openai/error_429.json",
            "HTTP 429 (requests): Rate limit reached for gpt-4o-mini on requests per min "
            "(RPM): Limit 3, Used 3, Requested 1.",
        ),
        (
            500,
            "openai/error_500.json",
            "HTTP 500 (server_error): The server had an error while processing your request. "
            "Sorry about that!",
        ),
    ],
)
async def test_http_errors(server: ScriptedServer, status: int, fixture: str, message: str) -> None:
    server.queue(Reply(status=status, body=fixture))
    events = await collect(provider(), model_for(server), hello())
    assert summary(events) == [("error", "error", message)]
    kind = {400: "invalid_request", 429: "rate_limit", 500: "server_error"}[status]
    assert dump(final(events)) == expected([], "error", error_message=message, error_kind=kind)
    assert len(server.requests) == 1


async def test_plain_text_error_body(server: ScriptedServer) -> None:
    server.queue(Reply(status=502, body="openai/plain_502.txt", content_type="text/plain"))
    events = await collect(provider(), model_for(server), hello())
    assert summary(events) == [("error", "error", "HTTP 502: Bad gateway: upstream unavailable")]


async def test_retries_are_the_sdks(server: ScriptedServer) -> None:
    server.queue(
        Reply(status=503, body="openai/error_500.json", headers={"retry-after-ms": "1"}),
        Reply(sse="openai/text.sse"),
    )
    events = await collect(provider(max_retries=1), model_for(server), hello())
    assert summary(events)[-1] == ("done", "stop")
    assert len(server.requests) == 2


async def test_stream_cut_mid_way(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/cut.sse"))
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
    assert dump(message) == expected(
        [TextContent(text="Hello wor")],
        "error",
        error_message=message.error_message,
        error_kind="server_error",  # a stream cut short (docs/policies-models.md#error-kinds)
    )


async def test_stream_ending_without_finish_reason(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/no_finish.sse"))
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
            "The stream ended before the response was complete (no finish_reason received)",
        ),
    ]


async def test_error_object_inside_the_stream(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/stream_error.sse"))
    events = await collect(provider(), model_for(server), hello())
    message = "Stream error (server_error): The server had an error while processing your request."
    assert summary(events) == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Hel"),
        ("error", "error", message),
    ]
    assert dump(final(events)) == expected(
        [TextContent(text="Hel")], "error", error_message=message, error_kind="server_error"
    )


async def test_connection_refused_is_an_error_event() -> None:
    with socket_closed_port() as port:
        model = Model(id="m", api="openai-completions", provider="local")
        events = await collect(
            OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0), model, hello()
        )
    assert [e.type for e in events] == ["error"]
    assert events[0].error.error_message.startswith("Connection error: ")


def socket_closed_port() -> Any:
    import contextlib
    import socket

    @contextlib.contextmanager
    def closed() -> Any:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        yield port

    return closed()


async def test_abort_mid_stream_cancels_the_http_stream(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/abort.sse"))
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
    assert dump(final(events)) == expected(
        [TextContent(text="Counting: one, two")], "aborted", error_message="Request was aborted"
    )
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
    server.queue(Reply(sse="openai/abort.sse"))
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
    server.queue(Reply(sse="openai/text.sse"))
    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    messages: list[Any] = [
        UserMessage(content=[TextContent(text="What is this?"), image]),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="hmm", thinking_signature="sig"),
                TextContent(text="Let me check."),
                ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"}),
                ToolCall(id="call_2", name="add", arguments={"a": 1, "b": 2}),
            ],
            stop_reason="toolUse",
        ),
        ToolResultMessage(
            tool_call_id="call_1",
            tool_name="get_weather",
            content=[TextContent(text="Rain"), image],
        ),
        # call_2 got no result: a synthetic error result is sent
        UserMessage(content="and now?"),
        # a failed message: its tool call was never run and is left out, its text kept
        AssistantMessage(
            content=[
                TextContent(text="Partial answer"),
                ToolCall(id="call_3", name="add", arguments={}),
            ],
            stop_reason="aborted",
            error_message="Request was aborted",
        ),
        # an orphan result (its call was in the failed message) is left out
        ToolResultMessage(tool_call_id="call_3", tool_name="add", content=[]),
        # a failed message with nothing to keep is left out
        AssistantMessage(content=[], stop_reason="error", error_message="HTTP 500"),
        UserMessage(content="try again"),
    ]
    context = LlmContext("Be helpful.", messages, [WEATHER, ADD])
    opts = StreamOptions(api_key="from-options", headers={"x-trace": "1"})
    await collect(provider(), model_for(server, headers={"x-model": "m"}), context, opts)
    (request,) = server.requests
    assert request.headers["authorization"] == "Bearer from-options"
    assert request.headers["x-trace"] == "1" and request.headers["x-model"] == "m"
    url = "data:image/png;base64,aGVsbG8="
    assert request.body == {
        "model": "gpt-4o-mini",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "Be helpful."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            },
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "Rain"},
            {"role": "tool", "tool_call_id": "call_2", "content": "No result provided"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Images returned by the tools:"},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            },
            {"role": "user", "content": "and now?"},
            {"role": "assistant", "content": "Partial answer"},
            {"role": "user", "content": "try again"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather for a city.",
                    "parameters": WeatherParams.model_json_schema(),
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "Add two numbers.",
                    "parameters": ADD_SCHEMA,
                },
            },
        ],
    }


async def test_images_for_a_text_only_model(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/text.sse"))
    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    context = LlmContext("", [UserMessage(content=[TextContent(text="Look"), image])], [])
    await collect(provider(), model_for(server, input=["text"]), context)
    assert server.bodies()[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look"},
                {"type": "text", "text": "(image omitted: this model does not accept images)"},
            ],
        }
    ]


async def test_on_payload_and_on_response(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/text.sse", headers={"x-request-id": "req_7"}))
    seen: list[Any] = []

    def on_payload(payload: dict[str, Any]) -> dict[str, Any]:
        seen.append(("payload", payload["model"]))
        return {**payload, "user": "u-1"}

    async def on_response(info: dict[str, Any]) -> None:
        seen.append(("response", info["status"], info["headers"]["x-request-id"]))

    opts = StreamOptions(on_payload=on_payload, on_response=on_response)
    events = await collect(provider(), model_for(server), hello(), opts)
    assert events[-1].type == "done"
    assert seen == [("payload", "gpt-4o-mini"), ("response", 200, "req_7")]
    assert server.bodies()[0]["user"] == "u-1"


# --- the agent loop over the provider -------------------------------------------------------


async def test_agent_loop_runs_a_tool_over_openai(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/text_then_tool.sse"), Reply(sse="openai/final_text.sse"))
    seen: list[str] = []
    new = await run_agent_loop(
        [UserMessage(content="What is 2 + 3?", timestamp=1)],
        AgentContext("You can add.", [], [ADD]),
        AgentLoopConfig(model=model_for(server), get_api_key=lambda provider: "loop-key"),
        lambda event: seen.append(event.type),
        stream_fn=provider(api_key=None),
    )
    assert [m.role for m in new] == ["user", "assistant", "toolResult", "assistant"]
    first, result, last = new[1], new[2], new[3]
    assert first.content == [
        TextContent(text="Let me add those."),
        ToolCall(id="call_add_1", name="add", arguments={"a": 2, "b": 3}),
    ]
    assert first.stop_reason == "toolUse"
    assert result.tool_call_id == "call_add_1" and result.content == [TextContent(text="5")]
    assert last.content == [TextContent(text="2 + 3 = 5.")] and last.stop_reason == "stop"
    assert last.usage.cache_read == 128 and last.usage.input == 32
    assert seen[0] == "agent_start" and seen[-1] == "agent_end"
    assert all(r.headers["authorization"] == "Bearer loop-key" for r in server.requests)
    second = server.bodies()[1]["messages"]
    assert second == [
        {"role": "system", "content": "You can add."},
        {"role": "user", "content": "What is 2 + 3?"},
        {
            "role": "assistant",
            "content": "Let me add those.",
            "tool_calls": [
                {
                    "id": "call_add_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_add_1", "content": "5"},
    ]


# --- setup ----------------------------------------------------------------------------------


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError) as info:
        OpenAIProvider()
    assert "pip install 'agentcore-fsm[openai]'" in str(info.value)


async def test_default_stream_function(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    server.queue(Reply(sse="openai/text.sse"))
    events = await collect(stream_openai, model_for(server), hello())
    assert events[-1].type == "done"
    assert server.requests[0].headers["authorization"] == "Bearer env-key"


async def test_missing_api_key_is_an_error_event(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    events = await collect(OpenAIProvider(max_retries=0), model_for(server), hello())
    (event,) = events
    assert event.type == "error" and event.error.stop_reason == "error"
    assert event.error.error_message.startswith("OpenAIError: ")
    assert "OPENAI_API_KEY" in event.error.error_message
    assert server.requests == []


async def test_local_server_without_a_key_gets_a_placeholder(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.queue(Reply(sse="openai/text.sse"))
    model = model_for(server, provider="ollama")
    events = await collect(OpenAIProvider(max_retries=0), model, hello())
    assert events[-1].type == "done"
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


async def test_compatible_server_quirks(server: ScriptedServer) -> None:
    """A tool call without an id, a fragment arriving after its call ended, ``stop`` as the
    finish reason of a message with tool calls, and no usage chunk."""
    server.queue(Reply(sse="openai/compatible_tool_quirks.sse"))
    model = model_for(server, id="qwen2.5-7b-instruct", provider="vllm")
    events = await collect(provider(include_usage=False), model, hello())
    kinds = summary(events)  # (the end event's tool call is the block, re-parsed at the end)
    generated = final(events).content[2].id  # type: ignore[union-attr]
    assert generated.startswith("call_") and len(generated) == 29
    assert kinds == [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "Sure."),
        ("text_end", 0, "Sure."),
        ("toolcall_start", 1),
        ("toolcall_delta", 1, '{"a": 1'),
        ("toolcall_end", 1, "call_a", "first", {"a": 1, "b": 2}),
        ("toolcall_start", 2),
        ("toolcall_delta", 2, "{}"),
        ("toolcall_end", 2, generated, "second", {}),
        ("done", "toolUse"),
    ]
    assert final(events).content[1] == ToolCall(
        id="call_a", name="first", arguments={"a": 1, "b": 2}
    )
    assert final(events).usage == Usage()
    assert "stream_options" not in server.bodies()[0]
