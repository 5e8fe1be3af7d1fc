"""The agent's sync facade (``prompt_sync``, ``continue_sync``) for scripts and notebooks: it
runs the async method on trio, and refuses inside a running event loop, which it detects without
importing asyncio or trio.
"""

from __future__ import annotations

import sys

__all__ = ["check_no_running_loop"]


def _running_loop() -> str | None:
    """The event loop running in this thread, if any ("asyncio" or "trio"). Neither library is
    imported for this: one that nobody imported runs no loop."""
    trio = sys.modules.get("trio")
    if trio is not None and trio.lowlevel.in_trio_run():
        return "trio"
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return None
    return "asyncio"


def check_no_running_loop(method: str, instead: str) -> None:
    """Raise RuntimeError when an event loop runs in this thread: ``Agent.METHOD()`` (a sync
    facade) cannot be used there, ``instead`` can."""
    running = _running_loop()
    if running is not None:
        raise RuntimeError(
            f"Agent.{method}() cannot be used while an event loop ({running}) is running in "
            f"this thread; use `{instead}` instead."
        )
