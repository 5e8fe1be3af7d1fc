"""The driver's side of the per-tool settings and the run's tool policy (docs/policies-tools.md).

What the machine cannot do, having no clock and no randomness, is done here and fed back as
stamped inputs:

* **timeout** (``AgentTool.timeout_s``): the execution runs in a cancel scope with that
  deadline; when it fires, the execution is cancelled (a tool in a worker thread is abandoned:
  its late result and updates are dropped) and ``ToolTimedOut`` is fed;
* **retry** (``AgentTool.retry``): an execution that raised a failure the policy retries, of a
  tool the policy may retry, is fed as ``ToolAttemptFailed`` instead of ``ToolFinished``; the
  machine counts the attempts and, when one remains, asks for a :class:`BackOff`, which
  :func:`back_off` performs: it sleeps the policy's delay (jitter drawn here) and feeds
  ``RetryDue``;
* **concurrency** (``AgentTool.max_concurrency``, ``ToolPolicy.max_parallel_calls``): an
  execution first takes a slot of its tool, then one of the run (in that order, so that a call
  waiting for its tool holds no slot of the run); the timeout counts from when it has both.

A tool with none of these settings, in a run without a tool policy, never comes here: the
task runner checks the four settings against None and runs it as before.

``sleep`` and ``draw`` are module attributes: a test may replace them (e.g. a sleep that
records the delays and returns at once).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import anyio

from agentcore_fsm.core.config import AgentLoopConfig
from agentcore_fsm.core.protocol import (
    BackOff,
    ExecuteTool,
    Input,
    RetryDue,
    ToolAttemptFailed,
    ToolFinished,
    ToolTimedOut,
)
from agentcore_fsm.core.tools import AgentTool

__all__ = ["PolicyRunner", "ToolSlots", "back_off", "draw", "run_policed", "sleep"]

sleep: Callable[[float], Coroutine[Any, Any, None]] = anyio.sleep
"""How :func:`back_off` waits (seconds)."""

draw: Callable[[], float] = random.random
"""The jitter's random draw, in [0, 1)."""


class Host(Protocol):
    """What a policed execution needs of the driver (a ``RunHost``)."""

    def stopping(self) -> bool: ...

    def interrupted(self, exc: BaseException) -> None: ...

    def post(self, item: Input | None) -> None: ...


class PolicyRunner(Protocol):
    """The task runner of a run, as this module sees it
    (:class:`~agentcore_fsm.runtime.task_runs.TaskRunner`)."""

    host: Host
    config: AgentLoopConfig
    now: Callable[[], int]
    slots: ToolSlots | None

    def bare(self, host: Host) -> PolicyRunner:
        """A runner posting to ``host`` that runs a tool without looking at its settings."""
        ...

    async def run_tool(self, effect: ExecuteTool) -> Input | None: ...


class ToolSlots:
    """The concurrency slots of one run: one semaphore per tool name with a
    ``max_concurrency``, one for the run's ``max_parallel_calls`` (made on first use, in the
    run's event loop)."""

    __slots__ = ("run", "tools")

    def __init__(self, cap: int | None) -> None:
        self.run = anyio.Semaphore(cap) if cap is not None else None
        self.tools: dict[tuple[str, int], anyio.Semaphore] = {}

    def of_tool(self, tool: AgentTool) -> anyio.Semaphore | None:
        limit = tool.max_concurrency
        if limit is None:
            return None
        key = (tool.name, limit)
        semaphore = self.tools.get(key)
        if semaphore is None:
            semaphore = self.tools[key] = anyio.Semaphore(limit)
        return semaphore


class _Intercept:
    """The host a policed execution posts through: a failure the tool's retry policy retries
    becomes ``ToolAttemptFailed``; remembers whether the execution posted its outcome."""

    __slots__ = ("host", "outcome", "tool")

    def __init__(self, host: Host, tool: AgentTool) -> None:
        self.host = host
        self.tool = tool
        self.outcome: Input | None = None

    def stopping(self) -> bool:
        return self.host.stopping()

    def interrupted(self, exc: BaseException) -> None:
        self.host.interrupted(exc)

    def post(self, item: Input | None) -> None:
        if isinstance(item, ToolFinished) and item.error is not None:
            policy = self.tool.retry
            if (
                policy is not None
                and policy.applies_to(self.tool.idempotent)
                and policy.retries(item.error)
                and not self.host.stopping()
            ):
                item = ToolAttemptFailed(item.index, item.error, timestamp=item.timestamp)
        if item is not None and not isinstance(item, ToolAttemptFailed | ToolFinished):
            self.host.post(item)  # a progress update
            return
        self.outcome = item
        self.host.post(item)


async def run_policed(runner: PolicyRunner, effect: ExecuteTool) -> Input | None:
    """Run ``effect``'s tool under its settings and the run's cap; post (and return) its
    outcome: ``ToolFinished``, ``ToolAttemptFailed`` or ``ToolTimedOut`` (None when nothing was
    posted: the run is ending)."""
    tool = effect.tool
    slots = runner.slots
    if slots is None:
        policy = runner.config.tool_policy
        slots = runner.slots = ToolSlots(policy.max_parallel_calls if policy else None)
    tool_slot = slots.of_tool(tool)
    run_slot = slots.run
    if tool_slot is not None:
        await tool_slot.acquire()
    try:
        if run_slot is not None:
            await run_slot.acquire()
        try:
            return await _execute(runner, effect, tool)
        finally:
            if run_slot is not None:
                run_slot.release()
    finally:
        if tool_slot is not None:
            tool_slot.release()


async def _execute(runner: PolicyRunner, effect: ExecuteTool, tool: AgentTool) -> Input | None:
    host = runner.host
    intercept = _Intercept(host, tool)
    bare = runner.bare(intercept)
    timeout = tool.timeout_s
    if timeout is None:
        await bare.run_tool(effect)
        return intercept.outcome
    with anyio.move_on_after(timeout) as scope:
        await bare.run_tool(effect)
    if scope.cancelled_caught and intercept.outcome is None and not host.stopping():
        item = ToolTimedOut(effect.index, timestamp=runner.now())
        host.post(item)
        return item
    return intercept.outcome


async def back_off(runner: PolicyRunner, effect: BackOff) -> Input | None:
    """Wait the delay the tool's retry policy gives after attempt ``effect.attempt``; post
    (and return) ``RetryDue``. Nothing is posted once the run is ending (the abort answers the
    call)."""
    host = runner.host
    policy = effect.tool.retry
    if host.stopping() or policy is None:
        return None
    await sleep(policy.delay_s(effect.attempt, draw()))
    if host.stopping():
        return None
    item = RetryDue(effect.index, timestamp=runner.now())
    host.post(item)
    return item
