"""Abort (docs/reference.md#abort): immediate, complete, and losing nothing; on trio and asyncio.

Aborts are triggered deterministically: from ``emit`` when a given event is delivered, from a
tool or hook, or from a second task once a gate (an ``anyio.Event``) says the work is in flight.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from helpers import (
    MODEL,
    BlockingStream,
    Run,
    check_grammar,
    describe,
    events_stream,
    make_tool,
    run,
    summarize,
    text_of,
    text_result,
    user,
)

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    TextContent,
    ToolCall,
    run_agent_loop,
)
from agentcore_fsm.core.events import (
    StreamDone,
    StreamStart,
    TextDelta,
    TextStart,
    ToolCallEnd,
    ToolCallStart,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

pytestmark = pytest.mark.anyio

ABORTED = "Operation aborted"
PROMPT_TURN = ["agent_start", "turn_start", "message_start:user", "message_end:user"]
ABORTED_TAIL = ["message_end:assistant:aborted", "turn_end", "agent_end:aborted"]
TOOL_HEAD = [*PROMPT_TURN, "message_start:assistant", "message_end:assistant:toolUse"]


class Log:
    def __init__(self) -> None:
        self.items: list[str] = []

    def hook(self, name: str, value: Any = None) -> Callable[..., Any]:
        def called(*args: Any) -> Any:
            self.items.append(name)
            return value

        return called

    def transform(self, messages: list[Any], signal: Any) -> list[Any]:
        self.items.append("transform")
        return messages

    def config(self, **overrides: Any) -> AgentLoopConfig:
        kwargs: dict[str, Any] = {
            "before_tool_call": self.hook("before"),
            "after_tool_call": self.hook("after"),
            "prepare_next_turn": self.hook("prepare"),
            "should_stop_after_turn": self.hook("should_stop", False),
            "get_steering_messages": self.hook("steering", []),
            "get_follow_up_messages": self.hook("follow_up", []),
            "transform_context": self.transform,
        }
        kwargs.update(overrides)
        return AgentLoopConfig(model=MODEL, **kwargs)


async def run_aborting_when(
    gate: anyio.Event,
    controller: AbortController,
    body: Callable[[], Awaitable[Run]],
) -> Run:
    """Run ``body`` while a second task aborts once ``gate`` is set."""
    result: list[Run] = []

    async def aborter() -> None:
        await gate.wait()
        controller.abort()

    async def runner() -> None:
        result.append(await body())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(aborter)
            tg.start_soon(runner)
    return result[0]


def assert_aborted_assistant(message: Any, text: str = "") -> None:
    assert isinstance(message, AssistantMessage)
    assert message.stop_reason == "aborted"
    assert message.error_message == "Request was aborted"
    assert text_of(message) == text


def assert_aborted_result(r: Run, call_id: str) -> None:
    (message,) = [m for m in r.messages if getattr(m, "tool_call_id", None) == call_id]
    assert message.is_error is True
    assert message.content == [TextContent(text=ABORTED)] and message.details is None
    (end,) = [e for e in r.of_type("tool_execution_end") if e.tool_call_id == call_id]
    assert end.is_error is True and text_of(end.result) == ABORTED


# --- before start / before the model call -----------------------------------------------------


async def test_abort_before_start_makes_an_aborted_message_without_calling_anything() -> None:
    log = Log()
    controller = AbortController()
    controller.abort()
    faux = FauxProvider([faux_response("never")])
    r = await run([user("go")], AgentContext(), log.config(), faux, signal=controller.signal)
    assert r.summary() == [*PROMPT_TURN, "message_start:assistant", *ABORTED_TAIL]
    last = r.messages[-1]
    assert_aborted_assistant(last)
    assert last.content == [TextContent(text="")]
    assert (last.api, last.provider, last.model) == ("faux-api", "faux", "faux-1")
    assert last.usage.total_tokens == 0
    assert faux.calls == [] and log.items == []


async def test_abort_before_a_continue() -> None:
    controller = AbortController()
    controller.abort()
    faux = FauxProvider([faux_response("never")])
    r = await run(
        None,
        AgentContext(messages=[user("q")]),
        AgentLoopConfig(model=MODEL),
        faux,
        signal=controller.signal,
    )
    assert r.summary() == [
        "agent_start",
        "turn_start",
        "message_start:assistant",
        *ABORTED_TAIL,
    ]
    assert faux.calls == []


async def test_abort_during_the_first_steering_poll() -> None:
    log = Log()
    controller = AbortController()
    polling = anyio.Event()

    async def steering() -> list[Any]:
        log.items.append("steering")
        polling.set()
        await anyio.sleep_forever()
        return []

    faux = FauxProvider([faux_response("never")])
    cfg = log.config(get_steering_messages=steering)
    r = await run_aborting_when(
        polling,
        controller,
        lambda: run([user("go")], AgentContext(), cfg, faux, signal=controller.signal),
    )
    assert r.summary() == [*PROMPT_TURN, "message_start:assistant", *ABORTED_TAIL]
    assert_aborted_assistant(r.messages[-1])
    assert log.items == ["steering"] and faux.calls == []


# --- while streaming ----------------------------------------------------------------------


async def test_abort_while_streaming_from_emit_keeps_the_partial_and_closes_the_stream() -> None:
    log = Log()
    controller = AbortController()
    stream = BlockingStream("Hel")

    def on_event(event: Any) -> None:
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            controller.abort()

    with anyio.fail_after(10):
        r = await run(
            [user("go")],
            AgentContext(),
            log.config(),
            stream,
            signal=controller.signal,
            on_event=on_event,
        )
    assert r.summary(updates=True) == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_update:text_start",
        "message_update:text_delta",
        *ABORTED_TAIL,
    ]
    assert_aborted_assistant(r.messages[-1], "Hel")
    assert stream.closed
    assert len(stream.calls) == 1
    assert log.items == ["steering", "transform"]


async def test_abort_from_another_task_cancels_the_waiting_stream() -> None:
    controller = AbortController()
    stream = BlockingStream("partial text")
    log = Log()
    r = await run_aborting_when(
        stream.started,
        controller,
        lambda: run([user("go")], AgentContext(), log.config(), stream, signal=controller.signal),
    )
    assert r.summary() == [*PROMPT_TURN, "message_start:assistant", *ABORTED_TAIL]
    assert_aborted_assistant(r.messages[-1], "partial text")
    assert stream.closed
    assert log.items == ["steering", "transform"]


async def test_no_stream_event_is_processed_after_the_abort() -> None:
    partial = AssistantMessage(stop_reason="pending", content=[TextContent(text="")])
    stream_fn = events_stream(
        StreamStart(partial=partial),
        TextStart(content_index=0, partial=partial),
        TextDelta(content_index=0, delta="a", partial=partial),
        TextDelta(content_index=0, delta="b", partial=partial),
        TextDelta(content_index=0, delta="c", partial=partial),
        StreamDone(reason="stop", message=partial),
    )
    controller = AbortController()

    def on_event(event: Any) -> None:
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            controller.abort()

    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        stream_fn,
        signal=controller.signal,
        on_event=on_event,
    )
    assert r.summary(updates=True)[-6:] == [
        "message_start:assistant",
        "message_update:text_start",
        "message_update:text_delta",
        *ABORTED_TAIL,
    ]


async def test_tool_calls_in_an_aborted_stream_are_never_executed() -> None:
    executed: list[str] = []

    async def execute(*args: Any) -> Any:
        executed.append("ran")
        return text_result("no")

    controller = AbortController()
    partial = AssistantMessage(stop_reason="pending")
    call = ToolCall(id="c1", name="t", arguments={"a": 1})
    release = anyio.Event()

    async def play() -> Any:
        yield StreamStart(partial=partial)
        partial.content.append(call)
        yield ToolCallStart(content_index=0, partial=partial)
        yield ToolCallEnd(content_index=0, tool_call=call, partial=partial)
        await release.wait()
        partial.stop_reason = "toolUse"
        yield StreamDone(reason="toolUse", message=partial)

    def on_event(event: Any) -> None:
        if event.type == "message_update" and event.assistant_message_event.type == "toolcall_end":
            controller.abort()

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        AgentLoopConfig(model=MODEL),
        lambda model, context, options: play(),
        signal=controller.signal,
        on_event=on_event,
    )
    assert r.summary() == [*PROMPT_TURN, "message_start:assistant", *ABORTED_TAIL]
    assert r.messages[-1].tool_calls() == [call]
    assert executed == []


# --- while tools run ------------------------------------------------------------------------


def blocked_tool(log: list[str], started: anyio.Event | None = None) -> Any:
    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        log.append(f"{tool_call_id} started")
        if started is not None:
            started.set()
        try:
            await anyio.sleep_forever()
        finally:
            log.append(f"{tool_call_id} cancelled")
        return text_result("never")  # pragma: no cover

    return execute


async def test_abort_while_parallel_tools_run_keeps_finished_results() -> None:
    log = Log()
    tool_log: list[str] = []
    controller = AbortController()
    stuck_started = anyio.Event()

    async def on_event(event: Any) -> None:
        if event.type == "tool_execution_end" and event.tool_call_id == "c1":
            # abort once c2 really runs (the scheduler may start it before or after c1 ends;
            # a call that has not started when the signal fires never starts)
            await stuck_started.wait()
            controller.abort()

    tools = [make_tool("quick"), make_tool("stuck", blocked_tool(tool_log, stuck_started))]
    faux = FauxProvider(
        [
            faux_response(
                tool_calls=[faux_tool_call("quick", id="c1"), faux_tool_call("stuck", id="c2")]
            ),
            faux_response("never"),
        ]
    )
    with anyio.fail_after(10):
        r = await run(
            [user("go")],
            AgentContext(tools=tools),
            log.config(after_tool_call=None),
            faux,
            signal=controller.signal,
            on_event=on_event,
        )
    assert r.summary() == [
        *TOOL_HEAD,
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c1",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        "agent_end:aborted",
    ]
    assert text_of(r.messages[2]) == "quick done" and r.messages[2].is_error is False
    assert_aborted_result(r, "c2")
    assert "c2 cancelled" in tool_log
    assert len(faux.calls) == 1
    assert log.items == ["steering", "transform", "before", "before"]


async def test_a_call_that_finished_before_the_abort_was_processed_keeps_its_result() -> None:
    controller = AbortController()
    tool_log: list[str] = []
    log = Log()

    async def abort_then_return(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        controller.abort()
        return text_result("finished anyway")

    tools = [make_tool("a", abort_then_return), make_tool("b", blocked_tool(tool_log))]
    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("a", id="c1"), faux_tool_call("b", id="c2")])]
    )
    with anyio.fail_after(10):
        r = await run(
            [user("go")],
            AgentContext(tools=tools),
            log.config(before_tool_call=None),
            faux,
            signal=controller.signal,
        )
    assert r.summary() == [
        *TOOL_HEAD,
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c1",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        "agent_end:aborted",
    ]
    assert text_of(r.messages[2]) == "finished anyway"
    assert_aborted_result(r, "c2")
    # once the signal fired no hook starts: after_tool_call was not called for c1
    assert "after" not in log.items


async def test_abort_while_a_sequential_tool_runs() -> None:
    controller = AbortController()
    started = anyio.Event()
    tool_log: list[str] = []
    log = Log()
    tools = [make_tool("stuck", blocked_tool(tool_log, started)), make_tool("next")]
    faux = FauxProvider(
        [
            faux_response(
                tool_calls=[faux_tool_call("stuck", id="c1"), faux_tool_call("next", id="c2")]
            )
        ]
    )
    cfg = log.config(tool_execution="sequential")
    r = await run_aborting_when(
        started,
        controller,
        lambda: run([user("go")], AgentContext(tools=tools), cfg, faux, signal=controller.signal),
    )
    assert r.summary() == [
        *TOOL_HEAD,
        # sequential: each call's result pair comes before the next call starts, also when
        # the abort answers the remaining calls
        "tool_execution_start:c1",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        "agent_end:aborted",
    ]
    assert_aborted_result(r, "c1")
    assert_aborted_result(r, "c2")
    assert tool_log == ["c1 started", "c1 cancelled"]
    assert log.items == ["steering", "transform", "before"]


async def test_abort_during_the_second_sequential_tool_keeps_the_first_result() -> None:
    controller = AbortController()
    started = anyio.Event()
    tool_log: list[str] = []
    tools = [make_tool("first"), make_tool("stuck", blocked_tool(tool_log, started))]
    faux = FauxProvider(
        [
            faux_response(
                tool_calls=[faux_tool_call("first", id="c1"), faux_tool_call("stuck", id="c2")]
            )
        ]
    )
    cfg = AgentLoopConfig(model=MODEL, tool_execution="sequential")
    r = await run_aborting_when(
        started,
        controller,
        lambda: run([user("go")], AgentContext(tools=tools), cfg, faux, signal=controller.signal),
    )
    assert r.summary() == [
        *TOOL_HEAD,
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        "agent_end:aborted",
    ]
    assert text_of(r.messages[2]) == "first done"
    assert_aborted_result(r, "c2")


async def test_a_sync_tool_is_abandoned_on_abort() -> None:
    import threading

    controller = AbortController()
    started = anyio.Event()
    release = threading.Event()
    updates: list[Any] = []

    def slow_sync(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        anyio.from_thread.run_sync(started.set)
        release.wait(10)
        updates.append(on_update)
        on_update(text_result("too late"))  # ignored: the call was settled by the abort
        return text_result("too late")

    faux = FauxProvider([faux_response(tool_calls=[faux_tool_call("s", id="c1")])])
    try:
        r = await run_aborting_when(
            started,
            controller,
            lambda: run(
                [user("go")],
                AgentContext(tools=[make_tool("s", slow_sync)]),
                AgentLoopConfig(model=MODEL),
                faux,
                signal=controller.signal,
            ),
        )
    finally:
        release.set()
    assert r.summary() == [
        *TOOL_HEAD,
        "tool_execution_start:c1",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        "agent_end:aborted",
    ]
    assert_aborted_result(r, "c1")
    assert r.of_type("tool_execution_update") == []


# --- during a hook ---------------------------------------------------------------------------


async def test_abort_during_before_tool_call() -> None:
    controller = AbortController()
    in_hook = anyio.Event()
    executed: list[str] = []
    hook_log: list[str] = []

    async def before(ctx: Any, signal: Any) -> None:
        hook_log.append(ctx.tool_call.id)
        in_hook.set()
        await anyio.sleep_forever()

    async def execute(*args: Any) -> Any:
        executed.append("ran")
        return text_result("no")

    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1"), faux_tool_call("t", id="c2")])]
    )
    cfg = AgentLoopConfig(model=MODEL, before_tool_call=before)
    r = await run_aborting_when(
        in_hook,
        controller,
        lambda: run(
            [user("go")],
            AgentContext(tools=[make_tool("t", execute)]),
            cfg,
            faux,
            signal=controller.signal,
        ),
    )
    assert r.summary() == [
        *TOOL_HEAD,
        "tool_execution_start:c1",
        "tool_execution_end:c1:error",
        "tool_execution_start:c2",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        "agent_end:aborted",
    ]
    assert_aborted_result(r, "c1")
    assert_aborted_result(r, "c2")
    assert hook_log == ["c1"] and executed == []


async def test_before_hook_that_aborts_and_returns_leaves_the_call_unexecuted() -> None:
    """docs/reference.md#the-tool-pipeline: aborted after the before hook → ``Operation
    aborted``."""
    controller = AbortController()
    executed: list[str] = []

    def before(ctx: Any, signal: Any) -> None:
        controller.abort()

    async def execute(*args: Any) -> Any:
        executed.append("ran")
        return text_result("no")

    faux = FauxProvider([faux_response(tool_calls=[faux_tool_call("t", id="c1")])])
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        AgentLoopConfig(model=MODEL, before_tool_call=before),
        faux,
        signal=controller.signal,
    )
    assert r.summary() == [
        *TOOL_HEAD,
        "tool_execution_start:c1",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        "agent_end:aborted",
    ]
    assert_aborted_result(r, "c1")
    assert executed == []


async def test_abort_during_after_tool_call() -> None:
    """Decision: a call whose ``after_tool_call`` was cancelled has no final result yet, so it
    gets ``Operation aborted`` like a running call."""
    controller = AbortController()
    in_hook = anyio.Event()

    async def after(ctx: Any, signal: Any) -> None:
        in_hook.set()
        await anyio.sleep_forever()

    faux = FauxProvider([faux_response(tool_calls=[faux_tool_call("t", id="c1")])])
    cfg = AgentLoopConfig(model=MODEL, after_tool_call=after)
    r = await run_aborting_when(
        in_hook,
        controller,
        lambda: run(
            [user("go")], AgentContext(tools=[make_tool("t")]), cfg, faux, signal=controller.signal
        ),
    )
    assert r.summary()[-6:] == [
        "tool_execution_start:c1",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        "agent_end:aborted",
    ]
    assert_aborted_result(r, "c1")


# --- between turns ---------------------------------------------------------------------------

TURN1_WITH_TOOL = [
    *TOOL_HEAD,
    "tool_execution_start:c1",
    "tool_execution_end:c1",
    "message_start:toolResult:c1",
    "message_end:toolResult:c1",
    "turn_end",
]


def _tool_turn_then_more() -> FauxProvider:
    return FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1")]), faux_response("never")]
    )


@pytest.mark.parametrize("at", ["turn_end", "message_end:toolResult:c1"])
async def test_abort_from_emit_at_the_end_of_a_turn_ends_the_run_at_once(at: str) -> None:
    """Without hooks after the turn, the machine decides what follows only once ``turn_end``
    was delivered (the Proceed effect), so this abort is seen "between turns"."""

    controller = AbortController()
    faux = _tool_turn_then_more()

    def on_event(event: Any) -> None:
        if describe(event) == at:
            controller.abort()

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        AgentLoopConfig(model=MODEL),
        faux,
        signal=controller.signal,
        on_event=on_event,
    )
    assert r.summary() == [*TURN1_WITH_TOOL, "agent_end:aborted"]
    assert len(faux.calls) == 1


@pytest.mark.parametrize("where", ["prepare", "should_stop", "steering", "follow_up"])
async def test_abort_in_a_hook_or_poll_between_turns(where: str) -> None:
    controller = AbortController()
    log = Log()
    in_hook = anyio.Event()

    async def blocking(*args: Any) -> Any:
        log.items.append(where)
        in_hook.set()
        await anyio.sleep_forever()

    names = {
        "prepare": "prepare_next_turn",
        "should_stop": "should_stop_after_turn",
        "steering": "get_steering_messages",
        "follow_up": "get_follow_up_messages",
    }
    cfg = log.config(**{names[where]: blocking})
    if where == "steering":
        # let the first poll (before the model call) pass; block the one after the turn
        first = True

        async def steering() -> list[Any]:
            nonlocal first
            if first:
                first = False
                return []
            result: list[Any] = await blocking()
            return result

        cfg = log.config(get_steering_messages=steering)
    script = (
        FauxProvider([faux_response("text only"), faux_response("never")])
        if where == "follow_up"
        else _tool_turn_then_more()
    )
    tools = [make_tool("t")]
    r = await run_aborting_when(
        in_hook,
        controller,
        lambda: run([user("go")], AgentContext(tools=tools), cfg, script, signal=controller.signal),
    )
    assert r.summary()[-2:] == ["turn_end", "agent_end:aborted"]
    assert len(script.calls) == 1
    # nothing starts after the abort
    assert log.items[-1] == where


async def test_abort_from_a_sync_prepare_next_turn_ends_the_run_before_the_next_call() -> None:
    controller = AbortController()
    calls: list[str] = []

    def prepare(ctx: Any, signal: Any) -> None:
        calls.append("prepare")
        controller.abort()

    faux = _tool_turn_then_more()
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        AgentLoopConfig(
            model=MODEL,
            prepare_next_turn=prepare,
            should_stop_after_turn=lambda ctx, signal: calls.append("should_stop"),
        ),
        faux,
        signal=controller.signal,
    )
    assert r.summary() == [*TURN1_WITH_TOOL, "agent_end:aborted"]
    # should_stop_after_turn runs first, then prepare_next_turn, since another turn follows
    assert calls == ["should_stop", "prepare"] and len(faux.calls) == 1


async def test_tools_receive_the_signal() -> None:
    controller = AbortController()
    got: list[Any] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        got.append(signal)
        return text_result("ok")

    await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        AgentLoopConfig(model=MODEL),
        FauxProvider(
            [faux_response(tool_calls=[faux_tool_call("t", id="c1")]), faux_response("x")]
        ),
        signal=controller.signal,
    )
    assert got == [controller.signal]


async def test_abort_before_the_model_call_of_a_later_turn() -> None:
    """The signal fires while steering is polled after turn 1 (the poll finishes and its
    messages are kept): turn 2 ends with an aborted, empty assistant message and no model
    call (docs/reference.md#what-an-abort-does: treated like an abort during the model call)."""
    controller = AbortController()
    steer = user("steered")
    polls = 0

    def steering() -> list[Any]:
        nonlocal polls
        polls += 1
        if polls == 2:
            controller.abort()
            return [steer]
        return []

    faux = FauxProvider([faux_response("first"), faux_response("never")])
    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL, get_steering_messages=steering),
        faux,
        signal=controller.signal,
    )
    assert r.summary() == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_end:assistant:stop",
        "turn_end",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        *ABORTED_TAIL,
    ]
    assert r.messages[2] is steer
    assert_aborted_assistant(r.messages[-1])
    assert r.messages[-1].content == [TextContent(text="")]
    assert len(faux.calls) == 1


@pytest.mark.parametrize("where", ["transform_context", "convert_to_llm", "get_api_key"])
async def test_a_sync_hook_of_the_model_call_that_aborts_stops_the_call(where: str) -> None:
    """Nothing of the model call starts after the signal fired, even when a sync hook fired it
    (no await for the cancel scope to interrupt)."""
    controller = AbortController()
    calls: list[str] = []

    def transform(messages: list[Any], signal: Any) -> list[Any]:
        calls.append("transform_context")
        if where == "transform_context":
            controller.abort()
        return messages

    def convert(messages: list[Any]) -> list[Any]:
        calls.append("convert_to_llm")
        if where == "convert_to_llm":
            controller.abort()
        return messages

    def get_api_key(provider: str) -> str:
        calls.append("get_api_key")
        if where == "get_api_key":
            controller.abort()
        return "k"

    faux = FauxProvider([faux_response("never")])
    cfg = AgentLoopConfig(
        model=MODEL, transform_context=transform, convert_to_llm=convert, get_api_key=get_api_key
    )
    r = await run([user("go")], AgentContext(), cfg, faux, signal=controller.signal)
    assert r.summary() == [*PROMPT_TURN, "message_start:assistant", *ABORTED_TAIL]
    assert_aborted_assistant(r.messages[-1])
    order = ["transform_context", "convert_to_llm", "get_api_key"]
    assert calls == order[: order.index(where) + 1]
    assert faux.calls == []


async def test_a_stream_that_fires_the_signal_has_no_later_event_processed() -> None:
    controller = AbortController()
    partial = AssistantMessage(stop_reason="pending", content=[TextContent(text="")])
    closed: list[bool] = []

    async def play() -> Any:
        try:
            yield StreamStart(partial=partial)
            yield TextStart(content_index=0, partial=partial)
            partial.content[0] = TextContent(text="a")
            yield TextDelta(content_index=0, delta="a", partial=partial)
            controller.abort()  # e.g. the provider noticed a cancelled request
            partial.content[0] = TextContent(text="ab")
            yield TextDelta(content_index=0, delta="b", partial=partial)
            yield StreamDone(reason="stop", message=partial)
        finally:
            closed.append(True)

    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        lambda model, context, options: play(),
        signal=controller.signal,
    )
    assert r.summary(updates=True)[4:] == [
        "message_start:assistant",
        "message_update:text_start",
        "message_update:text_delta",
        *ABORTED_TAIL,
    ]
    assert closed == [True]


@pytest.mark.parametrize("where", ["follow_up", "should_stop_true", "steering_empty"])
async def test_a_hook_or_poll_that_aborts_and_returns_ends_the_run_aborted(where: str) -> None:
    """The machine looks at the signal when a poll or hook returns: the run ends with
    ``agent_end(reason="aborted")`` at once, whatever the hook answered."""
    controller = AbortController()

    def aborting(value: Any) -> Any:
        def hook(*args: Any) -> Any:
            controller.abort()
            return value

        return hook

    polls = 0

    def steering() -> list[Any]:
        nonlocal polls
        polls += 1
        if polls == 2:
            controller.abort()
        return []

    cfg = {
        "follow_up": AgentLoopConfig(model=MODEL, get_follow_up_messages=aborting([])),
        "should_stop_true": AgentLoopConfig(model=MODEL, should_stop_after_turn=aborting(True)),
        "steering_empty": AgentLoopConfig(model=MODEL, get_steering_messages=steering),
    }[where]
    faux = FauxProvider([faux_response("only"), faux_response("never")])
    transitions: list[Any] = []

    events: list[Any] = []
    await run_agent_loop(
        [user("go")],
        AgentContext(),
        cfg,
        events.append,
        signal=controller.signal,
        stream_fn=faux,
        on_transition=transitions.append,
    )

    check_grammar(events)
    assert summarize(events) == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_end:assistant:stop",
        "turn_end",
        "agent_end:aborted",
    ]
    # the run ends on the input that brought the news: a poll that returned after the signal
    # fired carries it (its messages would be kept); a hook's answer is dropped for the abort
    ending = {"follow_up": "follow_up_polled", "steering_empty": "steering_polled"}
    assert transitions[-1].trigger == ending.get(where, "abort")
    assert transitions[-1].dest == "stopped"
    assert len(faux.calls) == 1


async def test_agent_loop_hands_the_callers_signal_to_hooks_and_tools() -> None:
    """``agent_loop`` aborts the run itself when the block is left early, yet hooks, tools and
    the stream function receive the caller's own signal object (docs/reference.md#the-signal)."""
    from agentcore_fsm import agent_loop

    controller = AbortController()
    seen: list[Any] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        seen.append(("tool", signal))
        return text_result("ok")

    def transform(messages: list[Any], signal: Any) -> list[Any]:
        seen.append(("transform", signal))
        return messages

    def stream_fn(model: Any, context: Any, options: Any) -> Any:
        seen.append(("stream", options.signal))
        return faux(model, context, options)

    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1")]), faux_response("done")]
    )
    config = AgentLoopConfig(model=MODEL, transform_context=transform)
    context = AgentContext(tools=[make_tool("t", execute)])
    async with agent_loop(
        [user("go")], context, config, signal=controller.signal, stream_fn=stream_fn
    ) as events:
        types = [event.type async for event in events]
        messages = await events.result()
    assert types[-1] == "agent_end" and messages[-1].stop_reason == "stop"
    assert [kind for kind, _ in seen] == ["transform", "stream", "tool", "transform", "stream"]
    assert all(signal is controller.signal for _, signal in seen)
