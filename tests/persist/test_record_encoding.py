"""What a journaled run costs, kept honest: the codec's records (RecordData) are encoded once,
by pydantic's serializer, to the text the escaping writer gives (by value), and a SQLite append
that checks the run in one statement refuses, and writes, exactly what it did before."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    run_agent_loop,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist import json_text
from agentcore_fsm.persist.codec import RecordData, record_text
from agentcore_fsm.persist.journal import (
    JournaledLoopMachine,
    current_declaration_hash,
    declaration_hash,
    declarations_hash,
)
from agentcore_fsm.persist.store import (
    JournalConflictError,
    LeaseLostError,
    MemoryRunStore,
    RunStoreError,
    SqliteRunStore,
)

ME = "host.invalid:1:mine0001"
OTHER = "host.invalid:1:other002"

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    return False


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON data, NaN equal to NaN and -0.0 told from 0.0 (by the escaping writer's
    text of each)."""
    return json_text.dumps(a) == json_text.dumps(b)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_record_text_reads_back_as_the_escaping_writer_s_text(value: Any) -> None:
    record = RecordData({"value": value, "clock": [1, 2]})
    fast = record_text(record)
    slow = json_text.dumps(record)
    if fast is None:  # only a surrogate sends it to the escaping writer
        assert _has_surrogate(value)
        return
    assert _same(json_text.loads(fast), json_text.loads(slow))
    assert _same(json_text.loads(fast), dict(record))


def test_only_record_data_is_encoded_unchecked() -> None:
    class Mine(RecordData):
        pass

    assert record_text({"a": 1}) is None  # a plain dict: the store checks it
    assert record_text(Mine({"a": 1})) is None
    assert record_text(RecordData({"a": "\ud83d"})) is None  # a lone surrogate: escaped
    assert record_text(RecordData({"a": [1, "é", None, math.inf]})) == (
        '{"a":[1,"é",null,Infinity]}'
    )


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_store_keeps_record_data_by_value_surrogates_and_nan_included(
    tmp_path: Path, kind: str
) -> None:
    store: Any = MemoryRunStore() if kind == "memory" else SqliteRunStore(tmp_path / "s.db")
    header = RecordData({"format": 2, "name": "h\udc00"})
    store.create_run("r", header, session_id=None, owner=ME, lease_s=30)
    entries = [RecordData({"x": math.nan, "t": "a\ud83d\ude00b"}), RecordData({"y": [1.5e-7]})]
    store.append_many("r", 0, entries, owner=ME, lease_s=30)
    run = store.load("r")
    assert run.header == {"format": 2, "name": "h\udc00"}
    assert run.entries[0]["t"] == "a\ud83d\ude00b" and math.isnan(run.entries[0]["x"])
    assert run.entries[1] == {"y": [1.5e-7]}
    store.close()
    if kind == "sqlite":  # the surrogates as upper-case escapes, each its own
        with sqlite3.connect(tmp_path / "s.db") as conn:
            (data,) = conn.execute("SELECT data FROM entries WHERE seq = 0").fetchone()
        assert "\\uD83D\\uDE00" in data and "NaN" in data


class Spy(MemoryRunStore):
    """A memory store that keeps what the journal handed it."""

    def __init__(self) -> None:
        super().__init__()
        self.given: list[Any] = []

    def create_run(self, run_id: str, header: Any, **kwargs: Any) -> None:
        self.given.append(header)
        super().create_run(run_id, header, **kwargs)

    def append_many(self, run_id: str, seq: int, entries: Any, **kwargs: Any) -> None:
        self.given.extend(entries)
        super().append_many(run_id, seq, entries, **kwargs)


def test_a_journaled_run_hands_its_store_record_data_that_reads_back_equal() -> None:
    async def add(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text=str(params["a"] + 1))], details={"k": 1})

    tool = AgentTool("add", "Add one.", {"type": "object"}, add)
    model = FauxProvider(
        [
            faux_response(tool_calls=[faux_tool_call("add", {"a": 1}, id="c1")]),
            faux_response("2."),
        ]
    )
    store = Spy()
    anyio.run(
        lambda: run_agent_loop(
            ["one more?"],
            AgentContext(tools=[tool]),
            AgentLoopConfig(model=Model(id="faux")),
            stream_fn=model,
            store=store,
            run_id="r",
        )
    )
    assert len(store.given) > 3
    assert all(type(given) is RecordData for given in store.given)
    run = store.load("r")
    assert run.status == "finished"
    assert [run.header, *run.entries] == [json_text.loads(json_text.dumps(g)) for g in store.given]


def test_the_declaration_hash_covers_the_path_not_the_prose() -> None:
    config = AgentLoopConfig(model=Model(id="faux"))
    first = JournaledLoopMachine([], AgentContext(), config)
    loop, call = first.declaration, first.call_declaration
    mine = declarations_hash(loop, call)
    assert declaration_hash(first) == mine == current_declaration_hash()
    assert first.header["declaration_hash"] == mine
    # the prose does not count: docs and comments reworded hash the same
    reworded = dataclasses.replace(
        loop,
        source_text="# reworded\n" + loop.source_text,
        states={n: dataclasses.replace(st, doc="reworded") for n, st in loop.states.items()},
        guards={n: "reworded" for n in loop.guards},
    )
    assert declarations_hash(reworded, call) == mine
    # the path does: a transition sent elsewhere, an emit dropped, a guard inverted
    t0, t1 = loop.transitions[0], loop.transitions[1]
    for changed in (
        dataclasses.replace(t0, dest="stopped"),
        dataclasses.replace(t0, emits=t0.emits[1:]),
    ):
        moved = dataclasses.replace(loop, transitions=(changed, *loop.transitions[1:]))
        assert declarations_hash(moved, call) != mine
    inverted = dataclasses.replace(t1, guards=(), unless=(*t1.unless, *t1.guards))
    moved = dataclasses.replace(loop, transitions=(t0, inverted, *loop.transitions[2:]))
    assert declarations_hash(moved, call) != mine
    assert declarations_hash(call, loop) != mine  # the order of the machines counts
    again = JournaledLoopMachine([], AgentContext(), config)  # from the cache: the same
    assert again.header["declaration_hash"] == mine


def test_a_sqlite_append_that_is_refused_writes_and_renews_nothing(tmp_path: Path) -> None:
    store = SqliteRunStore(tmp_path / "s.db")
    store.create_run("r", {}, session_id=None, owner=ME, lease_s=5)
    store.append_many("r", 0, [{"n": 0}], owner=ME, lease_s=5)
    lease = store.load("r").lease_until
    with pytest.raises(JournalConflictError, match="holds 1 entries"):
        store.append_many("r", 2, [{"n": 2}], owner=ME, lease_s=500)  # a gap
    with pytest.raises(JournalConflictError, match="holds 1 entries"):
        store.append_many("r", 0, [{"n": 0}], owner=ME, lease_s=500)  # again
    with pytest.raises(LeaseLostError):  # the owner is checked before the number
        store.append_many("r", 7, [{"n": 7}], owner=OTHER, lease_s=500)
    with pytest.raises(LeaseLostError):
        store.append_many("r", 1, [{"n": 1}], owner=OTHER, lease_s=500, end_reason="completed")
    run = store.load("r")
    assert (run.entries, run.lease_until, run.status) == ([{"n": 0}], lease, "running")
    # an insert that fails after the checks passed: the lease's renewal is rolled back too
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute(
            'CREATE TRIGGER boom BEFORE INSERT ON entries WHEN NEW.data = \'{"n":"boom"}\' '
            "BEGIN SELECT RAISE(ABORT, 'boom'); END"
        )
    with pytest.raises(RunStoreError, match="boom"):
        store.append_many("r", 1, [{"n": 1}, {"n": "boom"}], owner=ME, lease_s=500)
    run = store.load("r")
    assert (run.entries, run.lease_until, run.status) == ([{"n": 0}], lease, "running")
    store.append_many("r", 1, [{"n": 1}], owner=ME, lease_s=500, end_reason="completed")
    run = store.load("r")
    assert (run.entries, run.status, run.end_reason) == (
        [{"n": 0}, {"n": 1}],
        "finished",
        "completed",
    )
    store.close()
