"""Each provider's failures mapped to an error kind (``AssistantMessage.error_kind``), through the
real ``openai`` and ``anthropic`` SDKs against the local SSE server, with each API's documented
error bodies; and a run that falls back from one real provider to the other."""

from __future__ import annotations

from typing import Any

import pytest
from _provider_helpers import collect, dump, final
from _provider_sse_server import Reply, ScriptedServer

from agentcore_fsm import AgentContext, AgentLoopConfig, Model, UserMessage, run_agent_loop
from agentcore_fsm.core.compaction import Compaction
from agentcore_fsm.core.config import LlmContext, StreamOptions
from agentcore_fsm.core.fallback import ModelFallback
from agentcore_fsm.devtools.testing import run_checked
from agentcore_fsm.integrations.providers.anthropic import AnthropicProvider
from agentcore_fsm.integrations.providers.error_kinds import error_kind, kind_of_body
from agentcore_fsm.integrations.providers.openai import OpenAIProvider

pytestmark = pytest.mark.anyio


def openai_model(server: ScriptedServer) -> Model:
    return Model(
        id="gpt-4o-mini",
        api="openai-completions",
        provider="openai",
        base_url=server.url + "/v1",
    )


def anthropic_model(server: ScriptedServer) -> Model:
    return Model(
        id="claude-haiku-4-5",
        api="anthropic-messages",
        provider="anthropic",
        base_url=server.url,
        max_tokens=1024,
    )


def hello() -> LlmContext:
    return LlmContext("You are terse.", [UserMessage(content="Say hello", timestamp=1)], [])


OPENAI = OpenAIProvider(api_key="test-key", max_retries=0)
ANTHROPIC = AnthropicProvider(api_key="test-key", max_retries=0)


def by_provider(model: Model, context: LlmContext, options: StreamOptions) -> Any:
    """A stream function that sends each model to its own provider."""
    return (OPENAI if model.provider == "openai" else ANTHROPIC)(model, context, options)


@pytest.mark.parametrize(
    ("status", "fixture", "kind"),
    [
        (429, "openai/error_429.json", "rate_limit"),
        (429, "openai/error_429_quota.json", "other"),
        (500, "openai/error_500.json", "server_error"),
        (503, "openai/error_503.json", "overloaded"),
        (400, "openai/error_400_context_length.json", "context_overflow"),
        (400, "openai/error_400.json", "invalid_request"),
        (401, "openai/error_401.json", "auth"),
    ],
)
async def test_openai_http_errors(
    server: ScriptedServer, status: int, fixture: str, kind: str
) -> None:
    server.queue(Reply(status=status, body=fixture))
    events = await collect(OPENAI, openai_model(server), hello())
    message = final(events)
    assert (message.stop_reason, message.error_kind) == ("error", kind)
    assert message.error_message is not None
    assert message.error_message.startswith(f"HTTP {status}")
    assert dump(message)["errorKind"] == kind


@pytest.mark.parametrize(
    ("status", "fixture", "kind"),
    [
        (429, "anthropic/error_429.json", "rate_limit"),
        (529, "anthropic/error_529.json", "overloaded"),
        (500, "anthropic/error_500.json", "server_error"),
        (400, "anthropic/error_400_prompt_too_long.json", "context_overflow"),
        (413, "anthropic/error_413.json", "context_overflow"),
        (400, "anthropic/error_400.json", "invalid_request"),
        (401, "anthropic/error_401.json", "auth"),
    ],
)
async def test_anthropic_http_errors(
    server: ScriptedServer, status: int, fixture: str, kind: str
) -> None:
    server.queue(Reply(status=status, body=fixture))
    events = await collect(ANTHROPIC, anthropic_model(server), hello())
    message = final(events)
    assert (message.stop_reason, message.error_kind) == ("error", kind)
    assert message.error_message is not None
    assert message.error_message.startswith(f"HTTP {status}")


async def test_plain_text_502_is_a_server_error(server: ScriptedServer) -> None:
    server.queue(Reply(status=502, body="openai/plain_502.txt", content_type="text/plain"))
    message = final(await collect(OPENAI, openai_model(server), hello()))
    assert message.error_kind == "server_error"


@pytest.mark.parametrize(
    ("provider", "fixture", "kind"),
    [
        ("openai", "openai/stream_error.sse", "server_error"),
        ("anthropic", "anthropic/stream_error.sse", "overloaded"),
    ],
)
async def test_error_inside_the_stream(
    server: ScriptedServer, provider: str, fixture: str, kind: str
) -> None:
    server.queue(Reply(sse=fixture))
    model = openai_model(server) if provider == "openai" else anthropic_model(server)
    message = final(await collect(by_provider, model, hello()))
    assert (message.stop_reason, message.error_kind) == ("error", kind)
    assert message.error_message is not None and message.error_message.startswith("Stream error")


@pytest.mark.parametrize(
    ("provider", "fixture"), [("openai", "openai/cut.sse"), ("anthropic", "anthropic/cut.sse")]
)
async def test_a_stream_cut_short_is_a_server_error(
    server: ScriptedServer, provider: str, fixture: str
) -> None:
    server.queue(Reply(sse=fixture))
    model = openai_model(server) if provider == "openai" else anthropic_model(server)
    message = final(await collect(by_provider, model, hello()))
    assert (message.stop_reason, message.error_kind) == ("error", "server_error")


async def test_a_request_that_times_out(server: ScriptedServer) -> None:
    server.queue(Reply(hold=True))
    quick = OpenAIProvider(api_key="test-key", max_retries=0, timeout=0.05)
    message = final(await collect(quick, openai_model(server), hello()))
    assert (message.stop_reason, message.error_kind) == ("error", "timeout")
    assert message.error_message is not None and message.error_message.startswith("Request timed")


async def test_a_refused_connection_is_a_server_error() -> None:
    model = Model(
        id="m", api="openai-completions", provider="openai", base_url="http://127.0.0.1:9/v1"
    )
    message = final(await collect(OPENAI, model, hello()))
    assert (message.stop_reason, message.error_kind) == ("error", "server_error")


async def test_an_answer_has_no_error_kind(server: ScriptedServer) -> None:
    server.queue(Reply(sse="openai/text.sse"))
    message = final(await collect(OPENAI, openai_model(server), hello()))
    assert message.stop_reason == "stop" and message.error_kind is None
    assert "errorKind" not in dump(message)


def test_the_mapping_without_a_server() -> None:
    assert (
        kind_of_body(None, {"error": {"type": "overloaded_error", "message": "x"}}) == "overloaded"
    )
    assert (
        kind_of_body(400, {"error": {"message": "This model's maximum context length is 8192"}})
        == "context_overflow"
    )
    assert kind_of_body(404, {"error": {"message": "no such model"}}) == "invalid_request"
    assert kind_of_body(408, None) == "timeout"
    assert kind_of_body(200, None) is None
    assert error_kind(TimeoutError()) == "timeout"
    assert error_kind(ValueError("bug")) == "other"


async def test_a_run_falls_back_from_openai_to_anthropic(server: ScriptedServer) -> None:
    server.queue(
        Reply(status=429, body="openai/error_429.json"),
        Reply(status=529, body="anthropic/error_529.json"),
        Reply(sse="anthropic/text.sse"),
    )
    config = AgentLoopConfig(
        model=openai_model(server),
        fallback=ModelFallback([anthropic_model(server), anthropic_model(server)]),
    )
    run = await run_checked(
        [UserMessage(content="Say hello")], AgentContext(), config, stream_fn=by_provider
    )
    assert run.summary.reason == "completed"
    answers = [m for m in run.messages if m.role == "assistant"]
    assert [(m.provider, m.stop_reason, m.error_kind) for m in answers] == [
        ("openai", "error", "rate_limit"),
        ("anthropic", "error", "overloaded"),
        ("anthropic", "stop", None),
    ]
    assert [r.path for r in server.requests] == [
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/messages",
    ]


async def test_a_real_overflow_is_compacted_and_made_again(server: ScriptedServer) -> None:
    server.queue(
        Reply(status=400, body="anthropic/error_400_prompt_too_long.json"),
        Reply(sse="anthropic/text.sse"),
    )
    history = [UserMessage(content="old question " * 50), UserMessage(content="older")]
    config = AgentLoopConfig(model=anthropic_model(server), compaction=Compaction())
    run = await run_checked(
        [UserMessage(content="Say hello")],
        AgentContext(messages=history),
        config,
        stream_fn=by_provider,
    )
    assert run.summary.reason == "completed"
    compacted = [e for e in run.events if e.type == "context_compacted"]
    assert len(compacted) == 1 and compacted[0].reason == "overflow"
    first, second = (r.body["messages"] for r in server.requests)
    assert len(second) < len(first)
    assert second[-1]["content"][0]["text"] == "Say hello" or second[-1]["content"] == "Say hello"


async def test_run_agent_loop_reports_the_kind(server: ScriptedServer) -> None:
    server.queue(Reply(status=500, body="openai/error_500.json"))
    messages = await run_agent_loop(
        [UserMessage(content="hi")],
        AgentContext(),
        AgentLoopConfig(model=openai_model(server)),
        stream_fn=by_provider,
    )
    assert messages[-1].error_kind == "server_error"
