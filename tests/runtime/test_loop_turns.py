"""Between turns: steering, follow-ups, prepare_next_turn, should_stop_after_turn
(docs/reference.md#between-turns), through the public async API on trio and asyncio."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import MODEL, make_tool, run, text_of, text_result, user

from agentcore_fsm import AbortController, AgentContext, AgentLoopConfig, Model
from agentcore_fsm.core.config import (
    AgentLoopTurnUpdate,
    LlmContext,
    PrepareNextTurnContext,
    StreamOptions,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

pytestmark = pytest.mark.anyio


class Polls:
    """Scripted steering/follow-up queues that log every poll."""

    def __init__(
        self, steering: list[list[Any]] | None = None, follow_up: list[list[Any]] | None = None
    ) -> None:
        self.steering = list(steering or [])
        self.follow_up = list(follow_up or [])
        self.log: list[str] = []

    def get_steering(self) -> list[Any]:
        self.log.append("steering")
        return self.steering.pop(0) if self.steering else []

    async def get_follow_up(self) -> list[Any]:
        self.log.append("follow_up")
        return self.follow_up.pop(0) if self.follow_up else []

    def config(self, **kwargs: Any) -> AgentLoopConfig:
        return AgentLoopConfig(
            model=MODEL,
            get_steering_messages=self.get_steering,
            get_follow_up_messages=self.get_follow_up,
            **kwargs,
        )


PROMPT_TURN = ["agent_start", "turn_start", "message_start:user", "message_end:user"]
ANSWER = ["message_start:assistant", "message_end:assistant:stop", "turn_end"]


def texts(messages: list[Any]) -> list[str]:
    return [text_of(m) for m in messages]


async def test_steering_at_start_is_injected_into_the_first_turn() -> None:
    steer = user("steer early")
    polls = Polls(steering=[[steer]])
    faux = FauxProvider([faux_response("answer")])
    r = await run([user("prompt")], AgentContext(), polls.config(), faux)
    assert r.summary() == [
        *PROMPT_TURN,
        "message_start:user",
        "message_end:user",
        *ANSWER,
        "agent_end:completed",
    ]
    assert r.events[4].message is steer
    assert texts(faux.calls[0].messages) == ["prompt", "steer early"]
    assert polls.log == ["steering", "steering", "follow_up"]
    assert [text_of(m) for m in r.messages] == ["prompt", "steer early", "answer"]


async def test_steering_after_a_tool_batch_starts_the_next_turn_with_it() -> None:
    steer = user("change of plan")
    polls = Polls(steering=[[], [steer]])
    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1")]), faux_response("ok")]
    )
    r = await run([user("go")], AgentContext(tools=[make_tool("t")]), polls.config(), faux)
    assert r.summary() == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_end:assistant:toolUse",
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        "turn_start",
        "message_start:user",
        "message_end:user",
        *ANSWER,
        "agent_end:completed",
    ]
    assert texts(faux.calls[1].messages) == ["go", "", "t done", "change of plan"]
    # a batch with tool calls goes on without asking for follow-ups
    assert polls.log == ["steering", "steering", "steering", "follow_up"]
    assert [m.role for m in r.messages] == ["user", "assistant", "toolResult", "user", "assistant"]


async def test_steering_after_a_text_turn_starts_another_turn() -> None:
    polls = Polls(steering=[[], [user("one more thing")]])
    faux = FauxProvider([faux_response("first"), faux_response("second")])
    r = await run([user("go")], AgentContext(), polls.config(), faux)
    assert r.summary() == [
        *PROMPT_TURN,
        *ANSWER,
        "turn_start",
        "message_start:user",
        "message_end:user",
        *ANSWER,
        "agent_end:completed",
    ]
    assert polls.log == ["steering", "steering", "steering", "follow_up"]


async def test_follow_ups_are_polled_only_when_the_agent_would_stop() -> None:
    f1, f2 = user("follow 1"), user("follow 2")
    polls = Polls(follow_up=[[f1, f2]])
    faux = FauxProvider([faux_response("a1"), faux_response("a2")])
    r = await run([user("go")], AgentContext(), polls.config(), faux)
    assert r.summary() == [
        *PROMPT_TURN,
        *ANSWER,
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:user",
        "message_end:user",
        *ANSWER,
        "agent_end:completed",
    ]
    assert polls.log == ["steering", "steering", "follow_up", "steering", "follow_up"]
    assert texts(faux.calls[1].messages) == ["go", "a1", "follow 1", "follow 2"]
    assert texts(r.messages) == ["go", "a1", "follow 1", "follow 2", "a2"]


async def test_a_terminating_batch_still_takes_queued_messages() -> None:
    async def final(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return text_result("finished", terminate=True)

    tools = [make_tool("t", final)]
    # steering after the terminating batch
    polls = Polls(steering=[[], [user("steered")]])
    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1")]), faux_response("more")]
    )
    r = await run([user("go")], AgentContext(tools=tools), polls.config(), faux)
    assert len(faux.calls) == 2
    assert r.summary()[-9:] == [
        "message_end:toolResult:c1",
        "turn_end",
        "turn_start",
        "message_start:user",
        "message_end:user",
        *ANSWER,
        "agent_end:completed",
    ]
    assert polls.log == ["steering", "steering", "steering", "follow_up"]
    # a follow-up after the terminating batch
    polls = Polls(follow_up=[[user("followed")]])
    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c2")]), faux_response("more")]
    )
    r = await run([user("go")], AgentContext(tools=tools), polls.config(), faux)
    assert len(faux.calls) == 2
    assert polls.log == ["steering", "steering", "follow_up", "steering", "follow_up"]
    assert r.end.reason == "completed"
    # nothing queued: the terminating batch stops the run
    polls = Polls()
    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c3")]), faux_response("never")]
    )
    r = await run([user("go")], AgentContext(tools=tools), polls.config(), faux)
    assert len(faux.calls) == 1
    assert polls.log == ["steering", "steering", "follow_up"]
    assert r.summary()[-2:] == ["turn_end", "agent_end:stopped"]


async def test_poll_returning_none_counts_as_empty() -> None:
    cfg = AgentLoopConfig(
        model=MODEL, get_steering_messages=lambda: None, get_follow_up_messages=lambda: None
    )
    r = await run([user("go")], AgentContext(), cfg, FauxProvider([faux_response("x")]))
    assert r.summary() == [*PROMPT_TURN, *ANSWER, "agent_end:completed"]


# --- prepare_next_turn -----------------------------------------------------------------------


def _recording_stream(
    faux: FauxProvider, seen: list[tuple[Model, LlmContext, StreamOptions]]
) -> Any:
    def stream_fn(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        seen.append((model, context, options))
        return faux(model, context, options)

    return stream_fn


async def test_prepare_next_turn_sees_each_turn_and_may_replace_model_and_thinking() -> None:
    other = Model(id="bigger", provider="other", api="other-api")
    contexts: list[PrepareNextTurnContext] = []
    snapshots: list[tuple[int, int]] = []
    order: list[str] = []
    controller = AbortController()
    signals: list[Any] = []

    async def prepare(ctx: PrepareNextTurnContext, signal: Any) -> Any:
        order.append("prepare")
        contexts.append(ctx)
        signals.append(signal)
        snapshots.append((len(ctx.new_messages), len(ctx.context.messages)))
        if len(contexts) == 1:
            return AgentLoopTurnUpdate(model=other, thinking_level="high")
        if len(contexts) == 2:
            return {"thinking_level": "off"}
        return None

    def should_stop(ctx: Any, signal: Any) -> bool:
        order.append("should_stop")
        return False

    def steering() -> list[Any]:
        order.append("steering")
        return []

    seen: list[Any] = []
    faux = FauxProvider(
        [
            faux_response(tool_calls=[faux_tool_call("t", id="c1")]),
            faux_response(tool_calls=[faux_tool_call("t", id="c2")]),
            faux_response("done"),
        ]
    )
    cfg = AgentLoopConfig(
        model=MODEL,
        reasoning="low",
        prepare_next_turn=prepare,
        should_stop_after_turn=should_stop,
        get_steering_messages=steering,
    )
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        cfg,
        _recording_stream(faux, seen),
        signal=controller.signal,
    )
    assert [model.id for model, _, _ in seen] == ["faux-1", "bigger", "bigger"]
    assert [options.reasoning for _, _, options in seen] == ["low", "high", None]
    assert [m.model for m in r.messages if m.role == "assistant"] == ["faux-1", "bigger", "bigger"]
    # after each turn: should_stop, the steering poll; before another turn (both follow a tool
    # batch, and the poll was empty): prepare, then steering once more; none after the last
    assert order == [
        "steering",
        *["should_stop", "steering", "prepare", "steering"] * 2,
        "should_stop",
        "steering",
    ]
    first = contexts[0]
    assert first.message is r.messages[1]
    assert [m.tool_call_id for m in first.tool_results] == ["c1"]
    assert snapshots == [(3, 3), (5, 5)]
    assert [m.tool_call_id for m in contexts[1].tool_results] == ["c2"]
    assert signals == [controller.signal] * 2


async def test_prepare_next_turn_may_replace_the_context() -> None:
    summary = user("summary of everything so far")
    replacement = AgentContext(
        system_prompt="new system prompt", messages=[summary], tools=[make_tool("t")]
    )
    calls = 0

    def prepare(ctx: PrepareNextTurnContext, signal: Any) -> Any:
        nonlocal calls
        calls += 1
        return AgentLoopTurnUpdate(context=replacement) if calls == 1 else None

    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1")]), faux_response("after")]
    )
    r = await run(
        [user("go")],
        AgentContext(system_prompt="old", tools=[make_tool("t")]),
        AgentLoopConfig(model=MODEL, prepare_next_turn=prepare),
        faux,
    )
    second = faux.calls[1]
    assert second.system_prompt == "new system prompt"
    assert second.messages == [summary]
    # the replacement object is copied, not grown by the run
    assert replacement.messages == [summary]
    # the run still returns every message it created
    assert [m.role for m in r.messages] == ["user", "assistant", "toolResult", "assistant"]


async def test_thinking_level_off_clears_reasoning() -> None:
    seen: list[Any] = []
    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1")]), faux_response("x")]
    )
    cfg = AgentLoopConfig(
        model=MODEL,
        reasoning="medium",
        prepare_next_turn=lambda ctx, signal: AgentLoopTurnUpdate(thinking_level="off"),
    )
    await run(
        [user("go")], AgentContext(tools=[make_tool("t")]), cfg, _recording_stream(faux, seen)
    )
    assert [options.reasoning for _, _, options in seen] == ["medium", None]


# --- should_stop_after_turn -------------------------------------------------------------------


async def test_should_stop_after_turn_ends_the_run_at_once() -> None:
    polls = Polls(steering=[[], [user("never injected")]], follow_up=[[user("never")]])
    seen: list[PrepareNextTurnContext] = []

    async def should_stop(ctx: PrepareNextTurnContext, signal: Any) -> bool:
        seen.append(ctx)
        return True

    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1")]), faux_response("never")]
    )
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        polls.config(should_stop_after_turn=should_stop),
        faux,
    )
    assert r.summary() == [
        *PROMPT_TURN,
        "message_start:assistant",
        "message_end:assistant:toolUse",
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        "agent_end:stopped",
    ]
    assert polls.log == ["steering"]
    assert len(faux.calls) == 1
    (ctx,) = seen
    assert ctx.message is r.messages[1]
    assert [m.tool_call_id for m in ctx.tool_results] == ["c1"]
    assert ctx.new_messages == r.messages


async def test_should_stop_after_turn_as_a_turn_limit() -> None:
    turns = 0

    def should_stop(ctx: Any, signal: Any) -> bool:
        nonlocal turns
        turns += 1
        return turns >= 2

    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id=f"c{i}")]) for i in range(5)]
    )
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        AgentLoopConfig(model=MODEL, should_stop_after_turn=should_stop),
        faux,
    )
    assert len(faux.calls) == 2
    assert len(r.of_type("turn_end")) == 2
    assert r.end.reason == "stopped"
