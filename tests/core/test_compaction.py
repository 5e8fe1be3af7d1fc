"""Context compaction (``AgentLoopConfig.compaction``; docs/policies-models.md): the settings
refused at construction, the built-in compaction, the machine's steps, the hook through the
driver, and the hook's answer journaled."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentcore_fsm import AgentContext, AgentLoopConfig, Model, UserMessage
from agentcore_fsm.core.compaction import (
    Compaction,
    CompactionInfo,
    CompactionRequest,
    drop_oldest_turns,
    dropped_messages,
    estimate_tokens,
)
from agentcore_fsm.core.events import StreamDone, StreamError
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage
from agentcore_fsm.core.protocol import CallHook, CallModel, HookReturned
from agentcore_fsm.devtools.testing import run_checked
from agentcore_fsm.integrations.providers.faux import FauxError, FauxProvider, faux_response
from agentcore_fsm.persist.journal import JournaledLoopMachine

M = Model(id="m")


def info(reason: Any = "overflow", limit: int | None = None) -> CompactionInfo:
    return CompactionInfo(reason=reason, model=M, estimated_tokens=0, max_context_tokens=limit)


def transcript() -> list[Any]:
    """Three turns; the second with a tool call and its result."""
    call = ToolCall(id="c1", name="look", arguments={})
    return [
        UserMessage(content="one", timestamp=1),
        AssistantMessage(content=[TextContent(text="first " * 20)], timestamp=2),
        UserMessage(content="two", timestamp=3),
        AssistantMessage(content=[call], stop_reason="toolUse", timestamp=4),
        ToolResultMessage(tool_call_id="c1", tool_name="look", timestamp=5),
        AssistantMessage(content=[TextContent(text="second " * 20)], timestamp=6),
        UserMessage(content="three", timestamp=7),
    ]


def overflow(text: str = "prompt is too long") -> StreamError:
    message = AssistantMessage(
        stop_reason="error", error_message=text, error_kind="context_overflow"
    )
    return StreamError(reason="error", error=message)


def answer() -> StreamDone:
    return StreamDone(reason="stop", message=AssistantMessage(content=[TextContent(text="ok")]))


# --- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"compact": "drop"}, TypeError, "compact must be a callable"),
        ({"max_context_tokens": 0}, ValueError, "max_context_tokens must be at least 1, not 0"),
        ({"max_context_tokens": -5}, ValueError, "max_context_tokens must be at least 1, not -5"),
        ({"max_context_tokens": 1.5}, TypeError, "max_context_tokens must be an int or None"),
        ({"max_context_tokens": True}, TypeError, "max_context_tokens must be an int or None"),
        ({"max_context_tokens": float("nan")}, TypeError, "max_context_tokens must be an int"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], error: type, text: str) -> None:
    compact = kwargs.pop("compact", None)
    with pytest.raises(error, match=f"Compaction: {text}"):
        Compaction(compact, **kwargs)


def test_the_config_takes_only_a_compaction() -> None:
    with pytest.raises(TypeError, match="AgentLoopConfig: compaction must be a Compaction or None"):
        AgentLoopConfig(model=M, compaction=10)  # type: ignore[arg-type]
    assert Compaction(max_context_tokens=1).max_context_tokens == 1


# --- the built-in compaction ----------------------------------------------------------------


def test_overflow_drops_the_older_half_of_the_turns() -> None:
    messages = transcript()
    kept = drop_oldest_turns(messages, info("overflow"))
    assert kept == messages[2:]  # turn one dropped; the call and its result stay together


def test_the_budget_drops_turns_until_the_estimate_fits() -> None:
    messages = transcript()
    last_turn = messages[6:]
    limit = estimate_tokens(last_turn) + 1
    assert drop_oldest_turns(messages, info("budget", limit)) == last_turn
    generous = estimate_tokens(messages[2:])
    assert drop_oldest_turns(messages, info("budget", generous)) == messages[2:]
    assert drop_oldest_turns(messages, info("budget", 10**9)) == messages


def test_one_turn_is_never_dropped() -> None:
    messages = [UserMessage(content="only " * 500, timestamp=1)]
    assert drop_oldest_turns(messages, info("budget", 1)) == messages
    assert drop_oldest_turns(messages, info("overflow", 1)) == messages
    assert drop_oldest_turns([], info("overflow")) == []


def test_messages_before_the_first_user_message_are_a_turn() -> None:
    messages = [AssistantMessage(content=[TextContent(text="hello")]), *transcript()]
    assert drop_oldest_turns(messages, info("budget", 1)) == messages[-1:]


def test_the_estimate_and_the_dropped_indices() -> None:
    messages = transcript()
    assert estimate_tokens([]) == 0
    assert estimate_tokens([], "abcd" * 10) == 10
    assert estimate_tokens(messages) > estimate_tokens(messages[1:]) > 0
    indices, dropped = dropped_messages(messages, [messages[0], messages[3], messages[4]])
    assert indices == [1, 2, 5, 6] and dropped == [messages[i] for i in indices]
    copy = [m.model_copy() for m in messages]  # equal messages count as kept
    assert dropped_messages(messages, copy) == ([], [])


# --- the machine ----------------------------------------------------------------------------


def test_an_overflow_is_compacted_and_the_request_made_again_once() -> None:
    config = AgentLoopConfig(model=M, compaction=Compaction())
    m = LoopMachine([UserMessage(content="four")], AgentContext(messages=transcript()), config)
    m.start()
    step = m.stream_event(overflow())
    assert m.state == "compacting"
    assert [e.type for e in step.events] == [
        "message_start",
        "message_end",
        "turn_end",
    ]
    (effect,) = step.effects
    assert isinstance(effect, CallHook) and effect.name == "compact"
    request = effect.ctx
    assert isinstance(request, CompactionRequest)
    assert request.info.reason == "overflow" and request.info.error == "prompt is too long"
    before = list(m.context.messages)
    assert request.messages == before and request.messages is not m.context.messages
    step = m.feed(HookReturned("compact", before[3:]))
    turn, event = step.events  # the request is made again in a new turn
    assert turn.type == "turn_start"
    assert event.type == "context_compacted" and event.reason == "overflow"
    assert (
        event.indices == [0, 1, 2] and event.dropped == before[:3] and event.kept == len(before) - 3
    )
    assert m.context.messages == before[3:]
    assert isinstance(step.effects[0], CallModel) and m.state == "streaming"
    step = m.stream_event(overflow("still too long"))
    assert m.end_reason == "error"  # made again once only
    assert m.new_messages[-1].error_message == "still too long"


def test_a_hook_answer_that_is_not_a_list_fails_the_run_naming_the_hook() -> None:
    config = AgentLoopConfig(model=M, compaction=Compaction())
    m = LoopMachine([UserMessage(content="x")], AgentContext(), config)
    m.start()
    m.stream_event(overflow())
    step = m.feed(HookReturned("compact", {"messages": []}))
    assert m.end_reason == "error"
    assert [e.type for e in step.events] == [  # a turn of its own: the failed one was closed
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    text = m.new_messages[-1].error_message
    assert text is not None and "Compaction.compact" in text and "expected a list" in text


def test_the_budget_compacts_before_the_request() -> None:
    config = AgentLoopConfig(model=M, compaction=Compaction(max_context_tokens=5))
    m = LoopMachine([UserMessage(content="four")], AgentContext(messages=transcript()), config)
    step = m.start()
    assert m.state == "compacting"
    (effect,) = step.effects
    assert effect.ctx.info.reason == "budget" and effect.ctx.info.max_context_tokens == 5
    step = m.feed(HookReturned("compact", m.context.messages[-1:]))
    assert step.events[0].reason == "budget" and m.state == "streaming"
    assert isinstance(step.effects[0], CallModel)  # not compacted twice for one request
    m.stream_event(answer())
    assert m.vars.compacted is None  # the next request may be compacted again


def test_under_the_budget_nothing_happens() -> None:
    config = AgentLoopConfig(model=M, compaction=Compaction(max_context_tokens=10**6))
    m = LoopMachine([UserMessage(content="x")], AgentContext(messages=transcript()), config)
    step = m.start()
    assert m.state == "streaming" and isinstance(step.effects[0], CallModel)


def test_the_hook_answer_is_journaled() -> None:
    config = AgentLoopConfig(model=M, compaction=Compaction())
    m = JournaledLoopMachine(
        [UserMessage(content="four", timestamp=8)], AgentContext(messages=transcript()), config
    )
    m.start()
    m.stream_event(overflow())
    m.feed(HookReturned("compact", m.context.messages[6:]))
    entry = m.entries[-1]
    assert entry["input"] == "hook_returned" and entry["name"] == "compact"
    assert [item["message"]["role"] for item in entry["value"]] == ["user", "user", "assistant"]
    restored, steps = JournaledLoopMachine.restore(m.snapshot(), config)
    assert restored.context.messages == m.context.messages
    assert restored.state == "streaming"
    assert [e.type for e in steps[-1].events] == ["turn_start", "context_compacted"]


# --- through the driver ---------------------------------------------------------------------


def test_an_async_hook_through_the_driver_on_both_backends() -> None:
    seen: list[CompactionInfo] = []

    async def summarise(messages: list[Any], info: CompactionInfo) -> list[Any]:
        seen.append(info)
        await anyio.lowlevel.checkpoint()
        return [UserMessage(content="summary of before", timestamp=1), messages[-1]]

    for backend in ("trio", "asyncio"):
        faux = FauxProvider([FauxError("too long", kind="context_overflow"), faux_response("ok")])
        config = AgentLoopConfig(model=M, compaction=Compaction(summarise))

        async def main(faux: FauxProvider = faux, config: AgentLoopConfig = config) -> Any:
            return await run_checked(
                [UserMessage(content="q")],
                AgentContext(messages=transcript()),
                config,
                stream_fn=faux,
            )

        run = anyio.run(main, backend=backend)
        assert run.summary.reason == "completed"
        (event,) = [e for e in run.events if e.type == "context_compacted"]
        assert event.kept == 2 and len(event.dropped) == len(transcript()) + 1
    assert [i.reason for i in seen] == ["overflow", "overflow"]


def test_a_raising_hook_fails_the_run_with_its_text() -> None:
    def broken(messages: list[Any], info: CompactionInfo) -> list[Any]:
        raise RuntimeError("summariser down")

    faux = FauxProvider([FauxError("too long", kind="context_overflow")])
    config = AgentLoopConfig(model=M, compaction=Compaction(broken))

    async def main() -> Any:
        return await run_checked([UserMessage(content="q")], AgentContext(), config, stream_fn=faux)

    run = anyio.run(main)
    assert run.summary.reason == "error"
    assert run.messages[-1].error_message == "summariser down"
