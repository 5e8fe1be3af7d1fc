"""The async driver: performs the machine's effects and feeds their outcomes back (see
docs/reference.md#control-flow-of-a-run).

It is written against anyio, so it runs on trio (the reference backend) and on asyncio. It makes
no decisions about what happens next; it only

* delivers the events each step produced, awaiting ``emit`` for each one, in order;
* performs effects: polls, hooks, the model call (whose stream events it feeds one by one),
  and tool executions, which run in the run's task group and report back through an inbox;
* turns what goes wrong into inputs: a raise becomes ``fail`` (or ``hook_failed`` for tool
  hooks, ``tool_finished(error=...)`` for tools), the signal firing becomes ``abort``.

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
  closing events delivered within :data:`CLOSE_GRACE_S` seconds (shielded; a listener that
  hangs longer is cut off), and the cancellation propagates.
"""

from __future__ import annotations

import inspect
import logging
import math
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream

from agentcore_fsm.core.abort import AbortController, AbortSignal
from agentcore_fsm.core.approval import (
    NO_APPROVER_TEXT,
    TIMEOUT_TEXT,
    ApprovalDecision,
    ApprovalRequest,
    RunSuspended,
)
from agentcore_fsm.core.boundary import (
    check_api_key,
    check_llm_messages,
    check_message_list,
    coerce_messages,
    describe_value,
    exc_text,
    is_message,
)
from agentcore_fsm.core.config import (
    AgentContext,
    AgentLoopConfig,
    LlmContext,
    StreamFn,
    default_convert_to_llm,
    stream_options,
)
from agentcore_fsm.core.declared import MachineInputError, TransitionRecord
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import AgentMessage
from agentcore_fsm.core.protocol import (
    Abort,
    ApprovalChecked,
    ApprovalDecided,
    ArgumentsPrepared,
    AwaitApproval,
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
    ToolFinished,
    ToolUpdated,
)
from agentcore_fsm.core.run_context import bind_run
from agentcore_fsm.core.tools import AgentToolResult
from agentcore_fsm.runtime.tasks import ToolTasks, on_trio

if TYPE_CHECKING:
    from agentcore_fsm.integrations.otel import Instrumentation
    from agentcore_fsm.persist.store import RunStore
    from agentcore_fsm.runtime.resume import StoreJournal

__all__ = [
    "EventStream",
    "agent_loop",
    "agent_loop_continue",
    "get_default_stream_fn",
    "run_agent_loop",
    "run_agent_loop_continue",
    "set_default_stream_fn",
]

logger = logging.getLogger("agentcore_fsm")

Emit = Callable[[Any], Any]
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


def _resolve_stream_fn(stream_fn: StreamFn | None) -> StreamFn:
    fn = stream_fn if stream_fn is not None else _default_stream_fn
    if fn is None:
        raise ValueError(NO_STREAM_FN)
    return fn


def _as_prompts(prompts: Any) -> list[AgentMessage]:
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


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def _boxed(fn: Callable[..., Any], *args: Any) -> tuple[Any]:
    return (fn(*args),)


class _Driver:
    """Runs one :class:`LoopMachine` to its end."""

    def __init__(
        self,
        machine: LoopMachine,
        stream_fn: StreamFn,
        emit: Emit | None,
        signal: AbortSignal,
        control: AbortSignal | None = None,
    ) -> None:
        self.m = machine
        self.stream_fn = stream_fn
        self.emit = emit
        self.signal = signal  # what hooks, tools and the stream function receive
        # what decides: the same signal, or (agent_loop) one linked to it that also fires when
        # the consumer leaves the block early
        self.control = control if control is not None else signal
        self.config = machine.config
        self._halt = False  # the control signal fired, or user code raised a BaseException
        self._interrupt: BaseException | None = None  # that BaseException, re-raised at the end
        self._failure: BaseException | None = None  # first emit failure, not yet fed
        self._failed = False  # a failure has been fed: later emit errors are only logged
        self._emitting = False
        self._delivering: list[Any] | None = None  # the events being delivered ...
        self._delivered = 0  # ... and how many of them have been handed to emit
        self._run_over = False  # the machine said the run is over (agent_end produced)
        self._scope: anyio.CancelScope | None = None  # the main effect in flight
        # running tools and tool hooks, and the inbox of what they report, as machine inputs
        # (None wakes the driver); made when the run's task group is entered
        self._tasks: ToolTasks | None = None
        self._loop_thread = threading.get_ident()
        self._cancelled_exc: type[BaseException] = BaseException
        self._first: Step | None = None
        # approvals: a journaled run may stop, unfinished, when every approval still waiting
        # was answered "no decision here" (None) and nothing else is in flight
        self.suspendable = False
        self._awaiting = 0  # approval tasks in flight
        self._undecided: list[ApprovalRequest] = []
        self.suspended: list[ApprovalRequest] | None = None

    # --- abort --------------------------------------------------------------------------

    def _on_abort(self) -> None:
        self._halt = True
        if self._scope is not None and not self._emitting:
            self._scope.cancel()
        self._cancel_tasks()
        if self._tasks is not None:
            self._tasks.post(None)  # a wait on the inbox returns; _process sees the abort

    def _interrupted(self, exc: BaseException) -> None:
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

    def _aborted(self) -> bool:
        return self._halt

    def _stopping(self) -> bool:
        """The run is ending (the signal fired, or a failure is known or was fed): a task that
        starts only now (trio may run a task cancelled before it started up to its first
        await) calls no user code."""
        return self._halt or self._failed or self._failure is not None or self._run_over

    # --- the main loop ------------------------------------------------------------------

    async def run(self, first: Step | None = None) -> None:
        """Run the machine to its end: from ``Start`` or, resuming, from ``first`` (the events
        still to deliver and the effects the machine waits for)."""
        self._first = first
        control = self.control
        self._cancelled_exc = anyio.get_cancelled_exc_class()
        remove = control.add_callback(self._on_abort)
        try:
            try:
                if on_trio():
                    # tools start in this task group's nursery (see ToolTasks)
                    async with anyio.create_task_group():
                        await self._body()
                else:
                    await self._body()  # tools are plain asyncio tasks, joined in _body
            except self._cancelled_exc:
                # cancelled from outside (our own cancel scopes never let it out): close the
                # run so that whoever listens sees a complete, well-formed end, then go on
                # being cancelled
                with anyio.CancelScope(shield=True) as shield:
                    shield.deadline = anyio.current_time() + CLOSE_GRACE_S
                    await self._close_after_cancel()
                raise
        finally:
            remove()
            if self._tasks is not None:
                await self._tasks.join()
                self._tasks.close()
        if self._interrupt is not None:
            interrupt, self._interrupt = self._interrupt, None
            raise interrupt
        # a cancellation requested while the run went on without a checkpoint is delivered
        # here, not after the caller has moved on
        await anyio.lowlevel.checkpoint_if_cancelled()

    async def _body(self) -> None:
        tasks = self._tasks = ToolTasks()
        try:
            first = self._first
            await self._process(self.m.feed(Start()) if first is None else first)
        finally:
            tasks.cancel_all()
            await tasks.join()

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
                step = self.m.feed(Abort())
            self._run_over = step.run_over
            events.extend(step.events)
        self._failed = True  # from here on an emit error is only logged
        self._halt = True
        await self._deliver(events)

    async def _process(self, step: Step) -> None:
        feed = self.m.feed
        while True:
            if step.run_over:
                self._run_over = True
            if step.events:
                await self._deliver(step.events)
            if step.run_over:
                return
            journal_error = getattr(self.m, "journal_error", None)
            if journal_error is not None:  # the run store refused an entry: end the run
                self.m.journal_error = None  # type: ignore[attr-defined]
                if self._failure is None and not self._failed:
                    self._failure = journal_error
            if self._undecided and not self._awaiting and self._failure is None:
                if not self._halt:
                    # nothing can feed the machine any more in this process: stop here, the
                    # run unfinished (its journal keeps the requests); see RunSuspended
                    self.suspended, self._undecided = self._undecided, []
                    return
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
                    step = feed(Fail(failure, self._halt))
                else:
                    step = feed(Abort())
                continue
            step = await self._perform(step.effects)

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
                if result is not None and inspect.isawaitable(result):
                    await result
            except Exception as exc:
                self._emit_failed(exc)
            except self._cancelled_exc:
                raise
            except BaseException as exc:
                self._interrupted(exc)
            finally:
                self._emitting = False
        self._delivering = None

    def _emit_failed(self, exc: Exception) -> None:
        if self._failed or self._failure is not None or self._run_over:
            logger.exception("emit raised while a run was ending; ignored")
        else:
            self._failure = exc

    async def _perform(self, effects: list[Effect]) -> Step:
        main: Effect | None = None
        for effect in effects:
            if isinstance(effect, ExecuteTool):
                self._spawn(effect.index, self._run_tool, effect)
            elif isinstance(effect, CallHook) and effect.name == "after_tool_call":
                assert effect.index is not None
                self._spawn(effect.index, self._run_after_hook, effect)
            elif isinstance(effect, AwaitApproval):
                self._awaiting += 1
                self._spawn(effect.index, self._await_approval, effect)
            else:
                main = effect
        if main is None:
            return await self._next_from_inbox()
        if isinstance(main, CallModel):
            return await self._call_model(main)
        feed = self.m.feed
        if self._halt:
            return Step()  # nothing starts once the signal fired: _process feeds the abort
        if isinstance(main, Proceed):
            return feed(Proceeded())
        if isinstance(main, PrepareArguments):
            prepare: Any = main.tool.prepare_arguments
            try:
                value = prepare(main.raw)
            except Exception as exc:
                return feed(ArgumentsPrepared(main.index, error=exc))
            except BaseException as exc:
                self._interrupted(exc)
                return Step()
            return feed(ArgumentsPrepared(main.index, value))
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                if isinstance(main, PollSteering):
                    assert self.config.get_steering_messages is not None
                    messages = await _call(self.config.get_steering_messages)
                    self._scope = None
                    # the messages are kept even when the signal fired meanwhile
                    return feed(SteeringPolled(messages, self._halt))
                if isinstance(main, PollFollowUp):
                    assert self.config.get_follow_up_messages is not None
                    messages = await _call(self.config.get_follow_up_messages)
                    self._scope = None
                    return feed(FollowUpPolled(messages, self._halt))
                if isinstance(main, CheckApproval):
                    try:
                        check: Any = main.tool.requires_approval
                        needed = await _call(check, main.args)
                    except Exception as exc:
                        self._scope = None
                        if self._halt:
                            return Step()
                        return feed(ApprovalChecked(main.index, error=exc))
                    self._scope = None
                    return Step() if self._halt else feed(ApprovalChecked(main.index, needed))
                assert isinstance(main, CallHook)
                hook = getattr(self.config, main.name)
                try:
                    value = await _call(hook, main.ctx, self.signal)
                except Exception as exc:
                    if main.index is None:
                        raise
                    self._scope = None
                    if self._halt:
                        return Step()
                    return feed(HookFailed(main.name, exc, main.index))
                self._scope = None
                if self._halt:
                    return Step()  # an outcome after the signal fired: _process feeds the abort
                return feed(HookReturned(main.name, value, main.index))
            except Exception as exc:
                self._scope = None
                return feed(Fail(exc, self._halt))
            except self._cancelled_exc:
                raise
            except BaseException as exc:
                self._interrupted(exc)
                return Step()
            finally:
                self._scope = None
        return Step()  # cancelled by abort: _process feeds it

    # --- the model call -----------------------------------------------------------------

    async def _call_model(self, effect: CallModel) -> Step:
        m = self.m
        feed = m.feed
        config = self.config
        signal = self.signal
        stream: Any = None
        cancelled = False
        with anyio.CancelScope() as scope:
            self._scope = scope
            # Once the signal fired nothing more starts and no further stream event is fed:
            # each ``return Step()`` below hands the abort to _process. A sync hook that fires
            # the signal has no await for the cancel scope to interrupt.
            try:
                messages: list[AgentMessage] = effect.context.messages
                if config.transform_context is not None:
                    messages = check_message_list(
                        await _call(config.transform_context, messages, signal),
                        "transform_context",
                    )
                    if self._halt:
                        return Step()
                convert = config.convert_to_llm or default_convert_to_llm
                llm_messages = check_llm_messages(await _call(convert, messages))
                if self._halt:
                    return Step()
                api_key = None
                if config.get_api_key is not None:
                    api_key = check_api_key(await _call(config.get_api_key, effect.model.provider))
                    if self._halt:
                        return Step()
                options = stream_options(
                    config,
                    signal,
                    api_key=api_key,
                    reasoning=effect.reasoning,  # type: ignore[arg-type]
                )
                llm_context = LlmContext(
                    effect.context.system_prompt, llm_messages, effect.context.tools
                )
                stream = self.stream_fn(effect.model, llm_context, options)
                if inspect.isawaitable(stream):
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
                                if result is not None and inspect.isawaitable(result):
                                    await result
                            except Exception as exc:
                                self._emit_failed(exc)
                            except self._cancelled_exc:
                                raise
                            except BaseException as exc:
                                self._interrupted(exc)
                            finally:
                                self._emitting = False
                            if self._failure is not None or self._halt:
                                return Step()
                        continue
                    try:
                        step = feed(StreamEvent(event))
                    except MachineInputError as exc:  # the stream function yielded a non-event
                        return feed(Fail(exc, self._halt))
                    if step.stream_over:
                        return step  # terminal (or failed): _process delivers its events
                    if step.events:
                        await deliver(step.events)
                        if self._failure is not None or self._halt:
                            return Step()
                if self._halt:
                    return Step()
                return feed(StreamExhausted())
            except Exception as exc:
                # a raise before or while the stream ran (the machine is still streaming: every
                # step that ended the stream was returned above)
                return feed(Fail(exc, self._halt))
            except self._cancelled_exc:
                cancelled = True
                raise
            except BaseException as exc:
                self._interrupted(exc)
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
            self._interrupted(exc)

    # --- tools (run in the run's task group, report through the inbox) -----------------------

    def _spawn(
        self, index: int, fn: Callable[[Any], Coroutine[Any, Any, None]], effect: Any
    ) -> None:
        assert self._tasks is not None
        self._tasks.spawn(index, fn, effect)

    def _post(self, item: Input | _Undecided | None) -> None:
        assert self._tasks is not None
        self._tasks.post(item)  # dropped once the run has ended

    async def _run_tool(self, effect: ExecuteTool) -> None:
        index = effect.index
        settled = False
        loop_thread = self._loop_thread
        post = self._post

        def on_update(partial: AgentToolResult) -> None:
            if settled:
                return
            if not isinstance(partial, AgentToolResult):
                # a wrong value raises here, in the tool that passed it (not in the run)
                partial = AgentToolResult.model_validate(partial)
            if threading.get_ident() == loop_thread:
                post(ToolUpdated(index, partial))
            else:
                try:
                    anyio.from_thread.run_sync(post, ToolUpdated(index, partial))
                except RuntimeError:
                    pass  # the worker was abandoned (abort): updates are ignored

        execute: Any = effect.tool.execute
        if self._stopping():
            return  # nothing starts once the run is ending (the task may start after that)
        try:
            if inspect.iscoroutinefunction(execute) or inspect.iscoroutinefunction(
                getattr(execute, "__call__", None)  # noqa: B004
            ):
                result = await execute(effect.tool_call.id, effect.args, self.signal, on_update)
            else:
                # boxed: trio refuses a worker whose result is a coroutine, asyncio does not
                (result,) = await anyio.to_thread.run_sync(
                    _boxed,
                    execute,
                    effect.tool_call.id,
                    effect.args,
                    self.signal,
                    on_update,
                    abandon_on_cancel=True,
                )
                if inspect.isawaitable(result):
                    # a plain function that returned an awaitable (e.g. a lambda calling an
                    # async function): await it here, on the event loop, on every backend
                    result = await result
        except Exception as exc:
            settled = True
            post(ToolFinished(index, error=exc))
        except self._cancelled_exc:
            settled = True
            raise
        except BaseException as exc:
            settled = True
            self._interrupted(exc)
        else:
            settled = True
            post(ToolFinished(index, result))
        finally:
            settled = True

    async def _run_after_hook(self, effect: CallHook) -> None:
        if self._stopping():
            return  # nothing starts once the run is ending (the task may start after that)
        try:
            value = await _call(self.config.after_tool_call, effect.ctx, self.signal)  # type: ignore[arg-type]
        except Exception as exc:
            self._post(HookFailed("after_tool_call", exc, effect.index))
        except self._cancelled_exc:
            raise
        except BaseException as exc:
            self._interrupted(exc)
        else:
            self._post(HookReturned("after_tool_call", value, effect.index))

    async def _await_approval(self, effect: AwaitApproval) -> None:
        """Get the decision about one call waiting for approval; post it (or, for a journaled
        run, that this process makes none) to the inbox."""
        index, request = effect.index, effect.request
        try:
            if self._stopping():
                return  # nothing starts once the run is ending: the abort answers the call
            decide = self.config.decide_approval
            if decide is None:
                self._post(ApprovalDecided(index, False, NO_APPROVER_TEXT, "no approver"))
                return
            timeout = self.config.approval_timeout_s
            value: Any = None
            with anyio.move_on_after(math.inf if timeout is None else timeout) as scope:
                try:
                    value = await _call(decide, request, self.signal)
                except Exception as exc:
                    reason = f"decide_approval raised: {exc_text(exc)}"
                    self._post(ApprovalDecided(index, False, reason, "error"))
                    return
            if scope.cancelled_caught:
                reason = TIMEOUT_TEXT.format(seconds=timeout)
                self._post(ApprovalDecided(index, False, reason, "timeout"))
                return
            if value is None and self.suspendable:
                self._post(_Undecided(request))
                return
            self._post(_decision(index, value, self.suspendable))
        except self._cancelled_exc:
            raise
        except BaseException as exc:
            self._interrupted(exc)
        finally:
            self._awaiting -= 1
            self._post(None)  # wakes the driver: it may now suspend the run

    def _feed(self, item: Input | _Undecided | None) -> Step:
        if item is None:  # a wake-up (abort, an approval task that ended)
            return Step()
        if isinstance(item, _Undecided):
            self._undecided.append(item.request)
            return Step()
        if isinstance(item, ToolUpdated):
            try:
                return self.m.feed(item)
            except MachineInputError:
                return Step()  # an update that arrived after its batch was closed: dropped
        if self._halt and isinstance(item, ToolFinished):
            # the signal fired before the result was fed: the call keeps its result, and no
            # after_tool_call starts
            item = ToolFinished(item.index, item.result, item.error, aborted=True)
        return self.m.feed(item)

    async def _next_from_inbox(self) -> Step:
        # No cancel scope here (one per wait would be the costliest thing on the tool path):
        # an abort posts a wake-up (None) instead.
        tasks = self._tasks
        assert tasks is not None
        return self._feed(await tasks.get())

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
            if item is None or isinstance(item, (ToolUpdated, _Undecided)):
                continue
            try:
                return self._feed(item)
            except MachineInputError:
                continue  # an outcome of a batch that was already closed


class _Undecided:
    """Posted by an approval task whose decider made no decision (a journaled run)."""

    __slots__ = ("request",)

    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request


def _decision(index: int, value: Any, suspendable: bool) -> ApprovalDecided:
    """What ``decide_approval`` returned, as the machine's input: an
    :class:`~agentcore_fsm.core.approval.ApprovalDecision` (or a dict of its fields), a bool; junk
    is
    a denial whose reason says what was wrong."""
    if isinstance(value, bool):
        return ApprovalDecided(index, value, None, "user")
    if isinstance(value, dict):
        try:
            value = ApprovalDecision.model_validate(value)
        except Exception as exc:
            reason = f"decide_approval returned an invalid decision: {exc_text(exc)}"
            return ApprovalDecided(index, False, reason, "error")
    if isinstance(value, ApprovalDecision):
        return ApprovalDecided(index, value.approved, value.reason, value.decided_by, value.args)
    expected = "an ApprovalDecision, a dict with its fields, a bool"
    if value is None:
        reason = (
            "decide_approval returned None (no decision), which only a journaled run can wait "
            "for (store=...)"
        )
    else:
        reason = f"decide_approval returned {describe_value(value)}; expected {expected}" + (
            " or None" if suspendable else ""
        )
    return ApprovalDecided(index, False, reason, "error")


# --- entry points -------------------------------------------------------------------------

_instrumentation: Instrumentation | None = None
"""The global tracing switch: set by :func:`agentcore_fsm.integrations.otel.instrument`; None
is off."""


async def _run(
    prompts: list[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit | None,
    signal: AbortSignal | None,
    stream_fn: StreamFn,
    on_transition: Callable[[TransitionRecord], None] | None,
    control: AbortSignal | None = None,
    journal: StoreJournal | None = None,
    continuing: bool = False,
    instrument: bool | Instrumentation | None = None,
    make_driver: Callable[..., _Driver] = _Driver,
) -> list[AgentMessage]:
    if signal is None:
        # hooks, tools and the stream function always get a signal: the run makes its own
        signal = AbortController().signal
    tracing = _instrumentation if instrument is None else instrument
    if (
        tracing
    ):  # the one check a run makes when tracing is off (see agentcore_fsm.integrations.otel)
        from agentcore_fsm.integrations.otel import traced_run

        return await traced_run(
            tracing,
            prompts,
            context,
            config,
            emit,
            signal,
            stream_fn,
            on_transition,
            control,
            journal,
            continuing,
        )
    if journal is None:
        machine = LoopMachine(prompts, context, config, on_transition=on_transition)
        await make_driver(machine, stream_fn, emit, signal, control).run()
        return machine.new_messages
    # a journaled run (see agentcore_fsm.runtime.resume): every input is appended to the store
    machine = journal.machine(prompts, context, config, on_transition, continuing)
    driver = make_driver(machine, stream_fn, emit, signal, control)
    driver.suspendable = True
    try:
        await driver.run()
    finally:
        journal.close(machine)
    if driver.suspended is not None:
        raise RunSuspended(journal.run_id, driver.suspended, machine.new_messages)
    return machine.new_messages


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
    instrument: bool | Instrumentation | None = None,
    deps: Any = None,
) -> list[AgentMessage]:
    """Run the loop with ``prompts`` appended to (a copy of) ``context``; return the messages
    the run created. ``emit(event)`` (sync or async) is awaited for every event, in order.
    ``on_transition(record)`` (an extension) is called, synchronously, for every state change.
    ``instrument``: trace the run with OpenTelemetry (``True``, ``False``, an
    :class:`~agentcore_fsm.integrations.otel.Instrumentation`; ``None`` follows
    :func:`agentcore_fsm.integrations.otel.instrument`); see docs/tracing.md.

    With a run ``store`` (a :class:`~agentcore_fsm.persist.store.RunStore`, e.g.
    :class:`~agentcore_fsm.SqliteRunStore`) the run is journaled under ``run_id`` (required,
    new) as it goes, and :func:`~agentcore_fsm.resume_run` continues it after a crash; see
    docs/reference.md#runs-that-survive. ``session_id`` groups runs (an Agent's session).

    ``deps``: the run's dependencies object, which its tools and hooks reach (a function
    tool's ``RunContext.deps``, or ``current_run().deps``; see docs/tools.md).
    """
    fn = _resolve_stream_fn(stream_fn)
    journal = _journal(store, run_id, session_id)
    with bind_run(deps) as scope:  # deps and usage so far, for tools and hooks
        return await _run(
            _as_prompts(prompts),
            context,
            config,
            scope.watch(emit, context.tools),
            signal,
            fn,
            on_transition,
            journal=journal,
            instrument=instrument,
        )


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
    instrument: bool | Instrumentation | None = None,
    deps: Any = None,
) -> list[AgentMessage]:
    """Continue from ``context`` as it is (no prompts). Raises ``ValueError`` before emitting
    anything when the transcript is empty or ends with an assistant message. ``store``,
    ``run_id``, ``session_id``, ``instrument`` and ``deps`` as for :func:`run_agent_loop`."""
    fn = _resolve_stream_fn(stream_fn)
    _check_continue(context)
    journal = _journal(store, run_id, session_id)
    with bind_run(deps) as scope:
        return await _run(
            [],
            context,
            config,
            scope.watch(emit, context.tools),
            signal,
            fn,
            on_transition,
            journal=journal,
            continuing=True,
            instrument=instrument,
        )


def _journal(
    store: RunStore | None, run_id: str | None, session_id: str | None
) -> StoreJournal | None:
    if store is None:
        if run_id is not None or session_id is not None:
            raise ValueError("run_id and session_id need a store (store=...)")
        return None
    if not isinstance(run_id, str) or not run_id:
        raise ValueError("a journaled run needs a run_id: a non-empty str (the id to resume it by)")
    from agentcore_fsm.runtime.resume import StoreJournal

    return StoreJournal(store, run_id, session_id)


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


@asynccontextmanager
async def _loop_cm(
    prompts: list[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    stream_fn: StreamFn | None,
    on_transition: Callable[[TransitionRecord], None] | None,
    continuing: bool,
    deps: Any = None,
) -> AsyncIterator[EventStream]:
    fn = _resolve_stream_fn(stream_fn)  # raised on entering the block
    if continuing:
        _check_continue(context)
    send, receive = anyio.create_memory_object_stream[Any](math.inf)
    stream = EventStream(receive)
    inner = AbortController()
    remove = signal.add_callback(lambda: inner.abort(signal.reason)) if signal is not None else None

    def emit(event: Any) -> None:
        try:
            send.send_nowait(event)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the caller left the block: the run is being aborted, nobody reads any more

    async def runner() -> None:
        try:
            with send, bind_run(deps) as scope:
                stream._result = await _run(
                    prompts,
                    context,
                    config,
                    scope.watch(emit, context.tools),
                    signal or inner.signal,
                    fn,
                    on_transition,
                    inner.signal,
                )
        except BaseException as exc:
            stream._error = exc
            raise
        finally:
            stream._done.set()

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
                if not stream._done.is_set():
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
    deps: Any = None,
) -> Any:
    """``async with agent_loop(...) as events:`` — iterate the run's events; ``await
    events.result()`` for the new messages. Leaving the block early aborts the run cleanly.
    The stream function is checked on entering. ``deps`` as for :func:`run_agent_loop`."""
    prompt_list = _as_prompts(prompts)
    return _loop_cm(prompt_list, context, config, signal, stream_fn, on_transition, False, deps)


def agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    *,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    on_transition: Callable[[TransitionRecord], None] | None = None,
    deps: Any = None,
) -> Any:
    """The context-manager form of :func:`run_agent_loop_continue` (checks on entering)."""
    return _loop_cm([], context, config, signal, stream_fn, on_transition, True, deps)
