"""The running machine's transition tables, compiled to plain Python once per declaration.

A declared machine takes a transition in two moves: *select* (the first transition of a
trigger from the current state whose guards hold, in declaration order) and *take* (change
state, record, run the emit actions, enter the destination). Both run for every input a run is
fed, dozens of times per turn, so :class:`~agentcore_fsm.core.declared.Compiled` does not
interpret its tables at run time. For each trigger and source state it builds:

* a :class:`Plan` per candidate transition: everything taking it needs, looked up once (the
  destination, the :class:`~agentcore_fsm.core.declared.TransitionRecord` for that source, the
  bound emit actions, the destination's auto-trigger selectors and its effect);
* a *selector*: a function of the machine returning the plan of the first candidate whose
  guards hold, or None. Selectors are generated as Python source (one module per compiled
  declaration, compiled with :func:`compile` once), so choosing among eight candidates is a
  chain of ``if`` tests with the guards as local names rather than a loop over tuples.

The rule is the one :func:`select` states (and ``tests/core/test_selectors.py`` checks the
generated selectors against it on every trigger and state of both declarations): candidates in
declaration order, each guard's value taken by truth (``bool``), checks short-circuit, and a
guard shared by several candidates runs at most once per selection (guards only read, so its
value cannot change meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentcore_fsm.core.declaration import TransitionSpec

__all__ = ["Candidates", "Plan", "Selector", "build_selectors", "select"]

Candidates = tuple[tuple[TransitionSpec, tuple[tuple[Callable[..., Any], bool], ...]], ...]
"""The transitions one trigger may take from one state, in declaration order, each with its
guard checks ``(guard, must_hold)``."""


class Plan:
    """One transition from one source state, ready to take: see the module's docstring."""

    __slots__ = ("actions", "autos", "dest", "effect", "record", "spec")

    def __init__(
        self,
        spec: TransitionSpec,
        record: Any,
        actions: tuple[Callable[..., Any], ...],
    ) -> None:
        self.spec = spec
        self.dest = spec.dest
        self.record = record
        self.actions = actions
        # filled in once every selector exists (entering a state offers its auto triggers)
        self.autos: tuple[Selector, ...] = ()
        self.effect: Callable[..., Any] | None = None


Selector = Callable[[Any], Plan | None]
"""A function of the machine: the plan of the transition to take, or None when none holds."""


def select(candidates: Candidates, model: Any) -> TransitionSpec | None:
    """The spec of the first of ``candidates`` whose guards hold for ``model`` (None if none
    does): the rule, interpreted. The generated selectors answer the same, faster."""
    seen: dict[Any, bool] = {}
    for spec, checks in candidates:
        for check, target in checks:
            value = seen.get(check)
            if value is None:
                value = seen[check] = bool(check(model))
            if value is not target:
                break
        else:
            return spec
    return None


_UNSET = object()


def _simple(
    plans: list[Plan], checks: list[list[tuple[Callable[..., Any], bool]]]
) -> Selector | None:
    """A closure for the common shapes (one candidate with at most one check; two, the first
    with one check and the second with none), which need no generated source; None for the
    others."""
    if len(plans) == 1 and not checks[0]:
        only = plans[0]
        return lambda m: only
    if len(plans) == 1 and len(checks[0]) == 1:
        (guard, target), plan = checks[0][0], plans[0]
        if target:
            return lambda m: plan if guard(m) else None
        return lambda m: None if guard(m) else plan
    if len(plans) == 2 and len(checks[0]) == 1 and not checks[1]:
        (guard, target), first, second = checks[0][0], plans[0], plans[1]
        if target:
            return lambda m: first if guard(m) else second
        return lambda m: second if guard(m) else first
    return None


def _selector_source(
    name: str,
    candidates: Sequence[tuple[int, tuple[tuple[Callable[..., Any], bool], ...]]],
    guard_names: dict[Callable[..., Any], str],
) -> list[str]:
    """The lines of one selector: ``candidates`` are (plan number, checks)."""
    uses: dict[str, int] = {}
    for _, checks in candidates:
        for guard in {guard_names[check] for check, _ in checks}:
            uses[guard] = uses.get(guard, 0) + 1
    shared = sorted(g for g, n in uses.items() if n > 1)
    lines = [f"    def {name}(m):"]
    for guard in shared:
        lines.append(f"        v_{guard} = U")
    for plan, checks in candidates:
        tests = []
        for check, target in checks:
            guard = guard_names[check]
            if guard in shared:
                value = f"(v_{guard} if v_{guard} is not U else (v_{guard} := {guard}(m)))"
            else:
                value = f"{guard}(m)"
            tests.append(value if target else f"not {value}")
        if tests:
            lines.append(f"        if {' and '.join(tests)}:")
            lines.append(f"            return p{plan}")
        else:
            lines.append(f"        return p{plan}")
            return lines  # later candidates can never be reached
    lines.append("        return None")
    return lines


def build_selectors(
    tables: dict[str, dict[str, Candidates]],
    plan_of: Callable[[TransitionSpec, str], Plan],
    label: str,
) -> dict[str, dict[str, Selector]]:
    """A selector per trigger and source state of ``tables`` (compiled ``candidates``); the
    plans come from ``plan_of(spec, source)``. ``label`` names the generated module in
    tracebacks."""
    guards: dict[Callable[..., Any], str] = {}
    plans: list[Plan] = []
    layout: list[tuple[str, str, str]] = []  # (trigger, state, function name)
    lines = ["def make(G, P, U):"]
    body: list[str] = []
    selectors: dict[str, dict[str, Selector]] = {trigger: {} for trigger in tables}
    for trigger, per_state in tables.items():
        for state, candidates in per_state.items():
            own = [plan_of(spec, state) for spec, _ in candidates]
            simple = _simple(own, [list(checks) for _, checks in candidates])
            if simple is not None:
                selectors[trigger][state] = simple
                continue
            numbered = []
            for plan, (_, checks) in zip(own, candidates, strict=True):
                for check, _ in checks:
                    if check not in guards:
                        guards[check] = f"g{len(guards)}"
                numbered.append((len(plans), checks))
                plans.append(plan)
            name = f"s{len(layout)}"
            layout.append((trigger, state, name))
            body.extend(_selector_source(name, numbered, guards))
    lines.extend(f"    {name} = G[{i}]" for i, name in enumerate(guards.values()))
    lines.extend(f"    p{i} = P[{i}]" for i in range(len(plans)))
    lines.extend(body)
    if not layout:
        return selectors
    lines.append("    return [" + ", ".join(name for _, _, name in layout) + "]")
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<selectors of {label}>", "exec"), namespace)
    made = namespace["make"](list(guards), plans, _UNSET)
    for (trigger, state, _), function in zip(layout, made, strict=True):
        selectors[trigger][state] = function
    return selectors
