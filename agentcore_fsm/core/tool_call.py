"""One tool call's machine (``states/tool_call.toml``): begin, prepare, check, run, review, answer.

A :class:`ToolCallMachine` belongs to the :class:`~agentcore_fsm.core.machine.LoopMachine` of its
run; the loop offers it its triggers in the order the declaration describes and feeds it the
outcomes of its effects. Its guards, emit actions and effects are the small methods below; the
events it emits and the effects it asks for go into the loop's current step. Pure: it never calls
user code (``prepare_arguments``, the hooks and ``execute`` are effects the driver performs).

The call sees its loop only through :class:`CallOwner`, a small typed interface the loop machine
satisfies: what the call reads (the run's context and configuration, the assistant message whose
call it is, the time of the input being handled, whether it may begin or answer yet) and where
what it produces goes (an event, an effect, its result message). This module does not import
the loop's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from agentcore_fsm.core.approval import ApprovalRequest, denied_text
from agentcore_fsm.core.boundary import describe_value, exc_text
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig
from agentcore_fsm.core.declared import DeclaredMachine
from agentcore_fsm.core.events import (
    AgentEvent,
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)
from agentcore_fsm.core.messages import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
)
from agentcore_fsm.core.protocol import (
    ApprovalDecided,
    AwaitApproval,
    BackOff,
    CallHook,
    CheckApproval,
    Effect,
    ExecuteTool,
    PrepareArguments,
)
from agentcore_fsm.core.retry import timeout_text
from agentcore_fsm.core.tools import (
    AfterToolCallContext,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    ToolCallRejected,
    error_result,
    find_tool,
    validate_arguments,
)

__all__ = ["ABORTED_TEXT", "TRUNCATED_TEXT", "CallOwner", "CallVars", "ToolCallMachine"]

ABORTED_TEXT = "Operation aborted"
TRUNCATED_TEXT = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its '
    "arguments may be truncated. Re-issue the tool call with complete arguments."
)

# states in which a call has started and not ended
STARTED = frozenset(
    {"preparing", "checking", "approving", "awaiting_approval", "ready", "running", "reviewing"}
)
# states in which a call is prepared or further along (a call waiting for approval is prepared:
# in parallel mode the next call begins meanwhile)
PREPARED = frozenset({"awaiting_approval", "ready", "running", "reviewing", "ended", "answered"})
# a call waiting between two attempts (its tool's retry policy) has started and is prepared
STARTED = STARTED | {"backing_off"}
PREPARED = PREPARED | {"backing_off"}
RETRY_TEXT = "Attempt {attempt} of {attempts} failed: {error}; retrying"
"""The text of the tool_execution_update that says a failed attempt is tried again."""
APPROVAL_REASON = 'Tool "{name}" requires approval'
"""The reason of an approval request made because the tool requires it."""


class CallOwner(Protocol):
    """The loop a :class:`ToolCallMachine` belongs to, as the call sees it (the
    :class:`~agentcore_fsm.core.machine.LoopMachine` satisfies it)."""

    @property
    def context(self) -> AgentContext:
        """The run's context (its tools: where the call's tool is looked up)."""
        ...

    @property
    def config(self) -> AgentLoopConfig:
        """The run's configuration (its tool hooks)."""
        ...

    @property
    def assistant_message(self) -> AssistantMessage | None:
        """The assistant message whose tool call this is, once it ended."""
        ...

    @property
    def now(self) -> int:
        """The timestamp (ms) of the input being handled: the call's result message's."""
        ...

    def may_begin_call(self, index: int) -> bool:
        """Whether call ``index`` may begin now (the sequential/parallel policy)."""
        ...

    def may_answer_call(self, index: int) -> bool:
        """Whether call ``index`` may append its result message now (source order)."""
        ...

    def emit_event(self, event: AgentEvent) -> None:
        """Add ``event`` to the current step's events."""
        ...

    def request_effect(self, effect: Effect) -> None:
        """Add ``effect`` to the current step's effects."""
        ...

    def append_message(self, message: AgentMessage) -> None:
        """Add ``message`` to the run's transcript (with its message_start/end events)."""
        ...


@dataclass(slots=True)
class CallVars:
    """A tool call's declared variables (``[variables]`` of ``states/tool_call.toml``: type,
    initial value, meaning and setters are declared there): what its guards read besides its
    state, its loop and the configuration. Written only by the declared setters."""

    tool: AgentTool | None
    valid: bool
    prepare_error: BaseException | None
    rejection: str | None
    approval_asked: bool
    approval_check: bool | None
    approval_error: str | None
    decision: ApprovalDecided | None
    finished_after_abort: bool
    repeated: bool
    attempt: int
    retrying: bool


class ToolCallMachine(DeclaredMachine):
    """The machine of tool call ``index`` of the loop's current assistant message."""

    declaration_name = "tool_call"
    variables_class = CallVars
    vars: CallVars
    data_attributes: ClassVar[frozenset[str]] = frozenset(
        {
            "state",
            "history",
            "fired",
            # the arguments as they go, the outcome, the result message, the approval request
            "raw",
            "args",
            "rejection_terminates",
            "result",
            "is_error",
            "message",
            "approval_reason",
            "request",
            # the run's tool policy refuses this call as a repeat: the text (None: it does not)
            "repeat_text",
        }
    )

    repeat_text: str | None = None
    """Set by the loop when the run's tool policy refuses this call as a repeat: the text of
    its error result (a class default: a call the policy does not refuse stores nothing)."""

    def __init__(self, loop: CallOwner, index: int, call: ToolCall, declaration: Any) -> None:
        super().__init__(declaration)
        self.loop = loop
        self.index = index
        self.call = call
        # what decides the call's path besides its state is in self.vars (CallVars, declared
        # in tool_call.toml); the rest is data
        self.raw: Any = None  # the arguments to validate (a copy; after prepare_arguments)
        self.args: Any = None  # the validated arguments
        self.rejection_terminates = False  # before_tool_call blocked it with terminate=True
        self.result: AgentToolResult | None = None
        self.is_error = False
        self.message: ToolResultMessage | None = None
        self.approval_reason: str | None = None  # before_tool_call's reason to ask
        self.request: ApprovalRequest | None = None

    # the declared variables, read as attributes too
    @property
    def tool(self) -> AgentTool | None:
        """The call's tool, once ``begin`` looked it up (None: not yet, or not found)."""
        return self.vars.tool

    @property
    def rejection(self) -> str | None:
        """Why the call ended before running (None: it did not)."""
        return self.vars.rejection

    @property
    def decision(self) -> ApprovalDecided | None:
        """The approval decision taken, if any."""
        return self.vars.decision

    @property
    def started(self) -> bool:
        return self.state != "new"

    # --- outcomes fed by the loop ---------------------------------------------------------
    # The guards only read (docs/reference.md, "Guards only read"): what the call learns from
    # an input (the tool looked up, the arguments copied and validated, a rejection's text) is
    # written here, by the input's handler, before the machine fires or offers the trigger.

    def begin(self) -> bool:
        """Offer ``begin`` (the loop does, in source order). Once the loop lets this call begin
        (``may_begin``), its tool is looked up and its arguments copied and, when they are
        final (the tool has no ``prepare_arguments``), validated, first; the declared guards
        (``may_begin`` among them) then choose the transition. True if one was taken."""
        v = self.vars
        if v.tool is None and v.rejection is None and self.loop.may_begin_call(self.index):
            try:
                tool = find_tool(self.loop.context.tools, self.call.name)
            except ToolCallRejected as exc:
                self.set_var("begin", "rejection", str(exc))
            else:
                self.set_var("begin", "tool", tool)
                # a copy: prepare_arguments, before_tool_call and the tool may mutate the
                # arguments; the assistant message's tool call must not change
                self.raw = _json_copy(self.call.arguments)
                if tool.prepare_arguments is None:
                    self._validate("begin")
        repeat = self.repeat_text
        if repeat is not None and not v.repeated and self.loop.may_begin_call(self.index):
            self.set_var("begin", "repeated", True)  # refused as a repeat: it never runs
            self.set_var("begin", "rejection", repeat)
        return self.offer("begin")

    def prepared(self, value: Any, error: BaseException | None) -> None:
        if error is not None:
            self.set_var("arguments_prepared", "prepare_error", error)
            self.set_var("arguments_prepared", "rejection", exc_text(error))
        else:
            self.raw = value
            self._validate("arguments_prepared")
        self.fire("arguments_prepared")

    def before_returned(
        self, blocked: str | None, approval: str | None = None, *, terminate: bool = False
    ) -> None:
        """``blocked``: the rejection text; ``approval``: the hook asked for approval, with
        this reason; ``terminate``: the block's result counts as terminating."""
        self.set_var("before_returned", "rejection", blocked)
        self.rejection_terminates = terminate and blocked is not None
        if approval is not None and blocked is None:
            self.set_var("before_returned", "approval_asked", True)
            self.approval_reason = approval
        self.fire("before_returned")

    def approval_checked(self, needed: Any, error: BaseException | None) -> None:
        name = self.call.name
        problem: str | None = None
        if error is not None:
            problem = f'requires_approval of tool "{name}" raised: {exc_text(error)}'
        elif isinstance(needed, bool):
            self.set_var("approval_checked", "approval_check", needed)
        else:
            problem = (
                f'requires_approval of tool "{name}" returned {describe_value(needed)}; '
                f"expected a bool"
            )
        if problem is not None:
            self.set_var("approval_checked", "approval_error", problem)
            # the text of the call's end (rejected_end)
            self.set_var("approval_checked", "rejection", problem)
        self.fire("approval_checked")

    def decided(self, decision: ApprovalDecided) -> None:
        self.set_var("decided", "decision", decision)
        if decision.approved and decision.args is not None:
            self.raw = _json_copy(decision.args)  # the approver's arguments, validated again
            self._validate("decided")
        self.fire("decided")

    def tool_finished(self, result: AgentToolResult, is_error: bool, after_abort: bool) -> None:
        self.result, self.is_error = result, is_error
        self.set_var("finished", "finished_after_abort", after_abort)
        self.fire("finished")

    def attempt_failed(self, error: BaseException) -> None:
        """The running attempt raised ``error``, a failure the tool's retry policy retries
        (the driver classified it): back off when the policy applies to this tool and attempts
        remain, else end with the error (naming the attempts when there were several)."""
        text = exc_text(error)
        self._failed_attempt("attempt_failed", text, retry_timeouts_only=False)
        self.fire("attempt_failed")

    def timed_out(self) -> None:
        """The running attempt outlived the tool's ``timeout_s`` and was cancelled."""
        tool = self.vars.tool
        assert tool is not None and tool.timeout_s is not None
        text = timeout_text(self.call.name, tool.timeout_s)
        self._failed_attempt("timed_out", text, retry_timeouts_only=True)
        self.fire("timed_out")

    def retry_due(self) -> None:
        """The backoff is over: the next attempt runs."""
        self.set_var("retry_due", "attempt", self.vars.attempt + 1)
        self.fire("retry_due")

    def _failed_attempt(self, by: str, text: str, *, retry_timeouts_only: bool) -> None:
        tool = self.vars.tool
        assert tool is not None
        policy = tool.retry
        attempt = self.vars.attempt
        retrying = (
            policy is not None
            and policy.applies_to(tool.idempotent)
            and attempt < policy.max_attempts
            and (policy.retry_timeouts or not retry_timeouts_only)
        )
        self.set_var(by, "retrying", retrying)
        if attempt > 1 and not retrying:
            text = f"{text} (attempt {attempt}, the last)"
        self.result, self.is_error = error_result(text), True

    def after_returned(self, result: AgentToolResult, is_error: bool) -> None:
        self.result, self.is_error = result, is_error
        self.fire("after_returned")

    def _validate(self, by: str) -> None:
        """Validate ``raw`` (the arguments as they now stand) into ``args``; on failure
        ``rejection`` says why. Called where the arguments become known: at ``begin`` (a tool
        without ``prepare_arguments``), when ``prepare_arguments`` returned, when the approver
        changed them. The guard ``arguments_valid`` reads the outcome."""
        tool = self.vars.tool
        assert tool is not None
        self.set_var(by, "valid", False)
        try:
            self.args = validate_arguments(tool, self.raw)
            self.set_var(by, "valid", True)
        except ToolCallRejected as exc:
            self.set_var(by, "rejection", str(exc))
        except Exception as exc:  # formatting junk arguments failed: still name the tool
            text = f'Validation failed for tool "{self.call.name}": {exc_text(exc)}'
            self.set_var(by, "rejection", text)

    # --- guards ---------------------------------------------------------------------------
    # Each reads the call's declared variables (self.vars; the declaration's `reads` says
    # which), its loop (through CallOwner) and the configuration, and returns a bool; none
    # writes anything (tests/property/test_pure_guards.py).

    def _guard_may_begin(self) -> bool:
        return self.loop.may_begin_call(self.index)

    def _guard_tool_found(self) -> bool:
        return self.vars.tool is not None

    def _guard_has_prepare(self) -> bool:
        return self.vars.tool is not None and self.vars.tool.prepare_arguments is not None

    def _guard_arguments_valid(self) -> bool:
        return self.vars.valid

    def _guard_prepare_failed(self) -> bool:
        return self.vars.prepare_error is not None

    def _guard_has_before_hook(self) -> bool:
        return self.loop.config.before_tool_call is not None

    def _guard_blocked(self) -> bool:
        return self.vars.rejection is not None

    def _guard_has_approval_check(self) -> bool:
        tool = self.vars.tool
        return (
            tool is not None and callable(tool.requires_approval) and not self.vars.approval_asked
        )

    def _guard_approval_check_failed(self) -> bool:
        return self.vars.approval_error is not None

    def _guard_needs_approval(self) -> bool:
        tool = self.vars.tool
        return (
            self.vars.approval_asked
            or self.vars.approval_check is True
            or (tool is not None and tool.requires_approval is True)
        )

    def _guard_approved(self) -> bool:
        return self.vars.decision is not None and self.vars.decision.approved

    def _guard_has_after_hook(self) -> bool:
        return self.loop.config.after_tool_call is not None and not self.vars.finished_after_abort

    def _guard_may_answer(self) -> bool:
        return self.loop.may_answer_call(self.index)

    def _guard_repeated(self) -> bool:
        return self.vars.repeated

    def _guard_will_retry(self) -> bool:
        return self.vars.retrying

    # --- emit actions ---------------------------------------------------------------------

    def _emit_execution_start(self) -> None:
        call = self.call
        self.loop.emit_event(
            ToolExecutionStartEvent(tool_call_id=call.id, tool_name=call.name, args=call.arguments)
        )

    def _end(self, result: AgentToolResult, is_error: bool) -> None:
        self.result, self.is_error = result, is_error
        call = self.call
        self.loop.emit_event(
            ToolExecutionEndEvent(
                tool_call_id=call.id, tool_name=call.name, result=result, is_error=is_error
            )
        )

    def _emit_rejected_end(self) -> None:
        result = error_result(self.vars.rejection or "Tool execution was blocked")
        if self.rejection_terminates:
            result.terminate = True
        self._end(result, True)

    def _emit_end(self) -> None:
        assert self.result is not None
        self._end(self.result, self.is_error)

    def _emit_aborted_end(self) -> None:
        self._end(error_result(ABORTED_TEXT), True)

    def _emit_truncated_end(self) -> None:
        self._end(error_result(TRUNCATED_TEXT.format(name=self.call.name)), True)

    def _emit_attempt_update(self) -> None:
        tool = self.vars.tool
        result = self.result
        assert tool is not None and tool.retry is not None and result is not None
        error = result.content[0].text if result.content else ""  # type: ignore[union-attr]
        attempts = tool.retry.max_attempts
        attempt = self.vars.attempt
        text = RETRY_TEXT.format(attempt=attempt, attempts=attempts, error=error)
        partial = AgentToolResult(
            content=[TextContent(text=text)],
            details={"attempt": attempt, "max_attempts": attempts, "error": error},
        )
        call = self.call
        self.loop.emit_event(
            ToolExecutionUpdateEvent(
                tool_call_id=call.id, tool_name=call.name, args=self.args, partial_result=partial
            )
        )

    def _emit_approval_requested(self) -> None:
        call = self.call
        reason = self.approval_reason
        if not self.vars.approval_asked:
            reason = APPROVAL_REASON.format(name=call.name)
        request = ApprovalRequest(
            tool_call_id=call.id, tool_name=call.name, args=self.args, reason=reason
        )
        self.request = request
        self.loop.emit_event(
            ApprovalRequestedEvent(
                tool_call_id=call.id, tool_name=call.name, args=request.args, reason=reason
            )
        )

    def _emit_approval_decided(self) -> None:
        decision = self.vars.decision
        assert decision is not None
        call = self.call
        if not decision.approved:
            self.set_var("approval_decided", "rejection", denied_text(call.name, decision.reason))
        self.loop.emit_event(
            ApprovalDecidedEvent(
                tool_call_id=call.id,
                tool_name=call.name,
                approved=decision.approved,
                reason=decision.reason,
                decided_by=decision.decided_by,
                args=decision.args if decision.approved else None,
            )
        )

    def _emit_aborted_decision(self) -> None:
        call = self.call
        self.loop.emit_event(
            ApprovalDecidedEvent(
                tool_call_id=call.id,
                tool_name=call.name,
                approved=False,
                reason=ABORTED_TEXT,
                decided_by="abort",
            )
        )

    def _emit_result_message(self) -> None:
        result = self.result
        assert result is not None
        call = self.call
        if (  # the common result: its defaults left unset (a smaller message, the same value)
            result.details is None
            and result.usage is None
            and result.added_tool_names is None
            and not self.is_error
        ):
            message = ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=result.content,
                timestamp=self.loop.now,
            )
        else:
            message = ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=result.content,
                details=result.details,
                usage=result.usage,
                added_tool_names=result.added_tool_names,
                is_error=self.is_error,
                timestamp=self.loop.now,
            )
        self.message = message
        self.loop.append_message(message)

    # --- effects --------------------------------------------------------------------------

    def _effect_prepare_arguments(self) -> None:
        assert self.vars.tool is not None
        self.loop.request_effect(PrepareArguments(self.index, self.vars.tool, self.raw))

    def _effect_before_tool_call(self) -> None:
        loop = self.loop
        message = loop.assistant_message
        assert message is not None
        ctx = BeforeToolCallContext(
            assistant_message=message, tool_call=self.call, args=self.args, context=loop.context
        )
        loop.request_effect(CallHook("before_tool_call", ctx, self.index))

    def _effect_check_approval(self) -> None:
        assert self.vars.tool is not None
        self.loop.request_effect(CheckApproval(self.index, self.vars.tool, self.args))

    def _effect_await_approval(self) -> None:
        assert self.request is not None
        self.loop.request_effect(AwaitApproval(self.index, self.request))

    def _effect_execute(self) -> None:
        assert self.vars.tool is not None
        self.loop.request_effect(ExecuteTool(self.index, self.vars.tool, self.call, self.args))

    def _effect_back_off(self) -> None:
        assert self.vars.tool is not None
        self.loop.request_effect(BackOff(self.index, self.vars.tool, self.vars.attempt))

    def _effect_after_tool_call(self) -> None:
        loop = self.loop
        message = loop.assistant_message
        assert message is not None and self.result is not None
        ctx = AfterToolCallContext(
            assistant_message=message,
            tool_call=self.call,
            args=self.args,
            result=self.result,
            is_error=self.is_error,
            context=loop.context,
        )
        loop.request_effect(CallHook("after_tool_call", ctx, self.index))


def _json_copy(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts, lists, scalars): several times cheaper than
    ``copy.deepcopy``; anything else falls back to it."""
    cls = value.__class__
    if cls is dict:
        return {k: _json_copy(v) for k, v in value.items()}
    if cls is list:
        return [_json_copy(v) for v in value]
    if cls in (str, int, float, bool) or value is None:
        return value
    return copy.deepcopy(value)
