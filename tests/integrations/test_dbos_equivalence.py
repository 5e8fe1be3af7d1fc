"""One record of a run, the same behaviour on DBOS (asyncio): generated runs
(tests/equivalence_runs.py, the generator of tests/persist/test_equivalence_properties.py) run
as DBOS workflows give the events and the messages the same runs give in memory.

DBOS needs every agent registered before it is launched, and launching it is slow, so it is
launched once here, with one ``DurableAgent`` per run: the runs are a fixed set drawn from the
generator (derandomized), nine picked greedily to cover as many of the generator's kinds of
values as nine runs can (hook values valid and invalid, hooks that raise, tools that raise or
return ``details`` JSON cannot hold, surrogates, approvals). Two things of the generator are
left out, because a durable run does not have them: aborts (a durable run has no abort
signal: docs/durable.md; DBOS cancels a workflow instead) and parallel tool calls (a durable
run forces ``tool_execution="sequential"``).
Approvals are answered in memory by ``decide_approval`` and on DBOS by ``send_decision`` with
the very same decision (sent as soon as the workflow exists; DBOS keeps a message until the
call waits for it).

Compared, timestamps stripped: the live events (``message_update`` deltas included: a durable
model call streams live in its first execution), the returned messages, and the run's DBOS
event stream (what ``follow`` reads: the live events without the deltas).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import dbos  # noqa: F401  (the dbos extra is part of the test install: fail, never skip)
from equivalence_runs import (
    PROMPTS,
    Outcome,
    Rig,
    Snapshots,
    covering,
    drawn,
    plain_events,
    plain_messages,
    plans,
    run_plan,
    snapshot,
)

from agentcore_fsm.integrations import dbos as durable

RUNS = 9


PLANS = covering(drawn(200, plans(aborts=False, parallel=False)), RUNS)


async def _durable(name: str, rig: Rig, run_id: str) -> tuple[Outcome, list[Any]]:
    events = Snapshots()
    remove = durable.listen(run_id, events)
    try:
        await durable.start_run(name, PROMPTS, run_id=run_id)
        for call in rig.by_call:  # every call that may wait; unread ones stay unread
            await asyncio.to_thread(durable.send_decision, run_id, call, rig.decision(call))
        messages = await durable.result_async(run_id)
    finally:
        remove()
    followed = [snapshot(e) async for e in durable.follow_async(run_id, timeout_s=10)]
    return Outcome(events.events, messages), followed


def test_the_generated_runs_cover_what_a_durable_run_can_do() -> None:
    covered = set().union(*(p.features() for p in PLANS))
    for kind in ("before:dict", "before:junk", "before:raise", "after:replace", "after:junk"):
        assert kind in covered, (kind, sorted(covered))
    for kind in ("stop:junk", "prepare:dict", "prepare:junk", "out:bytes", "out:raise"):
        assert kind in covered, (kind, sorted(covered))
    assert {"decision:approve", "decision:deny", "decision:args"} <= covered, sorted(covered)
    assert len(PLANS) == RUNS


def test_dbos_runs_each_generated_run_as_memory_does(tmp_path: Path) -> None:
    async def main() -> list[tuple[Outcome, Outcome, list[Any]]]:
        references = [await run_plan(plan) for plan in PLANS]
        rigs = [Rig(plan) for plan in PLANS]
        agents = [
            durable.DurableAgent(f"equivalence-{i}", rig.stream_fn, rig.config(), rig.tools())
            for i, rig in enumerate(rigs)
        ]
        await durable.launch(f"sqlite:///{tmp_path / 'dbos.db'}", agents=agents)
        try:
            out = []
            for i, (rig, reference) in enumerate(zip(rigs, references, strict=True)):
                ran, followed = await _durable(agents[i].name, rig, f"equivalence-run-{i}")
                out.append((reference, ran, followed))
            return out
        finally:
            durable.shutdown()

    for plan, (reference, ran, followed) in zip(PLANS, asyncio.run(main()), strict=True):
        assert plain_events(ran.events) == plain_events(reference.events), plan
        assert plain_messages(ran.messages) == plain_messages(reference.messages), plan
        assert plain_events(followed) == plain_events(ran.events, updates=False), plan
