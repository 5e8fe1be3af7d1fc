"""The public run functions, and the one entry every run goes through.

``run_agent_loop``, ``run_agent_loop_continue``, ``agent_loop`` and ``agent_loop_continue`` make
a run's machine from prompts, a context and a config, and run it. :func:`run_machine` is the
lower-level entry under them: it runs a machine a caller prepared (and, resuming, the first step
it computed) with the run's ports — its journal (:class:`~agentcore_fsm.persist.run_journal.
RunJournal`) and its observers (:class:`~agentcore_fsm.runtime.observer.RunObserver`). Resume,
replay, the durable engines and these functions all start runs through it, so every run is
journaled, traced and observed the same way (docs/ports.md). The driver that performs the
effects is :class:`~agentcore_fsm.runtime.engine.Driver`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import anyio

from agentcore_fsm.core.abort import AbortController, AbortSignal
from agentcore_fsm.core.approval import RunSuspended
from agentcore_fsm.core.boundary import coerce_messages, is_message
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, StreamFn
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import AgentMessage, Model, now_ms
from agentcore_fsm.core.model_names import stream_fn_for
from agentcore_fsm.core.output import OutputMode, OutputValidator
from agentcore_fsm.core.protocol import Step
from agentcore_fsm.core.run_context import bind_run
from agentcore_fsm.runtime.arguments import check_run_arguments
from agentcore_fsm.runtime.engine import Driver, Emit
from agentcore_fsm.runtime.limits import run_limited
from agentcore_fsm.runtime.nested import enter_run
from agentcore_fsm.runtime.observer import RunObserver, RunStart, RunWatch, select_observers
from agentcore_fsm.runtime.output_run import output_run
from agentcore_fsm.runtime.recording import Journaled, Recorder

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream

    from agentcore_fsm.persist.run_journal import RunJournal
    from agentcore_fsm.persist.store import RunStore

__all__ = [
    "CLOSE_GRACE_S",
    "EventStream",
    "agent_loop",
    "agent_loop_continue",
    "as_prompts",
    "get_default_stream_fn",
    "resolve_stream_fn",
    "run_agent_loop",
    "run_agent_loop_continue",
    "run_machine",
    "set_default_stream_fn",
]

logger = logging.getLogger("agentcore_fsm")

CLOSE_GRACE_S = 2.0
"""After an outside cancellation, how long (seconds) the run may take to deliver its closing
events (shielded from the cancellation) before it gives up on a listener that hangs."""
_default_stream_fn: StreamFn | None = None
NO_STREAM_FN = "No stream function: pass stream_fn or call set_default_stream_fn()"


def set_default_stream_fn(fn: StreamFn | None) -> None:
    """Set the stream function used when a run is given none (``None`` clears it)."""
    global _default_stream_fn
    _default_stream_fn = fn


def get_default_stream_fn() -> StreamFn | None:
    return _default_stream_fn


def resolve_stream_fn(stream_fn: StreamFn | None, model: Model | None = None) -> StreamFn:
    """``stream_fn``, or the default one, or the default stream function of ``model``'s
    provider when it has a registered source (:func:`~agentcore_fsm.core.model_names.
    stream_fn_for`: ``openai`` and ``anthropic``; an ``ImportError`` naming the extra when its
    SDK is missing); ``ValueError`` (:data:`NO_STREAM_FN`) when there is none."""
    fn = stream_fn if stream_fn is not None else _default_stream_fn
    if fn is None and model is not None:
        fn = stream_fn_for(model)
    if fn is None:
        raise ValueError(NO_STREAM_FN)
    return fn


def as_prompts(prompts: Any) -> list[AgentMessage]:
    """The prompts of a run, checked before anything is emitted: messages, or strs (each
    becomes a user message), in a list, tuple or other iterable; one message or str alone is
    one prompt. Anything else raises :class:`TypeError` naming the offending item."""
    if (
        prompts is not None
        and not isinstance(prompts, (list, tuple, str, bytes, dict))
        and not is_message(prompts)
        and hasattr(prompts, "__iter__")
    ):
        prompts = list(prompts)
    return coerce_messages(prompts, "prompts")


def _check_continue(context: AgentContext) -> None:
    if not context.messages:
        raise ValueError("Cannot continue: no messages in context")
    role = getattr(context.messages[-1], "role", None)
    if role == "assistant":
        raise ValueError("Cannot continue from message role: assistant")


# --- the one entry ---------------------------------------------------------------------------


async def run_machine(
    machine: LoopMachine,
    *,
    stream_fn: StreamFn | None = None,
    emit: Emit | None = None,
    signal: AbortSignal | None = None,
    first: Step | None = None,
    journal: RunJournal | None = None,
    observers: Sequence[RunObserver] | None = None,
    run_id: str | None = None,
    resumed: bool = False,
    on_transition: Callable[[TransitionRecord], None] | None = None,
    clock: Callable[[], int] = now_ms,
) -> list[AgentMessage]:
    """Run ``machine`` (a :class:`~agentcore_fsm.core.machine.LoopMachine` nobody has fed
    yet, or, with ``first``, one a caller brought to a step boundary) to its end; return the
    messages the run created (``machine.new_messages``).

    ``first``: the step to go on from (its events are delivered, its effects performed)
    instead of feeding ``Start()``. ``stream_fn`` (default: the default stream function),
    ``emit`` and ``signal`` are as for :func:`run_agent_loop`. ``observers``: the run's
    observers (None: the registered ones, see
    :func:`~agentcore_fsm.runtime.observer.register_observer`). ``run_id`` names the run to
    its observers and in :class:`~agentcore_fsm.core.approval.RunSuspended`; ``resumed`` tells
    them the run is continued from its journal. ``on_transition`` gets the machine's transitions
    (``first``'s, then each step's, before the step's events are delivered). ``clock`` (ms)
    stamps every input fed (the machine has none; a durable engine passes its recorded time).

    ``journal``: write the run's record through it (the machine must keep its journal, e.g. a
    :class:`~agentcore_fsm.persist.journal.JournaledLoopMachine`); see
    docs/survive.md#what-is-durable-when for what is durable when. A journaled run may stop
    unfinished to wait for approval decisions: it raises
    :class:`~agentcore_fsm.core.approval.RunSuspended`. A journal that fails ends the run as an
    error (its ``agent_end``), never with a raise."""
    fn = resolve_stream_fn(stream_fn, machine.config.model)
    chosen = select_observers(None, None) if observers is None else list(observers)
    if signal is None:
        signal = AbortController().signal
    return await _drive(
        machine,
        first,
        fn,
        emit,
        signal,
        None,
        journal,
        chosen,
        run_id,
        resumed,
        on_transition,
        clock,
    )


async def _drive(
    machine: LoopMachine,
    first: Step | None,
    stream_fn: StreamFn,
    emit: Emit | None,
    signal: AbortSignal,
    control: AbortSignal | None,
    journal: RunJournal | None,
    observers: list[RunObserver],
    run_id: str | None,
    resumed: bool,
    on_transition: Callable[[TransitionRecord], None] | None = None,
    clock: Callable[[], int] = now_ms,
    limited: bool = False,
) -> list[AgentMessage]:
    if not limited:
        enter_run(machine, journal, observers)  # nested runs: runtime/nested.py
    if machine.config.limits is not None and not limited:  # usage limits: runtime/limits.py
        return await run_limited(
            machine,
            signal,
            control,
            clock,
            lambda s, c: _drive(
                machine,
                first,
                stream_fn,
                emit,
                s,
                c,
                journal,
                observers,
                run_id,
                resumed,
                on_transition,
                clock,
                limited=True,
            ),
        )
    if journal is None and not observers:
        # the plain run: no port to serve (the one check a run makes)
        await Driver(
            machine,
            stream_fn,
            emit,
            signal,
            control,
            close_grace=CLOSE_GRACE_S,
            on_transition=on_transition,
            clock=clock,
        ).run(first)
        return machine.new_messages
    recorder: Recorder | None = None
    if journal is not None:
        journaled = _journaled(machine)
        # a raise here (e.g. the run id is taken) comes before anything of the run happened
        recorder = Recorder(journal, journaled, await journal.open(journaled.header))
    watch = None
    if observers:
        start = RunStart(machine, machine.config, control or signal, run_id, resumed)
        watch = RunWatch.start(observers, start)
    driver = Driver(
        machine,
        stream_fn,
        emit,
        signal,
        control,
        close_grace=CLOSE_GRACE_S,
        watch=watch,
        recorder=recorder,
        suspendable=recorder is not None,
        on_transition=on_transition,
        clock=clock,
    )
    entered = watch.enter_run() if watch is not None else []
    error: BaseException | None = None
    try:
        try:
            await driver.run(first)
        finally:
            if recorder is not None:
                assert journal is not None
                if recorder.shield:
                    with anyio.CancelScope(shield=True):
                        await _close(journal, machine, recorder)
                else:  # a journal whose writes never suspend: nothing can cut them
                    await _close(journal, machine, recorder)
        if driver.suspended is not None:
            raise RunSuspended(run_id or "", driver.suspended, machine.new_messages)
    except BaseException as exc:
        error = exc
        raise
    finally:
        if watch is not None:
            watch.run_ended(error)
            watch.exit(entered, error)
    return machine.new_messages


def _journaled(machine: LoopMachine) -> Journaled:
    if not isinstance(getattr(machine, "entries", None), list) or not isinstance(
        getattr(machine, "header", None), dict
    ):
        raise TypeError(
            f"a journaled run needs a machine that keeps its journal (a "
            f"agentcore_fsm.persist.journal.JournaledLoopMachine), not {type(machine).__name__}"
        )
    return cast(Journaled, machine)


async def _close(journal: RunJournal, machine: LoopMachine, recorder: Recorder) -> None:
    """The run is over in this process: hand the journal the entries not written yet and how
    the run ended (finished only when it reached its end and everything was written), or
    leave it resumable."""
    seq, rest = recorder.rest()
    error = recorder.error
    if error is not None and machine.failure is not error:
        # it came too late to end the run (or another failure ended it): the record stays a
        # prefix of the run, resumable
        logger.error("%s (the run had ended already: %s)", error, machine.end_reason)
    finished = machine.finished and error is None
    try:
        await journal.close(seq, rest, machine.end_reason if finished else None)
    except Exception:
        logger.exception("closing the journal %s raised; ignored", journal)


# --- the run functions ---------------------------------------------------------------------------


async def run_agent_loop(
    prompts: Iterable[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit | None = None,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    on_transition: Callable[[TransitionRecord], None] | None = None,
    store: RunStore | None = None,
    run_id: str | None = None,
    session_id: str | None = None,
    instrument: bool | RunObserver | None = None,
    observers: Sequence[RunObserver] | None = None,
    deps: Any = None,
    output_type: Any = None,
    output_mode: OutputMode | None = None,
    output_retries: int | None = None,
    output_validators: Sequence[OutputValidator] = (),
    parent: dict[str, Any] | None = None,
) -> list[AgentMessage]:
    """Run the loop with ``prompts`` appended to (a copy of) ``context``; return the messages
    the run created. ``emit(event)`` (sync or async) is awaited for every event, in order.
    ``on_transition(record)`` (an extension) is called, synchronously, for every state change.

    Observers (docs/ports.md): the registered ones (``instrument=None``), none of them
    (``False``), those and the ones registered for runs that ask (``True``: e.g. tracing with
    OpenTelemetry, docs/tracing.md), or only the one given (an observer, e.g. an
    :class:`~agentcore_fsm.integrations.otel.Instrumentation`); ``observers`` are added to
    them.

    With a run ``store`` (a :class:`~agentcore_fsm.persist.store.RunStore`, e.g.
    :class:`~agentcore_fsm.SqliteRunStore`) the run is journaled under ``run_id`` (required,
    new) as it goes, and :func:`~agentcore_fsm.resume_run` continues it after a crash; see
    docs/reference.md#runs-that-survive. ``session_id`` groups runs (an Agent's session).

    ``deps``: the run's dependencies object, which its tools and hooks reach (a function
    tool's ``RunContext.deps``, or ``current_run().deps``; see docs/tools.md).

    ``output_type`` (or ``config.output``): the run must end with a validated value of that
    type, asked for in ``output_mode`` (default: by the model's api), sent back to the model
    with the problem up to ``output_retries`` times (default 1), checked by
    ``output_validators`` too; the run then returns a
    :class:`~agentcore_fsm.runtime.output_run.RunOutput` (the messages, and ``.output``). See
    docs/output.md.

    ``parent`` (a journaled run only): the run and tool call that started this run, kept in its
    record's header (an agent used as a tool journals its nested runs so;
    docs/multi-agent.md#runs-that-survive).
    """
    check_run_arguments(
        "run_agent_loop",
        context,
        config,
        emit=emit,
        signal=signal,
        stream_fn=stream_fn,
        on_transition=on_transition,
    )
    fn = resolve_stream_fn(stream_fn, config.model)
    chosen = select_observers(instrument, observers)
    out = output_run(config, emit, output_type, output_mode, output_retries, output_validators)
    if out is not None:
        config, emit = out.config, out.emit
    with bind_run(deps) as scope:  # deps and usage so far, for tools and hooks
        messages = await _start(
            as_prompts(prompts),
            context,
            config,
            scope.watch(emit, context.tools),
            signal,
            fn,
            on_transition,
            False,
            chosen,
            store,
            run_id,
            session_id,
            parent,
        )
    return messages if out is None else out.result(messages)


async def run_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit | None = None,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    on_transition: Callable[[TransitionRecord], None] | None = None,
    store: RunStore | None = None,
    run_id: str | None = None,
    session_id: str | None = None,
    instrument: bool | RunObserver | None = None,
    observers: Sequence[RunObserver] | None = None,
    deps: Any = None,
) -> list[AgentMessage]:
    """Continue from ``context`` as it is (no prompts). Raises ``ValueError`` before emitting
    anything when the transcript is empty or ends with an assistant message. ``store``,
    ``run_id``, ``session_id``, ``instrument``, ``observers`` and ``deps`` as for
    :func:`run_agent_loop`; a ``config.output`` too (the result is then a ``RunOutput``)."""
    check_run_arguments(
        "run_agent_loop_continue",
        context,
        config,
        emit=emit,
        signal=signal,
        stream_fn=stream_fn,
        on_transition=on_transition,
    )
    fn = resolve_stream_fn(stream_fn, config.model)
    _check_continue(context)
    chosen = select_observers(instrument, observers)
    out = output_run(config, emit, None, None, None, ())  # config.output: docs/output.md
    if out is not None:
        config, emit = out.config, out.emit
    with bind_run(deps) as scope:
        messages = await _start(
            [],
            context,
            config,
            scope.watch(emit, context.tools),
            signal,
            fn,
            on_transition,
            True,
            chosen,
            store,
            run_id,
            session_id,
        )
    return messages if out is None else out.result(messages)


def _start(
    prompts: list[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit | None,
    signal: AbortSignal | None,
    stream_fn: StreamFn,
    on_transition: Callable[[TransitionRecord], None] | None,
    continuing: bool,
    observers: list[RunObserver],
    store: RunStore | None,
    run_id: str | None,
    session_id: str | None,
    parent: dict[str, Any] | None = None,
) -> Coroutine[Any, Any, list[AgentMessage]]:
    """The run's machine and journal, made now; the run itself, to await (a plain function:
    the run's chain of coroutines is one frame shorter, which a thousand runs in flight feel)."""
    if signal is None:
        # hooks, tools and the stream function always get a signal: the run makes its own
        signal = AbortController().signal
    if parent is not None and not isinstance(parent, dict):
        raise TypeError(
            f"run_agent_loop: parent must be a dict (a JSON object) or None, not "
            f"{type(parent).__name__}"
        )
    if store is None:
        if run_id is not None or session_id is not None:
            raise ValueError("run_id and session_id need a store (store=...)")
        if parent is not None:
            raise ValueError("parent needs a store (store=...): it is kept in the run's record")
        machine = LoopMachine(prompts, context, config)
        return _drive(
            machine,
            None,
            stream_fn,
            emit,
            signal,
            None,
            None,
            observers,
            None,
            False,
            on_transition,
        )
    if not isinstance(run_id, str) or not run_id:
        raise ValueError("a journaled run needs a run_id: a non-empty str (the id to resume it by)")
    # loaded for journaled runs only (a plain run never imports the stores)
    from agentcore_fsm.persist.journal import JournaledLoopMachine
    from agentcore_fsm.persist.run_journal import StoreJournal

    journaled = JournaledLoopMachine(prompts, context, config, continuing=continuing, parent=parent)
    journal = StoreJournal(store, run_id, session_id)
    return _drive(
        journaled,
        None,
        stream_fn,
        emit,
        signal,
        None,
        journal,
        observers,
        run_id,
        False,
        on_transition,
    )


class EventStream:
    """The events of a run, as an async iterator; ``await result()`` gives the new messages."""

    def __init__(self, receive: MemoryObjectReceiveStream[Any]) -> None:
        self._receive = receive
        self._done = anyio.Event()
        self._result: list[AgentMessage] | None = None
        self._error: BaseException | None = None

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        async for event in self._receive:
            yield event

    async def result(self) -> list[AgentMessage]:
        """Wait for the run to end; return the messages it created."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    @property
    def ended(self) -> bool:
        """The run has ended (:meth:`result` returns at once)."""
        return self._done.is_set()

    def end(self, result: list[AgentMessage] | None, error: BaseException | None) -> None:
        """The run ended with ``result`` or ``error`` (what runs it calls this once)."""
        self._result, self._error = result, error
        self._done.set()


@asynccontextmanager
async def _loop_cm(
    prompts: list[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    stream_fn: StreamFn | None,
    on_transition: Callable[[TransitionRecord], None] | None,
    continuing: bool,
    observers: Sequence[RunObserver] | None,
    deps: Any = None,
) -> AsyncIterator[EventStream]:
    fn = resolve_stream_fn(stream_fn, config.model)  # raised on entering the block
    chosen = select_observers(None, observers)
    if continuing:
        _check_continue(context)
    send, receive = anyio.create_memory_object_stream[Any](math.inf)
    stream = EventStream(receive)
    inner = AbortController()
    remove = signal.add_callback(lambda: inner.abort(signal.reason)) if signal is not None else None

    def send_event(event: Any) -> None:
        try:
            send.send_nowait(event)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the caller left the block: the run is being aborted, nobody reads any more

    emit: Any = send_event
    # config.output (docs/output.md): its mode resolved for the model, its partial events, and
    # the result with its .output, as run_agent_loop does
    out = output_run(config, emit, None, None, None, ())
    if out is not None:
        config, emit = out.config, out.emit

    async def runner() -> None:
        result: list[AgentMessage] | None = None
        error: BaseException | None = None
        try:
            with send, bind_run(deps) as scope:
                machine = LoopMachine(prompts, context, config)
                result = await _drive(
                    machine,
                    None,
                    fn,
                    scope.watch(emit, context.tools),
                    signal or inner.signal,
                    inner.signal,
                    None,
                    chosen,
                    None,
                    False,
                    on_transition,
                )
                if out is not None:
                    result = out.result(result)
        except BaseException as exc:
            error = exc
            raise
        finally:
            stream.end(result, error)

    body_error: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(runner)
            try:
                yield stream
            except Exception as exc:
                # the caller's block raised: end the run (below), then re-raise the error as
                # it is, not wrapped in the task group's exception group
                body_error = exc
            finally:
                if not stream.ended:
                    # leaving early: abort the run so that it ends with a valid transcript
                    inner.abort("event stream closed")
                receive.close()
    finally:
        if remove is not None:
            remove()
    if body_error is not None:
        raise body_error


def agent_loop(
    prompts: Iterable[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    on_transition: Callable[[TransitionRecord], None] | None = None,
    observers: Sequence[RunObserver] | None = None,
    deps: Any = None,
) -> Any:
    """``async with agent_loop(...) as events:`` — iterate the run's events; ``await
    events.result()`` for the new messages. Leaving the block early aborts the run cleanly.
    The stream function is checked on entering. The run has the registered observers and
    ``observers`` (docs/ports.md); ``deps`` as for :func:`run_agent_loop`."""
    check_run_arguments(
        "agent_loop",
        context,
        config,
        signal=signal,
        stream_fn=stream_fn,
        on_transition=on_transition,
    )
    prompt_list = as_prompts(prompts)
    return _loop_cm(
        prompt_list, context, config, signal, stream_fn, on_transition, False, observers, deps
    )


def agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    on_transition: Callable[[TransitionRecord], None] | None = None,
    observers: Sequence[RunObserver] | None = None,
    deps: Any = None,
) -> Any:
    """The context-manager form of :func:`run_agent_loop_continue` (checks on entering)."""
    check_run_arguments(
        "agent_loop_continue",
        context,
        config,
        signal=signal,
        stream_fn=stream_fn,
        on_transition=on_transition,
    )
    return _loop_cm([], context, config, signal, stream_fn, on_transition, True, observers, deps)
