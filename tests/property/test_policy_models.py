"""Property tests of model fallback and context compaction (docs/policies-models.md).

Random failure kinds per request, random fallback lists and kinds, overflow at random points,
compaction by overflow or by budget, follow-up prompts, and (stepped) cuts while compacting or
falling back. Each run is checked against the oracle of ``prop_models``: the event grammar and
the exact event sequence hold, the answering model is the first whose request succeeded, a run
where every model failed names each model's error, and a compaction never separates a tool call
from its result nor drops the latest user message. Stepped by hand, and through the real driver
on both backends (the grammar checked by ``run_checked``).
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from prop_models import (
    CUTS,
    KINDS,
    MODEL_BANK,
    ModelCase,
    expected,
    reachable_cut,
    run_on,
    run_stepped,
    verify,
)

from agentcore_fsm.core.fallback import ERROR_KINDS
from agentcore_fsm.devtools.testing import check_run

OUTCOMES = st.sampled_from(["ok", *KINDS])


@st.composite
def cases(draw: st.DrawFn, *, cuts: bool = True) -> ModelCase:
    answers = tuple(draw(st.lists(OUTCOMES, min_size=16, max_size=16)))
    on = tuple(
        draw(
            st.lists(st.sampled_from(ERROR_KINDS), min_size=1, max_size=4, unique=True).map(sorted)
        )
    )
    case = ModelCase(
        answers=answers,
        fallbacks=draw(st.integers(0, 3)),
        on=on,  # type: ignore[arg-type]
        compaction=draw(st.sampled_from([None, "overflow", "budget"])),
        follow_ups=draw(st.integers(0, 1)),
        cut=draw(st.sampled_from(CUTS)) if cuts else None,
    )
    try:
        expected(dataclasses.replace(case, cut=None))
    except AssertionError:
        assume(False)  # more requests than answers: not a case
    assume(reachable_cut(case))
    return case


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_stepped_runs_keep_the_rules(case: ModelCase) -> None:
    events, messages, called = run_stepped(case)
    check_run(events, messages)
    verify(case, events, messages)
    # each request goes to the model the run had reached: the fallback list, in order
    ids = [m.id for m in called]
    assert ids == sorted(ids), f"{case}: models called out of order: {ids}"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(cuts=False), backend=st.sampled_from(["trio", "asyncio"]))
def test_driven_runs_keep_the_rules(case: ModelCase, backend: str) -> None:
    events, messages = run_on(case, backend)
    verify(case, events, messages, driven=True)


def test_the_bank_on_both_backends() -> None:
    for name, case in MODEL_BANK.items():
        events, messages, _ = run_stepped(case)
        verify(case, events, messages)
        if case.cut is None:
            for backend in ("trio", "asyncio"):
                events, messages = run_on(case, backend)
                verify(case, events, messages, driven=True)
        assert name


def test_the_oracle_can_fail() -> None:
    """A run checked against another case's oracle fails: the checks are not vacuous."""
    case = MODEL_BANK["fallback_answers"]
    events, messages, _ = run_stepped(case)
    other = dataclasses.replace(case, fallbacks=1)
    try:
        verify(other, events, messages)
    except AssertionError:
        return
    raise AssertionError("verify accepted a run of another case")
