"""The ``Agent``: a transcript, listeners, steering and follow-up queues around the loop (see
docs/reference.md#the-agent).

An :class:`Agent` owns the conversation state (:class:`AgentState`) and runs the low-level loop
(:func:`~agentcore_fsm.run_agent_loop`) once per :meth:`Agent.prompt` or :meth:`Agent.continue_`.
Every event the loop emits first updates the state (the *reduction*: ``message_end`` appends to
the transcript, ``tool_execution_start``/``_end`` track pending calls, ...) and is then handed to
each listener, one after another, in subscription order::

    agent = Agent(stream_fn=FauxProvider([faux_response("Hello!")]))
    agent.subscribe(lambda event, signal: print(event.type))
    await agent.prompt("Hi")

Whether a run is active is not a flag: the agent's lifecycle is the declared machine in
``states/agent.toml`` (``idle`` → ``running`` → ``aborting`` → ``finished``), run by the same
declared-machine engine as the loop. Each run of the agent is one run of that machine, made
when the run starts and dropped when it has finished, so an idle agent holds none.
:attr:`Agent.lifecycle_state` reads it; the busy checks of ``prompt``, ``continue_`` and
``reset`` read it.

Decisions (each is also stated where it applies; see docs/reference.md#decisions):

* ``prompt()`` and ``continue_()`` return the messages the run created (the same list as
  ``agent_end.messages``); the reference returned nothing.
* Configuration is read when a run starts: changing an attribute (the model, the hooks, the
  queue modes, ...) during a run applies from the next run. Queued messages are read live.
* Subscribing the same callable twice makes two subscriptions; each ``unsubscribe`` removes its
  own and may be called more than once. A listener added or removed while an event is being
  delivered takes effect from the next event.
* If several listeners raise on one event, the first exception fails the run; the others are
  logged on the ``agentcore_fsm`` logger.
* ``prompt([])`` raises ``ValueError("No messages to prompt with")``: an empty prompt is what
  ``continue_()`` is for.
* Cancelling the task that awaits ``prompt()`` (a timeout, say) closes the run as aborted:
  listeners still receive its closing events up to ``agent_end`` (within a grace period, see
  ``driver.CLOSE_GRACE_S``), then the cancellation goes on; :meth:`Agent.abort` is the way to
  end a run without cancelling anything.
* ``abort()`` and ``steer()``/``follow_up()`` must be called from the thread running the event
  loop (from another thread, go through ``anyio.from_thread.run_sync``).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import sys
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, get_args

import anyio

from agentcore_fsm.core.abort import AbortController, AbortSignal
from agentcore_fsm.core.approval import ApprovalDecision, ApprovalRequest, RunSuspended
from agentcore_fsm.core.boundary import coerce_messages
from agentcore_fsm.core.config import (
    MODEL_CALL_OPTIONS,
    AgentContext,
    AgentLoopConfig,
    ModelCallOptions,
    StreamFn,
)
from agentcore_fsm.core.declaration import Declaration, load_declaration
from agentcore_fsm.core.declared import DeclaredMachine
from agentcore_fsm.core.machine import MachineError, TransitionRecord
from agentcore_fsm.core.messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ThinkingLevel,
    ToolResultMessage,
    UserMessage,
)
from agentcore_fsm.core.run_context import bind_run
from agentcore_fsm.core.tools import AgentTool, ToolExecutionMode
from agentcore_fsm.runtime import driver
from agentcore_fsm.runtime.driver import (
    NO_STREAM_FN,
    get_default_stream_fn,
    run_agent_loop,
    run_agent_loop_continue,
)

if TYPE_CHECKING:
    from agentcore_fsm.persist.store import RunStore

__all__ = [
    "Agent",
    "AgentBusyError",
    "AgentListener",
    "AgentState",
    "QueueMode",
]

logger = logging.getLogger("agentcore_fsm")

QueueMode: TypeAlias = Literal["one-at-a-time", "all"]
"""How a queue is drained: the oldest message only, or every queued message at once."""

AgentListener: TypeAlias = Callable[[Any, AbortSignal], Any]
"""``listener(event, signal)``, a plain function or ``async def``; its return value is ignored."""

PROMPT_BUSY = (
    "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, "
    "or wait for completion."
)
CONTINUE_BUSY = "Agent is already processing. Wait for completion before continuing."
RESET_BUSY = "Agent is already processing. Wait for completion before resetting."
REQUEST_ABORTED = "Request was aborted"
ABORTED_TEXT = "Operation aborted"

_THINKING_LEVELS: frozenset[str] = frozenset(get_args(ThinkingLevel))
_QUEUE_MODES: frozenset[str] = frozenset(get_args(QueueMode))
_TOOL_EXECUTION: frozenset[str] = frozenset(get_args(ToolExecutionMode))


class AgentBusyError(RuntimeError):
    """A run is active: the call cannot start another one (or reset the agent) now."""


def _check_choice(what: str, value: str, allowed: frozenset[str]) -> str:
    if value not in allowed:
        choices = ", ".join(repr(v) for v in sorted(allowed))
        raise ValueError(f"{what} must be one of {choices}; got {value!r}")
    return value


# --- state ----------------------------------------------------------------------------------


class AgentState:
    """What an agent holds: its configuration for the model and the conversation so far.

    ``messages`` and ``tools`` are the live lists (append to them between runs as you like);
    assigning a list stores a copy. ``is_streaming``, ``streaming_message``,
    ``pending_tool_calls``, ``pending_approvals`` and ``error_message`` are maintained by the agent
    and read-only.
    ``pending_tool_calls`` returns a fresh set of ids on every read.
    """

    __slots__ = (
        "_error_message",
        "_is_streaming",
        "_messages",
        "_pending_approvals",
        "_pending_tool_calls",
        "_streaming_message",
        "_thinking_level",
        "_tools",
        "model",
        "system_prompt",
    )

    def __init__(
        self,
        system_prompt: str,
        model: Model,
        thinking_level: ThinkingLevel,
        tools: Iterable[AgentTool],
        messages: Iterable[AgentMessage],
    ) -> None:
        self.system_prompt = system_prompt
        self.model = model
        self._thinking_level: ThinkingLevel = thinking_level
        self.thinking_level = thinking_level
        self._tools: list[AgentTool] = list(tools)
        self._messages: list[AgentMessage] = coerce_messages(list(messages), "messages")
        self._is_streaming = False
        self._streaming_message: AgentMessage | None = None
        self._pending_tool_calls: set[str] = set()
        self._pending_approvals: dict[str, ApprovalRequest] = {}
        self._error_message: str | None = None

    @property
    def thinking_level(self) -> ThinkingLevel:
        """The reasoning level of the next run (``"off"`` sends no reasoning option)."""
        return self._thinking_level

    @thinking_level.setter
    def thinking_level(self, value: ThinkingLevel) -> None:
        _check_choice("thinking_level", value, _THINKING_LEVELS)
        self._thinking_level = value

    @property
    def tools(self) -> list[AgentTool]:
        """The live list of tools (a run uses a copy taken when it starts)."""
        return self._tools

    @tools.setter
    def tools(self, value: Iterable[AgentTool]) -> None:
        self._tools = list(value)

    @property
    def messages(self) -> list[AgentMessage]:
        """The live transcript. During a run it grows only through ``message_end`` events."""
        return self._messages

    @messages.setter
    def messages(self, value: Iterable[AgentMessage]) -> None:
        self._messages = coerce_messages(list(value), "messages")

    @property
    def is_streaming(self) -> bool:
        """True from the start of a run until its ``agent_end`` listeners have all returned."""
        return self._is_streaming

    @property
    def streaming_message(self) -> AgentMessage | None:
        """The message between its ``message_start`` and ``message_end`` (else None)."""
        return self._streaming_message

    @property
    def pending_tool_calls(self) -> set[str]:
        """Ids of the tool calls that have started and not yet ended (a copy)."""
        return set(self._pending_tool_calls)

    @property
    def pending_approvals(self) -> list[ApprovalRequest]:
        """The tool calls waiting for approval, in the order they asked (a copy): those of the
        running run, or of a suspended or interrupted one loaded with the session. Decide with
        :meth:`Agent.approve` / :meth:`Agent.deny`."""
        return list(self._pending_approvals.values())

    @property
    def error_message(self) -> str | None:
        """The error of the last run: a failed or aborted assistant message's
        ``error_message``, or ``"Request was aborted"``; None when the run went well."""
        return self._error_message

    def __repr__(self) -> str:
        return (
            f"AgentState(model={self.model.id!r}, thinking_level={self._thinking_level!r}, "
            f"messages={len(self._messages)}, tools={[t.name for t in self._tools]!r}, "
            f"is_streaming={self._is_streaming}, error_message={self._error_message!r})"
        )


# --- lifecycle ------------------------------------------------------------------------------


class _LifecycleRun(DeclaredMachine):
    """One run of the declared lifecycle (``states/agent.toml``): it declares no guards, emit
    actions or effects, so the engine only changes its state and records the transitions."""

    declaration_name = "agent"


class _Lifecycle:
    """Steps the declared lifecycle for one agent, one run at a time. An agent with no run
    active is ``idle`` and holds no machine."""

    __slots__ = ("_run", "declaration", "history")

    def __init__(self) -> None:
        self.declaration: Declaration = load_declaration("agent")
        self._run: _LifecycleRun | None = None
        self.history: list[TransitionRecord] = []

    @property
    def state(self) -> str:
        run = self._run
        return run.state if run is not None else self.declaration.initial

    def accepts(self, trigger: str) -> bool:
        return bool(self.declaration.transitions_from(self.state, trigger))

    def fire(self, trigger: str) -> None:
        run = self._run
        if run is None:
            if trigger != "start":
                raise MachineError(f"lifecycle input {trigger!r} with no run active")
            run = self._run = _LifecycleRun(self.declaration)
            self.history = run.history
        run._check(trigger)
        run.fire(trigger)
        if run.finished:
            self._run = None


# --- the agent ------------------------------------------------------------------------------


class _ApprovalWaiter:
    """A call of the running run waiting for :meth:`Agent.approve`/:meth:`Agent.deny`."""

    __slots__ = ("decision", "event")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.decision: ApprovalDecision | None = None


class _Subscription:
    """One ``subscribe`` call (compared by identity, so a listener may be subscribed twice)."""

    __slots__ = ("listener",)

    def __init__(self, listener: AgentListener) -> None:
        self.listener = listener


def _dequeue(queue: deque[AgentMessage], mode: str) -> list[AgentMessage]:
    if not queue:
        return []
    if mode == "all":
        items = list(queue)
        queue.clear()
        return items
    return [queue.popleft()]


def _as_message(message: AgentMessage | str, what: str) -> AgentMessage:
    """One message: a str becomes a user message; a dict with a known role is validated into
    that message; anything that is not a message raises TypeError naming ``what``."""
    if message is None or isinstance(message, (list, tuple)):
        raise TypeError(f"{what}: expected one message or a str, not {type(message).__name__}")
    return coerce_messages(message, what)[0]


def _as_prompts(
    input: str | AgentMessage | Sequence[AgentMessage],
    images: Sequence[ImageContent] | None,
) -> list[AgentMessage]:
    if isinstance(input, str):
        content: list[Any] = [TextContent(text=input)]
        content.extend(images or ())
        return [UserMessage(content=content)]
    if images:
        raise TypeError("images can only be given with a text prompt")
    if input is None:
        raise TypeError("prompt(): expected a str, a message or a list of messages, not None")
    prompts = coerce_messages(input, "prompt()")
    if not prompts:
        raise ValueError("No messages to prompt with")
    return prompts


async def _deliver_shielded(
    listeners: Sequence[_Subscription], event: Any, signal: AbortSignal
) -> None:
    """Hand ``event`` to ``listeners`` although the run is being cancelled: shielded, within
    the loop's grace period for closing a cancelled run; errors are logged."""
    with anyio.CancelScope(shield=True) as scope:
        scope.deadline = anyio.current_time() + driver.CLOSE_GRACE_S
        for entry in listeners:
            try:
                result = entry.listener(event, signal)
                if result is not None and inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("a listener raised on %s while the run was cancelled", event.type)
            except anyio.get_cancelled_exc_class():
                return  # the grace period is over
            except BaseException:
                logger.exception("a listener raised on %s while the run was cancelled", event.type)


def _answer_dangling_calls(messages: list[AgentMessage]) -> None:
    """Answer, with ``Operation aborted``, every tool call of the transcript's last answerable
    assistant message that has no result: the transcript stays valid for the next run even
    when a run was cut off before it could close itself (a cancellation whose closing events
    could not all be delivered)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if not isinstance(message, AssistantMessage):
            continue
        if message.stop_reason not in ("toolUse", "stop", "length"):
            return
        answered = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolResultMessage)}
        for call in message.tool_calls():
            if call.id not in answered:
                messages.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        tool_name=call.name,
                        content=[TextContent(text=ABORTED_TEXT)],
                        is_error=True,
                    )
                )
        return


def _running_loop() -> str | None:
    """The event loop running in this thread, if any ("asyncio" or "trio"). Neither library is
    imported for this: one that nobody imported runs no loop."""
    trio = sys.modules.get("trio")
    if trio is not None and trio.lowlevel.in_trio_run():
        return "trio"
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return None
    return "asyncio"


def _check_sync(method: str, instead: str) -> None:
    running = _running_loop()
    if running is not None:
        raise RuntimeError(
            f"Agent.{method}() cannot be used while an event loop ({running}) is running in "
            f"this thread; use `{instead}` instead."
        )


class Agent:
    """A stateful agent: a transcript, tools, listeners and message queues around the loop.

    Every keyword is a public attribute; a change applies from the next run. ``system_prompt``,
    ``model``, ``thinking_level``, ``tools`` and ``messages`` live in :attr:`state` (the
    attributes of the same name on the agent read and write those). ``model=None`` means
    ``Model(id="unknown")``. The hooks are those of :class:`~agentcore_fsm.AgentLoopConfig`;
    ``prepare_next_turn`` and ``should_stop_after_turn`` take ``(ctx, signal)``.
    ``thinking_level`` becomes the loop's ``reasoning`` (``"off"`` → None).

    With a run ``store`` (a :class:`~agentcore_fsm.RunStore`, e.g.
    :class:`~agentcore_fsm.SqliteRunStore`) every run is journaled under a new run id and the
    agent's ``session_id`` (one is made when none is given). An agent made with a store and the
    ``session_id`` of a session that already has runs loads its transcript from the session's
    last run; when that run did not finish (its process stopped), :attr:`interrupted_run`
    names it and :meth:`resume` continues it (``prompt`` and ``continue_`` refuse until then).
    See docs/reference.md#runs-that-survive.

    Tool calls that need approval (``AgentTool(requires_approval=...)``) wait until
    :meth:`approve` or :meth:`deny` decides them (``state.pending_approvals`` lists them;
    ``approval_timeout_s`` denies what is not decided in time); with a store, :meth:`suspend`
    leaves such a run waiting in the store for a later process. See
    docs/reference.md#approval-of-tool-calls.

    ``deps`` is the dependencies object every run of the agent hands its tools and hooks (see
    docs/tools.md).
    """

    def __init__(
        self,
        system_prompt: str = "",
        model: Model | None = None,
        thinking_level: ThinkingLevel = "off",
        tools: Iterable[AgentTool] = (),
        messages: Iterable[AgentMessage] = (),
        stream_fn: StreamFn | None = None,
        convert_to_llm: Callable[..., Any] | None = None,
        transform_context: Callable[..., Any] | None = None,
        get_api_key: Callable[..., Any] | None = None,
        before_tool_call: Callable[..., Any] | None = None,
        after_tool_call: Callable[..., Any] | None = None,
        prepare_next_turn: Callable[..., Any] | None = None,
        should_stop_after_turn: Callable[..., Any] | None = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        session_id: str | None = None,
        thinking_budgets: dict[str, int] | None = None,
        transport: str = "auto",
        max_retry_delay_ms: int | None = None,
        tool_execution: ToolExecutionMode = "parallel",
        on_transition: Callable[[TransitionRecord], None] | None = None,
        options: ModelCallOptions | None = None,
        store: RunStore | None = None,
        approval_timeout_s: float | None = None,
        deps: Any = None,
    ) -> None:
        if model is None:
            model = Model(id="unknown", provider="unknown", api="unknown")
        self._state = AgentState(system_prompt, model, thinking_level, tools, messages)
        self.stream_fn = stream_fn
        self.convert_to_llm = convert_to_llm
        self.transform_context = transform_context
        self.get_api_key = get_api_key
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.prepare_next_turn = prepare_next_turn
        self.should_stop_after_turn = should_stop_after_turn
        self.steering_mode = steering_mode
        self.follow_up_mode = follow_up_mode
        self.options = dataclasses.replace(options) if options is not None else ModelCallOptions()
        """The model-call options of every run (temperature, max_tokens, headers …; see
        :class:`~agentcore_fsm.ModelCallOptions`). ``session_id``, ``thinking_budgets``,
        ``transport`` and ``max_retry_delay_ms`` are also keywords and attributes of the agent,
        which read and write these; ``reasoning`` comes from ``thinking_level``."""
        # a keyword given (not at its default) wins over the same field of ``options``
        given = self.options
        if session_id is not None:
            given.session_id = session_id
        if thinking_budgets is not None:
            given.thinking_budgets = thinking_budgets
        if transport != "auto" or given.transport is None:
            given.transport = transport
        if max_retry_delay_ms is not None:
            given.max_retry_delay_ms = max_retry_delay_ms
        self.tool_execution = tool_execution
        self.on_transition = on_transition
        """Extension: called with each loop transition of a run (for recorders and debugging)."""

        self._listeners: list[_Subscription] = []
        self._steering: deque[AgentMessage] = deque()
        self._follow_ups: deque[AgentMessage] = deque()
        self._lifecycle = _Lifecycle()
        self._controller: AbortController | None = None
        self._idle: anyio.Event | None = None
        self.store = store
        """The run store the agent's runs are journaled in (None: not journaled); see
        docs/reference.md#runs-that-survive."""
        self._interrupted: str | None = None
        self.approval_timeout_s = approval_timeout_s
        """Deny a tool call whose approval has not been decided within this many seconds
        (None: wait)."""
        self._waiters: dict[str, _ApprovalWaiter] = {}  # calls of the running run that wait
        self._decisions: dict[str, ApprovalDecision] = {}  # made before the run asks again
        self._suspending = False
        self.deps = deps
        """The dependencies object of the agent's runs: what its tools and hooks reach (a
        function tool's ``RunContext.deps``, ``current_run().deps``; see docs/tools.md)."""
        if store is not None:
            self._load_session(store, bool(self._state._messages))

    # --- runs that survive ------------------------------------------------------------------

    def _load_session(self, store: RunStore, has_messages: bool) -> None:
        if self.options.session_id is None:
            self.options.session_id = uuid.uuid4().hex
        runs = store.runs(self.options.session_id)
        if not runs:
            return
        if has_messages:
            raise ValueError(
                f"session {self.options.session_id!r} already has runs in the store: its "
                "transcript is loaded from there, do not pass messages= as well"
            )
        from agentcore_fsm.runtime.resume import load_run_state

        last = runs[-1]
        machine, _ = load_run_state(
            store, last.run_id, self._loop_config(False), tools=self._state.tools
        )
        self._state._messages = list(machine.context.messages)
        if last.status != "finished":
            self._interrupted = last.run_id
            self._state._pending_approvals = {r.tool_call_id: r for r in machine.pending_approvals}

    @property
    def interrupted_run(self) -> str | None:
        """The id of the session's last run when it did not finish (its process stopped):
        :meth:`resume` continues it. None otherwise."""
        return self._interrupted

    async def resume(self) -> list[AgentMessage]:
        """Continue the session's interrupted run (:attr:`interrupted_run`) from its journal,
        like :func:`~agentcore_fsm.resume_run`; return the run's new messages. Listeners get
        the events from the resume point on (the transcript loaded with the session already
        holds what came before). Raises :class:`AgentBusyError` during a run and
        ``ValueError`` when there is nothing to resume."""
        if self.is_busy:
            raise AgentBusyError(PROMPT_BUSY)
        run_id, store = self._interrupted, self.store
        if run_id is None or store is None:
            raise ValueError("there is no interrupted run to resume")
        fn = self._stream_fn()
        return await self._run(None, fn, resume=run_id)

    # --- approval of tool calls ------------------------------------------------------------

    def approve(
        self,
        call_id: str,
        args: dict[str, Any] | None = None,
        *,
        reason: str | None = None,
        decided_by: str = "user",
    ) -> None:
        """Approve the tool call ``call_id`` waiting for approval (see
        :attr:`AgentState.pending_approvals`); ``args`` replace its arguments (validated
        against the tool's parameters again). For a call of a suspended or interrupted run,
        the decision is applied when :meth:`resume` continues it. Raises ``ValueError`` when no
        such call waits. Call it from the event loop's thread."""
        self._decide_call(
            call_id,
            ApprovalDecision(approved=True, reason=reason, decided_by=decided_by, args=args),
        )

    def deny(self, call_id: str, reason: str | None = None, *, decided_by: str = "user") -> None:
        """Deny the tool call ``call_id`` waiting for approval: it gets an error result with
        ``reason`` (``Tool call "NAME" was denied: REASON``). Otherwise as :meth:`approve`."""
        self._decide_call(
            call_id, ApprovalDecision(approved=False, reason=reason, decided_by=decided_by)
        )

    def suspend(self) -> None:
        """Stop the running run, unfinished, where it waits for approvals (only with a run
        store): its ``prompt()`` returns, the store keeps the run, :attr:`interrupted_run`
        names it; a later :meth:`approve`/:meth:`deny` and :meth:`resume` continue it, in this
        process or another one (see docs/reference.md#approval-of-tool-calls). Raises
        ``ValueError`` without a store or when no call waits for approval."""
        if self.store is None:
            raise ValueError("only an agent with a run store (store=...) can suspend a run")
        if not (self.is_busy and self._state._pending_approvals):
            raise ValueError("no tool call of a running run waits for approval")
        self._suspending = True
        for waiter in list(self._waiters.values()):
            waiter.event.set()  # no decision: the run suspends

    def _decide_call(self, call_id: str, decision: ApprovalDecision) -> None:
        waiter = self._waiters.get(call_id)
        if waiter is not None:
            if waiter.event.is_set():
                raise ValueError(f"tool call {call_id!r} has been decided already")
            waiter.decision = decision
            waiter.event.set()
            return
        if call_id in self._state._pending_approvals:
            if call_id in self._decisions:
                raise ValueError(f"tool call {call_id!r} has been decided already")
            # applied when the run asks for it (it has not yet, or it resumes later)
            self._decisions[call_id] = decision
            return
        waiting = ", ".join(self._state._pending_approvals) or "none"
        raise ValueError(f"no tool call {call_id!r} waits for approval (waiting: {waiting})")

    async def _decide(self, request: ApprovalRequest, signal: AbortSignal) -> Any:
        """The runs' ``decide_approval``: a decision made ahead (before a resume), or the one
        :meth:`approve`/:meth:`deny` make; None (no decision) once :meth:`suspend` was called."""
        call_id = request.tool_call_id
        decision = self._decisions.pop(call_id, None)
        if decision is not None:
            return decision
        if self._suspending:
            return None
        waiter = self._waiters[call_id] = _ApprovalWaiter()
        try:
            await waiter.event.wait()
        finally:
            if self._waiters.get(call_id) is waiter:
                del self._waiters[call_id]
        return waiter.decision

    def _check_not_interrupted(self) -> None:
        if self._interrupted is not None:
            raise ValueError(
                f"run {self._interrupted!r} of this session was interrupted: "
                "`await agent.resume()` it first"
            )

    # --- configuration ----------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        """``options.session_id``."""
        return self.options.session_id

    @session_id.setter
    def session_id(self, value: str | None) -> None:
        self.options.session_id = value

    @property
    def thinking_budgets(self) -> dict[str, int] | None:
        """``options.thinking_budgets``."""
        return self.options.thinking_budgets

    @thinking_budgets.setter
    def thinking_budgets(self, value: dict[str, int] | None) -> None:
        self.options.thinking_budgets = value

    @property
    def transport(self) -> str | None:
        """``options.transport``."""
        return self.options.transport

    @transport.setter
    def transport(self, value: str | None) -> None:
        self.options.transport = value

    @property
    def max_retry_delay_ms(self) -> int | None:
        """``options.max_retry_delay_ms``."""
        return self.options.max_retry_delay_ms

    @max_retry_delay_ms.setter
    def max_retry_delay_ms(self, value: int | None) -> None:
        self.options.max_retry_delay_ms = value

    @property
    def state(self) -> AgentState:
        """The agent's state (see :class:`AgentState`)."""
        return self._state

    @property
    def system_prompt(self) -> str:
        return self._state.system_prompt

    @system_prompt.setter
    def system_prompt(self, value: str) -> None:
        self._state.system_prompt = value

    @property
    def model(self) -> Model:
        return self._state.model

    @model.setter
    def model(self, value: Model) -> None:
        self._state.model = value

    @property
    def thinking_level(self) -> ThinkingLevel:
        return self._state.thinking_level

    @thinking_level.setter
    def thinking_level(self, value: ThinkingLevel) -> None:
        self._state.thinking_level = value

    @property
    def tools(self) -> list[AgentTool]:
        return self._state.tools

    @tools.setter
    def tools(self, value: Iterable[AgentTool]) -> None:
        self._state.tools = value

    @property
    def messages(self) -> list[AgentMessage]:
        return self._state.messages

    @messages.setter
    def messages(self, value: Iterable[AgentMessage]) -> None:
        self._state.messages = value

    @property
    def steering_mode(self) -> QueueMode:
        """``"one-at-a-time"`` (a drain takes the oldest message) or ``"all"``."""
        return self._steering_mode

    @steering_mode.setter
    def steering_mode(self, value: QueueMode) -> None:
        _check_choice("steering_mode", value, _QUEUE_MODES)
        self._steering_mode: QueueMode = value

    @property
    def follow_up_mode(self) -> QueueMode:
        """``"one-at-a-time"`` (a drain takes the oldest message) or ``"all"``."""
        return self._follow_up_mode

    @follow_up_mode.setter
    def follow_up_mode(self, value: QueueMode) -> None:
        _check_choice("follow_up_mode", value, _QUEUE_MODES)
        self._follow_up_mode: QueueMode = value

    @property
    def tool_execution(self) -> ToolExecutionMode:
        """``"parallel"`` (the default) or ``"sequential"``."""
        return self._tool_execution

    @tool_execution.setter
    def tool_execution(self, value: ToolExecutionMode) -> None:
        _check_choice("tool_execution", value, _TOOL_EXECUTION)
        self._tool_execution: ToolExecutionMode = value

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def lifecycle_state(self) -> str:
        """The lifecycle machine's state: ``idle``, ``running`` or ``aborting``."""
        return self._lifecycle.state

    @property
    def lifecycle_history(self) -> list[TransitionRecord]:
        """The lifecycle transitions of the current (or last) run, in order."""
        return list(self._lifecycle.history)

    @property
    def is_busy(self) -> bool:
        """True while a run is active (the lifecycle is not idle)."""
        return self._lifecycle.state != self._lifecycle.declaration.initial

    @property
    def signal(self) -> AbortSignal | None:
        """The active run's abort signal (the one listeners receive), or None when idle."""
        controller = self._controller
        return controller.signal if controller is not None else None

    def abort(self) -> None:
        """Abort the active run (see docs/reference.md#abort); a no-op when idle or already
        aborting.

        Returns at once: the run ends with ``agent_end(reason="aborted")`` (unless it was
        already delivering its ``agent_end``); ``await wait_for_idle()`` to wait for that."""
        lifecycle = self._lifecycle
        if not lifecycle.accepts("abort"):
            return
        lifecycle.fire("abort")
        assert self._controller is not None
        self._controller.abort()

    async def wait_for_idle(self) -> None:
        """Return once no run is active (at once when idle). Any number of tasks may wait."""
        idle = self._idle
        if idle is None or not self.is_busy:
            return
        await idle.wait()

    def reset(self) -> None:
        """Clear the transcript, both queues and the runtime fields; keep the configuration
        and the listeners. Raises :class:`AgentBusyError` while a run is active."""
        if self.is_busy:
            raise AgentBusyError(RESET_BUSY)
        state = self._state
        state._messages = []
        state._is_streaming = False
        state._streaming_message = None
        state._pending_tool_calls = set()
        state._error_message = None
        self._steering.clear()
        self._follow_ups.clear()

    # --- listeners --------------------------------------------------------------------------

    def subscribe(self, listener: AgentListener) -> Callable[[], None]:
        """Call ``listener(event, signal)`` for every event, after the state was updated for
        it. Listeners are awaited one after another in subscription order, and a run waits
        for them. Returns ``unsubscribe()`` (safe to call more than once)."""
        entry = _Subscription(listener)
        self._listeners.append(entry)

        def unsubscribe() -> None:
            try:
                self._listeners.remove(entry)
            except ValueError:
                pass

        return unsubscribe

    async def _emit(self, event: Any) -> None:
        self._reduce(event)
        controller = self._controller
        assert controller is not None
        signal = controller.signal
        first: Exception | None = None
        interrupt: BaseException | None = None
        listeners = tuple(self._listeners)
        for i, entry in enumerate(listeners):
            try:
                result = entry.listener(event, signal)
                if result is not None and inspect.isawaitable(result):
                    await result
            except Exception as exc:
                if first is None:
                    first = exc
                else:
                    logger.exception(
                        "another listener also raised on %s; only the first one counts",
                        event.type,
                    )
            except anyio.get_cancelled_exc_class():
                # cancelled from outside: the later listeners still get this event, so that
                # every listener sees the same, well-formed run (the loop then closes it)
                await _deliver_shielded(listeners[i + 1 :], event, signal)
                raise
            except BaseException as exc:  # KeyboardInterrupt & co: the others still get it
                if interrupt is None:
                    interrupt = exc
        if interrupt is not None:
            raise interrupt
        if first is not None:
            # the driver turns this into a run failure (or logs it while the run is ending)
            raise first

    def _reduce(self, event: Any) -> None:
        state = self._state
        kind = event.type
        if kind == "message_update" or kind == "message_start":
            state._streaming_message = event.message
        elif kind == "message_end":
            state._streaming_message = None
            state._messages.append(event.message)
        elif kind == "tool_execution_start":
            state._pending_tool_calls.add(event.tool_call_id)
        elif kind == "tool_execution_end":
            state._pending_tool_calls.discard(event.tool_call_id)
        elif kind == "approval_requested":
            state._pending_approvals[event.tool_call_id] = ApprovalRequest(
                tool_call_id=event.tool_call_id,
                tool_name=event.tool_name,
                args=event.args,
                reason=event.reason,
            )
        elif kind == "approval_decided":
            state._pending_approvals.pop(event.tool_call_id, None)
            self._decisions.pop(event.tool_call_id, None)
        elif kind == "turn_end":
            message = event.message
            if getattr(message, "role", None) == "assistant" and message.error_message:
                state._error_message = message.error_message
        elif kind == "agent_end":
            state._streaming_message = None
            if event.reason == "aborted" and state._error_message is None:
                state._error_message = REQUEST_ABORTED

    # --- queues -----------------------------------------------------------------------------

    def steer(self, message: AgentMessage | str) -> None:
        """Queue a message to inject into the active run before its next model call (or into
        the next run). A str becomes a user message."""
        self._steering.append(_as_message(message, "steer()"))

    def follow_up(self, message: AgentMessage | str) -> None:
        """Queue a message to run when the agent would otherwise stop. A str becomes a user
        message."""
        self._follow_ups.append(_as_message(message, "follow_up()"))

    def clear_steering_queue(self) -> None:
        self._steering.clear()

    def clear_follow_up_queue(self) -> None:
        self._follow_ups.clear()

    def clear_all_queues(self) -> None:
        self._steering.clear()
        self._follow_ups.clear()

    def has_queued_messages(self) -> bool:
        """True when a steering or follow-up message is waiting."""
        return bool(self._steering) or bool(self._follow_ups)

    # --- running ----------------------------------------------------------------------------

    def _stream_fn(self) -> StreamFn:
        fn = self.stream_fn if self.stream_fn is not None else get_default_stream_fn()
        if fn is None:
            raise ValueError(NO_STREAM_FN)
        return fn

    async def prompt(
        self,
        input: str | AgentMessage | Sequence[AgentMessage],
        images: Sequence[ImageContent] | None = None,
    ) -> list[AgentMessage]:
        """Run the loop with a prompt: a text (with optional images), one message or a list
        of messages. Returns the messages the run created, once the run and every listener
        (those of ``agent_end`` included) have finished. A failure inside the run does not
        raise: it ends the run as data and ``state.error_message`` holds its message.

        Raises :class:`AgentBusyError` while a run is active, and the ``ValueError`` of the
        loop when there is no stream function, before anything happens."""
        if self.is_busy:
            raise AgentBusyError(PROMPT_BUSY)
        self._check_not_interrupted()
        prompts = _as_prompts(input, images)
        fn = self._stream_fn()
        return await self._run(prompts, fn)

    async def continue_(self) -> list[AgentMessage]:
        """Continue from the transcript as it is.

        When it ends with an assistant message, queued steering messages become the prompts
        (drained per ``steering_mode``; the run's first steering poll is skipped, so
        one-at-a-time still means one per turn), else queued follow-ups do, else
        ``ValueError("Cannot continue from message role: assistant")``. An empty transcript
        raises ``ValueError("No messages to continue from")``; a run in progress
        :class:`AgentBusyError`. Returns the messages the run created."""
        if self.is_busy:
            raise AgentBusyError(CONTINUE_BUSY)
        self._check_not_interrupted()
        fn = self._stream_fn()
        messages = self._state.messages
        if not messages:
            raise ValueError("No messages to continue from")
        if getattr(messages[-1], "role", None) == "assistant":
            steering = _dequeue(self._steering, self._steering_mode)
            if steering:
                return await self._run(steering, fn, skip_initial_steering=True)
            follow_ups = _dequeue(self._follow_ups, self._follow_up_mode)
            if follow_ups:
                return await self._run(follow_ups, fn)
            raise ValueError("Cannot continue from message role: assistant")
        return await self._run(None, fn)

    def prompt_sync(
        self,
        input: str | AgentMessage | Sequence[AgentMessage],
        images: Sequence[ImageContent] | None = None,
    ) -> list[AgentMessage]:
        """:meth:`prompt` for scripts and notebooks without a running event loop: runs it on
        trio and returns its result. Listeners, tools and the stream function then run on trio
        (write them with anyio or trio). Inside a running event loop it raises RuntimeError:
        ``await agent.prompt(...)`` there instead."""
        _check_sync("prompt_sync", "await agent.prompt(...)")
        import trio

        return trio.run(self.prompt, input, images)

    def continue_sync(self) -> list[AgentMessage]:
        """:meth:`continue_` run on trio, like :meth:`prompt_sync`."""
        _check_sync("continue_sync", "await agent.continue_()")
        import trio

        return trio.run(self.continue_)

    def _loop_config(self, skip_initial_steering: bool) -> AgentLoopConfig:
        state = self._state
        steering, follow_ups = self._steering, self._follow_ups
        steering_mode, follow_up_mode = self._steering_mode, self._follow_up_mode
        skip = skip_initial_steering

        def get_steering_messages() -> list[AgentMessage]:
            nonlocal skip
            if skip:
                skip = False
                return []
            return _dequeue(steering, steering_mode)

        def get_follow_up_messages() -> list[AgentMessage]:
            return _dequeue(follow_ups, follow_up_mode)

        level = state.thinking_level
        options = {name: getattr(self.options, name) for name in MODEL_CALL_OPTIONS}
        options["reasoning"] = None if level == "off" else level
        return AgentLoopConfig(
            model=state.model,
            convert_to_llm=self.convert_to_llm,
            transform_context=self.transform_context,
            get_api_key=self.get_api_key,
            **options,
            tool_execution=self._tool_execution,
            before_tool_call=self.before_tool_call,
            after_tool_call=self.after_tool_call,
            prepare_next_turn=self.prepare_next_turn,
            should_stop_after_turn=self.should_stop_after_turn,
            get_steering_messages=get_steering_messages,
            get_follow_up_messages=get_follow_up_messages,
            decide_approval=self._decide,
            approval_timeout_s=self.approval_timeout_s,
        )

    async def _run(
        self,
        prompts: list[AgentMessage] | None,
        stream_fn: StreamFn,
        *,
        skip_initial_steering: bool = False,
        resume: str | None = None,
    ) -> list[AgentMessage]:
        state = self._state
        config = self._loop_config(skip_initial_steering)
        context = AgentContext(state.system_prompt, list(state.messages), list(state.tools))
        controller = AbortController()
        idle = anyio.Event()
        # from here to the first await nothing else runs: the busy check and this are atomic
        self._lifecycle.fire("start")
        self._controller = controller
        self._idle = idle
        state._is_streaming = True
        state._streaming_message = None
        state._error_message = None
        self._suspending = False
        suspended = False
        store = self.store
        journal: dict[str, Any] = {}
        if store is not None:
            journal = {
                "store": store,
                "run_id": uuid.uuid4().hex,
                "session_id": self.options.session_id,
            }
        try:
            if resume is not None:
                from agentcore_fsm.runtime.resume import resume_run

                assert store is not None
                self._interrupted = None
                with bind_run(self.deps) as scope:
                    return await resume_run(
                        resume,
                        store,
                        config,
                        scope.watch(self._emit, state.tools),
                        tools=state.tools,
                        signal=controller.signal,
                        stream_fn=stream_fn,
                        on_transition=self.on_transition,
                    )
            if prompts is None:
                return await run_agent_loop_continue(
                    context,
                    config,
                    self._emit,
                    signal=controller.signal,
                    stream_fn=stream_fn,
                    on_transition=self.on_transition,
                    deps=self.deps,
                    **journal,
                )
            return await run_agent_loop(
                prompts,
                context,
                config,
                self._emit,
                signal=controller.signal,
                stream_fn=stream_fn,
                on_transition=self.on_transition,
                deps=self.deps,
                **journal,
            )
        except RunSuspended as exc:
            # the run waits for approvals in the store: the session resumes it later
            suspended = True
            self._interrupted = exc.run_id
            return exc.messages
        finally:
            if not suspended:
                _answer_dangling_calls(state._messages)
                state._pending_approvals = {}
                self._decisions.clear()
            self._suspending = False
            state._is_streaming = False
            state._streaming_message = None
            state._pending_tool_calls = set()
            self._controller = None
            self._lifecycle.fire("finish")
            idle.set()

    def __repr__(self) -> str:
        return (
            f"Agent(model={self._state.model.id!r}, lifecycle={self.lifecycle_state!r}, "
            f"messages={len(self._state.messages)})"
        )
