"""Which parts of the declared machines the property suite has walked.

Every run of the suite reports its transitions here, per declaration: the loop's
(``agent_loop``, through the async driver or stepping the machine directly), each tool call's
(``tool_call``, from the runs that watch their calls' machines: see ``prop_tool_calls``) and the
Agent lifecycle's (``agent``). ``test_zz_declaration_coverage`` fails if a declared state or
transition (for each of its source states) of any of them was never taken.
"""

from __future__ import annotations

from agentcore_fsm.core.declaration import load_declaration
from agentcore_fsm.core.declared import TransitionRecord

DECLARATIONS = ("agent_loop", "tool_call", "agent")

TAKEN_BY: dict[str, set[tuple[int, str]]] = {name: set() for name in DECLARATIONS}
"""Per declaration, the (transition index, source state) pairs taken so far in this session."""

TAKEN = TAKEN_BY["agent_loop"]
"""The loop's pairs (the set ``record_transition`` fills)."""


def record_transition(record: TransitionRecord) -> None:
    """An ``on_transition`` observer for the loop machine."""
    TAKEN.add((record.index, record.source))


def record_call_transition(record: TransitionRecord) -> None:
    """An ``on_transition`` observer for a tool call's machine."""
    TAKEN_BY["tool_call"].add((record.index, record.source))


def record_lifecycle(records: list[TransitionRecord]) -> None:
    """The transitions of an Agent run's lifecycle (``Agent.lifecycle_history``)."""
    TAKEN_BY["agent"].update((r.index, r.source) for r in records)


def required(name: str = "agent_loop") -> set[tuple[int, str]]:
    """Every (transition index, source state) pair the declaration ``name`` allows."""
    decl = load_declaration(name)
    return {(t.index, source) for t in decl.transitions for source in t.source}


def states_reached(taken: set[tuple[int, str]], name: str = "agent_loop") -> set[str]:
    decl = load_declaration(name)
    reached = {source for _, source in taken}
    reached |= {decl.transitions[index].dest for index, _ in taken}
    return reached


def uncovered(name: str, taken: set[tuple[int, str]]) -> list[str]:
    """What of declaration ``name`` ``taken`` leaves out: one line per transition never taken
    from one of its sources, then one per state never reached (empty: all covered)."""
    decl = load_declaration(name)
    lines = [
        f"{name} #{index} {decl.transitions[index].label} from {source} -> "
        f"{decl.transitions[index].dest}: never taken"
        for index, source in sorted(required(name) - taken)
    ]
    lines += [
        f"{name} state {state}: never reached"
        for state in sorted(set(decl.states) - states_reached(taken, name))
    ]
    return lines
