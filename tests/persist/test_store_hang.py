"""A store that hangs (docs/survive.md#when-the-store-hangs).

The real hang of a ``SqliteRunStore`` is a write lock another connection (or process) holds on
the file: each write waits up to the store's ``busy_timeout_s``, then fails with a
``RunStoreError`` naming the store and the lock. Held from a generated write of an agent's run
on (hypothesis, both backends): the prompt either raises that error before its run started
(nothing written), or the run ends once, as data — completed, or ``"error"`` naming the store
and the lock — and once the lock is gone the agent resumes the run (or prompts again) to its
end: the session is then a valid transcript, every run finished, no lease held, and the tool
ran once.

A user's own store whose call blocks, journaled with ``StoreJournal(threaded=True)``: its calls
wait at most ``call_timeout_s`` (then a ``RunStoreError`` ends the run as data), an abort of the
run ends the wait at once, and the call that completes after the run ended leaves a valid,
resumable record (the journal makes no other call until it has answered, then gives the run's
lease back).
"""

from __future__ import annotations

import math
import os
import sqlite3
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from session_schedules import check_transcript, probe_owner

from agentcore_fsm import (
    Agent,
    AgentTool,
    AgentToolResult,
    Model,
    SqliteRunStore,
    TextContent,
)
from agentcore_fsm.core.abort import AbortController
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, LlmContext, StreamOptions
from agentcore_fsm.core.messages import UserMessage
from agentcore_fsm.devtools.testing import EventRecorder, check_resumed_run, check_run
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.journal import JournaledLoopMachine
from agentcore_fsm.persist.run_journal import StoreJournal
from agentcore_fsm.persist.store import MemoryRunStore, RunStore, RunStoreError, SessionBusyError
from agentcore_fsm.runtime.driver import run_machine
from agentcore_fsm.runtime.resume import load_run_state, resume_run

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
WRITES = (
    "acquire_session",
    "release_session",
    "create_run",
    "append_many",
    "finish",
    "release",
    "acquire",
)


class LockedStore(SqliteRunStore):
    """A SQLite store whose ``at``-th write call (counting every write) first finds the file's
    write lock held by another connection, which keeps it until :meth:`unlock`."""

    def __init__(self, path: Path, at: int) -> None:
        super().__init__(path, busy_timeout_s=0.02)
        self.at, self.calls = at, 0
        self.other: sqlite3.Connection | None = None

    def _count(self) -> None:
        number, self.calls = self.calls, self.calls + 1
        if number == self.at:
            other = sqlite3.connect(self.path, timeout=0, isolation_level=None)
            other.execute("BEGIN IMMEDIATE")  # another connection takes the write lock
            self.other = other

    def unlock(self) -> None:
        self.at = -1  # from now on every write works
        other, self.other = self.other, None
        if other is not None:
            other.execute("ROLLBACK")
            other.close()

    def acquire_session(self, *args: Any, **kwargs: Any) -> None:
        self._count()
        super().acquire_session(*args, **kwargs)

    def release_session(self, *args: Any, **kwargs: Any) -> None:
        self._count()
        super().release_session(*args, **kwargs)

    def create_run(self, *args: Any, **kwargs: Any) -> None:
        self._count()
        super().create_run(*args, **kwargs)

    def append_many(self, *args: Any, **kwargs: Any) -> None:
        self._count()
        super().append_many(*args, **kwargs)

    def finish(self, *args: Any, **kwargs: Any) -> None:
        self._count()
        super().finish(*args, **kwargs)

    def release(self, *args: Any, **kwargs: Any) -> None:
        self._count()
        super().release(*args, **kwargs)

    def acquire(self, *args: Any, **kwargs: Any) -> None:
        self._count()
        super().acquire(*args, **kwargs)


def _write_tool(runs: Counter[str]) -> AgentTool:
    async def write(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        runs[call_id] += 1
        await anyio.lowlevel.checkpoint()
        return AgentToolResult(content=[TextContent(text=f"wrote {call_id}")])

    return AgentTool("write", "writes (not idempotent)", {"type": "object"}, write)


def _model(model: Model, context: LlmContext, options: StreamOptions) -> Any:
    """Calls ``write`` once, then answers."""
    last = context.messages[-1]
    if str(last) == 'user: "again"':
        answer = faux_response("nothing more")
    elif getattr(last, "role", None) == "toolResult":
        answer = faux_response("all written")
    else:
        answer = faux_response("writing", tool_calls=[faux_tool_call("write", {}, id="c1")])
    return FauxProvider([answer])(model, context, options)


def _agent(store: RunStore, runs: Counter[str]) -> Agent:
    return Agent(
        model=MODEL, tools=[_write_tool(runs)], stream_fn=_model, store=store, session_id="s"
    )


async def _locked_scenario(path: Path, at: int) -> None:
    runs: Counter[str] = Counter()
    store = LockedStore(path, at)
    agent = _agent(store, runs)
    events: list[Any] = []
    agent.subscribe(lambda event, signal: events.append(event))
    try:
        try:
            messages = await agent.prompt("go")
        except RunStoreError as exc:
            # the session's lease or the run's creation: refused before the run started
            assert store.other is not None and at <= 1, (at, exc)
            assert str(path) in str(exc) and "locked" in str(exc), exc
            assert events == [] and not runs and not agent.is_busy
            assert store.runs("s") == []
        else:
            summary = check_run(events, messages)
            assert [e.type for e in events].count("agent_end") == 1
            if summary.reason == "error":
                assert store.other is not None
                error = messages[-1].error_message or ""
                assert str(path) in error and "locked" in error, error
            else:
                assert summary.reason == "completed", summary.reason
    finally:
        store.unlock()
    # the lock is gone: the run is resumed (or the prompt made again) to its end
    if agent.interrupted_run is not None:
        await agent.resume()
    elif not store.runs("s"):
        await agent.prompt("go")
    probe = probe_owner()
    last = 'assistant: "all written"'
    try:
        store.acquire_session("s", probe, lease_s=1.0)
    except SessionBusyError as exc:
        # the store could not take the session's lease back when the run ended: the agent
        # keeps it until its next run ends
        assert f":{os.getpid()}:" in exc.holder
        await agent.prompt("again")
        last = 'assistant: "nothing more"'
        store.acquire_session("s", probe, lease_s=1.0)
    store.release_session("s", probe)  # no lease left held
    for info in store.runs("s"):
        stored = store.load(info.run_id)
        assert stored.status == "finished" and stored.owner is None
        assert stored.end_reason == "completed", stored.end_reason
    fresh = Agent(tools=[_write_tool(runs)], store=store, session_id="s")
    assert fresh.interrupted_run is None
    texts = [str(m) for m in fresh.messages]
    assert texts[0] == 'user: "go"' and texts[-1] == last, texts
    assert texts.count('assistant: "all written"') == 1, texts
    assert [str(m) for m in agent.messages] == texts
    check_transcript(list(fresh.messages))
    assert runs == {"c1": 1}, runs  # the tool ran once, across the run and its resume
    store.close()


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(at=st.integers(0, 7))
def test_a_lock_held_from_any_write_on_ends_the_run_once_and_it_resumes(
    backend: str, at: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(_locked_scenario, Path(tmp) / "runs.db", at, backend=backend)


def test_the_busy_timeout_is_checked_and_bounds_a_locked_write(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    for bad, kind in (
        (math.nan, ValueError),
        (math.inf, ValueError),
        (-1, ValueError),
        ("1", TypeError),
        (None, TypeError),
        (True, TypeError),
    ):
        with pytest.raises(kind, match="SqliteRunStore: busy_timeout_s must be"):
            SqliteRunStore(path, busy_timeout_s=bad)
    assert SqliteRunStore(path).busy_timeout_s == 5.0
    with SqliteRunStore(path, busy_timeout_s=0.05) as store:
        assert store.busy_timeout_s == 0.05
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(RunStoreError) as info:
                store.create_run("r", {}, session_id=None, owner="o", lease_s=1)
            text = str(info.value)
            assert str(path) in text and "locked by another connection" in text
            assert "0.05 s" in text, text
            with pytest.raises(RunStoreError, match=r"cannot lease session 's'.*locked"):
                store.acquire_session("s", "o", lease_s=1)
            assert store.runs() == []  # reading is not blocked (WAL)
        finally:
            other.execute("ROLLBACK")
            other.close()
        store.create_run("r", {}, session_id=None, owner="o", lease_s=1)  # free again


class FirstAppendFails(MemoryRunStore):
    """A memory store whose next ``append_many`` fails (a full disk) when ``failing`` is set."""

    failing = False

    def append_many(self, run_id: str, *args: Any, **kwargs: Any) -> None:
        if self.failing:
            self.failing = False
            raise RunStoreError(f"run {run_id!r} in the in-memory store: disk full")
        super().append_many(run_id, *args, **kwargs)


@pytest.mark.anyio
async def test_a_run_created_but_never_started_is_resumed_without_its_prompt_twice() -> None:
    """Regression: the session's last run was created and nothing of it journaled (its first
    write failed, or its process died): an agent that loaded the session held the run's prompt
    in its transcript, and resuming the run delivered it again."""
    store = FirstAppendFails()
    runs: Counter[str] = Counter()
    first = _agent(store, runs)
    await first.prompt("go")
    before = [str(m) for m in first.messages]
    store.failing = True
    await first.prompt("again")  # ends as data: the journal failed
    assert first.interrupted_run is not None
    assert [e.entries for e in store.runs("s")][-1] == 0  # nothing of it journaled
    later = _agent(store, runs)
    assert later.interrupted_run == first.interrupted_run
    assert [str(m) for m in later.messages] == before
    await later.resume()
    texts = [str(m) for m in later.messages]
    assert texts == [*before, 'user: "again"', 'assistant: "nothing more"']
    assert [str(m) for m in _agent(store, runs).messages] == texts


class BlockingStore(MemoryRunStore):
    """A user's own store whose ``block_at``-th ``append_many`` hangs until ``go`` is set
    (bounded, so that a broken test cannot hang the suite)."""

    def __init__(self, block_at: int) -> None:
        super().__init__()
        self.block_at, self.calls = block_at, 0
        self.entered, self.go, self.released = threading.Event(), threading.Event(), []

    def append_many(self, run_id: str, *args: Any, **kwargs: Any) -> None:
        number, self.calls = self.calls, self.calls + 1
        if number == self.block_at:
            self.entered.set()
            assert self.go.wait(10)
        super().append_many(run_id, *args, **kwargs)

    def release(self, run_id: str, owner: str) -> None:
        super().release(run_id, owner)
        self.released.append(threading.current_thread().name)


@pytest.mark.anyio
@pytest.mark.parametrize("block_at", [0, 1, 2])
@pytest.mark.parametrize("how", ["timeout", "abort"])
async def test_a_threaded_journal_gives_up_a_hanging_call(block_at: int, how: str) -> None:
    store = BlockingStore(block_at)
    runs: Counter[str] = Counter()
    controller = AbortController()
    config = AgentLoopConfig(model=MODEL)
    journal = StoreJournal(
        store,
        "r",
        "s",
        threaded=True,
        call_timeout_s=0.05 if how == "timeout" else None,
        signal=controller.signal,
    )
    machine = JournaledLoopMachine(
        [UserMessage(content="go")], AgentContext(tools=[_write_tool(runs)]), config
    )
    recorder = EventRecorder()

    async def abort_once_it_hangs() -> None:
        await anyio.to_thread.run_sync(store.entered.wait)
        controller.abort()

    async with anyio.create_task_group() as tg:
        if how == "abort":
            tg.start_soon(abort_once_it_hangs)
        messages = await run_machine(
            machine, stream_fn=_model, emit=recorder, signal=controller.signal, journal=journal
        )
        tg.cancel_scope.cancel()
    summary = check_run(recorder.events, messages)
    assert store.entered.is_set()
    closing = store.calls == block_at + 1 and summary.reason in ("completed", "aborted")
    if not closing:  # the hanging write ended the run, as data, naming it
        assert summary.reason == "error", summary.reason
        error = messages[-1].error_message or ""
        assert "given up" in error and "append_many" in error, error
        why = "did not answer within 0.05 s" if how == "timeout" else "aborted while it waited"
        assert why in error, error
    before = store.load("r")
    assert before.owner is not None  # the call hangs: nothing else was written
    store.go.set()  # the store answers at last: the late write lands, then the lease is freed
    await anyio.to_thread.run_sync(store.entered.wait)
    for _ in range(1000):
        if store.load("r").owner is None:
            break
        await anyio.to_thread.run_sync(threading.Event().wait, 0.005)
    stored = store.load("r")
    assert stored.owner is None and store.released, stored
    assert stored.entries[: len(before.entries)] == before.entries
    if stored.status == "running":  # a valid prefix: resumed to its end
        resumed = EventRecorder()
        _, steps = load_run_state(store, "r", config, tools=[_write_tool(runs)])
        more = await resume_run(
            "r", store, config, resumed, tools=[_write_tool(runs)], stream_fn=_model
        )
        check_resumed_run([e for s in steps for e in s.events], resumed.events, more)
    done = store.load("r")
    assert done.status == "finished", done
    final = load_run_state(store, "r", config, tools=[_write_tool(runs)])[0].context.messages
    check_transcript(list(final))
    assert str(final[-1]) == 'assistant: "all written"', final
    # never twice; not at all when the write before it was given up (a late write then makes
    # it look started: the resumed run answers it as interrupted, never runs it again)
    assert set(runs.values()) <= {1}, runs
    with pytest.raises(ValueError, match="call_timeout_s"):
        StoreJournal(store, "x", threaded=True, call_timeout_s=-1)
