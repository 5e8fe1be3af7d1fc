"""The run-observer port: how tracing, metrics, recording or any integration watches runs.

An observer is a :class:`RunObserver`: subclass it and override what you need (every method
is a no-op here). A run is given its observers by the run functions (``observers=[...]``, and
``instrument=``) or takes the registered ones (:func:`register_observer`). When a run starts,
each observer's :meth:`RunObserver.observe_run` is called with a :class:`RunStart` and returns
the object that watches this run (itself, the default, or a fresh one holding the run's state),
or None to leave it alone. That object then sees, in this order of a run's life:

* :meth:`~RunObserver.run_context`: a context manager the whole run runs inside (the driver's
  task, and so the tasks it starts), e.g. to make a span current;
* :meth:`~RunObserver.input_fed`: each input fed to the machine, with the :class:`Step` it gave
  and the transitions it took (the streamed deltas that the machine folds in on its fast path
  are not inputs here: they reach :meth:`~RunObserver.event` as ``message_update``);
* :meth:`~RunObserver.event`: each event, as it is handed to the run's listener;
* :meth:`~RunObserver.model_call`: a context manager the model call runs inside: the stream
  function's call, the iteration of its stream and the stream's ``aclose`` (in the driver's
  task, so a provider's own spans nest under it);
* :meth:`~RunObserver.tool_execution`: a context manager a tool's execution runs inside, in the
  tool's task (a plain function tool runs in a worker thread, which inherits the context);
* :meth:`~RunObserver.effect_performed`: each effect once its work is over, with its duration
  and the input its outcome became (None when it was cancelled or the run was stopping);
* :meth:`~RunObserver.run_ended`: once, with what the run raises to its caller (None when it
  returns).

An observer that raises (in any method, or in its context managers) is logged on the
``agentcore_fsm`` logger and ignored: it never breaks the run. A run without observers pays one
check; an observer costs per delta only if it overrides ``event`` or ``model_call``.
docs/ports.md is the guide.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.config import AgentLoopConfig, LlmContext, StreamFn, StreamOptions
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import Model
from agentcore_fsm.core.protocol import Effect, ExecuteTool, Input, Step

__all__ = [
    "ModelRequest",
    "RunObserver",
    "RunStart",
    "RunWatch",
    "register_observer",
    "registered_observers",
    "select_observers",
    "unregister_observer",
]

logger = logging.getLogger("agentcore_fsm")

Emit = Callable[[Any], Any]
Entered = list[AbstractContextManager[Any]]


@dataclass(frozen=True, slots=True)
class RunStart:
    """What an observer is told when a run starts."""

    machine: LoopMachine
    """The run's machine (read it; never feed it)."""
    config: AgentLoopConfig
    signal: AbortSignal
    """The signal that decides the run: it has fired once the run is aborted, whatever the
    cause (the caller's signal, or an ``agent_loop`` block left early)."""
    run_id: str | None
    """The id of a journaled run; None for a run that is not journaled."""
    resumed: bool
    """True for a run continued from its journal (``resume_run``)."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One model call, as the stream function is called with it."""

    model: Model
    context: LlmContext
    options: StreamOptions


class RunObserver:
    """Watches runs; subclass it and override what you need (see the module's documentation).

    The default :meth:`observe_run` returns the observer itself, so one object sees every run
    it is given; return a fresh object per run to keep a run's own state."""

    def observe_run(self, run: RunStart) -> RunObserver | None:
        """The object that watches ``run`` (this one by default), or None to leave it alone."""
        return self

    def run_context(self) -> AbstractContextManager[Any] | None:
        """A context manager the whole run runs inside, or None."""
        return None

    def input_fed(self, input: Input, step: Step, transitions: Sequence[TransitionRecord]) -> None:
        """``input`` was fed and gave ``step``, taking ``transitions`` (of the loop machine)."""

    def event(self, event: Any) -> None:
        """``event`` is handed to the run's listener (every event, deltas included)."""

    def effect_performed(self, effect: Effect, seconds: float, outcome: Input | None) -> None:
        """``effect``'s work is over after ``seconds``; ``outcome`` is the input it gave (for a
        model call: the one that ended the stream), None when it was cancelled or the run was
        stopping. A main effect is reported once its outcome was fed (after :meth:`input_fed`);
        a task (a tool, ``after_tool_call``, an approval) when it ends, before its outcome is
        fed."""

    def model_call(self, request: ModelRequest) -> AbstractContextManager[Any] | None:
        """A context manager the model call ``request`` runs inside, or None. It is exited
        with the exception that the stream function's call or its stream raised, if any."""
        return None

    def tool_execution(self, effect: ExecuteTool) -> AbstractContextManager[Any] | None:
        """A context manager the tool execution ``effect`` runs inside, or None. It is exited
        with the exception that cut the execution (a cancellation), if any; the outcome comes
        to :meth:`effect_performed` right after."""
        return None

    def run_ended(self, error: BaseException | None) -> None:
        """The run is over: ``error`` is what it raises to its caller (a
        :class:`~agentcore_fsm.core.approval.RunSuspended`, a cancellation, an interrupt), or
        None when it returns its messages."""


# --- the registry -----------------------------------------------------------------------------

_lock = threading.Lock()
_always: tuple[RunObserver, ...] = ()
_requested: tuple[RunObserver, ...] = ()


def register_observer(observer: RunObserver, *, always: bool = True) -> None:
    """Register ``observer`` for the runs that start from now on: every run that does not say
    ``instrument=False`` (``always=True``), or only the runs that ask for the registered
    observers with ``instrument=True`` (``always=False``). Registering an observer again moves
    it; :func:`unregister_observer` removes it."""
    global _always, _requested
    _check(observer, "register_observer")
    with _lock:
        kept_always = tuple(o for o in _always if o is not observer)
        kept_requested = tuple(o for o in _requested if o is not observer)
        if always:
            _always, _requested = (*kept_always, observer), kept_requested
        else:
            _always, _requested = kept_always, (*kept_requested, observer)


def unregister_observer(observer: RunObserver) -> None:
    """Stop giving ``observer`` to new runs (runs in progress keep it); no error when it is not
    registered."""
    global _always, _requested
    with _lock:
        _always = tuple(o for o in _always if o is not observer)
        _requested = tuple(o for o in _requested if o is not observer)


def registered_observers(*, requested: bool = False) -> tuple[RunObserver, ...]:
    """The observers every run gets, in registration order; with ``requested=True`` followed
    by those registered for the runs that ask (``always=False``)."""
    return (*_always, *_requested) if requested else _always


def _check(observer: Any, where: str) -> None:
    if not isinstance(observer, RunObserver):
        raise TypeError(
            f"{where}: an observer must be an agentcore_fsm.runtime.observer.RunObserver, not "
            f"{type(observer).__name__}"
        )


def select_observers(
    instrument: object, observers: Iterable[RunObserver] | None
) -> list[RunObserver]:
    """The observers of a run given ``instrument`` and ``observers`` (the run functions'
    keywords): the registered ones (``instrument=None``), none of them (``False``), the
    registered ones and those registered for runs that ask (``True``; a ``ValueError`` when
    there are none), or only the observer given (``instrument=an observer``, e.g. an
    :class:`~agentcore_fsm.integrations.otel.Instrumentation`); then ``observers``."""
    if instrument is None:
        chosen = list(_always)
    elif instrument is False:
        chosen = []
    elif instrument is True:
        chosen = list(registered_observers(requested=True))
        if not chosen:
            raise ValueError(
                "instrument=True asks for the registered observers, and none is registered: "
                "import agentcore_fsm.integrations.otel (it traces on OpenTelemetry's global "
                "providers) or register one with agentcore_fsm.runtime.observer.register_observer"
            )
    elif isinstance(instrument, RunObserver):
        chosen = [instrument]
    else:
        raise TypeError(
            "instrument must be True, False, None or an observer (an "
            "agentcore_fsm.integrations.otel.Instrumentation or another "
            f"agentcore_fsm.runtime.observer.RunObserver), not {type(instrument).__name__}"
        )
    if observers is not None:
        if isinstance(observers, RunObserver):
            raise TypeError("observers must be a list of RunObserver, not one observer")
        for observer in observers:
            _check(observer, "observers")
            chosen.append(observer)
    return chosen


# --- one run's observers (what the driver calls) ------------------------------------------------


def _overrides(observers: Sequence[RunObserver], name: str) -> tuple[RunObserver, ...]:
    base = getattr(RunObserver, name)
    return tuple(o for o in observers if getattr(type(o), name, base) is not base)


def _failed(observer: object, what: str) -> None:
    logger.exception("a run observer (%r) raised in %s; ignored", observer, what)


class RunWatch:
    """The observers of one run, as the driver calls them: each call goes to the observers
    that override it, and what one raises is logged and ignored. Made by :meth:`start`."""

    __slots__ = ("_effects", "_ended", "_events", "_inputs", "_models", "_tools", "all")

    def __init__(self, watching: Sequence[RunObserver]) -> None:
        self.all = tuple(watching)
        self._inputs = _overrides(watching, "input_fed")
        self._events = _overrides(watching, "event")
        self._effects = _overrides(watching, "effect_performed")
        self._models = _overrides(watching, "model_call")
        self._tools = _overrides(watching, "tool_execution")
        self._ended = False

    @classmethod
    def start(cls, observers: Sequence[RunObserver], run: RunStart) -> RunWatch | None:
        """Ask each observer to watch ``run``; None when none does."""
        watching: list[RunObserver] = []
        for observer in observers:
            try:
                watcher = observer.observe_run(run)
            except Exception:
                _failed(observer, "observe_run")
                continue
            if watcher is not None:
                if isinstance(watcher, RunObserver):
                    watching.append(watcher)
                else:
                    logger.error(
                        "a run observer (%r) returned %s from observe_run, not a RunObserver; "
                        "ignored",
                        observer,
                        type(watcher).__name__,
                    )
        return cls(watching) if watching else None

    # --- context managers ---

    def enter_run(self) -> Entered:
        return _enter([(o, "run_context", ()) for o in self.all])

    def enter_tool(self, effect: ExecuteTool) -> Entered:
        return _enter([(o, "tool_execution", (effect,)) for o in self._tools])

    @staticmethod
    def exit(entered: Entered, error: BaseException | None) -> None:
        """Exit what :meth:`enter_run` or :meth:`enter_tool` entered, innermost first."""
        _exit(entered, error)

    # --- notifications ---

    def input_fed(self, input: Input, step: Step, transitions: Sequence[TransitionRecord]) -> None:
        for observer in self._inputs:
            try:
                observer.input_fed(input, step, transitions)
            except Exception:
                _failed(observer, "input_fed")

    def effect_performed(self, effect: Effect, seconds: float, outcome: Input | None) -> None:
        for observer in self._effects:
            try:
                observer.effect_performed(effect, seconds, outcome)
            except Exception:
                _failed(observer, "effect_performed")

    def run_ended(self, error: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        for observer in self.all:
            try:
                observer.run_ended(error)
            except Exception:
                _failed(observer, "run_ended")

    # --- what the driver is given instead of the caller's own ---

    def wrap_emit(self, emit: Emit | None) -> Emit | None:
        """``emit``, telling the observers of each event first (unchanged when none listens)."""
        watchers = self._events
        if not watchers:
            return emit

        def observed_emit(event: Any) -> Any:
            for observer in watchers:
                try:
                    observer.event(event)
                except Exception:
                    _failed(observer, "event")
            return None if emit is None else emit(event)

        return observed_emit

    def wrap_stream_fn(self, stream_fn: StreamFn) -> StreamFn:
        """``stream_fn``, each call of it and its stream inside the observers' model-call
        context managers (unchanged when no observer wraps model calls)."""
        watchers = self._models
        if not watchers:
            return stream_fn

        def observed_stream_fn(model: Model, context: LlmContext, options: StreamOptions) -> Any:
            request = ModelRequest(model, context, options)
            entered = _enter([(o, "model_call", (request,)) for o in watchers])
            if not entered:
                return stream_fn(model, context, options)
            try:
                stream: Any = stream_fn(model, context, options)
            except BaseException as exc:
                _exit(entered, exc)
                raise
            if inspect.isawaitable(stream):
                return _awaited(stream, entered)
            return _observed(stream, entered)

        return observed_stream_fn


def _enter(calls: list[tuple[RunObserver, str, tuple[Any, ...]]]) -> Entered:
    """Get each observer's context manager and enter it; what fails is logged and skipped."""
    entered: Entered = []
    for observer, name, args in calls:
        try:
            manager = getattr(observer, name)(*args)
            if manager is None:
                continue
            manager.__enter__()
        except Exception:
            _failed(observer, name)
            continue
        entered.append(manager)
    return entered


def _exit(entered: Entered, error: BaseException | None) -> None:
    """Exit ``entered`` innermost first, with ``error`` (never suppressed)."""
    while entered:
        manager = entered.pop()
        try:
            if error is None:
                manager.__exit__(None, None, None)
            else:
                manager.__exit__(type(error), error, error.__traceback__)
        except Exception as exc:
            if exc is not error:
                _failed(manager, "__exit__")


async def _awaited(pending: Any, entered: Entered) -> Any:
    try:
        stream = await pending
    except BaseException as exc:
        _exit(entered, exc)
        raise
    return _observed(stream, entered)


def _observed(stream: Any, entered: Entered) -> Any:
    if not hasattr(stream, "__aiter__"):
        # not a stream: the driver fails the run with its own text; the call is over
        _exit(
            entered,
            TypeError(
                f"Stream function returned {type(stream).__name__}; expected an async iterator "
                f"of stream events"
            ),
        )
        return stream
    return _ObservedStream(stream, entered)


class _ObservedStream:
    """A model call's stream as the driver reads it: the stream function's own, with the
    observers' context managers left once the driver has closed it (after the stream's own
    ``aclose``: a stream that keeps a context of its own across its yields leaves it first, so
    contexts are left in the order they were entered). Nothing per event but this pass-through.
    """

    __slots__ = ("_entered", "_error", "_iterator", "_source")

    def __init__(self, source: Any, entered: Entered) -> None:
        self._source = source
        self._entered = entered
        self._iterator: AsyncIterator[Any] | None = None
        self._error: BaseException | None = None

    def __aiter__(self) -> _ObservedStream:
        try:
            self._iterator = self._source.__aiter__()
        except BaseException as exc:
            self._error = exc
            raise
        return self

    async def __anext__(self) -> Any:
        iterator = self._iterator
        assert iterator is not None
        try:
            return await iterator.__anext__()
        except StopAsyncIteration:
            raise
        except BaseException as exc:
            self._error = exc
            raise

    async def aclose(self) -> None:
        aclose = getattr(self._source, "aclose", None)
        try:
            if aclose is not None:
                await aclose()
        except BaseException as exc:
            if self._error is None:
                self._error = exc
            raise
        finally:
            _exit(self._entered, self._error)
