"""Per-tool timeout/retry/concurrency settings and the run's tool policy, in the pure core
(docs/policies-tools.md): bad settings refused when made, the declared retry path stepped by
hand, the repeat count, the journal entries of the new inputs."""

from __future__ import annotations

import math
from typing import Any

import pytest
from helpers import MODEL, make_tool, summarize, text_of, text_result, user

from agentcore_fsm import AgentContext, AgentLoopConfig, AssistantMessage, LoopMachine, ToolCall
from agentcore_fsm.core.declared import MachineInputError
from agentcore_fsm.core.events import StreamDone
from agentcore_fsm.core.function_tools import tool
from agentcore_fsm.core.protocol import (
    BackOff,
    ExecuteTool,
    RetryDue,
    Step,
    ToolAttemptFailed,
    ToolTimedOut,
)
from agentcore_fsm.core.retry import RetryPolicy
from agentcore_fsm.core.tool_policy import ToolPolicy, call_key
from agentcore_fsm.persist.journal import JournaledLoopMachine

FAST = RetryPolicy(max_attempts=3, backoff_base_s=0.001, backoff_max_s=0.002, jitter=0)


def names(step: Step) -> list[str]:
    return summarize(step.events, updates=True)


def assistant(*calls: ToolCall) -> AssistantMessage:
    return AssistantMessage(
        content=list(calls),
        api=MODEL.api,
        provider=MODEL.provider,
        model=MODEL.id,
        stop_reason="toolUse" if calls else "stop",
    )


def call(call_id: str, name: str = "t", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def machine(tools: list[Any], **config: Any) -> LoopMachine:
    m = LoopMachine([user("hi")], AgentContext(tools=tools), AgentLoopConfig(model=MODEL, **config))
    m.start()
    return m


def answer(m: LoopMachine, *calls: ToolCall) -> Step:
    message = assistant(*calls)
    return m.stream_event(StreamDone(reason=message.stop_reason, message=message))


# --- bad settings are refused when made, naming the setting -----------------------------------


@pytest.mark.parametrize(
    ("kwargs", "named", "kind"),
    [
        ({"max_attempts": 0}, "max_attempts", ValueError),
        ({"max_attempts": 2.0}, "max_attempts", TypeError),
        ({"max_attempts": True}, "max_attempts", TypeError),
        ({"backoff_base_s": -0.1}, "backoff_base_s", ValueError),
        ({"backoff_base_s": math.nan}, "backoff_base_s", ValueError),
        ({"backoff_max_s": math.inf}, "backoff_max_s", ValueError),
        ({"backoff_base_s": 2.0, "backoff_max_s": 1.0}, "backoff_max_s", ValueError),
        ({"jitter": -0.01}, "jitter", ValueError),
        ({"jitter": 1.5}, "jitter", ValueError),
        ({"jitter": math.nan}, "jitter", ValueError),
        ({"jitter": "0.1"}, "jitter", TypeError),
        ({"retry_on": ()}, "retry_on", TypeError),
        ({"retry_on": (ValueError, "x")}, "retry_on", TypeError),
        ({"retry_timeouts": 1}, "retry_timeouts", TypeError),
        ({"retry_non_idempotent": None}, "retry_non_idempotent", TypeError),
    ],
)
def test_a_bad_retry_policy_is_refused_naming_the_setting(
    kwargs: dict[str, Any], named: str, kind: type[Exception]
) -> None:
    with pytest.raises(kind, match=f"RetryPolicy: {named} must be"):
        RetryPolicy(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "named", "kind"),
    [
        ({"max_parallel_calls": 0}, "max_parallel_calls", ValueError),
        ({"max_parallel_calls": 1.0}, "max_parallel_calls", TypeError),
        ({"repeat_limit": 1}, "repeat_limit", ValueError),
        ({"repeat_limit": False}, "repeat_limit", TypeError),
        ({"on_repeat": "warn"}, "on_repeat", ValueError),
    ],
)
def test_a_bad_tool_policy_is_refused_naming_the_setting(
    kwargs: dict[str, Any], named: str, kind: type[Exception]
) -> None:
    with pytest.raises(kind, match=f"ToolPolicy: {named} must be"):
        ToolPolicy(**kwargs)


@pytest.mark.parametrize(
    ("field", "value", "kind"),
    [
        ("timeout_s", 0, ValueError),
        ("timeout_s", -1.0, ValueError),
        ("timeout_s", math.nan, ValueError),
        ("timeout_s", math.inf, ValueError),
        ("timeout_s", True, TypeError),
        ("timeout_s", "1", TypeError),
        ("max_concurrency", 0, ValueError),
        ("max_concurrency", 1.5, TypeError),
        ("retry", 3, TypeError),
    ],
)
def test_bad_tool_settings_are_refused_naming_the_tool_and_setting(
    field: str, value: Any, kind: type[Exception]
) -> None:
    with pytest.raises(kind, match=f"tool 't': {field} must be"):
        make_tool("t", **{field: value})
    good = make_tool("t")
    with pytest.raises(kind, match=f"tool 't': {field} must be"):
        setattr(good, field, value)
    assert getattr(good, field) is None  # the bad value was not kept


def test_the_function_tool_decorator_takes_the_settings_and_checks_them() -> None:
    @tool(timeout_s=2.5, retry=FAST, max_concurrency=2, idempotent=True)
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    assert (lookup.timeout_s, lookup.retry, lookup.max_concurrency) == (2.5, FAST, 2)
    with pytest.raises(ValueError, match="tool 'lookup': timeout_s must be"):
        tool(lookup.function, timeout_s=-1)
    with pytest.raises(ValueError, match="tool 'lookup': max_concurrency must be"):
        tool(lookup.function, max_concurrency=0)


def test_the_config_takes_only_a_tool_policy() -> None:
    assert AgentLoopConfig(model=MODEL).tool_policy is None
    with pytest.raises(TypeError, match="tool_policy must be a ToolPolicy"):
        AgentLoopConfig(model=MODEL, tool_policy={"repeat_limit": 2})  # type: ignore[arg-type]


def test_the_backoff_doubles_up_to_its_cap_and_jitter_only_shortens_it() -> None:
    policy = RetryPolicy(backoff_base_s=1.0, backoff_max_s=5.0, jitter=0.5)
    assert [policy.delay_s(n, 0.0) for n in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert policy.delay_s(2, 0.5) == pytest.approx(1.5)
    assert policy.delay_s(2, 0.999) > 1.0
    assert RetryPolicy(jitter=0).delay_s(1, 0.9) == 0.5
    assert RetryPolicy(retry_on=KeyError).retry_on == (KeyError,)
    assert RetryPolicy(retry_on=(KeyError,)).retries(KeyError("k"))
    assert not RetryPolicy(retry_on=(KeyError,)).retries(ValueError("v"))


def test_call_keys_ignore_key_order_and_tell_arguments_apart() -> None:
    assert call_key("t", {"a": 1, "b": 2}) == call_key("t", {"b": 2, "a": 1})
    assert call_key("t", {"a": 1}) != call_key("t", {"a": 2})
    assert call_key("t", {"a": 1}) != call_key("u", {"a": 1})


# --- the declared retry path, stepped by hand ---------------------------------------------------


def test_a_retried_call_backs_off_and_runs_again_step_by_step() -> None:
    t = make_tool("t", idempotent=True, retry=FAST)
    m = machine([t])
    step = answer(m, call("c1"))
    (execute,) = step.effects
    assert isinstance(execute, ExecuteTool)
    c = m.tool_calls[0]
    assert c.vars.attempt == 1

    step = m.feed(ToolAttemptFailed(0, RuntimeError("flaky")))
    assert c.state == "backing_off"
    assert names(step) == ["tool_execution_update:c1"]
    assert text_of(step.events[0].partial_result) == "Attempt 1 of 3 failed: flaky; retrying"
    assert step.events[0].partial_result.details == {
        "attempt": 1,
        "max_attempts": 3,
        "error": "flaky",
    }
    assert step.effects == [BackOff(0, t, 1)]
    assert m.pending_tool_calls == ["c1"]
    assert m.pending_effects() == [BackOff(0, t, 1)]  # a resumed run waits again

    step = m.feed(RetryDue(0))
    assert c.state == "running" and c.vars.attempt == 2
    (again,) = step.effects
    assert isinstance(again, ExecuteTool) and again.index == 0
    assert step.events == []

    step = m.feed(ToolAttemptFailed(0, RuntimeError("flaky again")))
    assert c.state == "backing_off"
    m.feed(RetryDue(0))
    assert c.vars.attempt == 3
    step = m.feed(ToolAttemptFailed(0, RuntimeError("still")))
    assert names(step)[:1] == ["tool_execution_end:c1:error"]
    assert text_of(step.events[0].result) == "still (attempt 3, the last)"
    assert step.events[0].is_error
    triggers = [(r.trigger, r.source, r.dest) for r in c.history]
    assert triggers == [
        ("begin", "new", "ready"),
        ("run", "ready", "running"),
        ("attempt_failed", "running", "backing_off"),
        ("retry_due", "backing_off", "running"),
        ("attempt_failed", "running", "backing_off"),
        ("retry_due", "backing_off", "running"),
        ("attempt_failed", "running", "ended"),
        ("answer", "ended", "answered"),
    ]


def test_a_non_idempotent_tool_is_not_retried_unless_its_policy_opts_in() -> None:
    m = machine([make_tool("t", retry=FAST)])
    answer(m, call("c1"))
    step = m.feed(ToolAttemptFailed(0, RuntimeError("once")))
    assert m.tool_calls[0].state == "answered"
    assert text_of(step.events[0].result) == "once"

    opted = RetryPolicy(
        max_attempts=2, backoff_base_s=0, backoff_max_s=0, retry_non_idempotent=True
    )
    m = machine([make_tool("t", retry=opted)])
    answer(m, call("c1"))
    m.feed(ToolAttemptFailed(0, RuntimeError("once")))
    assert m.tool_calls[0].state == "backing_off"


def test_a_timeout_ends_the_call_with_a_result_naming_it_or_retries_it() -> None:
    m = machine([make_tool("slow", timeout_s=0.25)])
    answer(m, call("c1", "slow"))
    step = m.feed(ToolTimedOut(0))
    end = step.events[0]
    assert end.type == "tool_execution_end" and end.is_error
    assert text_of(end.result) == 'Tool "slow" timed out after 0.25 s'

    m = machine([make_tool("slow", timeout_s=1, idempotent=True, retry=FAST)])
    answer(m, call("c1", "slow"))
    step = m.feed(ToolTimedOut(0))
    assert m.tool_calls[0].state == "backing_off"
    assert text_of(step.events[0].partial_result) == (
        'Attempt 1 of 3 failed: Tool "slow" timed out after 1 s; retrying'
    )

    no_timeouts = RetryPolicy(retry_timeouts=False)
    m = machine([make_tool("slow", timeout_s=1, idempotent=True, retry=no_timeouts)])
    answer(m, call("c1", "slow"))
    m.feed(ToolTimedOut(0))
    assert m.tool_calls[0].state == "answered"


def test_the_new_inputs_are_refused_where_they_do_not_fit() -> None:
    m = machine([make_tool("t")])
    answer(m, call("c1"))
    with pytest.raises(MachineInputError, match="has no timeout_s"):
        m.feed(ToolTimedOut(0))
    with pytest.raises(MachineInputError, match="not waiting for its next attempt"):
        m.feed(RetryDue(0))
    with pytest.raises(MachineInputError, match="error must be an exception"):
        m.feed(ToolAttemptFailed(0, "boom"))  # type: ignore[arg-type]
    m.tool_finished(0, result=text_result("ok"))
    with pytest.raises(MachineInputError):
        m.feed(ToolAttemptFailed(0, RuntimeError("late")))


def test_an_abort_while_backing_off_answers_the_call_aborted() -> None:
    m = machine([make_tool("t", idempotent=True, retry=FAST)])
    answer(m, call("c1"))
    m.feed(ToolAttemptFailed(0, RuntimeError("flaky")))
    step = m.abort()
    ends = [e for e in step.events if e.type == "tool_execution_end"]
    assert [text_of(e.result) for e in ends] == ["Operation aborted"]
    assert m.end_reason == "aborted"


def test_a_call_waiting_between_attempts_holds_back_the_next_sequential_call() -> None:
    m = machine([make_tool("t", idempotent=True, retry=FAST)], tool_execution="sequential")
    answer(m, call("c1"), call("c2"))
    m.feed(ToolAttemptFailed(0, RuntimeError("flaky")))
    assert [c.state for c in m.tool_calls] == ["backing_off", "new"]
    m.feed(RetryDue(0))
    step = m.tool_finished(0, result=text_result("ok"))
    assert [c.state for c in m.tool_calls] == ["answered", "running"]
    assert [type(e) for e in step.effects] == [ExecuteTool]


# --- repeated identical calls --------------------------------------------------------------------


def test_the_same_call_repeat_limit_times_in_a_row_is_refused_across_turns() -> None:
    m = machine([make_tool("t")], tool_policy=ToolPolicy(repeat_limit=3))
    for turn, expected in enumerate(["running", "running", "answered"]):
        step = answer(m, call(f"c{turn}", x=1))
        assert m.tool_calls[0].state == expected, turn
        if expected == "running":
            m.tool_finished(0, result=text_result("ok"))
            m.proceed()
    refused = [e for e in step.events if e.type == "tool_execution_end"]
    assert [text_of(e.result) for e in refused] == [
        'Tool "t" was not executed: it was called with the same arguments 3 times in a row '
        "(the limit is 3). Do not repeat the call; use its earlier result or try something else."
    ]
    assert step.effects and not any(isinstance(e, ExecuteTool) for e in step.effects)
    assert (m.vars.repeat_count, m.vars.repeat_key) == (3, call_key("t", {"x": 1}))
    m.proceed()
    assert m.state == "streaming"  # "error": the run goes on


def test_another_call_in_between_starts_the_count_again() -> None:
    m = machine([make_tool("t")], tool_policy=ToolPolicy(repeat_limit=2))
    answer(m, call("c1", x=1), call("c2", x=2), call("c3", x=1))
    assert [c.state for c in m.tool_calls] == ["running"] * 3
    assert m.vars.repeat_count == 1


def test_repeats_within_one_message_count_and_stop_ends_the_run_after_the_turn() -> None:
    m = machine([make_tool("t")], tool_policy=ToolPolicy(repeat_limit=2, on_repeat="stop"))
    step = answer(m, call("c1", x=1), call("c2", x=1))
    assert [c.state for c in m.tool_calls] == ["running", "ended"]
    assert [type(e) for e in step.effects] == [ExecuteTool]
    step = m.tool_finished(0, result=text_result("ok"))
    assert names(step)[-2:] == ["turn_end", "agent_end:stopped"]
    assert m.end_reason == "stopped"
    results = [text_of(r) for r in step.events[-2].tool_results]
    assert results[0] == "ok"
    assert results[1].endswith("(the limit is 2). The run stops.")


def test_without_a_policy_repeats_are_not_counted() -> None:
    m = machine([make_tool("t")])
    answer(m, call("c1"), call("c2"), call("c3"))
    assert [c.state for c in m.tool_calls] == ["running"] * 3
    assert (m.vars.repeat_count, m.vars.repeat_key) == (0, None)


# --- journaled ----------------------------------------------------------------------------------


def test_retries_timeouts_and_repeat_counts_are_journaled_and_restored() -> None:
    tools = [make_tool("t", idempotent=True, retry=FAST), make_tool("s", timeout_s=1)]
    config = AgentLoopConfig(model=MODEL, tool_policy=ToolPolicy(repeat_limit=2))
    m = JournaledLoopMachine([user("hi")], AgentContext(tools=tools), config)
    m.start()
    answer(m, call("c1", "t"), call("c2", "s"))
    m.feed(ToolAttemptFailed(0, RuntimeError("flaky")))
    m.feed(ToolTimedOut(1))
    m.feed(RetryDue(0))
    kinds = [e["input"] for e in m.entries]
    assert kinds[-3:] == ["tool_attempt_failed", "tool_timed_out", "retry_due"]
    assert m.entries[-3]["error"] == "flaky"
    restored, _ = JournaledLoopMachine.restore(m.snapshot(), config, tools=tools, run_id="r")
    assert [c.state for c in restored.tool_calls] == ["running", "ended"]
    assert restored.tool_calls[0].vars.attempt == 2
    assert (restored.vars.repeat_count, restored.vars.repeat_key) == (1, call_key("s", {}))
    assert text_of(restored.tool_calls[1].result) == 'Tool "s" timed out after 1 s'
