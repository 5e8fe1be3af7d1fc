"""The approval of an agent's tool calls: the decisions made with :meth:`Agent.approve` and
:meth:`Agent.deny`, handed to the run that waits for them (its ``decide_approval``), or kept
until the run asks (a decision made before a suspended or interrupted run resumes).
See docs/reference.md#approval-of-tool-calls.
"""

from __future__ import annotations

from typing import Any

import anyio

from agentcore_fsm.agent.state import AgentState
from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.approval import ApprovalDecision, ApprovalRequest
from agentcore_fsm.core.nesting import nested_event_of

__all__ = ["ApprovalDesk"]


class _ApprovalWaiter:
    """A call of the running run waiting for :meth:`Agent.approve`/:meth:`Agent.deny`."""

    __slots__ = ("decision", "event")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.decision: ApprovalDecision | None = None


class ApprovalDesk:
    """The decisions of one agent's tool calls. ``suspending``: :meth:`suspend` was called
    during the current run (the calls that wait get no decision: the run suspends)."""

    __slots__ = ("_announced", "_decisions", "_state", "_waiters", "suspending")

    def __init__(self, state: AgentState) -> None:
        self._state = state
        self._waiters: dict[str, _ApprovalWaiter] = {}  # calls of the running run that wait
        self._decisions: dict[str, ApprovalDecision] = {}  # made before the run asks again
        # the calls of nested runs whose approval_requested event came up (the outer run's
        # listeners may decide them before the inner run's request reaches this desk)
        self._announced: set[str] = set()
        self.suspending = False

    def note_update(self, event: Any) -> None:
        """A ``tool_execution_update`` of the run: note the nested calls that ask for
        approval (and forget the decided ones), so that :meth:`decide` accepts a decision for
        one before its request arrives (docs/multi-agent.md)."""
        nested = nested_event_of(event)
        if nested is None:
            return
        inner = nested.event
        if inner.type == "approval_requested":
            self._announced.add(inner.tool_call_id)
        elif inner.type == "approval_decided":
            self._announced.discard(inner.tool_call_id)
            self._decisions.pop(inner.tool_call_id, None)

    def suspend(self) -> None:
        """Give every call that waits no decision: the run suspends."""
        self.suspending = True
        for waiter in list(self._waiters.values()):
            waiter.event.set()  # no decision: the run suspends

    def forget(self, call_id: str) -> None:
        """The call was decided (its ``approval_decided`` event): drop a decision kept for it."""
        self._decisions.pop(call_id, None)

    def clear(self) -> None:
        """The run ended: no decision is kept."""
        self._decisions.clear()
        self._announced.clear()

    def decide(self, call_id: str, decision: ApprovalDecision) -> None:
        """Decide the call ``call_id``: hand the decision to the run that waits for it, or keep
        it for when the run asks (it has not yet, or it resumes later); ``ValueError`` when no
        such call waits or it was decided already."""
        waiter = self._waiters.get(call_id)
        if waiter is not None:
            if waiter.event.is_set():
                raise ValueError(f"tool call {call_id!r} has been decided already")
            waiter.decision = decision
            waiter.event.set()
            return
        if self._state.awaits_approval(call_id) or call_id in self._announced:
            if call_id in self._decisions:
                raise ValueError(f"tool call {call_id!r} has been decided already")
            # applied when the run asks for it (it has not yet, or it resumes later)
            self._decisions[call_id] = decision
            return
        waiting = ", ".join(r.tool_call_id for r in self._state.pending_approvals) or "none"
        raise ValueError(f"no tool call {call_id!r} waits for approval (waiting: {waiting})")

    async def decide_for_run(self, request: ApprovalRequest, signal: AbortSignal) -> Any:
        """The runs' ``decide_approval``: a decision made ahead (before a resume), or the one
        :meth:`Agent.approve`/:meth:`Agent.deny` make; None (no decision) once
        :meth:`suspend` was called."""
        call_id = request.tool_call_id
        decision = self._decisions.pop(call_id, None)
        if decision is not None:
            return decision
        if self.suspending:
            return None
        waiter = self._waiters[call_id] = _ApprovalWaiter()
        try:
            await waiter.event.wait()
        finally:
            if self._waiters.get(call_id) is waiter:
                del self._waiters[call_id]
        return waiter.decision
