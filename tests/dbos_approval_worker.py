"""A process for the DBOS approval test (tests/test_dbos.py): a durable run whose tool call
needs approval, on a SQLite system database.

    python tests/dbos_approval_worker.py run DB WORKDIR       # starts "mail-1", waits for it
    python tests/dbos_approval_worker.py recover DB WORKDIR   # recovers it, prints a report

``send_mail`` (requires approval) appends ``send <to>`` to WORKDIR/effects when it runs.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentcore_fsm import AgentLoopConfig, AgentTool, AgentToolResult, Model, TextContent
from agentcore_fsm.integrations import dbos as durable
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.journal import encode_message

RUN_ID = "mail-1"


def main(argv: list[str]) -> int:
    mode, db, workdir = argv[0], argv[1], Path(argv[2])
    answers = [
        faux_response(tool_calls=[faux_tool_call("send_mail", {"to": "bob"}, id="m1")]),
        faux_response("Sent."),
    ]

    async def stream_fn(model: Any, context: Any, options: Any) -> Any:
        turn = sum(1 for m in context.messages if getattr(m, "role", None) == "assistant")
        async for event in FauxProvider([answers[turn]])(model, context, options):
            yield event

    def send(call_id: str, args: Any, signal_: Any, on_update: Any) -> AgentToolResult:
        with (workdir / "effects").open("a") as f:
            f.write(f"send {args['to']}\n")
        return AgentToolResult(content=[TextContent(text=f"sent to {args['to']}")])

    mail = AgentTool("send_mail", "Send a mail.", {"type": "object"}, send, requires_approval=True)
    agent = durable.DurableAgent("mailer", stream_fn, AgentLoopConfig(model=Model(id="m")), [mail])

    async def run() -> None:
        await durable.launch(f"sqlite:///{db}", agents=[agent])
        try:
            if mode == "run":
                print("started", flush=True)
                await durable.run_durable("mailer", ["Mail Bob"], run_id=RUN_ID)
            else:
                messages = await durable.result_async(RUN_ID)
                events = [e.model_dump(mode="json") async for e in durable.follow_async(RUN_ID)]
                report = {
                    "messages": [str(m) for m in messages],
                    "encoded": [encode_message(m) for m in messages],
                    "events": events,
                }
                print(json.dumps(report), flush=True)
        finally:
            durable.shutdown()

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
