"""A recording of several runs (an Agent's prompts written by one recorder) is drawn one run at
a time: the last by default, ``--run-number N`` (``view_of_recording(run=N)``) for another,
each with its own counts, outcome and errors; the title says which run it is. (It used to be
drawn as one picture with the runs' counts summed.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import MODEL

from agentcore_fsm import Agent, AgentTool, AgentToolResult
from agentcore_fsm.cli.diagram import main as diagram_main
from agentcore_fsm.devtools.diagrams import view_of_recording
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.recorder import RunRecorder


async def _fail(call_id: str, args: dict[str, Any], *rest: Any) -> AgentToolResult:
    raise RuntimeError("no threes today")


FAILING = AgentTool(
    name="add",
    description="Add.",
    parameters={"type": "object", "properties": {}},
    execute=_fail,
)


def _two_runs(tmp_path: Path) -> Path:
    """Run 1: a tool call that fails, then an answer (4 steps more than run 2); run 2: a plain
    answer."""
    path = tmp_path / "session.jsonl"
    provider = FauxProvider(
        [
            faux_response(tool_calls=[faux_tool_call("add", {})]),
            faux_response("it failed"),
            faux_response("hello again"),
        ]
    )
    with RunRecorder(path) as rec:
        agent = Agent(
            model=MODEL, stream_fn=provider, tools=[FAILING], on_transition=rec.on_transition
        )
        agent.subscribe(lambda event, signal: rec(event))
        agent.prompt_sync("add")
        agent.prompt_sync("hi")
    return path


def test_the_last_run_is_drawn_by_default(tmp_path: Path) -> None:
    path = _two_runs(tmp_path)
    _, last = view_of_recording(path)
    _, first = view_of_recording(path, run=1)
    _, second = view_of_recording(path, run=2)
    assert last.label == second.label == "recorded run 2 of 2"
    assert first.label == "recorded run 1 of 2"
    assert last.path == second.path
    assert first.path[0][1] == second.path[0][1] == "idle"  # each starts where a run starts
    assert len(first.path) > len(second.path)
    # each run's own errors: the tool error belongs to the first run only
    assert [*first.tool_errors] == ["add: no threes today"]
    assert [*second.tool_errors] == []
    assert first.outcome == second.outcome == "completed"


def test_a_run_number_out_of_range_is_refused(tmp_path: Path) -> None:
    path = _two_runs(tmp_path)
    with pytest.raises(
        ValueError, match=r"^run 3: the recording holds 2 runs of 'agent_loop' \(number 1 to 2\)$"
    ):
        view_of_recording(path, run=3)


def test_the_command_draws_the_run_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _two_runs(tmp_path)
    assert diagram_main(["--run", str(path), "--steps"]) == 0
    last = capsys.readouterr().out
    assert diagram_main(["--run", str(path), "--steps", "--run-number", "1"]) == 0
    first = capsys.readouterr().out
    assert "recorded run 2 of 2" in last.splitlines()[0]
    assert "recorded run 1 of 2" in first.splitlines()[0]
    assert "no threes today" in first and "no threes today" not in last
    rows = [line for line in first.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert rows[0].startswith("| 1 | **start** | idle")  # numbered from the run's own start


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["--run-number", "1"], "--run-number only goes with --run"),
        (["--run", "x.jsonl", "--run-number", "0"], "must be a whole number, 1 or more, not '0'"),
        (["--run", "x.jsonl", "--run-number", "two"], "not 'two'"),
    ],
)
def test_bad_run_numbers_are_usage_errors(
    argv: list[str], text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        diagram_main(argv)
    assert info.value.code == 2
    assert text in capsys.readouterr().err


def test_a_single_run_keeps_its_plain_label(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    with RunRecorder(path) as rec:
        agent = Agent(
            model=MODEL,
            stream_fn=FauxProvider([faux_response("hi")]),
            on_transition=rec.on_transition,
        )
        agent.subscribe(lambda event, signal: rec(event))
        agent.prompt_sync("hi")
    _, view = view_of_recording(path)
    assert view.label == "recorded run"
    with pytest.raises(ValueError, match=r"run 2: the recording holds 1 run of"):
        view_of_recording(path, run=2)
