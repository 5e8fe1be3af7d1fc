"""Schedules of several writers of one stored session, for
tests/agent/test_session_concurrency_properties.py.

A :class:`Writer` is one ``Agent`` handle on a shared store and session id, with a list of
operations to do (``prompt``, ``continue``: a follow-up then ``continue_()``, ``tool``: a prompt
whose answer calls the tool ``slow``). Its model and its tool wait on its :class:`Pacer`: each
model call and each ``slow`` call blocks until the schedule releases it, so the schedule decides
the order in which the writers' runs move, with no sleep anywhere. :func:`play` runs a schedule
of actions (``start`` a writer's next operation, ``step`` its pacer, ``abort`` its run,
``reload`` it: a new ``Agent`` object on the same session), then lets every run finish, and
returns what each operation did.
"""

from __future__ import annotations

import socket
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from agentcore_fsm import Agent, AgentTool, AgentToolResult, Model, TextContent
from agentcore_fsm.core.config import LlmContext, StreamOptions
from agentcore_fsm.core.messages import AgentMessage
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.store import RunStore, SessionBusyError

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
SESSION = "s"
OPS = ("prompt", "continue", "tool")
ACTIONS = ("start", "step", "abort", "reload")


class Pacer:
    """Model calls and tool calls of one writer wait here until :meth:`step` lets the oldest
    one go on."""

    def __init__(self) -> None:
        self.waiting: deque[anyio.Event] = deque()

    async def gate(self) -> None:
        event = anyio.Event()
        self.waiting.append(event)
        try:
            await event.wait()
        finally:
            if event in self.waiting:
                self.waiting.remove(event)

    def step(self) -> bool:
        if not self.waiting:
            return False
        self.waiting.popleft().set()
        return True


@dataclass
class Outcome:
    """What one operation of a writer did: ``ran`` (its run's ``order`` among the session's
    runs, the messages it returned, its events), ``busy`` (refused: ``SessionBusyError``) or
    ``empty`` (``continue_`` with no transcript: ``ValueError``)."""

    writer: str
    op: str
    wait_s: float | None
    kind: str = ""
    order: int = -1
    messages: list[AgentMessage] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    started_tick: int = 0
    ended_tick: int = 0
    error: BaseException | None = None


class Writer:
    """One handle on the session: its agent (replaced by ``reload``), pacer and operations."""

    def __init__(self, name: str, store: RunStore, wait_s: float | None, ops: Sequence[str]):
        self.name = name
        self.store = store
        self.wait_s = wait_s
        self.ops = deque(ops)
        self.pacer = Pacer()
        self.current = ""  # the operation running
        self.calls = 0  # tool call ids made so far
        self.busy = False
        self.agent = self.make_agent()

    def tool(self) -> AgentTool:
        async def slow(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
            await self.pacer.gate()
            return AgentToolResult(content=[TextContent(text=f"{call_id} done")])

        return AgentTool("slow", "takes a while", {"type": "object"}, slow)

    def answer(self, context: LlmContext) -> Any:
        last = context.messages[-1] if context.messages else None
        if getattr(last, "role", None) == "toolResult":
            return faux_response(f"{self.name} used the tool")
        if self.current == "tool":
            self.calls += 1
            call = faux_tool_call("slow", {}, id=f"{self.name}-call-{self.calls}")
            return faux_response(f"{self.name} calls", tool_calls=[call])
        return faux_response(f"{self.name} answers")

    def stream(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[Any]:
        async def play() -> AsyncIterator[Any]:
            await self.pacer.gate()
            async for event in FauxProvider([self.answer(context)])(model, context, options):
                yield event

        return play()

    def make_agent(self) -> Agent:
        # every writer knows the tool: a reloaded transcript may hold another writer's calls
        return Agent(
            model=MODEL,
            tools=[self.tool()],
            stream_fn=self.stream,
            store=self.store,
            session_id=SESSION,
            session_wait_s=self.wait_s,
        )


class Schedule:
    """Plays the actions; ``tick`` counts them (an operation refused "at once" ends in the
    tick it started in)."""

    def __init__(self, writers: list[Writer]) -> None:
        self.writers = writers
        self.tick = 0
        self.runs = 0  # runs started, in the order they got the session
        self.outcomes: list[Outcome] = []

    async def operate(self, writer: Writer, op: str) -> None:
        agent = writer.agent
        outcome = Outcome(writer.name, op, writer.wait_s, started_tick=self.tick)
        self.outcomes.append(outcome)

        def listen(event: Any, signal: Any) -> None:
            if event.type == "agent_start":
                outcome.order, self.runs = self.runs, self.runs + 1
            outcome.events.append(event)

        unsubscribe = agent.subscribe(listen)
        before = list(agent.messages)
        writer.current = op
        try:
            if op == "continue":
                agent.follow_up(f"{writer.name} follows up")
                outcome.messages = await agent.continue_()
            else:
                outcome.messages = await agent.prompt(f"{writer.name} asks")
            outcome.kind = "ran"
        except SessionBusyError as exc:
            outcome.kind, outcome.error = "busy", exc
            assert list(agent.messages) == before, "a refused operation changed the transcript"
            if op == "continue":  # the follow-up stays queued for the next try
                assert agent.has_queued_messages(), "a refused continue_ lost its follow-up"
                agent.clear_follow_up_queue()
        except ValueError as exc:
            outcome.kind, outcome.error = "empty", exc
            assert op == "continue" and not before, exc
            assert str(exc) == "No messages to continue from"
            agent.clear_follow_up_queue()
        finally:
            unsubscribe()
            outcome.ended_tick = self.tick
            writer.busy = False

    async def play(self, actions: Sequence[tuple[str, int]]) -> None:
        async with anyio.create_task_group() as tg:
            for kind, index in actions:
                writer = self.writers[index % len(self.writers)]
                if kind == "start" and not writer.busy and writer.ops:
                    writer.busy = True
                    tg.start_soon(self.operate, writer, writer.ops.popleft())
                elif kind == "step":
                    writer.pacer.step()
                elif kind == "abort":
                    writer.agent.abort()
                elif kind == "reload" and not writer.busy:
                    writer.agent = writer.make_agent()
                await anyio.wait_all_tasks_blocked()
                self.tick += 1
            while any(w.busy for w in self.writers):  # let every run end
                for writer in self.writers:
                    writer.pacer.step()
                await anyio.wait_all_tasks_blocked()
                self.tick += 1


def probe_owner() -> str:
    """A live owner of this host that no agent uses: it can take a session only when no live
    writer holds it."""
    import os

    return f"{socket.gethostname()}:{os.getpid()}:probe"


def check_transcript(messages: list[AgentMessage]) -> None:
    """Every tool call of an assistant message that ended normally (toolUse, stop, length) is
    answered by exactly one tool result, after it; no result answers an unknown call."""
    calls: dict[str, int] = {}
    for index, message in enumerate(messages):
        role = getattr(message, "role", None)
        if role == "assistant" and message.stop_reason in ("toolUse", "stop", "length"):
            for block in message.content:
                if getattr(block, "type", None) == "toolCall":
                    assert block.id not in calls, f"call {block.id} made twice"
                    calls[block.id] = index
    answered: dict[str, int] = {}
    for index, message in enumerate(messages):
        if getattr(message, "role", None) == "toolResult":
            call_id = message.tool_call_id
            assert call_id in calls and calls[call_id] < index, f"stray result {call_id}"
            answered[call_id] = answered.get(call_id, 0) + 1
    assert answered == dict.fromkeys(calls, 1), (calls, answered)
