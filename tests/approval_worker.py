"""A process for tests/test_approval_process.py: an agent session whose tool call waits for
approval in a ``SqliteRunStore``, across processes.

    python tests/approval_worker.py ask DB EFFECTS EVENTS BACKEND HOW
    python tests/approval_worker.py decide DB EFFECTS EVENTS BACKEND VERDICT

``ask`` prompts an agent (session "s") whose model calls ``pay`` (needs approval) and ``look``
(does not) at once; once both calls are prepared and ``pay`` waits, it prints the pending
requests as JSON, then, by HOW: ``suspend`` (``agent.suspend()``, exit 0) or ``kill`` (SIGKILL).
``decide`` opens the session in a new agent, prints its pending requests, approves (VERDICT
``approve``, with the amount changed to 25) or denies (``deny``) ``pay``, resumes the run and
prints the final transcript. Every tool execution appends ``<call id> <process>`` to EFFECTS;
every event a listener sees is appended to EVENTS as JSON.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio

from agentcore_fsm import Agent, AgentTool, AgentToolResult, Model, SqliteRunStore, TextContent
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"eur": {"type": "integer"}}}
FIRST = faux_response(
    "paying",
    tool_calls=[
        faux_tool_call("pay", {"eur": 30}, id="p"),
        faux_tool_call("look", {}, id="l"),
    ],
)


def tools(effects: str, who: str) -> list[AgentTool]:
    def record(call_id: str) -> None:
        with open(effects, "a", encoding="utf-8") as f:
            f.write(f"{call_id} {who}\n")

    async def pay(call_id: str, args: Any, signal_: Any, on_update: Any) -> AgentToolResult:
        record(call_id)
        return AgentToolResult(content=[TextContent(text=f"paid {args['eur']}")])

    async def look(call_id: str, args: Any, signal_: Any, on_update: Any) -> AgentToolResult:
        record(call_id)
        return AgentToolResult(content=[TextContent(text="balance ok")])

    return [
        AgentTool("pay", "pays", SCHEMA, pay, requires_approval=True),
        AgentTool("look", "looks", {"type": "object"}, look),
    ]


def listener(events: str) -> Any:
    def write(event: Any, signal_: Any) -> None:
        with open(events, "a", encoding="utf-8") as f:
            f.write(event.model_dump_json(by_alias=True) + "\n")

    return write


def pending(agent: Agent) -> str:
    return json.dumps([r.model_dump(mode="json") for r in agent.state.pending_approvals])


async def main(argv: list[str]) -> int:
    mode, db, effects, events, _backend, how = argv[:6]
    store = SqliteRunStore(db)
    if mode == "ask":
        agent = Agent(
            model=MODEL,
            tools=tools(effects, "asker"),
            stream_fn=FauxProvider([FIRST, faux_response("never reached here")]),
            store=store,
            session_id="s",
        )
        agent.subscribe(listener(events))
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.prompt, "pay the bill")
            with anyio.fail_after(10):
                while not agent.state.pending_approvals:
                    await anyio.sleep(0.005)
            print(pending(agent), flush=True)
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            agent.suspend()
        print("suspended", agent.interrupted_run, flush=True)
        return 0
    agent = Agent(
        model=MODEL,
        tools=tools(effects, "decider"),
        stream_fn=FauxProvider([faux_response("all settled")]),
        store=store,
        session_id="s",
    )
    agent.subscribe(listener(events))
    print(pending(agent), flush=True)
    if how == "approve":
        agent.approve("p", {"eur": 25}, decided_by="alice")
    else:
        agent.deny("p", "not this month", decided_by="alice")
    await agent.resume()
    print(json.dumps([str(m) for m in agent.messages]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:], backend=sys.argv[5]))
