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
    """Keeps track of the entries of ``machine`` from entry number ``written`` on (what the
    journal already holds) and writes them through ``journal`` when asked: :meth:`take` after
    every input, :meth:`durable` where the run needs them written, and hand the :meth:`rest` to
    the journal's ``close`` when the run is over.

    The entries not written yet are the machine's, from ``written`` on: the machine only
    appends to its list, and stops appending once an input could not be made an entry, so the
    recorder copies nothing until it writes. Each write is made in a shielded cancel scope (a
    write is never cut half way), unless the journal says its writes cannot be cut
    (``writes_synchronously``, see :class:`~agentcore_fsm.persist.run_journal.RunJournal`):
    a cancel scope there would only cost time."""

    __slots__ = (
        "error",
        "journal",
        "machine",
        "on_failure",
        "outcome_pending",
        "shield",
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
        self.outcome_pending = False
        """A model's answer or a tool's result is among the entries not written yet (the
        driver says so)."""
        self.error: JournalWriteError | None = None
        self.on_failure: Callable[[JournalWriteError], None] | None = None
        self.shield = getattr(journal, "writes_synchronously", False) is not True
        """Whether each write is made in a shielded cancel scope."""
        self.take()

    def take(self) -> None:
        """After an input: an input the record cannot hold stops the recorder (nothing is
        written from there on) and the driver is told."""
        error = self.machine.journal_error
        if error is not None and self.error is None:
            self._failed(error)

    @property
    def behind(self) -> bool:
        """Some entries are not written yet (and the journal has not failed)."""
        return self.error is None and self.written < len(self.machine.entries)

    async def durable(self) -> bool:
        """Write every entry so far, in one write; False when the journal failed."""
        if self.error is not None:
            return False
        entries = self.machine.entries
        if self.written < len(entries):
            batch = entries[self.written :]
            try:
                if self.shield:
                    with anyio.CancelScope(shield=True):  # a write is never cut half way
                        await self.journal.append(self.written, batch)
                else:
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
        seq = self.written
        rest = [] if self.error is not None else self.machine.entries[seq:]
        self.written += len(rest)
        return seq, rest

    def _failed(self, exc: Exception) -> None:
        error = JournalWriteError(
            f"the run's journal ({self.journal}) failed, so the run stopped: {exc_text(exc)}"
        )
        error.__cause__ = exc
        self.error = error
        on_failure = self.on_failure
        if on_failure is not None:
            on_failure(error)
        else:  # pragma: no cover - the driver always listens
            logger.error("%s", error)
