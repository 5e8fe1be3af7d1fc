"""How ``SqliteRunStore`` writes a journal's groups (docs/survive.md#what-a-write-costs): while a
run's lease is fresh, a group is one statement, its own transaction; otherwise a transaction that
renews the lease. Either way the group is appended all or none, after the same checks, and a
refused group writes nothing."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from agentcore_fsm.persist.sqlite_store import RENEW_SLACK_S
from agentcore_fsm.persist.store import (
    JournalConflictError,
    LeaseLostError,
    RunFinishedError,
    SqliteRunStore,
    UnknownRunError,
    default_owner,
)

ME = f"{socket.gethostname()}:{os.getpid()}:writes01"
OTHER = f"{socket.gethostname()}:{os.getpid()}:writes02"


def _statements(store: SqliteRunStore) -> list[str]:
    """Start recording the SQL statements the store's own connection runs."""
    seen: list[str] = []
    conn = store._conn  # the test watches the statements of the store's own connection
    assert conn is not None
    conn.set_trace_callback(seen.append)
    return seen


def test_a_group_under_a_fresh_lease_is_one_statement_that_leaves_the_lease(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with SqliteRunStore(path) as store:
        store.create_run("r", {}, session_id=None, owner=ME, lease_s=100)
        created = store.load("r").lease_until
        seen = _statements(store)
        store.append_many("r", 0, [{"n": 0}, {"n": 1}], owner=ME, lease_s=100)
        assert len(seen) == 1 and seen[0].startswith("INSERT INTO entries")
        run = store.load("r")
        assert run.entries == [{"n": 0}, {"n": 1}]
        assert run.lease_until == created  # fresh: not renewed


def test_a_group_whose_renewal_is_due_renews_the_lease_in_its_transaction(
    tmp_path: Path,
) -> None:
    with SqliteRunStore(tmp_path / "s.db") as store:
        store.create_run("r", {}, session_id=None, owner=ME, lease_s=RENEW_SLACK_S * 3)
        seen = _statements(store)
        before = time.time()
        store.append_many("r", 0, [{"n": 0}], owner=ME, lease_s=100)
        assert [s for s in seen if s in ("BEGIN IMMEDIATE", "COMMIT")] == [
            "BEGIN IMMEDIATE",
            "COMMIT",
        ]
        lease = store.load("r").lease_until
        assert lease is not None and before + 100 <= lease <= time.time() + 100


def test_a_short_lease_is_renewed_within_a_tenth_of_it(tmp_path: Path) -> None:
    # lease_s under ten slacks: the slack is a tenth of it, so a lease of 0.5 s that has
    # 0.3 s left is renewed (it would be left alone with the full second of slack)
    with SqliteRunStore(tmp_path / "s.db") as store:
        store.create_run("r", {}, session_id=None, owner=ME, lease_s=0.3)
        store.append_many("r", 0, [{"n": 0}], owner=ME, lease_s=0.5)
        lease = store.load("r").lease_until
        assert lease is not None and lease > time.time() + 0.35


@pytest.mark.parametrize("count", [1, 32, 33, 80])
def test_groups_of_any_size_are_appended_in_order(tmp_path: Path, count: int) -> None:
    with SqliteRunStore(tmp_path / "s.db") as store:
        store.create_run("r", {}, session_id=None, owner=ME, lease_s=100)
        store.append_many("r", 0, [{"k": "first"}], owner=ME, lease_s=100)
        group = [{"n": i, "text": "é\U0001f600" * i} for i in range(count)]
        store.append_many("r", 1, group, owner=ME, lease_s=100)
        assert store.load("r").entries == [{"k": "first"}, *group]
        with pytest.raises(JournalConflictError, match=f"holds {count + 1} entries"):
            store.append_many("r", count, [{"late": 1}], owner=ME, lease_s=100)


def test_a_refused_group_under_a_fresh_lease_writes_nothing_and_says_why(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with SqliteRunStore(path) as store:
        store.create_run("r", {}, session_id=None, owner=ME, lease_s=100)
        store.append_many("r", 0, [{"n": 0}], owner=ME, lease_s=100)
        with pytest.raises(JournalConflictError, match="cannot take entry 3"):
            store.append_many("r", 3, [{"n": 3}, {"n": 4}], owner=ME, lease_s=100)
        with pytest.raises(LeaseLostError, match=OTHER):
            store.append_many("r", 1, [{"n": 1}], owner=OTHER, lease_s=100)
        with pytest.raises(UnknownRunError, match="'nope'"):
            store.append_many("nope", 0, [{"n": 0}], owner=ME, lease_s=100)
        with pytest.raises(UnknownRunError):
            store.append_many("\ud800", 0, [{"n": 0}], owner=ME, lease_s=100)
        store.finish("r", "completed", owner=ME)
        with pytest.raises(RunFinishedError, match="completed"):
            store.append_many("r", 1, [{"n": 1}], owner=ME, lease_s=100)
        assert store.load("r").entries == [{"n": 0}]


def test_a_lease_taken_over_meanwhile_refuses_the_next_group(tmp_path: Path) -> None:
    # another process takes the run over (its lease expired, say): the store's next group for
    # the old owner writes nothing, though that owner's lease looked fresh to it
    path = tmp_path / "s.db"
    with SqliteRunStore(path) as store:
        store.create_run("r", {}, session_id=None, owner=ME, lease_s=100)
        store.append_many("r", 0, [{"n": 0}], owner=ME, lease_s=100)
        other = default_owner()
        raw = sqlite3.connect(path)
        with raw:
            raw.execute("UPDATE runs SET owner = ? WHERE run_id = 'r'", (other,))
        raw.close()
        with pytest.raises(LeaseLostError, match=other):
            store.append_many("r", 1, [{"n": 1}], owner=ME, lease_s=100)
        assert store.load("r").entries == [{"n": 0}]


def test_a_group_waits_for_another_connections_lock_and_then_fails_naming_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with SqliteRunStore(path, busy_timeout_s=0) as store:
        store.create_run("r", {}, session_id=None, owner=ME, lease_s=100)
        raw = sqlite3.connect(path, isolation_level=None)
        raw.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(Exception, match="cannot take entries 0 to 1: the file stayed"):
                store.append_many("r", 0, [{"n": 0}, {"n": 1}], owner=ME, lease_s=100)
        finally:
            raw.execute("ROLLBACK")
            raw.close()
        store.append_many("r", 0, [{"n": 0}], owner=ME, lease_s=100)
        assert store.load("r").entries == [{"n": 0}]
