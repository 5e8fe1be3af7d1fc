"""Generated scenarios through the real async driver, on both backends
(docs/reference.md#control-flow-of-a-run, docs/reference.md#abort, docs/reference.md#failures,
docs/reference.md#approval-of-tool-calls).

Every run must keep the event grammar and the transcript invariants, whatever happens in it;
undisturbed runs must also create exactly what a direct reading of
docs/reference.md#control-flow-of-a-run and docs/reference.md#tool-calls says.

The approval runs have tool calls that need approval (the tool's ``requires_approval``, or the
before hook asking) and every kind of decision: approved (maybe with changed arguments, valid or
not), denied, no approver, a ``decide_approval`` that raises or returns junk, a timeout (a tiny
``approval_timeout_s``), the signal fired while a call waits, and faults at any point (an emit of
``approval_requested``/``approval_decided`` among them).
"""

from __future__ import annotations

import pytest
from hypothesis import event, given, settings
from prop_scenarios import Scenario, run_scenario, scenarios

BACKENDS = ["trio", "asyncio"]
APPROVAL_EXAMPLES = max(1, settings.default.max_examples // 3)


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


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=APPROVAL_EXAMPLES)
@given(sc=scenarios(approvals=True))
def test_every_approval_run_keeps_the_grammar(backend: str, sc: Scenario) -> None:
    verdict = run_scenario(sc, backend)
    event(f"reason={verdict.reason}")
    event("disturbed" if verdict.disturbed else "undisturbed")


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=APPROVAL_EXAMPLES)
@given(sc=scenarios(odd=False, approvals=True))
def test_undisturbed_approval_runs_follow_the_spec(backend: str, sc: Scenario) -> None:
    verdict = run_scenario(sc, backend)
    event(f"reason={verdict.reason}")
    event("disturbed" if verdict.disturbed else "undisturbed")
