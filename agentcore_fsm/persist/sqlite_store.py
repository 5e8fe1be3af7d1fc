"""The SQLite run store: :class:`SqliteRunStore` (one file, standard library only, shareable by
several processes). Its rules are those of :mod:`agentcore_fsm.persist.store`; what this module
adds is the schema, its versions and the transactions."""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from agentcore_fsm.persist.store_rules import (
    RunExistsError,
    RunInfo,
    RunStoreError,
    StoredRun,
    StoreFormatError,
    UnknownRunError,
    check_acquire,
    check_owner,
    check_seq,
    check_session_acquire,
    check_session_names,
    check_text,
    entry_texts,
    loads,
    new_run_text,
    status_of,
)

__all__ = ["BUSY_TIMEOUT_MS", "RENEW_SLACK_S", "SCHEMA_VERSION", "SqliteRunStore"]

SCHEMA_VERSION = 2
"""The version of the SQLite schema this code writes (kept in ``PRAGMA user_version``). Version
1 had no ``sessions`` table; a version-1 file is upgraded when it is opened."""

BUSY_TIMEOUT_MS = 5000
"""How long a SQLite store waits for another connection's write lock before failing, by
default (``SqliteRunStore(busy_timeout_s=...)`` sets it per store)."""


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
# an append's checks and its lease renewal (or the run's end) in one statement: it changes the
# run's row only when the run is running, ``owner`` holds it and it holds exactly ``seq``
# entries; when it changes nothing, _APPEND_STATE says why
_CHECKED = (
    " WHERE run_id = ?2 AND status = 'running' AND owner = ?3"
    " AND (SELECT COALESCE(MAX(seq) + 1, 0) FROM entries WHERE run_id = ?2) = ?4"
)
_APPEND_RENEW = "UPDATE runs SET lease_until = ?1" + _CHECKED


def _fresh_insert(count: int) -> str:
    """One statement that appends ``count`` entries (texts ``?5`` ...) from number ``?2`` on
    when the run is running, ``?3`` holds it, it holds exactly ``?2`` entries, and its lease
    lasts until ``?4`` or later; it inserts nothing otherwise. Run alone, it is its own
    transaction: all the rows or none."""
    rows = ", ".join(f"({i}, ?{i + 5})" for i in range(count))
    return (
        f"INSERT INTO entries (run_id, seq, data) SELECT ?1, ?2 + column1, column2 "
        f"FROM (VALUES {rows}) WHERE EXISTS (SELECT 1 FROM runs WHERE run_id = ?1 "
        f"AND status = 'running' AND owner = ?3 AND lease_until >= ?4) "
        f"AND (SELECT COALESCE(MAX(seq) + 1, 0) FROM entries WHERE run_id = ?1) = ?2"
    )


_FRESH_INSERTS = [_fresh_insert(n) for n in range(1, 33)]
"""The one-statement appends of 1 to 32 entries (by count - 1); a larger group of entries is
appended by a transaction of three statements."""

RENEW_SLACK_S = 1.0
"""An append renews its run's lease only when that moves the lease's end later by more than
this many seconds (or a tenth of ``lease_s``, when that is less): appends in quick succession
are then one statement each, and a lease is never more than that much shorter than a full one
after a write."""
_APPEND_FINISH = (
    "UPDATE runs SET status = 'finished', end_reason = ?1, owner = NULL, lease_until = NULL"
    + _CHECKED
)
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


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction: ``BEGIN IMMEDIATE``, committed when the block ends, rolled back
    (if still open) when it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _seconds(name: str, value: Any) -> float:
    """A finite number of seconds, zero or more (not a bool), for ``SqliteRunStore(name=)``."""
    expected = "a finite number of seconds >= 0"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"SqliteRunStore: {name} must be {expected}, not {type(value).__name__} ({value!r:.60})"
        )
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"SqliteRunStore: {name} must be {expected}, not {value!r}")
    return float(value)


class SqliteRunStore:
    """A run store in one SQLite file (standard library only), shared safely by several
    processes and threads. The file and its schema are created when missing. See the module's
    documentation for the durability this gives.

    Raises :class:`StoreFormatError` (naming the path) for a file that is not a SQLite
    database, is corrupt, holds another application's tables, or was written by a newer
    version of this schema; :class:`RunStoreError` for a file that cannot be opened.

    ``busy_timeout_s``: how long an operation waits for the write lock another connection (or
    process) holds on the file before it fails with :class:`RunStoreError` naming the store and
    the lock (default ``BUSY_TIMEOUT_MS``, 5 s; a finite number of seconds, zero or more). This
    is the bound of a store that hangs: a journaled run whose write fails so ends as data with
    that error, and is resumed once the lock is gone (docs/survive.md#when-the-store-hangs)."""

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_s: float = BUSY_TIMEOUT_MS / 1000
    ) -> None:
        self.path = os.fspath(path)
        """The store's file."""
        self.busy_timeout_s = _seconds("busy_timeout_s", busy_timeout_s)
        """How long an operation waits for another connection's write lock (seconds)."""
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_s,
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
            conn.execute(f"PRAGMA busy_timeout = {round(self.busy_timeout_s * 1000)}")
            if self._check_schema(conn):  # our schema is there already
                self._tune(conn)
                return
            self._tune(conn)
            # another process may have created (or upgraded) it since we looked
            with _immediate(conn):
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
                f"more than {self.busy_timeout_s:g} s (its busy timeout; {exc})"
            )
        return RunStoreError(f"{subject} cannot {what}: {exc}")

    def _live(self, run_id: str | None) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            subject = f"run {run_id!r}: the" if run_id else "the"
            raise RunStoreError(f"{subject} run store {self.path!r} has been closed")
        return conn

    @contextmanager
    def _write(self, run_id: str | None, what: str) -> Iterator[sqlite3.Connection]:
        """Hold the store's lock and one write transaction (``BEGIN IMMEDIATE``, committed when
        the block ends, rolled back when it raises) on the live connection. A SQLite error
        becomes the store error for the run (or the store) that could not ``what``; an id that
        cannot be stored (a lone surrogate) names no run: :class:`UnknownRunError`."""
        with self._lock:
            conn = self._live(run_id)
            try:
                with _immediate(conn):
                    yield conn
            except sqlite3.Error as exc:
                raise self._error(exc, run_id, what) from exc
            except UnicodeEncodeError:
                if run_id is None:
                    raise
                raise self._unknown(run_id) from None

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
        text = new_run_text(run_id, header, session_id, owner)
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
        check_text(run_id, "owner", owner)
        with self._write(run_id, "be leased") as conn:
            row = conn.execute(_STATE, (run_id,)).fetchone()
            if row is None:
                raise self._unknown(run_id)
            now = time.time()
            check_acquire(run_id, row[0], row[1], row[2], row[3], owner, now)
            conn.execute(_LEASE, (owner, now + lease_s, run_id))

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
        ``end_reason``, the same transaction marks the run finished (as :meth:`finish`).

        A journal's appends come a few milliseconds apart, and each one is a SQLite commit, so
        their cost is the cost of a durable run (docs/survive.md#what-a-write-costs). While the
        run's lease is fresh (renewing it now would move its end later by at most
        :data:`RENEW_SLACK_S`), the append is one statement, its own transaction: it inserts
        the entries only if the run is running, held by ``owner``, holds ``seq`` entries and
        its lease is fresh. Otherwise (or when it inserted nothing) it is a transaction of
        three statements: one that checks the run and renews its lease (or ends it), the
        inserts (one ``executemany``), the commit; the checks' answers are only read when they
        fail, to say what is wrong."""
        texts = entry_texts(run_id, seq, entries)
        first: str | float  # the end reason, or the lease's new end
        if end_reason is not None:
            check_text(run_id, "end reason", end_reason)
            checked, first = _APPEND_FINISH, end_reason
        elif not texts:
            return
        else:
            now = time.time()
            checked, first = _APPEND_RENEW, now + lease_s
            fresh = now + lease_s - min(RENEW_SLACK_S, lease_s / 10)
            if self._append_fresh(run_id, seq, texts, owner, fresh):
                return
        rows = [(run_id, seq + i, t) for i, t in enumerate(texts)]
        last = seq + len(rows) - 1
        what = f"take entry {seq}" if last <= seq else f"take entries {seq} to {last}"
        with self._write(run_id, what) as conn:
            if conn.execute(checked, (first, run_id, owner, seq)).rowcount != 1:
                self._refuse_append(conn, run_id, seq, owner)
            conn.executemany(_INSERT, rows)

    def _append_fresh(
        self, run_id: str, seq: int, texts: list[str], owner: str, fresh: float
    ) -> bool:
        """Append ``texts`` in one statement if the run's lease lasts until ``fresh`` or later
        (and the checks of :meth:`append_many` pass); False when that inserted nothing, or
        there are too many texts for one statement."""
        count = len(texts)
        if count > len(_FRESH_INSERTS):
            return False
        sql = _FRESH_INSERTS[count - 1]
        last = seq + count - 1
        what = f"take entry {seq}" if last <= seq else f"take entries {seq} to {last}"
        with self._lock:
            conn = self._live(run_id)
            try:
                inserted = conn.execute(sql, (run_id, seq, owner, fresh, *texts)).rowcount
            except sqlite3.Error as exc:
                raise self._error(exc, run_id, what) from exc
            except UnicodeEncodeError:
                raise self._unknown(run_id) from None
        return inserted == count

    def _refuse_append(self, conn: sqlite3.Connection, run_id: str, seq: int, owner: str) -> None:
        """An append's checks failed: raise what is wrong (no such run, finished, held by
        another owner, another number of entries), in the order :meth:`append_many` checks."""
        row = conn.execute(_APPEND_STATE, (run_id,)).fetchone()
        if row is None:
            raise self._unknown(run_id)
        status, reason, holder, last = row
        check_owner(run_id, status, reason, holder, owner, "be appended to")
        check_seq(run_id, seq, 0 if last is None else last + 1)
        raise RunStoreError(  # pragma: no cover - the checks above found what failed
            f"run {run_id!r} in the run store {self.path!r} refused entry {seq}"
        )

    def finish(self, run_id: str, end_reason: str, *, owner: str) -> None:
        check_text(run_id, "end reason", end_reason)
        with self._write(run_id, "be finished") as conn:
            row = conn.execute(_STATE, (run_id,)).fetchone()
            if row is None:
                raise self._unknown(run_id)
            check_owner(run_id, row[0], row[1], row[2], owner, "be finished")
            conn.execute(_FINISH, (end_reason, run_id))

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
            entries.append(loads(data, f"entry {seq} of {where}"))
        session_id, header, status, end_reason, owner, lease_until, created = row
        return StoredRun(
            run_id=run_id,
            session_id=session_id,
            header=loads(header, f"the header of {where}"),
            entries=entries,
            status=status_of(status, where),
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
                status_of(status, f"run {run_id!r} in the run store {self.path!r}"),
                end_reason,
                created,
                count,
            )
            for run_id, sid, status, end_reason, created, count in rows
        ]

    def acquire_session(self, session_id: str, owner: str, *, lease_s: float) -> None:
        check_session_names(session_id, owner)
        with self._write(None, f"lease session {session_id!r}") as conn:
            row = conn.execute(_SESSION, (session_id,)).fetchone()
            now = time.time()
            holder, until = row if row is not None else (None, None)
            check_session_acquire(session_id, holder, until, owner, now)
            conn.execute(_LEASE_SESSION, (session_id, owner, now + lease_s))

    def release_session(self, session_id: str, owner: str) -> None:
        with self._lock:
            conn = self._live(None)
            try:
                conn.execute(_RELEASE_SESSION, (session_id, owner))
            except sqlite3.Error as exc:
                raise self._error(exc, None, f"release session {session_id!r}") from exc
            except UnicodeEncodeError:  # no such session or owner: nothing to release
                pass

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
