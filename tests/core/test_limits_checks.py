"""Usage limits in the core (docs/policies.md#usage-limits): the settings refused when bad, the
pure checks, and the machine stepped by hand (no event loop, no clock: the time comes in with
each input)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from helpers import MODEL, make_tool, summarize, text_result, user
from limit_helpers import PRICED, usage_of

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    LoopMachine,
    TextContent,
    ToolCall,
    UsageLimits,
)
from agentcore_fsm.agent.limits import run_limits
from agentcore_fsm.core.events import AgentEndEvent, StreamDone
from agentcore_fsm.core.limit_actions import LIMIT_TEXT
from agentcore_fsm.core.limits import (
    DEFAULT_LAST_TURN_INSTRUCTION,
    LIMIT_NAMES,
    NOT_RUN_TEXT,
    LimitReached,
    RunUsage,
    check_batch,
    check_request,
    estimate_tokens,
)
from agentcore_fsm.core.protocol import (
    Abort,
    CallModel,
    ExecuteTool,
    Proceed,
    Proceeded,
    Start,
    StreamEvent,
    ToolFinished,
)

# --- the settings ----------------------------------------------------------------------------

INT_LIMITS = ["requests", "turns", "input_tokens", "output_tokens", "total_tokens"]


@pytest.mark.parametrize("name", [*INT_LIMITS, "tool_calls"])
@pytest.mark.parametrize("bad", [-1, True, False, 1.5, "3", float("nan")])
def test_a_count_limit_must_be_an_int(name: str, bad: Any) -> None:
    if name == "tool_calls" and bad is False:
        bad = -2  # (False is refused as a bool anyway; test another negative)
    with pytest.raises((TypeError, ValueError), match=rf"UsageLimits: {name} must be an int >="):
        UsageLimits(**{name: bad})


@pytest.mark.parametrize("name", INT_LIMITS)
def test_a_zero_count_limit_is_refused_but_zero_tool_calls_is_a_choice(name: str) -> None:
    with pytest.raises(ValueError, match=rf"{name} must be an int >= 1 or None, not 0"):
        UsageLimits(**{name: 0})
    assert UsageLimits(tool_calls=0).tool_calls == 0


@pytest.mark.parametrize("name", ["cost_usd", "seconds"])
@pytest.mark.parametrize("bad", [0, 0.0, -0.5, float("nan"), math.inf, -math.inf, True, "1"])
def test_cost_and_seconds_must_be_finite_and_positive(name: str, bad: Any) -> None:
    with pytest.raises((TypeError, ValueError), match=rf"UsageLimits: {name} must be a finite"):
        UsageLimits(**{name: bad})


def test_the_last_turn_settings_are_checked() -> None:
    with pytest.raises(TypeError, match="last_turn_without_tools must be a bool"):
        UsageLimits(last_turn_without_tools=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="last_turn_instruction must be a non-empty str"):
        UsageLimits(last_turn_instruction="  ")
    with pytest.raises(TypeError, match="used_before must be a RunUsage"):
        UsageLimits(used_before={"requests": 1})  # type: ignore[arg-type]
    assert UsageLimits().last_turn_instruction == DEFAULT_LAST_TURN_INSTRUCTION


def test_a_config_takes_only_usage_limits() -> None:
    with pytest.raises(TypeError, match="AgentLoopConfig: limits must be a UsageLimits or None"):
        AgentLoopConfig(model=MODEL, limits={"requests": 3})  # type: ignore[arg-type]
    config = AgentLoopConfig(model=MODEL)
    assert config.limits is None
    config.limits = UsageLimits(requests=2)
    assert config.limits.requests == 2


def test_limits_are_frozen_and_replace_checks_again() -> None:
    limits = UsageLimits(requests=3)
    with pytest.raises(AttributeError):
        limits.requests = 4  # type: ignore[misc]
    with pytest.raises(ValueError, match="requests"):
        replace(limits, requests=-1)


def test_tighter_takes_the_smaller_of_each_limit() -> None:
    a = UsageLimits(requests=5, cost_usd=1.0)
    b = UsageLimits(requests=3, seconds=10, last_turn_without_tools=True)
    both = a.tighter(b)
    assert (both.requests, both.cost_usd, both.seconds) == (3, 1.0, 10)
    assert both.last_turn_without_tools is True
    assert a.tighter(None) is a


# --- the pure checks -------------------------------------------------------------------------


def test_the_estimate_is_a_quarter_of_the_characters_rounded_up() -> None:
    message = user("x" * 40)
    chars = len(message.model_dump_json()) + len("sys!")
    assert estimate_tokens([message], "sys!") == -(-chars // 4)
    assert estimate_tokens([]) == 0


def test_a_request_is_checked_against_each_budget() -> None:
    messages = [user("hello")]
    est = estimate_tokens(messages)
    used = RunUsage(requests=2, turns=2, input_tokens=50, output_tokens=10, cost_usd=0.5)
    assert check_request(UsageLimits(requests=3), used, messages, "", PRICED, 0) is None
    reached = check_request(UsageLimits(requests=2), used, messages, "", PRICED, 0)
    assert reached == LimitReached(limit="requests", maximum=2, used=2, needed=3)
    reached = check_request(UsageLimits(input_tokens=50 + est - 1), used, messages, "", PRICED, 0)
    assert reached is not None and reached.limit == "input_tokens"
    assert reached.needed == 50 + est
    assert check_request(UsageLimits(input_tokens=50 + est), used, messages, "", PRICED, 0) is None
    reached = check_request(UsageLimits(output_tokens=10), used, messages, "", PRICED, 0)
    assert reached is not None and reached.limit == "output_tokens" and reached.needed is None
    reached = check_request(UsageLimits(total_tokens=60 + est - 1), used, messages, "", PRICED, 0)
    assert reached is not None and reached.limit == "total_tokens"
    reached = check_request(UsageLimits(cost_usd=0.5), used, messages, "", PRICED, 0)
    assert reached is not None and reached.limit == "cost_usd"
    assert reached.needed == pytest.approx(0.5 + est / 1_000_000)
    late = replace(used, started_at=1000)
    reached = check_request(UsageLimits(seconds=2), late, messages, "", PRICED, 3000)
    assert reached is not None and reached.limit == "seconds" and reached.used == 2.0
    assert check_request(UsageLimits(seconds=2), late, messages, "", PRICED, 2999) is None


def test_the_estimate_starts_from_the_input_the_provider_reported() -> None:
    messages = [user("a"), user("b" * 400)]
    # the last response reported 1000 input tokens for a request of the first message
    used = RunUsage(context_tokens=1000, context_messages=1)
    added = estimate_tokens(messages[1:])
    limit = UsageLimits(input_tokens=1000 + added)
    assert check_request(limit, used, messages, "", PRICED, 0) is None
    limit = UsageLimits(input_tokens=1000 + added - 1)
    reached = check_request(limit, used, messages, "", PRICED, 0)
    assert reached is not None and reached.needed == 1000 + added


def test_a_batch_is_checked_with_its_calls_counted() -> None:
    used = RunUsage(requests=1, turns=1, tool_calls=3)
    assert check_batch(UsageLimits(tool_calls=3), used, 2, 0) is None
    reached = check_batch(UsageLimits(tool_calls=2), used, 2, 0)
    assert reached == LimitReached(
        limit="tool_calls", maximum=2, used=1, needed=3, where="before_tools"
    )
    reached = check_batch(UsageLimits(requests=1), used, 2, 0)
    assert reached is not None and reached.limit == "requests"
    assert check_batch(UsageLimits(requests=2), used, 2, 0) is None


def test_limit_reached_reads_as_one_line() -> None:
    reached = LimitReached(limit="cost_usd", maximum=0.5, used=0.25, needed=0.625)
    assert reached.text() == "cost_usd: 0.25 of 0.5 used, 0.625 needed"
    assert LimitReached(limit="requests", maximum=3, used=3).text() == "requests: 3 of 3 used"


# --- an Agent's limits -----------------------------------------------------------------------


def test_a_prompts_limits_count_from_the_session_usage() -> None:
    used = RunUsage(requests=4, tool_calls=1, cost_usd=0.25)
    limits = run_limits(UsageLimits(requests=10), UsageLimits(requests=3, seconds=5), used)
    assert limits is not None
    assert (limits.requests, limits.seconds, limits.used_before) == (7, 5, used)
    limits = run_limits(UsageLimits(requests=5), UsageLimits(requests=3), used)
    assert limits is not None and limits.requests == 5  # the session's is the tighter
    assert run_limits(None, None, used) is None
    only = run_limits(None, UsageLimits(tool_calls=0, cost_usd=0.5), used)
    assert only is not None and (only.tool_calls, only.cost_usd) == (1, 0.75)
    with pytest.raises(TypeError, match="limits must be a UsageLimits or None"):
        run_limits(None, 3, used)  # type: ignore[arg-type]


# --- the machine, stepped by hand --------------------------------------------------------------


def reply(*calls: str, input: int = 100, output: int = 10) -> AssistantMessage:
    content: list[Any] = [TextContent(text="ok")]
    content += [ToolCall(id=c, name="echo", arguments={}) for c in calls]
    return AssistantMessage(
        content=content,
        api=PRICED.api,
        provider=PRICED.provider,
        model=PRICED.id,
        usage=usage_of(PRICED, input, output),
        stop_reason="toolUse" if calls else "stop",
    )


def machine(limits: UsageLimits | None, system_prompt: str = "sys") -> LoopMachine:
    tool = make_tool("echo", execute=lambda *a: text_result("done"))
    context = AgentContext(system_prompt=system_prompt, tools=[tool])
    return LoopMachine([user("hi")], context, AgentLoopConfig(model=PRICED, limits=limits))


def finish(m: LoopMachine, message: AssistantMessage, at: int) -> Any:
    return m.feed(
        StreamEvent(StreamDone(reason=message.stop_reason, message=message), timestamp=at)
    )


def run_tools(m: LoopMachine, step: Any, at: int) -> Any:
    """Finish the step's tool calls and deliver the turn's end: the step after (a model call,
    or the run's end)."""
    events = list(step.events)
    for effect in step.effects:
        if isinstance(effect, ExecuteTool):
            step = m.feed(ToolFinished(effect.index, text_result("done"), timestamp=at))
            events += step.events
    while step.effects and isinstance(step.effects[0], Proceed):
        step = m.feed(Proceeded(timestamp=at))
        events += step.events
    step.events = events
    return step


def test_the_machine_counts_and_stops_before_the_request_over_the_limit() -> None:
    m = machine(UsageLimits(requests=2))
    step = m.feed(Start(timestamp=1000))
    # the request is made: counted with its response
    assert m.usage == RunUsage(turns=1, started_at=1000) and m.vars.requested
    assert isinstance(step.effects[0], CallModel)
    step = run_tools(m, finish(m, reply("c1"), 1100), 1200)
    assert m.state == "streaming" and m.usage is not None and m.usage.requests == 1
    step = run_tools(m, finish(m, reply("c2"), 1300), 1400)
    # the second response asked for a tool, but no request is left to read its result: the
    # batch does not run, its call gets a result saying so, the run ends with the limit
    assert m.state == "stopped" and m.end_reason == "limit"
    end = step.events[-1]
    assert isinstance(end, AgentEndEvent) and end.reason == "limit"
    assert end.limit == LimitReached(limit="requests", maximum=2, used=2, where="before_tools")
    # the call that did not run is not counted
    assert end.usage == m.usage and end.usage is not None and end.usage.tool_calls == 1
    result = m.new_messages[-1]
    assert result.role == "toolResult" and result.is_error
    assert result.content[0].text == NOT_RUN_TEXT.format(name="echo", limit=end.limit.text())
    assert summarize(step.events)[-6:] == [
        "tool_execution_start:c2",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        "agent_end:limit",
    ]
    assert step.events[-2].tool_results == [result]


def test_a_request_that_would_go_over_closes_its_turn_with_the_limit_named() -> None:
    m = machine(UsageLimits(input_tokens=150))
    m.feed(Start(timestamp=0))
    # the response reports 100 input tokens; the next request adds the response and the tool
    # result (estimated from their characters), over 150
    step = run_tools(m, finish(m, reply("c1", input=100), 10), 20)
    assert m.state == "stopped" and m.end_reason == "limit"
    cut = m.new_messages[-1]
    assert isinstance(cut, AssistantMessage) and cut.stop_reason == "aborted"
    reached = step.events[-1].limit
    assert reached.limit == "input_tokens" and reached.where == "before_request"
    assert reached.used == 100 and reached.needed is not None and reached.needed > 150
    assert cut.error_message == LIMIT_TEXT.format(text=reached.text())
    # the cut turn made no request
    assert not [e for e in step.effects if isinstance(e, CallModel)]
    # the cut turn made no request and is not counted
    assert m.usage is not None and m.usage.requests == 1 and m.usage.turns == 1


def test_the_last_request_goes_without_tools_and_with_the_instruction() -> None:
    limits = UsageLimits(requests=2, last_turn_without_tools=True, last_turn_instruction="Wrap up.")
    m = machine(limits)
    step = m.feed(Start(timestamp=0))
    first = step.effects[0]
    assert isinstance(first, CallModel) and len(first.context.tools) == 1
    assert first.context.system_prompt == "sys"
    step = run_tools(m, finish(m, reply("c1"), 10), 20)
    last = next(e for e in step.effects if isinstance(e, CallModel))
    assert last.context.tools == [] and last.context.system_prompt == "sys\n\nWrap up."
    assert m.context.system_prompt == "sys" and len(m.context.tools) == 1  # run unchanged
    step = finish(m, reply(), 30)
    assert isinstance(step.effects[0], Proceed)
    m.feed(Proceeded(timestamp=40))
    assert m.end_reason == "completed"


def test_without_limits_nothing_is_counted() -> None:
    m = machine(None)
    m.feed(Start(timestamp=0))
    step = finish(m, reply(), 10)
    assert m.usage is None and m.vars.limit_reached is None
    assert m.deadline is None
    assert all(getattr(e, "usage", None) is None for e in step.events if e.type == "agent_end")


def test_an_abort_at_the_deadline_ends_with_the_deadline_as_reason() -> None:
    m = machine(UsageLimits(seconds=2))
    m.feed(Start(timestamp=5000))
    assert m.deadline == 7000
    step = m.feed(Abort(timestamp=7000))
    assert m.end_reason == "limit"
    end = step.events[-1]
    assert end.limit == LimitReached(limit="seconds", maximum=2, used=2.0, where="deadline")
    cut = m.new_messages[-1]
    assert cut.stop_reason == "aborted" and cut.error_message == LIMIT_TEXT.format(
        text=end.limit.text()
    )


def test_an_abort_before_the_deadline_is_an_abort() -> None:
    m = machine(UsageLimits(seconds=2))
    m.feed(Start(timestamp=5000))
    step = m.feed(Abort(timestamp=6999))
    assert m.end_reason == "aborted" and step.events[-1].limit is None


def test_the_end_event_dump_leaves_out_limit_and_usage_when_none() -> None:
    plain = AgentEndEvent(messages=[], reason="completed").model_dump(mode="json")
    assert "limit" not in plain and "usage" not in plain
    reached = LimitReached(limit="requests", maximum=2, used=2)
    event = AgentEndEvent(messages=[], reason="limit", limit=reached, usage=RunUsage(requests=2))
    data = event.model_dump(mode="json", by_alias=True)
    assert data["limit"]["limit"] == "requests" and data["usage"]["requests"] == 2
    assert AgentEndEvent.model_validate(data) == event


def test_every_limit_name_is_a_setting() -> None:
    assert set(LIMIT_NAMES) <= {f for f in UsageLimits.__dataclass_fields__}
