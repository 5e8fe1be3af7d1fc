"""The Agent across tasks (docs/reference.md#the-agent, docs/reference.md#abort,
docs/reference.md#failures): listeners that block, abort from another task at
any moment, steering and follow-ups queued while tools run in parallel, several tasks waiting
for idle, and listeners that raise. Every async test runs on trio and on asyncio; ordering
between tasks is made explicit with anyio events, never with sleeps.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from agent_helpers import (
    ASSISTANT_STOP,
    ASSISTANT_TOOLS,
    Recorder,
    describe,
    label,
    prompt_turn,
    text_of,
)

from agentcore_fsm import AgentToolResult, AssistantMessage, Model, TextContent
from agentcore_fsm.agent.agent import Agent
from agentcore_fsm.core.config import LlmContext, StreamOptions
from agentcore_fsm.core.events import StreamStart
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.integrations.providers.faux import (
    FauxError,
    FauxProvider,
    faux_response,
    faux_tool_call,
)

# --- helpers --------------------------------------------------------------------------------


HANG = object()
LOGGER = "agentcore_fsm"


class Script:
    """A stream function playing scripted responses; a ``HANG`` item streams a partial message
    and then blocks until the call is cancelled (``hung`` is set once it blocks)."""

    def __init__(self, *items: Any) -> None:
        self.items: deque[Any] = deque(items)
        self.calls: list[tuple[Model, LlmContext, StreamOptions]] = []
        self.hung = anyio.Event()

    def __call__(self, model: Model, context: LlmContext, options: StreamOptions) -> Any:
        self.calls.append((model, context, options))
        item = self.items.popleft() if self.items else FauxError("No more faux responses queued")
        if item is HANG:
            return self._hang(model)
        return FauxProvider([item], chunk_size=64)(model, context, options)

    async def _hang(self, model: Model) -> AsyncIterator[Any]:
        partial = AssistantMessage(
            content=[TextContent(text="partial")], model=model.id, stop_reason="pending"
        )
        yield StreamStart(partial=partial)
        self.hung.set()
        await anyio.sleep_forever()


class Gated:
    """A tool whose calls block until ``gate`` is set; records whether it ran or was cancelled."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.started = anyio.Event()
        self.gate = anyio.Event()
        self.ran = False
        self.cancelled = False
        self.tool = AgentTool(
            name=name, description=name, parameters={"type": "object"}, execute=self.execute
        )

    async def execute(self, tool_call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
        self.ran = True
        self.started.set()
        try:
            await self.gate.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        return AgentToolResult(content=[TextContent(text=f"{self.name} ok")])


def two_calls() -> AssistantMessage:
    return faux_response(tool_calls=[faux_tool_call("a", id="c1"), faux_tool_call("b", id="c2")])


def check_grammar(events: list[Any]) -> None:
    """The event grammar (docs/reference.md#event-grammar), as far as an Agent's listener can see
    it."""
    kinds = [e.type for e in events]
    assert kinds[0] == "agent_start" and kinds[1] == "turn_start"
    assert kinds[-1] == "agent_end" and kinds.count("agent_end") == kinds.count("agent_start") == 1
    depth = 0
    open_message = None
    open_tools: set[str] = set()
    for event in events:
        kind = event.type
        if kind == "turn_start":
            assert depth == 0
            depth = 1
        elif kind == "turn_end":
            assert depth == 1 and open_message is None and not open_tools
            depth = 0
        elif kind == "message_start":
            assert open_message is None
            open_message = event.message
        elif kind == "message_update":
            assert open_message is not None
        elif kind == "message_end":
            assert open_message is not None
            open_message = None
        elif kind == "tool_execution_start":
            assert event.tool_call_id not in open_tools
            open_tools.add(event.tool_call_id)
        elif kind == "tool_execution_end":
            open_tools.remove(event.tool_call_id)
    end = events[-1]
    created = [e.message for e in events if e.type == "message_end"]
    assert end.messages == created
    answered = {m.tool_call_id for m in created if getattr(m, "role", None) == "toolResult"}
    for message in created:
        if getattr(message, "role", None) == "assistant" and message.stop_reason in (
            "toolUse",
            "stop",
            "length",
        ):
            assert {c.id for c in message.tool_calls()} <= answered


# --- listeners that block --------------------------------------------------------------------


@pytest.mark.anyio
async def test_listener_blocking_on_agent_end_keeps_prompt_and_wait_for_idle_pending() -> None:
    agent = Agent(stream_fn=Script(faux_response("ok")))
    at_end = anyio.Event()
    release = anyio.Event()

    async def blocker(event: Any, signal: Any) -> None:
        if event.type == "agent_end":
            at_end.set()
            await release.wait()

    agent.subscribe(blocker)
    done: list[str] = []

    async def run() -> None:
        await agent.prompt("hi")
        done.append("prompt")

    async def waiter(i: int) -> None:
        await agent.wait_for_idle()
        done.append(f"wait{i}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await at_end.wait()
        for i in range(3):
            tg.start_soon(waiter, i)
        await anyio.wait_all_tasks_blocked()
        assert done == []
        assert agent.state.is_streaming is True
        assert agent.is_busy and agent.lifecycle_state == "running"
        assert [label(m) for m in agent.state.messages] == ["user:hi", "assistant:stop"]
        release.set()
    assert sorted(done) == ["prompt", "wait0", "wait1", "wait2"]
    assert agent.state.is_streaming is False
    assert agent.lifecycle_state == "idle"


@pytest.mark.anyio
async def test_wait_for_idle_when_idle_returns_at_once() -> None:
    agent = Agent(stream_fn=Script(faux_response("ok")))
    await agent.wait_for_idle()
    await agent.prompt("hi")
    await agent.wait_for_idle()
    assert not agent.is_busy


@pytest.mark.anyio
async def test_same_signal_reaches_listeners_and_is_aborted_after_abort() -> None:
    agent = Agent(stream_fn=Script(faux_response("ok"), faux_response("two")))
    rec = Recorder()
    agent.subscribe(rec)
    at_end = anyio.Event()
    release = anyio.Event()

    async def blocker(event: Any, signal: Any) -> None:
        if event.type == "agent_end":
            at_end.set()
            await release.wait()

    agent.subscribe(blocker)
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.prompt, "hi")
        await at_end.wait()
        signal = agent.signal
        assert signal is not None and not signal.aborted
        assert all(s is signal for s in rec.signals) and len(rec.signals) == 11
        agent.abort()
        assert signal.aborted
        assert agent.lifecycle_state == "aborting" and agent.is_busy
        agent.abort()  # already aborting: nothing more happens
        release.set()
    assert agent.signal is None
    assert rec.seq[-1] == "agent_end:completed"  # the run had ended before the abort
    assert agent.state.error_message is None
    assert [(r.trigger, r.source, r.dest) for r in agent.lifecycle_history] == [
        ("start", "idle", "running"),
        ("abort", "running", "aborting"),
        ("finish", "aborting", "finished"),
    ]
    rec.signals.clear()
    await agent.prompt("again")
    assert rec.signals[0] is not signal and not rec.signals[0].aborted


def test_abort_when_idle_does_nothing() -> None:
    agent = Agent()
    agent.abort()
    assert agent.lifecycle_state == "idle"
    assert agent.lifecycle_history == []
    assert agent.signal is None


# --- abort from another task -----------------------------------------------------------------


@pytest.mark.anyio
async def test_abort_while_the_model_streams() -> None:
    script = Script(HANG)
    agent = Agent(stream_fn=script)
    rec = Recorder()
    agent.subscribe(rec)
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.prompt, "hi")
        await script.hung.wait()
        assert agent.state.streaming_message is not None
        agent.abort()
        assert agent.lifecycle_state == "aborting"
        await agent.wait_for_idle()
        assert not agent.is_busy
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        "message_start:assistant:pending",
        "message_end:assistant:aborted",
        "turn_end",
        "agent_end:aborted",
    ]
    last = agent.state.messages[-1]
    assert last.stop_reason == "aborted" and last.error_message == "Request was aborted"
    assert text_of(last) == "partial"
    assert agent.state.error_message == "Request was aborted"
    assert len(script.calls) == 1
    check_grammar(rec.events)


@pytest.mark.anyio
async def test_abort_while_parallel_tools_run() -> None:
    a, b = Gated("a"), Gated("b")
    script = Script(two_calls(), faux_response("never"))
    agent = Agent(tools=[a.tool, b.tool], stream_fn=script)
    rec = Recorder()
    agent.subscribe(rec)
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.prompt, "hi")
        await a.started.wait()
        await b.started.wait()
        assert agent.state.pending_tool_calls == {"c1", "c2"}
        agent.abort()
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        *ASSISTANT_TOOLS,
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c1:error",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c1:error",
        "message_end:toolResult:c1:error",
        "message_start:toolResult:c2:error",
        "message_end:toolResult:c2:error",
        "turn_end",
        "agent_end:aborted",
    ]
    assert a.cancelled and b.cancelled
    results = agent.state.messages[-2:]
    assert [text_of(m) for m in results] == ["Operation aborted", "Operation aborted"]
    assert agent.state.error_message == "Request was aborted"
    assert agent.state.pending_tool_calls == set()
    assert len(script.calls) == 1
    check_grammar(rec.events)


@pytest.mark.anyio
async def test_abort_after_one_parallel_tool_finished_keeps_its_result() -> None:
    a, b = Gated("a"), Gated("b")
    agent = Agent(tools=[a.tool, b.tool], stream_fn=Script(two_calls()))
    rec = Recorder()
    agent.subscribe(rec)
    first_ended = anyio.Event()
    agent.subscribe(
        lambda e, s: first_ended.set() if describe(e) == "tool_execution_end:c1" else None
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.prompt, "hi")
        await b.started.wait()
        a.gate.set()
        await first_ended.wait()
        assert agent.state.pending_tool_calls == {"c2"}
        agent.abort()
    assert rec.seq[6:] == [
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c1",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2:error",
        "message_end:toolResult:c2:error",
        "turn_end",
        "agent_end:aborted",
    ]
    assert [text_of(m) for m in agent.state.messages[-2:]] == ["a ok", "Operation aborted"]
    assert b.cancelled and not a.cancelled
    check_grammar(rec.events)


@pytest.mark.anyio
async def test_abort_between_turns_ends_at_once() -> None:
    script = Script(faux_response(tool_calls=[faux_tool_call("a", id="c1")]), "never used")
    a = Gated("a")
    a.gate.set()
    agent = Agent(tools=[a.tool], stream_fn=script)
    rec = Recorder()
    agent.subscribe(rec)
    seen: list[str] = []

    def abort_at_turn_end(event: Any, signal: Any) -> None:
        if event.type == "turn_end":
            agent.abort()
        if event.type == "agent_end":
            seen.append(agent.lifecycle_state)

    agent.subscribe(abort_at_turn_end)
    await agent.prompt("hi")
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        *ASSISTANT_TOOLS,
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        "agent_end:aborted",
    ]
    assert seen == ["aborting"]
    assert len(script.calls) == 1
    assert agent.state.error_message == "Request was aborted"  # set by agent_end
    check_grammar(rec.events)


@pytest.mark.anyio
@pytest.mark.parametrize("at", range(29))
async def test_abort_from_another_task_at_any_event(at: int) -> None:
    """Abort from another task while a listener holds event number ``at``: whatever the
    moment, the run ends well-formed, aborted (unless agent_end was already out), and every
    tool call is answered."""
    a, b = Gated("a"), Gated("b")
    a.gate.set()
    b.gate.set()
    script = Script(two_calls(), faux_response("done"))
    agent = Agent(tools=[a.tool, b.tool], stream_fn=script)
    rec = Recorder()
    agent.subscribe(rec)
    held = anyio.Event()
    resume = anyio.Event()

    async def hold(event: Any, signal: Any) -> None:
        if len(rec.events) == at + 1:
            held.set()
            await resume.wait()

    agent.subscribe(hold)
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.prompt, "hi")
        await held.wait()
        agent.abort()
        resume.set()
    check_grammar(rec.events)
    held_kind = rec.events[at].type
    expected = "completed" if held_kind == "agent_end" else "aborted"
    assert rec.events[-1].reason == expected
    assert agent.state.messages == rec.events[-1].messages
    # events 0-3 come before the first model call, 22 on belong to the second one
    assert len(script.calls) == (0 if at <= 3 else 1 if at < 22 else 2)
    if at <= 3:
        last = agent.state.messages[-1]
        assert last.stop_reason == "aborted" and last.content == [TextContent(text="")]
    assert not agent.is_busy and agent.state.pending_tool_calls == set()


# --- steering and follow-ups from another task --------------------------------------------------


@pytest.mark.anyio
async def test_steering_and_follow_up_from_another_task_while_parallel_tools_run() -> None:
    a, b = Gated("a"), Gated("b")
    script = Script(two_calls(), faux_response("steered"), faux_response("followed"))
    agent = Agent(tools=[a.tool, b.tool], stream_fn=script)
    rec = Recorder()
    agent.subscribe(rec)
    c1_ended = anyio.Event()
    agent.subscribe(lambda e, s: c1_ended.set() if describe(e) == "tool_execution_end:c1" else None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.prompt, "hi")
        await a.started.wait()
        await b.started.wait()
        agent.steer("change course")
        agent.follow_up("and then this")
        assert agent.has_queued_messages()
        a.gate.set()
        await c1_ended.wait()
        b.gate.set()
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        *ASSISTANT_TOOLS,
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c1",
        "tool_execution_end:c2",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        "turn_start",
        *prompt_turn("change course"),
        *ASSISTANT_STOP,
        "turn_end",
        "turn_start",
        *prompt_turn("and then this"),
        *ASSISTANT_STOP,
        "turn_end",
        "agent_end:completed",
    ]
    assert [label(m) for m in script.calls[1][1].messages][-2:] == [
        "toolResult:c2",
        "user:change course",
    ]
    assert not agent.has_queued_messages()
    check_grammar(rec.events)


@pytest.mark.anyio
async def test_prompt_from_another_task_while_running_is_refused_then_works() -> None:
    a = Gated("a")
    script = Script(faux_response(tool_calls=[faux_tool_call("a", id="c1")]), faux_response("x"))
    script.items.append(faux_response("second run"))
    agent = Agent(tools=[a.tool], stream_fn=script)
    outcome: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.prompt, "first")
        await a.started.wait()
        try:
            await agent.prompt("too early")
        except RuntimeError as exc:
            outcome.append(type(exc).__name__)
        a.gate.set()
        await agent.wait_for_idle()
        await agent.prompt("second")
    assert outcome == ["AgentBusyError"]
    assert [label(m) for m in agent.state.messages] == [
        "user:first",
        "assistant:toolUse",
        "toolResult:c1",
        "assistant:stop",
        "user:second",
        "assistant:stop",
    ]


# --- failures: raising listeners and hooks -----------------------------------------------------


@pytest.mark.anyio
async def test_a_raising_listener_ends_the_run_cleanly() -> None:
    script = Script(faux_response("never"))
    agent = Agent(stream_fn=script)
    first = Recorder()
    later = Recorder()

    def raiser(event: Any, signal: Any) -> None:
        first(event, signal)
        if describe(event) == "message_end:user:hi":
            raise RuntimeError("listener boom")

    agent.subscribe(raiser)
    agent.subscribe(later)
    new = await agent.prompt("hi")  # returns normally
    expected = [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),  # the later listener still got the event that raised
        "message_start:assistant:error",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    assert later.all == expected
    assert first.all == expected  # the raising listener receives the failure tail too
    assert agent.state.error_message == "listener boom"
    assert script.calls == []
    failure = agent.state.messages[-1]
    assert failure.content == [TextContent(text="")]
    assert failure.error_message == "listener boom"
    assert new == agent.state.messages
    assert not agent.is_busy and agent.state.is_streaming is False
    check_grammar(later.events)


@pytest.mark.anyio
async def test_an_async_listener_raising_while_streaming() -> None:
    agent = Agent(stream_fn=Script(faux_response("streamed text")))
    rec = Recorder()

    async def raiser(event: Any, signal: Any) -> None:
        await anyio.lowlevel.checkpoint()
        if event.type == "message_update":
            raise ValueError("update listener boom")

    agent.subscribe(raiser)
    agent.subscribe(rec)
    await agent.prompt("hi")
    assert rec.all == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        "message_start:assistant:pending",
        "message_update",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    assert agent.state.error_message == "update listener boom"
    assert agent.state.messages[-1].error_message == "update listener boom"
    check_grammar(rec.events)


@pytest.mark.anyio
async def test_a_listener_raising_after_the_assistant_message_gets_a_failure_turn() -> None:
    a, b = Gated("a"), Gated("b")
    agent = Agent(tools=[a.tool, b.tool], stream_fn=Script(two_calls(), faux_response("x")))
    rec = Recorder()

    def raiser(event: Any, signal: Any) -> None:
        if describe(event) == "tool_execution_start:c1":
            raise RuntimeError("tool listener boom")

    agent.subscribe(raiser)
    agent.subscribe(rec)
    await agent.prompt("hi")
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        *ASSISTANT_TOOLS,
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c1:error",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c1:error",
        "message_end:toolResult:c1:error",
        "message_start:toolResult:c2:error",
        "message_end:toolResult:c2:error",
        "turn_end",
        "turn_start",
        "message_start:assistant:error",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    assert not a.ran and not b.ran
    assert agent.state.error_message == "tool listener boom"
    check_grammar(rec.events)


@pytest.mark.anyio
async def test_listener_errors_in_the_failure_tail_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = Agent(stream_fn=Script(faux_response("never")))
    rec = Recorder()

    def raiser(event: Any, signal: Any) -> None:
        if describe(event) in ("message_end:user:hi", "turn_end", "agent_end:error"):
            raise RuntimeError(f"boom at {event.type}")

    agent.subscribe(raiser)
    agent.subscribe(rec)
    with caplog.at_level(logging.ERROR, logger="agentcore_fsm"):
        await agent.prompt("hi")
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        "message_start:assistant:error",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    assert agent.state.error_message == "boom at message_end"
    logged = [
        str(r.exc_info[1]) for r in caplog.records if r.exc_info and r.name == "agentcore_fsm"
    ]
    assert logged == ["boom at turn_end", "boom at agent_end"]


@pytest.mark.anyio
async def test_two_listeners_raising_on_one_event(caplog: pytest.LogCaptureFixture) -> None:
    agent = Agent(stream_fn=Script(faux_response("never")))
    rec = Recorder()

    def first(event: Any, signal: Any) -> None:
        if event.type == "turn_start":
            raise RuntimeError("first")

    def second(event: Any, signal: Any) -> None:
        if event.type == "turn_start":
            raise RuntimeError("second")

    agent.subscribe(first)
    agent.subscribe(second)
    agent.subscribe(rec)
    with caplog.at_level(logging.ERROR, logger="agentcore_fsm"):
        await agent.prompt("hi")
    assert agent.state.error_message == "first"
    assert rec.seq[-1] == "agent_end:error"
    assert rec.seq.count("turn_start") == 1
    logged = [
        str(r.exc_info[1]) for r in caplog.records if r.exc_info and r.name == "agentcore_fsm"
    ]
    assert logged == ["second"]
    check_grammar(rec.events)


@pytest.mark.anyio
async def test_a_raising_hook_fails_the_run_as_data() -> None:
    def transform_context(messages: list[Any], signal: Any) -> list[Any]:
        raise LookupError("no context for you")

    agent = Agent(stream_fn=Script(faux_response("never")), transform_context=transform_context)
    rec = Recorder()
    agent.subscribe(rec)
    await agent.prompt("hi")
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        "message_start:assistant:error",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    assert agent.state.error_message == "no context for you"
    check_grammar(rec.events)
