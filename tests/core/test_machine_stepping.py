"""Stepping the sans-IO machine by hand: no event loop anywhere in this file.

Each test builds a :class:`LoopMachine`, feeds it one input at a time, and checks the state, the
events and the effects after every step, as a user debugging a run would.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import MODEL, make_tool, summarize, text_of, text_result, user

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    BeforeToolCallResult,
    LoopMachine,
    TextContent,
    ToolCall,
    ToolResultMessage,
)
from agentcore_fsm.core.declared import MachineError, MachineInputError
from agentcore_fsm.core.events import (
    StreamDone,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
)
from agentcore_fsm.core.machine import Proceed
from agentcore_fsm.core.protocol import (
    CallHook,
    CallModel,
    ExecuteTool,
    PollFollowUp,
    PollSteering,
    Step,
)


def names(step: Step) -> list[str]:
    return summarize(step.events, updates=True)


def machine(
    prompts: list[Any] | None = None, *, tools: list[Any] | None = None, **config: Any
) -> LoopMachine:
    return LoopMachine(
        [user("hi")] if prompts is None else prompts,
        AgentContext(system_prompt="sys", tools=tools or []),
        AgentLoopConfig(model=MODEL, **config),
    )


def assistant(*content: Any, stop_reason: Any = "stop", **kwargs: Any) -> AssistantMessage:
    return AssistantMessage(
        content=list(content),
        api=MODEL.api,
        provider=MODEL.provider,
        model=MODEL.id,
        stop_reason=stop_reason,
        **kwargs,
    )


def call(call_id: str, name: str = "t", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def started(m: LoopMachine) -> CallModel:
    """Start ``m`` (no polls configured) and return its first model call."""
    step = m.start()
    assert m.state == "streaming"
    (effect,) = step.effects
    assert isinstance(effect, CallModel)
    return effect


def path(m: LoopMachine) -> list[tuple[str, str, str]]:
    return [(r.trigger, r.source, r.dest) for r in m.history]


# --- a plain text turn --------------------------------------------------------------------------


def test_plain_text_turn_step_by_step() -> None:
    prompt = user("hi")
    m = machine([prompt])
    assert m.state == "idle"
    assert m.accepted_inputs() == ["start"]
    assert not m.finished

    step = m.start()
    assert names(step) == ["agent_start", "turn_start", "message_start:user", "message_end:user"]
    assert step.events[2].message is prompt
    assert m.state == "streaming"  # no steering hook configured: nothing to poll
    (effect,) = step.effects
    assert isinstance(effect, CallModel)
    assert effect.model is MODEL and effect.reasoning is None
    assert effect.context.messages == [prompt] and effect.context.system_prompt == "sys"

    partial = assistant(stop_reason="pending")
    step = m.stream_event(StreamStart(partial=partial))
    assert names(step) == ["message_start:assistant"] and step.effects == []
    assert step.events[0].message is partial

    partial.content.append(TextContent(text=""))
    assert names(m.stream_event(TextStart(content_index=0, partial=partial))) == [
        "message_update:text_start"
    ]
    partial.content[0] = TextContent(text="Hello")
    step = m.stream_event(TextDelta(content_index=0, delta="Hello", partial=partial))
    assert names(step) == ["message_update:text_delta"]
    assert step.events[0].message is partial and step.effects == []
    assert m.turn_message is partial
    step = m.stream_event(TextEnd(content_index=0, content="Hello", partial=partial))
    assert names(step) == ["message_update:text_end"]
    assert m.state == "streaming"

    final = assistant(TextContent(text="Hello"))
    step = m.stream_event(StreamDone(reason="stop", message=final))
    assert names(step) == ["message_end:assistant:stop", "turn_end"]
    assert step.events[0].message is final
    assert step.events[1].message is final and step.events[1].tool_results == []
    assert step.effects == [Proceed()]
    assert m.state == "closing_turn"

    step = m.proceed()
    assert names(step) == ["agent_end:completed"]
    assert step.events[0].messages == [prompt, final]
    assert step.effects == []
    assert m.state == "stopped" and m.finished
    assert m.end_reason == "completed"
    assert m.new_messages == [prompt, final]
    assert path(m) == [
        ("start", "idle", "awaiting_steering"),
        ("skip_steering_poll", "awaiting_steering", "streaming"),
        ("model_finished", "streaming", "turn_end"),
        ("after_turn", "turn_end", "closing_turn"),
        ("proceeded", "closing_turn", "awaiting_steering"),
        ("skip_steering_poll", "awaiting_steering", "awaiting_follow_up"),
        ("skip_follow_up_poll", "awaiting_follow_up", "stopped"),
    ]


def test_the_callers_context_is_not_touched_by_stepping() -> None:
    context = AgentContext(messages=[user("old")])
    before = list(context.messages)
    m = LoopMachine([user("new")], context, AgentLoopConfig(model=MODEL))
    effect = started(m)
    m.stream_event(StreamDone(reason="stop", message=assistant(TextContent(text="x"))))
    m.proceed()
    assert context.messages == before
    assert [text_of(x) for x in effect.context.messages] == ["old", "new", "x"]


# --- tool turns -------------------------------------------------------------------------------


def test_parallel_tool_turn_step_by_step() -> None:
    tools = [make_tool("a"), make_tool("b")]
    m = machine(tools=tools)
    started(m)
    message = assistant(call("c1", "a", x=1), call("c2", "b"), stop_reason="toolUse")
    step = m.stream_event(StreamDone(reason="toolUse", message=message))
    assert names(step) == [
        "message_start:assistant",
        "message_end:assistant:toolUse",
        "tool_execution_start:c1",
        "tool_execution_start:c2",
    ]
    assert step.events[2].args == {"x": 1}
    assert m.state == "executing"
    assert [type(e) for e in step.effects] == [ExecuteTool, ExecuteTool]
    first, second = step.effects
    assert isinstance(first, ExecuteTool) and isinstance(second, ExecuteTool)
    assert (first.index, first.tool, first.tool_call, first.args) == (
        0,
        tools[0],
        message.content[0],
        {"x": 1},
    )
    assert (second.index, second.tool) == (1, tools[1])
    assert m.pending_tool_calls == ["c1", "c2"]

    step = m.tool_update(1, text_result("half"))
    assert names(step) == ["tool_execution_update:c2"] and step.effects == []
    step = m.tool_finished(1, result=text_result("b result"))
    assert names(step) == ["tool_execution_end:c2"] and step.effects == []
    assert m.state == "executing"
    assert m.pending_tool_calls == ["c1"]

    step = m.tool_finished(0, result=text_result("a result"))
    assert names(step) == [
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
    ]
    assert [text_of(r) for r in step.events[-1].tool_results] == ["a result", "b result"]
    assert step.effects == [Proceed()]
    assert m.state == "closing_turn"

    step = m.proceed()
    assert names(step) == ["turn_start"]
    assert m.state == "streaming"
    (effect,) = step.effects
    assert isinstance(effect, CallModel)
    assert [getattr(x, "role", None) for x in effect.context.messages] == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
    ]
    step = m.stream_event(StreamDone(reason="stop", message=assistant(TextContent(text="ok"))))
    assert names(step) == ["message_start:assistant", "message_end:assistant:stop", "turn_end"]
    assert names(m.proceed()) == ["agent_end:completed"]


def test_sequential_tool_turn_step_by_step() -> None:
    m = machine(tools=[make_tool("t")], tool_execution="sequential")
    started(m)
    message = assistant(call("c1"), call("c2"), stop_reason="toolUse")
    step = m.stream_event(StreamDone(reason="toolUse", message=message))
    assert names(step) == [
        "message_start:assistant",
        "message_end:assistant:toolUse",
        "tool_execution_start:c1",
    ]
    (effect,) = step.effects
    assert isinstance(effect, ExecuteTool) and effect.index == 0
    assert m.state == "executing"

    step = m.tool_finished(0, result=text_result("one"))
    assert names(step) == [
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "tool_execution_start:c2",
    ]
    (effect,) = step.effects
    assert isinstance(effect, ExecuteTool) and effect.index == 1
    assert m.state == "executing"

    step = m.tool_finished(1, error=RuntimeError("two failed"))
    assert names(step) == [
        "tool_execution_end:c2:error",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
    ]
    assert text_of(step.events[2].message) == "two failed"
    assert step.effects == [Proceed()]
    assert [r.trigger for r in m.history][-5:] == [
        "tools_prepared",
        "tools_settled",
        "tools_prepared",
        "tools_settled",
        "after_turn",
    ]
    # each call ran its own machine
    assert [[r.trigger for r in c.history] for c in m.tool_calls] == [
        ["begin", "run", "finished", "answer"],
        ["begin", "run", "finished", "answer"],
    ]


def test_length_truncation_step_by_step() -> None:
    m = machine(tools=[make_tool("write")])
    started(m)
    message = assistant(call("c1", "write", text="abc"), stop_reason="length")
    step = m.stream_event(StreamDone(reason="length", message=message))
    assert names(step) == [
        "message_start:assistant",
        "message_end:assistant:length",
        "tool_execution_start:c1",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
    ]
    assert text_of(step.events[4].message).startswith('Tool call "write" was not executed')
    assert step.effects == [Proceed()]
    assert m.state == "closing_turn"
    step = m.proceed()
    assert names(step) == ["turn_start"]
    assert isinstance(step.effects[0], CallModel)


def test_error_stop_ends_the_run_in_one_step() -> None:
    m = machine(tools=[make_tool("t")])
    started(m)
    failed = assistant(call("c1"), stop_reason="error", error_message="overloaded")
    step = m.stream_event(StreamError(reason="error", error=failed))
    assert names(step) == [
        "message_start:assistant",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    assert step.events[1].message is failed
    assert step.effects == []
    assert m.state == "stopped" and m.end_reason == "error"


# --- steering and follow-ups --------------------------------------------------------------------


def test_steering_injected_after_a_tool_batch() -> None:
    m = machine(tools=[make_tool("t")], get_steering_messages=lambda: [])
    step = m.start()
    assert m.state == "awaiting_steering"
    assert step.effects == [PollSteering()]
    step = m.steering_polled([])
    assert names(step) == [] and m.state == "streaming"
    assert isinstance(step.effects[0], CallModel)

    m.stream_event(
        StreamDone(reason="toolUse", message=assistant(call("c1"), stop_reason="toolUse"))
    )
    step = m.tool_finished(0, result=text_result("r"))
    assert names(step)[-1] == "turn_end" and step.effects == [Proceed()]
    step = m.proceed()
    assert names(step) == [] and step.effects == [PollSteering()]
    assert m.state == "awaiting_steering"

    steer = user("now do this instead")
    step = m.steering_polled([steer])
    assert names(step) == ["turn_start", "message_start:user", "message_end:user"]
    assert step.events[1].message is steer
    (effect,) = step.effects
    assert isinstance(effect, CallModel)
    assert effect.context.messages[-1] is steer
    assert m.new_messages[-1] is steer


def test_steering_at_start_joins_the_first_turn() -> None:
    m = machine(get_steering_messages=lambda: [])
    m.start()
    step = m.steering_polled([user("early")])
    assert names(step) == ["message_start:user", "message_end:user"]  # no extra turn_start
    assert m.state == "streaming"


def test_follow_up_step_by_step() -> None:
    m = machine(get_follow_up_messages=lambda: [])
    started(m)
    m.stream_event(StreamDone(reason="stop", message=assistant(TextContent(text="a1"))))
    step = m.proceed()
    assert names(step) == [] and step.effects == [PollFollowUp()]
    assert m.state == "awaiting_follow_up"
    assert m.accepted_inputs() == ["follow_up_polled", "abort", "fail"]

    follow = user("and then?")
    step = m.follow_up_polled([follow])
    assert names(step) == ["turn_start", "message_start:user", "message_end:user"]
    assert isinstance(step.effects[0], CallModel)
    m.stream_event(StreamDone(reason="stop", message=assistant(TextContent(text="a2"))))
    step = m.proceed()
    assert step.effects == [PollFollowUp()]
    step = m.follow_up_polled([])
    assert names(step) == ["agent_end:completed"]
    assert [text_of(x) for x in step.events[0].messages] == ["hi", "a1", "and then?", "a2"]


# --- abort ------------------------------------------------------------------------------------


def test_abort_while_streaming_step_by_step() -> None:
    m = machine()
    started(m)
    partial = assistant(TextContent(text="Hel"), stop_reason="pending")
    m.stream_event(StreamStart(partial=partial))
    m.stream_event(TextDelta(content_index=0, delta="Hel", partial=partial))
    assert m.accepted_inputs() == ["stream_event", "stream_exhausted", "abort", "fail"]
    step = m.abort()
    assert names(step) == ["message_end:assistant:aborted", "turn_end", "agent_end:aborted"]
    final = step.events[0].message
    assert text_of(final) == "Hel"
    assert (final.stop_reason, final.error_message) == ("aborted", "Request was aborted")
    assert final is not partial and partial.stop_reason == "pending"  # a copy is finalised
    assert step.effects == [] and m.state == "stopped"


def test_abort_while_tools_run_step_by_step() -> None:
    m = machine(tools=[make_tool("t")])
    started(m)
    m.stream_event(
        StreamDone(
            reason="toolUse", message=assistant(call("c1"), call("c2"), stop_reason="toolUse")
        )
    )
    m.tool_finished(0, result=text_result("kept"))
    assert m.pending_tool_calls == ["c2"]
    step = m.abort()
    assert names(step) == [
        "tool_execution_end:c2:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        "agent_end:aborted",
    ]
    results = step.events[-2].tool_results
    assert [text_of(r) for r in results] == ["kept", "Operation aborted"]
    assert step.effects == [] and m.state == "stopped"


def test_an_abort_before_the_model_call_ends_the_run_with_an_empty_aborted_message() -> None:
    """The machine never reads a signal: the driver feeds ``abort`` instead of performing the
    model call it was asked for (a signal fired before the run started does just that)."""
    m = LoopMachine([user("hi")], AgentContext(), AgentLoopConfig(model=MODEL))
    step = m.start()
    assert isinstance(step.effects[0], CallModel)
    step = m.abort()
    assert names(step) == [
        "message_start:assistant",
        "message_end:assistant:aborted",
        "turn_end",
        "agent_end:aborted",
    ]
    assert step.effects == [] and step.run_over
    assert step.events[0].message.content == [TextContent(text="")]


# --- hooks --------------------------------------------------------------------------------------


def test_a_failing_before_hook_step_by_step() -> None:
    m = machine(tools=[make_tool("t")], before_tool_call=lambda ctx, signal: None)
    started(m)
    message = assistant(call("c1"), call("c2"), stop_reason="toolUse")
    step = m.stream_event(StreamDone(reason="toolUse", message=message))
    assert names(step)[-1] == "tool_execution_start:c1"
    (hook,) = step.effects
    assert isinstance(hook, CallHook)
    assert (hook.name, hook.index) == ("before_tool_call", 0)
    assert hook.ctx.tool_call is message.content[0]
    assert m.state == "preparing_tools"

    step = m.hook_failed(PermissionError("no access"), 0)
    assert names(step) == ["tool_execution_end:c1:error", "tool_execution_start:c2"]
    assert text_of(step.events[0].result) == "no access"
    (hook,) = step.effects
    assert isinstance(hook, CallHook) and hook.index == 1

    step = m.hook_returned(BeforeToolCallResult(block=False), 1)
    assert names(step) == []
    (run,) = step.effects
    assert isinstance(run, ExecuteTool) and run.index == 1
    assert m.state == "executing"
    step = m.tool_finished(1, result=text_result("fine"))
    assert names(step) == [
        "tool_execution_end:c2",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
    ]


def test_a_failing_after_hook_and_a_failing_turn_hook() -> None:
    m = machine(
        tools=[make_tool("t")],
        after_tool_call=lambda ctx, signal: None,
        prepare_next_turn=lambda ctx, signal: None,
    )
    started(m)
    m.stream_event(
        StreamDone(reason="toolUse", message=assistant(call("c1"), stop_reason="toolUse"))
    )
    step = m.tool_finished(0, result=text_result("raw"))
    assert names(step) == []
    (hook,) = step.effects
    assert isinstance(hook, CallHook) and (hook.name, hook.index) == ("after_tool_call", 0)
    assert hook.ctx.result == text_result("raw") and hook.ctx.is_error is False

    step = m.hook_failed(ValueError("after failed"), 0)
    assert names(step)[0] == "tool_execution_end:c1:error"
    assert names(step)[-1] == "turn_end"
    (closing,) = step.effects
    assert isinstance(closing, Proceed) and m.state == "closing_turn"
    # another turn follows the batch: prepare_next_turn runs right before it
    step = m.proceed()
    assert names(step) == []
    (turn_hook,) = step.effects
    assert isinstance(turn_hook, CallHook) and turn_hook.name == "prepare_next_turn"
    assert turn_hook.index is None
    assert m.state == "preparing_next_turn"

    # prepare_next_turn raising is a run failure (docs/reference.md#how-a-failure-ends-the-run): one
    # more turn holds it
    step = m.fail(RuntimeError("prepare failed"))
    assert names(step) == [
        "turn_start",
        "message_start:assistant",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    failure = step.events[2].message
    assert failure.content == [TextContent(text="")]
    assert failure.error_message == "prepare failed"
    assert m.state == "stopped" and m.end_reason == "error"


def test_a_stream_without_terminal_event_fails_the_streaming_message() -> None:
    m = machine()
    started(m)
    step = m.stream_exhausted()
    assert names(step) == [
        "message_start:assistant",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    assert step.events[1].message.error_message == (
        "Stream function ended without a done or error event"
    )


# --- inputs a state does not accept ---------------------------------------------------------------


def test_an_input_the_state_does_not_accept_names_the_state_and_the_accepted_inputs() -> None:
    m = machine()
    with pytest.raises(MachineInputError) as info:
        m.steering_polled([])
    assert (
        str(info.value)
        == "input 'steering_polled' is not accepted in state 'idle'; it accepts: start"
    )
    started(m)
    with pytest.raises(MachineInputError) as info:
        m.tool_finished(0, result=text_result("x"))
    error = info.value
    assert str(error) == (
        "input 'tool_finished' is not accepted in state 'streaming'; "
        "it accepts: stream_event, stream_exhausted, abort, fail"
    )
    assert (error.input_name, error.state) == ("tool_finished", "streaming")
    assert error.accepted == ["stream_event", "stream_exhausted", "abort", "fail"]
    assert isinstance(error, MachineError)
    assert m.state == "streaming"  # nothing changed
    m.stream_event(StreamDone(reason="stop", message=assistant(TextContent(text="x"))))
    with pytest.raises(
        MachineInputError,
        match="in state 'closing_turn'; it accepts: proceeded, abort, fail",
    ):
        m.stream_event(StreamDone(reason="stop", message=assistant()))
    m.proceed()
    with pytest.raises(MachineInputError) as info:
        m.abort()
    assert str(info.value) == (
        "input 'abort' is not accepted in state 'stopped'; "
        "it accepts: nothing (the run has stopped)"
    )


def test_proceed_is_refused_unless_the_machine_asked_for_it() -> None:
    m = machine(should_stop_after_turn=lambda ctx, signal: False)
    started(m)
    step = m.stream_event(StreamDone(reason="stop", message=assistant(TextContent(text="x"))))
    assert isinstance(step.effects[0], CallHook)
    with pytest.raises(
        MachineInputError, match="'proceeded' is not accepted in state 'deciding_stop'"
    ):
        m.proceed()
    assert m.state == "deciding_stop"
    assert names(m.hook_returned(False)) == ["agent_end:completed"]


def test_a_tool_result_for_a_call_that_is_not_running_is_refused() -> None:
    m = machine(tools=[make_tool("t")])
    started(m)
    m.stream_event(
        StreamDone(
            reason="toolUse", message=assistant(call("c1"), call("c2"), stop_reason="toolUse")
        )
    )
    m.tool_finished(0, result=text_result("x"))
    with pytest.raises(MachineError, match="is not running"):
        m.tool_finished(0, result=text_result("again"))
    # a late update for a settled call is dropped, not an error
    assert m.tool_update(0, text_result("late")).events == []


def test_each_run_joins_the_shared_machine_and_history_is_per_run() -> None:
    a, b = machine(), machine()
    started(a)
    assert b.state == "idle" and a.state == "streaming"
    assert [r.trigger for r in b.history] == []
    c = LoopMachine([user("x")], AgentContext(), AgentLoopConfig(model=MODEL))
    records = list(c.start().transitions)  # the step carries the transitions it took
    assert records == c.history and [r.dest for r in records] == ["awaiting_steering", "streaming"]


def test_tool_results_are_tool_result_messages() -> None:
    m = machine(tools=[make_tool("t")])
    started(m)
    m.stream_event(
        StreamDone(reason="toolUse", message=assistant(call("c1"), stop_reason="toolUse"))
    )
    step = m.tool_finished(0, result={"content": [{"type": "text", "text": "from a dict"}]})
    message = step.events[1].message
    assert isinstance(message, ToolResultMessage)
    assert (message.tool_call_id, message.tool_name, text_of(message)) == ("c1", "t", "from a dict")


def test_a_poll_that_returned_after_the_signal_fired_ends_the_run() -> None:
    """The driver tells the machine that the signal fired while a poll ran (the poll's input
    carries it): an empty poll ends the run at once; polled messages are kept and the turn they
    start ends aborted. The same inputs always give the same steps."""

    def run(polled: list[Any]) -> list[str]:
        m = LoopMachine(
            [user("hi")],
            AgentContext(),
            AgentLoopConfig(model=MODEL, get_follow_up_messages=lambda: []),
        )
        started(m)
        m.stream_event(StreamDone(reason="stop", message=assistant(TextContent(text="x"))))
        assert m.proceed().effects == [PollFollowUp()]
        step = m.follow_up_polled(polled, aborted=True)
        assert step.run_over and m.history[-1].trigger == "follow_up_polled"
        return names(step)

    assert run([]) == ["agent_end:aborted"]
    assert run([user("more")]) == [
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant:aborted",
        "turn_end",
        "agent_end:aborted",
    ]
    assert run([]) == run([])

    m = LoopMachine([user("hi")], AgentContext(), AgentLoopConfig(model=MODEL))
    started(m)
    step = m.stream_event(StreamDone(reason="stop", message=assistant(TextContent(text="x"))))
    assert step.effects == [Proceed()]
    # fired while turn_end was delivered: the driver feeds abort instead of proceeded
    assert names(m.abort()) == ["agent_end:aborted"]


def test_the_machine_takes_no_callback_its_steps_carry_the_transitions() -> None:
    """``feed`` calls nobody (a raising ``on_transition`` of a run is the driver's concern:
    tests/runtime/test_pure_core.py): each step carries the transitions it took."""
    with pytest.raises(TypeError, match="on_transition"):
        LoopMachine(  # type: ignore[call-arg]
            [user("hi")], AgentContext(), AgentLoopConfig(model=MODEL), on_transition=print
        )
    m = LoopMachine([user("hi")], AgentContext(), AgentLoopConfig(model=MODEL))
    step = m.start()
    assert m.state == "streaming"
    assert [r.dest for r in step.transitions] == ["awaiting_steering", "streaming"]
    partial = assistant(TextContent(text=""))
    assert m.stream_event(StreamStart(partial=partial)).transitions == ()  # none taken
    done = m.stream_event(StreamDone(reason="stop", message=assistant(TextContent(text="x"))))
    assert list(done.transitions) == m.history[2:] and done.transitions
