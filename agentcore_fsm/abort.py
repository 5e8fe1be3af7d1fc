"""Abort: a signal that a run watches, and the controller that fires it (SPEC §4).

The signal is a plain object: reading ``aborted`` never awaits, so the sans-IO machine may look
at it. ``await signal.wait()`` works on any anyio backend (trio, asyncio). ``abort()`` is
synchronous and must be called from the thread running the event loop (from another thread, use
``anyio.from_thread.run_sync(controller.abort)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

__all__ = ["AbortController", "AbortSignal"]


class AbortSignal:
    __slots__ = ("_callbacks", "_events", "aborted", "reason")

    def __init__(self) -> None:
        self.aborted = False
        self.reason: Any = None
        self._callbacks: list[Callable[[], None]] = []
        self._events: list[anyio.Event] = []

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` when the signal fires (at once if it has). Returns a remover."""
        if self.aborted:
            callback()
            return lambda: None
        self._callbacks.append(callback)

        def remove() -> None:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

        return remove

    async def wait(self) -> None:
        """Return once the signal has fired."""
        if self.aborted:
            return
        event = anyio.Event()
        self._events.append(event)
        await event.wait()

    def _fire(self, reason: Any) -> None:
        if self.aborted:
            return
        self.aborted = True
        self.reason = reason
        callbacks, self._callbacks = self._callbacks, []
        events, self._events = self._events, []
        for event in events:
            event.set()
        for callback in callbacks:
            callback()

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self.aborted}, reason={self.reason!r})"


class AbortController:
    """Owns an :class:`AbortSignal`; ``abort()`` fires it (later calls do nothing)."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> None:
        self.signal._fire(reason)
