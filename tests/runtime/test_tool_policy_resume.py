"""A journaled run with retried and timed-out tool calls, cut after each of its journal
entries (as a crash would leave it) and resumed
(docs/policies-tools.md#declared-journaled-resumed): the resumed machine knows each call's
attempt, a call that was backing off is tried again, a call whose attempt was running runs
again only when its tool is idempotent (a non-idempotent tool is never run twice, even when
its retry policy opts in), and every call is answered once."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from helpers import MODEL, make_tool, text_of, text_result

from agentcore_fsm import AgentContext, AgentLoopConfig, UserMessage, run_agent_loop
from agentcore_fsm.core.retry import RetryPolicy
from agentcore_fsm.core.tool_policy import ToolPolicy
from agentcore_fsm.devtools.testing import EventRecorder, check_resumed_run, check_run
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.store import MemoryRunStore
from agentcore_fsm.runtime.resume import INTERRUPTED_TEXT, load_run_state, resume_run

pytestmark = pytest.mark.anyio

RETRY = RetryPolicy(max_attempts=3, backoff_base_s=0.001, backoff_max_s=0.001)
OPTED_IN = RetryPolicy(
    max_attempts=3, backoff_base_s=0.001, backoff_max_s=0.001, retry_non_idempotent=True
)
RESPONSES = [
    faux_response(
        tool_calls=[
            faux_tool_call("write", {"n": 1}, id="c1"),
            faux_tool_call("read", {"n": 2}, id="c2"),
            faux_tool_call("slow", {"n": 3}, id="c3"),
        ]
    ),
    faux_response("all done"),
]
CONFIG = AgentLoopConfig(model=MODEL, tool_policy=ToolPolicy(max_parallel_calls=2))


class Tools:
    """``write`` (not idempotent, its retry opted in) and ``read`` (idempotent) fail their
    first ``failures`` executions per call; ``slow`` (idempotent, a timeout) hangs on its
    first. Every execution is counted."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.runs: Counter[str] = Counter()

    def tools(self) -> list[Any]:
        async def flaky(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
            self.runs[call_id] += 1
            await anyio.lowlevel.checkpoint()
            if self.runs[call_id] <= self.failures:
                raise ConnectionError(f"refused {self.runs[call_id]}")
            return text_result(f"{call_id} done")

        async def slow(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
            self.runs[call_id] += 1
            if self.runs[call_id] <= self.failures:
                await anyio.sleep_forever()
            return text_result(f"{call_id} done")

        return [
            make_tool("write", flaky, retry=OPTED_IN),
            make_tool("read", flaky, idempotent=True, retry=RETRY),
            make_tool("slow", slow, idempotent=True, retry=RETRY, timeout_s=0.01),
        ]


async def test_a_run_cut_after_any_entry_resumes_without_running_a_write_twice() -> None:
    store = MemoryRunStore()
    original = Tools(failures=1)
    recorder = EventRecorder()
    with anyio.fail_after(10):
        messages = await run_agent_loop(
            [UserMessage(content="go")],
            AgentContext(tools=original.tools()),
            CONFIG,
            recorder,
            stream_fn=FauxProvider(RESPONSES),
            store=store,
            run_id="orig",
        )
    check_run(recorder.events, messages)
    assert original.runs == {"c1": 2, "c2": 2, "c3": 2}
    stored = store.load("orig")
    kinds = [e["input"] for e in stored.entries]
    assert kinds.count("tool_attempt_failed") == 2 and kinds.count("tool_timed_out") == 1
    assert kinds.count("retry_due") == 3

    seen: set[tuple[str, str]] = set()
    for k in range(len(stored.entries)):
        where = f"cut after {k} entries"
        cut = MemoryRunStore()
        owner = "elsewhere:1:dead"
        cut.create_run("r", stored.header, session_id="s", owner=owner, lease_s=-1.0)
        for seq, entry in enumerate(stored.entries[:k]):
            cut.append("r", seq, entry, owner=owner, lease_s=-1.0)
        tools = Tools(failures=0)
        before, steps = load_run_state(cut, "r", CONFIG, tools=tools.tools())
        states = {c.call.id: c.state for c in before.tool_calls}
        seen.update(states.items())
        for c in before.tool_calls:  # the attempt is rebuilt from the journaled retry_due
            due = sum(
                1 for e in stored.entries[:k] if e["input"] == "retry_due" and e["index"] == c.index
            )
            assert c.vars.attempt == 1 + due, where
        answered = sum(e["input"] in ("stream_done", "stream_error") for e in stored.entries[:k])
        resumed = EventRecorder()
        with anyio.fail_after(10):
            out = await resume_run(
                "r",
                cut,
                CONFIG,
                resumed,
                tools=tools.tools(),
                stream_fn=FauxProvider(RESPONSES[answered:]),
            )
        summary = check_resumed_run([e for s in steps for e in s.events], resumed.events, out)
        assert summary.reason == "completed", where
        results = {m.tool_call_id: m for m in out if m.role == "toolResult"}
        assert sorted(results) == ["c1", "c2", "c3"], where
        for call_id, runs in tools.runs.items():
            assert runs == 1, (where, call_id)
        if states.get("c1") == "running":  # a write in flight: never run again
            assert "c1" not in tools.runs, where
            assert text_of(results["c1"]) == INTERRUPTED_TEXT.format(name="write"), where
        if states.get("c1") == "backing_off":  # the retry was decided: it runs once
            assert tools.runs["c1"] == 1, where
        if states.get("c2") in ("running", "backing_off"):  # idempotent: runs again
            assert tools.runs["c2"] == 1, where
    # the cuts met every case above
    for case in ("running", "backing_off"):
        assert {("c1", case), ("c2", case), ("c3", case)} <= seen, case
