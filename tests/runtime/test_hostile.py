"""Hostile input and faults: each case names what went wrong, loses nothing and keeps the
transcript well formed. One test (or a few) per defect found; the generated adversarial suite is
in tests/property/test_adversarial.py. On trio and asyncio."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from helpers import MODEL, check_grammar, events_stream, make_tool, run, text_of, text_result, user

from agentcore_fsm import (
    AbortController,
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentToolResult,
    AssistantMessage,
    BeforeToolCallResult,
    LoopMachine,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.boundary import exc_text
from agentcore_fsm.core.declaration import load_declaration
from agentcore_fsm.core.declared import MachineInputError
from agentcore_fsm.core.events import StreamDone, StreamError, StreamStart
from agentcore_fsm.devtools.testing import EventRecorder, check_model_context
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

pytestmark = pytest.mark.anyio


class BadStr(Exception):
    """An exception whose ``str()`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class Interrupt(BaseException):
    """A custom BaseException (not an Exception, not cancellation)."""


def tool_turn(*calls: ToolCall) -> FauxProvider:
    return FauxProvider([faux_response(tool_calls=calls), faux_response("done")])


def result_text(r: Any, call_id: str) -> str:
    for m in r.messages:
        if isinstance(m, ToolResultMessage) and m.tool_call_id == call_id:
            return text_of(m)
    raise AssertionError(f"no result for {call_id}")


def registered_runs() -> int:
    """Models registered on the compiled transitions machines (runs never are)."""
    return sum(
        len(compiled.machine.models)
        for name in ("agent_loop", "tool_call", "agent")
        for compiled in load_declaration(name).compiled.values()
    )


# --- 1. an exception whose str() raises -------------------------------------------------------


def test_exc_text_never_fails() -> None:
    assert exc_text(ValueError("boom")) == "boom"
    assert exc_text(ValueError()) == "ValueError"
    text = exc_text(BadStr())
    assert text.startswith("BadStr") and "RuntimeError" in text

    class NonStr(Exception):
        def __str__(self) -> Any:
            return 42

    assert exc_text(NonStr()).startswith("NonStr")


async def test_a_tool_raising_an_exception_whose_str_raises_is_an_error_result() -> None:
    async def execute(*_: Any) -> Any:
        raise BadStr()

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        AgentLoopConfig(model=MODEL),
        tool_turn(faux_tool_call("t", id="c1")),
    )
    assert r.end.reason == "completed"
    assert result_text(r, "c1").startswith("BadStr")


async def test_before_tool_call_raising_an_unprintable_exception_is_not_called_an_abort() -> None:
    def before(ctx: Any, signal: Any) -> Any:
        raise BadStr()

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        AgentLoopConfig(model=MODEL, before_tool_call=before),
        tool_turn(faux_tool_call("t", id="c1")),
    )
    assert r.end.reason == "completed"
    text = result_text(r, "c1")
    assert text.startswith("BadStr") and "Operation aborted" not in text


@pytest.mark.parametrize(
    "where", ["prepare_next_turn", "get_steering_messages", "transform_context", "stream"]
)
async def test_a_failure_with_an_unprintable_exception_ends_the_run_as_data(where: str) -> None:
    def boom(*_: Any) -> Any:
        raise BadStr()

    config = AgentLoopConfig(model=MODEL)
    stream: Any = FauxProvider([faux_response("hi")])
    context = AgentContext()
    if where == "stream":
        stream = boom
    else:
        setattr(config, where, boom)
    if where == "prepare_next_turn":  # it runs only when another turn follows
        context = AgentContext(tools=[make_tool("t")])
        stream = tool_turn(faux_tool_call("t", id="c1"))
    r = await run([user("go")], context, config, stream)
    assert r.end.reason == "error"
    failure = r.messages[-1]
    assert failure.stop_reason == "error" and failure.error_message.startswith("BadStr")


async def test_prepare_arguments_raising_an_unprintable_exception() -> None:
    def prepare(raw: Any) -> Any:
        raise BadStr()

    tool = make_tool("t", prepare_arguments=prepare)
    r = await run(
        [user("go")],
        AgentContext(tools=[tool]),
        AgentLoopConfig(model=MODEL),
        tool_turn(faux_tool_call("t", id="c1")),
    )
    assert result_text(r, "c1").startswith("BadStr")


async def test_a_listener_raising_an_unprintable_exception_fails_the_run_cleanly() -> None:
    agent = Agent(model=MODEL, stream_fn=FauxProvider([faux_response("hi")]))

    def listener(event: Any, signal: Any) -> None:
        if event.type == "message_start":
            raise BadStr()

    agent.subscribe(listener)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("go")
    recorder.check()
    assert recorder.events[-1].reason == "error"
    assert agent.state.error_message is not None
    assert agent.state.error_message.startswith("BadStr")


# --- 2. hook return values are checked ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ({"model": "gpt-4"}, "model is str"),
        ({"modle": MODEL}, "unknown field"),
        ({"thinking_level": "extreme"}, "thinking_level"),
        ({"context": "everything"}, "context is str"),
        (42, "int"),
    ],
)
async def test_prepare_next_turn_returning_junk_fails_naming_the_hook(
    value: Any, needle: str
) -> None:
    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1")]), faux_response("never")]
    )
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        AgentLoopConfig(model=MODEL, prepare_next_turn=lambda ctx, signal: value),
        faux,
    )
    assert r.end.reason == "error" and len(faux.calls) == 1
    error = r.messages[-1].error_message
    assert error.startswith("prepare_next_turn returned an invalid value") and needle in error


async def test_prepare_next_turn_may_return_a_dict_with_a_model_dict() -> None:
    seen: list[str] = []

    def prepare(ctx: Any, signal: Any) -> Any:
        return {"model": {"id": "other", "provider": "faux"}}

    faux = FauxProvider([faux_response(tool_calls=[faux_tool_call("t")]), faux_response("ok")])

    def stream(model: Any, context: Any, options: Any) -> Any:
        seen.append(model.id)
        return faux(model, context, options)

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        AgentLoopConfig(model=MODEL, prepare_next_turn=prepare),
        stream,
    )
    assert r.end.reason == "completed"
    assert seen == ["faux-1", "other"]


async def test_should_stop_after_turn_returning_junk_fails_naming_the_hook() -> None:
    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL, should_stop_after_turn=lambda ctx, signal: "yes"),
        FauxProvider([faux_response("hi")]),
    )
    assert r.end.reason == "error"
    assert r.messages[-1].error_message == (
        "should_stop_after_turn returned an invalid value: str 'yes'; expected a bool"
    )


@pytest.mark.parametrize("hook", ["before_tool_call", "after_tool_call"])
async def test_a_tool_hook_returning_junk_is_an_error_result_naming_it(hook: str) -> None:
    config = AgentLoopConfig(model=MODEL)
    setattr(config, hook, lambda ctx, signal: 42)
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        config,
        tool_turn(faux_tool_call("t", id="c1")),
    )
    assert r.end.reason == "completed"
    assert result_text(r, "c1").startswith(f"{hook} returned an invalid value: int 42")


async def test_before_tool_call_returning_a_dict_that_does_not_validate() -> None:
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        AgentLoopConfig(model=MODEL, before_tool_call=lambda ctx, s: {"block": "maybe"}),
        tool_turn(faux_tool_call("t", id="c1")),
    )
    text = result_text(r, "c1")
    assert text.startswith("before_tool_call returned an invalid value: block:")


# --- 3. polls, prompts and context hooks are checked --------------------------------------------


async def test_a_steering_poll_returning_a_str_injects_one_user_message() -> None:
    polls = iter(["hello"])
    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL, get_steering_messages=lambda: next(polls, None)),
        FauxProvider([faux_response("hi")]),
    )
    injected = r.messages[1]
    assert isinstance(injected, UserMessage) and text_of(injected) == "hello"
    assert [m.role for m in r.messages] == ["user", "user", "assistant"]


async def test_a_poll_returning_a_dict_message_is_validated_into_it() -> None:
    polls = iter([[{"role": "user", "content": "hi there"}]])
    faux = FauxProvider([faux_response("hi")])
    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL, get_steering_messages=lambda: next(polls, None)),
        faux,
    )
    assert isinstance(r.messages[1], UserMessage)
    assert [m.role for m in faux.calls[0].messages] == ["user", "user"]


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ([123], "item 0 is int 123"),
        ({"role": "alien"}, "dict with role 'alien'"),
        (42, "gave int 42"),
        ([UserMessage(content="ok"), None], "item 1 is None"),
    ],
)
async def test_a_poll_returning_junk_fails_naming_the_poll(value: Any, needle: str) -> None:
    faux = FauxProvider([faux_response("never")])
    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL, get_follow_up_messages=lambda: value),
        FauxProvider([faux_response("hi")]),
    )
    assert r.end.reason == "error"
    error = r.messages[-1].error_message
    assert error.startswith("get_follow_up_messages") and needle in error
    assert faux.calls == []


@pytest.mark.parametrize(
    ("hook", "value", "needle"),
    [
        ("transform_context", "everything", "transform_context returned str"),
        ("transform_context", [1, 2], "transform_context returned a list whose item 0 is int"),
        ("convert_to_llm", None, "convert_to_llm returned None"),
        ("convert_to_llm", [{"role": "note"}], "item 0 is dict"),
    ],
)
async def test_context_hooks_returning_junk_fail_naming_the_hook(
    hook: str, value: Any, needle: str
) -> None:
    config = AgentLoopConfig(model=MODEL)
    if hook == "transform_context":
        config.transform_context = lambda messages, signal: value
    else:
        config.convert_to_llm = lambda messages: value
    faux = FauxProvider([faux_response("never")])
    r = await run([user("go")], AgentContext(), config, faux)
    assert r.end.reason == "error"
    assert needle in r.messages[-1].error_message
    assert faux.calls == []


async def test_get_api_key_returning_junk_fails() -> None:
    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL, get_api_key=lambda provider: 1234),
        FauxProvider([faux_response("never")]),
    )
    assert r.messages[-1].error_message == ("get_api_key returned int 1234; expected a str or None")


@pytest.mark.parametrize("prompt", [None, 123, {"role": "alien"}, [UserMessage(content="a"), 5]])
async def test_agent_prompt_rejects_what_is_not_a_message(prompt: Any) -> None:
    faux = FauxProvider([faux_response("never")])
    agent = Agent(model=MODEL, stream_fn=faux)
    events: list[Any] = []
    agent.subscribe(lambda e, s: events.append(e))
    with pytest.raises(TypeError):
        await agent.prompt(prompt)
    assert events == [] and faux.calls == [] and agent.state.messages == []
    assert not agent.is_busy


async def test_agent_prompt_takes_a_dict_message_and_steer_rejects_junk() -> None:
    agent = Agent(model=MODEL, stream_fn=FauxProvider([faux_response("hi")]))
    await agent.prompt({"role": "user", "content": "hello"})
    assert isinstance(agent.state.messages[0], UserMessage)
    with pytest.raises(TypeError, match="steer"):
        agent.steer(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="follow_up"):
        agent.follow_up(None)  # type: ignore[arg-type]
    assert not agent.has_queued_messages()


@pytest.mark.parametrize("prompts", [[123], [None], "x" * 0 or [{"role": "x"}]])
async def test_run_agent_loop_rejects_bad_prompts_before_any_event(prompts: Any) -> None:
    events: list[Any] = []
    faux = FauxProvider([faux_response("never")])
    with pytest.raises(TypeError, match="prompts"):
        await run_agent_loop(
            prompts, AgentContext(), AgentLoopConfig(model=MODEL), events.append, stream_fn=faux
        )
    assert events == [] and faux.calls == []


async def test_run_agent_loop_takes_a_str_prompt_as_one_message() -> None:
    r = await run("hello", AgentContext(), AgentLoopConfig(model=MODEL), FauxProvider())  # type: ignore[arg-type]
    assert isinstance(r.messages[0], UserMessage) and text_of(r.messages[0]) == "hello"


# --- 4. a raising abort callback ----------------------------------------------------------------


def test_every_abort_callback_runs_and_abort_never_raises(caplog: Any) -> None:
    controller = AbortController()
    ran: list[str] = []

    def bad() -> None:
        ran.append("bad")
        raise RuntimeError("callback broke")

    controller.signal.add_callback(bad)
    controller.signal.add_callback(lambda: ran.append("good"))
    controller.abort()
    assert ran == ["bad", "good"]
    assert controller.signal.aborted
    assert "callback broke" in caplog.text
    # added after the signal fired: runs at once, and still does not raise
    controller.signal.add_callback(bad)
    assert ran == ["bad", "good", "bad"]


async def test_a_raising_abort_callback_does_not_hang_the_run() -> None:
    controller = AbortController()
    controller.signal.add_callback(lambda: 1 / 0)
    started = anyio.Event()

    async def stream(model: Any, context: Any, options: Any) -> AsyncIterator[Any]:
        yield StreamStart(partial=AssistantMessage(stop_reason="pending"))
        started.set()
        await anyio.sleep_forever()

    async def abort_when_started() -> None:
        await started.wait()
        controller.abort()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(abort_when_started)
            r = await run(
                [user("go")],
                AgentContext(),
                AgentLoopConfig(model=MODEL),
                stream,
                signal=controller.signal,
            )
    assert r.end.reason == "aborted"


# --- 5. cancelled from outside ------------------------------------------------------------------


async def test_a_run_cancelled_from_outside_closes_and_leaves_nothing_behind() -> None:
    started = anyio.Event()

    async def stuck(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        started.set()
        await anyio.sleep_forever()

    events: list[Any] = []

    def on_transition(record: Any) -> None:
        pass

    before = registered_runs()
    faux = tool_turn(faux_tool_call("stuck", id="c1"), faux_tool_call("t", id="c2"))
    with anyio.move_on_after(5) as outer:

        async def cancel_when_started() -> None:
            await started.wait()
            outer.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_started)
            await run_agent_loop(
                [user("go")],
                AgentContext(tools=[make_tool("stuck", stuck), make_tool("t")]),
                AgentLoopConfig(model=MODEL),
                events.append,
                stream_fn=faux,
                on_transition=on_transition,
            )
    assert outer.cancelled_caught
    check_grammar(events)
    assert events[-1].type == "agent_end" and events[-1].reason == "aborted"
    results = [e.message for e in events if e.type == "message_end"][-2:]
    assert [m.tool_call_id for m in results] == ["c1", "c2"]
    # the stuck call is answered; the one that finished before the cut keeps its result
    assert [text_of(m) for m in results] == ["Operation aborted", "t done"]
    assert registered_runs() == before
    gc.collect()
    assert not [o for o in gc.get_objects() if type(o) is LoopMachine]


async def test_many_cut_runs_leave_no_machine_alive() -> None:
    """Cut runs are not kept: the number of live machines does not grow with their number (the
    last cancellation's traceback may still hold its own run's frame until the next one)."""

    async def cut_runs(n: int) -> int:
        for _ in range(n):
            with anyio.move_on_after(0):
                await run_agent_loop(
                    [user("go")],
                    AgentContext(),
                    AgentLoopConfig(model=MODEL),
                    stream_fn=FauxProvider([faux_response("hi")]),
                )
        gc.collect()
        return len([o for o in gc.get_objects() if type(o) is LoopMachine])

    few = await cut_runs(5)
    many = await cut_runs(100)
    assert many == few <= 1
    assert registered_runs() == 0


async def test_an_agent_prompt_cut_by_a_timeout_leaves_a_well_formed_transcript() -> None:
    started = anyio.Event()

    async def stuck(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        started.set()
        await anyio.sleep_forever()

    faux = tool_turn(faux_tool_call("stuck", id="c1"))
    faux.queue(faux_response("second"))
    agent = Agent(model=MODEL, stream_fn=faux, tools=[make_tool("stuck", stuck)])
    with anyio.move_on_after(5) as outer:

        async def cancel_when_started() -> None:
            await started.wait()
            outer.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_started)
            await agent.prompt("go")
    assert outer.cancelled_caught
    assert not agent.is_busy
    roles = [m.role for m in agent.state.messages]
    assert roles == ["user", "assistant", "toolResult"]  # closed as aborted
    assert text_of(agent.state.messages[-1]) == "Operation aborted"
    assert agent.state.error_message == "Request was aborted"
    check_model_context(agent.state.messages)
    await agent.prompt("again")
    check_model_context(faux.calls[-1])


async def test_an_agent_answers_a_dangling_call_when_the_close_could_not_be_delivered() -> None:
    """A listener that hangs past the grace period: the transcript is repaired afterwards."""
    from agentcore_fsm.runtime import driver

    started = anyio.Event()

    async def stuck(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        started.set()
        await anyio.sleep_forever()

    async def slow_listener(event: Any, signal: Any) -> None:
        if event.type == "tool_execution_end":
            await anyio.sleep_forever()

    faux = tool_turn(faux_tool_call("stuck", id="c1"))
    agent = Agent(model=MODEL, stream_fn=faux, tools=[make_tool("stuck", stuck)])
    agent.subscribe(slow_listener)
    old = driver.CLOSE_GRACE_S
    driver.CLOSE_GRACE_S = 0.05
    try:
        with anyio.move_on_after(5) as outer:

            async def cancel_when_started() -> None:
                await started.wait()
                outer.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_when_started)
                await agent.prompt("go")
    finally:
        driver.CLOSE_GRACE_S = old
    messages = agent.state.messages
    assert [m.role for m in messages] == ["user", "assistant", "toolResult"]
    assert text_of(messages[-1]) == "Operation aborted" and messages[-1].is_error
    check_model_context(messages)


# --- 6. a bad terminal event ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "needle"),
    [
        (StreamDone(reason="stop", message={"role": "assistant"}), "message is dict"),  # type: ignore[arg-type]
        (StreamDone(reason="stop", message=UserMessage(content="x")), "is UserMessage"),  # type: ignore[arg-type]
        (StreamDone(reason="stop", message=None), "message is None"),  # type: ignore[arg-type]
        (
            StreamDone(reason="stop", message=AssistantMessage(stop_reason="pending")),
            "stop_reason 'pending'",
        ),
        (StreamError(reason="error", error=None), "'error' event whose error is None"),  # type: ignore[arg-type]
    ],
)
async def test_a_bad_terminal_event_is_a_failure_saying_what_was_wrong(
    event: Any, needle: str
) -> None:
    r = await run([user("go")], AgentContext(), AgentLoopConfig(model=MODEL), events_stream(event))
    assert r.end.reason == "error"
    final = r.messages[-1]
    assert isinstance(final, AssistantMessage) and final.stop_reason == "error"
    assert final.error_message.startswith("Stream function ended with")
    assert needle in final.error_message and "Request was aborted" not in final.error_message


async def test_a_stream_yielding_junk_objects_fails_cleanly() -> None:
    r = await run(
        [user("go")], AgentContext(), AgentLoopConfig(model=MODEL), events_stream(object())
    )
    assert r.end.reason == "error"
    assert "is not a stream event" in r.messages[-1].error_message


async def test_a_stream_function_returning_a_non_iterator_fails_cleanly() -> None:
    r = await run([user("go")], AgentContext(), AgentLoopConfig(model=MODEL), lambda m, c, o: 42)
    assert r.end.reason == "error"
    assert r.messages[-1].error_message.startswith("Stream function returned int")


# --- 9. a sync execute that returns a coroutine -----------------------------------------------


async def test_a_sync_execute_returning_a_coroutine_works_on_every_backend() -> None:
    async def later(text: str) -> AgentToolResult:
        await anyio.sleep(0)
        return text_result(text)

    tool = make_tool("t", lambda call_id, params, signal, on_update: later("from a coroutine"))
    r = await run(
        [user("go")],
        AgentContext(tools=[tool]),
        AgentLoopConfig(model=MODEL),
        tool_turn(faux_tool_call("t", id="c1")),
    )
    assert result_text(r, "c1") == "from a coroutine"


# --- 10. tool call ids ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("calls", "needle"),
    [
        ([ToolCall.model_construct(type="toolCall", id=None, name="t", arguments={})], "id None"),
        ([ToolCall(id="", name="t", arguments={})], "id ''"),
        (
            [ToolCall(id="c1", name="t", arguments={}), ToolCall(id="c1", name="t", arguments={})],
            "repeats the id 'c1'",
        ),
        ([ToolCall.model_construct(type="toolCall", id="c1", name="t", arguments=[])], "arguments"),
    ],
)
async def test_invalid_tool_call_ids_fail_the_message_and_run_nothing(
    calls: list[ToolCall], needle: str
) -> None:
    ran: list[str] = []

    async def execute(call_id: str, *_: Any) -> AgentToolResult:
        ran.append(call_id)
        return text_result("ran")

    message = AssistantMessage.model_construct(
        **{**AssistantMessage().__dict__, "content": calls, "stop_reason": "toolUse"}
    )
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        AgentLoopConfig(model=MODEL),
        events_stream(StreamDone(reason="toolUse", message=message)),
    )
    assert ran == []
    assert r.end.reason == "error"
    final = r.messages[-1]
    assert final.stop_reason == "error" and needle in final.error_message
    assert not any(isinstance(m, ToolResultMessage) for m in r.messages)


# --- 11. hand-stepping mistakes ---------------------------------------------------------------


def executing_machine() -> LoopMachine:
    m = LoopMachine(
        [user("go")], AgentContext(tools=[make_tool("t")]), AgentLoopConfig(model=MODEL)
    )
    m.start()
    message = faux_response(tool_calls=[faux_tool_call("t", id="c1")])
    step = m.stream_event(StreamDone(reason="toolUse", message=message))
    assert m.state == "executing" and step.effects
    return m


@pytest.mark.parametrize(
    ("feed", "needle"),
    [
        (lambda m: m.tool_finished(7), "7 names no tool call"),
        (lambda m: m.tool_finished("c1"), "str 'c1' names no tool call"),
        (lambda m: m.tool_finished(True), "names no tool call"),
        (lambda m: m.tool_update(3, AgentToolResult()), "names no tool call"),
        (lambda m: m.tool_update(0, 42), "expected an AgentToolResult"),
        (lambda m: m.tool_finished(0, error="boom"), "error must be an exception"),
        (lambda m: m.hook_returned(None, 0), "not waiting for after_tool_call"),
        (lambda m: m.stream_event(StreamStart(partial=AssistantMessage())), "not accepted"),
    ],
)
def test_hand_stepping_mistakes_are_machine_input_errors(feed: Any, needle: str) -> None:
    m = executing_machine()
    history = list(m.history)
    with pytest.raises(MachineInputError, match=needle) as info:
        feed(m)
    assert info.value.state == "executing"
    assert m.state == "executing" and m.history == history  # nothing changed
    m.tool_finished(0, result=text_result("ok"))  # the machine still works


def test_finishing_a_call_twice_is_a_machine_input_error() -> None:
    m = executing_machine()
    m.tool_finished(0, result=text_result("ok"))
    m2 = executing_machine()
    m2.hook_returned  # noqa: B018 - the method exists; the second machine stays executing
    with pytest.raises(MachineInputError, match="not accepted"):
        m.tool_finished(0, result=text_result("again"))  # m is at turn_end now
    # the same call finished twice while the machine still executes (two calls)
    m3 = LoopMachine(
        [user("go")], AgentContext(tools=[make_tool("t")]), AgentLoopConfig(model=MODEL)
    )
    m3.start()
    message = faux_response(tool_calls=[faux_tool_call("t", id="c1"), faux_tool_call("t", id="c2")])
    m3.stream_event(StreamDone(reason="toolUse", message=message))
    m3.tool_finished(0, result=text_result("ok"))
    with pytest.raises(MachineInputError, match=r"tool call #0 \(t\) is not running"):
        m3.tool_finished(0, result=text_result("again"))
    assert m3.state == "executing"


def test_stream_event_with_a_non_event_is_a_machine_input_error() -> None:
    m = LoopMachine([user("go")], AgentContext(), AgentLoopConfig(model=MODEL))
    m.start()
    with pytest.raises(MachineInputError, match="is not a stream event"):
        m.stream_event(object())
    assert m.state == "streaming"
    step = m.stream_event(StreamDone(reason="stop", message=faux_response("ok")))
    assert m.state == "closing_turn" and step.events


# --- 12. BaseExceptions from user code ----------------------------------------------------------


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit, Interrupt])
@pytest.mark.parametrize("where", ["tool", "sync_tool", "emit", "before", "after", "stream"])
async def test_a_base_exception_closes_the_run_then_escapes_bare(
    exc_type: type[BaseException], where: str
) -> None:
    raised = exc_type()
    events: list[Any] = []

    async def tool(*_: Any) -> Any:
        if where == "tool":
            raise raised
        return text_result("ok")

    def sync_tool(*_: Any) -> Any:
        raise raised

    def hook(ctx: Any, signal: Any) -> None:
        raise raised

    def emit(event: Any) -> None:
        events.append(event)
        if where == "emit" and event.type == "tool_execution_start":
            raise raised

    async def stream(model: Any, context: Any, options: Any) -> AsyncIterator[Any]:
        yield StreamStart(partial=AssistantMessage(stop_reason="pending"))
        raise raised

    tools = [make_tool("t", sync_tool if where == "sync_tool" else tool), make_tool("u")]
    config = AgentLoopConfig(model=MODEL)
    if where == "before":
        config.before_tool_call = hook
    if where == "after":
        config.after_tool_call = hook
    faux: Any = tool_turn(faux_tool_call("t", id="c1"), faux_tool_call("u", id="c2"))
    with pytest.raises(exc_type) as info:
        await run_agent_loop(
            [user("go")],
            AgentContext(tools=tools),
            config,
            emit,
            stream_fn=stream if where == "stream" else faux,
        )
    assert info.value is raised  # the same object, not wrapped in a group
    check_grammar(events)
    assert events[-1].type == "agent_end" and events[-1].reason == "aborted"
    if where != "stream":
        answered = [
            e.message.tool_call_id
            for e in events
            if e.type == "message_end" and isinstance(e.message, ToolResultMessage)
        ]
        assert answered == ["c1", "c2"]


async def test_an_agent_listener_raising_keyboard_interrupt_escapes_and_the_agent_is_idle() -> None:
    faux = FauxProvider([faux_response("hi"), faux_response("again")])
    agent = Agent(model=MODEL, stream_fn=faux)

    def listener(event: Any, signal: Any) -> None:
        if event.type == "message_update":
            raise KeyboardInterrupt

    unsubscribe = agent.subscribe(listener)
    with pytest.raises(KeyboardInterrupt):
        await agent.prompt("go")
    assert not agent.is_busy
    assert agent.state.messages[-1].stop_reason == "aborted"
    unsubscribe()
    await agent.prompt("again")
    assert agent.state.messages[-1].stop_reason == "stop"


# --- the signal is never None -------------------------------------------------------------------


async def test_callables_always_get_a_signal_when_the_caller_passes_none() -> None:
    seen: list[tuple[str, Any]] = []

    async def execute(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        seen.append(("tool", signal))
        return text_result("ok")

    def hook(name: str) -> Any:
        def f(*args: Any) -> Any:
            seen.append((name, args[-1]))
            return args[0] if name == "transform_context" else None

        return f

    faux = tool_turn(faux_tool_call("t", id="c1"))

    def stream(model: Any, context: Any, options: Any) -> Any:
        seen.append(("stream", options.signal))
        return faux(model, context, options)

    config = AgentLoopConfig(
        model=MODEL,
        transform_context=hook("transform_context"),
        before_tool_call=hook("before_tool_call"),
        after_tool_call=hook("after_tool_call"),
        prepare_next_turn=hook("prepare_next_turn"),
        should_stop_after_turn=hook("should_stop_after_turn"),
    )
    await run([user("go")], AgentContext(tools=[make_tool("t", execute)]), config, stream)
    names = {name for name, _ in seen}
    assert names == {
        "tool",
        "stream",
        "transform_context",
        "before_tool_call",
        "after_tool_call",
        "prepare_next_turn",
        "should_stop_after_turn",
    }
    signals = {id(signal) for _, signal in seen}
    assert len(signals) == 1
    assert all(isinstance(signal, AbortSignal) for _, signal in seen)


async def test_a_tool_may_wait_on_the_signal_without_a_caller_signal() -> None:
    async def waits(call_id: str, params: Any, signal: AbortSignal, on_update: Any) -> Any:
        with anyio.move_on_after(0.01):
            await signal.wait()
        return text_result(f"aborted={signal.aborted}")

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", waits)]),
        AgentLoopConfig(model=MODEL),
        tool_turn(faux_tool_call("t", id="c1")),
    )
    assert result_text(r, "c1") == "aborted=False"


# --- blocked with a BeforeToolCallResult still works -----------------------------------------


async def test_a_block_result_is_still_honoured() -> None:
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        AgentLoopConfig(
            model=MODEL, before_tool_call=lambda c, s: BeforeToolCallResult(block=True)
        ),
        tool_turn(faux_tool_call("t", id="c1")),
    )
    assert result_text(r, "c1") == "Tool execution was blocked"
    assert isinstance(r.messages[0].content, str)
    assert TextContent(text="done") in r.messages[-1].content
