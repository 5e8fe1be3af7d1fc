"""A process for tests/agent/test_session_writer.py: the writer of session "s" in a
``SqliteRunStore``, holding it until told to go on.

    python tests/session_worker.py DB BACKEND

It prompts an agent (session "s") whose model calls the tool ``hold``; the tool prints
``holding`` and waits for a line on standard input; then the model answers "answer from the
worker", the worker prints ``done`` and exits 0. Killing it while it holds leaves the run
unfinished in the store.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
import anyio.to_thread

from agentcore_fsm import Agent, AgentTool, AgentToolResult, Model, SqliteRunStore, TextContent
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

MODEL = Model(id="faux-1", provider="faux", api="faux-api")


async def hold(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
    print("holding", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)
    return AgentToolResult(content=[TextContent(text="held")])


async def main(db: str) -> int:
    agent = Agent(
        model=MODEL,
        tools=[AgentTool("hold", "holds the session", {"type": "object"}, hold)],
        stream_fn=FauxProvider(
            [
                faux_response("holding on", tool_calls=[faux_tool_call("hold", {}, id="h")]),
                faux_response("answer from the worker"),
            ]
        ),
        store=SqliteRunStore(db),
        session_id="s",
    )
    await agent.prompt("first")
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1], backend=sys.argv[2]))
