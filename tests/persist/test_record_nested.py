"""Recordings of nested runs (docs/record.md#nested-runs): a ``tool_execution_update`` carrying a
nested run's event is written with the event in its camelCase JSON form and read back as a
:class:`~agentcore_fsm.core.nesting.NestedEvent`; the lines of a nested run's own record are
kept apart from its outer run's; older recordings still read. Every async test runs on trio and
on asyncio."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from nested_recordings import lines, record_nested, with_nested_record, write_lines

from agentcore_fsm.core.nesting import NestedEvent, levels, nested_event_of
from agentcore_fsm.devtools.testing import check_nested_run
from agentcore_fsm.persist.recorder import RunFileError, RunRecorder, load_run

pytestmark = pytest.mark.anyio


def nested_of(events: list[Any]) -> list[NestedEvent]:
    return [n for n in map(nested_event_of, events) if n is not None]


async def test_nested_events_are_written_in_their_json_form_and_read_back_typed(
    anyio_backend: str, tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    live, messages = await record_nested(path)
    live_nested = nested_of(live)
    assert {n.path for n in live_nested} == {("c1",), ("c1", "r2")}

    written = [r for r in lines(path) if r["kind"] == "event"]
    marked = [r for r in written if r.get("nested") is True]
    assert len(marked) == len(live_nested)
    assert all(r["event"]["type"] == "tool_execution_update" for r in marked)
    for record, nested in zip(marked, live_nested, strict=True):
        details = record["event"]["partialResult"]["details"]
        assert set(details) == {"path", "agents", "event"}
        assert (tuple(details["path"]), tuple(details["agents"])) == (nested.path, nested.agents)
        assert details["event"]["type"] == nested.type
    # the inner events in camelCase, as an outer event is written
    inner = [r["event"]["partialResult"]["details"]["event"] for r in marked]
    delta = next(e for e in inner if e["type"] == "message_update")
    assert "assistantMessageEvent" in delta and "assistant_message_event" not in delta
    assert delta["assistantMessageEvent"]["contentIndex"] == 0
    start = next(e for e in inner if e["type"] == "tool_execution_start")
    assert start["toolCallId"] == "r1" and start["toolName"] == "add"
    deep = [r for r in marked if r["event"]["partialResult"]["details"]["path"] == ["c1", "r2"]]
    assert deep and all(
        r["event"]["partialResult"]["details"]["agents"] == ["researcher", "checker"] for r in deep
    )
    # an ordinary tool's update (the inner add's, inside its nested event) keeps its details
    updates = [e for e in inner if e["type"] == "tool_execution_update"]
    assert [u["partialResult"]["details"] for u in updates] == [{"step": 1}]

    run = load_run(path)
    read = nested_of(run.events)
    assert [(n.path, n.agents, n.type) for n in read] == [
        (n.path, n.agents, n.type) for n in live_nested
    ]
    assert [n.event.model_dump() for n in read if n.type == "message_end"] == [
        n.event.model_dump() for n in live_nested if n.type == "message_end"
    ]
    assert set(levels(run.events)) == {(), ("c1",), ("c1", "r2")}
    summaries = check_nested_run(run.events, messages)
    assert summaries[("c1",)] is not None and summaries[("c1",)].reason == "completed"
    assert summaries[("c1", "r2")] is not None


async def test_a_live_recorder_keeps_typed_nested_events_and_updates_false_drops_their_deltas(
    anyio_backend: str, tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    live, _ = await record_nested(path, updates=False, keep_events=True)
    run = load_run(path)
    assert not [e for e in run.events if e.type == "message_update"]
    kinds = {n.type for n in nested_of(run.events)}
    assert "message_update" not in kinds and {"agent_start", "message_end"} <= kinds
    assert len(nested_of(run.events)) == len(
        [n for n in nested_of(live) if n.type != "message_update"]
    )
    recorder = RunRecorder(keep_events=True)
    for event in live:
        recorder(event)
    kept = nested_of(recorder.events)
    assert len(kept) == len(nested_of(live)) and all(isinstance(n, NestedEvent) for n in kept)


async def test_an_unmarked_recording_still_reads_and_bad_marked_lines_are_refused(
    anyio_backend: str, tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    await record_nested(path, store=False)
    records = lines(path)
    marked = [i for i, r in enumerate(records) if r.get("nested")]
    # as written before recordings marked nested events: no mark, the details as they were
    old = [{k: v for k, v in r.items() if k != "nested"} for r in records]
    write_lines(path, old)
    assert len(nested_of(load_run(path).events)) == len(marked)

    # an unmarked update whose details only look like a nested event keeps them as they are
    lookalike = {"path": ["x"], "agents": [], "event": {"type": "nonsense"}}
    old[marked[0]]["event"]["partialResult"]["details"] = lookalike
    write_lines(path, old)
    events = load_run(path).events
    assert [
        e.partial_result.details
        for e in events
        if e.type == "tool_execution_update"
        and not isinstance(e.partial_result.details, NestedEvent)
    ] == [lookalike]
    assert len(nested_of(events)) == len(marked) - 1

    # a marked line is checked: the error names the line and what is wrong
    bad = [dict(r) for r in records]
    line = marked[0] + 1
    bad[marked[0]] = {**records[marked[0]], "nested": "yes"}
    write_lines(path, bad)
    with pytest.raises(RunFileError, match=rf"run.jsonl:{line}: an event record's 'nested' must"):
        load_run(path)
    start = next(i for i, r in enumerate(records) if r.get("event", {}).get("type") == "turn_start")
    write_lines(path, [{**r, "nested": True} if i == start else r for i, r in enumerate(records)])
    with pytest.raises(
        RunFileError,
        match=rf"run.jsonl:{start + 1}: invalid event: 'nested' marks a turn_start event, not a",
    ):
        load_run(path)
    details = dict(records[marked[0]]["event"]["partialResult"]["details"])
    details["agents"] = ["researcher", "extra"]
    bad[marked[0]] = records[marked[0]]
    bad[marked[0]]["event"]["partialResult"]["details"] = details
    write_lines(path, bad)
    with pytest.raises(
        RunFileError, match=rf"run.jsonl:{line}: invalid event: .*1 call ids but 2 agents"
    ):
        load_run(path)


async def test_the_records_of_nested_runs_are_kept_apart_from_the_outer_run(
    anyio_backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "run.jsonl"
    await record_nested(path)
    plain = load_run(path)
    (outer,) = plain.records
    assert outer.run_id == "outer-1" and plain.nested_records == []

    both = tmp_path / "with_nested.jsonl"
    write_lines(both, with_nested_record(lines(path)))
    with caplog.at_level(logging.WARNING, logger="agentcore_fsm"):
        run = load_run(both)
    assert caplog.records == []
    assert [r.run_id for r in run.records] == ["outer-1"]  # the one whose header has no parent
    (nested,) = run.nested_records
    assert nested.run_id == "outer-1/1.c1" and nested.end_reason == "completed"
    assert nested.header["parent"]["call"] == "c1" and len(nested.entries) == 2
    # the outer run reads as it did: its transitions, events and order
    assert run.transitions == plain.transitions
    assert [e.type for e in run.events] == [e.type for e in plain.events]
    assert run.order == plain.order

    # a file that holds only the record (no event lines): derived from the outer inputs only
    only = [r for r in lines(path) if r["kind"] not in ("event", "transition")]
    write_lines(both, with_nested_record(only))
    derived = load_run(both)
    write_lines(both, only)
    assert derived.transitions == load_run(both).transitions == plain.transitions
    assert [e.type for e in derived.events] == [e.type for e in load_run(both).events]


async def test_with_events_and_the_record_the_transitions_take_the_order_the_run_had(
    anyio_backend: str, tmp_path: Path
) -> None:
    """The store writes its inputs after the events they caused; the transitions derived from
    them are put among the events where the run took them (as transition lines say)."""
    live = tmp_path / "live.jsonl"
    await record_nested(live, store=False)  # transitions as they were taken
    stored = tmp_path / "stored.jsonl"
    await record_nested(stored, transitions=False)  # the record and the events
    want, got = load_run(live), load_run(stored)
    assert got.transitions == want.transitions
    assert got.order == want.order


def test_a_live_recorder_keeps_nested_runs_records_apart(tmp_path: Path) -> None:
    recorder = RunRecorder(tmp_path / "run.jsonl")
    parent = {"run": "outer-1", "call": "c1", "path": ["c1"], "agents": ["researcher"]}
    store = recorder.store
    store.create_run("outer-1", {"format": 2}, session_id=None, owner="me", lease_s=30)
    store.create_run(
        "outer-1/1.c1", {"format": 2, "parent": parent}, session_id=None, owner="me", lease_s=30
    )
    recorder.close()
    recorded = recorder.recorded()
    assert [r.run_id for r in recorded.records] == ["outer-1"]
    assert [r.run_id for r in recorded.nested_records] == ["outer-1/1.c1"]
    assert recorded.nested_records[0].header["parent"] == parent
