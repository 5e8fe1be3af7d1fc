"""Handoff (docs/multi-agent.md#handoff): a tool hands the conversation to another agent, which
continues it in a run of its own; chains, the cap on hops, input filters, abort, budgets, bad
input, the plain loop. Every async test runs on trio and on asyncio; tools wait on events,
never on sleeps."""

from __future__ import annotations

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
    UsageLimits,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.agent.handoff import (
    Handoff,
    HandoffMessages,
    HandoffTool,
    handoff,
    handoff_of,
    run_with_handoffs,
)
from agentcore_fsm.core.events import AgentEndEvent
from agentcore_fsm.core.output import OutputError
from agentcore_fsm.devtools.testing import FauxProvider, check_run, faux_response, faux_tool_call

pytestmark = pytest.mark.anyio

MODEL = Model(id="m")


def transfer(name: str, id: str, *more: Any) -> Any:
    return faux_response(tool_calls=[faux_tool_call(name, {}, id=id), *more])


def transfer_args(name: str, args: dict[str, Any]) -> Any:
    return faux_response(tool_calls=[faux_tool_call(name, args, id="o1")])


def runs(events: list[Any]) -> list[list[Any]]:
    """The events split into runs (each from its agent_start to its agent_end)."""
    split: list[list[Any]] = []
    for event in events:
        if event.type == "agent_start":
            split.append([])
        split[-1].append(event)
    return split


def check_chain(events: list[Any], messages: list[Any]) -> list[Any]:
    """Each run of the chain passes the grammar checker, and the chain's messages are its runs'
    messages in order; returns the runs' agent_end events."""
    ends = []
    for run in runs(events):
        end = run[-1]
        assert end.type == "agent_end"
        check_run(run, end.messages)
        ends.append(end)
    assert [m for end in ends for m in end.messages] == list(messages)
    return ends


def answered_once(messages: list[Any]) -> None:
    """Every tool call of the transcript has exactly one result."""
    calls = [
        b.id
        for m in messages
        if getattr(m, "role", "") == "assistant"
        for b in m.content
        if b.type == "toolCall"
    ]
    answers = [m.tool_call_id for m in messages if getattr(m, "role", "") == "toolResult"]
    assert sorted(calls) == sorted(answers)


def texts(messages: list[Any]) -> list[str]:
    return [
        "".join(b.text for b in m.content if b.type == "text")
        for m in messages
        if getattr(m, "role", "") in ("assistant", "toolResult")
    ]


async def test_a_handoff_continues_the_conversation_with_the_target_agent() -> None:
    def lookup(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text="invoice 7: paid")])

    billing_model = FauxProvider(
        [
            faux_response(tool_calls=[faux_tool_call("lookup", {}, id="b1")]),
            faux_response("Invoice 7 is paid."),
        ]
    )
    billing = Agent(
        name="billing",
        system_prompt="You handle billing.",
        tools=[AgentTool("lookup", "Look an invoice up.", {"type": "object"}, lookup)],
        stream_fn=billing_model,
    )
    triage_model = FauxProvider([transfer("transfer_to_billing", "h1")])
    triage = Agent(
        name="triage",
        system_prompt="You route questions.",
        tools=[handoff(billing)],
        stream_fn=triage_model,
    )
    events: list[Any] = []
    triage.subscribe(lambda e, s: events.append(e))
    messages = await triage.prompt("Is invoice 7 paid?")
    assert isinstance(messages, HandoffMessages)
    assert messages.agent == "billing"
    assert messages.handoffs == (Handoff("triage", "billing"),)
    # two runs, each a run of the grammar; their agent_end events name their agent
    ends = check_chain(events, messages)
    assert [(e.reason, e.agent) for e in ends] == [("stopped", "triage"), ("completed", "billing")]
    assert ends[1].model_dump(mode="json")["agent"] == "billing"
    # the handoff shows in the handoff call's tool_execution_end
    (end,) = [e for e in events if e.type == "tool_execution_end" and e.tool_call_id == "h1"]
    assert handoff_of(end) == Handoff("triage", "billing") and not end.is_error
    assert handoff_of(messages[2]) == Handoff("triage", "billing")  # the tool result message
    assert texts(messages) == [
        "",
        "Handed off to 'billing'.",
        "",
        "invoice 7: paid",
        "Invoice 7 is paid.",
    ]
    # the target ran with its own system prompt and tools, on the transcript so far, no prompt
    first = billing_model.calls[0]
    assert first.system_prompt == "You handle billing."
    assert [t.name for t in first.tools or []] == ["lookup"]
    assert [m.role for m in first.messages] == ["user", "assistant", "toolResult"]
    # the Agent's transcript ends with the target's answer; the agent itself is unchanged
    assert triage.state.messages == list(messages)
    assert triage.state.messages[-1].content[0].text == "Invoice 7 is paid."
    assert triage.system_prompt == "You route questions." and billing.state.messages == []
    answered_once(triage.state.messages)


async def test_runs_without_a_handoff_are_unchanged() -> None:
    plain = Agent(stream_fn=FauxProvider([faux_response("hi")]))
    events: list[Any] = []
    plain.subscribe(lambda e, s: events.append(e))
    messages = await plain.prompt("hello")
    assert type(messages) is list
    assert "agent" not in events[-1].model_dump(mode="json")
    assert AgentEndEvent(messages=[]).model_dump(mode="json") == {
        "type": "agent_end",
        "messages": [],
        "reason": "completed",
    }
    # an agent with a handoff that it does not use: one run, its agent named
    other = Agent(name="other", stream_fn=FauxProvider([faux_response("unused")]))
    own = Agent(tools=[handoff(other)], stream_fn=FauxProvider([faux_response("mine")]))
    events.clear()
    own.subscribe(lambda e, s: events.append(e))
    result = await own.prompt("hello")
    assert isinstance(result, HandoffMessages)
    assert result.agent == "agent" and result.handoffs == ()
    (end,) = check_chain(events, result)
    assert end.agent == "agent" and end.reason == "completed"


async def test_a_chain_of_handoffs_stops_at_max_handoffs_with_an_error_naming_the_chain() -> None:
    c = Agent(name="c", stream_fn=FauxProvider([faux_response("c answers")]))
    b_model = FauxProvider([transfer("to_c", "h2"), faux_response("b answers after all")])
    b = Agent(name="b", tools=[handoff(c, name="to_c")], stream_fn=b_model)
    a = Agent(
        name="a", tools=[handoff(b, name="to_b")], stream_fn=FauxProvider([transfer("to_b", "h1")])
    )
    events: list[Any] = []
    a.subscribe(lambda e, s: events.append(e))
    messages = await a.prompt("go")
    assert messages.agent == "c"
    assert messages.handoffs == (Handoff("a", "b"), Handoff("b", "c"))
    ends = check_chain(events, messages)
    assert [e.agent for e in ends] == ["a", "b", "c"]
    # the same chain with a cap of one hop on b's handoff: refused, b answers itself
    b.tools = [handoff(c, name="to_c", max_handoffs=1)]
    b.stream_fn = FauxProvider([transfer("to_c", "h2"), faux_response("b answers after all")])
    a.stream_fn = FauxProvider([transfer("to_b", "h1")])
    a.reset()
    events.clear()
    messages = await a.prompt("go")
    assert messages.agent == "b" and messages.handoffs == (Handoff("a", "b"),)
    refused = [m for m in messages if getattr(m, "tool_call_id", "") == "h2"]
    assert refused[0].is_error
    assert refused[0].content[0].text == (
        "not handed off to 'c': the conversation was handed off 1 times already, the most "
        "this handoff allows (max_handoffs 1; chain: a > b)"
    )
    assert [e.agent for e in check_chain(events, messages)] == ["a", "b"]
    answered_once(a.state.messages)


async def test_a_cycle_is_bounded_by_max_handoffs() -> None:
    a = Agent(name="a")
    b = Agent(name="b")
    a.tools = [handoff(b, max_handoffs=3)]
    b.tools = [handoff(a, max_handoffs=3)]
    # each model hands off whenever it is asked; after three hops the fourth is refused
    a.stream_fn = FauxProvider(
        [transfer("transfer_to_b", "a1"), transfer("transfer_to_b", "a2"), faux_response("a")]
    )
    b.stream_fn = FauxProvider([transfer("transfer_to_a", "b1"), faux_response("b done")])
    events: list[Any] = []
    a.subscribe(lambda e, s: events.append(e))
    messages = await a.prompt("loop")
    assert [h.to_agent for h in messages.handoffs] == ["b", "a", "b"]
    assert messages.agent == "b" and texts(messages)[-1] == "b done"
    assert [e.agent for e in check_chain(events, messages)] == ["a", "b", "a", "b"]


async def test_the_input_filter_chooses_what_the_target_sees() -> None:
    target_model = FauxProvider([faux_response("done")])
    target = Agent(name="t", stream_fn=target_model)
    seen: list[Any] = []

    def last_two(messages: list[Any]) -> list[Any]:
        seen.append(list(messages))
        return [UserMessage(content="summary: the user wants a refund")]

    source = Agent(
        tools=[handoff(target, input_filter=last_two)],
        messages=[UserMessage(content="old"), UserMessage(content="older")],
        stream_fn=FauxProvider([transfer("transfer_to_t", "h1")]),
    )
    messages = await source.prompt("refund please")
    assert [m.role for m in seen[0]] == ["user", "user", "user", "assistant", "toolResult"]
    (context,) = target_model.calls
    assert [m.content for m in context.messages] == ["summary: the user wants a refund"]
    # the agent's own transcript keeps everything
    assert [m.role for m in source.state.messages] == [
        "user", "user", "user", "assistant", "toolResult", "assistant"
    ]  # fmt: skip
    assert messages.agent == "t"


@pytest.mark.parametrize(
    ("returned", "error", "text"),
    [
        (None, TypeError, "input_filter must return a list of messages, not NoneType"),
        (["x"], TypeError, "input_filter must return messages, not str among them"),
        ([], ValueError, "input_filter left no message"),
    ],
)
async def test_a_bad_input_filter_is_reported_and_the_transcript_stays_valid(
    returned: Any, error: type[Exception], text: str
) -> None:
    target = Agent(name="t", stream_fn=FauxProvider([faux_response("never")]))
    source = Agent(
        tools=[handoff(target, input_filter=lambda messages: returned)],
        stream_fn=FauxProvider([transfer("transfer_to_t", "h1")]),
    )
    with pytest.raises(error, match=text):
        await source.prompt("go")
    assert not source.is_busy
    answered_once(source.state.messages)


async def test_a_filter_leaving_an_assistant_message_last_is_refused() -> None:
    target = Agent(name="t", stream_fn=FauxProvider([faux_response("never")]))
    source = Agent(
        tools=[handoff(target, name="go", input_filter=lambda messages: messages[:2])],
        stream_fn=FauxProvider([transfer("go", "h1")]),
    )
    with pytest.raises(ValueError, match="handoff 'go': input_filter left an assistant message"):
        await source.prompt("go")


async def test_an_abort_after_the_handoff_starts_no_target_run() -> None:
    target_model = FauxProvider([faux_response("never")])
    target = Agent(name="t", stream_fn=target_model)
    source = Agent(
        name="s",
        tools=[handoff(target)],
        stream_fn=FauxProvider([transfer("transfer_to_t", "h1")]),
    )
    events: list[Any] = []

    def listener(event: Any, signal: Any) -> None:
        events.append(event)
        if event.type == "agent_end":
            source.abort()

    source.subscribe(listener)
    messages = await source.prompt("go")
    assert target_model.calls == []
    assert messages.agent == "s" and messages.handoffs == ()
    (end,) = check_chain(events, messages)
    assert end.reason == "stopped"
    answered_once(source.state.messages)


async def test_an_abort_during_the_target_run_leaves_a_valid_transcript() -> None:
    started = anyio.Event()

    async def wait(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    target = Agent(
        name="t",
        tools=[AgentTool("wait", "Waits.", {"type": "object"}, wait)],
        stream_fn=FauxProvider([faux_response(tool_calls=[faux_tool_call("wait", {}, id="w1")])]),
    )
    source = Agent(
        tools=[handoff(target)], stream_fn=FauxProvider([transfer("transfer_to_t", "h1")])
    )
    events: list[Any] = []
    source.subscribe(lambda e, s: events.append(e))
    out: list[Any] = []

    async def run() -> None:
        out.append(await source.prompt("go"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await started.wait()
        source.abort()
    (messages,) = out
    ends = check_chain(events, messages)
    assert [(e.agent, e.reason) for e in ends] == [("agent", "stopped"), ("t", "aborted")]
    assert messages.agent == "t"
    answered_once(source.state.messages)


async def test_a_handoff_beside_other_calls_is_refused_and_the_first_of_two_wins() -> None:
    ran: list[str] = []

    def note(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        ran.append(call_id)
        return AgentToolResult(content=[TextContent(text="noted")])

    x = Agent(name="x", stream_fn=FauxProvider([faux_response("x here")]))
    y = Agent(name="y", stream_fn=FauxProvider([faux_response("y here")]))
    calls, x_, y_ = faux_tool_call, "transfer_to_x", "transfer_to_y"
    source = Agent(
        tools=[AgentTool("note", "Note.", {"type": "object"}, note), handoff(x), handoff(y)],
        stream_fn=FauxProvider(
            [
                faux_response(tool_calls=[calls("note", {}, id="n1"), calls(x_, {}, id="h1")]),
                faux_response(tool_calls=[calls(x_, {}, id="h2"), calls(y_, {}, id="h3")]),
            ]
        ),
    )  # fmt: skip
    events: list[Any] = []
    source.subscribe(lambda e, s: events.append(e))
    messages = await source.prompt("go")
    assert ran == ["n1"]
    assert messages.agent == "x" and texts(messages)[-1] == "x here"
    results = {m.tool_call_id: m for m in messages if getattr(m, "role", "") == "toolResult"}
    assert results["h1"].is_error and results["h1"].content[0].text == (
        "not handed off to 'x': a handoff must be the only kind of call of its turn (this turn "
        "also calls 'note'); call it alone"
    )
    assert not results["h2"].is_error
    assert results["h3"].is_error and results["h3"].content[0].text == (
        "not handed off to 'y': this turn already hands the conversation to 'x'"
    )
    assert messages.handoffs == (Handoff("agent", "x"),)
    assert [e.reason for e in check_chain(events, messages)] == ["stopped", "completed"]


async def test_the_runs_of_a_chain_share_one_budget() -> None:
    target = Agent(
        name="t",
        stream_fn=FauxProvider([transfer("note", "t1"), faux_response("never")]),
        tools=[AgentTool("note", "Note.", {"type": "object"}, lambda *a: AgentToolResult())],
    )
    source = Agent(
        tools=[handoff(target)],
        stream_fn=FauxProvider([transfer("transfer_to_t", "h1")]),
        limits=UsageLimits(requests=2),
    )
    events: list[Any] = []
    source.subscribe(lambda e, s: events.append(e))
    messages = await source.prompt("go")
    ends = check_chain(events, messages)
    assert [e.reason for e in ends] == ["stopped", "limit"]
    assert ends[0].usage.requests == 1 and ends[1].usage.requests == 2
    assert ends[1].limit is not None and ends[1].limit.limit == "requests"


async def test_a_stored_agent_journals_each_run_of_the_chain_in_its_session() -> None:
    store = MemoryRunStore()
    target = Agent(name="t", stream_fn=FauxProvider([faux_response("from t")]))
    source = Agent(
        store=store,
        tools=[handoff(target)],
        stream_fn=FauxProvider([transfer("transfer_to_t", "h1"), faux_response("again")]),
    )
    messages = await source.prompt("go")
    assert messages.agent == "t"
    runs_ = store.runs(source.session_id)
    assert [r.status for r in runs_] == ["finished", "finished"]
    assert source.interrupted_run is None
    # the session goes on: the next prompt starts with the source agent again
    more = await source.prompt("and?")
    assert texts(more)[-1] == "again"
    reloaded = Agent(store=store, session_id=source.session_id, tools=[handoff(target)])
    assert reloaded.state.messages == source.state.messages


async def test_the_target_is_checked_when_the_run_starts() -> None:
    source_model = FauxProvider([transfer("transfer_to_t", "h1")])
    broken = Agent(name="t")  # no stream function, no model that names one
    source = Agent(tools=[handoff(broken)], stream_fn=source_model)
    with pytest.raises(ValueError, match="handoff target 't': "):
        await source.prompt("go")
    assert source_model.calls == []
    # two tools of one name in the target
    tool = AgentTool("x", "X.", {"type": "object"}, lambda *a: AgentToolResult())
    broken.stream_fn = FauxProvider([faux_response("never")])
    broken.tools = [tool, tool]
    with pytest.raises(ValueError, match="handoff target 't': two tools are named 'x'"):
        await source.prompt("go")
    # a name taken away after the handoff was made
    broken.tools = []
    broken.name = None
    with pytest.raises(ValueError, match="handoff 'transfer_to_t': its target agent has no name"):
        await source.prompt("go")
    assert source_model.calls == []


async def test_mutual_handoffs_are_checked_once_each() -> None:
    a = Agent(name="a", stream_fn=FauxProvider([faux_response("a answers")]))
    b = Agent(name="b", stream_fn=FauxProvider([faux_response("never")]))
    a.tools = [handoff(b)]
    b.tools = [handoff(a)]
    messages = await a.prompt("hi")
    assert messages.agent == "a"


def test_bad_handoffs_are_refused_when_made() -> None:
    with pytest.raises(TypeError, match="handoff: the target must be an Agent, not str"):
        handoff("billing")
    with pytest.raises(ValueError, match=r"handoff: the target agent has no name"):
        handoff(Agent())
    named = Agent(name="n")
    with pytest.raises(ValueError, match="max_handoffs must be an int >= 1, not 0"):
        handoff(named, max_handoffs=0)
    with pytest.raises(TypeError, match="input_filter must be callable"):
        handoff(named, input_filter="all")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Agent: name"):
        Agent(name=3)  # type: ignore[arg-type]
    tool = handoff(named, name="go", description="Go.")
    assert isinstance(tool, HandoffTool) and (tool.name, tool.description) == ("go", "Go.")
    assert handoff(named).name == "transfer_to_n"


async def test_the_plain_loop_follows_handoffs_with_run_with_handoffs() -> None:
    target = Agent(name="t", system_prompt="T.", stream_fn=FauxProvider([faux_response("t says")]))
    events: list[Any] = []
    messages = await run_with_handoffs(
        [UserMessage(content="go")],
        AgentContext(tools=[handoff(target)]),
        AgentLoopConfig(model=MODEL),
        events.append,
        name="loop",
        stream_fn=FauxProvider([transfer("transfer_to_t", "h1")]),
    )
    assert messages.agent == "t" and messages.handoffs == (Handoff("loop", "t"),)
    assert [e.agent for e in check_chain(events, messages)] == ["loop", "t"]
    with pytest.raises(TypeError, match="run_with_handoffs: name must be a non-empty str"):
        await run_with_handoffs([], AgentContext(), AgentLoopConfig(model=MODEL), name="")


async def test_a_handoff_where_no_chain_follows_it_is_an_error_result() -> None:
    target = Agent(name="t", stream_fn=FauxProvider([faux_response("never")]))
    text = (
        "not handed off to 't': this run does not follow handoffs (a handoff works in an "
        "Agent's prompt or run_with_handoffs, not in a nested run or a plain run_agent_loop)"
    )
    # a plain run_agent_loop
    messages = await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(tools=[handoff(target)]),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([transfer("transfer_to_t", "h1"), faux_response("ok")]),
    )
    assert messages[2].is_error and messages[2].content[0].text == text
    assert texts(messages)[-1] == "ok"
    # a nested run inside a chain: the inner handoff is not the chain's
    inner = Agent(
        tools=[handoff(target)],
        stream_fn=FauxProvider([transfer("transfer_to_t", "i1"), faux_response("inner ok")]),
    )
    outer = Agent(
        tools=[inner.as_tool("inner", "Inner."), handoff(Agent(name="u"), name="unused")],
        stream_fn=FauxProvider(
            [faux_response(tool_calls=[faux_tool_call("inner", {"prompt": "x"}, id="c1")]),
             faux_response("outer ok")]
        ),
    )  # fmt: skip
    outer.tools[1].target.stream_fn = FauxProvider([])
    result = await outer.prompt("go")
    assert result.agent == "agent" and texts(result)[-1] == "outer ok"
    assert texts(result)[1] == "inner ok"


async def test_a_message_queued_during_the_handoff_turn_keeps_the_agent_and_drops_the_handoff() -> (
    None
):
    target_model = FauxProvider([faux_response("never")])
    target = Agent(name="t", stream_fn=target_model)
    source = Agent(
        tools=[handoff(target)],
        stream_fn=FauxProvider([transfer("transfer_to_t", "h1"), faux_response("still me")]),
    )

    def steer(event: Any, signal: Any) -> None:
        if event.type == "tool_execution_end":
            source.steer("wait, one more thing")

    source.subscribe(steer)
    messages = await source.prompt("go")
    assert target_model.calls == []
    assert messages.agent == "agent" and messages.handoffs == ()
    assert texts(messages)[-1] == "still me"


class Verdict(BaseModel):
    approved: bool


async def test_the_output_type_of_a_prompt_is_asked_of_the_target() -> None:
    target = Agent(
        name="t",
        stream_fn=FauxProvider([transfer_args("final_result", {"approved": True})]),
    )
    source = Agent(
        tools=[handoff(target)], stream_fn=FauxProvider([transfer("transfer_to_t", "h1")])
    )
    messages = await source.prompt("decide", output_type=Verdict)
    assert messages.agent == "t"
    assert messages.has_output and messages.output == Verdict(approved=True)
    plain = await run_with_handoffs(
        [UserMessage(content="go")],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([faux_response("no output type")]),
    )
    assert not plain.has_output
    with pytest.raises(OutputError, match="the run had no output type"):
        print(plain.output)


async def test_the_prompted_agent_decides_the_approvals_of_the_target() -> None:
    def refund(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text="refunded")])

    target = Agent(
        name="t",
        tools=[AgentTool("refund", "Refund.", {"type": "object"}, refund, requires_approval=True)],
        stream_fn=FauxProvider(
            [faux_response(tool_calls=[faux_tool_call("refund", {}, id="r1")]), faux_response("ok")]
        ),
    )
    source = Agent(
        tools=[handoff(target)], stream_fn=FauxProvider([transfer("transfer_to_t", "h1")])
    )
    events: list[Any] = []

    def approve(event: Any, signal: Any) -> None:
        events.append(event)
        if event.type == "approval_requested":
            assert [r.tool_call_id for r in source.state.pending_approvals] == ["r1"]
            source.approve(event.tool_call_id, decided_by="test")

    source.subscribe(approve)
    messages = await source.prompt("refund")
    assert texts(messages)[-2:] == ["refunded", "ok"]
    assert [e.agent for e in check_chain(events, messages)] == ["agent", "t"]
