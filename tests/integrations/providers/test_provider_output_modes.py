"""Structured output (docs/output.md) over the real providers: each mode against the local SSE
server, through the real SDK clients: what the request asks for, and the validated output,
a retry after an invalid answer included."""

from __future__ import annotations

from typing import Any

import pytest
from _provider_sse_server import Reply, ScriptedServer
from pydantic import BaseModel

from agentcore_fsm import AgentContext, AgentLoopConfig, Model, run_agent_loop
from agentcore_fsm.integrations.providers.anthropic import AnthropicProvider
from agentcore_fsm.integrations.providers.openai import OpenAIProvider

pytestmark = pytest.mark.anyio


class City(BaseModel):
    name: str
    population: int


PARIS = City(name="Paris", population=2100000)


def openai_model(server: ScriptedServer) -> Model:
    return Model(
        id="gpt-4o-mini", api="openai-completions", provider="openai", base_url=server.url + "/v1"
    )


def anthropic_model(server: ScriptedServer) -> Model:
    return Model(
        id="claude-haiku-4-5", api="anthropic-messages", provider="anthropic", base_url=server.url
    )


async def _run(model: Model, provider: Any, mode: str | None, events: list[Any]) -> Any:
    return await run_agent_loop(
        ["Biggest city of France?"],
        AgentContext(),
        AgentLoopConfig(model=model),
        events.append,
        stream_fn=provider,
        output_type=City,
        output_mode=mode,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("mode", [None, "native"])
async def test_openai_native_asks_for_the_json_schema(server: ScriptedServer, mode: Any) -> None:
    server.queue(Reply(sse="openai/output_json_invalid.sse"), Reply(sse="openai/output_json.sse"))
    events: list[Any] = []
    result = await _run(
        openai_model(server), OpenAIProvider(api_key="k", max_retries=0), mode, events
    )
    assert result.output == PARIS
    first, second = server.bodies()
    fmt = first["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "final_result"
    assert fmt["json_schema"]["schema"]["required"] == ["name", "population"]
    assert "tools" not in first and "tool_choice" not in first
    # the invalid answer went back as a user message naming the problem
    assert second["messages"][-1]["role"] == "user"
    assert "population" in second["messages"][-1]["content"]
    partials = [e.output for e in events if e.type == "output_partial"]
    assert partials[-1] == PARIS.model_dump() == events[-1].output


@pytest.mark.parametrize("mode", ["tool", "forced_tool"])
async def test_openai_tool_modes_offer_the_final_tool(server: ScriptedServer, mode: str) -> None:
    server.queue(Reply(sse="openai/output_tool.sse"))
    events: list[Any] = []
    result = await _run(
        openai_model(server), OpenAIProvider(api_key="k", max_retries=0), mode, events
    )
    assert result.output == PARIS
    (body,) = server.bodies()
    (tool,) = body["tools"]
    assert tool["function"]["name"] == "final_result"
    assert tool["function"]["parameters"]["properties"]["population"]["type"] == "integer"
    assert "response_format" not in body
    if mode == "forced_tool":
        assert body["tool_choice"] == {"type": "function", "function": {"name": "final_result"}}
    else:
        assert "tool_choice" not in body
    assert [m.role for m in result] == ["user", "assistant", "toolResult"]


@pytest.mark.parametrize("mode", [None, "forced_tool", "tool"])
async def test_anthropic_tool_modes_retry_an_invalid_answer(
    server: ScriptedServer, mode: Any
) -> None:
    server.queue(
        Reply(sse="anthropic/output_tool_invalid.sse"), Reply(sse="anthropic/output_tool.sse")
    )
    events: list[Any] = []
    provider = AnthropicProvider(api_key="k", max_retries=0)
    result = await _run(anthropic_model(server), provider, mode, events)
    assert result.output == PARIS
    first, second = server.bodies()
    assert [t["name"] for t in first["tools"]] == ["final_result"]
    if mode == "tool":
        assert "tool_choice" not in first
    else:  # the default for Anthropic: the final tool forced
        assert first["tool_choice"] == {"type": "tool", "name": "final_result"}
    # the invalid call got its tool result with the problem: the transcript stays valid
    result_block = second["messages"][-1]["content"][0]
    assert result_block["type"] == "tool_result" and result_block["is_error"] is True
    assert result_block["tool_use_id"] == "toolu_out_0"
    assert [m.role for m in result] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "toolResult",
    ]


async def test_anthropic_refuses_native_mode(server: ScriptedServer) -> None:
    events: list[Any] = []
    result = await _run(
        anthropic_model(server), AnthropicProvider(api_key="k", max_retries=0), "native", events
    )
    assert events[-1].reason == "error" and not result.has_output
    assert "no native structured output" in result[-1].error_message
    with pytest.raises(Exception, match="without a valid output"):
        _ = result.output
    assert server.bodies() == []
