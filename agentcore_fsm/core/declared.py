"""The engine every machine of the project runs on: a declaration, compiled onto ``transitions``.

A class that runs a declaration subclasses :class:`DeclaredMachine` and names it in
``declaration_name``. For each declared guard ``g`` it defines ``_guard_g(self) -> bool``, for
each emit action ``e`` an ``_emit_e(self) -> None`` and for each state effect ``x`` an
``_effect_x(self) -> None``. They are bound by name when the declaration is compiled for the
class: a declared name without its method, or such a method that no declaration names, is a
:class:`~agentcore_fsm.core.declaration.DeclarationError` at load time, not a surprise mid-run.

Compiling builds a ``transitions.Machine`` from the declaration through its public constructor,
with two documented extension points: a ``transition_cls`` that carries the declared
:class:`~agentcore_fsm.core.declaration.TransitionSpec` and a ``event_cls`` whose ``select`` picks
the first transition (in declaration order) whose guards hold, which the running machine then
takes — and nothing else: machines built here use none of ``transitions``' callback phases.
The running machine reads each event's transitions once, into tuples per trigger and source
state (``Compiled.candidates``), and compiles those into a selector per trigger and state that
applies the same rule and returns a ready plan of the transition (``Compiled.selectors``,
:mod:`agentcore_fsm.core.selectors`). The
compiled machine is owned by the declaration object (``Declaration.compiled``), one per running
class, shared by every run; a run is never registered on it (it is the model handed to
``Event.select``), so nothing is kept alive after a run however it ends. Runs stepped from several
threads at once are safe: the machine is unqueued and holds no per-run state.

**Variables.** The facts besides the state that decide transitions are the declaration's
``[variables]``. A class whose declaration has them names a slots dataclass in
``variables_class`` whose fields are exactly the declared variables, with the declared types as
annotations (checked when compiling); each run keeps them in one record, ``machine.vars``, made
from the declared initial values. Guards read them; they are written only through
:meth:`DeclaredMachine.set_var`, by a name the variable's ``set_by`` lists (an emit action, an
effect, or an input whose handler writes it before firing): any other write raises
:class:`MachineError`. Every other attribute of a machine is write-once or data (messages,
results), listed in the class's ``data_attributes``; ``tests/core/test_variables.py`` checks that
nothing else changes during a run.

The rules, the same for every machine:

* A **fed trigger** (an input of kind ``trigger``) takes the first declared transition from the
  current state whose guards hold; none holding is a bug in the declaration (:class:`MachineError`).
* An **offered trigger** is taken if a transition holds and is silently not taken otherwise: the
  engine offers a state's ``auto`` triggers on entering it, and an internal input's ``offers``
  after it was handled.
* **Taking a transition**: the state changes, a :class:`TransitionRecord` is kept in ``history``
  (nobody is called: a driver reads the records after the step), the transition's emit actions
  run in order, then the
  destination is entered: its ``auto`` triggers are offered in declaration order; when none is
  taken, its effect (if declared) runs.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from agentcore_fsm.core.declaration import (
    STREAM_HANDLING,
    Declaration,
    DeclarationError,
    TransitionSpec,
    load_declaration,
)
from agentcore_fsm.core.selectors import Candidates, Plan, Selector, build_selectors

__all__ = [
    "DeclaredMachine",
    "MachineError",
    "MachineInputError",
    "TransitionRecord",
    "compile_declaration",
]

logger = logging.getLogger("agentcore_fsm")


class MachineError(RuntimeError):
    """The machine could not take a step: the base of :class:`MachineInputError` (a mistake in
    what was fed) and of internal inconsistencies (a bug in this library or a declaration that
    does not fit the engine)."""


class MachineInputError(MachineError):
    """An input the machine cannot take: the current state does not accept it, or its data is
    wrong (an index that names no tool call, a call that is not running, an object that is not
    a stream event). The machine is unchanged; the text says what was wrong and what is
    accepted. ``input_name``, ``state`` and ``accepted`` (the inputs the state accepts) are
    attributes."""

    def __init__(
        self, input_name: str, state: str, accepted: list[str], problem: str | None = None
    ) -> None:
        self.input_name, self.state, self.accepted = input_name, state, accepted
        if problem is None:
            listed = ", ".join(accepted) if accepted else "nothing (the run has stopped)"
            problem = (
                f"input {input_name!r} is not accepted in state {state!r}; it accepts: {listed}"
            )
        super().__init__(problem)


@dataclass(slots=True, frozen=True)
class TransitionRecord:
    """One transition taken: its declared index, trigger, source and destination."""

    index: int
    trigger: str
    source: str
    dest: str


# --- compiling onto transitions -------------------------------------------------------------


def _machine_class() -> type[Any]:
    from transitions import Event, Machine, Transition

    class DeclaredTransition(Transition):
        """A transition that knows its declaration (``spec``) and its guard checks."""

        def __init__(
            self,
            source: str,
            dest: str,
            conditions: Any = None,
            unless: Any = None,
            before: Any = None,
            after: Any = None,
            prepare: Any = None,
            spec: TransitionSpec | None = None,
        ) -> None:
            super().__init__(source, dest, conditions, unless, before, after, prepare)
            self.spec = spec
            self.checks = tuple((c.func, c.target) for c in self.conditions)

    class DeclaredEvent(Event):
        """An event that picks a transition: ``select(model)`` is the spec of the first
        transition from the model's state whose guards hold (None if none holds). The running
        machine takes it (:meth:`DeclaredMachine.fire`/``offer``); ``transitions``' own
        ``trigger`` and its callback phases are never used."""

        def select(self, model: Any) -> TransitionSpec | None:
            candidates: Any = self.transitions.get(model.state)
            if not candidates:
                return None
            if len(candidates) == 1:
                transition = candidates[0]
                for check, target in transition.checks:
                    if bool(check(model)) is not target:
                        return None
                return transition.spec  # type: ignore[no-any-return]
            # several candidates often share a guard: each guard runs at most once per trigger
            # (guards are predicates of the machine's data, which does not change meanwhile)
            seen: dict[Any, bool] = {}
            for transition in candidates:
                for check, target in transition.checks:
                    value = seen.get(check)
                    if value is None:
                        value = seen[check] = bool(check(model))
                    if value is not target:
                        break
                else:
                    return transition.spec  # type: ignore[no-any-return]
            return None

    class CompiledMachine(Machine):
        transition_cls = DeclaredTransition
        event_cls = DeclaredEvent

    return CompiledMachine


_MACHINE_CLASS: type[Any] | None = None

_PREFIXES = ("_guard_", "_emit_", "_effect_")


class Compiled:
    """A declaration compiled for one class: the ``transitions`` machine and the bound names."""

    def __init__(self, decl: Declaration, owner: type[DeclaredMachine]) -> None:
        global _MACHINE_CLASS
        if _MACHINE_CLASS is None:
            _MACHINE_CLASS = _machine_class()
        problems: list[str] = []

        def bind(prefix: str, name: str) -> Callable[..., Any]:
            method = getattr(owner, prefix + name, None)
            if not callable(method):
                problems.append(f"{owner.__name__} has no method {prefix}{name}")
                return _missing
            return method  # type: ignore[no-any-return]

        guards = {name: bind("_guard_", name) for name in decl.guards}
        emits = {name: bind("_emit_", name) for name in decl.emits}
        effects = {
            state: bind("_effect_", spec.effect)
            for state, spec in decl.states.items()
            if spec.effect is not None
        }
        declared = (
            {f"_guard_{g}" for g in decl.guards}
            | {f"_emit_{e}" for e in decl.emits}
            | {f"_effect_{s.effect}" for s in decl.states.values() if s.effect is not None}
        )
        for attr in dir(owner):
            if attr.startswith(_PREFIXES) and attr not in declared:
                problems.append(
                    f"{owner.__name__}.{attr} is named by no declaration of {decl.name!r}"
                )
        record = owner.variables_class
        if record is None:
            if decl.variables:
                problems.append(f"{owner.__name__} has no variables_class for its variables")
        else:
            fields = {f.name: f.type for f in dataclasses.fields(record)}
            for name, spec in decl.variables.items():
                if name not in fields:
                    problems.append(f"{record.__name__} has no field for variable {name!r}")
                elif fields[name] != spec.type:
                    problems.append(
                        f"{record.__name__}.{name} is {fields[name]!r}; the declaration says "
                        f"{spec.type!r}"
                    )
            for name in fields:
                if name not in decl.variables:
                    problems.append(
                        f"{record.__name__}.{name} is no variable declared in {decl.name!r}"
                    )
            if set(fields) == set(decl.variables) and list(fields) != list(decl.variables):
                problems.append(
                    f"{record.__name__}'s fields are not in the declared order: "
                    f"{', '.join(decl.variables)}"
                )
        if problems:
            raise DeclarationError(f"{decl.name}: " + "; ".join(problems))
        self.record = record
        # the initial values in field order; a list is copied for each run
        self.initial: tuple[tuple[Any, bool], ...] = tuple(
            (spec.initial, isinstance(spec.initial, list)) for spec in decl.variables.values()
        )
        # the same values as arguments, when none of them is a list to copy (most machines)
        self.plain_initial: tuple[Any, ...] | None = (
            None if any(fresh for _, fresh in self.initial) else tuple(v for v, _ in self.initial)
        )
        self.setters: dict[str, frozenset[str]] = {
            name: frozenset(spec.set_by) for name, spec in decl.variables.items()
        }

        table = [
            {
                "trigger": t.trigger,
                "source": list(t.source),
                "dest": t.dest,
                "conditions": [guards[g] for g in t.guards],
                "unless": [guards[g] for g in t.unless],
                "spec": t,
            }
            for t in decl.transitions
        ]
        self.machine = _MACHINE_CLASS(
            model=None,
            states=list(decl.states),
            transitions=table,
            initial=decl.initial,
            auto_transitions=False,
            send_event=False,
            queued=False,
            ignore_invalid_triggers=False,
        )
        self.events: dict[str, Any] = dict(self.machine.events)
        # what the running machine selects from, read off the compiled events once: per trigger
        # and source state, the candidate transitions in declaration order with their guard
        # checks (a trigger with no transition from a state has no entry for it)
        self.candidates: dict[str, dict[str, Candidates]] = {
            trigger: {
                state: tuple((t.spec, t.checks) for t in ts)
                for state, ts in event.transitions.items()
                if ts
            }
            for trigger, event in self.events.items()
        }
        self.actions: tuple[tuple[Callable[..., Any], ...], ...] = tuple(
            tuple(emits[e] for e in t.emits) for t in decl.transitions
        )
        self.effects = effects
        # the records of every (transition, source) pair, made once: records are immutable
        self.records: tuple[dict[str, TransitionRecord], ...] = tuple(
            {src: TransitionRecord(t.index, t.trigger, src, t.dest) for src in t.source}
            for t in decl.transitions
        )
        auto: dict[str, list[str]] = {}
        for t in decl.transitions:
            if t.auto:
                for state in t.source:
                    if t.trigger not in auto.setdefault(state, []):
                        auto[state].append(t.trigger)
        self.auto: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in auto.items()}
        # the tables as generated selectors returning ready plans (core/selectors.py)
        plans: dict[tuple[int, str], Plan] = {}

        def plan_of(spec: TransitionSpec, source: str) -> Plan:
            plan = plans[spec.index, source] = Plan(
                spec, self.records[spec.index][source], self.actions[spec.index]
            )
            return plan

        self.selectors: dict[str, dict[str, Selector]] = build_selectors(
            self.candidates, plan_of, f"{decl.name} for {owner.__name__}"
        )
        for plan in plans.values():
            dest = plan.dest
            plan.autos = tuple(
                self.selectors[trigger][dest]
                for trigger in self.auto.get(dest, ())
                if dest in self.selectors[trigger]
            )
            plan.effect = effects.get(dest)
        self.accepts: dict[str, frozenset[str]] = {
            state: frozenset(decl.accepted_inputs(state)) for state in decl.states
        }
        self.offers: dict[str, tuple[str, ...]] = {
            name: spec.offers for name, spec in decl.inputs.items() if spec.offers
        }
        self.final = decl.final
        # the stream event kinds per handling ([stream_events]), made once
        self.stream_kinds: dict[str, frozenset[str]] = {
            handling: decl.stream_kinds(handling) for handling in STREAM_HANDLING
        }
        self.suspend_guards: dict[str, Callable[..., Any]] = {
            state: guards[guard] for state, guard in decl.suspending_states.items()
        }

    def new_variables(self) -> Any:
        """A fresh variables record with the declared initial values (None without one)."""
        if self.record is None:
            return None
        if self.plain_initial is not None:
            return self.record(*self.plain_initial)
        return self.record(*[list(value) if fresh else value for value, fresh in self.initial])


def _missing(*args: Any) -> Any:  # pragma: no cover - never bound: compiling fails first
    raise AssertionError("unbound declaration name")


def compile_declaration(decl: Declaration, owner: type[DeclaredMachine]) -> Compiled:
    """The declaration compiled for ``owner`` (once; kept by the declaration object)."""
    compiled = decl.compiled.get(owner)
    if compiled is None:
        compiled = decl.compiled[owner] = Compiled(decl, owner)
    return compiled


# --- the running machine --------------------------------------------------------------------


class DeclaredMachine:
    """One run of a declaration: the base class of every machine in the project.

    ``state`` is the current state's name, ``history`` the transitions taken (in order),
    ``declaration`` the :class:`~agentcore_fsm.core.declaration.Declaration`. Taking a transition
    calls nobody: whoever feeds the machine reads the new records of ``history`` (a loop
    machine's :class:`~agentcore_fsm.core.protocol.Step` carries them)."""

    declaration_name: ClassVar[str]
    variables_class: ClassVar[type[Any] | None] = None
    """The slots dataclass of the declared variables (None: the declaration has none)."""
    data_attributes: ClassVar[frozenset[str]] = frozenset({"state", "history", "fired"})
    """The attributes that change during a run and are not variables: the engine's own (the
    state, the history, the last transition) and the class's data (messages, results)."""

    def __init__(self, declaration: Declaration | None = None) -> None:
        decl = declaration if declaration is not None else load_declaration(self.declaration_name)
        self.declaration = decl
        self._compiled = compile_declaration(decl, type(self))
        self.state: str = decl.initial
        self.history: list[TransitionRecord] = []
        self.fired: TransitionSpec | None = None  # the last transition taken
        self.vars: Any = self._compiled.new_variables()

    def set_var(self, by: str, name: str, value: Any) -> None:
        """Write the declared variable ``name``: ``by`` is the declared emit action, effect or
        input doing it, which must be one of the variable's ``set_by`` (else
        :class:`MachineError`: the declaration would not tell the whole story)."""
        allowed = self._compiled.setters.get(name)
        if allowed is None or by not in allowed:
            raise MachineError(
                f"{self.declaration.name}: {by!r} writes the variable {name!r}, but the "
                f"declaration does not name it as a setter ("
                + (", ".join(sorted(allowed)) if allowed else "no such variable")
                + ")"
            )
        setattr(self.vars, name, value)

    @property
    def finished(self) -> bool:
        """True once the machine is in its final state."""
        return self.state == self._compiled.final

    def accepted_inputs(self) -> list[str]:
        """The inputs the current state accepts, in declaration order."""
        return self.declaration.accepted_inputs(self.state)

    def accepts(self, name: str) -> bool:
        return name in self._compiled.accepts[self.state]

    def _check(self, name: str) -> None:
        if name not in self._compiled.accepts[self.state]:
            raise MachineInputError(name, self.state, self.declaration.accepted_inputs(self.state))

    def fire(self, trigger: str) -> None:
        """Take the transition for ``trigger`` (one must hold: the declaration says so)."""
        selector = self._compiled.selectors[trigger].get(self.state)
        plan = None if selector is None else selector(self)
        if plan is None:
            raise MachineError(
                f"{self.declaration.name}: no declared transition for {trigger!r} from "
                f"{self.state!r} had its guards hold"
            )
        self._take(plan)

    def offer(self, trigger: str) -> bool:
        """Take the transition for ``trigger`` if one from the current state holds."""
        selector = self._compiled.selectors[trigger].get(self.state)
        if selector is None:
            return False
        plan = selector(self)
        if plan is None:
            return False
        self._take(plan)
        return True

    def enter_effect(self) -> None:
        """Ask again for the current state's effect (if it declares one), as entering it did:
        what a resumed run's driver performs again."""
        effect = self._compiled.effects.get(self.state)
        if effect is not None:
            effect(self)

    def suspends(self) -> bool:
        """Whether the current state's declared ``suspend_when`` guard holds: the run is to be
        suspended here (the machine stays; what that means is the running class's to say)."""
        guard = self._compiled.suspend_guards.get(self.state)
        return guard is not None and bool(guard(self))

    def _offer_after(self, input_name: str) -> None:
        for trigger in self._compiled.offers.get(input_name, ()):
            if self.offer(trigger):
                return

    def _take(self, plan: Plan) -> None:
        """Take the transition of ``plan`` (chosen by a selector): change state, record, emit,
        enter."""
        self.state = plan.dest
        self.fired = plan.spec
        self.history.append(plan.record)
        for action in plan.actions:
            action(self)
        for selector in plan.autos:
            taken = selector(self)
            if taken is not None:
                self._take(taken)
                return
        effect = plan.effect
        if effect is not None:
            effect(self)
