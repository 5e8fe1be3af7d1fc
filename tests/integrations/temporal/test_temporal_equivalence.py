"""The generated runs of tests/equivalence_runs.py (the ones tests/integrations/
test_dbos_equivalence.py picks: hooks valid, invalid and raising, tools that raise, approvals)
run as Temporal workflows give the messages and, deltas aside, the events the same runs give
in memory; the run's record, derived again, gives the same messages.

A Temporal run has no ``message_update`` deltas and its assistant ``message_start`` carries the
finished answer (docs/durable.md), so events are compared without the deltas and with
``as_regenerated``, as a run regenerated from its journal is."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from equivalence_runs import (
    PROMPTS,
    Rig,
    Snapshots,
    as_regenerated,
    covering,
    drawn,
    plain_events,
    plain_messages,
    plans,
    run_plan,
    snapshot,
)

from agentcore_fsm.integrations import temporal as durable
from agentcore_fsm.persist.journal import derive_run

PLANS = covering(drawn(200, plans(aborts=False, parallel=False)), 9)


def test_temporal_runs_each_generated_run_as_memory_does(temporal_server: str) -> None:
    async def main() -> list[Any]:
        references = [await run_plan(plan) for plan in PLANS]
        rigs = [Rig(plan) for plan in PLANS]
        prefix = uuid.uuid4().hex[:8]
        agents = [
            durable.DurableAgent(f"eq-{prefix}-{i}", rig.stream_fn, rig.config(), rig.tools())
            for i, rig in enumerate(rigs)
        ]
        await durable.launch(
            temporal_server,
            agents=agents,
            queue=f"q-{prefix}",
            passed_through=["equivalence_runs", "hypothesis"],
        )
        try:

            async def one(i: int, rig: Rig) -> Any:
                run_id = f"eq-{prefix}-run-{i}"
                live = Snapshots()
                remove = durable.listen(run_id, live)
                try:
                    await durable.start_run(agents[i].name, PROMPTS, run_id=run_id)
                    for call in rig.by_call:  # every call that may wait
                        await durable.send_decision_async(run_id, call, rig.decision(call))
                    messages = await durable.result_async(run_id)
                finally:
                    remove()
                followed = [snapshot(e) async for e in durable.follow_async(run_id)]
                return live.events, messages, followed, await durable.record_async(run_id)

            ran = await asyncio.gather(*(one(i, rig) for i, rig in enumerate(rigs)))
        finally:
            await durable.shutdown()
        return list(zip(references, ran, strict=True))

    for plan, (reference, (live, messages, followed, record)) in zip(
        PLANS, asyncio.run(main()), strict=True
    ):
        expected = as_regenerated(plain_events(reference.events, updates=False))
        assert plain_messages(messages) == plain_messages(reference.messages), plan
        assert as_regenerated(plain_events(live)) == expected, plan
        assert as_regenerated(plain_events(followed)) == expected, plan
        derived = derive_run(record)
        assert plain_messages(derived.machine.new_messages) == plain_messages(messages), plan
