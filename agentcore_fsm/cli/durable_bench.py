"""The cost of a durable run: ``python -m agentcore_fsm.cli.durable_bench [--runs N]``.

Runs the same short run (a model call asking for one tool, the tool, an answer; the faux
provider) N times in memory (``run_agent_loop``) and N times as a DBOS workflow on a SQLite
system database in a temporary directory, and prints the mean time per run of each and the
difference (the per-run overhead of durability). Needs the ``dbos`` extra."""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from agentcore_fsm.core.config import AgentContext, AgentLoopConfig
from agentcore_fsm.core.messages import Model, TextContent
from agentcore_fsm.core.tools import AgentTool, AgentToolResult
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.runtime.driver import run_agent_loop


def _agent() -> tuple[Any, AgentTool, AgentLoopConfig]:
    answers = [
        faux_response(tool_calls=[faux_tool_call("add", {"a": 2, "b": 3}, id="c1")]),
        faux_response("5"),
    ]

    async def stream_fn(model: Any, context: Any, options: Any) -> Any:
        turn = sum(1 for m in context.messages if getattr(m, "role", None) == "assistant")
        async for event in FauxProvider([answers[turn]])(model, context, options):
            yield event

    def add(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text=str(args["a"] + args["b"]))])

    tool = AgentTool("add", "Add two integers.", {"type": "object"}, add)
    return stream_fn, tool, AgentLoopConfig(model=Model(id="faux"))


async def measure(runs: int, directory: str) -> tuple[float, float]:
    """Mean seconds per run: (in memory, durable on SQLite)."""
    from agentcore_fsm.integrations import dbos as durable

    stream_fn, tool, config = _agent()
    started = time.perf_counter()
    for _ in range(runs):
        await run_agent_loop(["add"], AgentContext(tools=[tool]), config, stream_fn=stream_fn)
    memory = (time.perf_counter() - started) / runs
    agent = durable.DurableAgent("bench", stream_fn, config, [tool])
    await durable.launch(f"sqlite:///{os.path.join(directory, 'bench.db')}", agents=[agent])
    try:
        await durable.run_durable("bench", ["add"], run_id="warm-up")
        started = time.perf_counter()
        for i in range(runs):
            await durable.run_durable("bench", ["add"], run_id=f"bench-{i}")
        durable_s = (time.perf_counter() - started) / runs
    finally:
        durable.shutdown()
    return memory, durable_s


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentcore_fsm.cli.durable_bench")
    parser.add_argument("--runs", type=int, default=50, help="runs of each kind (default 50)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    with tempfile.TemporaryDirectory() as tmp:
        memory, durable_s = asyncio.run(measure(args.runs, tmp))
    print(f"in memory:        {memory * 1000:8.3f} ms per run")
    print(f"durable (SQLite): {durable_s * 1000:8.3f} ms per run")
    print(f"overhead:         {(durable_s - memory) * 1000:8.3f} ms per run")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
