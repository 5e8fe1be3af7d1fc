"""A process for the DBOS crash tests (tests/test_dbos.py): runs a durable agent run on a SQLite
system database and kills itself with SIGKILL at a chosen point, or recovers the run.

    python tests/dbos_worker.py run DB WORKDIR POINT
    python tests/dbos_worker.py recover DB WORKDIR [DB WORKDIR ...]

The run "order-1": a prompt; a first turn calling ``lookup`` (a, idempotent); a second turn
calling ``charge`` (b, not idempotent) and ``lookup`` (c); a final answer. Every tool execution
and every ``after_tool_call`` appends one line (``<name> <call id>``) to WORKDIR/effects; the
first process writes every event it is given live to WORKDIR/live.jsonl.

POINT: ``stream`` (at the third streamed delta of the second model call), ``tool`` (inside
charge b, after its side effect), ``tool_idempotent`` (inside lookup c, after its side effect),
``between`` (at the first turn_end event), ``none``. ``recover`` launches DBOS on each file in turn
(its recovery continues the run), waits for the run and prints a JSON report (one line each).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentcore_fsm import AgentLoopConfig, AgentTool, AgentToolResult, Model, TextContent
from agentcore_fsm.integrations import dbos as durable
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.journal import encode_message

RUN_ID = "order-1"


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> int:
    if argv[0] == "run":
        scenario("run", argv[1], Path(argv[2]), argv[3])
    else:  # one process recovers each run in turn (DBOS launched and shut down for each)
        for db, workdir in zip(argv[1::2], argv[2::2], strict=True):
            scenario("recover", db, Path(workdir), "none")
    return 0


def scenario(mode: str, db: str, workdir: Path, point: str) -> None:
    first = mode == "run"
    effects = workdir / "effects"

    def effect(line: str) -> None:
        with effects.open("a") as f:
            f.write(line + "\n")

    answers = [
        faux_response("Looking it up.", tool_calls=[faux_tool_call("lookup", {"q": 1}, id="a")]),
        faux_response(
            "Charging the card now, then checking again.",
            tool_calls=[
                faux_tool_call("charge", {"eur": 30}, id="b"),
                faux_tool_call("lookup", {"q": 2}, id="c"),
            ],
        ),
        faux_response("Charged 30 EUR."),
    ]

    async def stream_fn(model: Any, context: Any, options: Any) -> Any:
        # the answer depends on the transcript only: a recovered process asks the same way
        turn = sum(1 for m in context.messages if getattr(m, "role", None) == "assistant")
        stream = FauxProvider([answers[turn]], chunk_size=4)(model, context, options)
        deltas = 0
        async for event in stream:
            if event.type.endswith("_delta"):
                deltas += 1
                if first and point == "stream" and turn == 1 and deltas == 3:
                    die()
            yield event

    async def lookup(call_id: str, args: Any, signal_: Any, on_update: Any) -> AgentToolResult:
        effect(f"lookup {call_id}")
        if first and point == "tool_idempotent" and call_id == "c":
            die()
        return AgentToolResult(content=[TextContent(text=f"order {args['q']}: 2 books")])

    def charge(call_id: str, args: Any, signal_: Any, on_update: Any) -> AgentToolResult:
        effect(f"charge {call_id}")
        if first and point == "tool":
            die()
        return AgentToolResult(content=[TextContent(text=f"charged {args['eur']}")])

    async def after_tool_call(ctx: Any, signal_: Any) -> None:
        effect(f"after {ctx.tool_call.id}")

    tools = [
        AgentTool("lookup", "find an order", {"type": "object"}, lookup, idempotent=True),
        AgentTool("charge", "charge a card", {"type": "object"}, charge),
    ]
    config = AgentLoopConfig(model=Model(id="faux"), after_tool_call=after_tool_call)
    agent = durable.DurableAgent("shop", stream_fn, config, tools)
    live = (workdir / "live.jsonl").open("a")

    def listener(event: Any) -> None:
        live.write(json.dumps(event.model_dump(mode="json")) + "\n")
        live.flush()
        if point == "between" and event.type == "turn_end":
            die()

    replayed: list[dict[str, Any]] = []
    if not first:  # the events of the recovered execution, replay included
        durable.listen(RUN_ID, lambda event: replayed.append(event.model_dump(mode="json")))

    async def run() -> None:
        await durable.launch(f"sqlite:///{db}", agents=[agent])
        try:
            if first:
                await durable.run_durable("shop", ["charge order 1"], run_id=RUN_ID, emit=listener)
                print("finished", flush=True)
            else:
                messages = await durable.result_async(RUN_ID)
                events = [e.model_dump(mode="json") async for e in durable.follow_async(RUN_ID)]
                report = {
                    "messages": [str(m) for m in messages],
                    "encoded": [encode_message(m) for m in messages],
                    "events": events,
                    "replayed": replayed,
                }
                errors = [
                    m.content[0].text
                    for m in messages
                    if getattr(m, "role", None) == "toolResult" and m.is_error
                ]
                report["errors"] = errors
                print(json.dumps(report), flush=True)
        finally:
            durable.shutdown()

    asyncio.run(run())
    live.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
