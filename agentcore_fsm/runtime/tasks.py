"""The run's tool tasks and their inbox, on the backend's own primitives.

The driver starts every tool execution (and every ``after_tool_call``) as a task of the run, and
those tasks report back through an inbox of machine inputs. anyio's task handles and memory
streams cost several times more per task and per message than the backends' own primitives,
and a turn may start many tools, so :class:`ToolTasks` uses the backend directly:

* on asyncio, a plain ``loop.create_task``, cancelled with ``Task.cancel`` and joined (shielded)
  by :meth:`ToolTasks.join` before the run returns: nothing is left running, and the run needs
  no task group at all;
* on trio, ``start_soon`` in the nursery of an anyio task group (so the task group waits for
  them as it waits for its own), each task inside its own ``trio.CancelScope``; the driver
  enters that task group only when the run starts its first task, and hands its nursery over
  with :meth:`ToolTasks.use_nursery` (a run without tools opens none: a task group costs about
  as much as a whole turn's transitions);
* the inbox is a list (it holds a few items at a time); a waiting driver is woken with a
  future (asyncio) or ``trio.lowlevel.reschedule`` (trio). Posting happens on the event loop's
  thread only (worker threads go through ``anyio.from_thread``). A wait on the inbox is
  cancellable as usual.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Callable, Coroutine
from types import AsyncGeneratorType, CoroutineType, NoneType
from typing import TYPE_CHECKING, Any

import anyio
from sniffio import thread_local

if TYPE_CHECKING:
    import asyncio

__all__ = ["ToolTasks", "awaitable", "cancelled_class", "on_trio", "scope_class"]

logger = logging.getLogger("agentcore_fsm")

TaskFn = Callable[[Any], Coroutine[Any, Any, Any]]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop; None on trio (anyio runs on asyncio or trio). asyncio is not
    imported for this: when nobody imported it, no asyncio loop runs. trio says so in sniffio's
    ``thread_local`` while it runs, read first: asyncio's ``get_running_loop`` raises on trio,
    and an exception costs more than the rest of the question."""
    module = sys.modules.get("asyncio")
    if module is None or thread_local.name == "trio":
        return None
    try:
        return module.get_running_loop()  # type: ignore[no-any-return]
    except RuntimeError:
        return None


def on_trio() -> bool:
    """True when the running event loop is trio's (anyio runs on asyncio or trio)."""
    return _running_loop() is None


def cancelled_class() -> type[BaseException]:
    """The running backend's cancellation exception (``anyio.get_cancelled_exc_class()``,
    without asking sniffio)."""
    if _running_loop() is not None:
        import asyncio

        return asyncio.CancelledError
    import trio

    return trio.Cancelled


def scope_class() -> Callable[[], Any]:
    """What makes a cancel scope on the running backend: trio's own on trio (anyio's wraps it,
    for a third more per scope), anyio's on asyncio."""
    if _running_loop() is None:
        import trio

        return trio.CancelScope
    return anyio.CancelScope


_COROUTINE = CoroutineType
_NEVER_AWAITABLE = frozenset({AsyncGeneratorType, list, tuple, dict, str, bool, int, NoneType})


def awaitable(value: Any) -> bool:
    """``inspect.isawaitable(value)``, answered at once for a coroutine and for the values
    that never are (an async generator, a list, ...), which skips its abstract-class check."""
    cls = value.__class__
    if cls is _COROUTINE:
        return True
    if cls in _NEVER_AWAITABLE:
        return False
    return inspect.isawaitable(value)


async def _in_scope(scope: Any, fn: TaskFn, arg: Any) -> None:
    with scope:
        await fn(arg)


def _log_raised(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:  # pragma: no cover
            logger.error("a tool task raised", exc_info=task.exception())


class ToolTasks:
    """The tasks of one run, by key (a tool call's index), and the inbox they post to.

    On trio, hand it the nursery to start tasks in (:meth:`use_nursery`) before the first."""

    __slots__ = ("_cancel", "_closed", "_items", "_loop", "_nursery", "_started", "_waiter")

    def __init__(self) -> None:
        self._cancel: dict[int, Any] = {}  # what cancels each task: a Task or a CancelScope
        self._items: list[Any] = []  # a short queue: a list costs a tenth of a deque
        self._waiter: Any = None  # the waiting driver: a Future (asyncio) or a trio Task
        self._closed = False
        self._started: list[asyncio.Task[None]] = []
        self._nursery: Any = None  # trio: the nursery tasks start in (see use_nursery)
        self._loop: asyncio.AbstractEventLoop | None = _running_loop()

    @property
    def needs_nursery(self) -> bool:
        """On trio, before :meth:`use_nursery`: no task can start yet (a run that starts none
        never pays for a task group)."""
        return self._loop is None and self._nursery is None

    def use_nursery(self) -> None:
        """On trio: start tasks from now on in the nursery of the task group that the calling
        task has just entered (the innermost nursery of that task)."""
        import trio

        self._nursery = trio.lowlevel.current_task().child_nurseries[-1]

    # --- tasks ------------------------------------------------------------------------------

    def spawn(self, key: int, fn: TaskFn, arg: Any) -> None:
        """Start ``fn(arg)``; :meth:`cancel_all` cancels it (a later task of the same key
        replaces the earlier one, which has ended by then)."""
        loop = self._loop
        if loop is not None:
            started = self._started
            if started and started[0].done():
                self._let_go()
            task = loop.create_task(fn(arg))
            started.append(task)
            self._cancel[key] = task
        else:
            import trio

            scope = trio.CancelScope()
            self._cancel[key] = scope
            self._nursery.start_soon(_in_scope, scope, fn, arg)

    def start(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Start ``fn()`` as a task of the run that :meth:`cancel_all` does not cancel (it must
        return by itself: the run waits for it, as for the others)."""
        loop = self._loop
        if loop is not None:
            self._started.append(loop.create_task(fn()))
        else:
            self._nursery.start_soon(fn)

    def cancel_all(self) -> None:
        """Cancel every task started so far, once: a task is never cancelled twice (on asyncio
        a second ``Task.cancel()`` would interrupt the shielded cleanup a cancelled tool is
        doing, e.g. telling a server that its request was cancelled)."""
        handles, self._cancel = self._cancel, {}
        for handle in handles.values():
            handle.cancel()

    def _let_go(self) -> None:
        # asyncio: forget the tasks that have ended (each keeps its coroutine's result), so
        # that a run keeps only its current batch's tasks, not every task it ever started
        started, cancel = self._started, self._cancel
        ended = [task for task in started if task.done()]
        _log_raised(ended)
        started[:] = [task for task in started if not task.done()]
        for key in [key for key, task in cancel.items() if task.done()]:
            del cancel[key]

    async def join(self) -> None:
        """Wait (shielded) until every asyncio task has ended; on trio the task group does."""
        started, self._started = self._started, []
        pending = [task for task in started if not task.done()]
        if pending:
            import asyncio

            with anyio.CancelScope(shield=True):
                await asyncio.wait(pending)
        _log_raised(started)

    # --- the inbox --------------------------------------------------------------------------

    def post(self, item: Any) -> None:
        """Add ``item`` to the inbox (on the event loop's thread); dropped once closed."""
        if self._closed:
            return
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if self._loop is not None:
                if not waiter.done():
                    waiter.set_result(None)
            else:
                import trio

                trio.lowlevel.reschedule(waiter)

    def get_nowait(self) -> tuple[bool, Any]:
        """``(True, item)`` for the oldest item, ``(False, None)`` when the inbox is empty."""
        if self._items:
            return True, self._items.pop(0)
        return False, None

    async def get(self) -> Any:
        """The oldest item, waiting for one if needed."""
        items = self._items
        while not items:
            loop = self._loop
            if loop is not None:
                future = loop.create_future()
                self._waiter = future
                try:
                    await future
                finally:
                    self._waiter = None
            else:
                import trio

                self._waiter = trio.lowlevel.current_task()

                def abort(raise_cancel: Any) -> Any:
                    self._waiter = None
                    return trio.lowlevel.Abort.SUCCEEDED

                await trio.lowlevel.wait_task_rescheduled(abort)
        return items.pop(0)

    def close(self) -> None:
        """No more items are taken (the run has ended)."""
        self._closed = True
        self._items.clear()
