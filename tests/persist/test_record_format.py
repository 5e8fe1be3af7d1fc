"""The recording format (docs/record.md): a recording holds the runs' records (header and
inputs); readers derive the transitions (and, without event lines, the events) by feeding the
inputs again; the files written by earlier releases still read; a torn last line is skipped
with a warning, anything else is refused with its line (and column, for a JSON error).

tests/fixtures/record_v1.jsonl was written by the release before the run's record was in the
recording (events and transitions only), record_v2.jsonl by the next one, and
record_v2_turn_order.jsonl by the release that changed the turn-end order, record_v2_output.jsonl
by the release that declared structured output (make_records.py writes them): every later release
must read them all. A run recorded with other machines (another
declaration hash) is read as recorded, never fed again."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from agentcore_fsm import AgentContext, AgentLoopConfig, Model, UserMessage, run_agent_loop
from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.devtools.diagrams import view_of_recording
from agentcore_fsm.devtools.replay import replay_run
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.codec import RecordError
from agentcore_fsm.persist.journal import JournaledLoopMachine, JournalError, derive_run
from agentcore_fsm.persist.recorder import RunFileError, RunRecorder, load_run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MODEL = Model(id="faux-1", provider="faux", api="faux")


def _tool() -> Any:
    from agentcore_fsm import AgentTool, AgentToolResult, TextContent

    async def execute(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text=f"got {args['q']}")])

    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    return AgentTool("echo", "Echo q.", schema, execute)


def _script() -> list[Any]:
    return [
        faux_response("Echoing.", tool_calls=[faux_tool_call("echo", {"q": "x"}, id="e1")]),
        faux_response("Done."),
    ]


async def _record(path: Path, *, emit: bool, transitions: bool) -> tuple[list[Any], list[Any]]:
    """A run recorded with its record (the recorder's store) and, as asked, its events and
    transitions; returns the events and transitions the run emitted and took."""
    events: list[Any] = []
    taken: list[TransitionRecord] = []
    with RunRecorder(path) as rec:

        def on_event(event: Any) -> None:
            events.append(event)
            if emit:
                rec(event)

        def on_transition(record: TransitionRecord) -> None:
            taken.append(record)
            if transitions:
                rec.on_transition(record)

        await run_agent_loop(
            [UserMessage(content="echo x")],
            AgentContext(tools=[_tool()]),
            AgentLoopConfig(model=MODEL),
            on_event,
            stream_fn=FauxProvider(_script()),
            on_transition=on_transition,
            store=rec.store,
            run_id="r1",
        )
    return events, taken


@pytest.mark.anyio
async def test_a_recording_holds_the_runs_record(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    events, taken = await _record(path, emit=True, transitions=True)
    run = load_run(path)
    (record,) = run.records
    assert record.run_id == "r1" and record.end_reason == "completed"
    assert record.entries[0]["input"] == "start" and record.header["format"] == 2
    assert run.transitions == taken  # derived from the inputs, checked against the lines
    assert [e.type for e in run.events] == [e.type for e in events]
    # a record is a snapshot: the run can be rebuilt from the file alone
    machine, _ = JournaledLoopMachine.restore(
        record.snapshot(), AgentLoopConfig(model=MODEL), tools=[_tool()]
    )
    assert machine.finished and machine.new_messages == run.events[-1].messages


@pytest.mark.anyio
async def test_a_recording_without_transition_or_event_lines_still_draws(tmp_path: Path) -> None:
    path = tmp_path / "inputs.jsonl"
    events, taken = await _record(path, emit=False, transitions=False)
    kinds = {json.loads(line)["kind"] for line in path.read_text().splitlines()}
    assert kinds == {"run", "header", "input", "end"}
    run = load_run(path)
    assert run.transitions == taken
    # the events are derived too: those of the run but the model's deltas
    assert [e.type for e in run.events] == [e.type for e in events if e.type != "message_update"]
    assert run.end_reason == "completed"
    _, view = view_of_recording(path)
    assert view.path == tuple((t.index, t.source, t.dest) for t in taken)
    assert view.outcome == "completed"
    # each transition has the events recorded after it
    assert sum(map(len, run.events_after())) == len(run.events)


@pytest.mark.anyio
async def test_a_recording_of_inputs_only_replays(tmp_path: Path) -> None:
    path = tmp_path / "inputs.jsonl"
    await _record(path, emit=False, transitions=False)
    result = await replay_run(path, stall_timeout=0.5)
    assert result.ok, str(result)


@pytest.mark.anyio
async def test_transition_lines_that_the_inputs_do_not_give_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await _record(path, emit=False, transitions=True)
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"kind":"transition"' in line and i > 3)
    obj = json.loads(lines[at])
    obj["dest"] = "stopped"
    lines[at] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RunFileError, match=rf":{at + 1}: transition #\d+ .*not the one"):
        load_run(path)


@pytest.mark.anyio
async def test_a_damaged_input_line_is_refused_naming_its_line_and_entry(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await _record(path, emit=False, transitions=False)
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"input":"tool_finished"' in line)
    obj = json.loads(lines[at])
    obj["entry"]["index"] = 5
    lines[at] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordError) as info:
        load_run(path)
    text = str(info.value)
    assert f":{at + 1}: run 'r1': entry #{obj['n']} (tool_finished)" in text, text
    assert "index 5 names no tool call" in text
    assert info.value.entry == obj["n"]


def test_a_torn_last_line_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = (FIXTURES / "record_v2_output.jsonl").read_text(encoding="utf-8")
    lines = text.splitlines()
    torn = tmp_path / "torn.jsonl"
    torn.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:25], encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="agentcore_fsm"):
        run = load_run(torn)
    assert run.warnings and f":{len(lines)}: the last line was cut short" in run.warnings[0]
    assert "cut short" in caplog.text
    assert run.records[0].end_reason is None  # the end line was the torn one
    assert run.end_reason == "completed"  # the agent_end event before it is whole
    # torn in the middle of a character (a crash can cut a multi-byte one)
    data = torn.read_bytes().rsplit(b"\n", 1)[0] + b'\n{"kind":"event","x":"\xc3'
    torn.write_bytes(data)
    assert load_run(torn).warnings
    # the same line anywhere else is refused, with its line and column
    middle = tmp_path / "middle.jsonl"
    middle.write_text("\n".join([*lines[:3], lines[3][:25], *lines[4:]]) + "\n", encoding="utf-8")
    with pytest.raises(RunFileError, match=r"middle.jsonl:4: not JSON at column \d+: "):
        load_run(middle)
    # an object that stops early is refused at the column past its last character, on its
    # own line (the parser, reading past the line's end, used to say column 1)
    whole = json.loads(lines[3])
    short = json.dumps({"kind": whole["kind"], "seq": whole["seq"]})[:-1]
    middle.write_text("\n".join([*lines[:3], short, *lines[4:]]) + "\n", encoding="utf-8")
    with pytest.raises(
        RunFileError, match=rf"middle.jsonl:4: not JSON at column {len(short) + 1}: "
    ):
        load_run(middle)
    # a last line with its line end is not torn: refused
    ended = tmp_path / "ended.jsonl"
    ended.write_text("\n".join([*lines[:-1], lines[-1][:25]]) + "\n", encoding="utf-8")
    # (the line end is not part of the JSON text: the string cut short is unterminated, where
    # it starts; it used to read the line end as a control character inside the string)
    with pytest.raises(
        RunFileError, match=rf":{len(lines)}: not JSON at column 24: Unterminated string"
    ):
        load_run(ended)


def _reads_as_written(run: Any) -> None:
    (record,) = run.records
    assert record.run_id == "run-1" and record.end_reason == "completed"
    assert run.end_reason == "completed"
    assert run.tool_errors == ["add: no threes today"]
    assert run.transitions and run.transitions[0] == TransitionRecord(
        0, "start", "idle", "awaiting_steering"
    )


def test_the_version_2_fixture_reads_as_recorded() -> None:
    """record_v2.jsonl was written before the turn-end order of docs/reference.md#between-turns
    changed the loop's declaration: its transitions and events are read as recorded (with a
    warning naming both declaration hashes), and its inputs are never fed to this machine."""
    path = FIXTURES / "record_v2.jsonl"
    run = load_run(path)
    _reads_as_written(run)
    (warning,) = run.warnings
    assert "declaration hash 00498a9a746feaef" in warning and "read as recorded" in warning
    assert [t.dest for t in run.transitions].count("preparing_next_turn") == 0
    steering = [e.message for e in run.events if e.type == "message_end"][4]
    assert steering.content[0].text == "also: be brief \ud83d\ude00"  # two code points, kept
    with pytest.raises(JournalError, match="declaration 'agent_loop' \\(hash 00498a9a746feaef\\)"):
        derive_run(run.records[0].snapshot(), run_id="run-1")
    _, view = view_of_recording(path)
    assert view.outcome == "completed" and len(view.path) == len(run.transitions)


def test_a_recording_of_inputs_only_from_other_machines_is_refused(tmp_path: Path) -> None:
    lines = (FIXTURES / "record_v2.jsonl").read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if json.loads(line)["kind"] not in ("event", "transition")]
    path = tmp_path / "inputs.jsonl"
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    with pytest.raises(RunFileError, match=r"inputs.jsonl:2: run 'run-1' was recorded by a "):
        load_run(path)


def test_the_turn_order_fixture_reads_as_recorded() -> None:
    """record_v2_turn_order.jsonl was written before the structured-output state
    (validating_output, docs/output.md) changed the loop's declaration: read as recorded, with
    a warning naming both hashes; its inputs are never fed to this machine."""
    path = FIXTURES / "record_v2_turn_order.jsonl"
    run = load_run(path)
    _reads_as_written(run)
    (warning,) = run.warnings
    assert "declaration hash d03f54f6d78a4c9e" in warning and "read as recorded" in warning
    steering = [e.message for e in run.events if e.type == "message_end"][4]
    assert steering.content[0].text == "also: be brief \ud83d\ude00"  # two code points, kept
    with pytest.raises(JournalError, match="declaration 'agent_loop' \\(hash d03f54f6d78a4c9e\\)"):
        derive_run(run.records[0].snapshot(), run_id="run-1")
    _, view = view_of_recording(path)
    assert view.outcome == "completed" and len(view.path) == len(run.transitions)


def test_this_release_fixture_reads_and_derives(tmp_path: Path) -> None:
    """record_v2_output.jsonl: written by the release of this declaration (make_records.py);
    a later release that changes the machines moves it to the tests above and writes its own."""
    path = FIXTURES / "record_v2_output.jsonl"
    run = load_run(path)
    _reads_as_written(run)
    assert run.warnings == []
    (record,) = run.records
    derived = derive_run(record.snapshot(), run_id="run-1")
    assert derived.transitions == run.transitions and derived.machine.finished
    steering = [m for m in derived.machine.new_messages if m.role == "user"][1]
    assert steering.content[0].text == "also: be brief \ud83d\ude00"  # two code points, kept
    _, view = view_of_recording(path)
    assert view.outcome == "completed" and len(view.path) == len(run.transitions)


def test_the_version_1_fixture_reads() -> None:
    run = load_run(FIXTURES / "record_v1.jsonl")
    assert run.records == [] and run.end_reason == "completed"
    assert run.tool_errors == ["add: no threes today"]
    assert run.transitions[0] == TransitionRecord(0, "start", "idle", "awaiting_steering")
    v2 = load_run(FIXTURES / "record_v2.jsonl")
    assert [t.trigger for t in run.transitions] == [t.trigger for t in v2.transitions]
    assert [e.type for e in run.events] == [e.type for e in v2.events]
