"""The model-call options are defined once (``ModelCallOptions``) and reach the stream function
from a loop config and from an Agent, every one of them, on both backends."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agentcore_fsm import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    FauxProvider,
    Model,
    faux_response,
    run_agent_loop,
)
from agentcore_fsm.core.config import (
    MODEL_CALL_OPTIONS,
    LlmContext,
    ModelCallOptions,
    StreamOptions,
    stream_options,
)

MODEL = Model(id="m", provider="p", api="faux")


def _on_payload(payload: Any) -> None:
    pass


def _on_response(response: Any) -> None:
    pass


# one distinct value per option (reasoning is the run's, set apart)
VALUES: dict[str, Any] = {
    "api_key": "k-1",
    "session_id": "s-1",
    "thinking_budgets": {"high": 123},
    "transport": "sse",
    "max_retry_delay_ms": 77,
    "temperature": 0.25,
    "max_tokens": 99,
    "headers": {"x-a": "1"},
    "on_payload": _on_payload,
    "on_response": _on_response,
}


def test_the_option_list_is_defined_once() -> None:
    names = [f.name for f in dataclasses.fields(ModelCallOptions)]
    assert tuple(names) == MODEL_CALL_OPTIONS
    assert set(VALUES) | {"reasoning"} == set(names)
    config_fields = {f.name for f in dataclasses.fields(AgentLoopConfig)}
    stream_fields = [f.name for f in dataclasses.fields(StreamOptions)]
    assert issubclass(AgentLoopConfig, ModelCallOptions)
    assert issubclass(StreamOptions, ModelCallOptions)
    assert set(names) <= config_fields
    assert stream_fields == [*names, "signal"]


def test_stream_options_copies_every_option() -> None:
    config = AgentLoopConfig(model=MODEL, reasoning="low", **VALUES)
    made = stream_options(config, None, api_key=None, reasoning="high")
    for name, value in VALUES.items():
        assert getattr(made, name) == value, name
    assert made.reasoning == "high"
    assert stream_options(config, None, api_key="from-hook").api_key == "from-hook"


class _Capture:
    def __init__(self) -> None:
        self.seen: list[StreamOptions] = []
        self.faux = FauxProvider([faux_response("ok")] * 4)

    def __call__(self, model: Model, context: LlmContext, options: StreamOptions) -> Any:
        self.seen.append(options)
        return self.faux(model, context, options)


@pytest.mark.anyio
async def test_every_option_of_the_config_reaches_the_stream_function() -> None:
    capture = _Capture()
    config = AgentLoopConfig(model=MODEL, reasoning="medium", **VALUES)
    await run_agent_loop(["hi"], AgentContext(), config, stream_fn=capture)
    (options,) = capture.seen
    for name, value in VALUES.items():
        assert getattr(options, name) == value, name
    assert options.reasoning == "medium"
    assert options.signal is not None


@pytest.mark.anyio
async def test_the_agents_options_reach_the_stream_function() -> None:
    capture = _Capture()
    given = ModelCallOptions(**VALUES)
    agent = Agent(model=MODEL, stream_fn=capture, options=given, thinking_level="high")
    assert agent.options is not given  # the agent keeps its own copy
    await agent.prompt("hi")
    (options,) = capture.seen
    for name, value in VALUES.items():
        assert getattr(options, name) == value, name
    assert options.reasoning == "high"  # from thinking_level, never from options


@pytest.mark.parametrize(
    ("keywords", "expected"),
    [
        ({}, {"session_id": "s-1", "transport": "sse", "max_retry_delay_ms": 77}),
        ({"session_id": "s-2"}, {"session_id": "s-2"}),
        ({"transport": "websocket"}, {"transport": "websocket"}),
        ({"max_retry_delay_ms": 5}, {"max_retry_delay_ms": 5}),
        ({"thinking_budgets": {"low": 1}}, {"thinking_budgets": {"low": 1}}),
    ],
)
def test_a_keyword_given_wins_over_options(
    keywords: dict[str, Any], expected: dict[str, Any]
) -> None:
    agent = Agent(options=ModelCallOptions(**VALUES), **keywords)
    for name, value in expected.items():
        assert getattr(agent, name) == value, name
        assert getattr(agent.options, name) == value, name


def test_the_agents_option_attributes_read_and_write_its_options() -> None:
    agent = Agent()
    assert agent.transport == "auto" and agent.options.transport == "auto"
    agent.session_id = "s-9"
    assert agent.options.session_id == "s-9"
    agent.options.max_retry_delay_ms = 3
    assert agent.max_retry_delay_ms == 3
