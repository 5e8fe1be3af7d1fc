"""Nested runs that survive (docs/multi-agent.md#runs-that-survive): a nested run of a run
journaled in a run store is journaled in the same store, under the outer run's id, with its
parent in its header; a run stopped inside a nested run resumes inside it, without calling
again what the nested run journaled. The SIGKILL test is in tests/runtime/test_crash_nested.py.
Every async test runs on trio and on asyncio."""

from __future__ import annotations

import socket
import subprocess
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from agentcore_fsm import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    MemoryRunStore,
    Model,
    TextContent,
    UserMessage,
    resume_run,
    run_agent_loop,
)
from agentcore_fsm.agent.nested_record import child_id
from agentcore_fsm.devtools.testing import FauxProvider, check_run, faux_response, faux_tool_call
from agentcore_fsm.persist.store import SqliteRunStore

pytestmark = pytest.mark.anyio

MODEL = Model(id="m")


def call(name: str, args: dict[str, Any], id: str) -> Any:
    return faux_response(tool_calls=[faux_tool_call(name, args, id=id)])


def results(messages: list[Any]) -> dict[str, str]:
    return {
        m.tool_call_id: m.content[0].text
        for m in messages
        if getattr(m, "role", "") == "toolResult"
    }


async def test_nested_runs_are_journaled_in_the_outer_store_under_the_outer_id() -> None:
    store = MemoryRunStore()
    leaf = Agent(stream_fn=FauxProvider([faux_response("leaf answer")]))
    middle = Agent(
        tools=[leaf.as_tool("leaf", "The leaf.")],
        stream_fn=FauxProvider(
            [call("leaf", {"prompt": "go"}, "c1"), faux_response("middle answer")]
        ),
    )
    messages = await run_agent_loop(
        [UserMessage(content="start")],
        AgentContext(tools=[middle.as_tool("middle", "The middle.")]),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider(
            [call("middle", {"prompt": "go"}, "c1"), faux_response("outer answer")]
        ),
        store=store,
        run_id="r1",
        session_id="s",
    )
    assert results(messages) == {"c1": "middle answer"}
    # the call id repeats at each level: the index of the calling message keeps ids apart
    runs = {info.run_id: info for info in store.runs()}
    assert set(runs) == {"r1", "r1/1.c1", "r1/1.c1/1.c1"}
    assert all(info.status == "finished" for info in runs.values())
    assert runs["r1"].session_id == "s"
    assert runs["r1/1.c1"].session_id is None  # not a run of the session
    assert store.load("r1/1.c1").header["parent"] == {
        "run": "r1",
        "call": "c1",
        "path": ["c1"],
        "agents": ["middle"],
    }
    assert store.load("r1/1.c1/1.c1").header["parent"] == {
        "run": "r1/1.c1",
        "call": "c1",
        "path": ["c1", "c1"],
        "agents": ["middle", "leaf"],
    }
    assert "parent" not in store.load("r1").header


def test_the_child_id_names_the_message_that_holds_the_call() -> None:
    first = faux_response(tool_calls=[faux_tool_call("t", {}, id="c1")])
    second = faux_response(tool_calls=[faux_tool_call("t", {}, id="c1")])
    messages = [UserMessage(content="u"), first, UserMessage(content="v"), second]
    assert child_id("r", messages, "c1") == "r/3.c1"  # the last message holding it
    assert child_id("r", messages[:2], "c1") == "r/1.c1"
    assert child_id("r", messages, "zz") == "r/4.zz"


def ghost() -> str:
    """The owner name of a process of this host that has exited (its leases are taken over at
    once)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}:00000000"


def crashed_copy(store: Any, into: Any) -> Any:
    """``into`` holding what ``store`` holds now, its unfinished runs leased to a process that
    has exited: the store as a process that died at this moment leaves it."""
    owner = ghost()
    for info in store.runs():
        run = store.load(info.run_id)
        into.create_run(
            run.run_id, run.header, session_id=run.session_id, owner=owner, lease_s=600.0
        )
        for seq, entry in enumerate(run.entries):
            into.append(run.run_id, seq, entry, owner=owner, lease_s=600.0)
        if run.status == "finished":
            into.finish(run.run_id, run.end_reason, owner=owner)
    return into


class Worker:
    """An inner agent that calls its tool ``step`` and then answers; with ``crash`` set, the
    tool takes a copy of the store as a process dying at that moment would leave it
    (:func:`crashed_copy`) and ends the run there."""

    def __init__(self, provider: FauxProvider, crash: Crash | None) -> None:
        self.crash = crash
        self.runs = 0
        tool = AgentTool(
            name="step",
            description="One step.",
            parameters={"type": "object", "properties": {}},
            execute=self.step,
            idempotent=True,
        )
        self.agent = Agent(tools=[tool], stream_fn=provider)

    async def step(self, call_id: str, args: Any, signal: Any, update: Any) -> AgentToolResult:
        self.runs += 1
        if self.crash is not None:
            self.crash.now()
            await anyio.sleep_forever()
        return AgentToolResult(content=[TextContent(text="stepped")])


class Crash:
    """Where a run "dies": :meth:`now` copies its store into ``copy`` and cancels ``scope``."""

    def __init__(self, store: Any, copy: Any) -> None:
        self.store, self.copy = store, copy
        self.scope = anyio.CancelScope()

    def now(self) -> None:
        crashed_copy(self.store, self.copy)
        self.scope.cancel()


def inner_provider() -> FauxProvider:
    return FauxProvider([call("step", {}, "s1"), faux_response("inner done")])


def outer_provider() -> FauxProvider:
    return FauxProvider([call("worker", {"prompt": "work"}, "w1"), faux_response("all done")])


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_run_stopped_inside_a_nested_run_resumes_inside_it(
    kind: str, tmp_path: Any
) -> None:
    live = MemoryRunStore()
    store: Any = MemoryRunStore() if kind == "memory" else SqliteRunStore(tmp_path / "runs.db")
    inner, outer = inner_provider(), outer_provider()
    crash = Crash(live, store)
    with crash.scope:
        worker = Worker(inner, crash)
        await run_agent_loop(
            [UserMessage(content="start")],
            AgentContext(tools=[worker.agent.as_tool("worker", "The worker.")]),
            AgentLoopConfig(model=MODEL),
            stream_fn=outer,
            store=live,
            run_id="r1",
        )
    assert crash.scope.cancelled_caught and worker.runs == 1
    assert len(inner.calls) == 1 and len(outer.calls) == 1
    assert {i.run_id: i.status for i in store.runs()} == {"r1": "running", "r1/1.w1": "running"}
    # resumed: the outer call runs again and resumes its nested run, whose first model
    # answer (the call of step) is journaled: only the step runs again, then its last answer
    inner_after = FauxProvider([faux_response("inner done")])
    outer_after = FauxProvider([faux_response("all done")])
    worker_after = Worker(inner_after, None)
    events: list[Any] = []
    messages = await resume_run(
        "r1",
        store,
        AgentLoopConfig(model=MODEL),
        events.append,
        tools=[worker_after.agent.as_tool("worker", "The worker.")],
        stream_fn=outer_after,
    )
    assert worker_after.runs == 1  # idempotent: run again
    assert len(inner_after.calls) == 1 and len(outer_after.calls) == 1
    # the nested run's transcript is whole: its journaled call, the step's result, the answer
    (context,) = inner_after.calls
    assert [getattr(m, "role", None) for m in context.messages] == [
        "user",
        "assistant",
        "toolResult",
    ]
    assert results(messages) == {"w1": "inner done"}
    assert {i.run_id: i.end_reason for i in store.runs()} == {
        "r1": "completed",
        "r1/1.w1": "completed",
    }
    inner_record = store.load("r1/1.w1")
    assert inner_record.header["parent"]["path"] == ["w1"]


async def test_a_nested_run_that_finished_before_the_stop_is_read_from_its_record() -> None:
    live, store = MemoryRunStore(), MemoryRunStore()
    inner = FauxProvider([faux_response("inner done")])
    worker = Agent(stream_fn=inner)
    tool = worker.as_tool("worker", "The worker.")
    # the outer run stops after the nested run ended and before the result is journaled
    stopped: list[bool] = []

    def stop_after_the_nested_run(event: Any) -> None:
        if event.type == "tool_execution_end" and not stopped:
            stopped.append(True)
            crashed_copy(live, store)
            scope.cancel()

    with anyio.CancelScope() as scope:
        await run_agent_loop(
            [UserMessage(content="start")],
            AgentContext(tools=[tool]),
            AgentLoopConfig(model=MODEL),
            stop_after_the_nested_run,
            stream_fn=outer_provider(),
            store=live,
            run_id="r1",
        )
    assert stopped
    assert store.load("r1/1.w1").status == "finished"
    assert store.load("r1").status == "running"
    inner_after = FauxProvider([])  # no model call may be made
    worker.stream_fn = inner_after
    outer_after = FauxProvider([faux_response("all done")])
    events: list[Any] = []
    messages = await resume_run(
        "r1",
        store,
        AgentLoopConfig(model=MODEL),
        events.append,
        tools=[tool],
        stream_fn=outer_after,
        history=True,
    )
    assert inner_after.calls == [] and len(outer_after.calls) == 1
    assert results(messages) == {"w1": "inner done"}
    assert store.load("r1").end_reason == "completed"
    check_run([e for e in events if e.type != "tool_execution_update"], messages=None)


async def test_an_agent_with_a_store_journals_its_nested_runs_and_resumes_them() -> None:
    live, store = MemoryRunStore(), MemoryRunStore()
    crash = Crash(live, store)
    with crash.scope:
        worker = Worker(inner_provider(), crash)
        boss = Agent(
            tools=[worker.agent.as_tool("worker", "The worker.")],
            stream_fn=outer_provider(),
            store=live,
            session_id="s1",
        )
        await boss.prompt("start")
    runs = store.runs()
    (outer_id,) = [i.run_id for i in runs if i.session_id == "s1"]
    assert {i.run_id for i in runs} == {outer_id, f"{outer_id}/1.w1"}
    worker_after = Worker(FauxProvider([faux_response("inner done")]), None)
    boss_after = Agent(
        tools=[worker_after.agent.as_tool("worker", "The worker.")],
        stream_fn=FauxProvider([faux_response("all done")]),
        store=store,
        session_id="s1",
    )
    messages = await boss_after.resume()
    assert results(messages) == {"w1": "inner done"}
    assert boss_after.state.messages[-1].content[0].text == "all done"
    assert store.load(f"{outer_id}/1.w1").end_reason == "completed"


class Answer(BaseModel):
    total: int


def final(total: int) -> Any:
    return faux_response(tool_calls=[faux_tool_call("final_result", {"total": total}, id="o1")])


async def test_a_typed_nested_run_resumes_and_answers_with_its_output() -> None:
    live, store = MemoryRunStore(), MemoryRunStore()
    crash = Crash(live, store)
    with crash.scope:
        worker = Worker(FauxProvider([call("step", {}, "s1"), final(7)]), crash)
        await run_agent_loop(
            [UserMessage(content="start")],
            AgentContext(tools=[worker.agent.as_tool("worker", "W.", output_type=Answer)]),
            AgentLoopConfig(model=MODEL),
            stream_fn=outer_provider(),
            store=live,
            run_id="r1",
        )
    after = Worker(FauxProvider([final(7)]), None)
    messages = await resume_run(
        "r1",
        store,
        AgentLoopConfig(model=MODEL),
        tools=[after.agent.as_tool("worker", "W.", output_type=Answer)],
        stream_fn=FauxProvider([faux_response("all done")]),
    )
    assert results(messages) == {"w1": '{"total": 7}'}
    assert {i.run_id: i.end_reason for i in store.runs()} == {
        "r1": "completed",
        "r1/1.w1": "completed",
    }


async def test_a_typed_nested_run_read_from_its_record_gives_its_output() -> None:
    live, store = MemoryRunStore(), MemoryRunStore()
    worker = Agent(stream_fn=FauxProvider([final(7)]))
    tool = worker.as_tool("worker", "W.", output_type=Answer)
    stopped: list[bool] = []

    def stop(event: Any) -> None:
        if event.type == "tool_execution_end" and not stopped:
            stopped.append(True)
            crashed_copy(live, store)
            scope.cancel()

    with anyio.CancelScope() as scope:
        await run_agent_loop(
            [UserMessage(content="start")],
            AgentContext(tools=[tool]),
            AgentLoopConfig(model=MODEL),
            stop,
            stream_fn=outer_provider(),
            store=live,
            run_id="r1",
        )
    assert store.load("r1/1.w1").status == "finished"
    worker.stream_fn = FauxProvider([])  # no model call may be made
    messages = await resume_run(
        "r1",
        store,
        AgentLoopConfig(model=MODEL),
        tools=[tool],
        stream_fn=FauxProvider([faux_response("all done")]),
    )
    assert results(messages) == {"w1": '{"total": 7}'}


async def test_a_parent_needs_a_store_and_must_be_an_object() -> None:
    context, config = AgentContext(), AgentLoopConfig(model=MODEL)
    fn = FauxProvider([faux_response("hi")])
    with pytest.raises(ValueError, match=r"parent needs a store \(store=\.\.\.\)"):
        await run_agent_loop([UserMessage(content="x")], context, config, stream_fn=fn, parent={})
    not_an_object = r"parent must be a dict \(a JSON object\) or None, not str$"
    with pytest.raises(TypeError, match=not_an_object):
        await run_agent_loop(
            [UserMessage(content="x")],
            context,
            config,
            stream_fn=fn,
            store=MemoryRunStore(),
            run_id="r",
            parent="r0",  # type: ignore[arg-type]
        )


async def test_a_stored_run_under_a_nested_run_s_id_that_is_not_its_record_is_refused() -> None:
    """A run id taken by a run that is not this call's nested run (its header names another
    parent, or none): the call is answered with an error naming the run; nothing is resumed."""
    store = MemoryRunStore()
    await run_agent_loop(
        [UserMessage(content="other")],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([faux_response("not mine")]),
        store=store,
        run_id="r1/1.w1",
    )
    inner = FauxProvider([])
    worker = Agent(stream_fn=inner)
    messages = await run_agent_loop(
        [UserMessage(content="start")],
        AgentContext(tools=[worker.as_tool("worker", "The worker.")]),
        AgentLoopConfig(model=MODEL),
        stream_fn=outer_provider(),
        store=store,
        run_id="r1",
    )
    (result,) = [m for m in messages if getattr(m, "role", "") == "toolResult"]
    assert result.is_error and inner.calls == []
    assert "the store holds a run 'r1/1.w1' that is not the nested run of this call" in (
        result.content[0].text
    )
