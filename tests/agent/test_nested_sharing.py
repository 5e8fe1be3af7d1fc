"""Nested runs share the outer run's budget, abort and approver
(docs/multi-agent.md#one-budget-one-abort-one-approver). Every async test runs on trio and on
asyncio; tools wait on events, never on sleeps."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentcore_fsm import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UsageLimits,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.abort import AbortController
from agentcore_fsm.core.approval import NO_APPROVER_TEXT, ApprovalDecision
from agentcore_fsm.core.limits import RunUsage
from agentcore_fsm.core.nesting import NestedApprovalRequest, levels, nested_event_of
from agentcore_fsm.core.run_context import current_run
from agentcore_fsm.devtools.testing import (
    FauxProvider,
    check_nested_run,
    faux_response,
    faux_tool_call,
)

pytestmark = pytest.mark.anyio

MODEL = Model(id="m")


def call(name: str, prompt: str, id: str) -> Any:
    return faux_response(tool_calls=[faux_tool_call(name, {"prompt": prompt}, id=id)])


def results(messages: list[Any]) -> dict[str, Any]:
    return {m.tool_call_id: m for m in messages if getattr(m, "role", "") == "toolResult"}


def noop_tool(name: str = "noop", **options: Any) -> AgentTool:
    async def run(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text=f"{name} ran")])

    return AgentTool(name, "Does nothing.", {"type": "object"}, run, **options)


# --- one budget --------------------------------------------------------------------------------


async def test_a_nested_run_gets_only_what_is_left_of_the_outer_limits() -> None:
    looping = FauxProvider([lambda c: faux_response(tool_calls=[faux_tool_call("noop", {})])] * 10)
    worker = Agent(stream_fn=looping, tools=[noop_tool()])
    events: list[Any] = []
    messages = await run_agent_loop(
        [UserMessage(content="q")],
        AgentContext(tools=[worker.as_tool("w", "Worker.")]),
        AgentLoopConfig(model=MODEL, limits=UsageLimits(requests=3)),
        events.append,
        stream_fn=FauxProvider([call("w", "x", "c1"), faux_response("done")]),
    )
    # the outer run made one request; the inner run had the two that were left
    assert len(looping.calls) == 2
    result = results(messages)["c1"]
    assert result.is_error and "ended with limit" in result.content[0].text
    inner_end = levels(events)[("c1",)][-1]
    assert inner_end.type == "agent_end" and inner_end.reason == "limit"
    assert inner_end.limit.limit == "requests" and inner_end.limit.maximum == 3
    check_nested_run(events, messages)


async def test_what_a_nested_run_used_counts_in_the_outer_runs_later_checks() -> None:
    first = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("noop", {})]), faux_response("a")]
    )
    second = FauxProvider([faux_response("never asked")])
    tools = [
        Agent(stream_fn=first, tools=[noop_tool()]).as_tool("one", "One."),
        Agent(stream_fn=second).as_tool("two", "Two."),
    ]
    events: list[Any] = []
    messages = await run_agent_loop(
        [UserMessage(content="q")],
        AgentContext(tools=tools),
        AgentLoopConfig(model=MODEL, limits=UsageLimits(requests=4)),
        events.append,
        stream_fn=FauxProvider(
            [call("one", "x", "c1"), call("two", "y", "c2"), faux_response("done")]
        ),
    )
    # outer request 1, the first nested run's 2 (its result's run_usage), outer request 2: all
    # four are used, so the batch of the second call may not run (no request left to read it)
    assert len(first.calls) == 2 and second.calls == []
    (end_c1,) = [e for e in events if e.type == "tool_execution_end" and e.tool_call_id == "c1"]
    assert end_c1.result.run_usage.requests == 2 and end_c1.result.run_usage.tool_calls == 1
    assert not results(messages)["c1"].is_error
    assert (
        "reached its usage limit (requests: 4 of 4 used)" in results(messages)["c2"].content[0].text
    )
    end = events[-1]
    assert end.type == "agent_end" and end.reason == "limit"


async def test_the_next_nested_run_starts_from_what_the_finished_ones_used() -> None:
    first = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("noop", {})]), faux_response("a")]
    )
    second = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("noop", {})]), faux_response("b")]
    )
    tools = [
        Agent(stream_fn=first, tools=[noop_tool()]).as_tool("one", "One."),
        Agent(stream_fn=second, tools=[noop_tool()]).as_tool("two", "Two."),
    ]
    outer_model = FauxProvider(
        [call("one", "x", "c1"), call("two", "y", "c2"), faux_response("done")]
    )
    events: list[Any] = []
    messages = await run_agent_loop(
        [UserMessage(content="q")],
        AgentContext(tools=tools),
        AgentLoopConfig(model=MODEL, limits=UsageLimits(requests=5)),
        events.append,
        stream_fn=outer_model,
    )
    # 1 (outer) + 2 (first) + 1 (outer) = 4: the second nested run has one request left
    assert len(first.calls) == 2 and len(second.calls) == 1
    assert "ended with limit" in results(messages)["c2"].content[0].text
    assert len(outer_model.calls) == 2  # and the outer run none after it
    assert events[-1].reason == "limit" and events[-1].limit.used == 5


async def test_the_nested_run_sees_the_outer_usage_and_the_time_left() -> None:
    seen: list[Any] = []

    async def look(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        scope = current_run()
        seen.append((scope.config.limits, scope.run_usage))
        return AgentToolResult(content=[TextContent(text="looked")])

    worker = Agent(
        stream_fn=FauxProvider(
            [faux_response(tool_calls=[faux_tool_call("look", {})]), faux_response("ok")]
        ),
        tools=[AgentTool("look", "Look.", {"type": "object"}, look)],
    )
    await run_agent_loop(
        [UserMessage(content="q")],
        AgentContext(tools=[worker.as_tool("w", "Worker.")]),
        AgentLoopConfig(model=MODEL, limits=UsageLimits(requests=9, seconds=600)),
        stream_fn=FauxProvider([call("w", "x", "c1"), faux_response("done")]),
    )
    ((limits, usage),) = seen
    assert limits.requests == 9 and limits.used_before.requests == 1
    assert 0 < limits.seconds <= 600
    assert usage.requests == 2  # the outer request and the inner one that called the tool


# --- one abort ---------------------------------------------------------------------------------


async def test_aborting_the_outer_run_aborts_the_nested_run() -> None:
    started = anyio.Event()
    inner_signals: list[Any] = []

    async def wait(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        inner_signals.append(signal)
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    worker = Agent(
        stream_fn=FauxProvider([faux_response(tool_calls=[faux_tool_call("wait", {}, id="i1")])]),
        tools=[AgentTool("wait", "Waits.", {"type": "object"}, wait)],
    )
    controller = AbortController()
    events: list[Any] = []
    out: list[Any] = []

    async def outer() -> None:
        out.append(
            await run_agent_loop(
                [UserMessage(content="q")],
                AgentContext(tools=[worker.as_tool("w", "Worker.")]),
                AgentLoopConfig(model=MODEL),
                events.append,
                signal=controller.signal,
                stream_fn=FauxProvider([call("w", "x", "c1")]),
            )
        )

    async with anyio.create_task_group() as group:
        group.start_soon(outer)
        await started.wait()
        controller.abort("stop")
    (messages,) = out
    assert inner_signals[0].aborted  # the inner run's signal fired with the outer one
    assert results(messages)["c1"].is_error
    assert events[-1].type == "agent_end" and events[-1].reason == "aborted"
    summaries = check_nested_run(events, messages)
    assert (("c1",) in summaries) and summaries[()].reason == "aborted"


# --- one approver ------------------------------------------------------------------------------


def approval_worker(tools: list[AgentTool] | None = None) -> Agent:
    return Agent(
        stream_fn=FauxProvider(
            [
                faux_response(tool_calls=[faux_tool_call("pay", {"eur": 5}, id="p1")]),
                lambda c: faux_response(f"paid? {c.messages[-1].content[0].text}"),
            ]
        ),
        tools=tools or [noop_tool("pay", requires_approval=True)],
    )


async def test_an_inner_approval_reaches_the_outer_approver_with_the_path() -> None:
    for approve in (True, False):
        asked: list[Any] = []

        def decide(
            request: Any, signal: Any, approve: bool = approve, asked: list[Any] = asked
        ) -> Any:
            asked.append(request)
            return ApprovalDecision(approved=approve, reason=None if approve else "no")

        events: list[Any] = []
        messages = await run_agent_loop(
            [UserMessage(content="q")],
            AgentContext(tools=[approval_worker().as_tool("w", "Worker.")]),
            AgentLoopConfig(model=MODEL, decide_approval=decide),
            events.append,
            stream_fn=FauxProvider([call("w", "pay it", "c1"), faux_response("done")]),
        )
        (request,) = asked
        assert isinstance(request, NestedApprovalRequest)
        assert (request.tool_call_id, request.tool_name, request.args) == ("p1", "pay", {"eur": 5})
        assert (request.path, request.agents) == (("c1",), ("w",))
        text = results(messages)["c1"].content[0].text
        assert text == ("paid? pay ran" if approve else 'paid? Tool call "pay" was denied: no')
        inner = [e.type for e in levels(events)[("c1",)]]
        assert "approval_requested" in inner and "approval_decided" in inner
        check_nested_run(events, messages)


async def test_without_an_outer_approver_the_inner_call_is_denied() -> None:
    messages = await run_agent_loop(
        [UserMessage(content="q")],
        AgentContext(tools=[approval_worker().as_tool("w", "Worker.")]),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([call("w", "pay it", "c1"), faux_response("done")]),
    )
    assert NO_APPROVER_TEXT in results(messages)["c1"].content[0].text


async def test_two_levels_deep_the_request_carries_the_whole_path_and_an_agent_approves() -> None:
    middle = Agent(
        stream_fn=FauxProvider([call("payer", "pay", "m1"), faux_response("middle done")]),
        tools=[approval_worker().as_tool("payer", "Pays.")],
    )
    boss = Agent(
        stream_fn=FauxProvider([call("middle", "go", "o1"), faux_response("boss done")]),
        tools=[middle.as_tool("middle", "Middle.")],
    )
    seen: list[Any] = []

    def listener(event: Any, signal: Any) -> None:
        nested = nested_event_of(event)
        if nested is not None and nested.type == "approval_requested":
            seen.append((nested.path, nested.agents))
            boss.approve(nested.event.tool_call_id, decided_by="alice")

    boss.subscribe(listener)
    events: list[Any] = []
    boss.subscribe(lambda e, s: events.append(e))
    messages = await boss.prompt("start")
    assert seen == [(("o1", "m1"), ("middle", "payer"))]
    assert results(messages)["o1"].content[0].text == "middle done"
    deepest = levels(events)[("o1", "m1")]
    decided = [e for e in deepest if e.type == "approval_decided"]
    assert [(d.approved, d.decided_by) for d in decided] == [(True, "alice")]
    check_nested_run(events, messages)


async def test_a_journaled_run_keeps_what_its_nested_runs_used() -> None:
    from agentcore_fsm.persist.journal import JournaledLoopMachine, RunSnapshot
    from agentcore_fsm.persist.store import MemoryRunStore

    worker = Agent(
        stream_fn=FauxProvider(
            [faux_response(tool_calls=[faux_tool_call("noop", {})]), faux_response("inner")]
        ),
        tools=[noop_tool()],
    )
    store = MemoryRunStore()
    events: list[Any] = []
    tool = worker.as_tool("w", "Worker.")
    config = AgentLoopConfig(model=MODEL, limits=UsageLimits(requests=9))
    await run_agent_loop(
        [UserMessage(content="q")],
        AgentContext(tools=[tool]),
        config,
        events.append,
        stream_fn=FauxProvider([call("w", "x", "c1"), faux_response("done")]),
        store=store,
        run_id="r1",
    )
    live = events[-1].usage
    assert (live.requests, live.turns, live.tool_calls) == (4, 4, 2)
    stored = store.load("r1")
    header = stored.header
    machine, _ = JournaledLoopMachine.restore(
        RunSnapshot(
            format=header.get("format"),
            declaration=header.get("declaration"),
            declaration_hash=header.get("declaration_hash"),
            header=header,
            entries=stored.entries,
        ),
        config,
        tools=[tool],
        run_id="r1",
    )
    # the record's tool_finished entry holds the nested run's run_usage: the same counters
    assert machine.usage == live


async def test_a_call_after_the_outer_deadline_starts_no_nested_run() -> None:
    from agentcore_fsm.core.messages import now_ms
    from agentcore_fsm.core.run_context import bind_run

    model = FauxProvider([faux_response("never asked")])
    tool = Agent(stream_fn=model).as_tool("w", "Worker.")
    with bind_run() as scope:  # the scope of an outer run that started 20 minutes ago
        scope.config = AgentLoopConfig(model=MODEL, limits=UsageLimits(seconds=600))
        scope.follow_usage(lambda: RunUsage(requests=1, started_at=now_ms() - 1_200_000))
        result = await tool.execute("c1", {"prompt": "x"}, AbortController().signal, print)
    assert result.is_error and model.calls == []
    assert result.content[0].text == "agent 'w' was not called: the run's deadline has passed"
