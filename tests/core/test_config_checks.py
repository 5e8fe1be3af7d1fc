"""Configuration is checked when it is set (issue: bad values accepted, failing mid-run).

Each kind of field has a case: a duration (NaN, infinities, negative, a str), a str, a hook
(not callable), an int with a minimum, a finite number, a dict of names, a choice, a Model, a
list of tools, a signal. Each is refused at construction and on assignment, with a message that
names the field; before the checks, every one of these was accepted and the run failed later
(or silently did the wrong thing).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    run_agent_loop,
)
from agentcore_fsm.core.config import ModelCallOptions, StreamOptions
from agentcore_fsm.core.messages import UserMessage
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response

MODEL = Model(id="m", provider="p", api="a")


async def _execute(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult()


def _refused(make: Any, field: str, value: Any, error: type[Exception], *more: str) -> None:
    """``make(**{field: value})`` raises ``error`` naming the field (and ``more``)."""
    with pytest.raises(error) as info:
        make(**{field: value})
    text = str(info.value)
    assert field in text, text
    for part in more:
        assert part in text, text


BAD_DURATIONS = [
    (float("nan"), ValueError, "NaN"),
    (math.inf, ValueError, "inf"),
    (-math.inf, ValueError, "-inf"),
    (-1, ValueError, "-1"),
    ("5", TypeError, "str"),
    (True, TypeError, "bool"),
    ([5], TypeError, "list"),
]


@pytest.mark.parametrize(("value", "error", "shown"), BAD_DURATIONS)
def test_a_duration_is_checked_when_set(value: Any, error: type[Exception], shown: str) -> None:
    def make(**kw: Any) -> AgentLoopConfig:
        return AgentLoopConfig(model=MODEL, **kw)

    _refused(make, "approval_timeout_s", value, error, shown, "AgentLoopConfig")
    config = make()
    with pytest.raises(error, match="approval_timeout_s"):
        config.approval_timeout_s = value
    assert config.approval_timeout_s is None  # unchanged


@pytest.mark.parametrize("value", [None, 0, 0.5, 30, 86400.0])
def test_good_durations_are_kept(value: Any) -> None:
    config = AgentLoopConfig(model=MODEL, approval_timeout_s=value)
    assert config.approval_timeout_s == value


@pytest.mark.parametrize(
    "hook",
    [
        "before_tool_call",
        "after_tool_call",
        "prepare_next_turn",
        "should_stop_after_turn",
        "get_steering_messages",
        "get_follow_up_messages",
        "decide_approval",
        "convert_to_llm",
        "transform_context",
        "get_api_key",
        "on_payload",
        "on_response",
    ],
)
def test_a_hook_must_be_callable(hook: str) -> None:
    def make(**kw: Any) -> AgentLoopConfig:
        return AgentLoopConfig(model=MODEL, **kw)

    _refused(make, hook, "not callable", TypeError, "callable")
    config = make()
    with pytest.raises(TypeError, match=hook):
        setattr(config, hook, 42)
    setattr(config, hook, lambda *a: None)  # a callable is fine, and so is None
    setattr(config, hook, None)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("api_key", 123, TypeError),
        ("session_id", b"bytes", TypeError),
        ("transport", ["sse"], TypeError),
        ("temperature", float("nan"), ValueError),
        ("temperature", math.inf, ValueError),
        ("temperature", -0.5, ValueError),
        ("temperature", "0.7", TypeError),
        ("max_tokens", 0, ValueError),
        ("max_tokens", 1.5, TypeError),
        ("max_tokens", True, TypeError),
        ("max_retry_delay_ms", -1, ValueError),
        ("headers", {"x-a": 1}, TypeError),
        ("headers", "x-a: 1", TypeError),
        ("thinking_budgets", {"low": -5}, TypeError),
        ("thinking_budgets", {"low": 1.5}, TypeError),
        ("reasoning", "extreme", ValueError),
    ],
)
def test_model_call_options_are_checked_everywhere(field: str, value: Any, error: type) -> None:
    for make in (
        ModelCallOptions,
        StreamOptions,
        lambda **kw: AgentLoopConfig(model=MODEL, **kw),
    ):
        _refused(make, field, value, error)
    options = ModelCallOptions()
    with pytest.raises(error, match=field):
        setattr(options, field, value)
    assert getattr(options, field) is None


def test_good_model_call_options_are_kept() -> None:
    options = ModelCallOptions(
        api_key="k",
        reasoning="high",
        session_id="s",
        thinking_budgets={"low": 1024},
        transport="sse",
        max_retry_delay_ms=0,
        temperature=0,
        max_tokens=1,
        headers={"x-a": "b"},
        on_payload=print,
    )
    assert options.temperature == 0 and options.headers == {"x-a": "b"}


def test_the_model_the_choices_and_the_signal() -> None:
    _refused(lambda **kw: AgentLoopConfig(**kw), "model", "gpt-4o", TypeError, "Model")
    _refused(lambda **kw: AgentLoopConfig(model=MODEL, **kw), "tool_execution", "fast", ValueError)
    _refused(StreamOptions, "signal", object(), TypeError, "AbortSignal")


@pytest.mark.parametrize(
    ("field", "value", "error", "shown"),
    [
        ("system_prompt", None, TypeError, "str"),
        ("tools", "notalist", TypeError, "list"),
        ("tools", [object()], TypeError, "tools[0]"),
        ("messages", "hi", TypeError, "list"),
        ("messages", {"role": "user"}, TypeError, "list"),
    ],
)
def test_an_agent_context_is_checked(field: str, value: Any, error: type, shown: str) -> None:
    _refused(AgentContext, field, value, error, shown)
    context = AgentContext()
    with pytest.raises(error, match=field):
        setattr(context, field, value)


def test_an_agent_context_takes_tuples_as_lists() -> None:
    message = UserMessage(content="hi")
    context = AgentContext("s", (message,), ())
    assert context.messages == [message] and context.tools == []


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("name", "", ValueError),
        ("name", 7, TypeError),
        ("description", None, TypeError),
        ("execute", "not callable", TypeError),
        ("label", 3, TypeError),
        ("prepare_arguments", "x", TypeError),
        ("execution_mode", "fast", ValueError),
        ("idempotent", "yes", TypeError),
    ],
)
def test_an_agent_tool_is_checked(field: str, value: Any, error: type) -> None:
    fields: dict[str, Any] = {
        "name": "t",
        "description": "d",
        "parameters": {"type": "object"},
        "execute": _execute,
    }
    _refused(lambda **kw: AgentTool(**{**fields, **kw}), field, value, error)
    tool = AgentTool(**fields)
    with pytest.raises(error, match=field):
        setattr(tool, field, value)


@pytest.mark.anyio
async def test_a_checked_config_still_runs() -> None:
    """The checks change nothing for a good configuration: a run with every checked field set
    goes through."""
    config = AgentLoopConfig(
        model=MODEL,
        approval_timeout_s=5,
        temperature=0.2,
        max_tokens=100,
        headers={"x": "y"},
        before_tool_call=lambda ctx, signal: None,
        tool_execution="sequential",
    )
    messages = await run_agent_loop(
        [UserMessage(content="hi")],
        AgentContext("be brief", [], []),
        config,
        stream_fn=FauxProvider([faux_response("hello")]),
    )
    assert [m.role for m in messages] == ["user", "assistant"]
