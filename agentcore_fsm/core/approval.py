"""Human approval of tool calls: what is asked, what is decided
(docs/reference.md#approval-of-tool-calls).

A tool call needs approval when its tool says so (``AgentTool(requires_approval=True)``, or a
callable ``requires_approval(args) -> bool`` that decides per call) or when ``before_tool_call``
asks for it (``BeforeToolCallResult(require_approval=True, reason=...)``). Such a call waits in
the declared state ``awaiting_approval`` (of its own machine, ``states/tool_call.toml``; the loop
waits with it in ``awaiting_approval`` of ``states/agent_loop.toml``) until a decision arrives:

* from ``AgentLoopConfig.decide_approval(request, signal)`` (sync or async), which returns an
  :class:`ApprovalDecision` (or a bool: ``True`` approves, ``False`` denies), or ``None``: no
  decision in this process, the journaled run is suspended (see :class:`RunSuspended`);
* from an ``Agent``: ``agent.approve(call_id, args=None)`` / ``agent.deny(call_id, reason)``;
* from the clock: with ``approval_timeout_s`` set, a call not decided in time is denied.

Decisions are inputs of the pure machine (:class:`~agentcore_fsm.core.protocol.ApprovalDecided`);
the
driver only waits for them. A journaled run keeps every request and decision, so a run can wait
for days: a later process loads it, applies the decisions and resumes it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DENIED_TEXT",
    "NO_APPROVER_TEXT",
    "TIMEOUT_TEXT",
    "ApprovalDecision",
    "ApprovalRequest",
    "RunSuspended",
    "denied_text",
]

DENIED_TEXT = 'Tool call "{name}" was denied: {reason}'
"""The error result of a denied call (``{reason}``: the decision's reason, or "no reason given")."""
NO_APPROVER_TEXT = (
    "it needs approval and no approver is configured (AgentLoopConfig.decide_approval)"
)
"""The reason of the denial of a call that needs approval in a run that has no approver."""
TIMEOUT_TEXT = "no decision within {seconds:g} s"
"""The reason of the denial of a call whose approval timed out (``approval_timeout_s``)."""


class ApprovalRequest(BaseModel):
    """A tool call waiting for approval: its id, its tool, the arguments as validated (what the
    tool would receive) and why approval is asked (``reason``)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    tool_call_id: str
    tool_name: str
    args: Any = None
    reason: str | None = None


class ApprovalDecision(BaseModel):
    """A decision about one tool call. ``approved``; ``reason`` (shown in the denial's error
    result and in the ``approval_decided`` event); ``decided_by`` (who or what decided: free
    text; the library uses "timeout", "abort" and "no approver"); ``args``: arguments that
    replace the call's (an approver's edit), validated against the tool's parameters again."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    approved: bool
    reason: str | None = None
    decided_by: str = "user"
    args: dict[str, Any] | None = None


class RunSuspended(Exception):
    """A journaled run stopped, unfinished, waiting for approval decisions that this process
    will not make (``decide_approval`` returned None, or ``Agent.suspend()``): the store keeps
    it; ``resume_run`` (or ``Agent.resume()``) continues it once the decisions can be made.
    ``run_id`` names the run, ``pending`` the requests still waiting, ``messages`` the messages
    the run created so far (what ``run_agent_loop`` would have returned)."""

    def __init__(
        self,
        run_id: str | None,
        pending: list[ApprovalRequest],
        messages: list[Any] | None = None,
    ) -> None:
        self.run_id = run_id
        self.pending = list(pending)
        self.messages = list(messages or ())
        calls = ", ".join(f"{r.tool_call_id} ({r.tool_name})" for r in pending) or "none"
        super().__init__(f"run {run_id!r} is suspended, waiting for approval of: {calls}")


def denied_text(name: str, reason: str | None) -> str:
    """The error result text of a denied call of tool ``name``."""
    return DENIED_TEXT.format(name=name, reason=reason or "no reason given")
