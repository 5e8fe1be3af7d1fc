"""Which parts of the declared machines the property suite has walked.

Every run of the suite reports its transitions here, per declaration: the loop's
(``agent_loop``, through the async driver or stepping the machine directly), each tool call's
(``tool_call``, from the runs that watch their calls' machines: see ``prop_tool_calls``) and the
Agent lifecycle's (``agent``). ``test_declaration_coverage`` runs the fixed banks inside
:func:`collecting` and fails if a declared state or transition (for each of its source states)
of any of them was not taken by those runs — what other tests walked before does not count, so
the check means the same in any test order.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from agentcore_fsm.core.declaration import load_declaration
from agentcore_fsm.core.declared import TransitionRecord

DECLARATIONS = ("agent_loop", "tool_call", "agent")

TAKEN_BY: dict[str, set[tuple[int, str]]] = {name: set() for name in DECLARATIONS}
"""Per declaration, the (transition index, source state) pairs taken so far in this session."""

TAKEN = TAKEN_BY["agent_loop"]
"""The loop's pairs (the set ``record_transition`` fills)."""

_COLLECTORS: list[dict[str, set[tuple[int, str]]]] = []


def _taken(name: str, pairs: list[tuple[int, str]]) -> None:
    TAKEN_BY[name].update(pairs)
    for collector in _COLLECTORS:
        collector[name].update(pairs)


@contextmanager
def collecting() -> Iterator[dict[str, set[tuple[int, str]]]]:
    """The (transition, source) pairs taken while the block runs, per declaration (filled as
    the block goes; whatever ran before it is not in them)."""
    taken: dict[str, set[tuple[int, str]]] = {name: set() for name in DECLARATIONS}
    _COLLECTORS.append(taken)
    try:
        yield taken
    finally:
        _COLLECTORS.remove(taken)


def record_transition(record: TransitionRecord) -> None:
    """An ``on_transition`` observer for the loop machine."""
    _taken("agent_loop", [(record.index, record.source)])


def record_call_transition(record: TransitionRecord) -> None:
    """An ``on_transition`` observer for a tool call's machine."""
    _taken("tool_call", [(record.index, record.source)])


def record_lifecycle(records: list[TransitionRecord]) -> None:
    """The transitions of an Agent run's lifecycle (``Agent.lifecycle_history``)."""
    _taken("agent", [(r.index, r.source) for r in records])


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
