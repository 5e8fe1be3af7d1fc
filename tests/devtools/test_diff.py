"""Comparing two runs (agentcore_fsm.devtools.diff): aligned step by step, the first divergence
named (input, state or event), the rest side by side; as JSON; records that cannot be aligned
are one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    MemoryRunStore,
    Model,
    TextContent,
    run_agent_loop,
)
from agentcore_fsm.devtools.diff import DiffError, diff_runs, run_steps_of
from agentcore_fsm.devtools.diff_render import first_difference, side_by_side, step_summary
from agentcore_fsm.devtools.fork import ToolResult, fork_run_sync
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.recorder import RunRecorder

MODEL = Model(id="faux-1", provider="faux", api="faux")


async def _add(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=str(params["a"] + params["b"]))])


ADD = AgentTool("add", "Add.", {"type": "object"}, _add)


def _record(path: Path, prompt: str = "What is 1 + 2?", run_id: str = "add-1") -> Path:
    answers = [
        faux_response("adding", tool_calls=[faux_tool_call("add", {"a": 1, "b": 2}, id="c1")]),
        faux_response("1 + 2 = 3."),
    ]

    async def go() -> None:
        with RunRecorder(path) as recorder:
            await run_agent_loop(
                [prompt],
                AgentContext(tools=[ADD]),
                AgentLoopConfig(model=MODEL),
                stream_fn=FauxProvider(answers),
                store=recorder.store,
                run_id=run_id,
            )

    anyio.run(go, backend="trio")
    return path


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return _record(tmp_path / "run.jsonl")


def test_a_run_and_itself_are_the_same(run: Path) -> None:
    diff = diff_runs(run, run)
    assert diff.same and diff.first is None and diff.rows == [] and diff.header == []
    assert diff.text().splitlines() == [
        "A: run 'add-1' (6 steps), B: run 'add-1' (6 steps)",
        "the same steps (6): no divergence",
    ]
    assert diff.data()["same"] is True and diff.data()["steps"] == []


def test_the_steps_of_a_run(run: Path) -> None:
    steps = run_steps_of(run).steps
    assert [(s.input, s.state) for s in steps] == [
        ("start", "streaming"),
        ("stream_done", "executing"),
        ("tool_finished", "closing_turn"),
        ("proceeded", "streaming"),
        ("stream_done", "closing_turn"),
        ("proceeded", "stopped"),
    ]
    assert steps[2].labels == [
        "tool_execution_end(add)",
        "message_start(toolResult)",
        "message_end(toolResult)",
        "turn_end",
    ]


def test_a_fork_diverges_at_its_step_and_the_rest_is_side_by_side(run: Path) -> None:
    fork = fork_run_sync(
        run, 2, ToolResult("4"), tools=[ADD], stream_fn=FauxProvider([faux_response("= 4")])
    )
    diff = diff_runs(run, fork)
    assert diff.first is not None
    assert (diff.first.step, diff.first.what) == (2, "input")
    lines = diff.text().splitlines()
    assert lines[:4] == [
        "A: run 'add-1' (6 steps), B: run 'add-1@2' (6 steps)",
        "first divergence at step 2, in its input:",
        '  result.content[0].text: A "3", B "4"',
        "from step 2 on (= same, ≠ different):",
    ]
    rows = [line for line in lines[5:] if "↳" not in line]
    assert [row.split()[:2] for row in rows] == [["2", "≠"], ["3", "="], ["4", "≠"], ["5", "≠"]]
    # a step that differs where its two lines look alike says what differs, under it
    assert lines[-1].split()[:4] == ["↳", "event", "#0", "(agent_end(completed)):"]
    assert 'tool_finished #0: "3" → closing_turn' in rows[0]
    assert 'tool_finished #0: "4" → closing_turn' in rows[0]
    data = diff.data()
    assert data["first"]["step"] == 2 and data["first"]["what"] == "input"
    assert [(s["step"], s["same"]) for s in data["steps"]] == [
        (2, False),
        (3, True),
        (4, False),
        (5, False),
    ]
    json.dumps(data)  # JSON data


def test_same_inputs_other_prompt_diverge_in_the_events(run: Path, tmp_path: Path) -> None:
    other = _record(tmp_path / "other.jsonl", prompt="What is one plus two?")
    diff = diff_runs(run, other)
    assert diff.first is not None
    assert (diff.first.step, diff.first.what, diff.first.event) == (0, "event", 2)
    assert diff.first.detail.startswith('message.content[0].text: A "What is 1 + 2?"')
    assert diff.header == [
        'prompts[0].message.content[0].text: A "What is 1 + 2?", B "What is one plus two?"'
    ]
    assert "event #2 of the step: A message_start(user), B message_start(user)" in diff.text()


def test_a_run_cut_short_diverges_where_it_ends(run: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.jsonl"
    lines = run.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if '"kind":"end"' not in line]
    inputs = [i for i, line in enumerate(kept) if '"kind":"input"' in line]
    cut.write_text("\n".join(kept[: inputs[4]]) + "\n", encoding="utf-8")
    diff = diff_runs(run, cut)
    assert diff.first is not None
    assert (diff.first.step, diff.first.what) == (4, "length")
    assert diff.first.detail.startswith("B has no step 4 (B ends after 4 steps)")
    assert [(n, a is not None, b is not None) for n, a, b in diff.rows] == [
        (4, True, False),
        (5, True, False),
    ]
    last = diff.text().splitlines()[-1]
    assert last.split()[:3] == ["5", "≠", "proceeded"]
    assert last.endswith("(nothing)")


def test_store_runs_and_runs_of_a_recording_by_id(run: Path, tmp_path: Path) -> None:
    store = MemoryRunStore()
    fork = fork_run_sync(run, 5, tools=[ADD], store=store)
    assert diff_runs((store, fork.run_id), run).same
    both = tmp_path / "both.jsonl"
    _record(both, run_id="first")
    text = both.read_text(encoding="utf-8")
    assert diff_runs(both, both, run_a="first").same
    assert "first" in text


def test_records_that_cannot_be_aligned(run: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    text = run.read_text(encoding="utf-8")
    header = next(line for line in text.splitlines() if '"kind":"header"' in line)
    digest = json.loads(header)["header"]["declaration_hash"]
    other.write_text(text.replace(digest, "0123456789abcdef"), encoding="utf-8")
    with pytest.raises(DiffError) as caught:
        diff_runs(run, other)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{other}:")
    assert "0123456789abcdef" in message
    with pytest.raises(DiffError, match=r"cannot read .*missing\.jsonl"):
        diff_runs(run, tmp_path / "missing.jsonl")
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(text.replace('"input":"proceeded"', '"input":"procede"'), encoding="utf-8")
    with pytest.raises(DiffError, match=r"damaged\.jsonl:\d+: .*procede"):
        diff_runs(run, damaged)


def test_the_shared_display() -> None:
    assert first_difference({"a": [1, 2]}, {"a": [1, 3]}) == "a[1]: expected 2, got 3"
    assert first_difference({"a": 1}, {"a": 1, "b": 2}, names=("A", "B")) == "b: A nothing, B 2"
    assert first_difference([1], [1, 2]) == "the whole value: expected 1 items, got 2"
    assert first_difference({"x": "y"}, {"x": "y"}) is None
    assert step_summary({"input": "approval_decided", "index": 1, "approved": False}) == (
        "approval_decided #1: denied"
    )
    lines = side_by_side([("1", "a", "a"), ("2", "b", None)], width=4)
    assert lines[1:] == ["  1    =  a     a", "  2    ≠  b     (nothing)"]
