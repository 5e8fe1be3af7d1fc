"""What the loop machine holds and does: its data and the guards, emit actions and effects that
``states/agent_loop.toml`` names.

:class:`LoopActions` is the base of :class:`~agentcore_fsm.core.machine.LoopMachine`, which adds
the inputs (``feed`` and the named wrappers) and the checks of each input's data. Here is the
rest: the run's data (context, configuration, the turn's messages, the tool calls' machines),
what it is read through, the loop's side of each tool call's machine (the
:class:`~agentcore_fsm.core.tool_call.CallOwner` interface), and the methods the declaration binds
by name (``_guard_*``, ``_emit_*``, ``_effect_*``; see :mod:`agentcore_fsm.core.declared`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from agentcore_fsm.core.approval import ApprovalRequest
from agentcore_fsm.core.boundary import exc_text
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, PrepareNextTurnContext
from agentcore_fsm.core.declaration import Declaration, load_declaration
from agentcore_fsm.core.declared import DeclaredMachine
from agentcore_fsm.core.events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from agentcore_fsm.core.limit_actions import LimitActions
from agentcore_fsm.core.limits import LimitReached, RunUsage
from agentcore_fsm.core.messages import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ToolResultMessage,
)
from agentcore_fsm.core.model_policies import ModelPolicyActions
from agentcore_fsm.core.output_actions import OutputActions
from agentcore_fsm.core.protocol import (
    CallHook,
    CallModel,
    Effect,
    PollFollowUp,
    PollSteering,
    Proceed,
)
from agentcore_fsm.core.tool_call import (
    PREPARED,
    STARTED,
    ToolCallMachine,
)
from agentcore_fsm.core.tool_policy import ToolPolicy, call_key
from agentcore_fsm.core.tools import AgentTool

__all__ = ["REQUEST_ABORTED", "LoopActions", "LoopVars"]

REQUEST_ABORTED = "Request was aborted"
# the states of a call whose tool runs or is about to run again (no later call may begin)
_BUSY = ("running", "reviewing", "backing_off")
_SETTLED = frozenset({"ended", "answered"})  # a call whose tool is done (its result known)


@dataclass(slots=True)
class LoopVars:
    """The loop's declared variables (``[variables]`` of ``states/agent_loop.toml``: each
    field's type, initial value, meaning and setters are declared there). One record per run,
    ``machine.vars``; guards read it, and only the declared setters write it
    (:meth:`~agentcore_fsm.core.declared.DeclaredMachine.set_var`)."""

    first_turn: bool
    turn_open: bool
    polled: list[AgentMessage]
    poll_aborted: bool
    aborted: bool
    stop_requested: bool
    batch_had_calls: bool
    batch_terminated: bool
    message_started: bool
    parallel: bool
    deferred_calls: list[int]
    outcome: str | None
    output_problem: str | None
    output_retries_used: int
    usage: RunUsage | None
    requested: bool
    limit_reached: LimitReached | None
    repeat_key: str | None
    repeat_count: int
    repeat_stop: bool
    model_index: int
    model_errors: list[str]
    compacted: str | None
    compaction_reason: str | None


class LoopActions(OutputActions, LimitActions, ModelPolicyActions, DeclaredMachine):
    """The loop machine's data, its readings and its declared guards, emit actions and effects
    (the base of :class:`~agentcore_fsm.core.machine.LoopMachine`; not run on its own)."""

    declaration_name = "agent_loop"
    variables_class = LoopVars
    vars: LoopVars
    data_attributes: ClassVar[frozenset[str]] = frozenset(
        {
            # the engine's
            "state",
            "history",
            "fired",
            # the run's data: the transcript, what prepare_next_turn may replace, the turn's
            # message and tool calls, the failure that ends the run, the step being built
            "context",
            "model",
            "reasoning",
            "new_messages",
            "_partial",
            "_final",
            "_calls",
            "_failure",
            "_out",
            "_effects",
            # the time of the input being handled
            "now",
            # structured output's data: the valid output, the answer's result messages, the
            # problem text a retry sends (its path is decided by declared variables)
            "output",
            "_output_results",
            "_retry_text",
            # usage limits' data: the result messages of a batch a limit kept from running
            "_limit_results",
            # model fallback and compaction (core/model_policies.py): the compaction hook's
            # answer until it is applied
            "_compacted_to",
        }
    )

    def __init__(
        self,
        prompts: Iterable[AgentMessage],
        context: AgentContext,
        config: AgentLoopConfig,
        *,
        declaration: Declaration | None = None,
    ) -> None:
        super().__init__(declaration)
        self.config = config
        # the timestamp (ms) of the input being handled: the time of every message it makes
        # (the machine has no clock; see agentcore_fsm.core.protocol)
        self.now = 0
        self.prompts = list(prompts)
        # a run works on a copy: the caller's context and list are never mutated
        self.context = AgentContext.copy(context)
        self.context.messages.extend(self.prompts)
        self.model = config.model
        self.reasoning: str | None = config.reasoning
        self.new_messages: list[AgentMessage] = list(self.prompts)
        self._call_decl = load_declaration("tool_call")
        # the declared stream event kinds the inputs are read through (compiled once)
        kinds = self._compiled.stream_kinds
        self._stream_updates = kinds["update"]
        self._stream_starts = kinds["start"]
        self._stream_finishes = kinds["finish"]

        self._out: list[Any] = []
        self._effects: list[Effect] = []
        # what decides the path besides the state is in self.vars (LoopVars, declared); the
        # rest is data
        self._failure: BaseException | None = None
        self._partial: AssistantMessage | None = None
        self._final: AssistantMessage | None = None
        self._calls: list[ToolCallMachine] = []
        self._init_output()  # structured output (core/output_actions.py)
        self._init_limits()  # usage limits (core/limit_actions.py)
        self._init_model_policies()  # fallback and compaction (core/model_policies.py)

    # --- reading ----------------------------------------------------------------------------

    @property
    def end_reason(self) -> str | None:
        """How the run ended (the declared variable ``outcome``: the reason of the transition
        into ``stopped``); None while it runs."""
        return self.vars.outcome

    @property
    def turn_message(self) -> AssistantMessage | None:
        """The turn's assistant message once it ended (the partial one while it streams)."""
        return self._final or self._partial

    @property
    def tool_calls(self) -> list[ToolCallMachine]:
        """The machines of the current assistant message's tool calls, in source order."""
        return list(self._calls)

    @property
    def pending_approvals(self) -> list[ApprovalRequest]:
        """The approval requests of the tool calls waiting for a decision, in source order."""
        return [
            c.request
            for c in self._calls
            if c.state == "awaiting_approval" and c.request is not None
        ]

    @property
    def assistant_message(self) -> AssistantMessage | None:
        """The turn's assistant message once it ended (None while it streams or before)."""
        return self._final

    @property
    def partial_message(self) -> AssistantMessage | None:
        """The turn's assistant message so far while it streams (the last partial seen)."""
        return self._partial

    @property
    def message_started(self) -> bool:
        """True once the turn's assistant message had its ``message_start``."""
        return self.vars.message_started

    @property
    def calls(self) -> tuple[ToolCallMachine, ...]:
        """The machines of the current assistant message's tool calls (not a copy: read only)."""
        return tuple(self._calls)

    @property
    def failure(self) -> BaseException | None:
        """The failure that is ending (or ended) the run, if any."""
        return self._failure

    @property
    def aborted(self) -> bool:
        """True once an abort was fed (or a poll, tool outcome or failure came after it)."""
        return self.vars.aborted

    @property
    def call_declaration(self) -> Declaration:
        """The declaration each tool call's machine runs (``states/tool_call.toml``)."""
        return self._call_decl

    def pending_effects(self) -> list[Effect]:
        """The effects the machine, at a step boundary, is waiting for: its current state's (a
        model call, a poll, a turn hook, proceed) and every tool call's (prepare_arguments, a
        tool hook, the tool itself). A driver that resumes a run performs them again."""
        out: list[Effect] = []
        saved = self._effects
        self._effects = out
        try:
            if not (self.state == "streaming" and self.vars.message_started):
                self.enter_effect()
            for call in self._calls:
                call.enter_effect()
        finally:
            self._effects = saved
        return out

    @property
    def pending_tool_calls(self) -> list[str]:
        """Ids of the tool calls that have started and not ended."""
        return [c.call.id for c in self._calls if c.state in STARTED]

    # --- tool calls: the loop's side of each call's machine ----------------------------------
    # may_begin_call, may_answer_call, emit_event, request_effect and append_message are the
    # CallOwner interface (core/tool_call.py) the call machines see the loop through; they are
    # not for stepping a run by hand.

    def emit_event(self, event: AgentEvent) -> None:
        """Add ``event`` to the current step's events (:class:`CallOwner`)."""
        self._out.append(event)

    def request_effect(self, effect: Effect) -> None:
        """Add ``effect`` to the current step's effects (:class:`CallOwner`)."""
        self._effects.append(effect)

    def _advance_calls(self) -> None:
        """Offer ``begin`` and ``answer`` to the calls, in source order, until neither is taken
        (their guards carry the sequential/parallel policy). ``may_begin`` and ``may_answer``
        both require every earlier call to be further along, so only the first call that has
        not begun is offered ``begin``, and only the first call without its result message is
        offered ``answer``: offering them to later calls could never be taken."""
        calls = self._calls
        while True:
            progress = False
            for c in calls:
                if c.state == "new":
                    progress = c.begin()
                    break
            for c in calls:
                state = c.state
                if state != "answered":
                    if state == "ended" and c.offer("answer"):
                        progress = True
                    break
            if not progress:
                return

    def may_begin_call(self, index: int) -> bool:
        """Whether tool call ``index`` may begin now (:class:`CallOwner`): only while the loop
        prepares tools, once every earlier call is prepared (parallel) or answered (sequential)."""
        if self.state != "preparing_tools":
            return False  # calls begin only while the loop prepares tools
        calls = self._calls
        if self.vars.parallel:
            for i in range(index):
                if calls[i].state not in PREPARED:
                    return False
            return True
        for i in range(index):
            if calls[i].state != "answered":
                return False
        return True

    def may_answer_call(self, index: int) -> bool:
        """Whether tool call ``index`` may append its result message now (:class:`CallOwner`):
        every earlier call answered and, in parallel mode, every call ended."""
        calls = self._calls
        for i in range(index):
            if calls[i].state != "answered":
                return False
        if self.vars.parallel:
            for i in range(index, len(calls)):
                if calls[i].state not in _SETTLED:
                    return False
        return True

    def _make_calls(self, parallel: bool) -> None:
        """The machines of the message's tool calls; ``parallel``: the batch's mode, which the
        calling emit action has written to the variable ``parallel`` (its declared setter)."""
        assert self._final is not None and self.vars.parallel is parallel
        decl = self._call_decl
        self._calls = [
            ToolCallMachine(self, i, call, decl) for i, call in enumerate(self._final.tool_calls())
        ]

    # --- guards (named in the declaration's [guards]) ----------------------------------------

    def _guard_first_turn(self) -> bool:
        return self.vars.first_turn

    def _guard_has_new_messages(self) -> bool:
        return bool(self.vars.polled)

    def _guard_polls_steering(self) -> bool:
        return self.config.get_steering_messages is not None

    def _guard_polls_follow_up(self) -> bool:
        return self.config.get_follow_up_messages is not None

    def _guard_poll_aborted(self) -> bool:
        return self.vars.poll_aborted

    def _guard_tools_continue(self) -> bool:
        v = self.vars
        return v.batch_had_calls and not v.batch_terminated

    def _guard_batch_terminated(self) -> bool:
        return self.vars.batch_terminated

    def _guard_assistant_errored(self) -> bool:
        return self._final is not None and self._final.stop_reason == "error"

    def _guard_assistant_aborted(self) -> bool:
        return self._final is not None and self._final.stop_reason == "aborted"

    def _guard_truncated_tool_calls(self) -> bool:
        final = self._final
        return final is not None and final.stop_reason == "length" and bool(final.tool_calls())

    def _guard_has_tool_calls(self) -> bool:
        return self._final is not None and bool(self._final.tool_calls())

    def _guard_calls_prepared(self) -> bool:
        return not any(c.state in ("preparing", "checking", "approving") for c in self._calls)

    def _guard_approvals_pending(self) -> bool:
        return any(c.state == "awaiting_approval" for c in self._calls)

    def _guard_approvals_deferred(self) -> bool:
        deferred = self.vars.deferred_calls
        waiting = [c.index for c in self._calls if c.state == "awaiting_approval"]
        return bool(waiting) and all(i in deferred for i in waiting)

    def _guard_has_runnable_calls(self) -> bool:
        return any(c.state == "ready" for c in self._calls)

    def _guard_calls_remain(self) -> bool:
        calls = self._calls
        return not any(c.state in _BUSY for c in calls) and any(c.state == "new" for c in calls)

    def _guard_repeat_stopped(self) -> bool:
        return self.vars.repeat_stop

    def _mark_repeats(self, policy: ToolPolicy) -> None:
        """Count the message's calls, in source order, into the run's repeat count (declared
        ``repeat_key``/``repeat_count``); give each call the policy refuses its text."""
        limit = policy.repeat_limit
        assert limit is not None
        key, count = self.vars.repeat_key, self.vars.repeat_count
        for c in self._calls:
            this = call_key(c.call.name, c.call.arguments)
            count = count + 1 if this == key else 1
            key = this
            if count >= limit:
                c.repeat_text = policy.repeat_text(c.call.name, count)
                if policy.on_repeat == "stop":
                    self.set_var("begin_calls", "repeat_stop", True)
        self.set_var("begin_calls", "repeat_key", key)
        self.set_var("begin_calls", "repeat_count", count)

    def _guard_all_calls_answered(self) -> bool:
        return all(c.state == "answered" for c in self._calls)

    def _guard_has_prepare_hook(self) -> bool:
        return self.config.prepare_next_turn is not None

    def _guard_has_stop_hook(self) -> bool:
        return self.config.should_stop_after_turn is not None

    def _guard_stop_requested(self) -> bool:
        return self.vars.stop_requested

    def _guard_turn_open(self) -> bool:
        return self.vars.turn_open

    def _guard_failed_after_abort(self) -> bool:
        return self.vars.aborted

    # --- emit actions (named in the declaration's [emits]) ------------------------------------

    def _emit_agent_start(self) -> None:
        self._out.append(AgentStartEvent())

    def _emit_turn_start(self) -> None:
        self._new_turn("turn_start")
        self.set_var("turn_start", "turn_open", True)
        if self.config.limits is not None:
            self._count_turn()
        self._out.append(TurnStartEvent())

    def _emit_prompt_messages(self) -> None:
        out = self._out
        for message in self.prompts:
            out.append(MessageStartEvent(message=message))
            out.append(MessageEndEvent(message=message))

    def _emit_injected_messages(self) -> None:
        polled = self.vars.polled
        self.set_var("injected_messages", "polled", [])
        for message in polled:
            self.append_message(message)

    def _emit_assistant_end(self) -> None:
        final = self._final
        if final is None:
            final = self._failure_message(self._partial)
            self._final = final
        if not self.vars.message_started:
            self.set_var("assistant_end", "message_started", True)
            self._out.append(MessageStartEvent(message=final))
        if self.config.limits is not None:
            self._count_response(final)
        self.context.messages.append(final)
        self.new_messages.append(final)
        self._out.append(MessageEndEvent(message=final))
        if self._policies:  # fallback or compaction configured (core/model_policies.py)
            self._end_request()

    def _emit_begin_calls(self) -> None:
        if not self._calls:
            parallel = self.config.tool_execution != "sequential" and not any(
                _tool_mode(self.context.tools, c.name) == "sequential"
                for c in self._final.tool_calls()  # type: ignore[union-attr]
            )
            self.set_var("begin_calls", "parallel", parallel)
            self._make_calls(parallel)
            if self.config.limits is not None:
                self._count_calls()
            policy = self.config.tool_policy
            if policy is not None and policy.repeat_limit is not None:
                self._mark_repeats(policy)
        self._advance_calls()

    def _emit_run_calls(self) -> None:
        for c in self._calls:
            c.offer("run")

    def _emit_truncate_calls(self) -> None:
        self.set_var("truncate_calls", "parallel", False)
        self._make_calls(parallel=False)
        for c in self._calls:
            c.fire("truncate")
            c.fire("answer")

    def _emit_abort_calls(self) -> None:
        for c in self._calls:
            c.offer("abort")
            if not self.vars.parallel:  # sequential: each call's result before the next call
                c.offer("answer")
        for c in self._calls:  # parallel: the result pairs after every end, in source order
            c.offer("answer")

    def _emit_turn_end(self) -> None:
        calls = self._calls
        self.set_var("turn_end", "batch_had_calls", bool(calls))
        self.set_var(
            "turn_end",
            "batch_terminated",
            bool(calls) and all(c.result is not None and c.result.terminate is True for c in calls),
        )
        self.set_var("turn_end", "turn_open", False)
        self._out.append(TurnEndEvent(message=self._final, tool_results=self._tool_results()))

    def _emit_failure_turn(self) -> None:
        self._out.append(TurnStartEvent())
        failure = self._failure_message(None)
        self._final = failure
        self.append_message(failure)
        self._out.append(TurnEndEvent(message=failure, tool_results=[]))

    def _emit_agent_end(self) -> None:
        spec = self.fired
        assert spec is not None and spec.reason is not None
        self.set_var("agent_end", "outcome", spec.reason)
        self._out.append(
            AgentEndEvent(
                messages=list(self.new_messages),
                reason=spec.reason,  # type: ignore[arg-type]
                output=self.output,
                limit=self.vars.limit_reached,
                usage=self.vars.usage,
            )
        )

    # --- effects (named in the declaration's states) ----------------------------------------

    def _effect_poll_steering(self) -> None:
        self._effects.append(PollSteering())

    def _effect_poll_follow_up(self) -> None:
        self._effects.append(PollFollowUp())

    def _effect_call_model(self) -> None:
        self.set_var("call_model", "first_turn", False)
        self._new_turn("call_model")
        context = self.context
        if self.config.limits is not None:
            self._count_request()
            context = self._request_context()
        self._effects.append(CallModel(context, self.model, self.reasoning))

    def _effect_call_prepare_next_turn(self) -> None:
        self._effects.append(CallHook("prepare_next_turn", self._turn_context()))

    def _effect_call_should_stop_after_turn(self) -> None:
        self._effects.append(CallHook("should_stop_after_turn", self._turn_context()))

    def _effect_proceed(self) -> None:
        self._effects.append(Proceed())

    # --- helpers ----------------------------------------------------------------------------

    def _new_turn(self, by: str) -> None:
        self._partial = None
        self._final = None
        self.set_var(by, "message_started", False)
        self.set_var(by, "deferred_calls", [])
        self._calls = []

    def append_message(self, message: AgentMessage) -> None:
        """Add ``message`` to the transcript, with its message_start/end events (the loop's own
        messages, and a tool call's result message: :class:`CallOwner`)."""
        self.context.messages.append(message)
        self.new_messages.append(message)
        self._out.append(MessageStartEvent(message=message))
        self._out.append(MessageEndEvent(message=message))

    def _tool_results(self) -> list[ToolResultMessage]:
        return [c.message for c in self._calls if c.message is not None]

    def _turn_context(self) -> PrepareNextTurnContext:
        return PrepareNextTurnContext(
            message=self._final,
            tool_results=self._tool_results(),
            context=self.context,
            new_messages=list(self.new_messages),
        )

    def _failure_message(self, partial: AssistantMessage | None) -> AssistantMessage:
        """The message that closes a turn cut short by abort or failure."""
        stop: Literal["aborted", "error"] = "aborted" if self.vars.aborted else "error"
        text = exc_text(self._failure) if self._failure is not None else REQUEST_ABORTED
        if partial is not None:
            message = partial.model_copy(deep=True)
            message.stop_reason = stop
            message.error_message = text
            return message
        model = self.model
        return AssistantMessage(
            content=[TextContent(text="")],
            api=model.api,
            provider=model.provider,
            model=model.id,
            stop_reason=stop,
            error_message=text,
            timestamp=self.now,
        )


def _tool_mode(tools: list[AgentTool], name: str) -> str | None:
    for tool in tools:
        if tool.name == name:
            return tool.execution_mode
    return None
