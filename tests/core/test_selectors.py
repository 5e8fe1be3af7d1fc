"""The generated selectors (agentcore_fsm/core/selectors.py) choose exactly what the rule
chooses: for every trigger and source state of every declaration, under every valuation of the
guards involved (all of them up to ten guards, 600 drawn beyond), the plan a selector returns is
the plan of the spec :func:`select` interprets, and no guard runs twice in one selection."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentcore_fsm.core.declaration import TransitionSpec, load_declaration
from agentcore_fsm.core.declared import Compiled
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.selectors import Candidates, Plan, build_selectors, select
from agentcore_fsm.core.tool_call import ToolCallMachine


class Valuation:
    """The model the fake guards read: each guard's value, and how often each was asked."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self.asked: Counter[str] = Counter()


def fake_guard(name: str) -> Callable[[Valuation], Any]:
    def guard(m: Valuation) -> Any:
        m.asked[name] += 1
        return m.values[name]

    guard.__name__ = name
    return guard


def faked(compiled: Compiled) -> tuple[dict[str, dict[str, Candidates]], list[str]]:
    """The compiled tables with every guard replaced by a fake reading a Valuation."""
    names: dict[Any, str] = {}
    fakes: dict[str, Callable[[Valuation], Any]] = {}
    tables: dict[str, dict[str, Candidates]] = {}
    for trigger, per_state in compiled.candidates.items():
        tables[trigger] = {}
        for state, candidates in per_state.items():
            rows = []
            for spec, checks in candidates:
                fake_checks = []
                for check, target in checks:
                    name = names.setdefault(check, check.__name__)
                    fake = fakes.setdefault(name, fake_guard(name))
                    fake_checks.append((fake, target))
                rows.append((spec, tuple(fake_checks)))
            tables[trigger][state] = tuple(rows)
    return tables, sorted(fakes)


def valuations(guards: list[str], seed: int) -> Iterator[dict[str, Any]]:
    if len(guards) <= 10:
        for bits in itertools.product([False, True], repeat=len(guards)):
            yield dict(zip(guards, bits, strict=True))
        return
    rng = random.Random(seed)
    for _ in range(600):
        # truthy and falsy values that are not bools: a guard is taken by truth
        yield {g: rng.choice([False, True, 0, 1, "", "x", None, [0]]) for g in guards}


CASES = [("agent_loop", LoopMachine), ("tool_call", ToolCallMachine)]


@pytest.mark.parametrize(("name", "owner"), CASES)
def test_generated_selectors_choose_what_the_rule_chooses(name: str, owner: type) -> None:
    compiled = Compiled(load_declaration(name), owner)
    tables, _ = faked(compiled)
    plans: dict[tuple[int, str], Plan] = {}

    def plan_of(spec: TransitionSpec, source: str) -> Plan:
        plan = plans[spec.index, source] = Plan(spec, (spec.index, source), ())
        return plan

    selectors = build_selectors(tables, plan_of, f"test {name}")
    checked = 0
    shapes = set()
    for trigger, per_state in tables.items():
        assert set(selectors[trigger]) == set(per_state)
        for state, candidates in per_state.items():
            shapes.add((len(candidates), sum(len(c) for _, c in candidates)))
            involved = sorted({f.__name__ for _, checks in candidates for f, _ in checks})
            for values in valuations(involved, hash((trigger, state)) & 0xFFFF):
                expected = select(candidates, Valuation(values))
                model = Valuation(values)
                got = selectors[trigger][state](model)
                assert (None if got is None else got.spec) is expected, (trigger, state, values)
                if got is not None:
                    assert got is plans[got.spec.index, state]  # the plan for this source
                    assert got.record == (got.spec.index, state)
                assert all(n == 1 for n in model.asked.values()), (trigger, state, model.asked)
                checked += 1
    assert checked > 200
    assert len(shapes) > 3  # closures and generated source both covered


def test_a_generated_selector_honours_unless_and_order() -> None:
    spec_a = TransitionSpec(0, "go", ("s",), "a", unless=("blocked",))
    spec_b = TransitionSpec(1, "go", ("s",), "b", guards=("ready", "blocked"))
    spec_c = TransitionSpec(2, "go", ("s",), "c", guards=("ready",))
    ready, blocked = fake_guard("ready"), fake_guard("blocked")
    candidates: Candidates = (
        (spec_a, ((blocked, False),)),
        (spec_b, ((ready, True), (blocked, True))),
        (spec_c, ((ready, True),)),
    )
    selectors = build_selectors(
        {"go": {"s": candidates}}, lambda spec, source: Plan(spec, None, ()), "test"
    )
    choose = selectors["go"]["s"]
    for ready_v, blocked_v, dest in [
        (False, False, "a"),
        (True, False, "a"),
        (True, True, "b"),
        (False, True, None),
    ]:
        model = Valuation({"ready": ready_v, "blocked": blocked_v})
        got = choose(model)
        assert (None if got is None else got.dest) == dest
        assert max(model.asked.values()) == 1
