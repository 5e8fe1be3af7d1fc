"""One writer per stored session (docs/survive.md#one-writer-per-session).

Two agents on one store and session id — in one process, or in two (tests/session_worker.py
holds the session in a child process) — never both write: the second prompt while the first
run is live is refused at once with ``SessionBusyError`` naming the session and the holder, or
waits for it with ``session_wait_s``; either way the session loses nothing (the second agent's
run continues after the first one's answer). Both stores, both backends.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore_fsm import (
    Agent,
    AgentTool,
    AgentToolResult,
    MemoryRunStore,
    Model,
    SqliteRunStore,
    TextContent,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.store import SCHEMA_VERSION, RunStore, SessionBusyError

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
WORKER = str(Path(__file__).resolve().parents[1] / "session_worker.py")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    made: RunStore = (
        MemoryRunStore() if request.param == "memory" else SqliteRunStore(tmp_path / "r.db")
    )
    yield made
    made.close()


class Gate:
    """A tool ``hold`` that reports it started, then waits until released."""

    def __init__(self) -> None:
        self.holding = anyio.Event()
        self.release = anyio.Event()

    def tool(self) -> AgentTool:
        async def hold(call_id: str, args: Any, signal_: Any, on_update: Any) -> AgentToolResult:
            self.holding.set()
            await self.release.wait()
            return AgentToolResult(content=[TextContent(text="held")])

        return AgentTool("hold", "holds", {"type": "object"}, hold)


def _holder(store: RunStore, gate: Gate) -> Agent:
    script = [
        faux_response("holding on", tool_calls=[faux_tool_call("hold", {}, id="h")]),
        faux_response("answer of the first"),
    ]
    return Agent(
        model=MODEL,
        tools=[gate.tool()],
        stream_fn=FauxProvider(script),
        store=store,
        session_id="s",
    )


HOLD = AgentTool("hold", "holds", {"type": "object"}, lambda *a: AgentToolResult())
"""The tool of the session's first run, given again to the agents that read the session."""


def _texts(agent: Agent) -> list[str]:
    return [str(m) for m in agent.messages]


@pytest.mark.anyio
async def test_a_second_writer_is_refused_at_once(store: RunStore) -> None:
    gate = Gate()
    first = _holder(store, gate)
    second_fn = FauxProvider([faux_response("answer of the second")])
    second = Agent(model=MODEL, tools=[HOLD], stream_fn=second_fn, store=store, session_id="s")
    async with anyio.create_task_group() as tg:
        tg.start_soon(first.prompt, "first")
        await gate.holding.wait()
        with pytest.raises(SessionBusyError) as info:
            await second.prompt("second")
        assert info.value.session_id == "s"
        assert str(os.getpid()) in info.value.holder
        assert "session 's' has another writer" in str(info.value)
        assert not second.is_busy and second.messages == [] and second_fn.calls == []
        gate.release.set()
    assert len(store.runs("s")) == 1  # the refused prompt wrote nothing
    await second.prompt("second")  # the first run ended: the session is free
    texts = _texts(second)
    assert texts[0] == 'user: "first"' and 'assistant: "answer of the first"' in texts
    assert texts[-2:] == ['user: "second"', 'assistant: "answer of the second"']
    # what the second agent's model saw: the first agent's answer, then its own prompt
    assert [str(m) for m in second_fn.calls[0].messages][-2:] == [
        'assistant: "answer of the first"',
        'user: "second"',
    ]
    # and a third agent loads the whole session: nothing was lost
    third = Agent(model=MODEL, tools=[HOLD], store=store, session_id="s")
    assert _texts(third) == texts


@pytest.mark.anyio
async def test_a_second_writer_may_wait_for_the_first(store: RunStore) -> None:
    gate = Gate()
    first = _holder(store, gate)
    second_fn = FauxProvider([faux_response("answer of the second")])
    second = Agent(
        model=MODEL,
        tools=[HOLD],
        stream_fn=second_fn,
        store=store,
        session_id="s",
        session_wait_s=None,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(first.prompt, "first")
        await gate.holding.wait()
        tg.start_soon(second.prompt, "second")
        await anyio.wait_all_tasks_blocked()
        assert second.is_busy and second_fn.calls == []  # waiting for the first
        gate.release.set()
    texts = _texts(second)
    assert texts[-3:] == [
        'assistant: "answer of the first"',
        'user: "second"',
        'assistant: "answer of the second"',
    ]
    assert [r.status for r in store.runs("s")] == ["finished", "finished"]


@pytest.mark.anyio
async def test_waiting_ends_with_abort_or_the_deadline(store: RunStore) -> None:
    gate = Gate()
    first = _holder(store, gate)
    kept = {"model": MODEL, "tools": [HOLD], "store": store, "session_id": "s"}
    waiter = Agent(stream_fn=FauxProvider([]), session_wait_s=None, **kept)
    brief = Agent(stream_fn=FauxProvider([]), session_wait_s=0.05, **kept)
    async with anyio.create_task_group() as tg:
        tg.start_soon(first.prompt, "first")
        await gate.holding.wait()
        with pytest.raises(SessionBusyError):
            await brief.prompt("x")

        async def wait_and_see() -> None:
            with pytest.raises(SessionBusyError):
                await waiter.prompt("y")

        tg.start_soon(wait_and_see)
        await anyio.wait_all_tasks_blocked()
        waiter.abort()
        await waiter.wait_for_idle()
        gate.release.set()
    assert not waiter.is_busy and len(store.runs("s")) == 1


def test_the_store_rules_of_a_session_lease(tmp_path: Path) -> None:
    for store in (MemoryRunStore(), SqliteRunStore(tmp_path / "r.db")):
        store.acquire_session("s", "me:1:a", lease_s=30)
        store.acquire_session("s", "me:1:a", lease_s=30)  # the holder renews
        with pytest.raises(SessionBusyError, match="another host"):
            store.acquire_session("s", "other", lease_s=30)
        store.release_session("s", "other")  # not the holder: nothing happens
        with pytest.raises(SessionBusyError):
            store.acquire_session("s", "other", lease_s=30)
        store.release_session("s", "me:1:a")
        store.acquire_session("s", "other", lease_s=-1)  # free: taken (and expired at once)
        store.acquire_session("s", "me:1:a", lease_s=30)  # an expired remote lease: taken over
        dead = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            check=True,
        )
        import socket

        ghost = f"{socket.gethostname()}:{dead.stdout.strip()}:x"
        store.acquire_session("t", ghost, lease_s=3600)
        store.acquire_session("t", "me:1:a", lease_s=30)  # a dead process of this host
        live = f"{socket.gethostname()}:{os.getpid()}:other-agent"
        store.acquire_session("u", live, lease_s=-1)
        with pytest.raises(SessionBusyError, match="a live process of this host"):
            store.acquire_session("u", "me:1:a", lease_s=30)  # alive: kept, expired or not
        for bad in ("", None, 5, "\ud800"):
            with pytest.raises(Exception, match=r"session|owner|surrogate"):
                store.acquire_session(bad, "me", lease_s=1)  # type: ignore[arg-type]
        store.close()


def test_a_version_1_store_file_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SqliteRunStore(path) as store:
        store.create_run("r1", {"h": 1}, session_id="s", owner="o", lease_s=1)
    raw = sqlite3.connect(path)
    raw.execute("DROP TABLE sessions")
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()
    with SqliteRunStore(path) as store:  # upgraded in place
        assert [r.run_id for r in store.runs("s")] == ["r1"]
        store.acquire_session("s", "me", lease_s=1)
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    raw.close()


def _start_worker(db: Path, backend: str) -> subprocess.Popen[str]:
    worker = subprocess.Popen(
        [sys.executable, WORKER, str(db), backend],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    line = worker.stdout.readline()
    assert line == "holding\n", worker.stderr.read() if worker.stderr else line
    return worker


def _finish_worker(worker: subprocess.Popen[str]) -> None:
    out, err = worker.communicate("\n", timeout=60)
    assert worker.returncode == 0, err[-3000:]
    assert out == "done\n"


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_two_processes_one_writer(tmp_path: Path, backend: str) -> None:
    """The writer is another process: refused at once, then waiting, and nothing lost."""
    db = tmp_path / "runs.db"
    worker = _start_worker(db, backend)
    try:
        second = Agent(
            model=MODEL,
            tools=[HOLD],
            stream_fn=FauxProvider([faux_response("answer of the second")]),
            store=SqliteRunStore(db),
            session_id="s",
        )
        # the live run is not taken for an interrupted one: it is the other writer's
        assert second.interrupted_run is None and second.state.pending_approvals == []
        before = _texts(second)  # the worker's run so far
        with pytest.raises(SessionBusyError) as info:
            anyio.run(second.prompt, "second", backend=backend)
        assert f":{worker.pid}:" in info.value.holder and info.value.session_id == "s"
        assert _texts(second) == before

        async def wait_for_the_worker() -> None:
            second.session_wait_s = None
            async with anyio.create_task_group() as tg:
                tg.start_soon(second.prompt, "second")
                await anyio.wait_all_tasks_blocked()
                await anyio.to_thread.run_sync(_finish_worker, worker)

        anyio.run(wait_for_the_worker, backend=backend)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert _texts(second) == [
        'user: "first"',
        'assistant: "holding on" [toolUse: hold()]',
        'toolResult h hold: "held"',
        'assistant: "answer from the worker"',
        'user: "second"',
        'assistant: "answer of the second"',
    ]


@pytest.mark.parametrize("backend", ["trio"])
def test_a_killed_writer_holds_nothing(tmp_path: Path, backend: str) -> None:
    """The writer died mid-run: its lease is taken over at once, and its unfinished run must be
    resumed before the session takes a new prompt."""
    db = tmp_path / "runs.db"
    worker = _start_worker(db, backend)
    worker.send_signal(signal.SIGKILL)
    worker.communicate(timeout=60)
    second = Agent(
        model=MODEL,
        tools=[HOLD],
        stream_fn=FauxProvider([faux_response("after the crash")]),
        store=SqliteRunStore(db),
        session_id="s",
    )
    assert second.interrupted_run is not None
    with pytest.raises(ValueError, match="interrupted"):
        anyio.run(second.prompt, "second", backend=backend)
    second.tools = [AgentTool("hold", "holds", {"type": "object"}, lambda *a: AgentToolResult())]
    anyio.run(second.resume, backend=backend)
    assert _texts(second)[-1] == 'assistant: "after the crash"'
