"""Coverage of the declaration: every declared state and every declared transition, from each
of its source states, is taken by the property suite.

Named ``test_zz_*`` so that it runs after the other property tests and sees what they walked
(``prop_coverage.TAKEN``); it also runs the fixed scenario bank itself, on both backends, so it
means the same thing when it runs alone.
"""

from __future__ import annotations

import logging

import prop_coverage
from prop_bank import BANK
from prop_scenarios import run_scenario

from agentcore_fsm import load_declaration


def test_every_declared_state_and_transition_is_taken() -> None:
    logging.getLogger("agentcore_fsm").disabled = True
    try:
        for scenario in BANK.values():
            for backend in ("trio", "asyncio"):
                try:
                    run_scenario(scenario, backend)
                except AssertionError:
                    pass  # a broken property is reported by test_bank; here only paths count
    finally:
        logging.getLogger("agentcore_fsm").disabled = False
    decl = load_declaration("agent_loop")
    taken = set(prop_coverage.TAKEN)
    missing = sorted(prop_coverage.required() - taken)
    described = [
        f"#{index} {decl.transitions[index].label} from {source} -> {decl.transitions[index].dest}"
        for index, source in missing
    ]
    assert not missing, "never taken:\n" + "\n".join(described)
    unreached = set(decl.states) - prop_coverage.states_reached(taken)
    assert not unreached, f"states never reached: {sorted(unreached)}"
