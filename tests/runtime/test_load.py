"""Load: thousands of runs on one event loop keep every run's grammar, and nothing leaks.

* 2,000 concurrent ``run_agent_loop`` runs on trio (500 on asyncio): scripted models of two or
  three turns, parallel tools that sleep a little, about a fifth of the runs aborted at a random
  moment (a timer, or at a random event). Every run's events must pass the grammar checker and
  the independent invariant check; afterwards no run is registered on the shared machine and no
  task is left.
* 3,000 short runs one after another: the registered-run count is back where it started and no
  ``LoopMachine`` instance survives (counted with ``gc``).

Time and memory are measured by the bench, never asserted here.
"""

from __future__ import annotations

import gc
import random
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.devtools.testing import FauxProvider, check_run, faux_response, faux_tool_call
from tests.property.adversarial import check_invariants, live_tasks, registered_runs

MODEL = Model(id="load-model", provider="faux", api="faux-api")
SCHEMA = {"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]}
RUN_GUARD = 60.0  # seconds for a whole batch: a hang guard, not a time budget


async def _work(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> Any:
    await anyio.sleep(args["ms"] / 1000)
    on_update(AgentToolResult(content=[TextContent(text="half way")]))
    await anyio.sleep(args["ms"] / 1000)
    return AgentToolResult(content=[TextContent(text=f"slept {args['ms']}ms")])


TOOLS = [AgentTool("work", "sleeps a little", SCHEMA, _work)]


@dataclass
class Outcome:
    failures: list[str] = field(default_factory=list)
    aborted: int = 0
    runs: int = 0


def _script(rng: random.Random, n: int) -> list[Any]:
    turns = rng.choice([2, 3])
    script: list[Any] = []
    for t in range(turns - 1):
        calls = [
            faux_tool_call("work", {"ms": rng.choice([0, 1, 2, 3])}, id=f"run{n}t{t}c{c}")
            for c in range(rng.randint(1, 3))
        ]
        script.append(faux_response(f"turn {t}", tool_calls=calls))
    script.append(faux_response("all done"))
    return script


async def _one_run(n: int, seed: int, outcome: Outcome) -> None:
    rng = random.Random(seed * 100_003 + n)
    faux = FauxProvider(_script(rng, n), chunk_size=rng.choice([2, 5, 50]))
    controller = AbortController()
    events: list[Any] = []
    abort_kind = rng.choices(["none", "timer", "event"], weights=[80, 10, 10])[0]
    abort_event = rng.randint(0, 40)
    fired_at: list[int] = []

    def fire() -> None:
        if not controller.signal.aborted:
            fired_at.append(len(events))
        controller.abort("load")

    def emit(event: Any) -> None:
        events.append(event)
        if abort_kind == "event" and len(events) - 1 == abort_event:
            fire()

    async def timer() -> None:
        await anyio.sleep(rng.uniform(0, 0.012))
        fire()

    try:
        async with anyio.create_task_group() as tg:
            if abort_kind == "timer":
                tg.start_soon(timer)
            messages = await run_agent_loop(
                [UserMessage(content=f"run {n}")],
                AgentContext("", [], TOOLS),
                AgentLoopConfig(model=MODEL),
                emit,
                signal=controller.signal,
                stream_fn=faux,
            )
            tg.cancel_scope.cancel()
        summary = check_invariants(events, returned=messages)
        check_run(events, messages, model_contexts=faux.calls)
        if fired_at and fired_at[0] <= len(events) - 1:
            assert summary.reason == "aborted", f"aborted at #{fired_at[0]}: {summary.reason}"
            outcome.aborted += 1
    except Exception as exc:  # collected: one report for the whole batch
        outcome.failures.append(f"run {n}: {type(exc).__name__}: {exc}")
    outcome.runs += 1


async def _concurrent(n_runs: int, seed: int) -> tuple[Outcome, int]:
    outcome = Outcome()
    before = live_tasks()
    with anyio.fail_after(RUN_GUARD):
        async with anyio.create_task_group() as tg:
            for n in range(n_runs):
                tg.start_soon(_one_run, n, seed, outcome)
    return outcome, live_tasks() - before


@pytest.mark.parametrize(("backend", "n_runs"), [("trio", 2000), ("asyncio", 500)])
def test_many_concurrent_runs_keep_their_grammar_and_leak_nothing(
    backend: str, n_runs: int
) -> None:
    registered = registered_runs()
    outcome, tasks_left = anyio.run(_concurrent, n_runs, 7, backend=backend)
    assert not outcome.failures, f"{len(outcome.failures)} of {n_runs} runs broke:\n" + "\n".join(
        outcome.failures[:5]
    )
    assert outcome.runs == n_runs
    assert outcome.aborted > n_runs // 20, f"only {outcome.aborted} runs were aborted"
    assert tasks_left == 0, f"{tasks_left} task(s) left after the batch"
    assert registered_runs() == registered, "runs stayed registered on the shared machine"


def _machines() -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if isinstance(obj, LoopMachine))


async def _sequential(n_runs: int) -> list[str]:
    failures: list[str] = []
    tool_calls = [faux_tool_call("work", {"ms": 0}, id="c1")]
    for n in range(n_runs):
        if n % 3 == 0:
            script = [faux_response(tool_calls=tool_calls), faux_response("done")]
        else:
            script = [faux_response("short answer")]
        controller = AbortController()
        if n % 7 == 0:
            controller.abort("before the run")
        events: list[Any] = []
        with anyio.fail_after(RUN_GUARD):
            messages = await run_agent_loop(
                [UserMessage(content="hi")],
                AgentContext("", [], TOOLS),
                AgentLoopConfig(model=MODEL),
                events.append,
                signal=controller.signal,
                stream_fn=FauxProvider(script),
            )
        try:
            check_invariants(events, returned=messages)
        except AssertionError as exc:
            failures.append(f"run {n}: {exc}")
    return failures


def test_many_sequential_runs_leave_no_machine_behind() -> None:
    anyio.run(_sequential, 5, backend="trio")  # warm up what is built once
    registered = registered_runs()
    machines = _machines()
    failures = anyio.run(_sequential, 3000, backend="trio")
    assert not failures, failures[:3]
    assert registered_runs() == registered, "runs stayed registered on the shared machine"
    assert _machines() == machines, "LoopMachine instances survived their runs"
