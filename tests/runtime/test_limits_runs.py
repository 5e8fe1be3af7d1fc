"""Usage limits through the async driver, on trio and asyncio (docs/policies.md#usage-limits):
the end of a run at each kind of limit, the deadline that aborts what is in flight, the usage
tools and hooks read, an Agent's session and prompt budgets, and a journaled run resumed after a
crash that does not go over its limit."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from helpers import BlockingStream, run, text_of, user
from limit_helpers import PRICED, CountingTool, Reply, ScriptedModel, assert_within

from agentcore_fsm import (
    AbortController,
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    RunContext,
    TextContent,
    UsageLimits,
    run_agent_loop,
    tool,
)
from agentcore_fsm.core.limits import NOT_RUN_TEXT, RunUsage
from agentcore_fsm.core.run_context import current_run
from agentcore_fsm.devtools.testing import EventRecorder, check_resumed_run, check_run
from agentcore_fsm.persist.store import MemoryRunStore
from agentcore_fsm.runtime.limits import DEADLINE_REASON
from agentcore_fsm.runtime.resume import load_run_state, resume_run

pytestmark = pytest.mark.anyio


def config(limits: UsageLimits | None, **kwargs: Any) -> AgentLoopConfig:
    return AgentLoopConfig(model=PRICED, limits=limits, **kwargs)


@pytest.mark.parametrize(
    ("limits", "name"),
    [
        (UsageLimits(requests=3), "requests"),
        (UsageLimits(turns=2), "turns"),
        (UsageLimits(tool_calls=5), "tool_calls"),
        (UsageLimits(input_tokens=250), "input_tokens"),
        (UsageLimits(output_tokens=45), "output_tokens"),
        (UsageLimits(total_tokens=300), "total_tokens"),
        (UsageLimits(cost_usd=0.0004), "cost_usd"),
    ],
)
async def test_a_run_ends_at_its_limit_with_every_call_answered(
    limits: UsageLimits, name: str
) -> None:
    tool_ = CountingTool()
    model = ScriptedModel([Reply(calls=2, input_tokens=100, output_tokens=20)])
    r = await run([user("go")], AgentContext(tools=[tool_.tool()]), config(limits), model)
    end = r.end
    assert end.reason == "limit" and end.limit.limit == name
    assert end.usage.requests == len(model.requests)
    assert end.usage.tool_calls >= tool_.runs
    assert_within(limits, end, PRICED, Reply(input_tokens=100, output_tokens=20))
    # every call of the transcript has its result (run() checked the grammar too)
    calls = [c.id for m in r.messages if m.role == "assistant" for c in m.tool_calls()]
    results = [m.tool_call_id for m in r.messages if m.role == "toolResult"]
    assert calls == results


async def test_the_calls_a_limit_kept_from_running_say_so() -> None:
    tool_ = CountingTool()
    model = ScriptedModel([Reply(calls=3)])
    r = await run(
        [user("go")],
        AgentContext(tools=[tool_.tool()]),
        config(UsageLimits(tool_calls=4)),
        model,
    )
    assert tool_.runs == 3  # the second batch (3 more) would go over 4: none of it runs
    refused = [m for m in r.messages if m.role == "toolResult" and m.is_error]
    assert len(refused) == 3
    reached = r.end.limit
    assert reached.where == "before_tools" and (reached.used, reached.needed) == (3, 6)
    assert text_of(refused[0]) == NOT_RUN_TEXT.format(name="count", limit=reached.text())


async def test_the_last_turn_goes_without_tools_so_the_run_ends_with_an_answer() -> None:
    tool_ = CountingTool()
    model = ScriptedModel([Reply(calls=1), Reply(calls=1), Reply(text="summary")])
    limits = UsageLimits(requests=3, last_turn_without_tools=True)
    r = await run([user("go")], AgentContext("sys", tools=[tool_.tool()]), config(limits), model)
    assert r.end.reason == "completed" and text_of(r.messages[-1]) == "summary"
    assert [len(c.tools) for c in model.requests] == [1, 1, 0]
    assert model.requests[-1].system_prompt.endswith(limits.last_turn_instruction)


async def test_a_run_without_limits_reports_no_usage() -> None:
    model = ScriptedModel([Reply()])
    r = await run([user("go")], AgentContext(), config(None), model)
    assert r.end.usage is None and r.end.limit is None
    assert "usage" not in r.end.model_dump(mode="json")


async def test_the_deadline_aborts_a_model_call_in_flight() -> None:
    stream = BlockingStream()
    outer = AbortController()
    r = await run(
        [user("go")],
        AgentContext(),
        config(UsageLimits(seconds=0.05)),
        stream,
        signal=outer.signal,
    )
    assert r.end.reason == "limit" and r.end.limit.limit == "seconds"
    assert r.end.limit.where == "deadline" and r.end.limit.used >= 0.05
    assert stream.closed
    cut = r.messages[-1]
    assert cut.stop_reason == "aborted" and "seconds" in cut.error_message
    options = stream.calls[0][2]
    assert options.signal.aborted
    assert options.signal.reason == DEADLINE_REASON.format(seconds=0.05)
    assert not outer.signal.aborted  # the caller's own signal is never fired


async def test_the_deadline_aborts_a_tool_in_flight_and_answers_it() -> None:
    async def hang(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        await signal.wait()
        return AgentToolResult(content=[TextContent(text="cut")])

    slow = AgentTool(name="count", description="hangs", parameters={}, execute=hang)
    r = await run(
        [user("go")],
        AgentContext(tools=[slow]),
        config(UsageLimits(seconds=0.05)),
        ScriptedModel([Reply(calls=1)]),
    )
    assert r.end.reason == "limit" and r.end.limit.limit == "seconds"
    assert r.messages[-1].role == "toolResult"


async def test_a_run_that_ends_before_its_deadline_is_not_touched_by_it() -> None:
    model = ScriptedModel([Reply()])
    r = await run([user("go")], AgentContext(), config(UsageLimits(seconds=30)), model)
    assert r.end.reason == "completed" and r.end.limit is None


async def test_tools_and_hooks_read_the_usage_so_far() -> None:
    seen: list[RunUsage | None] = []
    hooked: list[RunUsage | None] = []

    @tool
    def count(ctx: RunContext[None], i: int = 0) -> str:
        """Counts."""
        seen.append(ctx.run_usage)
        return "ok"

    def before(context: Any, signal: Any = None) -> None:
        hooked.append(current_run().run_usage)

    model = ScriptedModel([Reply(calls=1), Reply()])
    r = await run(
        [user("go")],
        AgentContext(tools=[count]),
        config(UsageLimits(requests=5), before_tool_call=before),
        model,
    )
    assert r.end.reason == "completed"
    assert seen[0] is not None and seen[0].requests == 1 and seen[0].tool_calls == 1
    assert seen[0].input_tokens == 100
    assert hooked[0] == seen[0]


async def test_an_agent_session_budget_bounds_all_its_prompts() -> None:
    tool_ = CountingTool()
    model = ScriptedModel([Reply(calls=1)])
    agent = Agent(
        model=PRICED, tools=[tool_.tool()], stream_fn=model, limits=UsageLimits(requests=4)
    )
    ends: list[Any] = []
    agent.subscribe(lambda e, *_: ends.append(e) if e.type == "agent_end" else None)
    await agent.prompt("one", limits=UsageLimits(requests=3))
    assert ends[-1].limit.limit == "requests" and agent.state.usage.requests == 3
    assert agent.state.error_message is not None and "requests" in agent.state.error_message
    await agent.prompt("two")
    assert agent.state.usage.requests == 4 and len(model.requests) == 4
    await agent.prompt("three")  # the budget is used up: ends at once, no request made
    assert len(model.requests) == 4 and ends[-1].reason == "limit"
    assert ends[-1].limit.where == "before_request"
    agent.state.usage = RunUsage()  # counting afresh
    await agent.prompt("four", limits=UsageLimits(requests=1))
    assert len(model.requests) == 5 and agent.state.usage.requests == 1


async def test_an_agent_refuses_limits_that_are_not_usage_limits() -> None:
    with pytest.raises(TypeError, match="limits must be a UsageLimits or None"):
        Agent(model=PRICED, limits=3)  # type: ignore[arg-type]
    agent = Agent(model=PRICED, stream_fn=ScriptedModel([Reply()]))
    with pytest.raises(TypeError, match="limits must be a UsageLimits or None"):
        await agent.prompt("x", limits={"requests": 1})  # type: ignore[arg-type]


# --- journaled runs resumed after a crash ----------------------------------------------------

LIMITS = UsageLimits(requests=3, tool_calls=4)


async def _journaled() -> tuple[MemoryRunStore, list[Any]]:
    store = MemoryRunStore()
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(tools=[CountingTool().tool()]),
        config(LIMITS),
        recorder,
        stream_fn=ScriptedModel([Reply(calls=1)]),
        store=store,
        run_id="orig",
    )
    check_run(recorder.events, messages)
    return store, recorder.events


def _cut(store: MemoryRunStore, k: int, shift_ms: int = 0) -> MemoryRunStore:
    stored = store.load("orig")
    cut = MemoryRunStore()
    owner = "elsewhere:1:dead"
    cut.create_run("r", stored.header, session_id="s", owner=owner, lease_s=-1.0)
    for seq, entry in enumerate(stored.entries[:k]):
        if shift_ms and "timestamp" in entry:
            entry = {**entry, "timestamp": entry["timestamp"] - shift_ms}
        cut.append("r", seq, entry, owner=owner, lease_s=-1.0)
    return cut


async def test_a_run_resumed_after_a_crash_keeps_its_counters_and_its_limit() -> None:
    store, original = await _journaled()
    assert original[-1].reason == "limit"
    entries = store.load("orig").entries
    for k in range(1, len(entries)):
        cut = _cut(store, k)
        before, history = load_run_state(cut, "r", config(LIMITS), tools=[CountingTool().tool()])
        assert before.usage is not None, k
        tool_ = CountingTool()
        model = ScriptedModel([Reply(calls=1)])
        recorder = EventRecorder()
        messages = await resume_run(
            "r",
            cut,
            config(LIMITS),
            recorder,
            tools=[tool_.tool()],
            stream_fn=model,
        )
        check_resumed_run([e for s in history for e in s.events], recorder.events, messages)
        end = recorder.events[-1]
        assert end.reason == "limit", k
        # the journaled responses and the resumed ones together stay within the limit
        answered = sum(e["input"] in ("stream_done", "stream_error") for e in entries[:k])
        assert answered + len(model.requests) <= LIMITS.requests, k
        assert end.usage.requests <= LIMITS.requests and end.usage.tool_calls <= 4, k
        assert end.usage.started_at == before.usage.started_at, k


async def test_a_resumed_run_keeps_the_deadline_of_its_start() -> None:
    store = MemoryRunStore()
    limits = UsageLimits(seconds=60)
    await run_agent_loop(
        [user("go")],
        AgentContext(tools=[CountingTool().tool()]),
        config(limits),
        stream_fn=ScriptedModel([Reply(calls=1), Reply()]),
        store=store,
        run_id="orig",
    )
    entries = store.load("orig").entries
    k = next(i for i, e in enumerate(entries) if e["input"] == "tool_finished") + 1
    # as if the crash happened two minutes after the run started: its deadline has passed
    cut = _cut(store, k, shift_ms=120_000)
    model = ScriptedModel([Reply()])
    recorder = EventRecorder()
    await resume_run(
        "r", cut, config(limits), recorder, tools=[CountingTool().tool()], stream_fn=model
    )
    end = recorder.events[-1]
    assert end.reason == "limit" and end.limit.limit == "seconds" and end.limit.used >= 120
    assert model.requests == []


async def test_a_deadline_never_outlives_the_run() -> None:
    model = ScriptedModel([Reply()])
    with anyio.fail_after(5):
        r = await run([user("go")], AgentContext(), config(UsageLimits(seconds=3600)), model)
    assert r.end.reason == "completed"
