"""Failures inside the loop (docs/reference.md#failures): every one ends the run as data, with the
exact tail, and
never leaves a stream open. On trio and asyncio."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from helpers import MODEL, Run, check_grammar, describe, make_tool, run, text_of, text_result, user

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    TextContent,
    run_agent_loop,
)
from agentcore_fsm.core.events import StreamStart, TextDelta, TextStart
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

pytestmark = pytest.mark.anyio

PROMPT_TURN = ["agent_start", "turn_start", "message_start:user", "message_end:user"]
FAILED_MESSAGE = ["message_start:assistant", "message_end:assistant:error", "turn_end"]
FAILURE_TURN = ["turn_start", *FAILED_MESSAGE, "agent_end:error"]
TOOL_TURN = [
    *PROMPT_TURN,
    "message_start:assistant",
    "message_end:assistant:toolUse",
    "tool_execution_start:c1",
    "tool_execution_end:c1",
    "message_start:toolResult:c1",
    "message_end:toolResult:c1",
    "turn_end",
]


class Boom(Exception):
    pass


def assert_synthetic_failure(message: Any, text: str, stop_reason: str = "error") -> None:
    assert isinstance(message, AssistantMessage)
    assert message.content == [TextContent(text="")]
    assert (message.api, message.provider, message.model) == ("faux-api", "faux", "faux-1")
    assert message.usage.total_tokens == 0 and message.usage.cost.total == 0
    assert message.stop_reason == stop_reason
    assert message.error_message == text


def raiser(text: str) -> Any:
    def hook(*args: Any) -> Any:
        raise Boom(text)

    return hook


def async_raiser(text: str) -> Any:
    async def hook(*args: Any) -> Any:
        await anyio.sleep(0)
        raise Boom(text)

    return hook


# --- before the turn's assistant message ended ------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("where", ["transform_context", "convert_to_llm", "get_api_key"])
async def test_failure_before_the_model_call_makes_a_synthetic_message(
    where: str, kind: str
) -> None:
    hook = raiser if kind == "sync" else async_raiser
    faux = FauxProvider([faux_response("never")])
    cfg = AgentLoopConfig(model=MODEL, **{where: hook(f"{where} broke")})
    r = await run([user("go")], AgentContext(), cfg, faux)
    assert r.summary() == [*PROMPT_TURN, *FAILED_MESSAGE, "agent_end:error"]
    assert_synthetic_failure(r.messages[-1], f"{where} broke")
    assert faux.calls == []
    assert r.of_type("turn_end")[0].tool_results == []


async def test_stream_function_raising_when_called() -> None:
    def stream_fn(*args: Any) -> Any:
        raise Boom("cannot connect")

    r = await run([user("go")], AgentContext(), AgentLoopConfig(model=MODEL), stream_fn)
    assert r.summary() == [*PROMPT_TURN, *FAILED_MESSAGE, "agent_end:error"]
    assert_synthetic_failure(r.messages[-1], "cannot connect")


async def test_async_stream_function_raising_when_awaited() -> None:
    async def stream_fn(*args: Any) -> Any:
        raise Boom("async setup failed")

    r = await run([user("go")], AgentContext(), AgentLoopConfig(model=MODEL), stream_fn)
    assert_synthetic_failure(r.messages[-1], "async setup failed")


class RaisingStream:
    """Streams "Hel", then raises (or, with ``end=False``, just stops)."""

    def __init__(self, *, raises: bool = True) -> None:
        self.raises = raises
        self.closed = False

    def __call__(self, model: Any, context: Any, options: Any) -> Any:
        return self._play()

    async def _play(self) -> Any:
        partial = AssistantMessage(
            api="faux-api", provider="faux", model="faux-1", stop_reason="pending"
        )
        try:
            yield StreamStart(partial=partial)
            partial.content.append(TextContent(text="Hel"))
            yield TextStart(content_index=0, partial=partial)
            yield TextDelta(content_index=0, delta="Hel", partial=partial)
            if self.raises:
                raise Boom("connection reset")
        finally:
            self.closed = True


async def test_stream_raising_mid_way_keeps_the_partial_as_the_failure_message() -> None:
    stream = RaisingStream()
    r = await run([user("go")], AgentContext(), AgentLoopConfig(model=MODEL), stream)
    assert r.summary(updates=True) == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_update:text_start",
        "message_update:text_delta",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    last = r.messages[-1]
    assert text_of(last) == "Hel"
    assert (last.stop_reason, last.error_message) == ("error", "connection reset")
    assert stream.closed


async def test_a_stream_without_a_terminal_event_is_a_failure() -> None:
    stream = RaisingStream(raises=False)
    r = await run([user("go")], AgentContext(), AgentLoopConfig(model=MODEL), stream)
    assert r.summary()[-4:] == [
        "message_start:assistant",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    last = r.messages[-1]
    assert text_of(last) == "Hel"
    assert last.error_message == "Stream function ended without a done or error event"
    assert stream.closed


async def test_an_empty_stream_is_a_failure_with_a_synthetic_message() -> None:
    async def play() -> Any:
        return
        yield  # pragma: no cover

    r = await run([user("go")], AgentContext(), AgentLoopConfig(model=MODEL), lambda *a: play())
    assert r.summary() == [*PROMPT_TURN, *FAILED_MESSAGE, "agent_end:error"]
    assert_synthetic_failure(r.messages[-1], "Stream function ended without a done or error event")


async def test_the_first_steering_poll_failing_fails_turn_one() -> None:
    faux = FauxProvider([faux_response("never")])
    cfg = AgentLoopConfig(model=MODEL, get_steering_messages=raiser("queue broke"))
    r = await run([user("go")], AgentContext(), cfg, faux)
    assert r.summary() == [*PROMPT_TURN, *FAILED_MESSAGE, "agent_end:error"]
    assert_synthetic_failure(r.messages[-1], "queue broke")
    assert faux.calls == []


async def test_a_failure_with_the_signal_fired_is_reported_as_aborted() -> None:
    controller = AbortController()

    def transform(messages: Any, signal: Any) -> Any:
        controller.abort()
        raise Boom("gave up")

    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL, transform_context=transform),
        FauxProvider([faux_response("never")]),
        signal=controller.signal,
    )
    assert r.summary()[-3:] == ["message_end:assistant:aborted", "turn_end", "agent_end:aborted"]
    assert_synthetic_failure(r.messages[-1], "gave up", stop_reason="aborted")


async def test_an_exception_without_a_message_is_named_by_its_class() -> None:
    """Decision: ``error_message`` is ``str(exc)``, or the class name when that is empty."""
    cfg = AgentLoopConfig(model=MODEL, convert_to_llm=raiser(""))
    r = await run([user("go")], AgentContext(), cfg, FauxProvider([]))
    assert r.messages[-1].error_message == "Boom"


# --- after the turn's assistant message ended ---------------------------------------------------


def _tool_script() -> FauxProvider:
    return FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1")]), faux_response("never")]
    )


@pytest.mark.parametrize(
    "where",
    ["prepare_next_turn", "should_stop_after_turn", "get_steering_messages"],
)
async def test_failure_between_turns_adds_a_failure_turn(where: str) -> None:
    faux = _tool_script()
    hook = raiser(f"{where} broke")
    if where == "get_steering_messages":
        polls = 0

        def hook(*args: Any) -> Any:
            nonlocal polls
            polls += 1
            if polls == 2:
                raise Boom(f"{where} broke")
            return []

    cfg = AgentLoopConfig(model=MODEL, **{where: hook})
    r = await run([user("go")], AgentContext(tools=[make_tool("t")]), cfg, faux)
    assert r.summary() == [*TOOL_TURN, *FAILURE_TURN]
    assert_synthetic_failure(r.messages[-1], f"{where} broke")
    assert len(faux.calls) == 1
    assert [m.role for m in r.messages] == ["user", "assistant", "toolResult", "assistant"]


async def test_follow_up_poll_failing_adds_a_failure_turn() -> None:
    faux = FauxProvider([faux_response("answer")])
    cfg = AgentLoopConfig(model=MODEL, get_follow_up_messages=async_raiser("follow-ups broke"))
    r = await run([user("go")], AgentContext(), cfg, faux)
    assert r.summary() == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_end:assistant:stop",
        "turn_end",
        *FAILURE_TURN,
    ]
    assert_synthetic_failure(r.messages[-1], "follow-ups broke")


# --- emit raising -------------------------------------------------------------------------------


def raise_at(target: str, *, once: bool = True) -> Any:
    raised = False

    def on_event(event: Any) -> None:
        nonlocal raised
        if describe(event) == target and not (once and raised):
            raised = True
            raise Boom(f"listener failed at {target}")

    return on_event


async def test_emit_raising_at_a_message_update_fails_the_streaming_message() -> None:
    faux = FauxProvider([faux_response("Hello world")], chunk_size=5)
    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        faux,
        on_event=raise_at("message_update:text_delta"),
    )
    assert r.summary(updates=True) == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_update:text_start",
        "message_update:text_delta",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    last = r.messages[-1]
    assert text_of(last) == "Hello"
    assert last.error_message == "listener failed at message_update:text_delta"


async def test_emit_raising_at_the_assistant_message_start() -> None:
    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        FauxProvider([faux_response("Hello")]),
        on_event=raise_at("message_start:assistant"),
    )
    assert r.summary(updates=True) == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]


async def test_emit_raising_at_agent_start_fails_the_first_turn() -> None:
    faux = FauxProvider([faux_response("never")])
    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        faux,
        on_event=raise_at("agent_start"),
    )
    assert r.summary() == [*PROMPT_TURN, *FAILED_MESSAGE, "agent_end:error"]
    assert_synthetic_failure(r.messages[-1], "listener failed at agent_start")
    assert faux.calls == []


async def test_emit_raising_at_a_tool_start_cancels_the_batch() -> None:
    executed: list[str] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        executed.append(tool_call_id)
        return text_result("ran")

    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1"), faux_tool_call("t", id="c2")])]
    )
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        AgentLoopConfig(model=MODEL),
        faux,
        on_event=raise_at("tool_execution_start:c1"),
    )
    assert r.summary() == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_end:assistant:toolUse",
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c1:error",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        *FAILURE_TURN,
    ]
    assert executed == []
    for message in r.messages[2:4]:
        assert message.content == [TextContent(text="Operation aborted")]
    assert_synthetic_failure(r.messages[-1], "listener failed at tool_execution_start:c1")


async def test_emit_raising_at_a_tool_end_keeps_finished_results_and_cancels_the_rest() -> None:
    """The running call is cancelled before the failure tail is delivered, not after the run."""
    cancelled: list[str] = []
    cancelled_event = anyio.Event()
    seen_in_tail: list[bool] = []

    async def stuck(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append(tool_call_id)
            cancelled_event.set()

    fail_at_c1 = raise_at("tool_execution_end:c1")

    async def on_event(event: Any) -> None:
        fail_at_c1(event)
        if event.type == "agent_end":
            with anyio.move_on_after(5):
                await cancelled_event.wait()
            seen_in_tail.append(cancelled_event.is_set())

    faux = FauxProvider(
        [
            faux_response(
                tool_calls=[faux_tool_call("quick", id="c1"), faux_tool_call("stuck", id="c2")]
            )
        ]
    )
    with anyio.fail_after(10):
        r = await run(
            [user("go")],
            AgentContext(tools=[make_tool("quick"), make_tool("stuck", stuck)]),
            AgentLoopConfig(model=MODEL),
            faux,
            on_event=on_event,
        )
    assert r.summary() == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_end:assistant:toolUse",
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c1",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        *FAILURE_TURN,
    ]
    assert text_of(r.messages[2]) == "quick done"
    assert text_of(r.messages[3]) == "Operation aborted"
    assert cancelled == ["c2"]
    assert seen_in_tail == [True]


async def test_emit_raising_at_a_tool_update() -> None:
    async def updating(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        on_update(text_result("halfway"))
        await anyio.sleep_forever()

    faux = FauxProvider([faux_response(tool_calls=[faux_tool_call("t", id="c1")])])
    with anyio.fail_after(10):
        r = await run(
            [user("go")],
            AgentContext(tools=[make_tool("t", updating)]),
            AgentLoopConfig(model=MODEL),
            faux,
            on_event=raise_at("tool_execution_update:c1"),
        )
    assert r.summary()[6:] == [
        "tool_execution_start:c1",
        "tool_execution_update:c1",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        *FAILURE_TURN,
    ]


async def test_emit_raising_at_a_sequential_tool_result_aborts_the_next_call() -> None:
    executed: list[str] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        executed.append(tool_call_id)
        return text_result(tool_call_id)

    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1"), faux_tool_call("t", id="c2")])]
    )
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        AgentLoopConfig(model=MODEL, tool_execution="sequential"),
        faux,
        on_event=raise_at("message_end:toolResult:c1"),
    )
    assert r.summary()[6:] == [
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        *FAILURE_TURN,
    ]
    assert executed == ["c1"]


@pytest.mark.parametrize("hooks", [False, True])
async def test_emit_raising_at_a_middle_turn_end(hooks: bool) -> None:
    faux = _tool_script()
    calls: list[str] = []
    cfg = AgentLoopConfig(model=MODEL)
    if hooks:
        cfg = AgentLoopConfig(
            model=MODEL, prepare_next_turn=lambda ctx, signal: calls.append("prepare")
        )
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        cfg,
        faux,
        on_event=raise_at("turn_end"),
    )
    assert r.summary() == [*TOOL_TURN, *FAILURE_TURN]
    assert_synthetic_failure(r.messages[-1], "listener failed at turn_end")
    assert len(faux.calls) == 1
    assert calls == []


async def test_emit_raising_at_the_last_turn_end_still_fails_the_run() -> None:
    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        FauxProvider([faux_response("all done")]),
        on_event=raise_at("turn_end"),
    )
    assert r.summary() == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_end:assistant:stop",
        "turn_end",
        *FAILURE_TURN,
    ]
    assert text_of(r.messages[1]) == "all done"


async def test_emit_raising_at_the_final_message_end_closes_the_turn_then_fails() -> None:
    r = await run(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        FauxProvider([faux_response("all done")]),
        on_event=raise_at("message_end:assistant:stop"),
    )
    assert r.summary() == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_end:assistant:stop",
        "turn_end",
        *FAILURE_TURN,
    ]


async def test_emit_raising_in_the_tail_or_at_agent_end_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # raise at every turn_end: the first is the failure, the failure turn's one is only logged
    with caplog.at_level(logging.ERROR, logger="agentcore_fsm"):
        r = await run(
            [user("go")],
            AgentContext(),
            AgentLoopConfig(model=MODEL),
            FauxProvider([faux_response("x")]),
            on_event=raise_at("turn_end", once=False),
        )
    assert r.summary()[-6:] == ["turn_end", *FAILURE_TURN]
    assert_synthetic_failure(r.messages[-1], "listener failed at turn_end")
    assert len([rec for rec in caplog.records if rec.name == "agentcore_fsm"]) == 1
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="agentcore_fsm"):
        r = await run(
            [user("go")],
            AgentContext(),
            AgentLoopConfig(model=MODEL),
            FauxProvider([faux_response("x")]),
            on_event=raise_at("agent_end:completed"),
        )
    assert r.end.reason == "completed"
    assert len([rec for rec in caplog.records if rec.name == "agentcore_fsm"]) == 1


async def test_run_agent_loop_never_raises_for_failures_inside_the_run() -> None:
    events: list[Any] = []

    def emit(event: Any) -> None:
        events.append(event)
        raise Boom("every event fails")

    messages = await run_agent_loop(
        [user("go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL, transform_context=raiser("and so does this")),
        emit,
        stream_fn=FauxProvider([]),
    )
    check_grammar(events)
    assert messages[-1].error_message == "every event fails"
    assert Run(messages, events).end.reason == "error"
