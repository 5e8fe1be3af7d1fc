"""Run stores: where journaled runs are kept, so that a run can be continued after its process
died (docs/reference.md#runs-that-survive).

A store keeps **runs** by id. A run is its **header** (a JSON object written once, when the run
is created), its **entries** (JSON objects appended one at a time, numbered from 0, never
rewritten or removed), an optional **session id** grouping runs, a **status** (``"running"``,
then ``"finished"`` with an end reason) and a **lease**: which process runs it, and until when.

Leases. A run is run by one process at a time: its owner, named by :func:`default_owner` as
``"HOST:PID:NONCE"``. Creating a run leases it to its creator; every :meth:`~RunStore.append`
renews the lease (``lease_s`` seconds from now) in the same transaction as the entry.
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
insert it, renew the lease). A committed append survives a kill of the process at any point; a
power loss or OS crash may lose the last few commits, but never leaves a partial one. Entries
are never updated or deleted, so what was read once stays true.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Protocol, runtime_checkable

from agentcore_fsm.persist import json_text
from agentcore_fsm.persist.codec import RecordError

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

SCHEMA_VERSION = 2
"""The version of the SQLite schema this code writes (kept in ``PRAGMA user_version``). Version
1 had no ``sessions`` table; a version-1 file is upgraded when it is opened."""

BUSY_TIMEOUT_MS = 5000
"""How long a SQLite store waits for another connection's write lock before failing."""

RunStatus = Literal["running", "finished"]


# --- errors ---------------------------------------------------------------------------------


class RunStoreError(Exception):
    """A run store refused or failed an operation; the text names the run (and, for a file,
    its path) and what is wrong."""


class UnknownRunError(RunStoreError):
    """No run has this id in the store."""


class RunExistsError(RunStoreError):
    """A run with this id is already in the store (nothing is ever overwritten)."""


class RunOwnedError(RunStoreError):
    """Another owner holds the run's lease: a live process of this host, or another host's
    process whose lease has not expired."""


class SessionBusyError(RunOwnedError):
    """Another writer holds the session's lease (a live process of this host, or another host's
    process whose lease has not expired): a second run of the session cannot start now."""

    def __init__(self, message: str, session_id: str, holder: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.holder = holder


class LeaseLostError(RunStoreError):
    """The caller no longer holds the run's lease (another process took the run over, or the
    lease was released); nothing was written."""


class RunFinishedError(RunStoreError):
    """The run has finished: it cannot be leased, appended to or finished again."""


class StoreFormatError(RunStoreError, RecordError):
    """A store file that is not a run store, is corrupt, or was written by a newer version; or
    a stored value that cannot be read back (it is also a
    :class:`~agentcore_fsm.persist.codec.RecordError`: a damaged record)."""


class JournalConflictError(RunStoreError):
    """An entry out of sequence: its number is not the number of entries already stored."""


# --- what a store returns ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run as loaded from a store (fresh copies: changing them changes nothing stored)."""

    run_id: str
    session_id: str | None
    header: dict[str, Any]
    entries: list[dict[str, Any]]
    status: RunStatus
    end_reason: str | None
    owner: str | None
    lease_until: float | None
    created: float
    """When the run was created (``time.time()``)."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A run as listed by :meth:`RunStore.runs`: without its header and entries."""

    run_id: str
    session_id: str | None
    status: RunStatus
    end_reason: str | None
    created: float
    entries: int
    """How many entries the run's journal holds."""


@runtime_checkable
class RunStore(Protocol):
    """Where journaled runs are kept (see the module's documentation for the rules)."""

    def create_run(
        self,
        run_id: str,
        header: dict[str, Any],
        *,
        session_id: str | None,
        owner: str,
        lease_s: float,
    ) -> None:
        """Create a running run leased to ``owner``; :class:`RunExistsError` if the id is
        taken."""
        ...

    def acquire(self, run_id: str, owner: str, *, lease_s: float) -> None:
        """Take the run's lease for ``lease_s`` seconds, or raise :class:`RunOwnedError`."""
        ...

    def append(
        self, run_id: str, seq: int, entry: dict[str, Any], *, owner: str, lease_s: float
    ) -> None:
        """Append entry number ``seq`` (the number of entries stored so far) and renew the
        lease, in one transaction."""
        ...

    def finish(self, run_id: str, end_reason: str, *, owner: str) -> None:
        """Mark the run finished with ``end_reason`` and clear its lease."""
        ...

    def release(self, run_id: str, owner: str) -> None:
        """Clear the run's lease if ``owner`` holds it; do nothing otherwise."""
        ...

    def load(self, run_id: str) -> StoredRun:
        """The run with its header and entries; :class:`UnknownRunError` if there is none."""
        ...

    def runs(self, session_id: str | None = None) -> list[RunInfo]:
        """The runs (of ``session_id`` when given), in creation order."""
        ...

    def acquire_session(self, session_id: str, owner: str, *, lease_s: float) -> None:
        """Take (or renew) the session's writer lease for ``lease_s`` seconds, or raise
        :class:`SessionBusyError`."""
        ...

    def release_session(self, session_id: str, owner: str) -> None:
        """Clear the session's writer lease if ``owner`` holds it; do nothing otherwise."""
        ...

    def close(self) -> None:
        """Release what the store holds (its file); the store cannot be used afterwards."""
        ...


# --- owners and leases (the rules both stores share) ---------------------------------------------


def default_owner() -> str:
    """A new owner name for this process: ``"HOST:PID:NONCE"`` (the nonce tells apart two
    runners of one process)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if pid <= 0 or sys.platform == "win32":  # os.kill would end the process on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's process
        return True
    except OSError:
        return True  # cannot tell: assume it lives
    return True


def _local_pid(owner: str) -> int | None:
    """The pid of the process ``owner`` names when it is a process of this host, else None."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or parts[0] != socket.gethostname():
        return None
    return int(parts[1])


def _finished(run_id: str, end_reason: str | None, what: str) -> RunFinishedError:
    return RunFinishedError(
        f"run {run_id!r} has finished ({end_reason}); it cannot {what} any more"
    )


def _check_acquire(
    run_id: str,
    status: str,
    end_reason: str | None,
    holder: str | None,
    lease_until: float | None,
    owner: str,
    now: float,
) -> None:
    """Raise unless ``owner`` may take the run's lease."""
    if status == "finished":
        raise _finished(run_id, end_reason, "be leased")
    if holder is None or holder == owner:
        return
    pid = _local_pid(holder)
    if pid is not None:
        if not _pid_alive(pid):
            return
        raise RunOwnedError(
            f"run {run_id!r} is held by {holder!r}, a live process of this host; it cannot be "
            f"taken over while that process runs"
        )
    if lease_until is None or lease_until <= now:
        return
    raise RunOwnedError(
        f"run {run_id!r} is held by {holder!r} (another host) for {lease_until - now:.1f} s "
        f"more; it can be taken over once that lease expires"
    )


def _check_owner(
    run_id: str, status: str, end_reason: str | None, holder: str | None, owner: str, what: str
) -> None:
    """Raise unless the run is running and ``owner`` holds its lease."""
    if status == "finished":
        raise _finished(run_id, end_reason, what)
    if holder != owner:
        now_held = (
            f"it is now held by {holder!r}"
            if holder is not None
            else "its lease was released and nobody holds it"
        )
        raise LeaseLostError(
            f"run {run_id!r}: {owner!r} no longer holds its lease ({now_held}); "
            f"it cannot {what}, nothing was written"
        )


def _check_seq(run_id: str, seq: int, count: int) -> None:
    if seq != count:
        raise JournalConflictError(
            f"run {run_id!r} cannot take entry {seq}: it holds {count} entries, so the next "
            f"entry must be number {count} (another process may be journaling it); nothing "
            f"was written"
        )


def _check_session_acquire(
    session_id: str, holder: str | None, lease_until: float | None, owner: str, now: float
) -> None:
    """Raise :class:`SessionBusyError` unless ``owner`` may take the session's lease (the rules
    of a run's lease)."""
    if holder is None or holder == owner:
        return
    pid = _local_pid(holder)
    if pid is not None:
        if not _pid_alive(pid):
            return
        raise SessionBusyError(
            f"session {session_id!r} has another writer: {holder!r}, a live process of this "
            f"host, is running it; one writer at a time (wait for its run to end)",
            session_id,
            holder,
        )
    if lease_until is None or lease_until <= now:
        return
    raise SessionBusyError(
        f"session {session_id!r} has another writer: {holder!r} (another host) holds it for "
        f"{lease_until - now:.1f} s more; one writer at a time (wait for its run to end)",
        session_id,
        holder,
    )


def _check_session_names(session_id: Any, owner: Any) -> None:
    for what, value in (("session id", session_id), ("owner", owner)):
        if not isinstance(value, str) or not value:
            raise RunStoreError(f"a session's {what} must be a non-empty str, not {value!r}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise RunStoreError(
                f"the {what} {value!r} is not valid text (it holds a lone surrogate)"
            ) from None


# --- JSON ---------------------------------------------------------------------------------------


def _dumps(value: Any, run_id: str, what: str) -> str:
    if not isinstance(value, dict):
        raise RunStoreError(
            f"run {run_id!r}: the {what} must be a dict of JSON values, not {type(value).__name__}"
        )
    try:
        return json_text.dumps(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise RunStoreError(f"run {run_id!r}: the {what} is not JSON ({exc})") from None


def _loads(text: Any, where: str) -> dict[str, Any]:
    try:
        value = json_text.loads(text)
    except (TypeError, ValueError) as exc:
        raise StoreFormatError(f"{where} cannot be read: it is not valid JSON ({exc})") from None
    except RecursionError:
        raise StoreFormatError(f"{where} cannot be read: it is nested too deeply") from None
    if not isinstance(value, dict):
        raise StoreFormatError(f"{where} cannot be read: it is not a JSON object")
    return value


def _status(value: Any, where: str) -> RunStatus:
    if value == "running":
        return "running"
    if value == "finished":
        return "finished"
    raise StoreFormatError(f"{where} has an unknown status {value!r}")


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
        _check_run_id(run_id)
        _check_text(run_id, "session id", session_id, optional=True)
        _check_text(run_id, "owner", owner)
        text = _dumps(header, run_id, "header")
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
        _check_text(run_id, "owner", owner)
        with self._lock:
            run = self._run(run_id)
            now = time.time()
            _check_acquire(
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
        texts = [_dumps(e, run_id, f"entry {seq + i}") for i, e in enumerate(entries)]
        if end_reason is not None:
            _check_text(run_id, "end reason", end_reason)
        with self._lock:
            run = self._run(run_id)
            _check_owner(run_id, run.status, run.end_reason, run.owner, owner, "be appended to")
            _check_seq(run_id, seq, len(run.entries))
            run.entries.extend(texts)
            run.lease_until = time.time() + lease_s
            if end_reason is not None:
                run.status, run.end_reason = "finished", end_reason
                run.owner = run.lease_until = None

    def finish(self, run_id: str, end_reason: str, *, owner: str) -> None:
        _check_text(run_id, "end reason", end_reason)
        with self._lock:
            run = self._run(run_id)
            _check_owner(run_id, run.status, run.end_reason, run.owner, owner, "be finished")
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
            header=_loads(run.header, f"the header of run {run_id!r}"),
            entries=[_loads(e, f"entry {i} of run {run_id!r}") for i, e in enumerate(entries)],
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
        _check_session_names(session_id, owner)
        with self._lock:
            if self._closed:
                raise RunStoreError(f"session {session_id!r}: the in-memory store has been closed")
            now = time.time()
            holder, until = self._sessions.get(session_id, (None, None))
            _check_session_acquire(session_id, holder, until, owner, now)
            self._sessions[session_id] = (owner, now + lease_s)

    def release_session(self, session_id: str, owner: str) -> None:
        with self._lock:
            held = self._sessions.get(session_id)
            if held is not None and held[0] == owner:
                del self._sessions[session_id]

    def close(self) -> None:
        with self._lock:
            self._closed = True


def _check_run_id(run_id: Any) -> None:
    if not isinstance(run_id, str) or not run_id:
        raise RunStoreError(f"a run id must be a non-empty str, not {run_id!r}")
    _check_text(run_id, "run id", run_id)


def _check_text(run_id: str, what: str, value: Any, *, optional: bool = False) -> None:
    """Refuse a name the store cannot keep as text: not a str, or holding a lone surrogate
    (headers and entries may hold any str; ids, owners and end reasons are plain text)."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise RunStoreError(f"run {run_id!r}: the {what} must be a str, not {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RunStoreError(
            f"run {run_id!r}: the {what} {value!r} is not valid text (it holds a lone surrogate)"
        ) from None


# --- SQLite ---------------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE runs (
    run_id      TEXT PRIMARY KEY NOT NULL,
    session_id  TEXT,
    header      TEXT NOT NULL,
    status      TEXT NOT NULL,
    end_reason  TEXT,
    owner       TEXT,
    lease_until REAL,
    created     REAL NOT NULL,
    ord         INTEGER NOT NULL UNIQUE
);
CREATE INDEX runs_by_session ON runs (session_id, created, ord);
CREATE INDEX runs_by_created ON runs (created, ord);
CREATE TABLE entries (
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    seq    INTEGER NOT NULL,
    data   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE sessions (
    session_id  TEXT PRIMARY KEY NOT NULL,
    owner       TEXT NOT NULL,
    lease_until REAL NOT NULL
);
"""

# what upgrades a file of schema version N to N + 1
_UPGRADES = {
    1: """
CREATE TABLE sessions (
    session_id  TEXT PRIMARY KEY NOT NULL,
    owner       TEXT NOT NULL,
    lease_until REAL NOT NULL
);
""",
}

_OUR_TABLES = frozenset({"runs", "entries"})

_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6

_CREATE = (
    "INSERT INTO runs (run_id, session_id, header, status, owner, lease_until, created, ord) "
    "VALUES (?, ?, ?, 'running', ?, ?, ?, (SELECT COALESCE(MAX(ord), 0) + 1 FROM runs))"
)
_STATE = "SELECT status, end_reason, owner, lease_until FROM runs WHERE run_id = ?"
_APPEND_STATE = (
    "SELECT status, end_reason, owner, (SELECT MAX(seq) FROM entries WHERE run_id = ?1) "
    "FROM runs WHERE run_id = ?1"
)
_INSERT = "INSERT INTO entries (run_id, seq, data) VALUES (?, ?, ?)"
_RENEW = "UPDATE runs SET lease_until = ? WHERE run_id = ?"
_LEASE = "UPDATE runs SET owner = ?, lease_until = ? WHERE run_id = ?"
_FINISH = (
    "UPDATE runs SET status = 'finished', end_reason = ?, owner = NULL, lease_until = NULL "
    "WHERE run_id = ?"
)
_RELEASE = "UPDATE runs SET owner = NULL, lease_until = NULL WHERE run_id = ? AND owner = ?"
_LOAD_RUN = (
    "SELECT session_id, header, status, end_reason, owner, lease_until, created "
    "FROM runs WHERE run_id = ?"
)
_LOAD_ENTRIES = "SELECT seq, data FROM entries WHERE run_id = ? ORDER BY seq"
_SESSION = "SELECT owner, lease_until FROM sessions WHERE session_id = ?"
_LEASE_SESSION = (
    "INSERT INTO sessions (session_id, owner, lease_until) VALUES (?1, ?2, ?3) "
    "ON CONFLICT (session_id) DO UPDATE SET owner = ?2, lease_until = ?3"
)
_RELEASE_SESSION = "DELETE FROM sessions WHERE session_id = ? AND owner = ?"
_LIST = (
    "SELECT r.run_id, r.session_id, r.status, r.end_reason, r.created, "
    "(SELECT COALESCE(MAX(e.seq) + 1, 0) FROM entries e WHERE e.run_id = r.run_id) "
    "FROM runs r {where} ORDER BY r.created, r.ord"
)


class SqliteRunStore:
    """A run store in one SQLite file (standard library only), shared safely by several
    processes and threads. The file and its schema are created when missing. See the module's
    documentation for the durability this gives.

    Raises :class:`StoreFormatError` (naming the path) for a file that is not a SQLite
    database, is corrupt, holds another application's tables, or was written by a newer
    version of this schema; :class:`RunStoreError` for a file that cannot be opened."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        """The store's file."""
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise RunStoreError(f"the run store {self.path!r} cannot be opened: {exc}") from None
        try:
            self._open(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _open(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if self._check_schema(conn):  # our schema is there already
                self._tune(conn)
                return
            self._tune(conn)
            conn.execute("BEGIN IMMEDIATE")
            try:
                # another process may have created (or upgraded) it since we looked
                if not self._check_schema(conn):
                    version = conn.execute("PRAGMA user_version").fetchone()[0]
                    script = (
                        _SCHEMA
                        if version == 0
                        else "".join(_UPGRADES[v] for v in range(version, SCHEMA_VERSION))
                    )
                    for statement in script.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise self._error(exc, None, "be opened") from exc

    @staticmethod
    def _tune(conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")

    def _check_schema(self, conn: sqlite3.Connection) -> bool:
        """True when the file holds our schema, False when it is empty or holds an older
        version of it (to upgrade); raise for anything else."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        if version > SCHEMA_VERSION:
            raise StoreFormatError(
                f"the run store {self.path!r} was written by a newer version of agentcore_fsm "
                f"(its schema version is {version}, this version reads up to {SCHEMA_VERSION}); "
                f"upgrade agentcore_fsm to open it"
            )
        if version == 0 and not tables:
            return False
        if version == SCHEMA_VERSION and _OUR_TABLES <= tables:
            return True
        if 1 <= version < SCHEMA_VERSION and _OUR_TABLES <= tables:
            return False  # an older schema of ours: upgraded in place
        raise StoreFormatError(
            f"{self.path!r} is a SQLite database but not a run store (schema version {version}, "
            f"tables: {', '.join(sorted(tables)) or 'none'}); use a new file for the run store"
        )

    def _error(self, exc: sqlite3.Error, run_id: str | None, what: str) -> RunStoreError:
        """A store error for a SQLite error met while the run (or the store) could not
        ``what``."""
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        subject = f"the run store {self.path!r}"
        if run_id is not None:
            subject = f"run {run_id!r} in {subject}"
        if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
            return StoreFormatError(
                f"{subject} cannot {what}: the file is not a SQLite database or is corrupt ({exc})"
            )
        if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return RunStoreError(
                f"{subject} cannot {what}: the file stayed locked by another connection for "
                f"more than {BUSY_TIMEOUT_MS / 1000:g} s ({exc})"
            )
        return RunStoreError(f"{subject} cannot {what}: {exc}")

    def _live(self, run_id: str | None) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            subject = f"run {run_id!r}: the" if run_id else "the"
            raise RunStoreError(f"{subject} run store {self.path!r} has been closed")
        return conn

    def _unknown(self, run_id: str) -> UnknownRunError:
        return UnknownRunError(f"there is no run {run_id!r} in the run store {self.path!r}")

    def __repr__(self) -> str:
        return f"SqliteRunStore({self.path!r})"

    def __enter__(self) -> SqliteRunStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- the operations ---------------------------------------------------------------------

    def create_run(
        self,
        run_id: str,
        header: dict[str, Any],
        *,
        session_id: str | None,
        owner: str,
        lease_s: float,
    ) -> None:
        _check_run_id(run_id)
        _check_text(run_id, "session id", session_id, optional=True)
        _check_text(run_id, "owner", owner)
        text = _dumps(header, run_id, "header")
        with self._lock:
            conn = self._live(run_id)
            now = time.time()
            try:
                conn.execute(_CREATE, (run_id, session_id, text, owner, now + lease_s, now))
            except sqlite3.IntegrityError:
                raise RunExistsError(
                    f"run {run_id!r} already exists in the run store {self.path!r}; a run is "
                    f"never overwritten"
                ) from None
            except sqlite3.Error as exc:
                raise self._error(exc, run_id, "be created") from exc

    def acquire(self, run_id: str, owner: str, *, lease_s: float) -> None:
        _check_text(run_id, "owner", owner)
        with self._lock:
            conn = self._live(run_id)
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    row = conn.execute(_STATE, (run_id,)).fetchone()
                    if row is None:
                        raise self._unknown(run_id)
                    now = time.time()
                    _check_acquire(run_id, row[0], row[1], row[2], row[3], owner, now)
                    conn.execute(_LEASE, (owner, now + lease_s, run_id))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise self._error(exc, run_id, "be leased") from exc
            except UnicodeEncodeError:  # an id that cannot be stored names no run
                raise self._unknown(run_id) from None

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
        """Append entries number ``seq``, ``seq + 1``, ... and renew the lease, in one
        transaction (all or none): what a journal writes when entries piled up. With
        ``end_reason``, the same transaction marks the run finished (as :meth:`finish`)."""
        rows = [
            (run_id, seq + i, _dumps(e, run_id, f"entry {seq + i}")) for i, e in enumerate(entries)
        ]
        if end_reason is not None:
            _check_text(run_id, "end reason", end_reason)
        elif not rows:
            return
        with self._lock:
            conn = self._live(run_id)
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    row = conn.execute(_APPEND_STATE, (run_id,)).fetchone()
                    if row is None:
                        raise self._unknown(run_id)
                    status, reason, holder, last = row
                    if status != "running" or holder != owner:
                        _check_owner(run_id, status, reason, holder, owner, "be appended to")
                    count = 0 if last is None else last + 1
                    if seq != count:
                        _check_seq(run_id, seq, count)
                    conn.executemany(_INSERT, rows)
                    if end_reason is None:
                        conn.execute(_RENEW, (time.time() + lease_s, run_id))
                    else:
                        conn.execute(_FINISH, (end_reason, run_id))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                last = seq + len(rows) - 1
                what = f"take entry {seq}" if last <= seq else f"take entries {seq} to {last}"
                raise self._error(exc, run_id, what) from exc
            except UnicodeEncodeError:  # an id that cannot be stored names no run
                raise self._unknown(run_id) from None

    def finish(self, run_id: str, end_reason: str, *, owner: str) -> None:
        _check_text(run_id, "end reason", end_reason)
        with self._lock:
            conn = self._live(run_id)
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    row = conn.execute(_STATE, (run_id,)).fetchone()
                    if row is None:
                        raise self._unknown(run_id)
                    _check_owner(run_id, row[0], row[1], row[2], owner, "be finished")
                    conn.execute(_FINISH, (end_reason, run_id))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise self._error(exc, run_id, "be finished") from exc
            except UnicodeEncodeError:  # an id that cannot be stored names no run
                raise self._unknown(run_id) from None

    def release(self, run_id: str, owner: str) -> None:
        with self._lock:
            conn = self._live(run_id)
            try:
                conn.execute(_RELEASE, (run_id, owner))
            except sqlite3.Error as exc:
                raise self._error(exc, run_id, "be released") from exc
            except UnicodeEncodeError:  # no such run or owner: nothing to release
                pass

    def load(self, run_id: str) -> StoredRun:
        with self._lock:
            conn = self._live(run_id)
            try:
                conn.execute("BEGIN")  # one snapshot for the run and its entries
                try:
                    row = conn.execute(_LOAD_RUN, (run_id,)).fetchone()
                    rows = conn.execute(_LOAD_ENTRIES, (run_id,)).fetchall() if row else []
                finally:
                    if conn.in_transaction:
                        conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise self._error(exc, run_id, "be loaded") from exc
            except UnicodeEncodeError:  # an id that cannot be stored names no run
                raise self._unknown(run_id) from None
        if row is None:
            raise self._unknown(run_id)
        where = f"run {run_id!r} in the run store {self.path!r}"
        entries: list[dict[str, Any]] = []
        for i, (seq, data) in enumerate(rows):
            if seq != i:
                raise StoreFormatError(f"{where} is missing entry {i} (the next one is {seq})")
            entries.append(_loads(data, f"entry {seq} of {where}"))
        session_id, header, status, end_reason, owner, lease_until, created = row
        return StoredRun(
            run_id=run_id,
            session_id=session_id,
            header=_loads(header, f"the header of {where}"),
            entries=entries,
            status=_status(status, where),
            end_reason=end_reason,
            owner=owner,
            lease_until=lease_until,
            created=created,
        )

    def runs(self, session_id: str | None = None) -> list[RunInfo]:
        with self._lock:
            conn = self._live(None)
            try:
                if session_id is None:
                    rows = conn.execute(_LIST.format(where="")).fetchall()
                else:
                    sql = _LIST.format(where="WHERE r.session_id = ?")
                    rows = conn.execute(sql, (session_id,)).fetchall()
            except sqlite3.Error as exc:
                raise self._error(exc, None, "list its runs") from exc
            except UnicodeEncodeError:  # a session id that cannot be stored has no runs
                return []
        return [
            RunInfo(
                run_id,
                sid,
                _status(status, f"run {run_id!r} in the run store {self.path!r}"),
                end_reason,
                created,
                count,
            )
            for run_id, sid, status, end_reason, created, count in rows
        ]

    def acquire_session(self, session_id: str, owner: str, *, lease_s: float) -> None:
        _check_session_names(session_id, owner)
        with self._lock:
            conn = self._live(None)
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    row = conn.execute(_SESSION, (session_id,)).fetchone()
                    now = time.time()
                    holder, until = row if row is not None else (None, None)
                    _check_session_acquire(session_id, holder, until, owner, now)
                    conn.execute(_LEASE_SESSION, (session_id, owner, now + lease_s))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise RunStoreError(
                    f"session {session_id!r} in the run store {self.path!r} cannot be leased: {exc}"
                ) from exc

    def release_session(self, session_id: str, owner: str) -> None:
        with self._lock:
            conn = self._live(None)
            try:
                conn.execute(_RELEASE_SESSION, (session_id, owner))
            except sqlite3.Error as exc:
                raise RunStoreError(
                    f"session {session_id!r} in the run store {self.path!r} cannot be "
                    f"released: {exc}"
                ) from exc
            except UnicodeEncodeError:  # no such session or owner: nothing to release
                pass

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
