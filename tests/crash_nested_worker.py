"""A process for tests/persist/test_crash_nested.py: an outer run journaled in a
``SqliteRunStore`` whose tool ``worker`` is an agent (a nested run), killed with SIGKILL inside
the nested run, or resumed.

    python tests/crash_nested_worker.py run|resume DB LOG BACKEND
    python tests/crash_nested_worker.py dbos-run|dbos-recover DB LOG

``dbos-run`` runs the same agents as a durable run on DBOS (a SQLite system database), where
the nested run is a child workflow; ``dbos-recover`` launches DBOS on DB (which recovers the
run), waits for it and prints "recovered" and the outer run's tool results.

The nested run calls ``step`` (not idempotent), then ``die`` (which kills the process with
SIGKILL in ``run``, and answers in ``resume``), then answers. Every model call appends
``<agent> <assistant messages before it>`` to LOG, every ``step`` execution ``step``; a line is
written whole. ``resume`` prints "resumed" and the outer run's tool result.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio

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
from agentcore_fsm.persist.store import SqliteRunStore
from agentcore_fsm.runtime.resume import resume_run

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
RUN_ID = "run"
EMPTY: dict[str, Any] = {"type": "object", "properties": {}}
INNER = [
    faux_response(tool_calls=[faux_tool_call("step", {}, id="s1")]),
    faux_response(tool_calls=[faux_tool_call("die", {}, id="d1")]),
    faux_response("inner done"),
]
OUTER = [
    faux_response(tool_calls=[faux_tool_call("worker", {"prompt": "work"}, id="w1")]),
    faux_response("all done"),
]


def log(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def model(name: str, script: list[Any], path: str) -> FauxProvider:
    """A stream function answering by how far the run is (the assistant messages so far), so
    that a resumed run gets the answer its next call is due."""

    def answer(context: Any) -> Any:
        done = sum(1 for m in context.messages if getattr(m, "role", None) == "assistant")
        log(path, f"{name} {done}")
        return script[done]

    return FauxProvider([answer] * 10)


def tools(mode: str, path: str) -> list[AgentTool]:
    async def step(call_id: str, args: Any, signal: Any, update: Any) -> AgentToolResult:
        log(path, "step")
        return AgentToolResult(content=[TextContent(text="stepped")])

    async def die(call_id: str, args: Any, signal: Any, update: Any) -> AgentToolResult:
        if mode in ("run", "dbos-run"):
            os.kill(os.getpid(), signal_kill())
        return AgentToolResult(content=[TextContent(text="alive")])

    inner = Agent(
        tools=[
            AgentTool(name="step", description="A step.", parameters=EMPTY, execute=step),
            AgentTool(
                name="die", description="Dies.", parameters=EMPTY, execute=die, idempotent=True
            ),
        ],
        stream_fn=model("inner", INNER, path),
    )
    return [inner.as_tool("worker", "The worker.")]


def signal_kill() -> int:
    return int(signal.SIGKILL)


async def main(mode: str, db: str, path: str) -> None:
    store = SqliteRunStore(db)
    config = AgentLoopConfig(model=MODEL)
    outer = model("outer", OUTER, path)
    if mode == "run":
        await run_agent_loop(
            [UserMessage(content="start")],
            AgentContext(tools=tools(mode, path)),
            config,
            stream_fn=outer,
            store=store,
            run_id=RUN_ID,
        )
        return
    messages = await resume_run(RUN_ID, store, config, tools=tools(mode, path), stream_fn=outer)
    results = [m.content[0].text for m in messages if getattr(m, "role", "") == "toolResult"]
    print("resumed", results)


async def on_dbos(mode: str, db: str, path: str) -> None:
    from agentcore_fsm.integrations import dbos as durable

    agent = durable.DurableAgent(
        "outer", model("outer", OUTER, path), AgentLoopConfig(model=MODEL), tools(mode, path)
    )
    await durable.launch(f"sqlite:///{db}", agents=[agent])
    try:
        if mode == "dbos-run":
            await durable.run_durable("outer", ["start"], run_id=RUN_ID)
            return
        messages = await durable.result_async(RUN_ID)
        results = [m.content[0].text for m in messages if getattr(m, "role", "") == "toolResult"]
        print("recovered", results, flush=True)
    finally:
        durable.shutdown()


if __name__ == "__main__":
    if sys.argv[1].startswith("dbos"):
        import asyncio

        asyncio.run(on_dbos(*sys.argv[1:4]))
    else:
        anyio.run(main, *sys.argv[1:4], backend=sys.argv[4])
