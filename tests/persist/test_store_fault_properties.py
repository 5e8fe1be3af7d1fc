"""Store faults at every call (hypothesis): whichever call of the run store fails — creating the
run, appending a group of entries, finishing, releasing — and however (it raises, it returns
garbage, the run's lease is taken by another process), the run ends once: it either completes,
or ends as data with ``agent_end(reason="error")`` whose text names the journal, or (when the
run cannot even be created) raises the store's error before any event. Nothing is half-written:
what the store holds is a prefix of the run that ``resume_run`` completes once the store works
again, and the non-idempotent tool never runs twice across both processes' worth of work.
Both backends."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    run_agent_loop,
)
from agentcore_fsm.devtools.testing import EventRecorder, check_resumed_run, check_run
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.store import MemoryRunStore, RunStoreError
from agentcore_fsm.runtime.resume import load_run_state, resume_run

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
RESPONSES = [
    faux_response("first", tool_calls=[faux_tool_call("write", {"n": 1}, id="c1")]),
    faux_response(
        "second",
        tool_calls=[
            faux_tool_call("write", {"n": 2}, id="c2"),
            faux_tool_call("write", {"n": 3}, id="c3"),
        ],
    ),
    faux_response("all done"),
]
WRITES = ("create_run", "append_many", "finish", "release")
OTHER = "elsewhere.example:1:other"  # an owner on another host


class FaultyStore(MemoryRunStore):
    """A memory store whose ``at``-th write call (counting create_run, append_many, finish and
    release) goes wrong as ``kind`` says; every other call works."""

    def __init__(self, at: int, kind: str) -> None:
        super().__init__()
        self.at, self.kind, self.calls, self.faulted = at, kind, 0, False

    def _fault(self, run_id: str) -> bool:
        """True when this call must return garbage instead of doing its work."""
        number, self.calls = self.calls, self.calls + 1
        if number != self.at:
            return False
        self.faulted = True
        if self.kind == "raise":
            raise RunStoreError(f"run {run_id!r} in the run store: database or disk is full")
        if self.kind == "lease" and run_id in self._runs:
            run = self._runs[run_id]
            if run.status == "running":
                run.owner = OTHER  # another process took the run over
                run.lease_until = float("inf")
            return False
        return self.kind == "garbage"

    def create_run(self, run_id: str, *args: Any, **kwargs: Any) -> Any:
        if self._fault(run_id):
            return "garbage"
        return super().create_run(run_id, *args, **kwargs)

    def append_many(self, run_id: str, *args: Any, **kwargs: Any) -> Any:
        if self._fault(run_id):
            return {"nonsense": True}  # and writes nothing
        return super().append_many(run_id, *args, **kwargs)

    def finish(self, run_id: str, *args: Any, **kwargs: Any) -> Any:
        if self._fault(run_id):
            return 42
        return super().finish(run_id, *args, **kwargs)

    def release(self, run_id: str, *args: Any, **kwargs: Any) -> Any:
        if self._fault(run_id):
            return object()
        return super().release(run_id, *args, **kwargs)

    def heal(self, run_id: str) -> None:
        """The store works again, and the processes that held the run are gone (a failed
        release leaves this process's lease behind; the other process let the run go)."""
        self.at = -1
        run = self._runs.get(run_id)
        if run is not None:
            run.owner = None
            run.lease_until = None


def _tools(runs: Counter[str]) -> list[AgentTool]:
    async def write(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        runs[call_id] += 1
        await anyio.lowlevel.checkpoint()
        return AgentToolResult(content=[TextContent(text=f"wrote {args['n']}")])

    return [AgentTool("write", "writes", {"type": "object"}, write)]


async def _scenario(at: int, kind: str) -> None:
    store = FaultyStore(at, kind)
    runs: Counter[str] = Counter()
    recorder = EventRecorder()
    try:
        messages = await run_agent_loop(
            ["go"],
            AgentContext(tools=_tools(runs)),
            AgentLoopConfig(model=MODEL),
            recorder,
            stream_fn=FauxProvider(RESPONSES),
            store=store,
            run_id="r",
        )
    except RunStoreError:
        # only when the run could not even be created: nothing ran, nothing was emitted
        assert at == 0 and kind in ("raise", "garbage"), (at, kind)
        assert recorder.events == [] and not runs
        return
    summary = check_run(recorder.events, messages)
    assert [e.type for e in recorder.events].count("agent_end") == 1
    if summary.reason == "error":
        assert store.faulted
        assert "journal" in (messages[-1].error_message or ""), messages[-1].error_message
    else:
        assert summary.reason == "completed", summary.reason
    assert all(n == 1 for n in runs.values()), runs
    if "r" not in {info.run_id for info in store.runs()}:
        return  # the run was never created (garbage from create_run): nothing to resume
    stored = store.load("r")
    if stored.status == "finished":
        return
    store.heal("r")
    _, steps = load_run_state(store, "r", AgentLoopConfig(model=MODEL), tools=_tools(runs))
    history = [e for step in steps for e in step.events]
    answered = sum(e["input"] in ("stream_done", "stream_error") for e in stored.entries)
    resumed = EventRecorder()
    more = await resume_run(
        "r",
        store,
        AgentLoopConfig(model=MODEL),
        resumed,
        tools=_tools(runs),
        stream_fn=FauxProvider(RESPONSES[answered:]),
    )
    resumed_summary = check_resumed_run(history, resumed.events, more)
    assert resumed_summary.reason == "completed", resumed_summary.reason
    done = store.load("r")
    assert done.status == "finished"
    assert done.entries[: len(stored.entries)] == stored.entries  # nothing rewritten
    assert all(n == 1 for n in runs.values()), runs  # no call ran twice, across both


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(at=st.integers(0, 9), kind=st.sampled_from(["raise", "garbage", "lease"]))
def test_a_store_fault_at_any_call_ends_the_run_once_and_leaves_a_resumable_prefix(
    backend: str, at: int, kind: str
) -> None:
    anyio.run(_scenario, at, kind, backend=backend)
