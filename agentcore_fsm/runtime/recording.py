"""Writing a journaled run's record through its journal, grouped, where it matters.

The journaled machine keeps the run's entries in ``entries`` as it is fed (it calls nobody).
After each input the driver hands the new ones to a :class:`Recorder`, which keeps them, in
order, until the run needs them written; then one write takes every entry kept so far
(docs/survive.md#what-is-durable-when):

* before a tool that is not idempotent starts, and before the run waits for an approval
  decision: every entry that led there (so such a tool never runs twice, whatever happens to the
  process, and a request waiting for days is in the record);
* before anything else that may take long starts (a model call, a tool) while a model's answer
  or a tool's result is not written yet: on resume, a model is never asked again for an answer
  it gave, nor a tool that finished answered as interrupted;
* at the run's end (the journal's ``close`` gets the rest): everything.

So a run makes a few writes, not one per input, and between them nothing waits for the record.
A failed write stops the recorder: nothing more is written (the record stays a prefix of the
run's inputs, in order) and the driver is told once (``on_failure``), with a
:class:`JournalWriteError` whose text names the journal and the cause; it ends the run with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from agentcore_fsm.core.boundary import exc_text

if TYPE_CHECKING:  # the journal port; its module (and the stores) load with a journaled run
    from agentcore_fsm.persist.run_journal import RunJournal

__all__ = ["JournalWriteError", "Journaled", "Recorder"]

logger = logging.getLogger("agentcore_fsm")


class Journaled(Protocol):
    """A machine that keeps its journal: its ``header`` and ``entries`` (appended in order);
    :class:`~agentcore_fsm.persist.journal.JournaledLoopMachine` is one."""

    header: dict[str, Any]
    entries: list[dict[str, Any]]
    journal_error: Exception | None
    """Set when an input could not be made an entry (e.g. a custom message of no registered
    type): the machine stopped journaling there."""


class JournalWriteError(Exception):
    """A run's journal could not be written (the store failed, or its lease was lost): the run
    ended with this error. The text names the journal and the cause; ``__cause__`` is the
    journal's own exception."""


class Recorder:
    """Keeps the entries of ``machine`` from entry number ``written`` on (what the journal
    already holds) and writes them through ``journal`` when asked: :meth:`take` after every
    input, :meth:`durable` where the run needs them written, and hand the :meth:`rest` to the
    journal's ``close`` when the run is over."""

    __slots__ = (
        "_pending",
        "error",
        "journal",
        "machine",
        "on_failure",
        "outcome_pending",
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
        self.outcome_pending = False
        """A model's answer or a tool's result is among the entries not written yet (the
        driver says so)."""
        self.error: JournalWriteError | None = None
        self.on_failure: Callable[[JournalWriteError], None] | None = None
        self.take()

    def take(self) -> None:
        """Take the entries the machine made since the last call (to be written)."""
        machine = self.machine
        entries = machine.entries
        count = len(entries)
        if machine.journal_error is not None and self.error is None:
            self._failed(machine.journal_error)  # an input the record cannot hold: stop here
        if count != self.taken:
            if self.error is None:
                self._pending.extend(entries[self.taken : count])
            self.taken = count

    @property
    def behind(self) -> bool:
        """Some entries taken are not written yet."""
        return self.written < self.taken

    async def durable(self) -> bool:
        """Write every entry taken so far, in one write; False when the journal failed."""
        if self._pending and self.error is None:
            batch, self._pending = self._pending, []
            try:
                with anyio.CancelScope(shield=True):  # a write is never cut half way
                    await self.journal.append(self.written, batch)
            except Exception as exc:
                self._failed(exc)
            else:
                self.written += len(batch)
                self.outcome_pending = False
        return self.error is None

    def rest(self) -> tuple[int, list[dict[str, Any]]]:
        """When the run is over: the number of the first entry not written yet and the entries
        from there (none when the journal failed), for the journal's ``close``."""
        self.take()
        rest, self._pending = self._pending, []
        seq = self.written
        self.written += len(rest)
        return seq, rest

    def _failed(self, exc: Exception) -> None:
        error = JournalWriteError(
            f"the run's journal ({self.journal}) failed, so the run stopped: {exc_text(exc)}"
        )
        error.__cause__ = exc
        self.error = error
        self._pending = []
        on_failure = self.on_failure
        if on_failure is not None:
            on_failure(error)
        else:  # pragma: no cover - the driver always listens
            logger.error("%s", error)
