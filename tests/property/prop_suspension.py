"""Suspension, stepped by hand: the declared ``suspend_when`` guard of ``awaiting_approval``.

A run that may suspend (a journaled run) is told, per waiting tool call, that no decision is
coming in this process (``ApprovalDeferred``); once every call that waits is so, the machine's
state's ``suspend_when`` guard (``approvals_deferred``) holds and the step asks for a
:class:`~agentcore_fsm.core.protocol.Suspend` effect with their requests, in source order; the
machine stays in ``awaiting_approval`` (where a resumed run is too). Each
run here checks its steps against what the declaration says and raises AssertionError when they
differ; ``test_declaration_coverage`` counts their transitions and ``test_mutants`` runs them
against every loop mutant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from helpers import MODEL, make_tool, user

from agentcore_fsm import AgentContext, AgentLoopConfig, AssistantMessage, LoopMachine, ToolCall
from agentcore_fsm.core.approval import ApprovalRequest
from agentcore_fsm.core.declaration import Declaration
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.events import StreamDone
from agentcore_fsm.core.protocol import (
    Abort,
    ApprovalDecided,
    ApprovalDeferred,
    AwaitApproval,
    ExecuteTool,
    Step,
    Suspend,
)
from agentcore_fsm.devtools.testing import GrammarChecker

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"x": {"type": "integer"}},
    "required": ["x"],
}
ASK = make_tool("ask", parameters=SCHEMA, requires_approval=True)
PLAIN = make_tool("plain", parameters=SCHEMA)
REASON = 'Tool "ask" requires approval'


def request(cid: str, x: int) -> ApprovalRequest:
    return ApprovalRequest(tool_call_id=cid, tool_name="ask", args={"x": x}, reason=REASON)


class Run:
    """One loop machine stepped by hand, every event through the grammar checker."""

    def __init__(
        self,
        decl: Declaration | None,
        observer: Callable[[TransitionRecord], None] | None,
        *calls: tuple[str, str],
    ) -> None:
        config = AgentLoopConfig(model=MODEL)
        self.m = LoopMachine(
            [user("go")],
            AgentContext("sys", [], [ASK, PLAIN]),
            config,
            declaration=decl,
        )
        self.observer = observer
        self.checker = GrammarChecker()
        self.feed_step(self.m.start())
        assert self.m.state == "streaming", self.m.state
        message = AssistantMessage(
            content=[
                ToolCall(id=cid, name=name, arguments={"x": i})
                for i, (cid, name) in enumerate(calls)
            ],
            api=MODEL.api,
            provider=MODEL.provider,
            model=MODEL.id,
            stop_reason="toolUse",
        )
        self.step = self.feed_step(
            self.m.stream_event(StreamDone(reason="toolUse", message=message))
        )

    def feed_step(self, step: Step) -> Step:
        if self.observer is not None:
            for record in step.transitions:
                self.observer(record)
        self.checker.feed_all(step.events)
        return step

    def feed(self, item: Any) -> Step:
        return self.feed_step(self.m.feed(item))


def suspended_here(m: LoopMachine) -> None:
    """Suspending takes no transition: the machine stays where it waited."""
    assert m.state == "awaiting_approval" and m.suspends()
    assert m.history[-1].dest == "awaiting_approval", m.history[-1]


def _one_call_deferred(decl: Declaration | None, observer: Any) -> None:
    r = Run(decl, observer, ("c1", "ask"))
    m = r.m
    assert r.step.effects == [AwaitApproval(0, request("c1", 0))], r.step.effects
    step = r.feed(ApprovalDeferred(0))
    assert step.events == [], step.events
    assert step.effects == [Suspend([request("c1", 0)])], step.effects
    assert m.state == "awaiting_approval" and not m.finished
    suspended_here(m)
    assert m.vars.deferred_calls == [0]
    # the machine is not stopped: an abort still closes the batch and the run
    step = r.feed(Abort())
    assert m.finished and m.end_reason == "aborted", (m.state, m.end_reason)
    assert [e.type for e in step.events][-1] == "agent_end"
    r.checker.close(m.new_messages)


def _waits_for_the_other_decision(decl: Declaration | None, observer: Any) -> None:
    r = Run(decl, observer, ("c1", "ask"), ("c2", "ask"), ("c3", "plain"))
    m = r.m
    assert r.step.effects == [
        AwaitApproval(0, request("c1", 0)),
        AwaitApproval(1, request("c2", 1)),
    ], r.step.effects
    step = r.feed(ApprovalDeferred(1))
    assert step.effects == [] and step.events == [], step  # c1's decision may still come
    assert m.state == "awaiting_approval"
    step = r.feed(ApprovalDecided(0, True, "fine", "alice"))
    assert [e.type for e in step.events] == ["approval_decided"], step.events
    assert step.effects == [Suspend([request("c2", 1)])], step.effects
    assert m.state == "awaiting_approval" and not m.finished
    suspended_here(m)
    assert [c.state for c in m.calls] == ["ready", "awaiting_approval", "ready"]


def _a_decision_after_suspending_goes_on(decl: Declaration | None, observer: Any) -> None:
    r = Run(decl, observer, ("c1", "ask"))
    m = r.m
    step = r.feed(ApprovalDeferred(0))
    assert step.effects == [Suspend([request("c1", 0)])], step.effects
    # the same machine, given the decision after all (a resumed run asks again): it runs
    step = r.feed(ApprovalDecided(0, True, None, "bob"))
    assert m.state == "executing", m.state
    assert [type(e) for e in step.effects] == [ExecuteTool], step.effects
    assert m.vars.deferred_calls == [0]


def _a_denial_of_the_other_call_suspends_too(decl: Declaration | None, observer: Any) -> None:
    r = Run(decl, observer, ("c1", "ask"), ("c2", "ask"))
    m = r.m
    r.feed(ApprovalDeferred(0))
    step = r.feed(ApprovalDecided(1, False, "no", "alice"))
    assert [e.type for e in step.events] == [
        "approval_decided",
        "tool_execution_end",
    ], step.events
    assert step.effects == [Suspend([request("c1", 0)])], step.effects
    assert m.state == "awaiting_approval"
    suspended_here(m)


SUSPENSION_RUNS: dict[str, Callable[[Declaration | None, Any], None]] = {
    "one call deferred": _one_call_deferred,
    "waits for the other decision": _waits_for_the_other_decision,
    "a decision after suspending goes on": _a_decision_after_suspending_goes_on,
    "a denial of the other call suspends too": _a_denial_of_the_other_call_suspends_too,
}


def suspension_runs(
    decl: Declaration | None = None, observer: Callable[[TransitionRecord], None] | None = None
) -> None:
    """Every run above on the loop declaration ``decl`` (the shipped one by default); raises
    AssertionError at the first step that is not what the declaration says."""
    for run in SUSPENSION_RUNS.values():
        run(decl, observer)
