"""The sans-IO agent loop: a declared machine fed inputs that answers with events and effects.

``LoopMachine`` runs the declaration ``states/agent_loop.toml`` (and one ``states/tool_call.toml``
machine per tool call) on the engine of :mod:`agentcore_fsm.core.declared`. It never awaits, sleeps,
touches the network, calls user code or reads an abort signal: the same inputs always give the
same steps. Every input goes through :meth:`LoopMachine.feed` (typed inputs from
:mod:`agentcore_fsm.core.protocol`); the named methods (``start()``, ``steering_polled(...)``, ...)
are
thin wrappers. Each returns a :class:`~agentcore_fsm.core.protocol.Step`: the agent events to emit,
in
order, the effects the machine needs performed next, and whether the stream and the run are over.

Stepping by hand, with no event loop::

    m = LoopMachine([UserMessage(content="hi")], AgentContext(), AgentLoopConfig(model=model))
    step = m.start()            # agent_start, turn_start, message_start/end of the prompt
    m.state                     # 'streaming' (no steering poll configured: nothing to poll)
    step.effects                # [CallModel(...)]
    step = m.stream_event(StreamDone(reason="stop", message=AssistantMessage(...)))
    step.effects                # [Proceed()]: deliver message_end and turn_end, then say so
    m.proceed()                 # agent_end (nothing left to do); m.state == 'stopped'

What the machine decides is in the declaration: which transition an input takes (guards), what it
emits (emit actions), what it asks for on entering a state (effects), why the run ends
(``reason``). The methods here are those guards, emit actions and effects, and the handling of
each input's data. Streamed deltas cost no transition: ``stream_event`` is an internal input, and
:meth:`LoopMachine.stream_update` is its allocation-free fast path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import ValidationError

from agentcore_fsm.core.boundary import (
    InvalidValueError,
    check_after_result,
    check_before_result,
    check_should_stop,
    check_terminal_message,
    check_tool_result,
    check_turn_update,
    coerce_messages,
    describe_value,
    exc_text,
    pydantic_problems,
)
from agentcore_fsm.core.declared import (
    MachineError,
    MachineInputError,
    TransitionRecord,
)
from agentcore_fsm.core.events import (
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionUpdateEvent,
)
from agentcore_fsm.core.loop_actions import REQUEST_ABORTED, LoopActions
from agentcore_fsm.core.messages import (
    AssistantMessage,
)
from agentcore_fsm.core.protocol import (
    Abort,
    ApprovalChecked,
    ApprovalDecided,
    ApprovalDeferred,
    ArgumentsPrepared,
    CallHook,
    CallModel,
    Effect,
    ExecuteTool,
    Fail,
    FollowUpPolled,
    HookFailed,
    HookName,
    HookReturned,
    Input,
    OutputChecked,
    PollFollowUp,
    PollSteering,
    PrepareArguments,
    Proceed,
    Proceeded,
    RetryDue,
    Start,
    SteeringPolled,
    Step,
    StreamEvent,
    StreamExhausted,
    Suspend,
    ToolAttemptFailed,
    ToolFinished,
    ToolTimedOut,
    ToolUpdated,
)
from agentcore_fsm.core.tool_call import (
    ABORTED_TEXT,
    TRUNCATED_TEXT,
    ToolCallMachine,
)
from agentcore_fsm.core.tools import AgentToolResult, error_result, merge_after

_new = object.__new__


def message_update(message: AssistantMessage, event: Any) -> MessageUpdateEvent:
    """``MessageUpdateEvent(message=message, assistant_message_event=event)``, built without
    the keyword call: a class called with keywords costs about four times as much as setting
    the three fields of a new instance (0.8 µs against 0.2 µs), once for every streamed delta.
    ``tests/core/test_hot_path.py`` checks that the two are equal field for field."""
    update: MessageUpdateEvent = _new(MessageUpdateEvent)
    update.type = "message_update"
    update.message = message
    update.assistant_message_event = event
    return update


__all__ = [
    "ABORTED_TEXT",
    "REQUEST_ABORTED",
    "TRUNCATED_TEXT",
    "CallHook",
    "CallModel",
    "Effect",
    "ExecuteTool",
    "LoopMachine",
    "MachineError",
    "MachineInputError",
    "PollFollowUp",
    "PollSteering",
    "PrepareArguments",
    "Proceed",
    "Step",
    "Suspend",
    "TransitionRecord",
]

BLOCKED_TEXT = "Tool execution was blocked"
_TOOL_HOOKS = ("before_tool_call", "after_tool_call")


class LoopMachine(LoopActions):
    """One run of the agent loop, as a sans-IO state machine (see the module docstring).

    Readable at any step: ``state``, ``finished``, ``history`` (the :class:`TransitionRecord`
    of every transition taken), ``declaration``, ``accepted_inputs()``, ``new_messages`` (every
    message the run created so far), ``context`` (the run's own copy), ``turn_message``,
    ``pending_tool_calls``, ``tool_calls`` (the machines of the current message's calls) and
    ``end_reason`` once stopped. The data and the declared guards, emit actions and effects are
    those of :class:`~agentcore_fsm.core.loop_actions.LoopActions`; here are the inputs."""

    # --- the one input path -----------------------------------------------------------------

    def feed(self, input: Input) -> Step:
        """Feed one input (see :mod:`agentcore_fsm.core.protocol`); return what it produced.

        An input the current state does not accept, or whose data is wrong, raises
        :class:`MachineInputError` and changes nothing."""
        handler = self._HANDLERS.get(type(input))
        if handler is None:
            raise MachineInputError(
                "feed",
                self.state,
                self.accepted_inputs(),
                f"feed: {describe_value(input)} is not an input of the loop machine (see "
                f"agentcore_fsm.core.protocol: Start, SteeringPolled, StreamEvent, ToolFinished, "
                f"...)",
            )
        self.now = input.timestamp
        history = self.history
        mark = len(history)
        step = handler(self, input)
        if len(history) != mark:
            step.transitions = history[mark:]
        return step

    @property
    def events_pending(self) -> int:
        """How many events the input being fed has produced so far (0 between inputs): what a
        reader that wants to know which transition emitted which events reads as each
        transition is taken (persist/journal.py's ``derive_run``)."""
        return len(self._out)

    # thin named wrappers

    def start(self) -> Step:
        """Begin the run: ``agent_start``, ``turn_start`` and the prompts' message events."""
        return self.feed(Start())

    def steering_polled(self, messages: Any, aborted: bool = False) -> Step:
        """``get_steering_messages()`` returned ``messages``; ``aborted``: the signal had fired
        by then. Taken as ``Agent.steer()`` takes a message: None is nothing, a str is one user
        message, a message is one message, a list holds messages or strs (a dict with a known
        role is validated into that message). Anything else fails the run with an error naming
        the poll and the offending item."""
        return self.feed(SteeringPolled(messages, aborted))

    def follow_up_polled(self, messages: Any, aborted: bool = False) -> Step:
        """``get_follow_up_messages()`` returned ``messages`` (as :meth:`steering_polled`)."""
        return self.feed(FollowUpPolled(messages, aborted))

    def stream_event(self, event: Any) -> Step:
        """The stream function yielded ``event`` (no transition per delta).

        An object that is not a stream event (no str ``type``) raises
        :class:`MachineInputError` and changes nothing (the driver turns it into a failure of
        the stream function). An event of an unknown type, an update whose ``partial`` is not
        an :class:`AssistantMessage`, and a ``done``/``error`` event whose message is not a
        valid final assistant message fail the run, with an error saying what the stream
        function did wrong."""
        return self.feed(StreamEvent(event))

    def stream_exhausted(self) -> Step:
        """The stream ended without a ``done``/``error`` event: a failure of the stream function."""
        return self.feed(StreamExhausted())

    def arguments_prepared(
        self, index: int, value: Any = None, error: BaseException | None = None
    ) -> Step:
        """A tool's ``prepare_arguments`` (asked for by a :class:`PrepareArguments` effect)
        returned ``value`` — which is then validated — or raised ``error`` (the call's result
        becomes an error with its text)."""
        return self.feed(ArgumentsPrepared(index, value, error))

    def hook_returned(self, value: Any = None, index: int | None = None) -> Step:
        """The hook the machine asked for (a :class:`CallHook` effect) returned ``value``;
        ``index`` is the effect's index for tool hooks. (A wrapper of
        ``feed(HookReturned(name, value, index))`` that names the hook the current state waits
        for.)

        A value of the wrong kind is the hook's mistake, not a stepping one: for
        ``before_tool_call``/``after_tool_call`` it becomes that call's error result, for
        ``prepare_next_turn``/``should_stop_after_turn`` a failure of the run; either way the
        text names the hook and what was wrong."""
        return self.feed(HookReturned(self._waiting_hook("hook_returned"), value, index))

    def hook_failed(self, error: BaseException, index: int | None = None) -> Step:
        """A tool hook raised: that call's result becomes an error with the exception's text."""
        return self.feed(HookFailed(self._waiting_hook("hook_failed"), error, index))

    def tool_update(self, index: int, partial: AgentToolResult) -> Step:
        """The running tool call ``index`` reported a partial result: a
        ``tool_execution_update`` (nothing once the call settled). A partial that is not an
        :class:`AgentToolResult` (or a dict that validates as one) raises
        :class:`MachineInputError`."""
        return self.feed(ToolUpdated(index, partial))

    def tool_finished(
        self,
        index: int,
        result: Any = None,
        error: BaseException | None = None,
        aborted: bool = False,
    ) -> Step:
        """The tool call ``index`` (the ``ExecuteTool`` effect's index) returned ``result`` or
        raised ``error``; ``aborted``: the signal had fired by then (the call keeps its result
        and ``after_tool_call`` is skipped). ``result`` is an :class:`AgentToolResult` or a dict
        that validates as one; anything else becomes an error result naming the tool. Finishing
        a call that is not running raises :class:`MachineInputError`."""
        return self.feed(ToolFinished(index, result, error, aborted))

    def proceed(self) -> Step:
        """The events of the turn's end were delivered (answers a :class:`Proceed` effect)."""
        return self.feed(Proceeded())

    def approval_deferred(self, index: int) -> Step:
        """Tool call ``index``, waiting for approval, gets no decision in this process (its
        decider returned None in a run that may suspend). Once every waiting call is so, the
        state's declared ``suspend_when`` guard holds and the step asks for a :class:`Suspend`
        effect: the run stops here, unfinished (the machine stays in ``awaiting_approval``)."""
        return self.feed(ApprovalDeferred(index))

    def abort(self) -> Step:
        """The abort signal fired: end the run now, losing nothing (see
        docs/reference.md#what-an-abort-does)."""
        return self.feed(Abort())

    def fail(self, error: BaseException, aborted: bool = False) -> Step:
        """A failure: a hook, poll, stream function or emit raised ``error`` (its text becomes
        the failure message's ``error_message``); ``aborted``: the signal had fired too."""
        return self.feed(Fail(error, aborted))

    def stream_update(self, event: Any) -> MessageUpdateEvent | None:
        """The hot path of ``stream_event``: for a ``*_start/_delta/_end`` event of a started
        message, the ``message_update`` to emit; None for anything else (feed that to
        :meth:`stream_event`, which also reports what is wrong with a malformed event). Saves
        building a :class:`Step` per delta."""
        try:
            if (
                self.vars.message_started
                and event.type in self._stream_updates
                and self.state == "streaming"
            ):
                partial = event.partial
                if isinstance(partial, AssistantMessage):
                    self._partial = partial
                    return message_update(partial, event)
        except (AttributeError, TypeError):  # not an event: stream_event says so
            pass
        return None

    # --- input handlers: each input's data checked, then taken ------------------------------

    def _take_step(self) -> Step:
        step = Step(
            self._out,
            self._effects,
            self.state != "streaming",
            self.state == "stopped",
        )
        self._out = []
        self._effects = []
        return step

    def _on_start(self, input: Start) -> Step:
        self._check("start")
        if self.config.limits is not None:
            self._count_start()  # the run's start time and counters (usage limits)
        self.fire("start")
        return self._take_step()

    def _on_polled(self, input: SteeringPolled | FollowUpPolled) -> Step:
        steering = isinstance(input, SteeringPolled)
        name = "steering_polled" if steering else "follow_up_polled"
        self._check(name)
        poll = "get_steering_messages" if steering else "get_follow_up_messages"
        try:
            polled = coerce_messages(input.messages, poll, input.timestamp)
        except InvalidValueError as exc:
            return self._failed(exc, input.aborted)
        self.set_var(name, "polled", polled)
        self.set_var(name, "poll_aborted", input.aborted)
        if input.aborted:
            self.set_var(name, "aborted", True)
        self.fire(name)
        return self._take_step()

    def _on_stream_event(self, input: StreamEvent) -> Step:
        event = input.event
        if self.state != "streaming":
            self._check("stream_event")
        try:
            kind = event.type
        except Exception:
            kind = None
        if not isinstance(kind, str):
            raise MachineInputError(
                "stream_event",
                "streaming",
                self.accepted_inputs(),
                f"Stream function yielded {describe_value(event)}, which is not a stream event "
                f"(an object whose type is 'start', a *_start/_delta/_end type, 'done' or "
                f"'error')",
            )
        updates, starts = self._stream_updates, self._stream_starts
        if kind in updates or kind in starts:
            partial = getattr(event, "partial", None)
            if not isinstance(partial, AssistantMessage):
                return self._failed(
                    InvalidValueError(
                        f"Stream function yielded a {kind!r} event whose partial is "
                        f"{describe_value(partial)}; expected an AssistantMessage"
                    )
                )
            if kind in starts:
                if not self.vars.message_started:
                    self.set_var("stream_event", "message_started", True)
                    self._partial = partial
                    return Step([MessageStartEvent(message=partial)], [])
                return Step([], [])
            if self.vars.message_started:
                self._partial = partial
                return Step([MessageUpdateEvent(message=partial, assistant_message_event=event)])
            return Step([], [])  # deltas before `start` are dropped
        if kind in self._stream_finishes:
            try:
                final = check_terminal_message(
                    kind, getattr(event, "message" if kind == "done" else "error", None)
                )
            except InvalidValueError as exc:
                return self._failed(exc)
            self._final = final
            self.fire("model_finished")
            return self._take_step()
        return self._failed(
            InvalidValueError(f"Stream function yielded an unknown event type: {kind!r}")
        )

    def _on_stream_exhausted(self, input: StreamExhausted) -> Step:
        self._check("stream_exhausted")
        return self._failed(RuntimeError("Stream function ended without a done or error event"))

    def _on_arguments_prepared(self, input: ArgumentsPrepared) -> Step:
        self._check("arguments_prepared")
        c = self._call_in("arguments_prepared", input.index, "preparing", "prepare_arguments")
        if input.error is not None and not isinstance(input.error, BaseException):
            raise self._bad_input(
                "arguments_prepared",
                f"arguments_prepared: error must be an exception, not "
                f"{describe_value(input.error)}",
            )
        c.prepared(input.value, input.error)
        return self._after_call_input("arguments_prepared")

    def _on_hook_returned(self, input: HookReturned) -> Step:
        name = input.name
        if name == "compact":  # context compaction (core/model_policies.py)
            return self._on_compacted(input)
        if name == "prepare_next_turn":
            self._check("next_turn_prepared")
            try:
                update = check_turn_update(input.value)
            except InvalidValueError as exc:
                return self._failed(exc)
            if update is not None:
                if update.context is not None:
                    self.context = update.context.copy()
                if update.model is not None:
                    self.model = update.model
                if update.thinking_level is not None:
                    level = update.thinking_level
                    self.reasoning = None if level == "off" else level
            self.fire("next_turn_prepared")
            return self._take_step()
        if name == "should_stop_after_turn":
            self._check("stop_decided")
            try:
                self.set_var("stop_decided", "stop_requested", check_should_stop(input.value))
            except InvalidValueError as exc:
                return self._failed(exc)
            self.fire("stop_decided")
            return self._take_step()
        self._check("hook_returned")
        if name not in _TOOL_HOOKS:
            raise self._bad_input("hook_returned", f"hook_returned: unknown hook {name!r}")
        c = self._call_in("hook_returned", input.index, self._call_state_of(name), name)
        if name == "before_tool_call":
            terminate = False
            try:
                before = check_before_result(input.value)
            except InvalidValueError as exc:
                blocked: str | None = str(exc)
            else:
                blocked = (before.reason or BLOCKED_TEXT) if before and before.block else None
                if before is not None and before.require_approval and blocked is None:
                    reason = before.reason or (
                        f'before_tool_call asked for approval of tool "{c.call.name}"'
                    )
                    c.before_returned(None, reason)
                    return self._after_call_input("hook_returned")
                terminate = blocked is not None and before is not None and before.terminate is True
            c.before_returned(blocked, terminate=terminate)
        else:
            assert c.result is not None
            try:
                result, is_error = merge_after(
                    c.result, c.is_error, check_after_result(input.value)
                )
            except Exception as exc:
                result, is_error = error_result(exc_text(exc)), True
            c.after_returned(result, is_error)
        return self._after_call_input("hook_returned")

    def _on_approval_checked(self, input: ApprovalChecked) -> Step:
        self._check("approval_checked")
        c = self._call_in("approval_checked", input.index, "approving", "requires_approval")
        if input.error is not None and not isinstance(input.error, BaseException):
            raise self._bad_input(
                "approval_checked",
                f"approval_checked: error must be an exception, not {describe_value(input.error)}",
            )
        c.approval_checked(input.needed, input.error)
        return self._after_call_input("approval_checked")

    def _on_approval_decided(self, input: ApprovalDecided) -> Step:
        self._check("approval_decided")
        c = self._call_in("approval_decided", input.index, "awaiting_approval", "a decision")
        problem = None
        if not isinstance(input.approved, bool):
            problem = f"approved must be a bool, not {describe_value(input.approved)}"
        elif input.reason is not None and not isinstance(input.reason, str):
            problem = f"reason must be a str or None, not {describe_value(input.reason)}"
        elif not isinstance(input.decided_by, str):
            problem = f"decided_by must be a str, not {describe_value(input.decided_by)}"
        elif input.args is not None and not isinstance(input.args, dict):
            problem = f"args must be a dict or None, not {describe_value(input.args)}"
        if problem is not None:
            raise self._bad_input(
                "approval_decided", f"approval_decided: tool call #{input.index}: {problem}"
            )
        c.decided(input)
        return self._after_call_input("approval_decided")

    def _on_approval_deferred(self, input: ApprovalDeferred) -> Step:
        self._check("approval_deferred")
        c = self._call_in("approval_deferred", input.index, "awaiting_approval", "a decision")
        deferred = self.vars.deferred_calls
        if c.index not in deferred:
            self.set_var("approval_deferred", "deferred_calls", [*deferred, c.index])
        return self._after_call_input("approval_deferred")

    def _on_hook_failed(self, input: HookFailed) -> Step:
        name = input.name
        if name not in _TOOL_HOOKS:  # a turn hook that raised is a failure of the run
            return self._on_fail(Fail(input.error))
        self._check("hook_failed")
        c = self._call_in("hook_failed", input.index, self._call_state_of(name), name)
        if name == "before_tool_call":
            c.before_returned(exc_text(input.error))
        else:
            c.after_returned(error_result(exc_text(input.error)), True)
        return self._after_call_input("hook_failed")

    def _on_tool_update(self, input: ToolUpdated) -> Step:
        self._check("tool_update")
        c = self._call_at("tool_update", input.index)
        if c.state != "running":
            return Step([], [])
        partial = input.partial
        if not isinstance(partial, AgentToolResult):
            try:
                partial = AgentToolResult.model_validate(partial)
            except ValidationError as exc:
                raise self._bad_input(
                    "tool_update",
                    f"tool_update: the partial result of tool call #{input.index} is "
                    f"{describe_value(partial)}; expected an AgentToolResult "
                    f"({pydantic_problems(exc)})",
                ) from None
        return Step(
            [
                ToolExecutionUpdateEvent(
                    tool_call_id=c.call.id,
                    tool_name=c.call.name,
                    args=c.args,
                    partial_result=partial,
                )
            ],
            [],
        )

    def _on_tool_finished(self, input: ToolFinished) -> Step:
        self._check("tool_finished")
        c = self._call_at("tool_finished", input.index)
        if c.state != "running":
            raise self._bad_input(
                "tool_finished",
                f"tool_finished: tool call #{input.index} ({c.call.name}) is not running (it is "
                f"{c.state!r}); only a call handed out by an ExecuteTool effect can finish, once",
            )
        error = input.error
        if error is not None and not isinstance(error, BaseException):
            raise self._bad_input(
                "tool_finished",
                f"tool_finished: error must be an exception, not {describe_value(error)}",
            )
        if error is not None:
            result, is_error = error_result(exc_text(error)), True
        else:
            try:
                result = check_tool_result(input.result, c.call.name)
                is_error = bool(result.is_error)
            except (TypeError, ValueError) as exc:
                result, is_error = error_result(str(exc)), True
            if result.run_usage is not None:  # a nested run's usage (docs/multi-agent.md)
                self._count_nested(result.run_usage)
        c.tool_finished(result, is_error, input.aborted)
        return self._after_call_input("tool_finished")

    def _on_tool_attempt_failed(self, input: ToolAttemptFailed) -> Step:
        self._check("tool_attempt_failed")
        c = self._call_in("tool_attempt_failed", input.index, "running", "its outcome")
        if not isinstance(input.error, BaseException):
            raise self._bad_input(
                "tool_attempt_failed",
                f"tool_attempt_failed: error must be an exception, not "
                f"{describe_value(input.error)}",
            )
        c.attempt_failed(input.error)
        return self._after_call_input("tool_attempt_failed")

    def _on_tool_timed_out(self, input: ToolTimedOut) -> Step:
        self._check("tool_timed_out")
        c = self._call_in("tool_timed_out", input.index, "running", "its outcome")
        if c.tool is None or c.tool.timeout_s is None:
            raise self._bad_input(
                "tool_timed_out",
                f"tool_timed_out: the tool of call #{input.index} ({c.call.name}) has no timeout_s",
            )
        c.timed_out()
        return self._after_call_input("tool_timed_out")

    def _on_retry_due(self, input: RetryDue) -> Step:
        self._check("retry_due")
        c = self._call_in("retry_due", input.index, "backing_off", "its next attempt")
        c.retry_due()
        return self._after_call_input("retry_due")

    def _on_proceeded(self, input: Proceeded) -> Step:
        self._check("proceeded")
        self.fire("proceeded")
        return self._take_step()

    def _on_abort(self, input: Abort) -> Step:
        self._check("abort")
        self.set_var("abort", "aborted", True)
        self.fire("abort")
        return self._take_step()

    def _on_fail(self, input: Fail) -> Step:
        self._check("fail")
        return self._failed(input.error, input.aborted)

    def _on_output_checked(self, input: OutputChecked) -> Step:
        self._check("output_checked")
        error = input.error
        if error is not None and not isinstance(error, str):
            raise self._bad_input(
                "output_checked",
                f"output_checked: error must be a str or None, not {describe_value(error)}",
            )
        self.set_var("output_checked", "output_problem", error)
        if error is None:
            self.output = input.value
        self.fire("output_checked")
        return self._take_step()

    def _failed(self, error: BaseException, aborted: bool = False) -> Step:
        self._failure = error
        if aborted:
            self.set_var("fail", "aborted", True)
        # messages a poll returned for the next turn stay: the failure closes a turn they join
        self.fire("fail")
        return self._take_step()

    def _after_call_input(self, name: str) -> Step:
        self._advance_calls()
        self._offer_after(name)
        if self.suspends():  # the state's declared suspend_when holds
            self._effects.append(Suspend(self.pending_approvals))
        return self._take_step()

    # --- checking an input's data -----------------------------------------------------------

    def _waiting_hook(self, input_name: str) -> HookName:
        """The hook whose answer the current state waits for (the state's declared ``hook``)."""
        hook = self.declaration.hook_of(self.state)
        if hook is None:
            self._check(input_name)  # raises: not accepted here
            raise AssertionError  # pragma: no cover
        return hook  # type: ignore[return-value]

    def _call_state_of(self, hook: str) -> str:
        """The state of a tool call's machine that waits for ``hook`` (declared ``hook``)."""
        state = self._call_decl.state_of_hook(hook)
        assert state is not None, f"tool_call declares no state waiting for {hook}"
        return state

    def _bad_input(self, name: str, problem: str) -> MachineInputError:
        state = self.state
        return MachineInputError(name, state, self.declaration.accepted_inputs(state), problem)

    def _call_at(self, name: str, index: Any) -> ToolCallMachine:
        calls = self._calls
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(calls):
            raise self._bad_input(
                name,
                f"{name}: {describe_value(index)} names no tool call; pass the int index of an "
                f"ExecuteTool/CallHook effect (0 to {len(calls) - 1})"
                if calls
                else f"{name}: {describe_value(index)} names no tool call; this turn has none",
            )
        return calls[index]

    def _call_in(self, name: str, index: Any, state: str, what: str) -> ToolCallMachine:
        c = self._call_at(name, index)
        if c.state != state:
            raise self._bad_input(
                name,
                f"{name}: tool call #{index} ({c.call.name}) is not waiting for {what} (it is "
                f"{c.state!r})",
            )
        return c

    # the handler of each input type (feed's dispatch table)
    _HANDLERS: ClassVar[dict[type, Callable[[LoopMachine, Any], Step]]] = {
        Start: _on_start,
        SteeringPolled: _on_polled,
        FollowUpPolled: _on_polled,
        StreamEvent: _on_stream_event,
        StreamExhausted: _on_stream_exhausted,
        ArgumentsPrepared: _on_arguments_prepared,
        ApprovalChecked: _on_approval_checked,
        ApprovalDecided: _on_approval_decided,
        ApprovalDeferred: _on_approval_deferred,
        HookReturned: _on_hook_returned,
        HookFailed: _on_hook_failed,
        ToolUpdated: _on_tool_update,
        ToolFinished: _on_tool_finished,
        Proceeded: _on_proceeded,
        Abort: _on_abort,
        Fail: _on_fail,
        OutputChecked: _on_output_checked,
        ToolAttemptFailed: _on_tool_attempt_failed,
        ToolTimedOut: _on_tool_timed_out,
        RetryDue: _on_retry_due,
    }
