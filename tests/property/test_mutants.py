"""The suite catches what it should: small mutations of the declaration must not survive.

Each mutant is an in-memory copy of ``states/agent_loop.toml`` with one change:

* ``drop``: one emit action removed from a transition;
* ``swap``: two neighbouring emit actions of a transition swapped;
* ``retarget``: a transition sent to another state;
* ``invert``: a guard moved from ``guards`` to ``unless`` (or back).

Every mutant is run (``LoopMachine(..., declaration=mutant)``, stepped by the synchronous driver
of ``prop_sync_driver``) over the scenario bank; it is killed when the grammar checker or one of
the properties of ``prop_scenarios.verify`` fails, or the machine breaks (raises, gets stuck,
never ends). A mutant that survives every scenario fails its test. Scenarios that fail on the
real declaration (a core bug, reported by ``test_bank``) are left out, so that no mutant is
"killed" by a bug it did not cause.
"""

from __future__ import annotations

import dataclasses
import logging
from functools import cache

import pytest
from prop_bank import BANK
from prop_scenarios import verify
from prop_sync_driver import run_sync

from agentcore_fsm import Declaration, load_declaration, parse_declaration

REAL = load_declaration("agent_loop")


def _with(decl: Declaration, index: int, **changes: object) -> Declaration:
    transitions = tuple(
        dataclasses.replace(t, **changes) if t.index == index else t  # type: ignore[arg-type]
        for t in decl.transitions
    )
    return dataclasses.replace(decl, transitions=transitions, source_text="")


def mutants() -> dict[str, Declaration]:
    out: dict[str, Declaration] = {}
    for t in REAL.transitions:
        where = f"#{t.index}:{t.trigger}:{'|'.join(t.source)}"
        for j, action in enumerate(t.emits):
            emits = t.emits[:j] + t.emits[j + 1 :]
            out[f"drop {action} {where}"] = _with(REAL, t.index, emits=emits)
        for j in range(len(t.emits) - 1):
            emits = list(t.emits)
            emits[j], emits[j + 1] = emits[j + 1], emits[j]
            out[f"swap {t.emits[j]}/{t.emits[j + 1]} {where}"] = _with(
                REAL, t.index, emits=tuple(emits)
            )
        for dest in REAL.states:
            if dest != t.dest:
                out[f"retarget {where} -> {dest}"] = _with(REAL, t.index, dest=dest)
        for guard in t.guards:
            guards = tuple(g for g in t.guards if g != guard)
            out[f"invert {guard} {where}"] = _with(
                REAL, t.index, guards=guards, unless=(*t.unless, guard)
            )
        for guard in t.unless:
            unless = tuple(g for g in t.unless if g != guard)
            out[f"invert not {guard} {where}"] = _with(
                REAL, t.index, unless=unless, guards=(*t.guards, guard)
            )
    return out


MUTANTS = mutants()

# Mutants that cannot be told apart by any run, because they change nothing observable; each
# with the reason. The engine makes them equivalent: entering `executing` offers its automatic
# `tools_settled`, which sends a batch whose calls have not begun back to `preparing_tools`;
# entering `closing_turn` asks for `proceed`, one more round trip that leads where the
# original went when no turn hook runs.
EQUIVALENT = {
    "retarget #22:model_finished:streaming -> executing": "tools_settled [calls_remain] "
    "returns to preparing_tools at once and the calls begin there",
    "retarget #34:stop_decided:deciding_stop -> closing_turn": "closing_turn only adds a "
    "proceed before awaiting_steering, where the original goes directly",
    "retarget #32:next_turn_prepared:preparing_next_turn -> closing_turn": "the same: a "
    "proceed, then awaiting_steering",
}


@cache
def healthy_scenarios() -> tuple[str, ...]:
    """The bank scenarios that pass on the real declaration."""
    names = []
    for name, sc in BANK.items():
        try:
            harness, messages = run_sync(sc, REAL)
            verify(sc, harness, messages)
        except Exception:
            continue
        names.append(name)
    return tuple(names)


def kill(decl: Declaration) -> str | None:
    """Run the bank on ``decl``; the first failure, or None if the mutant survived."""
    logger = logging.getLogger("agentcore_fsm")
    logger.disabled = True
    try:
        for name in healthy_scenarios():
            sc = BANK[name]
            try:
                harness, messages = run_sync(sc, decl)
                verify(sc, harness, messages)
            except Exception as exc:
                rule = getattr(exc, "rule", None)
                return f"{name}: {rule or type(exc).__name__}"
        return None
    finally:
        logger.disabled = False


def test_there_are_mutants_of_every_kind() -> None:
    kinds = {name.split()[0] for name in MUTANTS}
    assert kinds == {"drop", "swap", "retarget", "invert"}
    assert len(healthy_scenarios()) >= len(BANK) - 5


@pytest.mark.parametrize("name", [n for n in MUTANTS if n not in EQUIVALENT])
def test_mutant_is_killed(name: str) -> None:
    assert kill(MUTANTS[name]) is not None, f"mutant survived every scenario: {name}"


def test_the_equivalent_mutants_exist_and_survive() -> None:
    """The list above stays true: each names a mutant that exists and that no run tells apart
    (if the suite starts killing one, it is not equivalent: take it off the list)."""
    for name in EQUIVALENT:
        assert name in MUTANTS, name
        assert kill(MUTANTS[name]) is None, name


def test_a_mutant_written_as_toml_text_is_killed_too() -> None:
    """The same mechanism from edited declaration text: drop ``turn_end`` from the transition
    that ends a turn without tool calls."""
    text = REAL.source_text
    marker = 'dest = "turn_end"\nemits = ["assistant_end", "turn_end"]'
    assert marker in text
    mutant = parse_declaration(text.replace(marker, 'dest = "turn_end"\nemits = ["assistant_end"]'))
    assert kill(mutant) is not None
