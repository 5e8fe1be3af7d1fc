"""One record of a run, the same behaviour everywhere (hypothesis, both backends).

Generated runs (tests/equivalence_runs.py: hooks returning every kind of value, valid and
invalid, hooks that raise, tools that raise or return ``details`` JSON cannot hold, text with
surrogate pairs kept as two code points and lone surrogates, deterministic aborts fired by a
tool or a hook, approvals approved, denied and approved with other arguments) are each run

* in memory (``run_agent_loop``): the reference;
* journaled in a ``MemoryRunStore`` and in a ``SqliteRunStore``: the listener gets the same
  events, ``message_update`` deltas included, the run returns the same messages, and what the
  store loads back (the transcript, and the events of its journaled steps, which hold no
  deltas) is the same again;
* journaled, then cut after a random number ``k`` of its journal entries (a crash: the store
  holds the finished run's first ``k`` entries, ``0 <= k <= all of them``, the run still marked
  running under a dead process's lease) and resumed by a fresh process (new tools, new hooks,
  new abort controller) with ``resume_run``.

What "the same run" means for a resumed run: the events of the journaled steps (as
``load_run_state`` regenerates them: no deltas) followed by the resumed run's events, deltas
left out, are the uncut run's events, deltas left out; and the resumed run's own events, deltas
included, are exactly what the uncut run's listener got after the events of those ``k`` steps.
Events a listener of the crashed process may have got after the last journaled step are not
part of the comparison: the resumed run starts again from the journal
(docs/survive.md#what-a-resumed-run-does-again-and-what-not). The resumed run returns the uncut
run's messages, and the store then holds them.

Timestamps are stripped everywhere (each engine, and the resumed part of a run, reads its own
clock). Tools are ``idempotent=True`` (they are pure), so a call in flight at the cut runs
again; the non-idempotent case (answered as interrupted, a different run on purpose) is
tests/persist/test_resume.py's. Runs whose calls run in parallel compare each call's events and
the events around the batch (how the calls' events interleave is the scheduler's; trio shuffles
on purpose); nothing aborts in those (which running call finishes before an abort is the
scheduler's too). Nothing here fixes the order of the turn hooks, polls or events: engines are
compared with each other. DBOS is tests/integrations/test_dbos_equivalence.py.
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest
from equivalence_runs import (
    AFTER,
    BEFORE,
    CHECKS,
    DECISIONS,
    PREPARES,
    STOPS,
    TOOL_OUTCOMES,
    Call,
    Outcome,
    Plan,
    Turn,
    as_regenerated,
    cut,
    drawn,
    load_back,
    plain_events,
    plain_messages,
    plans,
    resume_plan,
    run_plan,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore_fsm.devtools.testing import check_run
from agentcore_fsm.persist.store import MemoryRunStore, SqliteRunStore

_ids = itertools.count()


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = SqliteRunStore(tmp_path_factory.mktemp("equivalence") / "runs.db")
    yield store
    store.close()


def _after_steps(events: list[Any], steps_events: int) -> list[Any]:
    """``events`` after the first ``steps_events`` events that are not deltas (and the deltas
    among them)."""
    seen = 0
    for i, event in enumerate(events):
        if seen == steps_events:
            return events[i:]
        if event["type"] != "message_update":
            seen += 1
    return [] if seen == steps_events else pytest.fail("fewer events than the journal's steps")


def _same_journaled(plan: Plan, ref: Outcome, run: Outcome, store: Any, run_id: str) -> None:
    mode = plan.mode
    assert plain_events(run.events, mode=mode) == plain_events(ref.events, mode=mode)
    assert plain_messages(run.messages) == plain_messages(ref.messages)
    stored = store.load(run_id)
    assert stored.status == "finished"
    assert stored.end_reason == ref.events[-1]["reason"]
    back = load_back(plan, store, run_id)
    assert plain_messages(back.messages) == plain_messages(ref.messages)
    assert plain_events(as_regenerated(back.events), updates=False, mode=mode) == (
        plain_events(as_regenerated(ref.events), updates=False, mode=mode)
    )


async def _equivalent(plan: Plan, where: int, into_sqlite: bool, sqlite: Any) -> None:
    ref = await run_plan(plan)
    check_run(ref.raw, ref.messages)  # the generated run is a well-formed one
    journaled: dict[str, tuple[Outcome, Any, str]] = {}
    for kind, store in (("memory", MemoryRunStore()), ("sqlite", sqlite)):
        run_id = f"eq-{next(_ids)}"
        run = await run_plan(plan, store=store, run_id=run_id)
        _same_journaled(plan, ref, run, store, run_id)
        journaled[kind] = (run, store, run_id)

    # a crash after k entries, resumed by another process
    original, store, run_id = journaled["memory"]
    entries = store.load(run_id).entries
    k = where % (len(entries) + 1)
    target: Any = sqlite if into_sqlite else MemoryRunStore()
    crashed = f"eq-{next(_ids)}-cut{k}"
    cut(store, run_id, k, target, crashed)
    history = load_back(plan, target, crashed) if k else Outcome([], [])
    resumed = await resume_plan(plan, target, crashed)
    mode = plan.mode
    assert plain_events(
        as_regenerated(history.events + resumed.events), updates=False, mode=mode
    ) == plain_events(as_regenerated(ref.events), updates=False, mode=mode), (
        f"cut after {k} of {len(entries)} entries"
    )
    after = _after_steps(original.events, len(history.events))
    assert plain_events(resumed.events, mode=mode) == plain_events(after, mode=mode), k
    assert plain_messages(resumed.messages) == plain_messages(ref.messages), k
    done = target.load(crashed)
    assert done.status == "finished" and done.entries[:k] == entries[:k]
    assert plain_messages(load_back(plan, target, crashed).messages) == plain_messages(ref.messages)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans(), where=st.integers(0, 10_000), into_sqlite=st.booleans())
def test_a_run_is_the_same_in_memory_journaled_and_resumed(
    backend: str, plan: Plan, where: int, into_sqlite: bool, sqlite_store: Any
) -> None:
    anyio.run(_equivalent, plan, where, into_sqlite, sqlite_store, backend=backend)


def test_the_generator_covers_every_kind_of_value() -> None:
    """Every kind of value each hook, tool and approver may give, valid or not, comes up."""
    covered = set().union(*(p.features() for p in drawn(300, plans())))
    wanted = {f"out:{o}" for o in TOOL_OUTCOMES} | {f"before:{b}" for b in BEFORE}
    wanted |= {f"after:{a}" for a in AFTER} | {f"check:{c}" for c in CHECKS}
    wanted |= {f"decision:{d}" for d in DECISIONS} | {f"stop:{s}" for s in STOPS}
    wanted |= {f"prepare:{p}" for p in PREPARES} | {"mode:sequential", "mode:parallel"}
    wanted |= {f"tool:{t}" for t in ("probe", "ask", "check")}
    assert wanted - covered == set()


@pytest.mark.anyio
async def test_a_run_cut_between_an_aborted_outcome_and_its_abort_entry_resumes_aborted() -> None:
    """The journal holds a tool's outcome taken after the signal fired (``"aborted": true``;
    the tool fired it) but not the ``abort`` entry that followed it: the resumed run, whose tool
    is not run again, is still aborted (resume_run starts it with its signal fired), as the run
    was without the crash. Found by the property above: the resumed run used to go on with the
    next turn, as if nobody had aborted."""
    plan = Plan(turns=(Turn(calls=(Call(out="abort"),)),))
    store = MemoryRunStore()
    ref = await run_plan(plan, store=store, run_id="orig")
    assert ref.events[-1]["reason"] == "aborted"
    entries = store.load("orig").entries
    assert entries[-1]["input"] == "abort"
    k = len(entries) - 1  # everything but the abort entry
    assert any(e.get("aborted") is True for e in entries[:k]), entries[:k]
    crashed = MemoryRunStore()
    cut(store, "orig", k, crashed, "r")
    resumed = await resume_plan(plan, crashed, "r")
    assert resumed.events[-1]["type"] == "agent_end"
    assert resumed.events[-1]["reason"] == "aborted"
    assert plain_messages(resumed.messages) == plain_messages(ref.messages)
    assert crashed.load("r").end_reason == "aborted"
