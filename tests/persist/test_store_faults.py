"""A run store that fails in the middle of a run (docs/survive.md#when-the-store-fails).

A journaled run whose store starts failing (a disk that is full, a file locked too long) or
whose lease another process took ends once, as data: its ``agent_end`` says ``"error"``, the
error's text names the store and the cause, and nothing is raised out of ``run_agent_loop``.
What the store holds is then a valid prefix of the run: once the store works again (or the
lease is free again), ``resume_run`` continues it to its end, with no tool run twice. Both
backends, a ``SqliteRunStore`` file.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.devtools.testing import EventRecorder, check_resumed_run, check_run
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.store import RunStoreError, SqliteRunStore
from agentcore_fsm.runtime.resume import load_run_state, resume_run

pytestmark = pytest.mark.anyio

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
RESPONSES = [
    faux_response("first", tool_calls=[faux_tool_call("write", {"n": 1}, id="c1")]),
    faux_response("second", tool_calls=[faux_tool_call("write", {"n": 2}, id="c2")]),
    faux_response("all done"),
]


class Tools:
    """A ``write`` tool (not idempotent) that counts its executions; ``during`` (if set) runs
    inside the first call, before it returns."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.during: Any = None

    def tools(self) -> list[AgentTool]:
        async def write(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
            self.runs[call_id] += 1
            if self.during is not None and call_id == "c1":
                self.during()
            await anyio.lowlevel.checkpoint()
            return AgentToolResult(content=[TextContent(text=f"wrote {args['n']}")])

        return [AgentTool("write", "writes", SCHEMA, write)]


class FlakyStore(SqliteRunStore):
    """A SQLite store whose appends fail while ``failing`` is set (a disk that filled up)."""

    failing = False

    def append_many(self, run_id: str, seq: int, entries: Any, **kwargs: Any) -> None:
        if self.failing:
            raise RunStoreError(
                f"run {run_id!r} in the run store {self.path!r} cannot take entry {seq}: "
                f"database or disk is full"
            )
        super().append_many(run_id, seq, entries, **kwargs)


async def _run(store: SqliteRunStore, tools: Tools, recorder: EventRecorder) -> list[Any]:
    return await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(tools=tools.tools()),
        AgentLoopConfig(model=MODEL),
        recorder,
        stream_fn=FauxProvider(RESPONSES),
        store=store,
        run_id="r",
    )


async def _resume_to_the_end(path: Path, tools: Tools, held_by: str | None = None) -> None:
    """Resume run "r" from a fresh store object on ``path``: it completes, its journaled steps'
    events followed by the resumed ones are one well-formed run, and no call ran twice.
    ``held_by``: the owner the store still names as the lease's holder (None: nobody)."""
    with SqliteRunStore(path) as store:
        stored = store.load("r")
        assert stored.status == "running" and stored.owner == held_by  # resumable at once
        _, steps = load_run_state(store, "r", AgentLoopConfig(model=MODEL), tools=tools.tools())
        answered = sum(e["input"] in ("stream_done", "stream_error") for e in stored.entries)
        history = [e for s in steps for e in s.events]
        resumed = EventRecorder()
        messages = await resume_run(
            "r",
            store,
            AgentLoopConfig(model=MODEL),
            resumed,
            tools=tools.tools(),
            stream_fn=FauxProvider(RESPONSES[answered:]),
        )
        check_resumed_run(history, resumed.events, messages)
        done = store.load("r")
        assert done.status == "finished" and done.end_reason == "completed"
        assert done.owner is None  # the lease given back
        assert done.entries[: len(stored.entries)] == stored.entries  # nothing rewritten
    assert [m.role for m in messages][-1] == "assistant" and messages[-1].text() == "all done"
    assert set(tools.runs.values()) == {1}, tools.runs  # every call ran once, across both


async def test_a_store_that_starts_failing_ends_the_run_once_and_the_run_resumes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    tools = Tools()
    recorder = EventRecorder()
    with FlakyStore(path) as store:

        def disk_full() -> None:
            store.failing = True

        tools.during = disk_full  # the store fails while the first call runs
        messages = await _run(store, tools, recorder)  # no raise: the failure is the run's
        summary = check_run(recorder.events, messages)
        assert summary.reason == "error"
        assert [e.type for e in recorder.events].count("agent_end") == 1
        error = messages[-1].error_message or ""
        assert str(path) in error, error  # names the store ...
        assert "database or disk is full" in error  # ... and the cause
        assert tools.runs == {"c1": 1}  # nothing started after the failure
        store.failing = False  # the disk has room again
    await _resume_to_the_end(path, tools)


async def test_a_run_that_lost_its_lease_ends_once_and_is_resumed_by_the_new_owner(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    tools = Tools()
    recorder = EventRecorder()
    with SqliteRunStore(path) as store:

        def taken_over() -> None:
            # another host's process takes the run over (its lease has already expired, so a
            # later resume may take it in turn)
            owner = store.load("r").owner
            assert owner is not None
            store.release("r", owner)
            store.acquire("r", "elsewhere:1:newowner", lease_s=-1.0)

        tools.during = taken_over
        messages = await _run(store, tools, recorder)
        summary = check_run(recorder.events, messages)
        assert summary.reason == "error"
        error = messages[-1].error_message or ""
        assert str(path) in error and "no longer holds its lease" in error, error
        assert store.load("r").owner == "elsewhere:1:newowner"  # untouched by the loser
    with SqliteRunStore(path) as store:
        # the new owner's lease expired: the run is resumed from what was written
        store.acquire("r", "elsewhere:1:newowner", lease_s=-1.0)
        store.release("r", "elsewhere:1:newowner")
    await _resume_to_the_end(path, tools)


class DownStore(FlakyStore):
    """A store that refuses every write while ``failing``: the appends, and giving the run's
    lease back too (the database is locked, the disk is gone)."""

    def release(self, run_id: str, owner: str) -> None:
        if self.failing:
            raise RunStoreError(f"run {run_id!r} in the run store {self.path!r}: disk I/O error")
        super().release(run_id, owner)


async def test_a_run_whose_lease_could_not_be_given_back_is_resumed_in_the_same_process(
    tmp_path: Path,
) -> None:
    """The run ended (as data) while the store could not even take its lease back: the lease
    names a live process — this one — but its run is over here, so once the store works again
    another runner of this process (a fresh store object, ``resume_run``) takes it over."""
    path = tmp_path / "runs.db"
    tools = Tools()
    recorder = EventRecorder()
    with DownStore(path) as store:

        def store_down() -> None:
            store.failing = True

        tools.during = store_down
        messages = await _run(store, tools, recorder)
        assert check_run(recorder.events, messages).reason == "error"
        held = store.load("r")
        assert held.status == "running" and held.owner is not None  # not given back
        store.failing = False
    # another runner of this process (a fresh store object) resumes it, lease and all
    await _resume_to_the_end(path, tools, held_by=held.owner)
