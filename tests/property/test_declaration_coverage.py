"""Coverage of the declarations: every declared state and every declared transition, from each
of its source states, is taken by the property suite, for each of the three machines: the loop
(``agent_loop``), a tool call (``tool_call``) and the Agent lifecycle (``agent``).

It runs the fixed banks itself (the scenario bank on both backends, the tool-call bank, the
suspension runs of ``prop_suspension``, the lifecycle runs) and counts only what those runs
take (``prop_coverage.collecting``), not what other tests walked before it: the check is the
same whatever order the tests run in, alone or with the rest, and every pair must be taken by
the banks.
"""

from __future__ import annotations

import logging

import prop_coverage
import pytest
from prop_bank import BANK
from prop_lifecycle import lifecycle_runs
from prop_limits import LIMIT_RUNS
from prop_models import MODEL_BANK
from prop_models import run_stepped as run_models_stepped
from prop_output import OUTPUT_BANK, STEPPED_BANK, run_on, run_stepped
from prop_policy_tools import policy_runs
from prop_scenarios import run_scenario
from prop_suspension import suspension_runs
from prop_tool_calls import CALL_BANK, run_case

from agentcore_fsm.core.declaration import load_declaration


def _run_the_banks() -> None:
    logging.getLogger("agentcore_fsm").disabled = True
    try:
        for scenario in BANK.values():
            for backend in ("trio", "asyncio"):
                try:
                    run_scenario(scenario, backend)
                except AssertionError:
                    pass  # a broken property is reported by test_bank; here only paths count
        for output_case in STEPPED_BANK.values():  # structured output (prop_output)
            run_stepped(output_case)
        for output_case in OUTPUT_BANK.values():
            for backend in ("trio", "asyncio"):
                run_on(output_case, backend)
        for model_case in MODEL_BANK.values():  # fallback and compaction (prop_models)
            run_models_stepped(model_case)
        for case in CALL_BANK.values():
            try:
                run_case(case, record=True)
            except AssertionError:
                pass  # reported by test_tool_call_declaration
    finally:
        logging.getLogger("agentcore_fsm").disabled = False
    # the tool policies (retries, timeouts, repeats), stepped by hand
    policy_runs()
    # the loop's suspension (a journaled run's undecided approvals), stepped by hand
    suspension_runs(observer=prop_coverage.record_transition)
    # usage limits' checks and the deadline's abort from every state (prop_limits)
    for run in LIMIT_RUNS.values():
        run(None, prop_coverage.record_transition)
    try:
        lifecycle_runs(record=True)
    except AssertionError:
        pass  # reported by test_agent_lifecycle_declaration


def test_every_declared_state_and_transition_is_taken() -> None:
    with prop_coverage.collecting() as taken:
        _run_the_banks()
    missing = [
        line
        for name in prop_coverage.DECLARATIONS
        for line in prop_coverage.uncovered(name, taken[name])
    ]
    assert not missing, "not covered:\n" + "\n".join(missing)


@pytest.mark.parametrize("name", prop_coverage.DECLARATIONS)
def test_the_coverage_check_reports_each_gap(name: str) -> None:
    """The check above can fail: leaving out any one (transition, source) pair of a complete
    walk is reported, and so is a state no pair reaches."""
    decl = load_declaration(name)
    complete = prop_coverage.required(name)
    assert prop_coverage.uncovered(name, complete) == []
    for index, source in complete:
        report = prop_coverage.uncovered(name, complete - {(index, source)})
        assert any(
            line.startswith(f"{name} #{index} ") and f"from {source} " in line for line in report
        )
    for state in decl.states:
        if state == decl.initial:
            continue
        unreached = {(t.index, s) for t in decl.transitions for s in t.source if t.dest == state}
        unreached |= {(t.index, state) for t in decl.transitions if state in t.source}
        report = prop_coverage.uncovered(name, complete - unreached)
        assert f"{name} state {state}: never reached" in report
