"""An agent's listeners: who is handed each event of a run, in what order, and what happens
when one of them raises or the run is cancelled meanwhile.

Listeners are called one after another in subscription order, and a run waits for each. The
same callable subscribed twice is two subscriptions; each ``unsubscribe`` removes its own and
may be called more than once; a listener added or removed while an event is being delivered
takes effect from the next event. If several listeners raise on one event, every listener still
gets the event and the first exception is raised (the others are logged on the
``agentcore_fsm`` logger); a ``BaseException`` (``KeyboardInterrupt``) is re-raised once the
others have the event.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import anyio

from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.runtime import driver

__all__ = ["AgentListener", "Listeners"]

logger = logging.getLogger("agentcore_fsm")

AgentListener: TypeAlias = Callable[[Any, AbortSignal], Any]
"""``listener(event, signal)``, a plain function or ``async def``; its return value is ignored."""


class _Subscription:
    """One ``subscribe`` call (compared by identity, so a listener may be subscribed twice)."""

    __slots__ = ("listener",)

    def __init__(self, listener: AgentListener) -> None:
        self.listener = listener


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


class Listeners:
    """The subscriptions of one agent, in subscription order."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: list[_Subscription] = []

    def add(self, listener: AgentListener) -> Callable[[], None]:
        """Subscribe ``listener``; return its ``unsubscribe()`` (safe to call more than once)."""
        entry = _Subscription(listener)
        self._entries.append(entry)

        def unsubscribe() -> None:
            try:
                self._entries.remove(entry)
            except ValueError:
                pass

        return unsubscribe

    async def deliver(self, event: Any, signal: AbortSignal) -> None:
        """Hand ``event`` to every listener (see the module's documentation)."""
        first: Exception | None = None
        interrupt: BaseException | None = None
        listeners = tuple(self._entries)
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
