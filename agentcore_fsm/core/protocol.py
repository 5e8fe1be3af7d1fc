"""What passes between the sans-IO loop machine and whoever drives it: inputs, effects, steps.

The machine (:class:`~agentcore_fsm.core.machine.LoopMachine`) takes one **input** at a time through
``feed(input)`` and answers with a :class:`Step`: the agent events to emit, in order, and the
**effects** it needs performed next, plus whether the model stream and the run are over. A
driver performs the effects and feeds their outcomes back as inputs; it reads nothing else from
the machine and decides nothing. Inputs are frozen data: a run is its starting data plus the
inputs it was fed, so feeding the same inputs to a fresh machine gives the same steps.

**Time comes in with the inputs.** The machine has no clock: every input carries ``timestamp``
(milliseconds since the epoch, keyword-only), the time its outcome happened, which the driver
stamps (:class:`~agentcore_fsm.runtime.engine.Driver`, with the run's clock). Each message the
machine makes while handling an input (a user message from a polled str or a dict without a
timestamp, a tool's result message, the message that closes a turn cut short) gets that input's
``timestamp``. An input built by hand without one has ``timestamp=0``, and so have the messages
it makes: stepping by hand stays deterministic, and a caller who wants wall-clock times passes
``timestamp=now_ms()`` (:func:`~agentcore_fsm.core.messages.now_ms`).

**A step calls nobody.** ``feed`` runs no callback: the :class:`Step` carries the
``transitions`` it took, and the driver hands them to the run's ``on_transition`` callback and
observers, and a journaled run's new entries to its journal, once ``feed`` has returned (the
transitions before the step's events are delivered, as before).

Effects that run user code name it; each says which input answers it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from agentcore_fsm.core.approval import ApprovalRequest
from agentcore_fsm.core.config import AgentContext
from agentcore_fsm.core.data import Data, Value
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.messages import AssistantMessage, Model, ToolCall
from agentcore_fsm.core.output import OutputSpec
from agentcore_fsm.core.tools import AgentTool

__all__ = [
    "Abort",
    "ApprovalChecked",
    "ApprovalDecided",
    "ApprovalDeferred",
    "ArgumentsPrepared",
    "AwaitApproval",
    "BackOff",
    "CallHook",
    "CallModel",
    "CheckApproval",
    "Effect",
    "ExecuteTool",
    "Fail",
    "FollowUpPolled",
    "HookFailed",
    "HookName",
    "HookReturned",
    "Input",
    "OutputChecked",
    "PollFollowUp",
    "PollSteering",
    "PrepareArguments",
    "Proceed",
    "Proceeded",
    "RetryDue",
    "Start",
    "SteeringPolled",
    "Step",
    "StreamEvent",
    "StreamExhausted",
    "Suspend",
    "ToolAttemptFailed",
    "ToolFinished",
    "ToolTimedOut",
    "ToolUpdated",
    "ValidateOutput",
]

HookName: TypeAlias = Literal[
    "before_tool_call", "after_tool_call", "prepare_next_turn", "should_stop_after_turn", "compact"
]

# --- effects: what the machine asks for ----------------------------------------------------


@dataclass(slots=True, repr=False, eq=False)
class PollSteering(Data):
    """Call ``get_steering_messages()``; answer with :class:`SteeringPolled`."""


@dataclass(slots=True, repr=False, eq=False)
class PollFollowUp(Data):
    """Call ``get_follow_up_messages()``; answer with :class:`FollowUpPolled`."""


@dataclass(slots=True, repr=False, eq=False)
class CallModel(Data):
    """Run one model call over ``context``: ``transform_context``, ``convert_to_llm``, the api
    key, then the stream function with ``model`` and ``reasoning``. Answer with a
    :class:`StreamEvent` per event (or ``LoopMachine.stream_update`` for deltas), then
    :class:`StreamExhausted` if the stream ended without a terminal event; a raise anywhere is a
    :class:`Fail`."""

    context: AgentContext
    model: Model
    reasoning: str | None


@dataclass(slots=True, repr=False, eq=False)
class CallHook(Data):
    """Call the hook ``name`` as ``hook(ctx, signal)``; answer with :class:`HookReturned` or
    :class:`HookFailed` (same ``name`` and ``index``: the tool call's position for tool hooks).
    A turn hook that raises is a :class:`Fail`."""

    name: HookName
    ctx: Any
    index: int | None = None


@dataclass(slots=True, repr=False, eq=False)
class PrepareArguments(Data):
    """Call ``tool.prepare_arguments(raw)`` (a copy of the call's arguments); answer with
    :class:`ArgumentsPrepared`."""

    index: int
    tool: AgentTool
    raw: Any


@dataclass(slots=True, repr=False, eq=False)
class ExecuteTool(Data):
    """Run ``tool.execute(tool_call.id, args, signal, on_update)``; answer with
    :class:`ToolUpdated` for updates and :class:`ToolFinished` once it returned or raised."""

    index: int
    tool: AgentTool
    tool_call: ToolCall
    args: Any


@dataclass(slots=True, repr=False, eq=False)
class CheckApproval(Data):
    """Call ``tool.requires_approval(args)`` (the call's validated arguments): does this call
    need approval? Answer with :class:`ApprovalChecked` (the bool it returned, or the error it
    raised)."""

    index: int
    tool: AgentTool
    args: Any


@dataclass(slots=True, repr=False, eq=False)
class AwaitApproval(Data):
    """Tool call ``index`` waits for approval (``request``): get a decision (the config's
    ``decide_approval``, an Agent's ``approve``/``deny``, a timeout) and answer with
    :class:`ApprovalDecided`. Nothing else of the batch runs meanwhile."""

    index: int
    request: ApprovalRequest


@dataclass(slots=True, repr=False, eq=False)
class Proceed(Data):
    """Deliver this step's events, then answer with :class:`Proceeded`.

    Asked for at the end of a turn when no hook runs after it: what follows a turn (another
    turn, a poll, or ``agent_end``) is decided only once ``turn_end`` has been delivered, so an
    abort or a raising ``emit`` during the turn's closing events still counts."""


@dataclass(slots=True)
class Suspend:
    """Stop the run here, unfinished: every tool call waiting for approval has no decision
    coming in this process (their deciders returned None: a journaled run, see
    docs/approval.md). ``requests`` are theirs, in source order. Nothing answers it; the
    journal keeps the requests and a resumed run asks for the decisions again. The machine
    stays in ``awaiting_approval``, whose declared ``suspend_when`` guard asked for this."""

    requests: list[ApprovalRequest]


@dataclass(slots=True)
class ValidateOutput:
    """Validate the structured output ``message`` gives (``spec.parse``, then the spec's
    validators, in order); answer with :class:`OutputChecked`: the value as JSON data, or the
    problem the model is sent back with (an invalid answer, a validator's ``ModelRetry``). A
    validator that raises anything else is a :class:`Fail`."""

    message: AssistantMessage
    spec: OutputSpec


@dataclass(slots=True, repr=False, eq=False)
class BackOff(Data):
    """Tool call ``index`` failed attempt ``attempt`` of ``tool`` and will be tried again
    (its tool's ``retry`` policy): wait the policy's delay, then answer with
    :class:`RetryDue` (the machine has no clock; the driver draws the jitter)."""

    index: int
    tool: AgentTool
    attempt: int


Effect: TypeAlias = (
    PollSteering
    | PollFollowUp
    | CallModel
    | CallHook
    | PrepareArguments
    | CheckApproval
    | AwaitApproval
    | ExecuteTool
    | Proceed
    | Suspend
    | ValidateOutput
    | BackOff
)

# --- inputs: what the machine is fed --------------------------------------------------------


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class Start(Value):
    """Begin the run."""

    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class SteeringPolled(Value):
    """``get_steering_messages()`` returned ``messages``. ``aborted``: the signal had fired by
    the time it returned (the messages are kept; the run then ends as aborted)."""

    messages: Any = None
    aborted: bool = False
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class FollowUpPolled(Value):
    """``get_follow_up_messages()`` returned ``messages`` (``aborted`` as for steering)."""

    messages: Any = None
    aborted: bool = False
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class StreamEvent(Value):
    """The stream function yielded ``event``."""

    event: Any
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class StreamExhausted(Value):
    """The stream ended without a ``done``/``error`` event."""

    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class ArgumentsPrepared(Value):
    """``prepare_arguments`` of tool call ``index`` returned ``value`` or raised ``error``."""

    index: int
    value: Any = None
    error: BaseException | None = None
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class HookReturned(Value):
    """The hook ``name`` (asked for by a :class:`CallHook`) returned ``value``."""

    name: HookName
    value: Any = None
    index: int | None = None
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class HookFailed(Value):
    """The tool hook ``name`` raised ``error``: that call's result becomes an error."""

    name: HookName
    error: BaseException
    index: int | None = None
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class ApprovalChecked(Value):
    """``requires_approval`` of tool call ``index`` returned ``needed`` or raised ``error``
    (the call then gets an error result with its text)."""

    index: int
    needed: Any = None
    error: BaseException | None = None
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class ApprovalDecided(Value):
    """The decision about tool call ``index``, waiting for approval: ``approved``; ``reason``;
    ``decided_by`` (who or what decided); ``args``: arguments that replace the call's
    (validated again), or None to keep them."""

    index: int
    approved: bool
    reason: str | None = None
    decided_by: str = "user"
    args: Any = None
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class ApprovalDeferred(Value):
    """Tool call ``index``, waiting for approval, gets no decision in this process: its
    decider returned None in a run that may suspend (a journaled run). Not journaled: a
    resumed run asks again."""

    index: int
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class ToolUpdated(Value):
    """Running tool call ``index`` reported a partial result."""

    index: int
    partial: Any
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class ToolFinished(Value):
    """Tool call ``index`` returned ``result`` or raised ``error``. ``aborted``: the signal had
    fired by the time it was fed (the call keeps its own result; no ``after_tool_call``)."""

    index: int
    result: Any = None
    error: BaseException | None = None
    aborted: bool = False
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class Proceeded(Value):
    """The events of the turn's end were delivered (answers :class:`Proceed`)."""

    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class Abort(Value):
    """The abort signal fired: end the run now, losing nothing."""

    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class Fail(Value):
    """A failure: a hook, poll, stream function or emit raised ``error``. ``aborted``: the
    signal had fired too (the failure message is then marked aborted)."""

    error: BaseException
    aborted: bool = False
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class OutputChecked(Value):
    """The model's structured answer was validated (answers :class:`ValidateOutput`): ``value``
    is the output as JSON data when ``error`` is None; otherwise ``error`` is the problem, the
    text the model is sent back with."""

    value: Any = None
    error: str | None = None
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class ToolAttemptFailed(Value):
    """An attempt of tool call ``index`` raised ``error``, a failure its tool's ``retry``
    policy retries (the driver classifies it; the machine counts the attempts)."""

    index: int
    error: BaseException
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class ToolTimedOut(Value):
    """Tool call ``index`` was still running after its tool's ``timeout_s``: it was
    cancelled."""

    index: int
    timestamp: int = field(default=0, kw_only=True)


@dataclass(slots=True, frozen=True, repr=False, eq=False)
class RetryDue(Value):
    """The backoff of tool call ``index`` is over: run its next attempt (answers
    :class:`BackOff`)."""

    index: int
    timestamp: int = field(default=0, kw_only=True)


Input: TypeAlias = (
    Start
    | SteeringPolled
    | FollowUpPolled
    | StreamEvent
    | StreamExhausted
    | ArgumentsPrepared
    | ApprovalChecked
    | ApprovalDecided
    | ApprovalDeferred
    | HookReturned
    | HookFailed
    | ToolUpdated
    | ToolFinished
    | Proceeded
    | Abort
    | Fail
    | OutputChecked
    | ToolAttemptFailed
    | ToolTimedOut
    | RetryDue
)


@dataclass(slots=True, repr=False, eq=False)
class Step(Data):
    """What one input produced: the events to emit (in order), the effects to perform, and
    whether the model stream (``stream_over``) and the run (``run_over``) are over;
    ``transitions``: the :class:`~agentcore_fsm.core.declared.TransitionRecord` of each
    transition of the loop machine the input took, in order (empty when it took none)."""

    events: list[Any] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    stream_over: bool = False
    run_over: bool = False
    transitions: Sequence[TransitionRecord] = ()
