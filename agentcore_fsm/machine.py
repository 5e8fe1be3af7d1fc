"""The sans-IO agent loop: a state machine fed inputs that answers with events and effects.

``LoopMachine`` is built from the declaration in ``states/agent_loop.toml`` on the shared
``transitions.Machine`` for it. It never awaits, sleeps or touches the network. Every input is a
method; each returns a :class:`Step` — the agent events to emit, in order, and the effects the
machine needs performed next (poll steering, call the model, run a tool, call a hook). The async
driver (``driver.py``) performs effects and feeds their outcomes back; it decides nothing.

Stepping by hand, with no event loop::

    m = LoopMachine([UserMessage(content="hi")], AgentContext(), AgentLoopConfig(model=model))
    step = m.start()            # agent_start, turn_start, message_start/end of the prompt
    m.state                     # 'streaming' (no steering hook configured: nothing to poll)
    step.effects                # [CallModel(...)]
    step = m.stream_event(StreamDone(reason="stop", message=AssistantMessage(...)))
    step.effects                # [Proceed()]: deliver message_end and turn_end, then say so
    m.proceed()                 # agent_end (nothing left to do); m.state == 'stopped'

Rule: everything that decides what happens next lives in this file or in the declaration.
Streamed deltas do not cost a state transition: ``stream_event`` is an internal input that only
builds the ``message_update``; transitions happen at phase changes only.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError
from transitions.core import EventData

from .abort import AbortSignal
from .boundary import (
    InvalidValueError,
    check_after_result,
    check_before_result,
    check_should_stop,
    check_terminal_message,
    check_turn_update,
    coerce_messages,
    describe_value,
    exc_text,
    pydantic_problems,
)
from .config import (
    AgentContext,
    AgentLoopConfig,
    PrepareNextTurnContext,
)
from .declaration import Declaration, TransitionSpec, load_declaration, shared_machine
from .events import (
    AgentEndEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from .messages import (
    AgentMessage,
    AssistantMessage,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
)
from .tools import (
    AfterToolCallContext,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    ToolCallRejected,
    error_result,
    find_tool,
    merge_after,
    validate_arguments,
)

__all__ = [
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
    "TransitionRecord",
]

logger = logging.getLogger("agentcore_fsm")

ABORTED_TEXT = "Operation aborted"
REQUEST_ABORTED = "Request was aborted"
TRUNCATED_TEXT = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its '
    "arguments may be truncated. Re-issue the tool call with complete arguments."
)
BLOCKED_TEXT = "Tool execution was blocked"


class MachineError(RuntimeError):
    """The machine could not take a step: the base of :class:`MachineInputError` (a mistake
    in what was fed) and of internal inconsistencies (a bug in this library or a declaration
    that does not fit the engine)."""


class MachineInputError(MachineError):
    """An input the machine cannot take: the current state does not accept it, or its data is
    wrong (an index that names no tool call, a call that is not running, an object that is not
    a stream event). The machine is unchanged; the text says what was wrong and what is
    accepted. ``input_name``, ``state`` and ``accepted`` (the inputs the state accepts) are
    attributes."""

    def __init__(
        self, input_name: str, state: str, accepted: list[str], problem: str | None = None
    ) -> None:
        self.input_name, self.state, self.accepted = input_name, state, accepted
        if problem is None:
            listed = ", ".join(accepted) if accepted else "nothing (the run has stopped)"
            problem = (
                f"input {input_name!r} is not accepted in state {state!r}; it accepts: {listed}"
            )
        super().__init__(problem)


# --- effects --------------------------------------------------------------------------------


@dataclass(slots=True)
class PollSteering:
    """Call ``get_steering_messages()``; feed ``steering_polled(messages)``."""


@dataclass(slots=True)
class PollFollowUp:
    """Call ``get_follow_up_messages()``; feed ``follow_up_polled(messages)``."""


@dataclass(slots=True)
class CallModel:
    """Run one model call over ``context``: ``transform_context``, ``convert_to_llm``, the api
    key, then the stream function with ``model`` and ``reasoning``. Feed each stream event with
    ``stream_event``; a raise anywhere with ``fail``."""

    context: AgentContext
    model: Model
    reasoning: str | None


@dataclass(slots=True)
class CallHook:
    """Call the hook ``name`` as ``hook(ctx, signal)``; feed ``hook_returned(value, index)`` or
    ``hook_failed(exc, index)``. ``index`` is the tool call's position for tool hooks."""

    name: Literal[
        "before_tool_call", "after_tool_call", "prepare_next_turn", "should_stop_after_turn"
    ]
    ctx: Any
    index: int | None = None


@dataclass(slots=True)
class PrepareArguments:
    """Call ``tool.prepare_arguments(raw)`` (a copy of the call's arguments); feed
    ``arguments_prepared(index, value)`` or ``arguments_prepared(index, error=exc)``."""

    index: int
    tool: AgentTool
    raw: Any


@dataclass(slots=True)
class ExecuteTool:
    """Run ``tool.execute(tool_call.id, args, signal, on_update)``; feed ``tool_update(index,
    partial)`` for updates and ``tool_finished(index, result=...)`` or ``(index, error=...)``."""

    index: int
    tool: AgentTool
    tool_call: ToolCall
    args: Any


@dataclass(slots=True)
class Proceed:
    """Deliver this step's events, then feed ``proceed()``.

    Asked for at the end of a turn when neither ``prepare_next_turn`` nor
    ``should_stop_after_turn`` is configured. What follows a turn (another turn, a poll, or
    ``agent_end``) is decided only after ``turn_end`` has been delivered, so an abort or a raising
    ``emit`` during the turn's closing events still counts (SPEC §4, §5)."""


Effect = (
    PollSteering | PollFollowUp | CallModel | CallHook | PrepareArguments | ExecuteTool | Proceed
)


@dataclass(slots=True)
class Step:
    """What one input produced: events to emit (in order) and effects to perform."""

    events: list[Any] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)


@dataclass(slots=True, frozen=True)
class TransitionRecord:
    """One transition taken: its declared index, trigger, source and destination."""

    index: int
    trigger: str
    source: str
    dest: str


# --- per-call bookkeeping -------------------------------------------------------------------

_NEW, _PREPARING, _BEFORE, _PREPARED, _RUNNING, _AFTER, _DONE = range(7)
_STAGE_TEXT = {
    _NEW: "has not started",
    _PREPARING: "waits for prepare_arguments",
    _BEFORE: "waits for before_tool_call",
    _PREPARED: "is prepared, not yet executing",
    _RUNNING: "is running",
    _AFTER: "waits for after_tool_call",
    _DONE: "has finished",
}


class _Call:
    __slots__ = (
        "args",
        "call",
        "index",
        "is_error",
        "message",
        "result",
        "stage",
        "started",
        "tool",
    )

    def __init__(self, index: int, call: ToolCall) -> None:
        self.index = index
        self.call = call
        self.tool: AgentTool | None = None
        self.args: Any = None
        self.stage = _NEW
        self.started = False
        self.result: AgentToolResult | None = None
        self.is_error = False
        self.message: ToolResultMessage | None = None


class _Handle:
    """The model object the shared ``transitions.Machine``'s transitions step: it carries
    ``state`` and points back at its owner (guards and callbacks reach the run through it)."""

    __slots__ = ("owner", "state")
    state: str

    def __init__(self, owner: LoopMachine) -> None:
        self.owner = owner


_STREAM_UPDATE_TYPES = frozenset(
    {
        "text_start",
        "text_delta",
        "text_end",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
    }
)


class LoopMachine:
    """One run of the agent loop, as a sans-IO state machine (see the module docstring)."""

    def __init__(
        self,
        prompts: Iterable[AgentMessage],
        context: AgentContext,
        config: AgentLoopConfig,
        *,
        signal: AbortSignal | None = None,
        declaration: Declaration | None = None,
        on_transition: Callable[[TransitionRecord], None] | None = None,
    ) -> None:
        self.declaration = decl = declaration or load_declaration("agent_loop")
        self.config = config
        self.signal = signal
        self.on_transition = on_transition
        self.prompts = list(prompts)
        # a run works on a copy: the caller's context and list are never mutated
        self.context = AgentContext(
            context.system_prompt, list(context.messages), list(context.tools)
        )
        self.context.messages.extend(self.prompts)
        self.model = config.model
        self.reasoning: str | None = config.reasoning
        self.new_messages: list[AgentMessage] = list(self.prompts)
        self.history: list[TransitionRecord] = []
        self.end_reason: str | None = None

        self._accepts = _accepts_table(decl)
        self._out: list[Any] = []
        self._effects: list[Effect] = []
        self._fired: TransitionSpec | None = None
        # run flags
        self._first_turn = True
        self._turn_open = False
        self._polled: list[AgentMessage] = []
        self._aborted = False
        self._failure: BaseException | None = None
        self._stop_requested = False
        self._batch_had_calls = False
        self._batch_terminated = False
        # turn data
        self._partial: AssistantMessage | None = None
        self._final: AssistantMessage | None = None
        self._message_started = False
        self._calls: list[_Call] = []
        self._cursor = 0
        self._parallel = True
        self._turn_stage = ""

        self._machine = shared_machine(decl)
        # The run is stepped through the shared machine's Transition objects, which need only
        # the handle: it is never registered on the machine, so nothing is left behind however
        # the run ends (finished, cancelled, crashed or abandoned mid-step).
        self._handle = _Handle(self)
        self._handle.state = decl.initial
        self._enter_table: dict[str, Callable[[], None]] = {
            "awaiting_steering": self._enter_awaiting_steering,
            "awaiting_follow_up": self._enter_awaiting_follow_up,
            "streaming": self._enter_streaming,
            "preparing_tools": self._enter_preparing_tools,
            "executing": self._enter_executing,
            "turn_end": self._enter_turn_end,
        }
        self._actions: dict[str, Callable[[], None]] = {
            name: getattr(self, f"_emit_{name}") for name in decl.emits
        }

    # --- reading ----------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """The current state's name."""
        state: str = self._handle.state
        return state

    @property
    def finished(self) -> bool:
        return bool(self._handle.state == self.declaration.final)

    def accepted_inputs(self) -> list[str]:
        """The inputs the current state accepts."""
        return self.declaration.accepted_inputs(self.state)

    @property
    def turn_message(self) -> AssistantMessage | None:
        """The turn's assistant message once it ended (the partial one while it streams)."""
        return self._final or self._partial

    @property
    def pending_tool_calls(self) -> list[str]:
        """Ids of the tool calls that have started and not ended."""
        return [c.call.id for c in self._calls if c.started and c.stage != _DONE]

    # --- inputs -----------------------------------------------------------------------------

    def start(self) -> Step:
        """Begin the run: ``agent_start``, ``turn_start`` and the prompts' message events."""
        self._check("start")
        self._fire("start")
        return self._take()

    def steering_polled(self, messages: Any) -> Step:
        """``get_steering_messages()`` returned ``messages``.

        Taken as ``Agent.steer()`` takes a message: None is nothing, a str is one user message,
        a message is one message, a list holds messages or strs (a dict with a known role is
        validated into that message). Anything else fails the run with an error naming the
        poll and the offending item."""
        self._check("steering_polled")
        return self._polled_input("steering_polled", "get_steering_messages", messages)

    def follow_up_polled(self, messages: Any) -> Step:
        """``get_follow_up_messages()`` returned ``messages`` (taken as in
        :meth:`steering_polled`)."""
        self._check("follow_up_polled")
        return self._polled_input("follow_up_polled", "get_follow_up_messages", messages)

    def _polled_input(self, trigger: str, poll: str, messages: Any) -> Step:
        try:
            self._polled = coerce_messages(messages, poll)
        except InvalidValueError as exc:
            self._polled = []
            self._failure = exc
            self._fire("fail")
            return self._take()
        if not self._polled and self._abort_if_signalled():
            return self._take()  # polled messages are kept: they start the (aborted) turn
        self._fire(trigger)
        return self._take()

    def stream_update(self, event: Any) -> MessageUpdateEvent | None:
        """The hot path of ``stream_event``: for a ``*_start/_delta/_end`` event of a started
        message, the ``message_update`` to emit; None for anything else (feed that to
        :meth:`stream_event`, which also reports what is wrong with a malformed event). Saves
        building a :class:`Step` per delta."""
        try:
            if (
                self._message_started
                and event.type in _STREAM_UPDATE_TYPES
                and self._handle.state == "streaming"
                and isinstance(event.partial, AssistantMessage)
            ):
                self._partial = event.partial
                return MessageUpdateEvent(message=event.partial, assistant_message_event=event)
        except (AttributeError, TypeError):  # not an event: stream_event says so
            pass
        return None

    def stream_event(self, event: Any) -> Step:
        """Feed one event from the stream function (no transition per delta).

        An object that is not a stream event (no str ``type``) raises
        :class:`MachineInputError` and changes nothing (the driver turns it into a failure of
        the stream function). An event of an unknown type, an update whose ``partial`` is not
        an :class:`AssistantMessage`, and a ``done``/``error`` event whose message is not a
        valid final assistant message fail the run, with an error saying what the stream
        function did wrong."""
        if self._handle.state != "streaming":
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
        if kind in _STREAM_UPDATE_TYPES or kind == "start":
            partial = getattr(event, "partial", None)
            if not isinstance(partial, AssistantMessage):
                return self._stream_failed(
                    f"Stream function yielded a {kind!r} event whose partial is "
                    f"{describe_value(partial)}; expected an AssistantMessage"
                )
            if kind == "start":
                if not self._message_started:
                    self._message_started = True
                    self._partial = partial
                    return Step([MessageStartEvent(message=partial)], [])
                return Step([], [])
            if self._message_started:
                self._partial = partial
                return Step(
                    [MessageUpdateEvent(message=partial, assistant_message_event=event)], []
                )
            return Step([], [])  # deltas before `start` are dropped
        if kind == "done" or kind == "error":
            try:
                final = check_terminal_message(
                    kind, getattr(event, "message" if kind == "done" else "error", None)
                )
            except InvalidValueError as exc:
                return self._stream_failed(str(exc))
            self._final = final
            self._fire("model_finished")
            return self._take()
        return self._stream_failed(f"Stream function yielded an unknown event type: {kind!r}")

    def _stream_failed(self, text: str) -> Step:
        self._failure = InvalidValueError(text)
        self._fire("fail")
        return self._take()

    def stream_exhausted(self) -> Step:
        """The stream ended without a ``done``/``error`` event: a failure of the stream function."""
        self._check("stream_exhausted")
        self._failure = RuntimeError("Stream function ended without a done or error event")
        self._fire("fail")
        return self._take()

    def tool_update(self, index: int, partial: AgentToolResult) -> Step:
        """The running tool call ``index`` reported a partial result: a
        ``tool_execution_update`` (nothing once the call settled). A partial that is not an
        :class:`AgentToolResult` (or a dict that validates as one) raises
        :class:`MachineInputError`."""
        self._check("tool_update")
        c = self._call_at("tool_update", index)
        if c.stage != _RUNNING:
            return Step([], [])
        if not isinstance(partial, AgentToolResult):
            try:
                partial = AgentToolResult.model_validate(partial)
            except ValidationError as exc:
                raise self._bad_input(
                    "tool_update",
                    f"tool_update: the partial result of tool call #{index} is "
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

    def tool_finished(
        self, index: int, result: Any = None, error: BaseException | None = None
    ) -> Step:
        """The tool call ``index`` (the ``ExecuteTool`` effect's index) returned ``result`` or
        raised ``error``. ``result`` is an :class:`AgentToolResult` or a dict that validates as
        one; anything else becomes an error result naming the tool. Finishing a call that is not
        running raises :class:`MachineInputError`."""
        self._check("tool_finished")
        c = self._call_at("tool_finished", index)
        if c.stage != _RUNNING:
            raise self._bad_input(
                "tool_finished",
                f"tool_finished: tool call #{index} ({c.call.name}) is not running "
                f"(it {_STAGE_TEXT[c.stage]}); only a call handed out by an ExecuteTool effect "
                f"can finish, once",
            )
        if error is not None and not isinstance(error, BaseException):
            raise self._bad_input(
                "tool_finished",
                f"tool_finished: error must be an exception, not {describe_value(error)}",
            )
        if error is not None:
            c.result, c.is_error = error_result(exc_text(error)), True
        else:
            try:
                c.result = _as_result(result, c.call.name)
                c.is_error = bool(c.result.is_error)
            except (TypeError, ValueError) as exc:
                c.result, c.is_error = error_result(str(exc)), True
        if self.config.after_tool_call is not None and not self._signal_fired():
            assert self._final is not None
            c.stage = _AFTER
            ctx = AfterToolCallContext(
                assistant_message=self._final,
                tool_call=c.call,
                args=c.args,
                result=c.result,
                is_error=c.is_error,
                context=self.context,
            )
            self._effects.append(CallHook("after_tool_call", ctx, index))
        else:
            self._complete(c)
        return self._take()

    def hook_returned(self, value: Any = None, index: int | None = None) -> Step:
        """The hook the machine asked for (a :class:`CallHook` effect) returned ``value``;
        ``index`` is the effect's index for tool hooks.

        A value of the wrong kind is the hook's mistake, not a stepping one: for
        ``before_tool_call``/``after_tool_call`` it becomes that call's error result, for
        ``prepare_next_turn``/``should_stop_after_turn`` a failure of the run; either way the
        text names the hook and what was wrong."""
        self._check("hook_returned")
        state = self._handle.state
        if state == "turn_end":
            return self._after_turn_hook(value)
        if state == "preparing_tools":
            c = self._hook_call("hook_returned", index, _BEFORE)
            try:
                before = check_before_result(value)
            except InvalidValueError as exc:
                blocked: str | None = str(exc)
            else:
                blocked = None
                if before is not None and before.block:
                    blocked = before.reason or BLOCKED_TEXT
            if blocked is not None:
                self._settle_immediate(c, blocked)
            else:
                c.stage = _PREPARED
            self._prepare_more()
        else:
            c = self._hook_call("hook_returned", index, _AFTER)
            try:
                assert c.result is not None
                c.result, c.is_error = merge_after(c.result, c.is_error, check_after_result(value))
            except Exception as exc:
                c.result, c.is_error = error_result(exc_text(exc)), True
            self._complete(c)
        return self._take()

    def hook_failed(self, error: BaseException, index: int | None = None) -> Step:
        """A tool hook raised: that call's result becomes an error with the exception's text."""
        self._check("hook_failed")
        if self._handle.state == "preparing_tools":
            c = self._hook_call("hook_failed", index, _BEFORE)
            self._settle_immediate(c, exc_text(error))
            self._prepare_more()
        else:
            c = self._hook_call("hook_failed", index, _AFTER)
            c.result, c.is_error = error_result(exc_text(error)), True
            self._complete(c)
        return self._take()

    def arguments_prepared(
        self, index: int, value: Any = None, error: BaseException | None = None
    ) -> Step:
        """A tool's ``prepare_arguments`` (asked for by a :class:`PrepareArguments` effect)
        returned ``value`` — which is then validated — or raised ``error`` (the call's result
        becomes an error with its text)."""
        self._check("arguments_prepared")
        c = self._hook_call("arguments_prepared", index, _PREPARING)
        if error is not None:
            self._settle_immediate(c, exc_text(error))
        else:
            self._validate(c, value)
        self._prepare_more()
        return self._take()

    def proceed(self) -> Step:
        """The events of the turn's end were delivered (answers a :class:`Proceed` effect)."""
        self._check("proceed")
        if self._turn_stage != "proceed":
            raise self._bad_input(
                "proceed", "proceed: the machine did not ask for it (no Proceed effect is pending)"
            )
        self._turn_stage = ""
        if not self._abort_if_signalled():
            self._fire("turn_closed")
        return self._take()

    def abort(self) -> Step:
        """The abort signal fired: end the run now, losing nothing (see the loop guide)."""
        self._check("abort")
        self._aborted = True
        self._fire("abort")
        return self._take()

    def fail(self, error: BaseException) -> Step:
        """A failure: a hook, poll, stream function or emit raised ``error`` (its text becomes
        the failure message's ``error_message``)."""
        self._check("fail")
        self._failure = error
        self._fire("fail")
        return self._take()

    def _bad_input(self, name: str, problem: str) -> MachineInputError:
        state = self._handle.state
        return MachineInputError(name, state, self.declaration.accepted_inputs(state), problem)

    def _call_at(self, name: str, index: Any) -> _Call:
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

    # --- engine -----------------------------------------------------------------------------

    def _check(self, name: str) -> None:
        state = self._handle.state
        if name not in self._accepts[state]:
            raise MachineInputError(name, state, self.declaration.accepted_inputs(state))

    def _take(self) -> Step:
        step = Step(self._out, self._effects)
        self._out = []
        self._effects = []
        return step

    def _after_transition(self, spec: TransitionSpec) -> None:
        self._fired = spec

    def check_guard(self, name: str) -> bool:
        result: bool = getattr(self, f"_guard_{name}")()
        return result

    def _fire(self, trigger: str) -> None:
        # The shared transitions.Machine takes the transition: its Transition objects for this
        # trigger and source check the guards in declaration order, change the handle's state
        # and run the `after` callback that names the declared transition. We hand them the
        # EventData ourselves instead of going through `model.trigger(name)`, whose generic
        # event processing (prepare/finalize callbacks, queue, logging) costs ~30% more.
        handle = self._handle
        source = handle.state
        machine = self._machine
        event = machine.events[trigger]
        candidates = event.transitions.get(source, ())
        self._fired = None
        if candidates:
            data = EventData(machine.get_state(source), event, machine, handle, (), {})
            for transition in candidates:
                data.transition = transition
                if transition.execute(data):
                    break
        spec = self._fired
        if spec is None:
            raise MachineError(
                f"no declared transition for {trigger!r} from {source!r} had its guards hold"
            )
        record = TransitionRecord(spec.index, trigger, source, spec.dest)
        self.history.append(record)
        if self.on_transition is not None:
            try:
                self.on_transition(record)
            except Exception:  # an observer must not break the run (or leave it mid-step)
                logger.exception("on_transition raised; ignored")
        for action in spec.emits:
            self._actions[action]()
        enter = self._enter_table.get(spec.dest)
        if enter is not None:
            enter()

    def _signal_fired(self) -> bool:
        return self.signal is not None and self.signal.aborted

    def _abort_if_signalled(self) -> bool:
        if self._signal_fired() and not self._aborted:
            self._aborted = True
            self._fire("abort")
            return True
        return False

    # --- guards -----------------------------------------------------------------------------

    def _guard_first_turn(self) -> bool:
        return self._first_turn

    def _guard_has_new_messages(self) -> bool:
        return bool(self._polled)

    def _guard_tools_continue(self) -> bool:
        return self._batch_had_calls and not self._batch_terminated

    def _guard_assistant_failed(self) -> bool:
        return self._final is not None and self._final.stop_reason in ("error", "aborted")

    def _guard_truncated_tool_calls(self) -> bool:
        final = self._final
        return final is not None and final.stop_reason == "length" and bool(final.tool_calls())

    def _guard_has_tool_calls(self) -> bool:
        return self._final is not None and bool(self._final.tool_calls())

    def _guard_has_runnable_calls(self) -> bool:
        return any(c.stage == _PREPARED for c in self._calls)

    def _guard_calls_remain(self) -> bool:
        return self._cursor < len(self._calls)

    def _guard_stop_requested(self) -> bool:
        return self._stop_requested

    def _guard_turn_open(self) -> bool:
        return self._turn_open

    # --- entering states --------------------------------------------------------------------

    def _enter_awaiting_steering(self) -> None:
        if self._abort_if_signalled():
            return
        if self.config.get_steering_messages is None:
            self._polled = []
            self._fire("steering_polled")
        else:
            self._effects.append(PollSteering())

    def _enter_awaiting_follow_up(self) -> None:
        if self._abort_if_signalled():
            return
        if self.config.get_follow_up_messages is None:
            self._polled = []
            self._fire("follow_up_polled")
        else:
            self._effects.append(PollFollowUp())

    def _enter_streaming(self) -> None:
        self._first_turn = False
        self._partial = None
        self._final = None
        self._message_started = False
        self._calls = []
        self._cursor = 0
        if self._abort_if_signalled():
            return
        self._effects.append(CallModel(self.context, self.model, self.reasoning))

    def _enter_preparing_tools(self) -> None:
        if not self._calls:
            assert self._final is not None
            self._calls = [_Call(i, call) for i, call in enumerate(self._final.tool_calls())]
            self._parallel = self.config.tool_execution != "sequential" and not any(
                _tool_mode(self.context.tools, c.call.name) == "sequential" for c in self._calls
            )
        if self._abort_if_signalled():
            return
        self._prepare_more()

    def _enter_executing(self) -> None:
        if self._abort_if_signalled():
            return
        for c in self._calls:
            if c.stage == _PREPARED:
                c.stage = _RUNNING
                assert c.tool is not None
                self._effects.append(ExecuteTool(c.index, c.tool, c.call, c.args))

    def _enter_turn_end(self) -> None:
        calls = self._calls
        self._batch_had_calls = bool(calls)
        self._batch_terminated = bool(calls) and all(
            c.result is not None and c.result.terminate is True for c in calls
        )
        self._stop_requested = False
        if self._abort_if_signalled():
            return
        self._turn_stage = ""
        if self.config.prepare_next_turn is not None:
            self._turn_stage = "prepare"
            self._effects.append(CallHook("prepare_next_turn", self._turn_context()))
        else:
            self._ask_should_stop()

    # --- tools ------------------------------------------------------------------------------

    def _prepare_more(self) -> None:
        """Steps 1-5 of SPEC §3.2 for calls from the cursor on (one runnable call at a time in
        sequential mode), then fire ``tools_prepared``. Pauses while a before hook runs."""
        calls = self._calls
        while self._cursor < len(calls):
            c = calls[self._cursor]
            if c.stage == _NEW:
                if self._abort_if_signalled():
                    return
                c.started = True
                self._out.append(
                    ToolExecutionStartEvent(
                        tool_call_id=c.call.id, tool_name=c.call.name, args=c.call.arguments
                    )
                )
                try:
                    tool = find_tool(self.context.tools, c.call.name)
                    # a copy: prepare_arguments, before_tool_call and the tool may mutate
                    # the arguments; the assistant message's tool call must not change
                    raw: Any = _json_copy(c.call.arguments)
                except ToolCallRejected as exc:
                    self._settle_immediate(c, str(exc))
                except Exception as exc:
                    self._settle_immediate(c, exc_text(exc))
                else:
                    c.tool = tool
                    if tool.prepare_arguments is not None:
                        # user code: the driver calls it (an effect), the core stays pure
                        c.stage = _PREPARING
                        self._effects.append(PrepareArguments(c.index, tool, raw))
                        return
                    if self._validate(c, raw):
                        return
            elif c.stage == _BEFORE or c.stage == _PREPARING:
                return
            self._cursor += 1
            if not self._parallel and c.stage == _PREPARED:
                break
        self._fire("tools_prepared")

    def _validate(self, c: _Call, raw: Any) -> bool:
        """Validate a call's arguments; then ask for ``before_tool_call`` (True: paused until
        it returns) or mark the call prepared. A rejected call is settled with its error."""
        assert c.tool is not None
        try:
            c.args = validate_arguments(c.tool, raw)
        except ToolCallRejected as exc:
            self._settle_immediate(c, str(exc))
            return False
        except Exception as exc:
            self._settle_immediate(
                c, f'Validation failed for tool "{c.call.name}": {exc_text(exc)}'
            )
            return False
        if self.config.before_tool_call is not None:
            assert self._final is not None
            c.stage = _BEFORE
            ctx = BeforeToolCallContext(
                assistant_message=self._final,
                tool_call=c.call,
                args=c.args,
                context=self.context,
            )
            self._effects.append(CallHook("before_tool_call", ctx, c.index))
            return True
        c.stage = _PREPARED
        return False

    def _hook_call(self, name: str, index: Any, stage: int) -> _Call:
        c = self._call_at(name, index)
        if c.stage != stage:
            hook = {_BEFORE: "before_tool_call", _PREPARING: "prepare_arguments"}.get(
                stage, "after_tool_call"
            )
            raise self._bad_input(
                name,
                f"{name}: tool call #{index} ({c.call.name}) is not waiting for {hook} "
                f"(it {_STAGE_TEXT[c.stage]})",
            )
        return c

    def _settle_immediate(self, c: _Call, text: str) -> None:
        c.result, c.is_error, c.stage = error_result(text), True, _DONE
        self._out.append(
            ToolExecutionEndEvent(
                tool_call_id=c.call.id, tool_name=c.call.name, result=c.result, is_error=True
            )
        )
        if not self._parallel:
            self._send_result_message(c)

    def _complete(self, c: _Call) -> None:
        assert c.result is not None
        c.stage = _DONE
        self._out.append(
            ToolExecutionEndEvent(
                tool_call_id=c.call.id, tool_name=c.call.name, result=c.result, is_error=c.is_error
            )
        )
        if not self._parallel:
            self._send_result_message(c)
        if not any(x.stage in (_RUNNING, _AFTER) for x in self._calls):
            self._fire("tools_settled")

    def _send_result_message(self, c: _Call) -> None:
        result = c.result
        assert result is not None
        message = ToolResultMessage(
            tool_call_id=c.call.id,
            tool_name=c.call.name,
            content=result.content,
            details=result.details,
            usage=result.usage,
            added_tool_names=result.added_tool_names,
            is_error=c.is_error,
        )
        c.message = message
        self._append(message)

    def _append(self, message: AgentMessage) -> None:
        self.context.messages.append(message)
        self.new_messages.append(message)
        self._out.append(MessageStartEvent(message=message))
        self._out.append(MessageEndEvent(message=message))

    # --- between turns ----------------------------------------------------------------------

    def _turn_context(self) -> PrepareNextTurnContext:
        return PrepareNextTurnContext(
            message=self._final,
            tool_results=self._tool_results(),
            context=self.context,
            new_messages=list(self.new_messages),
        )

    def _ask_should_stop(self) -> None:
        if self.config.should_stop_after_turn is not None:
            self._turn_stage = "should_stop"
            self._effects.append(CallHook("should_stop_after_turn", self._turn_context()))
        elif self._turn_stage == "prepare":
            # prepare_next_turn ran (an effect): turn_end was delivered before it
            self._fire("turn_closed")
        else:
            self._turn_stage = "proceed"
            self._effects.append(Proceed())

    def _after_turn_hook(self, value: Any) -> Step:
        if self._turn_stage == "prepare":
            try:
                update = check_turn_update(value)
            except InvalidValueError as exc:
                self._failure = exc
                self._fire("fail")
                return self._take()
            if update is not None:
                if update.context is not None:
                    self.context = update.context.copy()
                if update.model is not None:
                    self.model = update.model
                if update.thinking_level is not None:
                    self.reasoning = (
                        None if update.thinking_level == "off" else update.thinking_level
                    )
            if not self._abort_if_signalled():
                self._ask_should_stop()
        elif self._turn_stage == "should_stop":
            try:
                self._stop_requested = check_should_stop(value)
            except InvalidValueError as exc:
                self._failure = exc
                self._fire("fail")
                return self._take()
            if not self._abort_if_signalled():
                self._fire("turn_closed")
        else:
            raise self._bad_input(
                "hook_returned", "hook_returned: no hook is running after the turn"
            )
        return self._take()

    def _tool_results(self) -> list[ToolResultMessage]:
        return [c.message for c in self._calls if c.message is not None]

    # --- emit actions (named in the declaration's [emits]) ------------------------------------

    def _emit_agent_start(self) -> None:
        self._out.append(AgentStartEvent())

    def _emit_turn_start(self) -> None:
        self._turn_open = True
        self._out.append(TurnStartEvent())

    def _emit_prompt_messages(self) -> None:
        out = self._out
        for message in self.prompts:
            out.append(MessageStartEvent(message=message))
            out.append(MessageEndEvent(message=message))

    def _emit_injected_messages(self) -> None:
        polled, self._polled = self._polled, []
        for message in polled:
            self._append(message)

    def _emit_assistant_end(self) -> None:
        final = self._final
        if final is None:
            final = self._failure_message(self._partial)
            self._final = final
        if not self._message_started:
            self._message_started = True
            self._out.append(MessageStartEvent(message=final))
        self.context.messages.append(final)
        self.new_messages.append(final)
        self._out.append(MessageEndEvent(message=final))

    def _emit_truncated_results(self) -> None:
        assert self._final is not None
        self._parallel = False
        self._calls = [_Call(i, call) for i, call in enumerate(self._final.tool_calls())]
        for c in self._calls:
            c.started = True
            self._out.append(
                ToolExecutionStartEvent(
                    tool_call_id=c.call.id, tool_name=c.call.name, args=c.call.arguments
                )
            )
            self._settle_immediate(c, TRUNCATED_TEXT.format(name=c.call.name))
        self._cursor = len(self._calls)

    def _emit_tool_result_messages(self) -> None:
        for c in self._calls:
            if c.message is None and c.stage == _DONE:
                self._send_result_message(c)

    def _emit_unanswered_results(self) -> None:
        for c in self._calls:
            if c.stage == _DONE:
                continue
            if not c.started:
                c.started = True
                self._out.append(
                    ToolExecutionStartEvent(
                        tool_call_id=c.call.id, tool_name=c.call.name, args=c.call.arguments
                    )
                )
            c.result, c.is_error, c.stage = error_result(ABORTED_TEXT), True, _DONE
            self._out.append(
                ToolExecutionEndEvent(
                    tool_call_id=c.call.id, tool_name=c.call.name, result=c.result, is_error=True
                )
            )
            if not self._parallel:  # sequential: each call's result pair before the next call
                self._send_result_message(c)
        for c in self._calls:  # parallel: the result pairs after every end, in source order
            if c.message is None:
                self._send_result_message(c)
        self._cursor = len(self._calls)

    def _emit_turn_end(self) -> None:
        self._turn_open = False
        self._out.append(TurnEndEvent(message=self._final, tool_results=self._tool_results()))

    def _emit_failure_turn(self) -> None:
        self._out.append(TurnStartEvent())
        failure = self._failure_message(None)
        self._final = failure
        self._append(failure)
        self._out.append(TurnEndEvent(message=failure, tool_results=[]))

    def _emit_agent_end(self) -> None:
        self.end_reason = reason = self._end_reason()
        self._out.append(AgentEndEvent(messages=list(self.new_messages), reason=reason))

    # --- helpers ----------------------------------------------------------------------------

    def _failure_message(self, partial: AssistantMessage | None) -> AssistantMessage:
        """The message that closes a turn cut short by abort or failure (SPEC §4, §5)."""
        aborted = self._aborted or self._signal_fired()
        stop: Literal["aborted", "error"] = "aborted" if aborted else "error"
        if self._failure is not None:
            text = exc_text(self._failure)
        else:
            text = REQUEST_ABORTED
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
        )

    def _end_reason(self) -> Literal["completed", "stopped", "aborted", "error"]:
        if self._aborted:
            return "aborted"
        if self._failure is not None:
            return "aborted" if self._signal_fired() else "error"
        final = self._final
        if final is not None and final.stop_reason in ("error", "aborted"):
            return "aborted" if final.stop_reason == "aborted" else "error"
        if self._stop_requested or self._batch_terminated:
            return "stopped"
        return "completed"


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


def _as_result(value: Any, tool_name: str) -> AgentToolResult:
    if isinstance(value, AgentToolResult):
        return value
    if isinstance(value, dict):
        try:
            return AgentToolResult.model_validate(value)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'root'}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
            raise TypeError(
                f"Tool {tool_name} returned an invalid AgentToolResult: {problems}"
            ) from None
    raise TypeError(
        f"Tool {tool_name} returned {type(value).__name__}; expected an AgentToolResult"
    )


def _tool_mode(tools: list[AgentTool], name: str) -> str | None:
    for tool in tools:
        if tool.name == name:
            return tool.execution_mode
    return None


_ACCEPTS: dict[int, dict[str, frozenset[str]]] = {}


def _accepts_table(decl: Declaration) -> dict[str, frozenset[str]]:
    table = _ACCEPTS.get(id(decl))
    if table is None:
        table = {state: frozenset(decl.accepted_inputs(state)) for state in decl.states}
        _ACCEPTS[id(decl)] = table
    return table
