"""Generated scenarios through the real async driver, on both backends
(docs/reference.md#control-flow-of-a-run, docs/reference.md#abort, docs/reference.md#failures).

Every run must keep the event grammar and the transcript invariants, whatever happens in it;
undisturbed runs must also create exactly what a direct reading of
docs/reference.md#control-flow-of-a-run and docs/reference.md#tool-calls says.
"""

from __future__ import annotations

import pytest
from hypothesis import event, given
from prop_scenarios import Scenario, run_scenario, scenarios

BACKENDS = ["trio", "asyncio"]


@pytest.mark.parametrize("backend", BACKENDS)
@given(sc=scenarios())
def test_every_run_keeps_the_grammar(backend: str, sc: Scenario) -> None:
    verdict = run_scenario(sc, backend)
    event(f"reason={verdict.reason}")
    event("disturbed" if verdict.disturbed else "undisturbed")


@pytest.mark.parametrize("backend", BACKENDS)
@given(sc=scenarios(odd=False))
def test_undisturbed_runs_follow_the_spec(backend: str, sc: Scenario) -> None:
    verdict = run_scenario(sc, backend)
    event(f"reason={verdict.reason}")
    event("disturbed" if verdict.disturbed else "undisturbed")
