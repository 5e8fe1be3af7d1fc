"""The journal port: what a run's record is written through, and the journal of a run store.

A journaled run's record is its **header** (written once, when the run is created) and its
**entries** (one per input that changed the run, numbered from 0, appended in order, never
rewritten). The driver (:func:`agentcore_fsm.runtime.driver.run_machine`) writes the record
through a :class:`RunJournal`: it opens the journal before anything of the run happens, appends
the entries the journaled machine made (grouped: all it holds, in one append, where durability
matters), and closes it, with the last ones, when the run is over.

:class:`RunJournal` is a protocol: a durable engine (a run store, DBOS, Temporal, a dict in a
test) implements its three methods and subclasses nothing. :class:`StoreJournal` is the one for a
:class:`~agentcore_fsm.persist.store.RunStore`. docs/ports.md shows how to write another one.

What the driver guarantees a journal (docs/survive.md#what-is-durable-when):

* ``open`` first, once; then ``append`` calls one at a time (never two at once), each with the
  entries that follow the last ones given, in order; then ``close`` once, with the last entries
  and how the run ended (also after a failed ``append``: then with no entries and ``None``);
* before a tool that is not idempotent starts, or the run waits for an approval decision, every
  entry that led there has been appended (the ``append`` that held it returned); before a model
  call or a tool starts, so has every model answer and tool result before it; at the run's end,
  ``close`` gets the rest;
* a raise from ``open`` is raised out of the run before anything happened; a raise from
  ``append`` ends the run as an error (``agent_end`` with reason ``"error"``, whose text names
  the journal and the cause) and nothing more is appended; a raise from ``close`` is logged;
* ``append`` and ``close`` are never cut half way by a cancellation: each is awaited in a
  shielded cancel scope, unless the journal has an attribute ``writes_synchronously`` that is
  ``True``. A journal says so when its ``append`` and ``close`` never suspend (they await
  nothing that could yield to the event loop, so no cancellation can reach them), as a
  :class:`StoreJournal` that writes on the event loop does; the driver then spares the cancel
  scope (on trio it costs more than a SQLite commit's bookkeeping). The attribute is optional
  and not part of the protocol's checked members: a journal without it is shielded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio
import anyio.to_thread

from agentcore_fsm.core import checks
from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.messages import clip
from agentcore_fsm.persist.store import (
    RunFinishedError,
    RunStore,
    RunStoreError,
    StoredRun,
    default_owner,
)
from agentcore_fsm.persist.store_rules import retire_owner

__all__ = ["DEFAULT_CALL_TIMEOUT_S", "DEFAULT_LEASE_S", "RunJournal", "StoreJournal"]

DEFAULT_LEASE_S = 30.0
"""The lease (seconds) a run store journal takes on its run, renewed by its appends."""

DEFAULT_CALL_TIMEOUT_S = 60.0
"""How long a threaded store journal waits for one store call (``call_timeout_s``)."""

logger = logging.getLogger("agentcore_fsm")

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

    async def close(
        self, seq: int, entries: Sequence[dict[str, Any]], end_reason: str | None
    ) -> None:
        """The run is over in this process: append its last ``entries`` (perhaps none) from
        number ``seq`` on and end the record, in one step if the engine can. ``end_reason``:
        the run finished (``"completed"``, ``"aborted"``, ...); ``None``: it stopped unfinished
        (it waits for approvals, a failed append cut it, or the caller did) and the record
        stays resumable."""
        ...


class StoreJournal:
    """The journal of one run in a :class:`~agentcore_fsm.persist.store.RunStore`, held under a
    lease (``owner``, ``lease_s``; see the store's documentation).

    ``run_agent_loop(..., store=, run_id=)`` makes one for a new run; :meth:`take_over` makes
    one for an existing run that is resumed. Each ``append`` writes all its entries in one store
    transaction (the store's ``append_many``, which both stores have; one ``append`` per entry
    for a store without it, or whose subclass overrides ``append`` alone), and ``close`` writes
    the last ones and marks the run finished in one more. The driver groups the entries
    (docs/survive.md#what-is-durable-when), so a run makes a few writes, not one per input. They
    are made on the event loop (a write of a local SQLite file takes tens of microseconds);
    ``threaded=True`` makes every store call in a worker thread instead, so that the loop never
    waits on the store (a file shared by several processes, where a write may wait for another's
    lock, or a slow disk), at the cost of a thread hop per call.

    A threaded journal's store call that hangs (docs/survive.md#when-the-store-hangs): the
    journal waits for it at most ``call_timeout_s`` seconds (None: as long as it takes), and no
    longer once ``signal`` (the run's abort signal, when given) fires during the call; then it
    gives the call up and raises :class:`~agentcore_fsm.persist.store.RunStoreError` naming the
    store, the call and why (the run ends with it, as data). The call goes on in its thread and
    may still complete: the journal makes no other store call until it has (one raising that
    error instead; a ``close`` that only gives the lease back does nothing), and once it has,
    it gives the run's lease back (``release``). So a late write lands in order, before
    anything else this journal writes, and leaves what the store holds a valid prefix of the
    run, resumable once it is given back. A journal on the event loop (``threaded=False``)
    cannot give a call up: a store there bounds its own waits (``SqliteRunStore``'s
    ``busy_timeout_s``)."""

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        session_id: str | None = None,
        *,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
        existing: int | None = None,
        threaded: bool = False,
        call_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S,
        signal: AbortSignal | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.session_id = session_id
        self.owner = owner or default_owner()
        self.lease_s = lease_s
        self.existing = existing
        """None for a new run (``open`` creates it), or how many entries an existing run
        holds (its lease already taken by ``owner``)."""
        self.threaded = threaded
        self.call_timeout_s = checks.duration_or_none(
            "StoreJournal", "call_timeout_s", call_timeout_s
        )
        """Threaded: the longest wait for one store call (None: no bound)."""
        if signal is not None and not isinstance(signal, AbortSignal):
            raise TypeError(
                f"StoreJournal: signal must be an AbortSignal or None, not {type(signal).__name__}"
            )
        self.signal = signal
        """Threaded: a store call this signal interrupts by firing is given up at once."""
        self._hanging: _Call | None = None  # a call given up that has not answered yet
        self._many_of: type | None = None  # the store class _many_ok was found for
        self._many_ok = False

    @property
    def writes_synchronously(self) -> bool:
        """True when the store is called on the event loop (not ``threaded``): then ``append``
        and ``close`` never suspend, so the driver awaits them without a shielded cancel scope
        (see the module's documentation). False for a subclass that overrides either (it may
        await something)."""
        cls = type(self)
        return (
            not self.threaded
            and cls.append is StoreJournal.append
            and cls.close is StoreJournal.close
        )

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
        threaded: bool = False,
        call_timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S,
        signal: AbortSignal | None = None,
    ) -> tuple[StoreJournal, StoredRun]:
        """The journal of the existing, unfinished run ``run_id``, its lease taken, and the run
        as stored once the lease is held. Raises the store's errors:
        :class:`~agentcore_fsm.persist.store.UnknownRunError`,
        :class:`~agentcore_fsm.persist.store.RunFinishedError` (a finished run: nothing to
        resume), :class:`~agentcore_fsm.persist.store.RunOwnedError` (another live owner)."""
        journal = cls(
            store,
            run_id,
            lease_s=lease_s,
            threaded=threaded,
            call_timeout_s=call_timeout_s,
            signal=signal,
        )
        owner = journal.owner
        stored = await journal._call("load", store.load, run_id)
        if stored.status == "finished":
            raise RunFinishedError(
                f"run {run_id!r} has finished ({stored.end_reason}); there is nothing to resume"
            )
        await journal._call("acquire", _acquire, store, run_id, owner, lease_s)
        try:
            # read again under the lease: what another owner wrote meanwhile counts
            stored = await journal._call("load", store.load, run_id)
        except BaseException:
            if journal._hanging is None:  # else it is given back once the load answers
                await journal._call("release", store.release, run_id, owner)
            raise
        journal.session_id = stored.session_id
        journal.existing = len(stored.entries)
        return journal, stored

    def _create(self, header: dict[str, Any]) -> None:
        self._done(
            "create_run",
            self._writes().create_run(
                self.run_id,
                header,
                session_id=self.session_id,
                owner=self.owner,
                lease_s=self.lease_s,
            ),
        )

    def _writes(self) -> Any:
        """The store, typed loosely: its writes' answers are checked (see :meth:`_done`)."""
        return self.store

    def _done(self, method: str, answer: Any) -> None:
        """A store's write answers None; anything else is a broken store, whose write cannot
        be trusted to have happened: the run's journal fails (the run ends with it)."""
        if answer is not None:
            raise RunStoreError(
                f"{self}: the store's {method} answered {type(answer).__name__} "
                f"{clip(repr(answer), 60)}; a run store's write answers None, so the write "
                f"cannot be trusted"
            )

    def _many(self) -> Callable[..., None] | None:
        """The store's ``append_many`` to write with (see :func:`_append_many`); which method
        that is depends on the store's class alone, so it is looked up once."""
        cls = type(self.store)
        if self._many_of is not cls:
            self._many_of, self._many_ok = cls, _append_many(self.store) is not None
        if not self._many_ok:
            return None
        append_many: Callable[..., None] = getattr(self.store, "append_many")  # noqa: B009
        return append_many

    def _append(self, seq: int, entries: Sequence[dict[str, Any]]) -> None:
        run_id, owner, lease_s = self.run_id, self.owner, self.lease_s
        append_many = self._many()
        if append_many is not None:
            self._done(
                "append_many", append_many(run_id, seq, entries, owner=owner, lease_s=lease_s)
            )
            return
        for offset, entry in enumerate(entries):  # a store that appends one entry at a time
            self._done(
                "append",
                self._writes().append(run_id, seq + offset, entry, owner=owner, lease_s=lease_s),
            )

    def _close(self, seq: int, entries: Sequence[dict[str, Any]], end_reason: str | None) -> None:
        run_id, owner = self.run_id, self.owner
        append_many = self._many()
        if append_many is not None and end_reason is not None:
            # the last entries and the end in one transaction
            answer = append_many(
                run_id, seq, entries, owner=owner, lease_s=self.lease_s, end_reason=end_reason
            )
            self._done("append_many", answer)
            return
        if entries:
            self._append(seq, entries)
        if end_reason is not None:
            self._done("finish", self._writes().finish(run_id, end_reason, owner=owner))
        else:
            self._done("release", self._writes().release(run_id, owner))

    async def open(self, header: dict[str, Any]) -> int:
        """Create the run with ``header`` (a new run) and return 0, or return how many
        entries the existing run holds."""
        if self.existing is not None:
            return self.existing
        await self._call("create_run", self._create, header)
        self.existing = 0
        return 0

    async def append(self, seq: int, entries: Sequence[dict[str, Any]]) -> None:
        """Append ``entries`` from number ``seq`` on, in one store transaction."""
        await self._call("append_many", self._append, seq, entries)

    async def close(
        self, seq: int, entries: Sequence[dict[str, Any]], end_reason: str | None
    ) -> None:
        """Append the last ``entries`` and mark the run finished (``end_reason``), in one store
        transaction; or append them and give up the run's lease (``None``)."""
        if self._hanging is not None and not entries and end_reason is None:
            return  # the lease is given back once the hanging call answers
        try:
            await self._call("close", self._close, seq, entries, end_reason)
        except BaseException:
            # the run is over here, and the store may still name this journal as the lease's
            # holder: this process's other runners may take it over (resume it) once the store
            # works again, instead of waiting for this process to exit
            retire_owner(self.owner)
            raise

    async def _call(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``: on the event loop, or (threaded) in a worker thread, given up after
        ``call_timeout_s`` or when ``signal`` fires meanwhile (see the class)."""
        if not self.threaded:
            return fn(*args)
        hanging = self._hanging
        if hanging is not None:
            raise RunStoreError(
                f"{self}: the store has not answered the {hanging.what} this journal gave up "
                f"on; nothing more is written until it does"
            )
        call = _Call(what, fn, args)
        signal = self.signal
        watch = signal is not None and not signal.aborted  # an abort from now on cuts it
        with anyio.CancelScope() as scope:
            if self.call_timeout_s is not None:
                scope.deadline = anyio.current_time() + self.call_timeout_s
            remove = signal.add_callback(scope.cancel) if watch and signal else None
            try:
                return await anyio.to_thread.run_sync(call.run, abandon_on_cancel=True)
            finally:
                if remove is not None:
                    remove()
                if not call.answered:  # given up (or the caller was cancelled)
                    self._give_up(call)
        why = (
            "the run was aborted while it waited"
            if signal is not None and signal.aborted and watch
            else f"it did not answer within {self.call_timeout_s:g} s (call_timeout_s)"
        )
        raise RunStoreError(
            f"{self}: the store's {what} was given up: {why}; it may still complete, and "
            f"the run's lease is given back once it has"
        )

    def _give_up(self, call: _Call) -> None:
        self._hanging = call
        if not call.then(self._answered):
            self._answered()

    def _answered(self) -> None:
        """The call given up has answered (or raised): give the run's lease back."""
        self._hanging = None
        try:
            self.store.release(self.run_id, self.owner)
        except Exception:
            logger.exception("%s: the run's lease could not be given back", self)


class _Call:
    """One store call in a worker thread; :meth:`then` runs a function after it, in its
    thread (at once, in the caller's, if it is over)."""

    def __init__(self, what: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.what, self.fn, self.args = what, fn, args
        self.answered = False
        self._after: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def run(self) -> Any:
        try:
            return self.fn(*self.args)
        finally:
            with self._lock:
                self.answered = True
                after, self._after = self._after, []
            for fn in after:
                fn()

    def then(self, fn: Callable[[], None]) -> bool:
        """Run ``fn`` once the call is over; False (``fn`` not kept) when it is already."""
        with self._lock:
            if self.answered:
                return False
            self._after.append(fn)
            return True


def _append_many(store: RunStore) -> Callable[..., None] | None:
    """The store's ``append_many`` (several entries, and perhaps the end, in one transaction),
    unless it has none, or a subclass overrides ``append`` alone: then every entry goes through
    that ``append``, as the subclass expects."""
    cls = type(store)
    if getattr(cls, "append_many", None) is None:
        return None
    defines_many = next(c for c in cls.__mro__ if "append_many" in vars(c))
    defines_append = next((c for c in cls.__mro__ if "append" in vars(c)), defines_many)
    if defines_append is not defines_many and issubclass(defines_append, defines_many):
        return None
    append_many: Callable[..., None] = getattr(store, "append_many")  # noqa: B009
    return append_many


def _acquire(store: RunStore, run_id: str, owner: str, lease_s: float) -> None:
    store.acquire(run_id, owner, lease_s=lease_s)
