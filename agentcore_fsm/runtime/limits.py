"""The driver's side of usage limits (docs/policies.md#usage-limits): the deadline, and the usage
so far for the run's tools and hooks.

The machine checks every limit at its declared points, with the time each input carries; what it
cannot do is notice the deadline while it waits for something (a model that streams for
minutes, a tool that hangs). :func:`run_limited` runs a run whose ``config.limits`` sets
``seconds`` with a timer beside it: when the deadline passes, the timer fires the run's abort
(a signal linked to the caller's, so the caller's own signal is never fired), with a reason
naming the deadline. The machine sees that abort at or after its deadline (the declared guard
``deadline_passed``) and ends the run with ``reason="limit"``, its ``limit`` naming
``seconds``. The deadline is the run's start (its start input's time, journaled) plus
``seconds``: a run resumed after a crash keeps it.

A run with limits also lets its tools and hooks read its counters: ``current_run().run_usage``
(and a function tool's ``RunContext.run_usage``) is the machine's
:class:`~agentcore_fsm.core.limits.RunUsage` at that moment.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import anyio.lowlevel

from agentcore_fsm.core.abort import AbortController, AbortSignal
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.run_context import current_scope

__all__ = ["DEADLINE_REASON", "run_limited"]

T = TypeVar("T")

DEADLINE_REASON = "deadline reached: the run's UsageLimits.seconds ({seconds:g} s) passed"
"""The reason the run's abort signal carries when its deadline fired it."""


def _linked(outer: AbortSignal) -> tuple[AbortController, Callable[[], None]]:
    inner = AbortController()
    remove = outer.add_callback(lambda: inner.abort(outer.reason))
    return inner, remove


async def run_limited(
    machine: LoopMachine,
    signal: AbortSignal,
    control: AbortSignal | None,
    clock: Callable[[], int],
    run: Callable[[AbortSignal, AbortSignal | None], Awaitable[T]],
) -> T:
    """Run ``run(signal, control)`` for ``machine`` (whose ``config.limits`` is set): the run's
    scope follows its usage and, with a deadline, the signals ``run`` gets also fire when it
    passes. Whatever ``run`` raises is raised as it is (never inside an exception group)."""
    limits = machine.config.limits
    assert limits is not None
    scope = current_scope()
    if scope is not None:
        scope.follow_usage(lambda: machine.usage)
    seconds = limits.seconds
    if seconds is None:
        return await run(signal, control)
    inner, unlink = _linked(signal)
    inner_control, unlink_control = _linked(control) if control is not None else (None, None)
    reason = DEADLINE_REASON.format(seconds=seconds)
    fallback = clock() + int(seconds * 1000)

    async def timer() -> None:
        await anyio.lowlevel.checkpoint()
        while True:
            deadline = machine.deadline
            left = (deadline if deadline is not None else fallback) - clock()
            if left <= 0:
                break
            await anyio.sleep(left / 1000)
        inner.abort(reason)
        if inner_control is not None:
            inner_control.abort(reason)

    result: list[T] = []
    error: list[BaseException] = []
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(timer)
            try:
                result.append(
                    await run(
                        inner.signal, inner_control.signal if inner_control is not None else None
                    )
                )
            except BaseException as exc:  # re-raised below, bare
                error.append(exc)
            finally:
                group.cancel_scope.cancel()
    finally:
        unlink()
        if unlink_control is not None:
            unlink_control()
    if error:
        raise error[0]
    return result[0]
