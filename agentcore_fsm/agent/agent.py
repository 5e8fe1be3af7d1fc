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
* Listeners: see :mod:`agentcore_fsm.agent.listeners` (subscribing twice, unsubscribing during
  delivery, several listeners raising: the first exception fails the run).
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
import functools
import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, get_args, overload

import anyio

from agentcore_fsm.agent.approvals import ApprovalDesk
from agentcore_fsm.agent.handoff import follow_handoffs
from agentcore_fsm.agent.lifecycle import Lifecycle
from agentcore_fsm.agent.listeners import AgentListener, Listeners
from agentcore_fsm.agent.queues import QueueMode, as_message, as_prompts, dequeue
from agentcore_fsm.agent.rewind import rewind_session
from agentcore_fsm.agent.run_config import loop_config
from agentcore_fsm.agent.session import SessionLease, free_ended_run, read_session
from agentcore_fsm.agent.state import AgentState, UsageLimits
from agentcore_fsm.agent.sync import check_no_running_loop
from agentcore_fsm.core import checks
from agentcore_fsm.core.abort import AbortController, AbortSignal
from agentcore_fsm.core.approval import ApprovalDecision, RunSuspended
from agentcore_fsm.core.compaction import Compaction
from agentcore_fsm.core.config import (
    AgentContext,
    AgentLoopConfig,
    ModelCallOptions,
    StreamFn,
)
from agentcore_fsm.core.fallback import ModelFallback
from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.core.messages import (
    AgentMessage,
    ImageContent,
    Model,
    ThinkingLevel,
)
from agentcore_fsm.core.model_names import resolve_model
from agentcore_fsm.core.run_context import bind_run
from agentcore_fsm.core.tool_policy import ToolPolicy
from agentcore_fsm.core.tools import AgentTool, ToolExecutionMode
from agentcore_fsm.persist.store import RunStore, SessionBusyError, default_owner
from agentcore_fsm.runtime.driver import (
    resolve_stream_fn,
    run_agent_loop,
    run_agent_loop_continue,
)

__all__ = ["Agent", "AgentBusyError", "AgentListener", "AgentState", "QueueMode"]

logger = logging.getLogger("agentcore_fsm")


PROMPT_BUSY = (
    "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, "
    "or wait for completion."
)
CONTINUE_BUSY = "Agent is already processing. Wait for completion before continuing."
RESET_BUSY = "Agent is already processing. Wait for completion before resetting."
G = TypeVar("G")
S = TypeVar("S")


class AgentBusyError(RuntimeError):
    """A run is active: the call cannot start another one (or reset the agent) now."""


# --- the agent ------------------------------------------------------------------------------


class Forward(Generic[G, S]):
    """An attribute of the agent that is a field of another object of it: ``agent.model`` reads
    and writes ``agent.state.model`` (``holder`` names that object's attribute), so the value
    lives, and is checked, in one place."""

    def __init__(self, holder: str, doc: str) -> None:
        self.holder = holder
        self.__doc__ = doc
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> Forward[G, S]: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> G: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self.holder), self.name)

    def __set__(self, obj: object, value: S) -> None:
        setattr(getattr(obj, self.holder), self.name, value)


_AGENT_CHECKS: dict[str, checks.Check] = {
    "stream_fn": checks.callable_or_none,
    "convert_to_llm": checks.callable_or_none,
    "transform_context": checks.callable_or_none,
    "get_api_key": checks.callable_or_none,
    "before_tool_call": checks.callable_or_none,
    "after_tool_call": checks.callable_or_none,
    "prepare_next_turn": checks.callable_or_none,
    "should_stop_after_turn": checks.callable_or_none,
    "on_transition": checks.callable_or_none,
    "options": checks.instance(ModelCallOptions, "a ModelCallOptions"),
    "store": checks.instance_or_none(RunStore, "a RunStore (MemoryRunStore, SqliteRunStore)"),
    "approval_timeout_s": checks.duration_or_none,
    "session_wait_s": checks.duration_or_none,
    "steering_mode": checks.choice(get_args(QueueMode)),
    "follow_up_mode": checks.choice(get_args(QueueMode)),
    "tool_execution": checks.choice(get_args(ToolExecutionMode)),
    "tool_policy": checks.instance_or_none(ToolPolicy, "a ToolPolicy"),
    "fallback": checks.instance_or_none(ModelFallback, "a ModelFallback"),
    "compaction": checks.instance_or_none(Compaction, "a Compaction"),
    "name": checks.str_or_none,
}
"""The checks of the agent's plain configuration attributes (the others are properties that
check what they are given, or fields of ``options``/``state`` checked there)."""


class Agent:
    """A stateful agent: a transcript, tools, listeners and message queues around the loop.

    Every keyword is a public attribute; a change applies from the next run. ``system_prompt``,
    ``model``, ``thinking_level``, ``tools`` and ``messages`` live in :attr:`state` (the
    attributes of the same name on the agent read and write those). ``model=None`` means
    ``Model(id="unknown")``. The hooks are those of :class:`~agentcore_fsm.AgentLoopConfig`;
    ``prepare_next_turn`` and ``should_stop_after_turn`` take ``(ctx, signal)``.
    ``thinking_level`` becomes the loop's ``reasoning`` (``"off"`` → None).

    With a run ``store`` (a :class:`~agentcore_fsm.persist.store.RunStore`, e.g.
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

    if not TYPE_CHECKING:  # runtime only: type checkers keep checking the attributes' types

        def __setattr__(self, name: str, value: Any) -> None:
            check = _AGENT_CHECKS.get(name)
            if check is not None:
                value = check("Agent", name, value)
            object.__setattr__(self, name, value)

    def __init__(
        self,
        system_prompt: str = "",
        model: Model | str | None = None,
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
        session_wait_s: float | None = 0.0,
        deps: Any = None,
        limits: UsageLimits | None = None,
        tool_policy: ToolPolicy | None = None,
        fallback: ModelFallback | None = None,
        compaction: Compaction | None = None,
        name: str | None = None,
    ) -> None:
        # a model named by a str ("openai:gpt-4o-mini") is described now (core.model_names)
        model = (
            Model(id="unknown", provider="unknown", api="unknown")
            if model is None
            else resolve_model(model)
        )
        if options is not None and not isinstance(options, ModelCallOptions):
            raise TypeError(
                f"Agent: options must be a ModelCallOptions or None, not {type(options).__name__}"
            )
        self._state = AgentState(system_prompt, model, thinking_level, tools, messages, limits)
        self.stream_fn = stream_fn
        self.tool_policy = tool_policy  # run policies (docs/policies.md), as AgentLoopConfig's
        self.fallback = fallback
        self.compaction = compaction
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

        self._listeners = Listeners()
        self._steering: deque[AgentMessage] = deque()
        self._follow_ups: deque[AgentMessage] = deque()
        self._lifecycle = Lifecycle()
        self._controller: AbortController | None = None
        self._idle: anyio.Event | None = None
        self.store = store
        """The run store the agent's runs are journaled in (None: not journaled); see
        docs/reference.md#runs-that-survive."""
        self._interrupted: str | None = None
        self.approval_timeout_s = approval_timeout_s
        """Deny a tool call whose approval has not been decided within this many seconds
        (None: wait)."""
        self._approvals = ApprovalDesk(self._state)
        self.session_wait_s = session_wait_s
        """With a store: how long a prompt waits for another writer of the session (another
        agent, in this process or another one) to end its run — 0 (the default): not at all,
        the prompt raises :class:`~agentcore_fsm.persist.store.SessionBusyError` at once; a
        number of seconds; None: as long as it takes. See docs/survive.md#one-writer-per-session."""
        self._writer = default_owner()  # this agent, as a session's writer in the store
        self._lease: SessionLease | None = None  # held during a run with a store
        # the session's last run (id, status) when this agent last read or wrote the session
        self._session_seen: tuple[str, str] | None = None
        self._ended_unfinished: str | None = None  # a run that ended here, unfinished in store
        self.name = name  # the agent's name in a chain of handoffs (agent/handoff.py)
        self.deps = deps
        """The dependencies object of the agent's runs: what its tools and hooks reach (a
        function tool's ``RunContext.deps``, ``current_run().deps``; see docs/tools.md)."""
        if store is not None:
            self._load_session(store, bool(self._state.messages))

    # --- runs that survive ------------------------------------------------------------------

    def _load_session(self, store: RunStore, has_messages: bool) -> None:
        if self.options.session_id is None:
            self.options.session_id = uuid.uuid4().hex
        session_id = self.options.session_id
        if has_messages and store.runs(session_id):
            raise ValueError(
                f"session {session_id!r} already has runs in the store: its "
                "transcript is loaded from there, do not pass messages= as well"
            )
        self._read_session(store, session_id, holding=False)

    def _read_session(self, store: RunStore, session_id: str, *, holding: bool) -> None:
        """Take the session's transcript from the store. Its last run unfinished is this
        agent's interrupted run — unless another writer is running it right now (it holds the
        session: ``holding`` says this agent does)."""
        stored = read_session(store, session_id, self._loop_config(False), self._state.tools)
        if stored.last_run is None:
            self._session_seen = None
            return
        self._session_seen = (stored.last_run, "finished" if stored.finished else "running")
        live = not stored.finished and not holding and self._session_held(store, session_id)
        self._state.load_session(stored.messages, () if live else stored.pending_approvals)
        self._interrupted = None if stored.finished or live else stored.last_run

    def _session_held(self, store: RunStore, session_id: str) -> bool:
        """True when another writer holds the session now."""
        try:
            store.acquire_session(session_id, self._writer, lease_s=1.0)
        except SessionBusyError:
            return True
        store.release_session(session_id, self._writer)
        return False

    def _session_mark(self, store: RunStore) -> tuple[str, str] | None:
        session_id = self.options.session_id
        runs = store.runs(session_id) if session_id is not None else []
        return (runs[-1].run_id, runs[-1].status) if runs else None

    async def _hold_session(
        self, store: RunStore, resume: str | None, signal: AbortSignal
    ) -> SessionLease:
        """Become the session's one writer for a run (waiting per ``session_wait_s``), and
        catch up with what another writer added to the session since this agent read it."""
        session_id = self.options.session_id
        if session_id is None:
            session_id = self.options.session_id = uuid.uuid4().hex
        lease = SessionLease(store, self._writer)
        await lease.acquire(session_id, self.session_wait_s, signal)
        try:
            if self._session_mark(store) != self._session_seen:  # another writer ran it
                self._read_session(store, session_id, holding=True)
                if resume is not None and resume != self._interrupted:
                    raise ValueError(
                        f"run {resume!r} is no longer the last run of session {session_id!r} "
                        "(another writer continued the session); its transcript was reloaded"
                    )
                if resume is None:
                    self._check_not_interrupted()
            if resume is not None and resume == self._ended_unfinished:
                free_ended_run(store, resume)  # its journal could not give it back
        except BaseException:
            lease.release()
            raise
        return lease

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
        self._approvals.decide(
            call_id,
            ApprovalDecision(approved=True, reason=reason, decided_by=decided_by, args=args),
        )

    def deny(self, call_id: str, reason: str | None = None, *, decided_by: str = "user") -> None:
        """Deny the tool call ``call_id`` waiting for approval: it gets an error result with
        ``reason`` (``Tool call "NAME" was denied: REASON``). Otherwise as :meth:`approve`."""
        self._approvals.decide(
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
        if not (self.is_busy and self._state.pending_approvals):
            raise ValueError("no tool call of a running run waits for approval")
        self._approvals.suspend()

    def _check_not_interrupted(self) -> None:
        if self._interrupted is not None:
            raise ValueError(
                f"run {self._interrupted!r} of this session was interrupted: "
                "`await agent.resume()` it first"
            )

    # --- configuration ----------------------------------------------------------------------

    session_id = Forward[str | None, str | None]("options", "``options.session_id``.")
    thinking_budgets = Forward[dict[str, int] | None, dict[str, int] | None](
        "options", "``options.thinking_budgets``."
    )
    transport = Forward[str | None, str | None]("options", "``options.transport``.")
    max_retry_delay_ms = Forward[int | None, int | None](
        "options", "``options.max_retry_delay_ms``."
    )

    @property
    def state(self) -> AgentState:
        """The agent's state (see :class:`AgentState`)."""
        return self._state

    system_prompt = Forward[str, str]("state", "``state.system_prompt``.")
    model = Forward[Model, Model]("state", "``state.model``.")
    thinking_level = Forward[ThinkingLevel, ThinkingLevel]("state", "``state.thinking_level``.")
    tools = Forward[list[AgentTool], Iterable[AgentTool]]("state", "``state.tools``.")
    messages = Forward[list[AgentMessage], Iterable[AgentMessage]]("state", "``state.messages``.")

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
        self._state.clear()
        self._steering.clear()
        self._follow_ups.clear()

    rewind = rewind_session  # cut the transcript before a user turn (agent/rewind.py)

    # --- listeners --------------------------------------------------------------------------

    def subscribe(self, listener: AgentListener) -> Callable[[], None]:
        """Call ``listener(event, signal)`` for every event, after the state was updated for
        it. Listeners are awaited one after another in subscription order, and a run waits
        for them. Returns ``unsubscribe()`` (safe to call more than once)."""
        return self._listeners.add(listener)

    async def _emit(self, event: Any) -> None:
        self._reduce(event)
        controller = self._controller
        assert controller is not None
        await self._listeners.deliver(event, controller.signal)

    def _reduce(self, event: Any) -> None:
        self._state.apply(event)
        kind = event.type
        if kind == "approval_decided":
            self._approvals.forget(event.tool_call_id)
        elif kind == "tool_execution_update":  # nested runs' approvals
            self._approvals.note_update(event)
        elif kind == "turn_start" and self._lease is not None:
            self._lease.renew()

    def _release_session(self, store: RunStore | None, ended: str | None = None) -> None:
        """Give the session up after a run (``ended``: the id of the run that ended here, not
        suspended). A run the store still holds unfinished (its journal failed, or the store
        failed or hung when it ended) is this agent's interrupted run: :meth:`resume` continues
        it once the store works, from what the store holds (the transcript is read again from
        there before the next run), and its lease is given back (see :func:`free_ended_run`)."""
        lease, self._lease = self._lease, None
        if lease is None or store is None:
            return
        try:
            self._session_seen = self._session_mark(store)  # this run, as the store has it
        except Exception:  # read it again before the next run
            self._session_seen = None
        if ended is not None and self._session_seen != (ended, "finished"):
            self._ended_unfinished = ended
            if self._session_seen == (ended, "running"):
                self._interrupted = ended
            self._session_seen = None  # read the session again before the next run
            try:
                free_ended_run(store, ended)
            except Exception:  # given back before the resume
                logger.exception("the lease of run %r could not be given back", ended)
        try:
            lease.release()
        except Exception:  # the run's outcome stands; a dead writer's lease is taken over
            logger.exception("the session's lease could not be released")

    # --- queues -----------------------------------------------------------------------------

    def steer(self, message: AgentMessage | str) -> None:
        """Queue a message to inject into the active run before its next model call (or into
        the next run). A str becomes a user message."""
        self._steering.append(as_message(message, "steer()"))

    def follow_up(self, message: AgentMessage | str) -> None:
        """Queue a message to run when the agent would otherwise stop. A str becomes a user
        message."""
        self._follow_ups.append(as_message(message, "follow_up()"))

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
        return resolve_stream_fn(self.stream_fn, self._state.model)

    async def prompt(
        self,
        input: str | AgentMessage | Sequence[AgentMessage],
        images: Sequence[ImageContent] | None = None,
        output_type: Any = None,
        limits: UsageLimits | None = None,
    ) -> list[AgentMessage]:
        """Run the loop with a prompt: a text (with optional images), one message or a list
        of messages. Returns the messages the run created, once the run and every listener
        (those of ``agent_end`` included) have finished. A failure inside the run does not
        raise: it ends the run as data and ``state.error_message`` holds its message. With an
        ``output_type`` (a type, or an ``output_spec(...)``) the run must end with a validated
        value of it, returned as a ``RunOutput`` (``.output``; docs/output.md).

        Raises :class:`AgentBusyError` while a run is active, and the ``ValueError`` of the
        loop when there is no stream function, before anything happens."""
        if self.is_busy:
            raise AgentBusyError(PROMPT_BUSY)
        self._check_not_interrupted()
        prompts = as_prompts(input, images)
        fn = self._stream_fn()
        return await self._run(prompts, fn, output=output_type, limits=limits)

    async def continue_(self) -> list[AgentMessage]:
        """Continue from the transcript as it is.

        When it ends with an assistant message, queued steering messages become the prompts
        (drained per ``steering_mode``; the run's first steering poll is skipped, so
        one-at-a-time still means one per turn), else queued follow-ups do, else
        ``ValueError("Cannot continue from message role: assistant")``. An empty transcript
        raises ``ValueError("No messages to continue from")``; a run in progress
        :class:`AgentBusyError`. Returns the messages the run created.

        With a store, this is decided once the agent holds the session (after it reloaded the
        transcript, when another writer added to the session meanwhile), so it continues the
        session as stored, not a transcript another writer has superseded; a continue refused
        before its run starts (``SessionBusyError``, one of these ``ValueError``) takes nothing
        from the queues."""
        if self.is_busy:
            raise AgentBusyError(CONTINUE_BUSY)
        self._check_not_interrupted()
        fn = self._stream_fn()
        if self.store is not None:
            return await self._run(None, fn, decide=self._continue_input)
        prompts, skip = self._continue_input()
        return await self._run(prompts, fn, skip_initial_steering=skip)

    def _continue_input(self) -> tuple[list[AgentMessage] | None, bool]:
        """What :meth:`continue_` runs with: its prompts (None: the transcript as it is) and
        whether the run skips its first steering poll."""
        messages = self._state.messages
        if not messages:
            raise ValueError("No messages to continue from")
        if getattr(messages[-1], "role", None) == "assistant":
            steering = dequeue(self._steering, self.steering_mode)
            if steering:
                return steering, True
            follow_ups = dequeue(self._follow_ups, self.follow_up_mode)
            if follow_ups:
                return follow_ups, False
            raise ValueError("Cannot continue from message role: assistant")
        return None, False

    def prompt_sync(
        self,
        input: str | AgentMessage | Sequence[AgentMessage],
        images: Sequence[ImageContent] | None = None,
        output_type: Any = None,
    ) -> list[AgentMessage]:
        """:meth:`prompt` for scripts and notebooks without a running event loop: runs it on
        trio and returns its result. Listeners, tools and the stream function then run on trio
        (write them with anyio or trio). Inside a running event loop it raises RuntimeError:
        ``await agent.prompt(...)`` there instead."""
        check_no_running_loop("prompt_sync", "await agent.prompt(...)")
        import trio

        return trio.run(functools.partial(self.prompt, input, images, output_type))

    def continue_sync(self) -> list[AgentMessage]:
        """:meth:`continue_` run on trio, like :meth:`prompt_sync`."""
        check_no_running_loop("continue_sync", "await agent.continue_()")
        import trio

        return trio.run(self.continue_)

    def _loop_config(self, skip_initial_steering: bool) -> AgentLoopConfig:
        return loop_config(
            self,
            self._state,
            self._steering,
            self._follow_ups,
            self._approvals.decide_for_run,
            skip_initial_steering,
        )

    async def _run(
        self,
        prompts: list[AgentMessage] | None,
        stream_fn: StreamFn,
        *,
        skip_initial_steering: bool = False,
        resume: str | None = None,
        decide: Callable[[], tuple[list[AgentMessage] | None, bool]] | None = None,
        output: Any = None,
        limits: UsageLimits | None = None,
    ) -> list[AgentMessage]:
        """One run. ``decide``: called once the session is held, it gives the prompts and
        ``skip_initial_steering`` (a raise refuses the run, the session given back)."""
        state = self._state
        controller = AbortController()
        idle = anyio.Event()
        # from here to the first await nothing else runs: the busy check and this are atomic
        self._lifecycle.fire("start")
        self._controller = controller
        self._idle = idle
        store = self.store
        journal: dict[str, Any] = {}
        if store is not None:
            try:
                self._lease = await self._hold_session(store, resume, controller.signal)
                if decide is not None:
                    prompts, skip_initial_steering = decide()
            except BaseException:
                self._release_session(store)
                self._controller = None
                self._lifecycle.fire("finish")
                idle.set()
                raise
            if resume is None:
                journal = {
                    "store": store,
                    "run_id": uuid.uuid4().hex,
                    "session_id": self.options.session_id,
                }
        config = state.limited(self._loop_config(skip_initial_steering), limits)
        context = AgentContext(state.system_prompt, list(state.messages), list(state.tools))
        state.begin_run()
        self._approvals.suspending = False
        suspended = False
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
            run = (
                run_agent_loop_continue
                if prompts is None
                else functools.partial(run_agent_loop, prompts, output_type=output)
            )
            run = follow_handoffs(self, run, journal, output)  # agent/handoff.py
            return await run(
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
                self._approvals.clear()
            state.end_run(suspended)
            self._approvals.suspending = False
            self._release_session(store, None if suspended else journal.get("run_id", resume))
            self._controller = None
            self._lifecycle.fire("finish")
            idle.set()

    def as_tool(self, name: str, description: str, **options: Any) -> AgentTool:
        """This agent as a tool of other runs: each call runs it nested (docs/multi-agent.md;
        ``options``: ``input_type``, ``output_type``, ``keep_history``, ``max_depth``)."""
        from agentcore_fsm.agent.nested import agent_tool

        return agent_tool(self, name, description, **options)

    def __repr__(self) -> str:
        return (
            f"Agent(model={self._state.model.id!r}, lifecycle={self.lifecycle_state!r}, "
            f"messages={len(self._state.messages)})"
        )
