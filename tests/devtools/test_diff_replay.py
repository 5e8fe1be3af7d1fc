"""A replay's divergence report shares the run diff's display: when the replay leaves out a
recorded event (a ``message_end`` the loop no longer emits, say), the report says so and shows
the recording and the replay side by side from there."""

from __future__ import annotations

import json
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
from agentcore_fsm.devtools.replay import replay_run_sync
from agentcore_fsm.devtools.replay_compare import left_out
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.recorder import RunRecorder


async def _add(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text="3")])


def _record(path: Path) -> None:
    answers = [faux_response(tool_calls=[faux_tool_call("add", {}, id="c")]), faux_response("ok")]

    async def go() -> None:
        with RunRecorder(path) as recorder:
            await run_agent_loop(
                [UserMessage(content="1 + 2?")],
                AgentContext(tools=[AgentTool("add", "Add.", {"type": "object"}, _add)]),
                AgentLoopConfig(model=Model(id="faux")),
                recorder,
                stream_fn=FauxProvider(answers),
                on_transition=recorder.on_transition,
            )

    anyio.run(go, backend="trio")


def test_a_left_out_message_end_is_shown_side_by_side(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    _record(path)
    assert replay_run_sync(path).ok
    # the recording holds a message_end more than today's loop emits: the replay "drops" it
    lines = path.read_text(encoding="utf-8").splitlines()
    at = next(
        i
        for i, line in enumerate(lines)
        if '"type":"message_end"' in line and '"role":"assistant"' in line
    )
    path.write_text("\n".join([*lines[: at + 1], lines[at], *lines[at + 1 :]]) + "\n", "utf-8")
    divergence = replay_run_sync(path).divergence
    assert divergence is not None
    index = divergence.index
    report = str(divergence).splitlines()
    assert report[:4] == [
        f"replay diverged at event #{index} (the recording has {divergence.recorded} events):",
        "  expected: message_end(assistant)",
        "  got:      tool_execution_start(add)",
        f"  the replay left out the recorded event #{index} (message_end(assistant)): it produced "
        f"#{index + 1} (tool_execution_start(add)) in its place",
    ]
    assert report[-4:] == [
        f"the recording and the replay from event #{index} on:",
        "          recorded                              replayed",
        f"  #{index}   ≠  message_end(assistant)                (nothing)",
        f"  #{index + 1}  =  tool_execution_start(add)             tool_execution_start(add)",
    ]


def test_left_out_looks_a_few_records_ahead_only() -> None:
    labels = ["a", "b", "c", "d", "e", "f"]
    rows, why = left_out("event", 0, labels, "c", labels, "type: expected a")
    assert rows == (("#0", "a", None), ("#1", "b", None), ("#2", "c", "c"))
    assert why == (
        "the replay left out the recorded events #0 to #1 (a, b): it produced #2 (c) in its place"
    )
    assert left_out("event", 0, labels, "e", labels, "kept") == ((), "kept")  # 4 ahead: too far
    assert left_out("event", 0, labels, "x", labels, "kept") == ((), "kept")
    assert json.dumps(rows)
