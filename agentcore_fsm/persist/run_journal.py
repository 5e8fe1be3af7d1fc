"""The journal port: what a run's record is written through, and the journal of a run store.

A journaled run's record is its **header** (written once, when the run is created) and its
**entries** (one per input that changed the run, numbered from 0, appended in order, never
rewritten). The driver (:func:`agentcore_fsm.runtime.driver.run_machine`) writes the record
through a :class:`RunJournal`: it opens the journal before anything of the run happens, appends
the entries the journaled machine made (grouped, from a writer task, so the event loop never
waits for a write except where durability matters), and closes it when the run is over.

:class:`RunJournal` is a protocol: a durable engine (a run store, DBOS, Temporal, a dict in a
test) implements its three methods and subclasses nothing. :class:`StoreJournal` is the one for a
:class:`~agentcore_fsm.persist.store.RunStore`. docs/ports.md shows how to write another one.

What the driver guarantees a journal (docs/survive.md#what-is-durable-when):

* ``open`` first, once; then ``append`` calls one at a time (never two at once), each with the
  entries that follow the last ones given, in order; then ``close`` once (also after a failed
  ``append``: then with ``None``);
* before a tool that is not idempotent starts, every entry that led to it has been appended
  (the ``append`` that held it returned); at the run's end every entry has;
* a raise from ``open`` is raised out of the run before anything happened; a raise from
  ``append`` ends the run as an error (``agent_end`` with reason ``"error"``, whose text names
  the journal and the cause) and nothing more is appended; a raise from ``close`` is logged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio.to_thread

from agentcore_fsm.persist.store import (
    MemoryRunStore,
    RunFinishedError,
    RunStore,
    StoredRun,
    default_owner,
)

__all__ = ["DEFAULT_LEASE_S", "RunJournal", "StoreJournal"]

DEFAULT_LEASE_S = 30.0
"""The lease (seconds) a run store journal takes on its run, renewed by every append."""

T = TypeVar("T")


@runtime_checkable
class RunJournal(Protocol):
    """Where a journaled run's record is written (see the module's documentation for the
    order of the calls and what the driver guarantees)."""

    async def open(self, header: dict[str, Any]) -> int:
        """Make the record ready before the run starts: a new run is created with ``header``
        (a JSON object). Return how many entries the record already holds: 0 for a new run,
        more for a run that is continued (resumed), whose record exists; the driver appends
        from that number on."""
        ...

    async def append(self, seq: int, entries: Sequence[dict[str, Any]]) -> None:
        """Append ``entries`` (JSON objects) as entries number ``seq``, ``seq + 1``, ...; once
        this returns they are durable. Raise when they cannot be written: the run ends with
        that error, and nothing more is appended."""
        ...

    async def close(self, end_reason: str | None) -> None:
        """The run is over in this process: it finished with ``end_reason`` (``"completed"``,
        ``"aborted"``, ...), or it stopped unfinished (``None``: it waits for approvals, was
        cut by a failed append, or by the caller): then the record stays resumable."""
        ...


class StoreJournal:
    """The journal of one run in a :class:`~agentcore_fsm.persist.store.RunStore`, held under a
    lease (``owner``, ``lease_s``; see the store's documentation).

    ``run_agent_loop(..., store=, run_id=)`` makes one for a new run; :meth:`take_over` makes
    one for an existing run that is resumed. The store's calls run in a worker thread
    (``threaded=True``, the default for every store but a
    :class:`~agentcore_fsm.persist.store.MemoryRunStore`, whose calls never block), so that the
    event loop never waits on a file or a database; each ``append`` is one thread hop for all the
    entries it is given (each entry one store transaction, in order)."""

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        session_id: str | None = None,
        *,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
        existing: int | None = None,
        threaded: bool | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.session_id = session_id
        self.owner = owner or default_owner()
        self.lease_s = lease_s
        self.existing = existing
        """None for a new run (``open`` creates it), or how many entries an existing run
        holds (its lease already taken by ``owner``)."""
        self.threaded = not isinstance(store, MemoryRunStore) if threaded is None else threaded

    def __str__(self) -> str:
        return f"run {self.run_id!r} in {self.store!r}"

    def __repr__(self) -> str:
        return f"StoreJournal({self})"

    @classmethod
    async def take_over(
        cls,
        store: RunStore,
        run_id: str,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        threaded: bool | None = None,
    ) -> tuple[StoreJournal, StoredRun]:
        """The journal of the existing, unfinished run ``run_id``, its lease taken, and the run
        as stored once the lease is held. Raises the store's errors:
        :class:`~agentcore_fsm.persist.store.UnknownRunError`,
        :class:`~agentcore_fsm.persist.store.RunFinishedError` (a finished run: nothing to
        resume), :class:`~agentcore_fsm.persist.store.RunOwnedError` (another live owner)."""
        journal = cls(store, run_id, lease_s=lease_s, threaded=threaded)
        threaded, owner = journal.threaded, journal.owner
        stored = await _call(threaded, store.load, run_id)
        if stored.status == "finished":
            raise RunFinishedError(
                f"run {run_id!r} has finished ({stored.end_reason}); there is nothing to resume"
            )
        await _call(threaded, _acquire, store, run_id, owner, lease_s)
        try:
            # read again under the lease: what another owner wrote meanwhile counts
            stored = await _call(threaded, store.load, run_id)
        except BaseException:
            await _call(threaded, store.release, run_id, owner)
            raise
        journal.session_id = stored.session_id
        journal.existing = len(stored.entries)
        return journal, stored

    def _create(self, header: dict[str, Any]) -> None:
        self.store.create_run(
            self.run_id,
            header,
            session_id=self.session_id,
            owner=self.owner,
            lease_s=self.lease_s,
        )

    def _append(self, seq: int, entries: Sequence[dict[str, Any]]) -> None:
        store, run_id, owner, lease_s = self.store, self.run_id, self.owner, self.lease_s
        for offset, entry in enumerate(entries):
            store.append(run_id, seq + offset, entry, owner=owner, lease_s=lease_s)

    def _close(self, end_reason: str | None) -> None:
        if end_reason is not None:
            self.store.finish(self.run_id, end_reason, owner=self.owner)
        else:
            self.store.release(self.run_id, self.owner)

    async def open(self, header: dict[str, Any]) -> int:
        """Create the run with ``header`` (a new run) and return 0, or return how many
        entries the existing run holds."""
        if self.existing is not None:
            return self.existing
        await _call(self.threaded, self._create, header)
        self.existing = 0
        return 0

    async def append(self, seq: int, entries: Sequence[dict[str, Any]]) -> None:
        """Append ``entries`` from number ``seq`` on, one store transaction each, in one call
        of the worker thread."""
        await _call(self.threaded, self._append, seq, entries)

    async def close(self, end_reason: str | None) -> None:
        """Mark the run finished (``end_reason``), or give up its lease (``None``)."""
        await _call(self.threaded, self._close, end_reason)


async def _call(threaded: bool, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, in a worker thread when ``threaded``."""
    if threaded:
        return await anyio.to_thread.run_sync(fn, *args)
    return fn(*args)


def _acquire(store: RunStore, run_id: str, owner: str, lease_s: float) -> None:
    store.acquire(run_id, owner, lease_s=lease_s)
