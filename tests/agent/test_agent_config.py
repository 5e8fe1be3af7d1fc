"""The Agent's configuration keywords and attributes are checked when set (construction and
assignment), with a message naming the field."""

from __future__ import annotations

import math
from typing import Any

import pytest

from agentcore_fsm import Agent, MemoryRunStore, Model
from agentcore_fsm.core.config import ModelCallOptions


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("approval_timeout_s", float("nan"), ValueError),
        ("approval_timeout_s", "5", TypeError),
        ("approval_timeout_s", math.inf, ValueError),
        ("approval_timeout_s", -1.0, ValueError),
        ("session_wait_s", float("nan"), ValueError),
        ("session_wait_s", -2, ValueError),
        ("stream_fn", "faux", TypeError),
        ("before_tool_call", 1, TypeError),
        ("after_tool_call", "x", TypeError),
        ("prepare_next_turn", [], TypeError),
        ("should_stop_after_turn", {}, TypeError),
        ("convert_to_llm", 0, TypeError),
        ("transform_context", 0, TypeError),
        ("get_api_key", "key", TypeError),
        ("on_transition", "print", TypeError),
        ("store", "runs.db", TypeError),
        ("options", {"temperature": 1}, TypeError),
        # a str names a model ("openai:gpt-4o-mini"): one that names none is a wrong value
        ("model", "some-model", ValueError),
        ("model", 3, TypeError),
        ("model", "nobody:some-model", ValueError),
        ("system_prompt", None, TypeError),
        ("tools", "notalist", TypeError),
        ("tools", [object()], TypeError),
        ("thinking_level", "hard", ValueError),
        ("steering_mode", "some", ValueError),
        ("tool_execution", 1, ValueError),
        ("max_retry_delay_ms", -1, ValueError),
        ("thinking_budgets", {"low": "many"}, TypeError),
        ("transport", 5, TypeError),
        ("session_id", 5, TypeError),
    ],
)
def test_an_agent_refuses_a_bad_value_when_set(field: str, value: Any, error: type) -> None:
    with pytest.raises(error) as info:
        Agent(**{field: value})
    assert field in str(info.value)
    agent = Agent()
    with pytest.raises(error) as info:
        setattr(agent, field, value)
    assert field in str(info.value)
    repr(agent)  # still a well-formed agent


def test_an_agent_keeps_good_values() -> None:
    store = MemoryRunStore()
    agent = Agent(
        model=Model(id="m"),
        approval_timeout_s=0,
        session_wait_s=None,
        store=store,
        options=ModelCallOptions(temperature=0.5),
        before_tool_call=lambda ctx, signal: None,
        tools=(),
    )
    assert agent.approval_timeout_s == 0 and agent.session_wait_s is None
    assert agent.store is store and agent.options.temperature == 0.5
    agent.session_wait_s = 2.5
    agent.stream_fn = None
    assert agent.session_wait_s == 2.5
