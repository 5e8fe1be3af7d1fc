"""Writing a journaled run's record through its journal, off the driver's path.

The journaled machine keeps the run's entries in ``entries`` as it is fed (it calls nobody).
After each input the driver hands the new ones to a :class:`Recorder`, which keeps them in order
and writes them from a writer task of the run: the entries that accumulate while one write is in
progress go in the next write, all at once. The driver waits for the record only where it
matters (docs/survive.md#what-is-durable-when):

* before a tool that is not idempotent starts (:meth:`Recorder.durable`): every entry that led
  to it is written, so such a tool never runs twice, whatever happens to the process;
* at the run's end (:meth:`Recorder.finish`): everything is written.

A failed write stops the recorder: nothing more is written (the record stays a prefix of the
run's inputs, in order) and the driver is told once (``on_failure``), with a
:class:`JournalWriteError` whose text names the journal and the cause; it ends the run with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import anyio

from agentcore_fsm.core.boundary import exc_text
from agentcore_fsm.persist.run_journal import RunJournal

__all__ = ["JournalWriteError", "Journaled", "Recorder"]

logger = logging.getLogger("agentcore_fsm")


class Journaled(Protocol):
    """A machine that keeps its journal: its ``header`` and ``entries`` (appended in order);
    :class:`~agentcore_fsm.persist.journal.JournaledLoopMachine` is one."""

    header: dict[str, Any]
    entries: list[dict[str, Any]]


class JournalWriteError(Exception):
    """A run's journal could not be written (the store failed, or its lease was lost): the run
    ended with this error. The text names the journal and the cause; ``__cause__`` is the
    journal's own exception."""


class Recorder:
    """Writes the entries of ``machine`` through ``journal`` from entry number ``written`` on
    (what the journal already holds). Create it, start :meth:`write` as a task of the run,
    :meth:`take` after every input, :meth:`stop` the writer when the run is over, and
    :meth:`finish`."""

    __slots__ = (
        "_pending",
        "_progress",
        "_stopping",
        "_wake",
        "error",
        "journal",
        "machine",
        "on_failure",
        "taken",
        "written",
    )

    def __init__(self, journal: RunJournal, machine: Journaled, written: int) -> None:
        self.journal = journal
        self.machine = machine
        entries = machine.entries
        if written > len(entries):
            raise ValueError(
                f"the journal {journal} holds {written} entries, but the machine only "
                f"{len(entries)}: the machine is not the one of this record"
            )
        self.written = written  # entries the journal holds
        self.taken = written  # entries handed to the recorder
        self._pending: list[dict[str, Any]] = []
        self.error: JournalWriteError | None = None
        self.on_failure: Callable[[JournalWriteError], None] | None = None
        self._wake: anyio.Event | None = None
        self._progress: anyio.Event | None = None
        self._stopping = False
        self.take()

    def take(self) -> None:
        """Take the entries the machine made since the last call (to be written)."""
        entries = self.machine.entries
        count = len(entries)
        if count == self.taken:
            return
        if self.error is None:
            self._pending.extend(entries[self.taken : count])
            wake = self._wake
            if wake is not None:
                self._wake = None
                wake.set()
        self.taken = count

    @property
    def behind(self) -> bool:
        """Some entries taken are not written yet."""
        return self.written < self.taken

    async def durable(self) -> bool:
        """Wait until every entry taken so far is written; False when the journal failed."""
        target = self.taken
        while self.written < target and self.error is None:
            progress = self._progress
            if progress is None:
                progress = self._progress = anyio.Event()
            await progress.wait()
        return self.error is None

    def stop(self) -> None:
        """Let :meth:`write` return once it has written what it holds."""
        self._stopping = True
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set()

    async def write(self) -> None:
        """The writer task: write what is pending, in order, until :meth:`stop`."""
        while self.error is None:
            if self._pending:
                await self._write_pending()
            elif self._stopping:
                return
            else:
                wake = self._wake = anyio.Event()
                await wake.wait()

    async def finish(self) -> None:
        """Once the writer has stopped: write whatever is left (shield the call)."""
        self.take()
        while self._pending and self.error is None:
            await self._write_pending()

    async def _write_pending(self) -> None:
        batch, self._pending = self._pending, []
        with anyio.CancelScope(shield=True):  # a write is never cut half way
            try:
                await self.journal.append(self.written, batch)
            except Exception as exc:
                self._failed(exc)
                return
        self.written += len(batch)
        self._progressed()

    def _progressed(self) -> None:
        progress = self._progress
        if progress is not None:
            self._progress = None
            progress.set()

    def _failed(self, exc: Exception) -> None:
        error = JournalWriteError(
            f"the run's journal ({self.journal}) failed, so the run stopped: {exc_text(exc)}"
        )
        error.__cause__ = exc
        self.error = error
        self._pending = []
        self._progressed()
        on_failure = self.on_failure
        if on_failure is not None:
            on_failure(error)
        else:  # pragma: no cover - the driver always listens
            logger.error("%s", error)
