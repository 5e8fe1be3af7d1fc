"""The tasks of a run: tool executions, ``after_tool_call`` hooks and approval decisions.

The driver (:class:`~agentcore_fsm.runtime.engine.Driver`) starts each as a task of the run
(:class:`~agentcore_fsm.runtime.tasks.ToolTasks`); each task posts what it came to, as the
machine's input, to the run's inbox and returns it. A task that starts only once the run is
ending calls no user code. When the run has observers, a tool's execution runs inside their
``tool_execution`` context managers and every task's end is reported to their
``effect_performed`` (a run without observers takes none of that path).
"""

from __future__ import annotations

import inspect
import math
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import anyio

from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.approval import NO_APPROVER_TEXT, TIMEOUT_TEXT
from agentcore_fsm.core.boundary import exc_text
from agentcore_fsm.core.config import AgentLoopConfig
from agentcore_fsm.core.messages import now_ms
from agentcore_fsm.core.protocol import (
    ApprovalDecided,
    ApprovalDeferred,
    AwaitApproval,
    BackOff,
    CallHook,
    ExecuteTool,
    HookFailed,
    HookReturned,
    Input,
    ToolFinished,
    ToolUpdated,
)
from agentcore_fsm.core.tools import AgentToolResult
from agentcore_fsm.runtime.approvals import decision
from agentcore_fsm.runtime.observer import RunWatch
from agentcore_fsm.runtime.tasks import awaitable
from agentcore_fsm.runtime.tool_policies import Host, ToolSlots, back_off, run_policed

__all__ = ["RunHost", "TaskFn", "TaskRunner", "call"]

TaskFn = Callable[[Any], Coroutine[Any, Any, Input | None]]


class RunHost(Protocol):
    """What a run's tasks need of the driver."""

    def stopping(self) -> bool:
        """The run is ending: a task that starts now calls no user code."""
        ...

    def interrupted(self, exc: BaseException) -> None:
        """User code raised a BaseException that is not cancellation (stop like an abort)."""
        ...

    def post(self, item: Input | None) -> None:
        """Put ``item`` in the run's inbox (None only wakes the driver)."""
        ...


async def call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, awaited when it returns an awaitable."""
    result = fn(*args)
    if awaitable(result):
        result = await result
    return result


def _boxed(fn: Callable[..., Any], *args: Any) -> tuple[Any]:
    return (fn(*args),)


class TaskRunner:
    """The task functions of one run: :attr:`tool`, :attr:`after_hook` and :attr:`approval`
    (each takes its effect). Set :attr:`cancelled` once the run's event loop runs."""

    __slots__ = (
        "after_hook",
        "approval",
        "awaiting",
        "cancelled",
        "config",
        "host",
        "loop_thread",
        "now",
        "policed",
        "signal",
        "slots",
        "suspendable",
        "tool",
        "watch",
    )

    def __init__(
        self,
        host: RunHost,
        config: AgentLoopConfig,
        signal: AbortSignal,
        watch: RunWatch | None,
        suspendable: bool,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.host = host
        self.now = clock  # stamps the inputs the tasks post (ms)
        self.config = config
        self.signal = signal
        self.watch = watch
        self.suspendable = suspendable
        self.cancelled: type[BaseException] = BaseException
        self.loop_thread = threading.get_ident()
        # an observed run's tasks, wrapped; None: the plain method (run_tool, run_after_hook,
        # await_approval), bound when a task starts rather than kept by every run
        self.tool: TaskFn | None = None
        self.after_hook: TaskFn | None = None
        self.approval: TaskFn | None = None
        self.policed = True  # False: a runner that ignores the tools' settings (see bare)
        self.slots: ToolSlots | None = None  # the run's concurrency slots (tool_policies.py)
        if watch is not None:
            self.tool = self.observed_tool
            self.after_hook = self._observed(self.run_after_hook)
            self.approval = self._observed(self.await_approval)

    # --- observed (a run with observers) ---

    async def observed_tool(self, effect: ExecuteTool) -> Input | None:
        """:meth:`run_tool` inside the observers' ``tool_execution`` context managers."""
        if self.host.stopping():
            return await self.run_tool(effect)  # it starts nothing: no execution to observe
        watch = self.watch
        assert watch is not None
        entered = watch.enter_tool(effect)
        started = time.perf_counter()
        outcome: Input | None = None
        error: BaseException | None = None
        try:
            outcome = await self.run_tool(effect)
        except BaseException as exc:
            error = exc
            raise
        finally:
            watch.exit(entered, error)
            watch.effect_performed(effect, time.perf_counter() - started, outcome)
        return outcome

    def _observed(self, fn: TaskFn) -> TaskFn:
        async def observed(effect: Any) -> Input | None:
            if self.host.stopping():
                return await fn(effect)  # it starts nothing (and keeps its books): not observed
            watch = self.watch
            assert watch is not None
            started = time.perf_counter()
            outcome: Input | None = None
            try:
                outcome = await fn(effect)
            finally:
                watch.effect_performed(effect, time.perf_counter() - started, outcome)
            return outcome

        return observed

    # --- the tasks ---

    async def run_tool(self, effect: ExecuteTool) -> Input | None:
        """Run the tool; post its outcome (and return it; None when nothing was posted). A
        tool with a timeout, retry or concurrency setting, or a run with a tool policy, runs
        under them (runtime/tool_policies.py)."""
        tool = effect.tool
        if self.policed and not (
            tool.timeout_s is None
            and tool.retry is None
            and tool.max_concurrency is None
            and self.config.tool_policy is None
        ):
            return await run_policed(self, effect)
        index = effect.index
        settled = False
        loop_thread = self.loop_thread
        host = self.host
        post = host.post
        now = self.now

        def on_update(partial: AgentToolResult) -> None:
            if settled:
                return
            if not isinstance(partial, AgentToolResult):
                # a wrong value raises here, in the tool that passed it (not in the run)
                partial = AgentToolResult.model_validate(partial)
            if threading.get_ident() == loop_thread:
                post(ToolUpdated(index, partial, timestamp=now()))
            else:
                import anyio.from_thread  # a tool in a worker thread: loaded with the first

                try:
                    anyio.from_thread.run_sync(post, ToolUpdated(index, partial, timestamp=now()))
                except RuntimeError:
                    pass  # the worker was abandoned (abort): updates are ignored

        execute: Any = effect.tool.execute
        if host.stopping():
            return None  # nothing starts once the run is ending (the task may start after)
        outcome: Input | None = None
        try:
            if inspect.iscoroutinefunction(execute) or inspect.iscoroutinefunction(
                getattr(execute, "__call__", None)  # noqa: B004
            ):
                result = await execute(effect.tool_call.id, effect.args, self.signal, on_update)
            else:
                import anyio.from_thread  # loaded with the first plain-function tool (its
                import anyio.to_thread  # on_update comes from the worker thread)

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
            outcome = ToolFinished(index, error=exc, timestamp=now())
            post(outcome)
        except self.cancelled:
            settled = True
            raise
        except BaseException as exc:
            settled = True
            host.interrupted(exc)
        else:
            settled = True
            outcome = ToolFinished(index, result, timestamp=now())
            post(outcome)
        finally:
            settled = True
        return outcome

    def bare(self, host: Host) -> TaskRunner:
        """A runner of this run posting to ``host`` that runs a tool without looking at its
        settings (what :func:`~agentcore_fsm.runtime.tool_policies.run_policed` runs)."""
        runner = TaskRunner(host, self.config, self.signal, None, self.suspendable, self.now)
        runner.cancelled = self.cancelled
        runner.loop_thread = self.loop_thread
        runner.policed = False
        return runner

    async def back_off(self, effect: BackOff) -> Input | None:
        """Wait between two attempts of a call (its tool's retry policy); post ``RetryDue``."""
        return await back_off(self, effect)

    async def run_after_hook(self, effect: CallHook) -> Input | None:
        """Call ``after_tool_call``; post what it returned or raised (and return it)."""
        host = self.host
        if host.stopping():
            return None  # nothing starts once the run is ending (the task may start after)
        outcome: Input | None = None
        try:
            value = await call(self.config.after_tool_call, effect.ctx, self.signal)  # type: ignore[arg-type]
        except Exception as exc:
            outcome = HookFailed("after_tool_call", exc, effect.index, timestamp=self.now())
        except self.cancelled:
            raise
        except BaseException as exc:
            host.interrupted(exc)
        else:
            outcome = HookReturned("after_tool_call", value, effect.index, timestamp=self.now())
        if outcome is not None:
            host.post(outcome)
        return outcome

    async def await_approval(self, effect: AwaitApproval) -> Input | None:
        """Get the decision about one call waiting for approval; post it (or, for a journaled
        run, that this process makes none) to the inbox; return the decision posted."""
        index, request = effect.index, effect.request
        host = self.host
        outcome: ApprovalDecided | None = None
        try:
            if host.stopping():
                return None  # nothing starts once the run is ending: the abort answers the call
            decide = self.config.decide_approval
            if decide is None:
                outcome = ApprovalDecided(
                    index, False, NO_APPROVER_TEXT, "no approver", timestamp=self.now()
                )
                return outcome
            timeout = self.config.approval_timeout_s
            value: Any = None
            with anyio.move_on_after(math.inf if timeout is None else timeout) as scope:
                try:
                    value = await call(decide, request, self.signal)
                except Exception as exc:
                    reason = f"decide_approval raised: {exc_text(exc)}"
                    outcome = ApprovalDecided(index, False, reason, "error", timestamp=self.now())
                    return outcome
            if scope.cancelled_caught:
                reason = TIMEOUT_TEXT.format(seconds=timeout)
                outcome = ApprovalDecided(index, False, reason, "timeout", timestamp=self.now())
                return outcome
            if value is None and self.suspendable:
                host.post(ApprovalDeferred(index, timestamp=self.now()))
                return None
            outcome = decision(index, value, self.suspendable, self.now())
            return outcome
        except self.cancelled:
            raise
        except BaseException as exc:
            host.interrupted(exc)
            return None
        finally:
            if outcome is not None:
                host.post(outcome)
            host.post(None)  # wakes the driver
