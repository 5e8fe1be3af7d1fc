"""An outer Agent's listener may decide a nested call's approval as soon as its nested
``approval_requested`` event arrives, before the inner run's request has reached the Agent's
approval desk (the event and the request travel separately): the decision is kept for it."""

from __future__ import annotations

import anyio
import pytest

from agentcore_fsm import Agent
from agentcore_fsm.agent.approvals import ApprovalDesk
from agentcore_fsm.core.abort import AbortController
from agentcore_fsm.core.approval import ApprovalDecision, ApprovalRequest
from agentcore_fsm.core.events import ApprovalRequestedEvent, ToolExecutionUpdateEvent
from agentcore_fsm.core.nesting import NestedEvent
from agentcore_fsm.core.tools import AgentToolResult


def _announced(inner_id: str) -> ToolExecutionUpdateEvent:
    inner = ApprovalRequestedEvent(tool_call_id=inner_id, tool_name="refund", args={"eur": 30})
    nested = NestedEvent(path=("c1",), agents=("clerk",), event=inner)
    return ToolExecutionUpdateEvent(
        tool_call_id="c1", tool_name="clerk", partial_result=AgentToolResult(details=nested)
    )


def test_a_decision_before_the_nested_request_arrives_is_kept_for_it() -> None:
    desk = ApprovalDesk(Agent().state)
    with pytest.raises(ValueError, match="no tool call 'f1' waits for approval"):
        desk.decide("f1", ApprovalDecision(approved=True))  # nothing announced it
    desk.note_update(_announced("f1"))
    decision = ApprovalDecision(approved=True, decided_by="manager")
    desk.decide("f1", decision)
    with pytest.raises(ValueError, match="decided already"):
        desk.decide("f1", ApprovalDecision(approved=False))
    request = ApprovalRequest(tool_call_id="f1", tool_name="refund", args={"eur": 30})

    async def ask() -> object:
        with anyio.fail_after(5):  # the kept decision comes back at once
            return await desk.decide_for_run(request, AbortController().signal)

    assert anyio.run(ask) is decision


def test_the_run_end_forgets_what_was_announced() -> None:
    desk = ApprovalDesk(Agent().state)
    desk.note_update(_announced("f1"))
    desk.clear()
    with pytest.raises(ValueError, match="no tool call 'f1' waits for approval"):
        desk.decide("f1", ApprovalDecision(approved=True))
