"""Recordings of nested runs (an agent as a tool, docs/multi-agent.md) for the recording and
replay tests (tests/persist/test_record_nested.py, tests/devtools/test_replay_nested.py): an
outer run whose model calls the agent tool ``researcher``, whose own run calls ``add`` and the
agent tool ``checker`` (two levels), all on the faux provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentcore_fsm import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.recorder import RunRecorder

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
ADD_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}}


async def add(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    on_update(AgentToolResult(content=[TextContent(text="adding")], details={"step": 1}))
    return AgentToolResult(content=[TextContent(text=str(params["a"] + 1))])


def ask(name: str, prompt: str, id: str) -> Any:
    return faux_response(tool_calls=[faux_tool_call(name, {"prompt": prompt}, id=id)])


def outer_tools() -> list[AgentTool]:
    checker = Agent(stream_fn=FauxProvider([faux_response("checked: fine")]), model=MODEL)
    researcher = Agent(
        system_prompt="You research.",
        tools=[AgentTool("add", "Add one.", ADD_SCHEMA, add), checker.as_tool("checker", "Check.")],
        stream_fn=FauxProvider(
            [
                faux_response(tool_calls=[faux_tool_call("add", {"a": 2}, id="r1")]),
                ask("checker", "is 3 right?", "r2"),
                faux_response("The answer is 3."),
            ],
            chunk_size=4,
        ),
        model=MODEL,
    )
    return [researcher.as_tool("researcher", "Ask the researcher.")]


async def record_nested(
    path: Path, *, store: bool = True, events: bool = True, transitions: bool = True, **kw: Any
) -> tuple[list[Any], list[Any]]:
    """Record the nested run to ``path`` (its record with ``store``, its events with
    ``events``, its transitions with ``transitions``; ``kw`` for the recorder); return the
    events the outer run delivered and the messages it returned."""
    seen: list[Any] = []
    with RunRecorder(path, **kw) as recorder:

        def sink(event: Any) -> None:
            seen.append(event)
            if events:
                recorder(event)

        messages = await run_agent_loop(
            [UserMessage(content="What is 2 + 1?")],
            AgentContext(tools=outer_tools()),
            AgentLoopConfig(model=MODEL),
            sink,
            stream_fn=FauxProvider(
                [ask("researcher", "2 + 1?", "c1"), faux_response("3.")], chunk_size=4
            ),
            on_transition=recorder.on_transition if transitions else None,
            **({"store": recorder.store, "run_id": "outer-1"} if store else {}),
        )
    return seen, messages


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_lines(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def with_nested_record(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` (a recording's lines) with the lines of a nested run's record among them, as
    a journaled nested run writes them (its own run id, a header with ``parent``): a header
    after the outer run's header, its first input after the outer run's first, the second and
    its end before the outer run's end."""
    (header,) = [r for r in records if r["kind"] == "header"]
    outer = header["run"]
    nested = f"{outer}/1.c1"
    parent = {"run": outer, "call": "c1", "path": ["c1"], "agents": ["researcher"]}
    extra_header = {
        "kind": "header",
        "seq": 0,
        "t": 0.0,
        "run": nested,
        "header": {**header["header"], "parent": parent},
    }
    inputs = [r for r in records if r["kind"] == "input" and r["run"] == outer][:2]
    extra_inputs = [{**r, "run": nested} for r in inputs]
    extra_end = {"kind": "end", "seq": 0, "t": 0.0, "run": nested, "reason": "completed"}
    out: list[dict[str, Any]] = []
    for record in records:
        if record["kind"] == "end":
            out += [extra_inputs[1], extra_end]
        out.append(record)
        if record is header:
            out.append(extra_header)
        elif record is inputs[0]:
            out.append(extra_inputs[0])
    return out
