"""Which parts of the declared loop machine the property suite has walked.

Every run of the suite (through the async driver, or stepping the machine directly) reports its
transitions here; ``test_zz_declaration_coverage`` fails if a declared state or transition (for
each of its source states) was never taken.
"""

from __future__ import annotations

from agentcore_fsm import TransitionRecord, load_declaration

TAKEN: set[tuple[int, str]] = set()
"""(transition index, source state) pairs taken so far in this test session."""


def record_transition(record: TransitionRecord) -> None:
    TAKEN.add((record.index, record.source))


def required() -> set[tuple[int, str]]:
    """Every (transition index, source state) pair the declaration allows."""
    decl = load_declaration("agent_loop")
    return {(t.index, source) for t in decl.transitions for source in t.source}


def states_reached(taken: set[tuple[int, str]]) -> set[str]:
    decl = load_declaration("agent_loop")
    reached = {source for _, source in taken}
    reached |= {decl.transitions[index].dest for index, _ in taken}
    return reached
