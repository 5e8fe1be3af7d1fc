"""Human approval of tool calls, through the driver and the Agent, on both backends
(docs/reference.md#approval-of-tool-calls).

A call that needs approval (``AgentTool(requires_approval=...)`` or ``before_tool_call``'s
``require_approval``) waits in ``awaiting_approval`` until a decision comes: from
``AgentLoopConfig.decide_approval``, an Agent's ``approve``/``deny``, a timeout, or an abort.
Every run here is checked against the event grammar (the ``A.*`` rules included). The stepping
tests of the same paths are in tests/test_approval_stepping.py; the cross-process wait in
tests/test_approval_process.py.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from helpers import MODEL, text_of

from agentcore_fsm import (
    AbortController,
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    BeforeToolCallResult,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.approval import (
    NO_APPROVER_TEXT,
    ApprovalDecision,
    ApprovalRequest,
    RunSuspended,
    denied_text,
)
from agentcore_fsm.devtools.testing import EventRecorder, check_resumed_run, check_run
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.store import MemoryRunStore
from agentcore_fsm.runtime.resume import resume_run

pytestmark = pytest.mark.anyio

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"eur": {"type": "integer"}},
    "required": ["eur"],
}


class Ledger:
    """Tools that record their executions: ``pay`` (needs approval unless told otherwise) and
    ``look`` (never)."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, Any]] = []

    def tools(self, requires_approval: Any = True) -> list[AgentTool]:
        async def pay(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
            self.ran.append((call_id, dict(args)))
            return AgentToolResult(content=[TextContent(text=f"paid {args['eur']}")])

        async def look(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
            self.ran.append((call_id, dict(args)))
            return AgentToolResult(content=[TextContent(text="looked")])

        return [
            AgentTool("pay", "pays", SCHEMA, pay, requires_approval=requires_approval),
            AgentTool("look", "looks", {"type": "object"}, look),
        ]


def pay_then(*, calls: list[Any] | None = None, answer: str = "done") -> FauxProvider:
    calls = calls or [faux_tool_call("pay", {"eur": 30}, id="a")]
    return FauxProvider([faux_response(tool_calls=calls), faux_response(answer)])


def flow(events: list[Any]) -> list[str]:
    """The tool and approval events of a run, with their call id (and the decision)."""
    out = []
    for e in events:
        if e.type.startswith("tool_execution_") and e.type != "tool_execution_update":
            out.append(
                f"{e.type}:{e.tool_call_id}" + (":error" if getattr(e, "is_error", 0) else "")
            )
        elif e.type == "approval_requested":
            out.append(f"approval_requested:{e.tool_call_id}")
        elif e.type == "approval_decided":
            verdict = "approved" if e.approved else "denied"
            out.append(f"approval_decided:{e.tool_call_id}:{verdict}:{e.decided_by}")
    return out


async def loop(
    tools: list[AgentTool], stream_fn: Any, signal: Any = None, **config: Any
) -> tuple[list[Any], list[Any]]:
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [UserMessage(content="pay")],
        AgentContext(tools=tools),
        AgentLoopConfig(model=MODEL, **config),
        recorder,
        stream_fn=stream_fn,
        signal=signal,
    )
    check_run(recorder.events, messages, tool_execution=config.get("tool_execution"))
    return messages, recorder.events


def result_of(messages: list[Any], call_id: str) -> Any:
    return next(m for m in messages if getattr(m, "tool_call_id", None) == call_id)


# --- deciding -------------------------------------------------------------------------------


async def test_an_approved_call_runs_after_its_decision() -> None:
    ledger = Ledger()
    requests: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest, signal: Any) -> bool:
        requests.append(request)
        assert ledger.ran == []  # nothing ran before the decision
        return True

    messages, events = await loop(ledger.tools(), pay_then(), decide_approval=decide)
    assert requests == [
        ApprovalRequest(
            tool_call_id="a",
            tool_name="pay",
            args={"eur": 30},
            reason='Tool "pay" requires approval',
        )
    ]
    assert flow(events) == [
        "tool_execution_start:a",
        "approval_requested:a",
        "approval_decided:a:approved:user",
        "tool_execution_end:a",
    ]
    assert ledger.ran == [("a", {"eur": 30})]
    assert text_of(result_of(messages, "a")) == "paid 30"


async def test_a_denied_call_gets_an_error_result_with_the_reason_and_never_runs() -> None:
    ledger = Ledger()
    decision = ApprovalDecision(approved=False, reason="over budget", decided_by="alice")
    model = pay_then()
    messages, events = await loop(ledger.tools(), model, decide_approval=lambda r, s: decision)
    result = result_of(messages, "a")
    assert result.is_error and text_of(result) == 'Tool call "pay" was denied: over budget'
    assert ledger.ran == []
    decided = next(e for e in events if e.type == "approval_decided")
    assert (decided.approved, decided.reason, decided.decided_by, decided.args) == (
        False,
        "over budget",
        "alice",
        None,
    )
    # the model sees the denial in its next call
    assert model.calls[1].messages[-1].tool_call_id == "a"
    assert text_of(model.calls[1].messages[-1]) == denied_text("pay", "over budget")


async def test_a_denial_without_a_reason_says_so() -> None:
    messages, _ = await loop(Ledger().tools(), pay_then(), decide_approval=lambda r, s: False)
    assert text_of(result_of(messages, "a")) == 'Tool call "pay" was denied: no reason given'


async def test_arguments_changed_by_the_approver_are_validated_and_used() -> None:
    ledger = Ledger()
    decision = ApprovalDecision(approved=True, args={"eur": 20}, decided_by="alice")
    messages, events = await loop(ledger.tools(), pay_then(), decide_approval=lambda r, s: decision)
    assert ledger.ran == [("a", {"eur": 20})]
    assert text_of(result_of(messages, "a")) == "paid 20"
    decided = next(e for e in events if e.type == "approval_decided")
    assert decided.args == {"eur": 20}
    # the assistant message keeps what the model sent
    assert messages[1].tool_calls()[0].arguments == {"eur": 30}


async def test_changed_arguments_that_do_not_validate_end_the_call_with_the_problem() -> None:
    ledger = Ledger()
    decision = ApprovalDecision(approved=True, args={"eur": "thirty"})
    messages, events = await loop(ledger.tools(), pay_then(), decide_approval=lambda r, s: decision)
    result = result_of(messages, "a")
    assert result.is_error
    assert text_of(result).startswith('Validation failed for tool "pay":\n  - eur: ')
    assert ledger.ran == []
    assert flow(events)[-2:] == ["approval_decided:a:approved:user", "tool_execution_end:a:error"]


@pytest.mark.parametrize(
    ("decide", "reason"),
    [
        (None, NO_APPROVER_TEXT),
        (
            lambda r, s: 42,
            "decide_approval returned int 42; expected an ApprovalDecision, a dict "
            "with its fields, a bool",
        ),
        (lambda r, s: {"approved": "maybe"}, None),
        (
            lambda r, s: None,
            "decide_approval returned None (no decision), which only a journaled "
            "run can wait for (store=...)",
        ),
    ],
)
async def test_no_approver_or_a_useless_answer_denies_with_a_clear_reason(
    decide: Any, reason: str | None
) -> None:
    ledger = Ledger()
    messages, events = await loop(ledger.tools(), pay_then(), decide_approval=decide)
    decided = next(e for e in events if e.type == "approval_decided")
    assert not decided.approved and ledger.ran == []
    if reason is None:
        assert decided.reason.startswith("decide_approval returned an invalid decision: ")
        assert "approved" in decided.reason
    else:
        assert decided.reason == reason
    assert decided.decided_by == ("no approver" if decide is None else "error")
    assert text_of(result_of(messages, "a")) == denied_text("pay", decided.reason)


async def test_an_approver_that_raises_denies_naming_the_error() -> None:
    def decide(request: Any, signal: Any) -> Any:
        raise RuntimeError("approval service down")

    messages, events = await loop(Ledger().tools(), pay_then(), decide_approval=decide)
    decided = next(e for e in events if e.type == "approval_decided")
    assert decided.reason == "decide_approval raised: approval service down"
    assert text_of(result_of(messages, "a")) == denied_text("pay", decided.reason)
    assert decided.decided_by == "error"


async def test_a_decision_that_does_not_come_in_time_is_a_denial() -> None:
    async def never(request: Any, signal: Any) -> Any:
        await anyio.sleep(30)

    messages, events = await loop(
        Ledger().tools(), pay_then(), decide_approval=never, approval_timeout_s=0.05
    )
    decided = next(e for e in events if e.type == "approval_decided")
    assert (decided.approved, decided.reason, decided.decided_by) == (
        False,
        "no decision within 0.05 s",
        "timeout",
    )
    assert (
        text_of(result_of(messages, "a")) == 'Tool call "pay" was denied: no decision within 0.05 s'
    )


async def test_an_async_approver_decides_too() -> None:
    async def decide(request: Any, signal: Any) -> ApprovalDecision:
        await anyio.sleep(0)
        return ApprovalDecision(approved=True, decided_by="bot")

    ledger = Ledger()
    _, events = await loop(ledger.tools(), pay_then(), decide_approval=decide)
    assert "approval_decided:a:approved:bot" in flow(events)
    assert ledger.ran == [("a", {"eur": 30})]


# --- asking ---------------------------------------------------------------------------------


async def test_a_callable_decides_per_call_from_the_validated_arguments() -> None:
    ledger = Ledger()
    calls = [
        faux_tool_call("pay", {"eur": 5}, id="small"),
        faux_tool_call("pay", {"eur": 500}, id="big"),
    ]
    seen: list[Any] = []

    def expensive(args: Any) -> bool:
        seen.append(args)
        return bool(args["eur"] > 100)

    messages, events = await loop(
        ledger.tools(expensive), pay_then(calls=calls), decide_approval=lambda r, s: False
    )
    assert text_of(result_of(messages, "small")) == "paid 5"
    assert seen == [{"eur": 5}, {"eur": 500}]
    assert flow(events) == [
        "tool_execution_start:small",
        "tool_execution_start:big",
        "approval_requested:big",
        "approval_decided:big:denied:user",
        "tool_execution_end:big:error",
        "tool_execution_end:small",
    ]
    assert ledger.ran == [("small", {"eur": 5})]


@pytest.mark.parametrize(
    ("check", "text"),
    [
        ("raise", 'requires_approval of tool "pay" raised: no rules loaded'),
        ("junk", "requires_approval of tool \"pay\" returned str 'yes'; expected a bool"),
    ],
)
async def test_a_requires_approval_that_fails_gives_the_call_an_error_result(
    check: str, text: str
) -> None:
    def requires(args: Any) -> Any:
        if check == "raise":
            raise LookupError("no rules loaded")
        return "yes"

    ledger = Ledger()
    messages, events = await loop(ledger.tools(requires), pay_then())
    assert text_of(result_of(messages, "a")) == text
    assert ledger.ran == [] and "approval_requested:a" not in flow(events)


async def test_an_async_requires_approval_is_awaited() -> None:
    async def requires(args: Any) -> bool:
        await anyio.sleep(0)
        return True

    _, events = await loop(Ledger().tools(requires), pay_then(), decide_approval=lambda r, s: True)
    assert "approval_requested:a" in flow(events)


async def test_before_tool_call_can_ask_for_approval_with_its_reason() -> None:
    ledger = Ledger()
    requests: list[ApprovalRequest] = []

    def before(ctx: Any, signal: Any) -> BeforeToolCallResult | None:
        if ctx.tool_call.name == "look":
            return BeforeToolCallResult(require_approval=True, reason="reads private files")
        return None

    def decide(request: ApprovalRequest, signal: Any) -> bool:
        requests.append(request)
        return True

    calls = [faux_tool_call("look", {}, id="l")]
    await loop(
        ledger.tools(False), pay_then(calls=calls), before_tool_call=before, decide_approval=decide
    )
    assert [(r.tool_call_id, r.reason) for r in requests] == [("l", "reads private files")]
    assert ledger.ran == [("l", {})]


def test_requires_approval_must_be_a_bool_or_a_callable() -> None:
    with pytest.raises(
        TypeError, match="tool 'pay': requires_approval must be a bool or a callable"
    ):
        AgentTool("pay", "pays", SCHEMA, lambda *a: None, requires_approval="yes")  # type: ignore[arg-type]


# --- the batch, and abort -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_no_call_of_the_batch_runs_before_every_decision_is_in(mode: str) -> None:
    ledger = Ledger()
    calls = [
        faux_tool_call("look", {}, id="l1"),
        faux_tool_call("pay", {"eur": 1}, id="p1"),
        faux_tool_call("pay", {"eur": 2}, id="p2"),
    ]
    ran_at_decision: list[list[str]] = []

    def decide(request: ApprovalRequest, signal: Any) -> bool:
        ran_at_decision.append([call for call, _ in ledger.ran])
        return request.tool_call_id == "p1"

    messages, events = await loop(
        ledger.tools(), pay_then(calls=calls), decide_approval=decide, tool_execution=mode
    )
    if mode == "parallel":
        assert ran_at_decision == [[], []]  # both asked before anything ran
        got = flow(events)
        assert got[:5] == [
            "tool_execution_start:l1",
            "tool_execution_start:p1",
            "approval_requested:p1",
            "tool_execution_start:p2",
            "approval_requested:p2",
        ]
        # the two decisions come in the order the approvers answered (concurrent); the denied
        # call ends at its decision, the others only once both are in
        rest = got[5:]
        assert sorted(rest) == sorted(
            [
                "approval_decided:p1:approved:user",
                "approval_decided:p2:denied:user",
                "tool_execution_end:p2:error",
                "tool_execution_end:l1",
                "tool_execution_end:p1",
            ]
        )
        assert rest.index("tool_execution_end:p2:error") == (
            rest.index("approval_decided:p2:denied:user") + 1
        )
        last_decision = max(rest.index(x) for x in rest if x.startswith("approval_decided"))
        assert min(rest.index("tool_execution_end:l1"), rest.index("tool_execution_end:p1")) > (
            last_decision
        )
    else:
        assert ran_at_decision == [["l1"], ["l1", "p1"]]  # one call at a time
    assert sorted(call for call, _ in ledger.ran) == ["l1", "p1"]
    assert [getattr(m, "tool_call_id", None) for m in messages if m.role == "toolResult"] == [
        "l1",
        "p1",
        "p2",
    ]


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_an_abort_while_calls_wait_answers_them_operation_aborted(mode: str) -> None:
    controller = AbortController()
    ledger = Ledger()

    async def decide(request: Any, signal: Any) -> Any:
        controller.abort()
        await anyio.sleep(30)

    calls = [faux_tool_call("pay", {"eur": 1}, id="p1"), faux_tool_call("look", {}, id="l1")]
    messages, events = await loop(
        ledger.tools(),
        pay_then(calls=calls),
        signal=controller.signal,
        decide_approval=decide,
        tool_execution=mode,
    )
    assert ledger.ran == []
    decided = next(e for e in events if e.type == "approval_decided")
    assert (decided.approved, decided.reason, decided.decided_by) == (
        False,
        "Operation aborted",
        "abort",
    )
    assert events[-1].type == "agent_end" and events[-1].reason == "aborted"
    for call_id in ("p1", "l1"):
        result = result_of(messages, call_id)
        assert result.is_error and text_of(result) == "Operation aborted"


# --- the Agent ------------------------------------------------------------------------------


async def _until(predicate: Any) -> None:
    with anyio.fail_after(5):
        while not predicate():
            await anyio.sleep(0.001)


async def test_an_agent_shows_pending_approvals_and_takes_decisions() -> None:
    ledger = Ledger()
    calls = [faux_tool_call("pay", {"eur": 1}, id="p1"), faux_tool_call("pay", {"eur": 2}, id="p2")]
    agent = Agent(model=MODEL, tools=ledger.tools(), stream_fn=pay_then(calls=calls))
    recorder = EventRecorder()
    agent.subscribe(recorder)
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.prompt, "pay both")
        await _until(lambda: len(agent.state.pending_approvals) == 2)
        assert [r.tool_call_id for r in agent.state.pending_approvals] == ["p1", "p2"]
        with pytest.raises(
            ValueError, match=r"no tool call 'nope' waits for approval \(waiting: p1, p2\)"
        ):
            agent.approve("nope")
        agent.approve("p1", {"eur": 10}, decided_by="alice")
        with pytest.raises(ValueError, match="'p1' has been decided already"):
            agent.deny("p1")
        agent.deny("p2", "not today")
    assert agent.state.pending_approvals == []
    assert ledger.ran == [("p1", {"eur": 10})]
    assert text_of(
        result_of(agent.messages, "p2")
    ) == 'Tool call "p2" was denied: not today'.replace('"p2"', '"pay"')
    check_run(recorder.events, agent.messages)
    assert "approval_decided:p1:approved:alice" in flow(recorder.events)


async def test_an_agent_aborted_while_waiting_ends_clean() -> None:
    ledger = Ledger()
    agent = Agent(model=MODEL, tools=ledger.tools(), stream_fn=pay_then())
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.prompt, "pay")
        await _until(lambda: agent.state.pending_approvals)
        agent.abort()
    assert agent.state.pending_approvals == [] and ledger.ran == []
    assert text_of(result_of(agent.messages, "a")) == "Operation aborted"


async def test_an_agent_with_a_timeout_denies_what_nobody_decided() -> None:
    agent = Agent(
        model=MODEL, tools=Ledger().tools(), stream_fn=pay_then(), approval_timeout_s=0.05
    )
    await agent.prompt("pay")
    assert text_of(result_of(agent.messages, "a")) == denied_text(
        "pay", "no decision within 0.05 s"
    )


async def test_a_suspended_session_is_decided_and_resumed_by_a_later_agent() -> None:
    store = MemoryRunStore()
    first_ledger, later_ledger = Ledger(), Ledger()
    agent = Agent(
        model=MODEL, tools=first_ledger.tools(), stream_fn=pay_then(), store=store, session_id="s"
    )
    before = EventRecorder()
    agent.subscribe(before)
    returned: list[Any] = []

    async def prompt() -> None:
        returned.extend(await agent.prompt("pay"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(prompt)
        await _until(lambda: agent.state.pending_approvals)
        with pytest.raises(ValueError, match="no tool call 'x' waits"):
            agent.approve("x")
        agent.suspend()
    # prompt() returned the messages so far; the run waits in the store
    assert [m.role for m in returned] == ["user", "assistant"]
    run_id = agent.interrupted_run
    assert run_id is not None and store.load(run_id).status == "running"
    assert [r.tool_call_id for r in agent.state.pending_approvals] == ["a"]
    assert "agent_end" not in [e.type for e in before.events]

    later = Agent(
        model=MODEL,
        tools=later_ledger.tools(),
        stream_fn=FauxProvider([faux_response("paid, thanks")]),
        store=store,
        session_id="s",
    )
    assert later.interrupted_run == run_id
    assert [r.tool_call_id for r in later.state.pending_approvals] == ["a"]
    with pytest.raises(ValueError, match="interrupted"):
        await later.prompt("something else")
    later.approve("a", {"eur": 25}, decided_by="bob")
    after = EventRecorder()
    later.subscribe(after)
    await later.resume()
    assert first_ledger.ran == [] and later_ledger.ran == [("a", {"eur": 25})]
    assert later.interrupted_run is None and later.state.pending_approvals == []
    assert store.load(run_id).status == "finished"
    assert [m.role for m in later.messages] == ["user", "assistant", "toolResult", "assistant"]
    check_resumed_run(before.events, after.events, later.messages)
    assert flow(after.events)[:1] == ["approval_decided:a:approved:bob"]


async def test_suspend_needs_a_store_and_a_waiting_call() -> None:
    agent = Agent(model=MODEL, tools=Ledger().tools(), stream_fn=pay_then())
    with pytest.raises(ValueError, match="only an agent with a run store"):
        agent.suspend()
    stored = Agent(model=MODEL, tools=Ledger().tools(), store=MemoryRunStore())
    with pytest.raises(ValueError, match="no tool call of a running run waits for approval"):
        stored.suspend()


# --- the low-level loop: suspend and resume ---------------------------------------------------


async def test_a_journaled_run_without_a_decision_here_is_suspended_and_resumed() -> None:
    store = MemoryRunStore()
    ledger = Ledger()
    before = EventRecorder()
    with pytest.raises(RunSuspended) as caught:
        await run_agent_loop(
            [UserMessage(content="pay")],
            AgentContext(tools=ledger.tools()),
            AgentLoopConfig(model=MODEL, decide_approval=lambda r, s: None),
            before,
            stream_fn=pay_then(),
            store=store,
            run_id="r1",
        )
    suspended = caught.value
    assert str(suspended) == "run 'r1' is suspended, waiting for approval of: a (pay)"
    assert [r.tool_call_id for r in suspended.pending] == ["a"]
    assert [m.role for m in suspended.messages] == ["user", "assistant"]
    stored = store.load("r1")
    assert stored.status == "running" and stored.owner is None
    # a later process: decide, resume
    after = EventRecorder()
    messages = await resume_run(
        "r1",
        store,
        AgentLoopConfig(model=MODEL, decide_approval=lambda r, s: True),
        after,
        tools=ledger.tools(),
        stream_fn=FauxProvider([faux_response("done")]),
    )
    check_resumed_run(before.events, after.events, messages)
    assert ledger.ran == [("a", {"eur": 30})]
    entries = store.load("r1").entries
    decided = [e for e in entries if e["input"] == "approval_decided"]
    assert decided == [
        {
            "input": "approval_decided",
            "index": 0,
            "approved": True,
            "reason": None,
            "decided_by": "user",
            "args": None,
            "timestamp": decided[0]["timestamp"],
        }
    ]
    assert isinstance(decided[0]["timestamp"], int) and decided[0]["timestamp"] > 0


async def test_a_journaled_decision_is_not_asked_for_again_after_a_crash() -> None:
    store = MemoryRunStore()
    ledger = Ledger()
    await run_agent_loop(
        [UserMessage(content="pay")],
        AgentContext(tools=ledger.tools()),
        AgentLoopConfig(
            model=MODEL,
            decide_approval=lambda r, s: ApprovalDecision(approved=True, args={"eur": 7}),
        ),
        stream_fn=pay_then(),
        store=store,
        run_id="orig",
    )
    stored = store.load("orig")
    cut_at = next(i for i, e in enumerate(stored.entries) if e["input"] == "approval_decided") + 1
    cut = MemoryRunStore()
    cut.create_run("r", stored.header, session_id=None, owner="elsewhere:1:dead", lease_s=-1.0)
    for seq, entry in enumerate(stored.entries[:cut_at]):
        cut.append("r", seq, entry, owner="elsewhere:1:dead", lease_s=-1.0)

    def never_again(request: Any, signal: Any) -> bool:
        raise AssertionError("asked again")

    resumed = Ledger()
    messages = await resume_run(
        "r",
        cut,
        AgentLoopConfig(model=MODEL, decide_approval=never_again),
        tools=resumed.tools(),
        stream_fn=FauxProvider([faux_response("done")]),
    )
    # pay had started (approved, running) without a journaled result: not idempotent, so it
    # is answered as interrupted, and the approver is not asked again
    assert resumed.ran == []
    assert text_of(result_of(messages, "a")).startswith('Tool "pay" was interrupted')
