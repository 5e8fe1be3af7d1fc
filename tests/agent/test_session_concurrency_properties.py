"""Concurrent writers of one stored session (hypothesis; docs/survive.md#one-writer-per-session).

Two or three ``Agent`` handles on one store and session id each do a list of operations —
prompt, continue (a follow-up), a prompt whose answer calls a tool that takes a while — with
``session_wait_s`` 0, a small wait or None, while the schedule (tests/session_schedules.py)
moves their model calls and tool calls in a generated order, aborts runs and reloads handles.
For every example: each operation either ran a valid run, or was refused with
``SessionBusyError`` (at once when it asked not to wait), or was a ``continue_`` with no
transcript (``ValueError``); afterwards the session loaded from the store is exactly the
accepted runs' messages in the order they ran — nothing lost, nothing half-written — a valid
transcript, every run finished, and no lease is left held. Both stores, both backends.

Two processes: tests/agent/test_session_writer.py::test_two_processes_one_writer already has a
writer in another process refusing, then making wait, an agent of this one; the store's lease
is the same row whichever process holds it, so the schedules here add nothing a second process
would change.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from session_schedules import (
    ACTIONS,
    OPS,
    SESSION,
    Schedule,
    Writer,
    check_transcript,
    probe_owner,
)

from agentcore_fsm import Agent, MemoryRunStore, SqliteRunStore
from agentcore_fsm.devtools.testing import check_run
from agentcore_fsm.persist.store import RunStore

WAITS = st.sampled_from([0.0, 0.02, None])
WRITER = st.tuples(WAITS, st.lists(st.sampled_from(OPS), min_size=1, max_size=3))
ACTION = st.tuples(st.sampled_from(ACTIONS), st.integers(0, 2))


async def _scenario(
    store: RunStore, writers: list[tuple[float | None, list[str]]], actions: list[tuple[str, int]]
) -> None:
    handles = [Writer(f"w{i}", store, wait, ops) for i, (wait, ops) in enumerate(writers)]
    schedule = Schedule(handles)
    await schedule.play(actions)

    ran = sorted((o for o in schedule.outcomes if o.kind == "ran"), key=lambda o: o.order)
    for outcome in schedule.outcomes:
        assert outcome.kind in ("ran", "busy", "empty"), outcome
        if outcome.kind == "busy":
            assert outcome.order == -1  # refused before the run started
            assert outcome.error is not None and "has another writer" in str(outcome.error)
            if outcome.wait_s == 0:
                assert outcome.ended_tick == outcome.started_tick, "not refused at once"
        if outcome.kind == "ran":
            summary = check_run(outcome.events, outcome.messages)
            assert summary.reason in ("completed", "aborted"), summary.reason
    assert [o.order for o in ran] == list(range(len(ran)))

    # the session as the store holds it: the accepted runs' messages, in the order they ran
    expected = [str(m) for o in ran for m in o.messages]
    infos = store.runs(SESSION)
    assert len(infos) == len(ran), (len(infos), len(ran))
    for info in infos:
        stored = store.load(info.run_id)
        assert stored.status == "finished" and stored.owner is None, stored
    fresh = Agent(tools=[handles[0].tool()], store=store, session_id=SESSION)
    assert fresh.interrupted_run is None
    assert [str(m) for m in fresh.messages] == expected
    check_transcript(list(fresh.messages))
    # the last writer's own transcript is the session's
    if ran:
        last = next(h for h in handles if h.name == ran[-1].writer)
        assert [str(m) for m in last.agent.messages] == expected
    # no lease left held: a live owner of this host that no agent uses takes the session
    probe = probe_owner()
    store.acquire_session(SESSION, probe, lease_s=1.0)
    store.release_session(SESSION, probe)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    writers=st.lists(WRITER, min_size=2, max_size=3),
    actions=st.lists(ACTION, min_size=2, max_size=14),
)
@example(  # a refused continue_ keeps its follow-up queued
    writers=[(None, ["prompt", "tool"]), (0.0, ["continue"])],
    actions=[("start", 0), ("step", 0), ("reload", 1), ("start", 0), ("start", 1)],
)
@example(  # continue_ decides from the session as stored, not a superseded live prefix
    writers=[(None, ["tool"]), (None, ["continue"])],
    actions=[("start", 0), ("step", 0), ("step", 0), ("reload", 1), ("start", 1)],
)
def test_concurrent_writers_of_one_session(
    backend: str,
    kind: str,
    writers: list[tuple[float | None, list[str]]],
    actions: list[tuple[str, int]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store: RunStore = (
            MemoryRunStore() if kind == "memory" else SqliteRunStore(Path(tmp) / "runs.db")
        )
        try:
            anyio.run(_scenario, store, writers, actions, backend=backend)
        finally:
            store.close()
