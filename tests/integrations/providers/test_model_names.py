"""Models named by a string, ``"provider:model-id"``: described from the model table, and
streamed by the provider's default stream function when the run is given none (the real SDK
against the local SSE server). A name that is wrong, and a missing extra, are reported before a
run starts, naming what is wrong."""

from __future__ import annotations

import sys

import pytest
from _provider_sse_server import Reply, ScriptedServer

from agentcore_fsm import Agent, Model, get_model
from agentcore_fsm.core.model_names import (
    ModelSource,
    register_model_source,
    resolve_model,
    stream_fn_for,
)
from agentcore_fsm.integrations.providers.anthropic import AnthropicProvider
from agentcore_fsm.integrations.providers.openai import OpenAIProvider


def test_a_name_is_the_table_s_model() -> None:
    assert resolve_model("openai:gpt-4o-mini") == get_model("openai", "gpt-4o-mini")
    assert resolve_model("anthropic:claude-sonnet-4-6") == get_model(
        "anthropic", "claude-sonnet-4-6"
    )
    model = Model(id="mine")
    assert resolve_model(model) is model


def test_an_agent_takes_a_model_name() -> None:
    agent = Agent(model="openai:gpt-4o-mini")
    assert agent.model == get_model("openai", "gpt-4o-mini")
    assert repr(agent) == "Agent(model='gpt-4o-mini', lifecycle='idle', messages=0)"
    agent.model = "anthropic:claude-sonnet-4-6"  # type: ignore[assignment]
    assert agent.model.provider == "anthropic" and agent.model.cost.output > 0


@pytest.mark.parametrize(
    ("name", "error", "text"),
    [
        ("gpt-4o", ValueError, "model 'gpt-4o': name a model as 'provider:model-id'"),
        ("openai:", ValueError, "model 'openai:': name a model as 'provider:model-id'"),
        ("mistral:large", ValueError, "model 'mistral:large': unknown provider 'mistral' (known: "),
        ("openai:gpt-0", ValueError, "model 'openai:gpt-0': Unknown openai model 'gpt-0'; known: "),
        (3, TypeError, "model must be a Model or a str such as 'openai:gpt-4o-mini', not int (3)"),
    ],
)
def test_a_wrong_name_is_refused_at_construction(
    name: object, error: type[Exception], text: str
) -> None:
    with pytest.raises(error) as info:
        Agent(model=name)  # type: ignore[arg-type]
    assert str(info.value).startswith(text)


def test_the_stream_function_is_the_provider_s() -> None:
    assert isinstance(stream_fn_for(resolve_model("openai:gpt-4o")), OpenAIProvider)
    assert isinstance(
        stream_fn_for(resolve_model("anthropic:claude-sonnet-4-6")), AnthropicProvider
    )
    assert stream_fn_for(Model(id="x")) is None  # provider "unknown": no source


def test_a_missing_extra_is_named_before_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    agent = Agent(model="anthropic:claude-sonnet-4-6")  # describing needs no SDK
    with pytest.raises(ImportError) as info:
        agent.prompt_sync("hi")
    assert "pip install 'agentcore-fsm[anthropic]'" in str(info.value)
    assert agent.messages == []  # nothing ran


def test_another_provider_can_register_a_source() -> None:
    made = Model(id="tiny", provider="acme", api="acme-api")
    register_model_source("acme", ModelSource(lambda model_id: made, lambda: None))
    assert resolve_model("acme:tiny") is made
    with pytest.raises(ValueError, match="without ':'"):
        register_model_source("a:b", ModelSource(lambda model_id: made, lambda: None))


@pytest.mark.anyio
async def test_a_named_model_runs_on_its_provider(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    server.queue(Reply(sse="openai/text.sse"))
    agent = Agent(model="openai:gpt-4o-mini")
    agent.model = agent.model.model_copy(update={"base_url": server.url + "/v1"})
    await agent.prompt("hi")
    assert [m.role for m in agent.messages] == ["user", "assistant"]
    assert agent.messages[-1].stop_reason == "stop"  # type: ignore[union-attr]
    assert server.requests[0].headers["authorization"] == "Bearer env-key"


def test_a_loop_config_names_the_way_to_resolve_a_model_name() -> None:
    from agentcore_fsm import AgentLoopConfig

    with pytest.raises(TypeError) as info:
        AgentLoopConfig(model="openai:gpt-4o-mini")  # type: ignore[arg-type]
    assert str(info.value) == (
        "AgentLoopConfig: model must be a Model, not str ('openai:gpt-4o-mini'): for a model "
        "named by a str, pass resolve_model('openai:gpt-4o-mini') "
        "(agentcore_fsm.core.model_names)"
    )
    config = AgentLoopConfig(model=resolve_model("openai:gpt-4o-mini"))
    assert config.model.provider == "openai"
