"""Replaying a recorded run whose tool was an agent
(docs/replay.md#what-is-reproduced-exactly): the outer run replays from its recording (the agent
tool's result and its nested events are played back, no inner model is called), the nested
updates are compared like any event, and the lines of a nested run's own record are left aside.
Every async test runs on trio and on asyncio."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from nested_recordings import lines, record_nested, with_nested_record, write_lines

from agentcore_fsm.core.nesting import nested_event_of
from agentcore_fsm.devtools.replay import main, replay_run
from agentcore_fsm.devtools.replay_compare import plain_event
from agentcore_fsm.devtools.testing import check_nested_run
from agentcore_fsm.persist.recording import load_run

pytestmark = pytest.mark.anyio

STALL = 5.0


@pytest.mark.parametrize(
    "store, transitions",
    [(False, True), (True, False), (True, True)],
    ids=["events-and-transitions", "record-and-events", "everything"],
)
async def test_a_recorded_nested_run_replays_identically(
    anyio_backend: str, tmp_path: Path, store: bool, transitions: bool
) -> None:
    path = tmp_path / "run.jsonl"
    live, messages = await record_nested(path, store=store, transitions=transitions)
    result = await replay_run(path, stall_timeout=STALL)
    assert result.ok, str(result)
    run = load_run(path)
    assert result.transitions == run.transitions
    replayed = [nested_event_of(e) for e in result.events]
    assert [(n.path, n.type) for n in replayed if n is not None] == [
        (n.path, n.type) for n in map(nested_event_of, live) if n is not None
    ]
    # compared as a recording holds them: the nested event's JSON form, path and agents
    update = next(e for e in result.events if nested_event_of(e) is not None)
    assert set(plain_event(update)["partialResult"]["details"]) == {"path", "agents", "event"}
    summaries = check_nested_run(result.events)  # every level's grammar and enclosure
    assert set(summaries) == {(), ("c1",), ("c1", "r2")}
    assert messages[-1].text() == "3."


async def test_a_recording_of_the_record_only_replays_without_the_nested_events(
    anyio_backend: str, tmp_path: Path
) -> None:
    """Without event lines the events are derived from the outer run's inputs: the agent
    tool's result is in its tool_finished entry, and the nested updates, progress only, are
    not in the record."""
    path = tmp_path / "run.jsonl"
    await record_nested(path, events=False, transitions=False)
    result = await replay_run(path, stall_timeout=STALL)
    assert result.ok, str(result)
    assert not [e for e in result.events if nested_event_of(e) is not None]
    results = [
        e.message.content[0].text
        for e in result.events
        if e.type == "message_end" and e.message.role == "toolResult"
    ]
    assert results == ["The answer is 3."]


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_the_command_replays_a_recording_that_holds_a_nested_runs_record(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.jsonl"
    anyio.run(record_nested, path, backend=backend)
    both = tmp_path / "with_nested.jsonl"
    write_lines(both, with_nested_record(lines(path)))
    assert main([str(both), "--backend", backend]) == 0
    out = capsys.readouterr().out
    run = load_run(path)
    assert out.endswith(
        f"replayed {len(run.events)} events and {len(run.transitions)} transitions: identical\n"
    )


async def test_an_edited_nested_result_diverges_where_the_outer_run_shows_it(
    anyio_backend: str, tmp_path: Path
) -> None:
    """The nested run's answer is the agent tool's result: a recording whose result was edited
    diverges at the outer run's tool result message, not inside the nested events."""
    path = tmp_path / "run.jsonl"
    await record_nested(path, store=False)
    records = lines(path)
    for record in records:
        event = record.get("event", {})
        if event.get("type") == "tool_execution_end" and event["toolName"] == "researcher":
            event["result"]["content"][0]["text"] = "The answer is 4."
    edited = tmp_path / "edited.jsonl"
    write_lines(edited, records)
    result = await replay_run(edited, stall_timeout=STALL)
    divergence = result.divergence
    assert divergence is not None and divergence.expected == "message_start(toolResult)"
    assert divergence.detail == (
        'message.content[0].text: expected "The answer is 3.", got "The answer is 4."'
    )
    assert (
        divergence.context[-1] == f"event #{divergence.index - 1}: tool_execution_end(researcher)"
    )


async def test_an_event_line_dropped_beside_the_record_diverges_where_it_was(
    anyio_backend: str, tmp_path: Path
) -> None:
    """With the record and the events, the transitions go among the events by lining them up;
    an event line edited out is passed over, so the replay diverges at that event, not at the
    run's start."""
    path = tmp_path / "run.jsonl"
    await record_nested(path, transitions=False)
    run = load_run(path)
    second_turn = [i for i, e in enumerate(run.events) if e.type == "turn_start"][1]
    records = lines(path)
    turn_starts = [r for r in records if r.get("event", {}).get("type") == "turn_start"]
    edited = tmp_path / "edited.jsonl"
    write_lines(edited, [r for r in records if r is not turn_starts[1]])
    assert load_run(edited).transitions == run.transitions
    result = await replay_run(edited, stall_timeout=STALL)
    assert result.divergence is not None
    assert (result.divergence.kind, result.divergence.index) == ("event", second_turn)
    assert result.divergence.got == "turn_start"
    assert result.divergence.expected == "message_start(assistant)"
