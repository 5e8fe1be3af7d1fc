"""Abort: a signal that a run watches, and the controller that fires it.

Make an :class:`AbortController`, pass ``controller.signal`` to the run (``signal=`` of
``run_agent_loop``; an ``Agent`` makes its own, fired by ``agent.abort()``), and call
``controller.abort()`` to end the run: the model call in flight is cancelled, running tools see
the signal, and the run ends with ``agent_end(reason="aborted")``.

The signal is a plain object: reading ``aborted`` never awaits, so the sans-IO machine may look
at it. ``await signal.wait()`` works on any anyio backend (trio, asyncio). ``abort()`` is
synchronous and must be called from the thread running the event loop (from another thread, use
``anyio.from_thread.run_sync(controller.abort)``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio

__all__ = ["AbortController", "AbortSignal", "Listeners"]

logger = logging.getLogger("agentcore_fsm")


class Listeners:
    """Who waits for one signal: the callbacks and the waiters' events. Shared by an
    :class:`AbortSignal` (which adds to it) and its :class:`AbortController` (which fires it)."""

    __slots__ = ("callbacks", "events")

    def __init__(self) -> None:
        self.callbacks: list[Callable[[], None]] = []
        self.events: list[anyio.Event] = []


class AbortSignal:
    """Tells whether a run was aborted, and why: ``aborted`` and ``reason`` (what was passed to
    :meth:`AbortController.abort`). Tools and stream functions receive it; check ``aborted``
    between steps, ``await wait()`` to block until it fires, or :meth:`add_callback` to be
    called when it does. Get one from an :class:`AbortController`, which fires it."""

    __slots__ = ("_listeners", "aborted", "reason")

    def __init__(self, listeners: Listeners | None = None) -> None:
        self.aborted = False
        self.reason: Any = None
        self._listeners = listeners if listeners is not None else Listeners()

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` when the signal fires (at once if it has). Returns a remover.

        Callbacks run in the order they were added. One that raises an ``Exception`` is logged
        on the ``agentcore_fsm`` logger and the others still run, so ``abort()`` never raises
        because of a callback; a ``BaseException`` (``KeyboardInterrupt``) is re-raised from
        ``abort()`` once every other callback has run."""
        if self.aborted:
            try:
                callback()
            except Exception:
                logger.exception("an abort callback raised; ignored")
            return lambda: None
        callbacks = self._listeners.callbacks
        callbacks.append(callback)

        def remove() -> None:
            self.remove_callback(callback)

        return remove

    def remove_callback(self, callback: Callable[[], None]) -> None:
        """Stop calling ``callback`` (added with :meth:`add_callback`; nothing happens if it
        is not there): what the remover :meth:`add_callback` returns does, without making one."""
        try:
            self._listeners.callbacks.remove(callback)
        except ValueError:
            pass

    async def wait(self) -> None:
        """Return once the signal has fired."""
        if self.aborted:
            return
        event = anyio.Event()
        self._listeners.events.append(event)
        await event.wait()

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self.aborted}, reason={self.reason!r})"


class AbortController:
    """Owns an :class:`AbortSignal`; ``abort()`` fires it (later calls do nothing)."""

    __slots__ = ("_listeners", "signal")

    def __init__(self) -> None:
        self._listeners = Listeners()
        self.signal = AbortSignal(self._listeners)

    def abort(self, reason: Any = None) -> None:
        """Fire the signal with ``reason``: its waiters wake and its callbacks run (see
        :meth:`AbortSignal.add_callback`). Later calls do nothing."""
        signal = self.signal
        if signal.aborted:
            return
        signal.aborted = True
        signal.reason = reason
        listeners = self._listeners
        callbacks, listeners.callbacks = listeners.callbacks, []
        events, listeners.events = listeners.events, []
        for event in events:
            event.set()
        interrupt: BaseException | None = None
        for callback in callbacks:
            # every callback runs (the loop's own one among them), whatever another one does
            try:
                callback()
            except Exception:
                logger.exception("an abort callback raised; ignored")
            except BaseException as exc:  # KeyboardInterrupt, SystemExit: after the others
                if interrupt is None:
                    interrupt = exc
        if interrupt is not None:
            raise interrupt
