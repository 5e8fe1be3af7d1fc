"""The driver: performs a run's effects and feeds their outcomes back (see
docs/reference.md#control-flow-of-a-run). :func:`agentcore_fsm.runtime.driver.run_machine` is the
one way to start it.

It is written against anyio, so it runs on trio (the reference backend) and on asyncio. It makes
no decisions about what happens next; it only

* delivers the events each step produced, awaiting ``emit`` for each one, in order;
* performs effects: polls, hooks, the model call (whose stream events it feeds one by one),
  and tool executions, which run in the run's task group and report back through an inbox;
* turns what goes wrong into inputs: a raise becomes ``fail`` (or ``hook_failed`` for tool
  hooks, ``tool_finished(error=...)`` for tools), the signal firing becomes ``abort``;
* stamps every input it feeds with the time (ms) of its outcome, from the run's clock (the
  machine has none), and hands each step's transitions to the run's ``on_transition`` callback
  (the machine calls nobody);
* serves the run's ports: its observers (:mod:`agentcore_fsm.runtime.observer`) see each input,
  event and effect, and a journaled run's new entries go to its recorder
  (:mod:`agentcore_fsm.runtime.recording`), which writes them through the run's journal. A run
  without observers or journal takes none of these paths (they are chosen once, here).

Abort cancels whatever is in flight (the model stream, a hook or poll, every running tool) at
once. It never cancels ``emit``: a listener in progress finishes, then the run aborts.

Two ways a run can end that are not data:

* A ``BaseException`` that is not cancellation (``KeyboardInterrupt``, ``SystemExit``, a custom
  one) raised by user code — a tool, hook, poll, the stream function, ``emit`` — stops the run
  like an abort: what is in flight is cancelled, every started tool call is answered, the closing
  events up to ``agent_end(reason="aborted")`` are delivered, and then that same exception is
  re-raised, bare (never inside an exception group), on trio and asyncio alike. Ctrl-C thus
  still stops the program, and the transcript it leaves is well formed.
* Cancellation from outside (a timeout around the call): the run is closed the same way, its
  closing events delivered within ``close_grace`` seconds (shielded; a listener that hangs
  longer is cut off), and the cancellation propagates.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.approval import ApprovalRequest
from agentcore_fsm.core.boundary import (
    check_api_key,
    check_llm_messages,
    check_message_list,
)
from agentcore_fsm.core.compaction import run_compaction
from agentcore_fsm.core.config import (
    LlmContext,
    StreamFn,
    default_convert_to_llm,
    stream_options,
)
from agentcore_fsm.core.declared import MachineInputError, TransitionRecord
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import AgentMessage, now_ms
from agentcore_fsm.core.protocol import (
    Abort,
    ApprovalChecked,
    ApprovalDeferred,
    ArgumentsPrepared,
    AwaitApproval,
    BackOff,
    CallHook,
    CallModel,
    CheckApproval,
    Effect,
    ExecuteTool,
    Fail,
    FollowUpPolled,
    HookFailed,
    HookReturned,
    Input,
    PollFollowUp,
    PollSteering,
    PrepareArguments,
    Proceed,
    Proceeded,
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
    ValidateOutput,
)
from agentcore_fsm.runtime.observer import RunWatch
from agentcore_fsm.runtime.output_run import check_output
from agentcore_fsm.runtime.recording import JournalWriteError, Recorder
from agentcore_fsm.runtime.task_runs import TaskFn, TaskRunner, call
from agentcore_fsm.runtime.tasks import ToolTasks, awaitable, cancelled_class, scope_class

__all__ = ["Driver", "Emit"]

logger = logging.getLogger("agentcore_fsm")

Emit = Callable[[Any], Any]


def _must_be_recorded(effects: list[Effect], outcome_pending: bool) -> bool:
    """A step whose entries must be written before its events and effects: it starts a tool
    that is not idempotent (it must never run twice), or waits for an approval decision (a
    request that may wait for days); or, while a model's answer or a tool's result is not
    written yet, it starts something that may take long (a model call, a tool), so that a
    crash then never has a model asked again for an answer it gave, nor a finished tool
    answered as interrupted."""
    for effect in effects:
        if isinstance(effect, AwaitApproval):
            return True
        if isinstance(effect, ExecuteTool):
            if outcome_pending or not getattr(effect.tool, "idempotent", False):
                return True
        elif outcome_pending and isinstance(effect, CallModel):
            return True
    return False


def _is_task(effect: Effect) -> bool:
    """Effects that run as tasks of the run (the rest is the step's one main effect)."""
    return isinstance(effect, (ExecuteTool, AwaitApproval, BackOff)) or (
        isinstance(effect, CallHook) and effect.name == "after_tool_call"
    )


class Driver:
    """Runs one :class:`LoopMachine` to its end (made and run by
    :func:`~agentcore_fsm.runtime.driver.run_machine`).

    ``signal`` is what hooks, tools and the stream function receive; ``control`` (default: the
    same) is what decides: ``agent_loop`` gives one linked to it that also fires when the
    consumer leaves the block early. ``watch`` are the run's observers, ``recorder`` writes a
    journaled run's entries; ``suspendable``: the run may stop unfinished to wait for approval
    decisions (a journaled run)."""

    # slots: a thousand runs in flight each hold one (a dict per driver costs 1.5 KiB)
    __slots__ = (
        "_cancelled_exc",
        "_core_feed",
        "_delivered",
        "_delivering",
        "_emitting",
        "_failed",
        "_failure",
        "_fed",
        "_first",
        "_halt",
        "_interrupt",
        "_last_input",
        "_machine_feed",
        "_on_transition",
        "_perform",
        "_recorder",
        "_run_over",
        "_runner",
        "_scope",
        "_scope_cls",
        "_tasks",
        "_watch",
        "close_grace",
        "config",
        "control",
        "emit",
        "feed_input",
        "m",
        "now",
        "signal",
        "stream_fn",
        "suspendable",
        "suspended",
    )

    def __init__(
        self,
        machine: LoopMachine,
        stream_fn: StreamFn,
        emit: Emit | None,
        signal: AbortSignal,
        control: AbortSignal | None = None,
        *,
        close_grace: float = 2.0,
        watch: RunWatch | None = None,
        recorder: Recorder | None = None,
        suspendable: bool = False,
        on_transition: Callable[[TransitionRecord], None] | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.m = machine
        self.now = clock  # stamps every input fed (ms): the machine has no clock
        if watch is not None:
            stream_fn = watch.wrap_stream_fn(stream_fn)
            emit = watch.wrap_emit(emit)
        self.stream_fn = stream_fn
        self.emit = emit
        self.signal = signal
        self.control = control if control is not None else signal
        self.config = machine.config
        self.close_grace = close_grace
        self._halt = False  # the control signal fired, or user code raised a BaseException
        self._interrupt: BaseException | None = None  # that BaseException, re-raised at the end
        self._failure: BaseException | None = None  # first emit/journal failure, not yet fed
        self._failed = False  # a failure has been fed: later emit errors are only logged
        self._emitting = False
        self._delivering: list[Any] | None = None  # the events being delivered ...
        self._delivered = 0  # ... and how many of them have been handed to emit
        self._run_over = False  # the machine said the run is over (agent_end produced)
        self._scope: Any = None  # the main effect in flight: its cancel scope (see scope_class)
        self._scope_cls: Callable[[], Any] = anyio.CancelScope
        # running tools and tool hooks, and the inbox of what they report, as machine inputs
        # (None wakes the driver); made when the run's task group is entered
        self._tasks: ToolTasks | None = None
        self._cancelled_exc: type[BaseException] = BaseException
        self._first: Step | None = None
        # approvals: a journaled run may stop, unfinished, when every approval still waiting
        # was answered "no decision here" (None) and nothing else is in flight
        self.suspendable = suspendable
        self.suspended: list[ApprovalRequest] | None = None
        # the ports, chosen once: a plain run feeds the machine and performs effects directly
        self._watch = watch
        self._recorder = recorder
        self._last_input: Input | None = None  # observed runs: the last input fed ...
        self._fed = 0  # ... and how many were
        core_feed = self._feed_journaled if recorder is not None else machine.feed
        self._on_transition = on_transition
        if on_transition is not None:
            self._machine_feed = core_feed
            core_feed = self._feed_reported
        self._core_feed: Callable[[Input], Step] = core_feed
        self.feed_input: Callable[[Input], Step] = (
            self._feed_observed if watch is not None else core_feed
        )
        self._perform: Callable[[list[Effect]], Awaitable[Step]] = (
            self._perform_observed if watch is not None else self._perform_effects
        )
        self._runner = TaskRunner(self, machine.config, signal, watch, suspendable, clock)
        if recorder is not None:
            recorder.on_failure = self._journal_failed

    # --- abort --------------------------------------------------------------------------

    def _on_abort(self) -> None:
        self._halt = True
        if self._scope is not None and not self._emitting:
            self._scope.cancel()
        self._cancel_tasks()
        if self._tasks is not None:
            self._tasks.post(None)  # a wait on the inbox returns; _process sees the abort

    def interrupted(self, exc: BaseException) -> None:
        """User code raised a BaseException that is not cancellation: stop like an abort,
        re-raise it once the run is closed."""
        if self._interrupt is None:
            self._interrupt = exc
        else:
            logger.error("%s raised while the run was stopping; ignored", type(exc).__name__)
        self._on_abort()

    def _cancel_tasks(self) -> None:
        if self._tasks is not None:
            self._tasks.cancel_all()

    def stopping(self) -> bool:
        """The run is ending (the signal fired, or a failure is known or was fed): a task that
        starts only now (trio may run a task cancelled before it started up to its first
        await) calls no user code."""
        return self._halt or self._failed or self._failure is not None or self._run_over

    def _journal_failed(self, error: JournalWriteError) -> None:
        """The journal could not be written: the run ends with that error (once), what is in
        flight is stopped; when the run is ending already, it is logged at its end."""
        if self._failed or self._failure is not None or self._run_over:
            return  # the run is ending already (logged when the journal is closed)
        self._failure = error
        if self._scope is not None and not self._emitting:
            self._scope.cancel()
        if self._tasks is not None:
            self._tasks.post(None)

    # --- the main loop ------------------------------------------------------------------

    async def run(self, first: Step | None = None) -> None:
        """Run the machine to its end: from ``Start`` or, resuming, from ``first`` (the events
        still to deliver and the effects the machine waits for)."""
        self._first = first
        control = self.control
        self._cancelled_exc = self._runner.cancelled = cancelled_class()
        self._scope_cls = scope_class()
        on_abort = self._on_abort
        control.add_callback(on_abort)
        try:
            # (the body is written here, not in a coroutine of its own: a thousand runs in
            # flight each keep every coroutine frame of their chain, 0.4 KiB a frame)
            tasks = self._tasks = ToolTasks()
            try:
                first = self._first
                if first is None:
                    first = self.feed_input(Start(timestamp=self.now()))
                elif self._on_transition is not None:
                    self._report(first.transitions)  # the transitions that led to it (resuming)
                pending = await self._process(first)
                if pending is not None:
                    # trio, and the run starts its first task: the rest of the run goes on
                    # inside a task group, whose nursery the tasks start in (asyncio needs
                    # none: tools are plain tasks, joined below)
                    async with anyio.create_task_group():
                        tasks.use_nursery()
                        try:
                            await self._process(pending)
                        finally:
                            tasks.cancel_all()
            except self._cancelled_exc:
                # cancelled from outside (our own cancel scopes never let it out): close the
                # run so that whoever listens sees a complete, well-formed end, then go on
                # being cancelled
                tasks.cancel_all()
                with anyio.CancelScope(shield=True) as shield:
                    await tasks.join()
                    shield.deadline = anyio.current_time() + self.close_grace
                    await self._close_after_cancel()
                raise
            finally:
                tasks.cancel_all()
                await tasks.join()
        finally:
            control.remove_callback(on_abort)
            if self._tasks is not None:
                await self._tasks.join()
                self._tasks.close()
        if self._interrupt is not None:
            interrupt, self._interrupt = self._interrupt, None
            raise interrupt
        # a cancellation requested while the run went on without a checkpoint is delivered
        # here, not after the caller has moved on
        await anyio.lowlevel.checkpoint_if_cancelled()

    async def _close_after_cancel(self) -> None:
        events: list[Any] = []
        delivering = self._delivering
        if delivering is not None:  # the event being emitted counts as delivered
            events.extend(delivering[self._delivered :])
            self._delivering = None
        self._halt = True
        while not self._run_over:
            step = self._drain_inbox()
            if step is None:
                step = self.feed_input(Abort(timestamp=self.now()))
            self._run_over = step.run_over
            events.extend(step.events)
        self._failed = True  # from here on an emit error is only logged
        self._halt = True
        await self._deliver(events)

    async def _process(self, step: Step) -> Step | None:
        """Deliver each step's events and perform its effects until the run is over (None), or
        until a step would start a task on trio with no task group open yet: that step is
        returned, its events delivered, for :meth:`run` to go on with inside one."""
        feed = self.feed_input
        recorder = self._recorder
        tasks = self._tasks
        assert tasks is not None
        while True:
            if step.run_over:
                self._run_over = True
            if recorder is not None and step.effects and recorder.behind:
                if _must_be_recorded(step.effects, recorder.outcome_pending):
                    # what must not be lost is written before anyone hears of what follows
                    # (docs/survive.md#what-is-durable-when); a journal that fails ends the
                    # run with that failure
                    await recorder.durable()
            if step.events:
                await self._deliver(step.events)
            if step.run_over:
                return None
            effects = step.effects
            if effects and isinstance(effects[0], Suspend):
                # the machine's declared suspend transition: no decision is coming in this
                # process, so the run stops here, unfinished (its journal keeps the requests;
                # see RunSuspended) — unless an abort or a failure is pending, which end it
                if self._failure is None and not self._halt:
                    self.suspended = effects[0].requests
                    return None
            if self._failure is not None or self._halt:
                # stop running tools first; results that arrived before are still fed (those
                # calls keep them), then the machine closes the run
                self._cancel_tasks()
                pending = self._drain_inbox()
                if pending is not None:
                    step = pending
                elif self._failure is not None:
                    failure, self._failure = self._failure, None
                    self._failed = True
                    step = feed(Fail(failure, self._halt, timestamp=self.now()))
                else:
                    step = feed(Abort(timestamp=self.now()))
                continue
            effects = step.effects
            if tasks.needs_nursery and any(_is_task(effect) for effect in effects):
                return Step([], effects, step.stream_over, step.run_over)  # delivered
            # the delivered step is let go before the wait: its events would otherwise stay
            # alive as long as the tools it started run (memory of runs in flight)
            del step
            step = await self._perform(effects)

    async def _deliver(self, events: list[Any]) -> None:
        emit = self.emit
        if emit is None:
            return
        self._delivering = events
        for i, event in enumerate(events):
            self._delivered = i + 1
            self._emitting = True
            try:
                result = emit(event)
                if result is not None and awaitable(result):
                    await result
            except Exception as exc:
                self._emit_failed(exc)
            except self._cancelled_exc:
                raise
            except BaseException as exc:
                self.interrupted(exc)
            finally:
                self._emitting = False
        self._delivering = None

    def _emit_failed(self, exc: Exception) -> None:
        if self._failed or self._failure is not None or self._run_over:
            logger.exception("emit raised while a run was ending; ignored")
        else:
            self._failure = exc

    # --- the ports: feeding and performing, observed and journaled --------------------------

    def _feed_journaled(self, input: Input) -> Step:
        # the machine keeps the new entries; the recorder writes them when _process says
        step = self.m.feed(input)
        recorder = self._recorder
        assert recorder is not None
        if recorder.machine.journal_error is not None:
            recorder.take()  # an input the record cannot hold: the journal fails
        kind = input.__class__
        if kind is ToolFinished or (kind is StreamEvent and step.stream_over):
            recorder.outcome_pending = True  # a model's answer, a tool's result
        elif kind is ToolAttemptFailed or kind is ToolTimedOut:
            recorder.outcome_pending = True  # a tool's (failed) attempt
        return step

    def _feed_reported(self, input: Input) -> Step:
        # the machine calls nobody: the run's on_transition gets the step's transitions here,
        # before its observers hear of the input and before the step's events are delivered
        step = self._machine_feed(input)
        if step.transitions:
            self._report(step.transitions)
        return step

    def _report(self, transitions: Sequence[TransitionRecord]) -> None:
        callback = self._on_transition
        assert callback is not None
        for record in transitions:
            try:
                callback(record)
            except Exception:  # an observer never breaks the run
                logger.exception("on_transition raised; ignored")

    def _feed_observed(self, input: Input) -> Step:
        step = self._core_feed(input)
        self._last_input = input
        self._fed += 1
        watch = self._watch
        assert watch is not None
        watch.input_fed(input, step, step.transitions)
        return step

    async def _perform_observed(self, effects: list[Effect]) -> Step:
        main = None
        for effect in effects:
            if not _is_task(effect):
                main = effect
        if main is None:
            return await self._perform_effects(effects)
        fed = self._fed
        started = time.perf_counter()
        step = await self._perform_effects(effects)
        outcome = self._last_input if self._fed != fed else None
        if isinstance(main, CallModel) and not step.stream_over:
            outcome = None  # the call was cut (an abort): it gave no outcome
        watch = self._watch
        assert watch is not None
        watch.effect_performed(main, time.perf_counter() - started, outcome)
        return step

    # --- performing a step's effects ---------------------------------------------------

    async def _perform_effects(self, effects: list[Effect]) -> Step:
        main: Effect | None = None
        runner = self._runner
        for effect in effects:
            if isinstance(effect, ExecuteTool):
                self._spawn(effect.index, runner.tool or runner.run_tool, effect)
            elif isinstance(effect, CallHook) and effect.name == "after_tool_call":
                assert effect.index is not None
                self._spawn(effect.index, runner.after_hook or runner.run_after_hook, effect)
            elif isinstance(effect, AwaitApproval):
                self._spawn(effect.index, runner.approval or runner.await_approval, effect)
            elif isinstance(effect, BackOff):  # a tool's retry policy (runtime/tool_policies.py)
                self._spawn(effect.index, runner.back_off, effect)
            else:
                main = effect
        if main is None:
            # the next outcome a task posts. No cancel scope here (one per wait would be the
            # costliest thing on the tool path): an abort posts a wake-up (None) instead.
            tasks = self._tasks
            assert tasks is not None
            return self._feed(await tasks.get())
        if isinstance(main, CallModel):
            return await self._call_model(main)
        feed = self.feed_input
        if self._halt:
            return Step()  # nothing starts once the signal fired: _process feeds the abort
        now = self.now
        if isinstance(main, Proceed):
            return feed(Proceeded(timestamp=now()))
        if isinstance(main, PrepareArguments):
            prepare: Any = main.tool.prepare_arguments
            try:
                value = prepare(main.raw)
            except Exception as exc:
                return feed(ArgumentsPrepared(main.index, error=exc, timestamp=now()))
            except BaseException as exc:
                self.interrupted(exc)
                return Step()
            return feed(ArgumentsPrepared(main.index, value, timestamp=now()))
        with self._scope_cls() as scope:
            self._scope = scope
            try:
                if isinstance(main, PollSteering):
                    assert self.config.get_steering_messages is not None
                    messages = await call(self.config.get_steering_messages)
                    self._scope = None
                    # the messages are kept even when the signal fired meanwhile
                    return feed(SteeringPolled(messages, self._halt, timestamp=now()))
                if isinstance(main, PollFollowUp):
                    assert self.config.get_follow_up_messages is not None
                    messages = await call(self.config.get_follow_up_messages)
                    self._scope = None
                    return feed(FollowUpPolled(messages, self._halt, timestamp=now()))
                if isinstance(main, ValidateOutput):  # structured output (runtime/output_run.py)
                    checked = await check_output(main, now)
                    self._scope = None
                    return Step() if self._halt else feed(checked)
                if isinstance(main, CheckApproval):
                    try:
                        check: Any = main.tool.requires_approval
                        needed = await call(check, main.args)
                    except Exception as exc:
                        self._scope = None
                        if self._halt:
                            return Step()
                        return feed(ApprovalChecked(main.index, error=exc, timestamp=now()))
                    self._scope = None
                    if self._halt:
                        return Step()
                    return feed(ApprovalChecked(main.index, needed, timestamp=now()))
                assert isinstance(main, CallHook)
                hook = (
                    run_compaction  # context compaction (core/compaction.py)
                    if main.name == "compact"
                    else getattr(self.config, main.name)
                )
                try:
                    value = await call(hook, main.ctx, self.signal)
                except Exception as exc:
                    if main.index is None:
                        raise
                    self._scope = None
                    if self._halt:
                        return Step()
                    return feed(HookFailed(main.name, exc, main.index, timestamp=now()))
                self._scope = None
                if self._halt:
                    return Step()  # an outcome after the signal fired: _process feeds the abort
                return feed(HookReturned(main.name, value, main.index, timestamp=now()))
            except Exception as exc:
                self._scope = None
                return feed(Fail(exc, self._halt, timestamp=now()))
            except self._cancelled_exc:
                raise
            except BaseException as exc:
                self.interrupted(exc)
                return Step()
            finally:
                self._scope = None
        return Step()  # cancelled by abort: _process feeds it

    # --- the model call -----------------------------------------------------------------

    async def _call_model(self, effect: CallModel) -> Step:
        m = self.m
        feed = self.feed_input
        now = self.now
        config = self.config
        signal = self.signal
        stream: Any = None
        cancelled = False
        with self._scope_cls() as scope:
            self._scope = scope
            # Once the signal fired nothing more starts and no further stream event is fed:
            # each ``return Step()`` below hands the abort to _process. A sync hook that fires
            # the signal has no await for the cancel scope to interrupt.
            try:
                messages: list[AgentMessage] = effect.context.messages
                if config.transform_context is not None:
                    messages = check_message_list(
                        await call(config.transform_context, messages, signal),
                        "transform_context",
                    )
                    if self._halt:
                        return Step()
                convert = config.convert_to_llm or default_convert_to_llm
                llm_messages = check_llm_messages(await call(convert, messages))
                if self._halt:
                    return Step()
                api_key = None
                if config.get_api_key is not None:
                    api_key = check_api_key(await call(config.get_api_key, effect.model.provider))
                    if self._halt:
                        return Step()
                options = stream_options(
                    config,
                    signal,
                    api_key=api_key,
                    reasoning=effect.reasoning,  # type: ignore[arg-type]
                )
                tools, spec = effect.context.tools, config.output
                if spec is not None and spec.uses_tool:  # structured output: its final tool
                    tools = [*tools, spec.final_tool]
                llm_context = LlmContext(effect.context.system_prompt, llm_messages, tools, spec)
                stream = self.stream_fn(effect.model, llm_context, options)
                if awaitable(stream):
                    stream = await stream
                if not hasattr(stream, "__aiter__"):
                    bad, stream = stream, None
                    raise TypeError(
                        f"Stream function returned {type(bad).__name__}; expected an async "
                        f"iterator of stream events"
                    )
                deliver = self._deliver
                stream_update = m.stream_update
                emit = self.emit
                async for event in stream:
                    if self._halt:
                        return Step()
                    # the hot path: a delta of a started message is one object and one emit
                    update = stream_update(event)
                    if update is not None:
                        if emit is not None:
                            self._emitting = True
                            try:
                                result = emit(update)
                                if result is not None and awaitable(result):
                                    await result
                            except Exception as exc:
                                self._emit_failed(exc)
                            except self._cancelled_exc:
                                raise
                            except BaseException as exc:
                                self.interrupted(exc)
                            finally:
                                self._emitting = False
                            if self._failure is not None or self._halt:
                                return Step()
                        continue
                    try:
                        step = feed(StreamEvent(event, timestamp=now()))
                    except MachineInputError as exc:  # the stream function yielded a non-event
                        return feed(Fail(exc, self._halt, timestamp=now()))
                    if step.stream_over:
                        return step  # terminal (or failed): _process delivers its events
                    if step.events:
                        await deliver(step.events)
                        if self._failure is not None or self._halt:
                            return Step()
                if self._halt:
                    return Step()
                return feed(StreamExhausted(timestamp=now()))
            except Exception as exc:
                # a raise before or while the stream ran (the machine is still streaming: every
                # step that ended the stream was returned above)
                return feed(Fail(exc, self._halt, timestamp=now()))
            except self._cancelled_exc:
                cancelled = True
                raise
            except BaseException as exc:
                self.interrupted(exc)
                return Step()
            finally:
                self._scope = None
                if stream is not None:
                    aclose = getattr(stream, "aclose", None)
                    if aclose is not None:
                        await self._close_stream(aclose, cancelled or scope.cancel_called)
        return Step()  # cancelled by abort: _process feeds it

    async def _close_stream(self, aclose: Callable[[], Awaitable[Any]], cancelled: bool) -> None:
        """Close the stream (runs its cleanup); shielded when the call was cancelled."""
        try:
            if cancelled:
                with anyio.CancelScope(shield=True):
                    await aclose()
            else:
                await aclose()
        except Exception:
            logger.exception("closing the model stream raised; ignored")
        except self._cancelled_exc:
            raise
        except BaseException as exc:
            self.interrupted(exc)

    # --- tools (run in the run's task group, report through the inbox) -----------------------

    def _spawn(self, index: int, fn: TaskFn, effect: Any) -> None:
        assert self._tasks is not None
        self._tasks.spawn(index, fn, effect)

    def post(self, item: Input | None) -> None:
        """Put what a task came to in the run's inbox (dropped once the run has ended)."""
        assert self._tasks is not None
        self._tasks.post(item)

    def _feed(self, item: Input | None) -> Step:
        if item is None:  # a wake-up (abort, an approval task that ended)
            return Step()
        if isinstance(item, (ToolUpdated, ApprovalDeferred)):
            try:
                return self.feed_input(item)
            except MachineInputError:
                # an update (or a deferral) that arrived after its batch was closed: dropped
                return Step()
        if self._halt and isinstance(item, ToolFinished):
            # the signal fired before the result was fed: the call keeps its result, and no
            # after_tool_call starts
            item = ToolFinished(
                item.index, item.result, item.error, aborted=True, timestamp=item.timestamp
            )
        return self.feed_input(item)

    def _drain_inbox(self) -> Step | None:
        """After an abort or a failure: feed the tool outcomes that arrived before it was
        processed (those calls keep their own results); None once nothing is waiting."""
        tasks = self._tasks
        if tasks is None:
            return None
        while True:
            found, item = tasks.get_nowait()
            if not found:
                return None
            if item is None or isinstance(item, (ToolUpdated, ApprovalDeferred)):
                continue
            try:
                return self._feed(item)
            except MachineInputError:
                continue  # an outcome of a batch that was already closed
