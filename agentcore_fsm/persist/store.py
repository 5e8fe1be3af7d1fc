"""Run stores: where journaled runs are kept, so that a run can be continued after its process
died (docs/reference.md#runs-that-survive).

A store keeps **runs** by id. A run is its **header** (a JSON object written once, when the run
is created), its **entries** (JSON objects appended one at a time, numbered from 0, never
rewritten or removed), an optional **session id** grouping runs, a **status** (``"running"``,
then ``"finished"`` with an end reason) and a **lease**: which process runs it, and until when.

Leases. A run is run by one process at a time: its owner, named by :func:`default_owner` as
``"HOST:PID:NONCE"``. Creating a run leases it to its creator; every :meth:`~RunStore.append`
renews the lease (``lease_s`` seconds from now) in the same transaction as the entry
(:class:`SqliteRunStore` leaves a lease that this would move by at most
:data:`~agentcore_fsm.persist.sqlite_store.RENEW_SLACK_S`, so that quick appends are one
statement each).
:meth:`~RunStore.acquire` takes a run's lease when nobody holds it, when the caller already
does, when the holder is a process of this host that is no longer alive (at once, whatever the
lease time says), or when the holder is on another host (or is not a ``HOST:PID:NONCE`` owner)
and its lease has expired. A live process of this host keeps its run even after its lease time
passed: it may be inside a long tool call. Otherwise :class:`RunOwnedError`. An owner whose
lease was taken over gets :class:`LeaseLostError` on its next append or finish, and nothing is
written. Appends only check that the caller is still the owner, not the lease time: a lease
only matters to someone who wants to take the run over. "This host" is ``socket.gethostname()``
and a process is alive when ``os.kill(pid, 0)`` finds it: processes sharing a store file under
one host name must share a pid namespace (on Windows a process of this host always counts as
alive).

Two stores with the same behaviour: :class:`MemoryRunStore` (dicts, for tests and short-lived
processes) and :class:`SqliteRunStore` (one SQLite file, standard library only, shareable by
several processes). Both keep JSON text, so what a caller does to its dicts afterwards never
changes the store, and every load returns fresh copies. The text is written and read by
:mod:`agentcore_fsm.persist.json_text`: any ``str`` comes back equal, code point for code point
(a lone surrogate, and the two surrogates of a pair kept as two code points, included).

Sessions have one writer at a time. Before a run of a session starts, its writer takes the
session's lease (:meth:`~RunStore.acquire_session`), with the same rules as a run's lease: free,
already the caller's, held by a dead process of this host, or by another host whose lease
expired; otherwise :class:`SessionBusyError`, naming the session and its holder. The writer
releases it (:meth:`~RunStore.release_session`) when the run ends. An :class:`~agentcore_fsm.Agent`
with a store does this around each prompt (docs/survive.md#one-writer-per-session).

Durability of :class:`SqliteRunStore`: the file is in WAL mode with ``synchronous=NORMAL``, and
each append is one transaction (check the lease and the status, check the entry's number,
insert it, renew the lease when it is due). A committed append survives a kill of the process
at any point; a power loss or OS crash may lose the commits since SQLite last synced its WAL
(at a checkpoint), but never leaves a partial one (docs/survive.md#what-is-durable-when). Entries
are never updated or deleted, so what was read once stays true.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from agentcore_fsm.persist.sqlite_store import SCHEMA_VERSION, SqliteRunStore
from agentcore_fsm.persist.store_rules import (
    JournalConflictError,
    LeaseLostError,
    RunExistsError,
    RunFinishedError,
    RunInfo,
    RunOwnedError,
    RunStatus,
    RunStore,
    RunStoreError,
    SessionBusyError,
    StoredRun,
    StoreFormatError,
    UnknownRunError,
    check_acquire,
    check_owner,
    check_seq,
    check_session_acquire,
    check_session_names,
    check_text,
    default_owner,
    entry_texts,
    loads,
    new_run_text,
)

__all__ = [
    "SCHEMA_VERSION",
    "JournalConflictError",
    "LeaseLostError",
    "MemoryRunStore",
    "RunExistsError",
    "RunFinishedError",
    "RunInfo",
    "RunOwnedError",
    "RunStore",
    "RunStoreError",
    "SessionBusyError",
    "SqliteRunStore",
    "StoreFormatError",
    "StoredRun",
    "UnknownRunError",
    "default_owner",
]

# --- in memory ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _MemoryRun:
    session_id: str | None
    header: str
    created: float
    owner: str | None
    lease_until: float | None
    status: RunStatus = "running"
    end_reason: str | None = None
    entries: list[str] = field(default_factory=list)


class MemoryRunStore:
    """A run store in memory (lost with the process): for tests, and for runs that need not
    survive. It follows the same rules as :class:`SqliteRunStore`, and keeps JSON text, so
    stored values are copies. Thread-safe."""

    def __init__(self) -> None:
        self._runs: dict[str, _MemoryRun] = {}
        self._sessions: dict[str, tuple[str, float]] = {}  # session id: (writer, lease until)
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"MemoryRunStore({len(self._runs)} runs)"

    def __enter__(self) -> MemoryRunStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, run_id: str) -> _MemoryRun:
        if self._closed:
            raise RunStoreError(f"run {run_id!r}: the in-memory store has been closed")
        run = self._runs.get(run_id)
        if run is None:
            raise UnknownRunError(f"there is no run {run_id!r} in the in-memory store")
        return run

    def create_run(
        self,
        run_id: str,
        header: dict[str, Any],
        *,
        session_id: str | None,
        owner: str,
        lease_s: float,
    ) -> None:
        text = new_run_text(run_id, header, session_id, owner)
        with self._lock:
            if self._closed:
                raise RunStoreError(f"run {run_id!r}: the in-memory store has been closed")
            if run_id in self._runs:
                raise RunExistsError(
                    f"run {run_id!r} already exists in the in-memory store; a run is never "
                    f"overwritten"
                )
            now = time.time()
            self._runs[run_id] = _MemoryRun(session_id, text, now, owner, now + lease_s)

    def acquire(self, run_id: str, owner: str, *, lease_s: float) -> None:
        check_text(run_id, "owner", owner)
        with self._lock:
            run = self._run(run_id)
            now = time.time()
            check_acquire(
                run_id, run.status, run.end_reason, run.owner, run.lease_until, owner, now
            )
            run.owner = owner
            run.lease_until = now + lease_s

    def append(
        self, run_id: str, seq: int, entry: dict[str, Any], *, owner: str, lease_s: float
    ) -> None:
        self.append_many(run_id, seq, [entry], owner=owner, lease_s=lease_s)

    def append_many(
        self,
        run_id: str,
        seq: int,
        entries: Sequence[dict[str, Any]],
        *,
        owner: str,
        lease_s: float,
        end_reason: str | None = None,
    ) -> None:
        """Append entries number ``seq``, ``seq + 1``, ... and renew the lease, all or none;
        with ``end_reason``, mark the run finished too (as :meth:`finish`)."""
        texts = entry_texts(run_id, seq, entries)
        if end_reason is not None:
            check_text(run_id, "end reason", end_reason)
        with self._lock:
            run = self._run(run_id)
            check_owner(run_id, run.status, run.end_reason, run.owner, owner, "be appended to")
            check_seq(run_id, seq, len(run.entries))
            run.entries.extend(texts)
            run.lease_until = time.time() + lease_s
            if end_reason is not None:
                run.status, run.end_reason = "finished", end_reason
                run.owner = run.lease_until = None

    def finish(self, run_id: str, end_reason: str, *, owner: str) -> None:
        check_text(run_id, "end reason", end_reason)
        with self._lock:
            run = self._run(run_id)
            check_owner(run_id, run.status, run.end_reason, run.owner, owner, "be finished")
            run.status = "finished"
            run.end_reason = end_reason
            run.owner = None
            run.lease_until = None

    def release(self, run_id: str, owner: str) -> None:
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None and run.owner == owner:
                run.owner = None
                run.lease_until = None

    def load(self, run_id: str) -> StoredRun:
        with self._lock:
            run = self._run(run_id)
            entries = list(run.entries)
            state = (run.status, run.end_reason, run.owner, run.lease_until)
        status, end_reason, owner, lease_until = state
        return StoredRun(
            run_id=run_id,
            session_id=run.session_id,
            header=loads(run.header, f"the header of run {run_id!r}"),
            entries=[loads(e, f"entry {i} of run {run_id!r}") for i, e in enumerate(entries)],
            status=status,
            end_reason=end_reason,
            owner=owner,
            lease_until=lease_until,
            created=run.created,
        )

    def runs(self, session_id: str | None = None) -> list[RunInfo]:
        with self._lock:
            if self._closed:
                raise RunStoreError("the in-memory store has been closed")
            infos = [
                RunInfo(
                    run_id,
                    run.session_id,
                    run.status,
                    run.end_reason,
                    run.created,
                    len(run.entries),
                )
                for run_id, run in self._runs.items()
                if session_id is None or run.session_id == session_id
            ]
        infos.sort(key=lambda info: info.created)  # stable: ties stay in insertion order
        return infos

    def acquire_session(self, session_id: str, owner: str, *, lease_s: float) -> None:
        check_session_names(session_id, owner)
        with self._lock:
            if self._closed:
                raise RunStoreError(f"session {session_id!r}: the in-memory store has been closed")
            now = time.time()
            holder, until = self._sessions.get(session_id, (None, None))
            check_session_acquire(session_id, holder, until, owner, now)
            self._sessions[session_id] = (owner, now + lease_s)

    def release_session(self, session_id: str, owner: str) -> None:
        with self._lock:
            held = self._sessions.get(session_id)
            if held is not None and held[0] == owner:
                del self._sessions[session_id]

    def close(self) -> None:
        with self._lock:
            self._closed = True
