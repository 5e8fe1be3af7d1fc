"""Fork and diff on generated runs (approvals, a tool-call limit, parallel and sequential tool
calls, steering): a fork with no edit, at any step, takes the parent's steps and emits its
events exactly; a diff of a run with itself is empty; a diff of a run and a fork edited at a
step points at that step."""

from __future__ import annotations

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore_fsm import MemoryRunStore
from agentcore_fsm.devtools.diff import diff_runs
from agentcore_fsm.devtools.fork import Edit, ModelAnswer, ToolResult, fork_run
from agentcore_fsm.devtools.replay_compare import plain_event
from agentcore_fsm.persist.journal import derive_run
from tests.fork_runs import TOOLS, Plan, plain, plans, record, world_after


def _fork(plan: Plan, store: MemoryRunStore, at: int, edit: Edit | None = None) -> str:
    parent = store.load("parent")
    entries = parent.entries[:at]
    if edit is not None:
        entries = parent.entries[: at + 1]  # the edited step answers in the parent's place
    config, model = world_after(plan, entries)

    async def go() -> str:
        result = await fork_run(
            store, at, edit, run="parent", config=config, tools=TOOLS, stream_fn=model, store=store
        )
        return result.run_id

    return anyio.run(go, backend="asyncio")


def _events(store: MemoryRunStore, run_id: str) -> list[object]:
    stored = store.load(run_id)
    snapshot = {
        "format": stored.header["format"],
        "declaration": stored.header["declaration"],
        "declaration_hash": stored.header["declaration_hash"],
        "header": stored.header,
        "entries": stored.entries,
    }
    return [plain_event(e) for e in derive_run(snapshot, tools=TOOLS).events]


@settings(max_examples=12, deadline=None)
@given(plan=plans, data=st.data())
def test_a_fork_without_edit_reproduces_the_run(plan: Plan, data: st.DataObject) -> None:
    store = MemoryRunStore()
    record(plan, store)
    parent = store.load("parent")
    at = data.draw(st.integers(0, len(parent.entries) - 1), label="at")
    fork_id = _fork(plan, store, at)
    fork = store.load(fork_id)
    assert fork.header["fork"] == {"parent": "parent", "step": at, "edit": None}
    assert fork.end_reason == parent.end_reason
    assert plain(fork.entries) == plain(parent.entries)
    assert _events(store, fork_id) == _events(store, "parent")
    assert diff_runs((store, "parent"), (store, fork_id)).same


@settings(max_examples=12, deadline=None)
@given(plan=plans, data=st.data())
def test_a_diff_points_at_the_edited_step(plan: Plan, data: st.DataObject) -> None:
    store = MemoryRunStore()
    record(plan, store)
    parent = store.load("parent")
    itself = diff_runs((store, "parent"), (store, "parent"))
    assert itself.same and itself.first is None and itself.rows == []
    editable = [
        (i, e["input"])
        for i, e in enumerate(parent.entries)
        if e["input"] in ("tool_finished", "stream_done")
    ]
    at, kind = data.draw(st.sampled_from(editable), label="step")
    edit = ToolResult("edited") if kind == "tool_finished" else ModelAnswer("edited answer")
    fork_id = _fork(plan, store, at, edit)
    diff = diff_runs((store, "parent"), (store, fork_id))
    assert diff.first is not None
    assert (diff.first.step, diff.first.what) == (at, "input")
    assert diff.rows[0][0] == at
    # a fork of the fork, without an edit, after the edited step, is the fork again
    child = store.load(fork_id)
    later = data.draw(st.integers(at, len(child.entries) - 1), label="later")
    if later == at:
        return
    config, model = world_after(plan, child.entries[:later])

    async def again() -> str:
        result = await fork_run(
            store, later, run=fork_id, config=config, tools=TOOLS, stream_fn=model, store=store
        )
        return result.run_id

    grandchild = anyio.run(again, backend="asyncio")
    assert store.load(grandchild).header["fork"]["parent"] == fork_id
    assert diff_runs((store, fork_id), (store, grandchild)).same
