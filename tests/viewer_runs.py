"""Runs for the run viewer's tests (tests/devtools/test_viewer*.py): recorded runs of several
shapes, a long run made by repeating a recorded turn, and what the machine says each step of
a record gives (the oracle the viewer's data and page are checked against: the record's first
k entries fed to a fresh machine, independently of the viewer's own stepping).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    run_agent_loop,
)
from agentcore_fsm.devtools.diagram_model import EXCEPTIONAL_TRIGGERS
from agentcore_fsm.devtools.viewer import RunSource
from agentcore_fsm.integrations.providers.faux import (
    FauxError,
    FauxProvider,
    faux_response,
    faux_tool_call,
)
from agentcore_fsm.persist.journal import derive_run
from agentcore_fsm.persist.recorder import RunRecorder

MODEL = Model(id="faux-view", provider="faux", api="faux")
ADD_SCHEMA = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}


async def _add(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=str(params["a"] + params["b"]))])


def add_tool() -> AgentTool:
    return AgentTool("add", "Add two numbers.", ADD_SCHEMA, _add)


def record(path: Path, script: list[Any], *, run_id: str, prompt: str = "What is 1 + 2?") -> Path:
    """Record one run of the loop with the faux model answering ``script``."""

    async def main() -> None:
        with RunRecorder(path) as recorder:
            await run_agent_loop(
                [prompt],
                AgentContext(tools=[add_tool()]),
                AgentLoopConfig(model=MODEL),
                stream_fn=FauxProvider(script),
                store=recorder.store,
                run_id=run_id,
            )

    trio.run(main)
    return path


def tool_run(path: Path, run_id: str = "add-1", prompt: str = "What is 1 + 2?") -> Path:
    """A run that calls ``add`` once, then answers."""
    script = [
        faux_response("Let me add.", tool_calls=[faux_tool_call("add", {"a": 1, "b": 2}, id="c1")]),
        faux_response("1 + 2 = 3."),
    ]
    return record(path, script, run_id=run_id, prompt=prompt)


def failing_run(path: Path, run_id: str = "fails") -> Path:
    """A run that calls ``add`` twice (two turns), then whose model call fails."""
    script = [
        faux_response(tool_calls=[faux_tool_call("add", {"a": 1, "b": 2}, id="c1")]),
        faux_response(tool_calls=[faux_tool_call("add", {"a": 3, "b": 4}, id="c2")]),
        FauxError("model overloaded", kind="overloaded"),
    ]
    return record(path, script, run_id=run_id)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def source_of(path: Path) -> RunSource:
    """The first run's record in a recording, read line by line (not by the viewer)."""
    objs = lines(path)
    header = next(o for o in objs if o["kind"] == "header")
    run_id = header["run"]
    entries = [o["entry"] for o in objs if o["kind"] == "input" and o["run"] == run_id]
    ends = [o["reason"] for o in objs if o["kind"] == "end" and o["run"] == run_id]
    return RunSource(run_id, header["header"], entries, ends[0] if ends else None)


def long_source(path: Path, steps: int) -> RunSource:
    """A run of about ``steps`` steps: the recorded tool turn of :func:`tool_run` (model
    answer, tool result, turn's end) repeated, each time a new call id, then the final answer.
    The machine takes it (the viewer feeds it again to check)."""
    base = source_of(tool_run(path))
    start, turn, tail = base.entries[0], base.entries[1:4], base.entries[4:]
    assert [e["input"] for e in turn] == ["stream_done", "tool_finished", "proceeded"], turn
    entries = [start]
    n = 0
    while len(entries) + len(tail) + len(turn) <= steps:
        n += 1
        for entry in json.loads(json.dumps(turn)):
            if entry["input"] == "stream_done":
                call = entry["message"]["message"]["content"][-1]
                call["id"] = f"c{n}"
                call["arguments"] = {"a": n, "b": 2}
            entries.append(entry)
    entries += json.loads(json.dumps(tail))
    return RunSource("long", base.header, entries, base.end_reason)


@dataclass(frozen=True)
class Expected:
    """What the machine says step ``k`` gives: the state after it, the messages then."""

    state: str
    messages: list[Any]
    edges: frozenset[str]
    """The diagram's arrows the run had taken by then (abort and failure arrows aside: the
    viewer's compact diagram leaves them out)."""


def expected_steps(source: RunSource) -> list[Expected]:
    """For each step k, the record's first k + 1 entries fed to a fresh machine."""
    out = []
    for k in range(len(source.entries)):
        snapshot = {
            "format": source.header["format"],
            "declaration": source.header["declaration"],
            "declaration_hash": source.header["declaration_hash"],
            "header": source.header,
            "entries": source.entries[: k + 1],
        }
        machine = derive_run(snapshot).machine
        edges = frozenset(
            f"edge-{t.source}-{t.dest}"
            for t in machine.history
            if t.trigger not in EXCEPTIONAL_TRIGGERS
        )
        out.append(Expected(machine.state, list(machine.new_messages), edges))
    return out
