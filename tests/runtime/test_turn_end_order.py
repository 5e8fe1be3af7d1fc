"""The order between turns (docs/reference.md#between-turns): ``turn_end`` →
``should_stop_after_turn`` → the steering poll → the follow-up poll, and only when another turn
follows: ``prepare_next_turn``, the steering poll once more (when the turn follows from the tool
batch and the poll after it returned nothing), ``turn_start``. Also a ``before_tool_call`` block
that terminates, and hook results with fields they do not have. Through the public async API, on
trio and asyncio."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import MODEL, make_tool, run, text_of, text_result, user

from agentcore_fsm import AbortController, AgentContext, AgentLoopConfig
from agentcore_fsm.core.config import AgentLoopTurnUpdate, PrepareNextTurnContext
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

pytestmark = pytest.mark.anyio


class Log:
    """Hooks and polls that log each call; steering and follow-up answers are scripted."""

    def __init__(
        self,
        steering: list[list[Any]] | None = None,
        follow_up: list[list[Any]] | None = None,
        stop_after: int | None = None,
    ) -> None:
        self.steering = list(steering or [])
        self.follow_up = list(follow_up or [])
        self.stop_after = stop_after
        self.calls: list[str] = []
        self.prepared: list[PrepareNextTurnContext] = []
        self.turns = 0

    def get_steering(self) -> list[Any]:
        self.calls.append("steering")
        return self.steering.pop(0) if self.steering else []

    def get_follow_up(self) -> list[Any]:
        self.calls.append("follow_up")
        return self.follow_up.pop(0) if self.follow_up else []

    def should_stop(self, ctx: Any, signal: Any) -> bool:
        self.turns += 1
        self.calls.append("should_stop")
        return self.stop_after is not None and self.turns >= self.stop_after

    def prepare(self, ctx: PrepareNextTurnContext, signal: Any) -> Any:
        self.calls.append("prepare")
        self.prepared.append(ctx)
        return None

    def config(self, **kwargs: Any) -> AgentLoopConfig:
        return AgentLoopConfig(
            model=MODEL,
            get_steering_messages=self.get_steering,
            get_follow_up_messages=self.get_follow_up,
            should_stop_after_turn=self.should_stop,
            prepare_next_turn=self.prepare,
            **kwargs,
        )


def tool_turn(call_id: str) -> Any:
    return faux_response(tool_calls=[faux_tool_call("t", id=call_id)])


async def test_prepare_runs_only_before_another_turn_after_stop_and_polls() -> None:
    log = Log()
    events: list[Any] = []
    order: list[str] = []

    def tap(event: Any) -> None:
        events.append(event)
        if event.type == "turn_start":
            order.append(f"turn_start@{len(log.calls)}")

    faux = FauxProvider([tool_turn("c1"), faux_response("done")])
    r = await run(
        [user("go")], AgentContext(tools=[make_tool("t")]), log.config(), faux, on_event=tap
    )
    assert r.end.reason == "completed"
    assert log.calls == [
        "steering",  # before the first model call
        "should_stop",  # after turn 1 (a tool batch that goes on)
        "steering",  # empty
        "prepare",  # another turn follows
        "steering",  # once more: the turn follows from the batch and the poll was empty
        "should_stop",  # after turn 2 (the final answer)
        "steering",
        "follow_up",  # nothing: the run ends, and prepare_next_turn is not called
    ]
    # the second turn_start comes after the second steering poll that follows turn 1
    assert order == ["turn_start@0", "turn_start@5"]
    (ctx,) = log.prepared
    assert ctx.message is r.messages[1] and [m.tool_call_id for m in ctx.tool_results] == ["c1"]


async def test_a_steering_message_polled_once_more_joins_the_next_turn() -> None:
    late = user("queued while preparing")
    log = Log(steering=[[], [], [late]])
    faux = FauxProvider([tool_turn("c1"), faux_response("done")])
    r = await run([user("go")], AgentContext(tools=[make_tool("t")]), log.config(), faux)
    assert log.calls[:5] == ["steering", "should_stop", "steering", "prepare", "steering"]
    assert [text_of(m) for m in faux.calls[1].messages] == ["go", "", "t done", late.content]
    turn_starts = [i for i, e in enumerate(r.events) if e.type == "turn_start"]
    assert r.events[turn_starts[1] + 1].message is late


async def test_no_second_poll_when_the_first_returned_messages() -> None:
    steer = user("steer")
    log = Log(steering=[[], [steer]])
    faux = FauxProvider([tool_turn("c1"), faux_response("done")])
    r = await run([user("go")], AgentContext(tools=[make_tool("t")]), log.config(), faux)
    assert log.calls == [
        "steering",
        "should_stop",
        "steering",  # returned the message: the turn follows, prepared, no poll again
        "prepare",
        "should_stop",
        "steering",
        "follow_up",
    ]
    assert [text_of(m) for m in faux.calls[1].messages][-1] == "steer"
    assert r.end.reason == "completed"


async def test_a_text_turn_followed_by_steering_is_prepared_without_a_second_poll() -> None:
    log = Log(steering=[[], [user("more")]])
    faux = FauxProvider([faux_response("first"), faux_response("second")])
    await run([user("go")], AgentContext(), log.config(), faux)
    assert log.calls == [
        "steering",
        "should_stop",
        "steering",
        "prepare",
        "should_stop",
        "steering",
        "follow_up",
    ]


async def test_follow_ups_are_prepared_for_without_polling_steering_again() -> None:
    log = Log(follow_up=[[user("follow")]])
    faux = FauxProvider([faux_response("first"), faux_response("second")])
    r = await run([user("go")], AgentContext(), log.config(), faux)
    assert log.calls == [
        "steering",
        "should_stop",
        "steering",
        "follow_up",  # messages: another turn follows
        "prepare",
        "should_stop",
        "steering",
        "follow_up",
    ]
    assert [text_of(m) for m in r.messages] == ["go", "first", "follow", "second"]


async def test_should_stop_ends_the_run_before_any_poll_or_prepare() -> None:
    log = Log(stop_after=1)
    faux = FauxProvider([tool_turn("c1"), faux_response("never")])
    r = await run([user("go")], AgentContext(tools=[make_tool("t")]), log.config(), faux)
    assert log.calls == ["steering", "should_stop"]
    assert r.end.reason == "stopped" and len(faux.calls) == 1


async def test_no_prepare_after_a_terminating_batch_or_an_error() -> None:
    async def final(call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
        return text_result("last", terminate=True)

    log = Log()
    faux = FauxProvider([tool_turn("c1")])
    r = await run([user("go")], AgentContext(tools=[make_tool("t", final)]), log.config(), faux)
    assert r.end.reason == "stopped"
    assert "prepare" not in log.calls
    assert log.calls == ["steering", "should_stop", "steering", "follow_up"]

    log = Log()
    failing = FauxProvider([faux_response("", stop_reason="error", error_message="boom")])
    r = await run([user("go")], AgentContext(), log.config(), failing)
    assert r.end.reason == "error" and log.calls == ["steering"]


async def test_without_a_steering_poll_prepare_still_runs_before_the_next_turn() -> None:
    calls: list[str] = []

    def prepare(ctx: Any, signal: Any) -> Any:
        calls.append("prepare")
        return AgentLoopTurnUpdate(thinking_level="high")

    faux = FauxProvider([tool_turn("c1"), faux_response("done")])
    cfg = AgentLoopConfig(model=MODEL, prepare_next_turn=prepare)
    r = await run([user("go")], AgentContext(tools=[make_tool("t")]), cfg, faux)
    assert calls == ["prepare"] and r.end.reason == "completed"


async def test_without_prepare_the_batch_turn_still_polls_steering_twice() -> None:
    polls: list[str] = []
    answers: list[list[Any]] = [[], [], [user("second poll")]]

    def steering() -> list[Any]:
        polls.append("steering")
        return answers.pop(0) if answers else []

    faux = FauxProvider([tool_turn("c1"), faux_response("done")])
    cfg = AgentLoopConfig(model=MODEL, get_steering_messages=steering)
    r = await run([user("go")], AgentContext(tools=[make_tool("t")]), cfg, faux)
    assert polls == ["steering"] * 4
    assert [text_of(m) for m in r.messages] == ["go", "", "t done", "second poll", "done"]


async def test_polled_messages_waiting_for_a_failed_prepare_are_kept() -> None:
    steer = user("do not lose me")
    log = Log(steering=[[], [steer]])

    def prepare(ctx: Any, signal: Any) -> Any:
        raise RuntimeError("prepare broke")

    faux = FauxProvider([faux_response("first")])
    r = await run([user("go")], AgentContext(), _with(log, prepare_next_turn=prepare), faux)
    assert r.end.reason == "error"
    assert r.summary()[-8:] == [
        "turn_end",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    assert r.messages[-2] is steer and r.messages[-1].error_message == "prepare broke"


async def test_polled_messages_waiting_for_an_aborted_prepare_are_kept() -> None:
    controller = AbortController()
    steer = user("kept")
    log = Log(follow_up=[[steer]])

    async def prepare(ctx: Any, signal: Any) -> Any:
        controller.abort()
        await signal.wait()

    faux = FauxProvider([faux_response("first")])
    r = await run(
        [user("go")],
        AgentContext(),
        _with(log, prepare_next_turn=prepare),
        faux,
        signal=controller.signal,
    )
    assert r.end.reason == "aborted"
    assert r.messages[-2] is steer
    assert r.messages[-1].stop_reason == "aborted" and len(faux.calls) == 1


def _with(log: Log, **kwargs: Any) -> AgentLoopConfig:
    cfg = log.config()
    for name, value in kwargs.items():
        setattr(cfg, name, value)
    return cfg


# --- before_tool_call: a block that terminates; unknown fields ----------------------------------


async def test_a_blocked_call_with_terminate_ends_the_batch_and_the_run() -> None:
    def before(ctx: Any, signal: Any) -> Any:
        return {"block": True, "reason": "not today", "terminate": True}

    faux = FauxProvider([tool_turn("c1"), faux_response("never")])
    cfg = AgentLoopConfig(model=MODEL, before_tool_call=before)
    r = await run([user("go")], AgentContext(tools=[make_tool("t")]), cfg, faux)
    assert r.end.reason == "stopped" and len(faux.calls) == 1
    (end,) = r.of_type("tool_execution_end")
    assert end.is_error and end.result.terminate is True
    assert text_of(end.result) == "not today"
    result_message = r.messages[-1]
    assert result_message.role == "toolResult" and text_of(result_message) == "not today"
    assert "terminate" not in result_message.model_dump()


async def test_a_blocked_call_without_terminate_does_not_end_the_run() -> None:
    def before(ctx: Any, signal: Any) -> Any:
        return {"block": True, "terminate": False}

    faux = FauxProvider([tool_turn("c1"), faux_response("after")])
    cfg = AgentLoopConfig(model=MODEL, before_tool_call=before)
    r = await run([user("go")], AgentContext(tools=[make_tool("t")]), cfg, faux)
    assert r.end.reason == "completed" and len(faux.calls) == 2
    (end,) = r.of_type("tool_execution_end")
    assert end.result.terminate is None and text_of(end.result) == "Tool execution was blocked"


async def test_terminate_without_block_changes_nothing() -> None:
    def before(ctx: Any, signal: Any) -> Any:
        return {"terminate": True}

    faux = FauxProvider([tool_turn("c1"), faux_response("after")])
    cfg = AgentLoopConfig(model=MODEL, before_tool_call=before)
    r = await run([user("go")], AgentContext(tools=[make_tool("t")]), cfg, faux)
    assert r.end.reason == "completed" and text_of(r.messages[2]) == "t done"


async def test_a_before_result_with_an_unknown_field_is_an_error_result() -> None:
    def before(ctx: Any, signal: Any) -> Any:
        return {"block": False, "blok": True}

    faux = FauxProvider([tool_turn("c1"), faux_response("after")])
    cfg = AgentLoopConfig(model=MODEL, before_tool_call=before)
    r = await run([user("go")], AgentContext(tools=[make_tool("t")]), cfg, faux)
    (end,) = r.of_type("tool_execution_end")
    assert end.is_error
    text = text_of(end.result)
    assert text.startswith("before_tool_call returned an invalid value:") and "blok" in text


async def test_an_after_result_with_an_unknown_field_is_an_error_result() -> None:
    def after(ctx: Any, signal: Any) -> Any:
        return {"content": None, "detials": {"x": 1}}

    faux = FauxProvider([tool_turn("c1"), faux_response("after")])
    cfg = AgentLoopConfig(model=MODEL, after_tool_call=after)
    r = await run([user("go")], AgentContext(tools=[make_tool("t")]), cfg, faux)
    (end,) = r.of_type("tool_execution_end")
    assert end.is_error
    text = text_of(end.result)
    assert text.startswith("after_tool_call returned an invalid value:") and "detials" in text
