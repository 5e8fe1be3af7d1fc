"""Run stores (docs/reference.md#runs-that-survive): both stores follow the same rules, and the
SQLite one keeps its runs across processes, reopenings and a kill -9.

The rules tested on both stores: a run is created once; entries are appended in order, one
number at a time, and an entry out of order writes nothing; leases (a live process of this host
keeps its run, a dead one loses it at once, another host's lease is taken once expired, an owner
whose lease was taken over can no longer write); finishing; listing runs; the errors' texts.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcore_fsm.persist import store as store_module
from agentcore_fsm.persist.store import (
    SCHEMA_VERSION,
    JournalConflictError,
    LeaseLostError,
    MemoryRunStore,
    RunExistsError,
    RunFinishedError,
    RunInfo,
    RunOwnedError,
    RunStore,
    RunStoreError,
    SqliteRunStore,
    StoreFormatError,
    UnknownRunError,
    default_owner,
)

ROOT = Path(__file__).resolve().parents[2]
HERE = socket.gethostname()
ME = f"{HERE}:{os.getpid()}:mine0001"
"""An owner that is this (live) process."""
ALSO_ME = f"{HERE}:{os.getpid()}:other002"
"""Another owner in this (live) process."""
ELSEWHERE = "elsewhere.invalid:4242:remote03"
"""An owner on another host."""


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    made: Any = MemoryRunStore() if request.param == "memory" else SqliteRunStore(tmp_path / "s.db")
    with made:
        yield made


def dead_pid() -> int:
    """The pid of a process of this host that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


# --- both stores --------------------------------------------------------------------------------


def test_a_store_is_a_run_store_and_every_error_a_run_store_error(store: Any) -> None:
    assert isinstance(store, RunStore)
    for error in (
        UnknownRunError,
        RunExistsError,
        RunOwnedError,
        LeaseLostError,
        RunFinishedError,
        StoreFormatError,
        JournalConflictError,
    ):
        assert issubclass(error, RunStoreError)


def test_a_created_run_loads_back_as_created(store: Any) -> None:
    header = {"prompts": [{"role": "user", "content": "hi"}], "n": 1.5, "none": None}
    before = time.time()
    store.create_run("r1", header, session_id="s1", owner=ME, lease_s=30)
    header["prompts"].append("changed afterwards")  # the store kept its own copy
    run = store.load("r1")
    assert run.run_id == "r1" and run.session_id == "s1"
    assert run.header == {"prompts": [{"role": "user", "content": "hi"}], "n": 1.5, "none": None}
    assert run.entries == [] and run.status == "running" and run.end_reason is None
    assert run.owner == ME
    assert run.lease_until is not None and before + 29 < run.lease_until < time.time() + 31
    assert before - 1 < run.created <= time.time()
    run.header["n"] = 2  # a load is a copy too
    assert store.load("r1").header["n"] == 1.5


def test_a_run_id_is_created_once(store: Any) -> None:
    store.create_run("r1", {"first": True}, session_id=None, owner=ME, lease_s=30)
    with pytest.raises(RunExistsError, match="'r1'"):
        store.create_run("r1", {"first": False}, session_id="x", owner=ALSO_ME, lease_s=30)
    run = store.load("r1")
    assert run.header == {"first": True} and run.owner == ME and run.session_id is None


def test_entries_are_appended_in_order_and_one_out_of_order_writes_nothing(store: Any) -> None:
    store.create_run("r1", {}, session_id=None, owner=ME, lease_s=30)
    entry = {"input": "start", "clock": [1]}
    for seq in range(3):
        store.append("r1", seq, dict(entry, seq=seq), owner=ME, lease_s=30)
    entry["clock"].append(2)  # changing a dict after appending it changes nothing stored
    for wrong in (5, 1, 0):
        with pytest.raises(JournalConflictError) as info:
            store.append("r1", wrong, {"wrong": wrong}, owner=ME, lease_s=30)
        text = str(info.value)
        assert "'r1'" in text and str(wrong) in text and "3" in text
    assert store.load("r1").entries == [
        {"input": "start", "clock": [1], "seq": s} for s in range(3)
    ]
    store.append("r1", 3, {"seq": 3}, owner=ME, lease_s=30)
    assert len(store.load("r1").entries) == 4


def test_an_append_renews_the_lease(store: Any) -> None:
    store.create_run("r1", {}, session_id=None, owner=ME, lease_s=1)
    store.append("r1", 0, {}, owner=ME, lease_s=100)
    lease_until = store.load("r1").lease_until
    assert lease_until is not None and lease_until > time.time() + 90


def test_a_live_process_of_this_host_keeps_its_run_even_past_its_lease(store: Any) -> None:
    store.create_run("r1", {}, session_id=None, owner=ME, lease_s=-1)  # lease time passed
    with pytest.raises(RunOwnedError) as info:
        store.acquire("r1", ALSO_ME, lease_s=30)
    assert "'r1'" in str(info.value) and ME in str(info.value)
    assert store.load("r1").owner == ME
    store.acquire("r1", ME, lease_s=30)  # its own owner may take it again
    assert store.load("r1").owner == ME


def test_another_hosts_lease_is_taken_over_once_it_expired(store: Any) -> None:
    store.create_run("held", {}, session_id=None, owner=ELSEWHERE, lease_s=60)
    with pytest.raises(RunOwnedError) as info:
        store.acquire("held", ME, lease_s=30)
    assert "'held'" in str(info.value) and ELSEWHERE in str(info.value)
    store.create_run("expiring", {}, session_id=None, owner=ELSEWHERE, lease_s=0.05)
    time.sleep(0.1)
    store.acquire("expiring", ME, lease_s=30)
    run = store.load("expiring")
    assert run.owner == ME and run.lease_until is not None and run.lease_until > time.time() + 20


def test_a_dead_process_of_this_host_loses_its_run_at_once(store: Any) -> None:
    dead = f"{HERE}:{dead_pid()}:dead0004"
    store.create_run("r1", {}, session_id=None, owner=dead, lease_s=600)
    store.append("r1", 0, {"by": "dead"}, owner=dead, lease_s=600)
    store.acquire("r1", ME, lease_s=30)
    assert store.load("r1").owner == ME
    # the old owner cannot write any more: nothing it sends is stored
    with pytest.raises(LeaseLostError) as info:
        store.append("r1", 1, {"by": "dead"}, owner=dead, lease_s=600)
    assert "'r1'" in str(info.value) and ME in str(info.value)
    with pytest.raises(LeaseLostError, match="'r1'"):
        store.finish("r1", "completed", owner=dead)
    run = store.load("r1")
    assert run.entries == [{"by": "dead"}] and run.status == "running" and run.owner == ME
    store.append("r1", 1, {"by": "me"}, owner=ME, lease_s=30)
    assert store.load("r1").entries == [{"by": "dead"}, {"by": "me"}]


def test_an_owner_that_does_not_name_a_process_is_taken_over_once_expired(store: Any) -> None:
    store.create_run("odd", {}, session_id=None, owner="not an owner", lease_s=-1)
    store.acquire("odd", ME, lease_s=30)
    assert store.load("odd").owner == ME


def test_release_gives_up_the_lease_of_its_owner_only(store: Any) -> None:
    store.create_run("r1", {}, session_id=None, owner=ME, lease_s=30)
    store.release("r1", ALSO_ME)  # not the owner: nothing happens
    assert store.load("r1").owner == ME
    store.release("r1", ME)
    run = store.load("r1")
    assert run.owner is None and run.lease_until is None and run.status == "running"
    with pytest.raises(LeaseLostError, match="'r1'"):  # released: the lease must be taken again
        store.append("r1", 0, {}, owner=ME, lease_s=30)
    store.release("nope", ME)  # an unknown run: nothing to release, no error
    store.acquire("r1", ALSO_ME, lease_s=30)  # nobody holds it: anyone may take it
    assert store.load("r1").owner == ALSO_ME


def test_a_finished_run_cannot_be_leased_or_written(store: Any) -> None:
    store.create_run("r1", {}, session_id=None, owner=ME, lease_s=30)
    store.append("r1", 0, {"a": 1}, owner=ME, lease_s=30)
    with pytest.raises(LeaseLostError, match="'r1'"):
        store.finish("r1", "completed", owner=ALSO_ME)
    store.finish("r1", "completed", owner=ME)
    run = store.load("r1")
    assert (run.status, run.end_reason, run.owner, run.lease_until) == (
        "finished",
        "completed",
        None,
        None,
    )
    with pytest.raises(RunFinishedError) as info:
        store.acquire("r1", ME, lease_s=30)
    assert "'r1'" in str(info.value) and "finished" in str(info.value)
    assert "completed" in str(info.value)
    with pytest.raises(RunFinishedError, match="'r1'"):
        store.append("r1", 1, {}, owner=ME, lease_s=30)
    with pytest.raises(RunFinishedError, match="'r1'"):
        store.finish("r1", "error", owner=ME)
    assert store.load("r1").entries == [{"a": 1}] and store.load("r1").end_reason == "completed"


def test_runs_are_listed_in_creation_order_and_by_session(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [2000.0]
    monkeypatch.setattr(store_module.time, "time", lambda: clock[0])
    store.create_run("late", {}, session_id="a", owner=ME, lease_s=30)
    clock[0] = 1000.0  # created earlier, inserted later
    store.create_run("early", {}, session_id="b", owner=ME, lease_s=30)
    clock[0] = 3000.0  # two runs created at the same time: insertion order
    store.create_run("z-tie", {}, session_id="a", owner=ME, lease_s=30)
    store.create_run("a-tie", {}, session_id=None, owner=ME, lease_s=30)
    store.append("z-tie", 0, {}, owner=ME, lease_s=30)
    store.append("z-tie", 1, {}, owner=ME, lease_s=30)
    store.finish("late", "aborted", owner=ME)
    assert [r.run_id for r in store.runs()] == ["early", "late", "z-tie", "a-tie"]
    assert store.runs("a") == [
        RunInfo("late", "a", "finished", "aborted", 2000.0, 0),
        RunInfo("z-tie", "a", "running", None, 3000.0, 2),
    ]
    assert [r.run_id for r in store.runs("b")] == ["early"]
    assert store.runs("nobody") == []


def test_an_unknown_run_is_named(store: Any) -> None:
    calls = [
        lambda: store.load("ghost"),
        lambda: store.acquire("ghost", ME, lease_s=30),
        lambda: store.append("ghost", 0, {}, owner=ME, lease_s=30),
        lambda: store.finish("ghost", "completed", owner=ME),
    ]
    for call in calls:
        with pytest.raises(UnknownRunError, match="'ghost'"):
            call()
    assert store.runs() == []


def test_any_str_survives_the_round_trip_lone_surrogates_included(store: Any) -> None:
    odd = "a\ud800b\udfff\u0000é😀"
    header = {"text": odd, odd: [odd, {"k": odd}]}
    entry = {"delta": "\ud800", "more": odd}
    store.create_run("r1", header, session_id="s", owner=ME, lease_s=30)
    store.append("r1", 0, entry, owner=ME, lease_s=30)
    run = store.load("r1")
    assert run.header == header and run.entries == [entry]


def test_names_must_be_plain_text(store: Any) -> None:
    # ids, owners and end reasons are text columns: a lone surrogate is refused up front
    with pytest.raises(RunStoreError, match="session id"):
        store.create_run("r1", {}, session_id="s\ud800", owner=ME, lease_s=30)
    with pytest.raises(RunStoreError, match="run id"):
        store.create_run("r\ud800", {}, session_id=None, owner=ME, lease_s=30)
    assert store.runs() == []
    store.create_run("r1", {}, session_id=None, owner=ME, lease_s=30)
    with pytest.raises(RunStoreError, match="owner"):
        store.acquire("r1", "o\ud800", lease_s=30)
    with pytest.raises(RunStoreError, match="end reason"):
        store.finish("r1", "e\ud800", owner=ME)
    with pytest.raises(UnknownRunError):
        store.load("r\ud800")
    with pytest.raises(UnknownRunError):
        store.append("r\ud800", 0, {}, owner=ME, lease_s=30)
    store.release("r\ud800", ME)
    assert store.runs("s\ud800") == []
    assert store.load("r1").status == "running"


def test_values_that_are_not_json_are_refused_and_nothing_is_written(store: Any) -> None:
    with pytest.raises(RunStoreError, match="'r1'"):
        store.create_run("r1", {"x": object()}, session_id=None, owner=ME, lease_s=30)
    with pytest.raises(RunStoreError, match="'r1'"):
        store.create_run("r1", ["not", "a", "dict"], session_id=None, owner=ME, lease_s=30)
    with pytest.raises(RunStoreError, match="run id"):
        store.create_run("", {}, session_id=None, owner=ME, lease_s=30)
    assert store.runs() == []
    store.create_run("r1", {}, session_id=None, owner=ME, lease_s=30)
    with pytest.raises(RunStoreError, match="'r1'"):
        store.append("r1", 0, {"x": {1, 2}}, owner=ME, lease_s=30)
    assert store.load("r1").entries == []


def test_a_closed_store_refuses_to_work(store: Any) -> None:
    store.create_run("r1", {}, session_id=None, owner=ME, lease_s=30)
    store.close()
    with pytest.raises(RunStoreError, match="closed"):
        store.load("r1")
    with pytest.raises(RunStoreError, match="closed"):
        store.append("r1", 0, {}, owner=ME, lease_s=30)
    store.close()  # twice is fine


def test_a_group_of_entries_is_appended_all_or_none(store: Any) -> None:
    store.create_run("r1", {}, session_id=None, owner=ME, lease_s=1)
    store.append_many("r1", 0, [{"n": 0}, {"n": 1}, {"n": 2}], owner=ME, lease_s=100)
    assert store.load("r1").lease_until > time.time() + 50  # renewed
    with pytest.raises(JournalConflictError, match="entry 2"):
        store.append_many("r1", 2, [{"n": 2}, {"n": 3}], owner=ME, lease_s=30)
    with pytest.raises(RunStoreError, match="entry 4"):  # the second one is not JSON
        store.append_many("r1", 3, [{"n": 3}, {"n": object()}], owner=ME, lease_s=30)
    with pytest.raises(LeaseLostError):
        store.append_many("r1", 3, [{"n": 3}], owner=ALSO_ME, lease_s=30)
    store.append_many("r1", 3, [], owner=ME, lease_s=30)  # nothing to write
    assert store.load("r1").entries == [{"n": 0}, {"n": 1}, {"n": 2}]
    # the last group and the end, in one step
    store.append_many("r1", 3, [{"n": 3}], owner=ME, lease_s=30, end_reason="completed")
    run = store.load("r1")
    assert run.entries[-1] == {"n": 3} and run.status == "finished"
    assert (run.end_reason, run.owner, run.lease_until) == ("completed", None, None)
    with pytest.raises(RunFinishedError):
        store.append_many("r1", 4, [{"n": 4}], owner=ME, lease_s=30)
    store.create_run("r2", {}, session_id=None, owner=ME, lease_s=30)
    with pytest.raises(RunStoreError, match="end reason"):
        store.append_many("r2", 0, [{"n": 0}], owner=ME, lease_s=30, end_reason="e\ud800")
    assert store.load("r2").entries == [] and store.load("r2").status == "running"
    store.append_many("r2", 0, [], owner=ME, lease_s=30, end_reason="aborted")  # the end alone
    assert store.load("r2").end_reason == "aborted"


def test_a_store_journal_writes_groups_and_respects_a_subclass_s_append(tmp_path: Path) -> None:
    """StoreJournal appends a group in one transaction (``append_many``); a store subclass that
    overrides ``append`` alone still sees every entry through it."""
    import anyio

    from agentcore_fsm.persist.run_journal import StoreJournal

    class Counting(SqliteRunStore):
        appended: list[int]

        def append(self, run_id: str, seq: int, entry: Any, **kwargs: Any) -> None:
            self.appended.append(seq)
            super().append(run_id, seq, entry, **kwargs)

    async def write(store: Any) -> None:
        journal = StoreJournal(store, "r", owner=ME)
        assert await journal.open({"h": 1}) == 0
        await journal.append(0, [{"n": 0}, {"n": 1}])
        await journal.close(2, [{"n": 2}], "completed")

    with Counting(tmp_path / "a.db") as counting:
        counting.appended = []
        anyio.run(write, counting)
        assert counting.appended == [0, 1, 2]  # one by one, through its own append
        assert counting.load("r").status == "finished"
    with SqliteRunStore(tmp_path / "b.db") as plain:
        anyio.run(write, plain)
        run = plain.load("r")
        assert run.entries == [{"n": 0}, {"n": 1}, {"n": 2}] and run.end_reason == "completed"


def test_default_owner_names_this_host_and_process() -> None:
    host, pid, nonce = default_owner().rsplit(":", 2)
    assert host == HERE and pid == str(os.getpid()) and len(nonce) == 8
    assert default_owner() != default_owner()


# --- SQLite ---------------------------------------------------------------------------------------


def test_a_sqlite_store_keeps_its_runs_across_reopening(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SqliteRunStore(path) as first:
        first.create_run("r1", {"h": 1}, session_id="s", owner=ME, lease_s=30)
        first.append("r1", 0, {"e": 0}, owner=ME, lease_s=30)
        first.create_run("r2", {"h": 2}, session_id="s", owner=ME, lease_s=30)
        first.finish("r2", "completed", owner=ME)
        before = first.load("r1"), first.runs()
    with SqliteRunStore(str(path)) as again:
        assert (again.load("r1"), again.runs()) == before
        again.append("r1", 1, {"e": 1}, owner=ME, lease_s=30)
        assert again.load("r1").entries == [{"e": 0}, {"e": 1}]
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    with SqliteRunStore(path) as store:
        store.create_run("r1", {}, session_id=None, owner=ME, lease_s=30)
        assert store.runs()[0].run_id == "r1"


def test_a_file_that_is_not_a_database_is_named_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    junk = os.urandom(8192)
    path.write_bytes(junk)
    with pytest.raises(StoreFormatError) as info:
        SqliteRunStore(path)
    assert str(path) in str(info.value)
    assert path.read_bytes() == junk


def test_a_store_of_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    with SqliteRunStore(path):
        pass
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 6}")
    raw.close()
    with pytest.raises(StoreFormatError) as info:
        SqliteRunStore(path)
    text = str(info.value)
    assert str(path) in text and "newer" in text
    assert str(SCHEMA_VERSION + 6) in text and str(SCHEMA_VERSION) in text


def test_another_applications_database_is_refused_and_not_changed(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE customers (name TEXT)")
    raw.commit()
    raw.close()
    with pytest.raises(StoreFormatError) as info:
        SqliteRunStore(path)
    assert str(path) in str(info.value) and "not a run store" in str(info.value)
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 0
    raw.close()


def test_a_row_that_is_not_json_is_named(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SqliteRunStore(path) as store:
        store.create_run("bad-entry", {}, session_id=None, owner=ME, lease_s=30)
        store.append("bad-entry", 0, {"ok": True}, owner=ME, lease_s=30)
        store.append("bad-entry", 1, {"ok": True}, owner=ME, lease_s=30)
        store.create_run("bad-header", {}, session_id=None, owner=ME, lease_s=30)
    raw = sqlite3.connect(path)
    raw.execute("UPDATE entries SET data = '{\"cut\": ' WHERE run_id = 'bad-entry' AND seq = 1")
    raw.execute("UPDATE runs SET header = '[1, 2]' WHERE run_id = 'bad-header'")
    raw.commit()
    raw.close()
    with SqliteRunStore(path) as store:
        with pytest.raises(StoreFormatError) as info:
            store.load("bad-entry")
        assert "'bad-entry'" in str(info.value) and "entry 1" in str(info.value)
        with pytest.raises(StoreFormatError, match="'bad-header'"):
            store.load("bad-header")
        assert [r.entries for r in store.runs()] == [2, 0]  # listing does not read the JSON


def test_two_store_objects_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with SqliteRunStore(path) as one, SqliteRunStore(path) as two:
        one.create_run("r1", {}, session_id=None, owner=ME, lease_s=30)
        one.append("r1", 0, {"by": "one"}, owner=ME, lease_s=30)
        assert two.load("r1").entries == [{"by": "one"}]
        with pytest.raises(JournalConflictError):
            two.append("r1", 0, {"by": "two"}, owner=ME, lease_s=30)
        two.append("r1", 1, {"by": "two"}, owner=ME, lease_s=30)
        assert one.load("r1").entries == [{"by": "one"}, {"by": "two"}]
        with pytest.raises(RunOwnedError):
            two.acquire("r1", ALSO_ME, lease_s=30)


CONCURRENT_WRITER = """
import sys
from agentcore_fsm.persist.store import SqliteRunStore, default_owner

store = SqliteRunStore(sys.argv[1])
owner = default_owner()
store.create_run("theirs", {}, session_id="both", owner=owner, lease_s=30)
print("ready", flush=True)
for seq in range(int(sys.argv[2])):
    store.append("theirs", seq, {"seq": seq, "by": "child"}, owner=owner, lease_s=30)
store.finish("theirs", "completed", owner=owner)
store.close()
"""


def test_two_processes_appending_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    n = 1000
    with SqliteRunStore(path) as store:
        store.create_run("ours", {}, session_id="both", owner=ME, lease_s=30)
        child = subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_WRITER, str(path), str(n)],
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        for seq in range(n):
            store.append("ours", seq, {"seq": seq, "by": "parent"}, owner=ME, lease_s=30)
        assert child.wait(timeout=30) == 0
        assert store.load("ours").entries == [{"seq": s, "by": "parent"} for s in range(n)]
        theirs = store.load("theirs")
        assert theirs.entries == [{"seq": s, "by": "child"} for s in range(n)]
        assert theirs.status == "finished"
        assert [(r.run_id, r.entries) for r in store.runs("both")] == [("ours", n), ("theirs", n)]


KILLED_WRITER = """
import sys
from agentcore_fsm.persist.store import SqliteRunStore, default_owner

store = SqliteRunStore(sys.argv[1])
owner = default_owner()
store.create_run("victim", {"kind": "killed"}, session_id=None, owner=owner, lease_s=30)
seq = 0
while True:
    payload = str(seq) * (1000 + 37 * seq)  # several pages each: a torn row would show
    store.append("victim", seq, {"seq": seq, "payload": payload}, owner=owner, lease_s=30)
    print(seq, flush=True)
    seq += 1
"""


def test_every_append_committed_before_a_kill_9_survives_whole(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    assert child.stdout is not None
    printed: list[int] = []
    while len(printed) < 40:
        line = child.stdout.readline()
        assert line, "the writer stopped before it was killed"
        printed.append(int(line))
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    assert printed == list(range(len(printed)))
    with SqliteRunStore(path) as store:
        run = store.load("victim")
        assert run.status == "running" and run.header == {"kind": "killed"}
        assert len(run.entries) >= len(printed)  # it may have committed one more, unprinted
        for seq, entry in enumerate(run.entries):
            assert entry == {"seq": seq, "payload": str(seq) * (1000 + 37 * seq)}
        # the killed process's lease is taken over at once, and the journal goes on
        assert run.owner is not None
        store.acquire("victim", ME, lease_s=30)
        store.append("victim", len(run.entries), {"after": "kill"}, owner=ME, lease_s=30)
        assert store.load("victim").entries[-1] == {"after": "kill"}


def test_a_store_in_a_missing_folder_is_refused_and_a_new_one_gets_its_schema(
    tmp_path: Path,
) -> None:
    path = tmp_path / "new" / "runs.db"
    with pytest.raises(RunStoreError, match="cannot be opened"):
        SqliteRunStore(path)  # its folder does not exist
    path.parent.mkdir()
    with SqliteRunStore(path) as store:
        assert repr(store) == f"SqliteRunStore({str(path)!r})"
    raw = sqlite3.connect(path)
    tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"runs", "entries"} <= tables
    raw.close()
