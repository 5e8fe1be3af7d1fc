"""The cost of a durable run per engine:
``python -m agentcore_fsm.cli.durable_bench [--runs N] [--temporal HOST:PORT]``.

Runs the same short run (a model call asking for one tool, the tool, an answer; the faux
provider) N times in memory (``run_agent_loop``), N times journaled in a SQLite run store, N
times as a DBOS workflow on a SQLite system database (both in a temporary directory) and, with
``--temporal``, N times as a Temporal workflow on that server (a worker in this process), one
after the other in one process; prints the mean time per run of each, its overhead over the run
in memory and its ratio to it (ratios in one run are what compare: absolute times vary with the
machine). Needs the ``dbos`` extra, and the ``temporal`` extra for ``--temporal``."""

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
    """Mean seconds per run: (in memory, DBOS on SQLite)."""
    rows = await measure_engines(runs, directory)
    return rows["in memory"], rows["DBOS (SQLite)"]


async def measure_engines(
    runs: int, directory: str, temporal_address: str | None = None
) -> dict[str, float]:
    """Mean seconds per run of each engine, by name, in the order measured."""
    from agentcore_fsm.integrations import dbos as durable
    from agentcore_fsm.persist.sqlite_store import SqliteRunStore

    stream_fn, tool, config = _agent()
    rows: dict[str, float] = {}
    # each engine's first run (imports, first connections) is a warm-up, not measured
    await run_agent_loop(["add"], AgentContext(tools=[tool]), config, stream_fn=stream_fn)
    started = time.perf_counter()
    for _ in range(runs):
        await run_agent_loop(["add"], AgentContext(tools=[tool]), config, stream_fn=stream_fn)
    rows["in memory"] = (time.perf_counter() - started) / runs
    store = SqliteRunStore(os.path.join(directory, "runs.db"))
    try:
        for i in range(runs + 1):
            if i == 1:
                started = time.perf_counter()
            await run_agent_loop(
                ["add"],
                AgentContext(tools=[tool]),
                config,
                stream_fn=stream_fn,
                store=store,
                run_id=f"bench-{i}",
            )
        rows["SQLite journal"] = (time.perf_counter() - started) / runs
    finally:
        store.close()
    agent = durable.DurableAgent("bench", stream_fn, config, [tool])
    await durable.launch(f"sqlite:///{os.path.join(directory, 'bench.db')}", agents=[agent])
    try:
        await durable.run_durable("bench", ["add"], run_id="warm-up")
        started = time.perf_counter()
        for i in range(runs):
            await durable.run_durable("bench", ["add"], run_id=f"bench-{i}")
        rows["DBOS (SQLite)"] = (time.perf_counter() - started) / runs
    finally:
        durable.shutdown()
    if temporal_address is not None:
        rows["Temporal"] = await _temporal(runs, temporal_address, agent)
    return rows


async def _temporal(runs: int, address: str, agent: Any) -> float:
    import uuid

    from agentcore_fsm.integrations import temporal

    queue = f"bench-{uuid.uuid4()}"  # a queue of its own: no other worker takes its runs
    await temporal.launch(address, agents=[agent], queue=queue)
    try:
        await temporal.run_durable("bench", ["add"], run_id=f"{queue}-warm-up")
        started = time.perf_counter()
        for i in range(runs):
            await temporal.run_durable("bench", ["add"], run_id=f"{queue}-{i}")
        return (time.perf_counter() - started) / runs
    finally:
        await temporal.shutdown()


def table(rows: dict[str, float]) -> str:
    """The rows as a text table: ms per run, overhead over memory, ratio to memory."""
    memory = rows["in memory"]
    lines = [f"{'engine':<16} {'ms/run':>9} {'overhead ms':>12} {'x memory':>9}"]
    for name, seconds in rows.items():
        ratio = seconds / memory if memory > 0 else float("inf")
        lines.append(
            f"{name:<16} {seconds * 1000:9.3f} {(seconds - memory) * 1000:12.3f} {ratio:9.1f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentcore_fsm.cli.durable_bench")
    parser.add_argument("--runs", type=int, default=50, help="runs of each kind (default 50)")
    parser.add_argument(
        "--temporal", metavar="HOST:PORT", help="also measure Temporal on this server"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, not {args.runs}")
    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(measure_engines(args.runs, tmp, args.temporal))
    print(table(rows))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
