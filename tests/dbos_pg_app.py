"""The agent of the Postgres scale-out test (tests/test_dbos_postgres.py), loaded by each
worker with ``agentcore-fsm worker --app dbos_pg_app:agents``.

Each run: a model call asking for the tool ``work`` (not idempotent), which takes
``AGENTCORE_TEST_WORK_S`` seconds, then an answer. What happens is written to the test's own
tables in the same Postgres database (``AGENTCORE_TEST_PG``): ``effects`` (one row per tool
execution), ``activity`` (a row when a run's first model call is made, ``begin``, and when its
last one is, ``end``), ``model_calls`` (the time of every model call made).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import psycopg

from agentcore_fsm import AgentLoopConfig, AgentTool, AgentToolResult, Model, TextContent
from agentcore_fsm.integrations.dbos import DurableAgent
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (run_id text, call_id text, worker text);
CREATE TABLE IF NOT EXISTS activity (run_id text, phase text, t double precision, worker text);
CREATE TABLE IF NOT EXISTS model_calls (run_id text, t double precision);
"""


def _execute(sql: str, *params: Any) -> None:
    with psycopg.connect(os.environ["AGENTCORE_TEST_PG"], autocommit=True) as conn:
        conn.execute(sql, params)


def run_of(messages: Any) -> str:
    """The run id: the text of the prompt."""
    content = messages[0].content
    return content if isinstance(content, str) else str(content[0].text)


def agents() -> list[DurableAgent]:
    worker = os.environ.get("AGENTCORE_TEST_WORKER", "?")
    work_s = float(os.environ.get("AGENTCORE_TEST_WORK_S", "0.1"))

    async def stream_fn(model: Any, context: Any, options: Any) -> Any:
        run_id = run_of(context.messages)  # the prompt is the run id
        turn = sum(1 for m in context.messages if getattr(m, "role", None) == "assistant")
        now = time.time()
        await asyncio.to_thread(_execute, "INSERT INTO model_calls VALUES (%s, %s)", run_id, now)
        phase = "begin" if turn == 0 else "end"
        await asyncio.to_thread(
            _execute, "INSERT INTO activity VALUES (%s, %s, %s, %s)", run_id, phase, now, worker
        )
        if turn == 0:
            answer = faux_response(tool_calls=[faux_tool_call("work", {"n": 1}, id="w1")])
        else:
            answer = faux_response(f"done {run_id}")
        async for event in FauxProvider([answer])(model, context, options):
            yield event

    async def work(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        run_id = context_run_id(args)
        await asyncio.to_thread(
            _execute, "INSERT INTO effects VALUES (%s, %s, %s)", run_id, call_id, worker
        )
        await asyncio.sleep(work_s)
        return AgentToolResult(content=[TextContent(text="worked")])

    def context_run_id(args: Any) -> str:
        return str(args.get("run", "?"))

    def before_tool_call(ctx: Any, signal: Any) -> None:
        # the tool learns its run from the transcript: put it into the arguments
        ctx.args["run"] = run_of(ctx.context.messages)

    tool = AgentTool("work", "does some work", {"type": "object"}, work)
    config = AgentLoopConfig(model=Model(id="faux"), before_tool_call=before_tool_call)
    return [DurableAgent("pg", stream_fn, config, [tool])]
