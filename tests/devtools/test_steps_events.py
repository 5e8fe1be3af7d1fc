"""The steps table (``agentcore-fsm diagram --run RUN --steps``) lists each event on the row of
the transition that emitted it when the recording holds the run's record: a machine derived
from the record notes where each transition's events begin (``DerivedRun.emitted``,
``RecordedRun.events_by_transition``). It used to list an input's events after the last
transition the input caused, so that ``agent_start`` showed on the row after ``start``. A
recording of transition and event lines only keeps the old column, named for what it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.devtools.diagrams import run_steps, steps_markdown, view_of_recording
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.journal import derive_run
from agentcore_fsm.persist.recorder import RunRecorder
from agentcore_fsm.persist.recording import load_run


async def _echo(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text="echoed")])


async def _record(path: Path, store: bool) -> None:
    echo = AgentTool("echo", "Echo.", {"type": "object", "properties": {}}, _echo)
    provider = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("echo", {}, id="e1")]), faux_response("done")]
    )
    with RunRecorder(path) as recorder:
        await run_agent_loop(
            [UserMessage(content="go")],
            AgentContext(tools=[echo]),
            AgentLoopConfig(model=Model(id="m")),
            recorder,
            stream_fn=provider,
            on_transition=recorder.on_transition,
            **({"store": recorder.store, "run_id": "r1"} if store else {}),
        )


def _rows(path: Path) -> dict[str, list[tuple[str, ...]]]:
    decl, view = view_of_recording(path)
    rows: dict[str, list[tuple[str, ...]]] = {}
    for step in run_steps(decl, view):
        rows.setdefault(step.trigger, []).append(step.events)
    return rows


def test_each_event_is_on_the_row_of_the_transition_that_emitted_it(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    anyio.run(_record, path, True)
    rows = _rows(path)
    assert rows["start"] == [
        ("agent_start", "turn_start", "message_start(user)", "message_end(user)")
    ]
    # the answer streams after the transition into streaming (its deltas with it)
    first_stream = rows["skip_steering_poll"][0]
    assert first_stream[0] == "message_start(assistant)"
    assert first_stream[1:] and all(e.startswith("message_update(") for e in first_stream[1:])
    finished = rows["model_finished"]
    assert finished[0] == ("message_end(assistant)", "tool_execution_start(echo)")
    assert finished[1] == ("message_end(assistant)", "turn_end")
    assert rows["tools_settled"] == [("turn_end",)]
    assert rows["skip_follow_up_poll"] == [("agent_end(completed)",)]
    assert rows["after_turn"] == [(), ()]
    table = steps_markdown(*view_of_recording(path))
    assert "| events |" in table and "the agent events the step's transition emitted" in table


def test_the_marks_of_a_derived_run_cut_its_events_by_transition(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    anyio.run(_record, path, True)
    (record,) = load_run(path).records
    derived = derive_run(record.snapshot(), run_id="r1")
    assert len(derived.emitted) == len(derived.machine.history)
    assert derived.emitted == sorted(derived.emitted)  # in order, within the events
    assert derived.emitted[0] == 0 and derived.emitted[-1] < len(derived.events)
    last = derived.events[derived.emitted[-1] :]
    assert [e.type for e in last] == ["agent_end"]


def test_without_the_record_the_column_says_the_events_come_after(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    anyio.run(_record, path, False)
    assert load_run(path).emitted is None
    table = steps_markdown(*view_of_recording(path))
    assert "| events recorded after |" in table and "a step or two after" in table
    # as the driver delivers them: an input's events after the last transition it caused
    rows = _rows(path)
    assert "agent_start" in rows["skip_steering_poll"][0]
