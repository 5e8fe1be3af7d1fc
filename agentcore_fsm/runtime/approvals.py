"""What the driver makes of an approver's answer (``decide_approval``), as the machine's input."""

from __future__ import annotations

from typing import Any

from agentcore_fsm.core.approval import ApprovalDecision
from agentcore_fsm.core.boundary import describe_value, exc_text
from agentcore_fsm.core.protocol import ApprovalDecided

__all__ = ["decision"]


def decision(index: int, value: Any, suspendable: bool, timestamp: int = 0) -> ApprovalDecided:
    """What ``decide_approval`` returned, as the machine's input (stamped ``timestamp``): an
    :class:`~agentcore_fsm.core.approval.ApprovalDecision` (or a dict of its fields), a bool;
    junk is a denial whose reason says what was wrong."""
    if isinstance(value, bool):
        return ApprovalDecided(index, value, None, "user", timestamp=timestamp)
    if isinstance(value, dict):
        try:
            value = ApprovalDecision.model_validate(value)
        except Exception as exc:
            reason = f"decide_approval returned an invalid decision: {exc_text(exc)}"
            return ApprovalDecided(index, False, reason, "error", timestamp=timestamp)
    if isinstance(value, ApprovalDecision):
        return ApprovalDecided(
            index, value.approved, value.reason, value.decided_by, value.args, timestamp=timestamp
        )
    expected = "an ApprovalDecision, a dict with its fields, a bool"
    if value is None:
        reason = (
            "decide_approval returned None (no decision), which only a journaled run can wait "
            "for (store=...)"
        )
    else:
        reason = f"decide_approval returned {describe_value(value)}; expected {expected}" + (
            " or None" if suspendable else ""
        )
    return ApprovalDecided(index, False, reason, "error", timestamp=timestamp)
