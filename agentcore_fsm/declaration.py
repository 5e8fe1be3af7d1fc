"""Loading the machine declarations in ``states/`` (the single source of truth).

A declaration is plain TOML (see ``states/agent_loop.toml`` for the vocabulary). It is read once
into frozen :class:`Declaration` objects, checked for consistency, and compiled into one shared
``transitions.Machine`` per declaration (runs join it with ``add_model``). The diagrams, the
engine and the tests all read the same objects.

The files ship inside the wheel as the package ``agentcore_fsm.states``; in a source checkout
they are read from the top-level ``states/`` folder.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache, partial
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "Declaration",
    "DeclarationError",
    "InputSpec",
    "StateSpec",
    "TransitionSpec",
    "declaration_names",
    "load_declaration",
    "parse_declaration",
]


class DeclarationError(ValueError):
    """A declaration is inconsistent (unknown state, guard or emit action, ...)."""


@dataclass(frozen=True)
class StateSpec:
    name: str
    doc: str = ""
    effect: str | None = None


@dataclass(frozen=True)
class InputSpec:
    name: str
    kind: str  # "trigger" | "internal"
    doc: str = ""
    states: tuple[str, ...] = ()


@dataclass(frozen=True)
class TransitionSpec:
    index: int
    trigger: str
    source: tuple[str, ...]
    dest: str
    guards: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    emits: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``trigger [guards]`` as shown in diagrams."""
        conds = [*self.guards, *(f"not {g}" for g in self.unless)]
        return self.trigger + (f" [{', '.join(conds)}]" if conds else "")


@dataclass(frozen=True, eq=False)
class Declaration:
    name: str
    title: str
    initial: str
    final: str
    states: dict[str, StateSpec]
    inputs: dict[str, InputSpec]
    guards: dict[str, str]
    emits: dict[str, str]
    transitions: tuple[TransitionSpec, ...]
    source_text: str = field(default="", repr=False)

    @property
    def triggers(self) -> list[str]:
        """Every trigger, in first-declared order."""
        return list(dict.fromkeys(t.trigger for t in self.transitions))

    @property
    def auto_triggers(self) -> list[str]:
        """Triggers the machine fires itself (not fed from outside)."""
        return [t for t in self.triggers if t not in self.inputs]

    def accepted_inputs(self, state: str) -> list[str]:
        """The inputs a machine in ``state`` accepts, in declaration order."""
        accepted = []
        for name, spec in self.inputs.items():
            if spec.kind == "internal":
                if state in spec.states:
                    accepted.append(name)
            elif any(state in t.source for t in self.transitions if t.trigger == name):
                accepted.append(name)
        return accepted

    def transitions_from(self, state: str, trigger: str) -> list[TransitionSpec]:
        return [t for t in self.transitions if t.trigger == trigger and state in t.source]


def _tuple(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def parse_declaration(text: str) -> Declaration:
    """Parse and check a declaration from TOML text."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DeclarationError(f"declaration is not valid TOML: {exc}") from exc
    try:
        states = {
            name: StateSpec(name, spec.get("doc", ""), spec.get("effect"))
            for name, spec in raw["states"].items()
        }
        inputs = {
            name: InputSpec(name, spec["kind"], spec.get("doc", ""), _tuple(spec.get("states")))
            for name, spec in raw.get("inputs", {}).items()
        }
        transitions = tuple(
            TransitionSpec(
                index=i,
                trigger=t["trigger"],
                source=_tuple(t["source"]),
                dest=t["dest"],
                guards=_tuple(t.get("guards")),
                unless=_tuple(t.get("unless")),
                emits=_tuple(t.get("emits")),
            )
            for i, t in enumerate(raw["transitions"])
        )
        decl = Declaration(
            name=raw["name"],
            title=raw.get("title", raw["name"]),
            initial=raw["initial"],
            final=raw["final"],
            states=states,
            inputs=inputs,
            guards=dict(raw.get("guards", {})),
            emits=dict(raw.get("emits", {})),
            transitions=transitions,
            source_text=text,
        )
    except KeyError as exc:
        raise DeclarationError(f"declaration is missing the key {exc}") from exc
    _check(decl)
    return decl


def _check(decl: Declaration) -> None:
    problems: list[str] = []
    if decl.initial not in decl.states:
        problems.append(f"initial state {decl.initial!r} is not declared")
    if decl.final not in decl.states:
        problems.append(f"final state {decl.final!r} is not declared")
    for spec in decl.inputs.values():
        if spec.kind not in ("trigger", "internal"):
            problems.append(f"input {spec.name!r} has unknown kind {spec.kind!r}")
        if spec.kind == "trigger" and spec.name not in decl.triggers:
            problems.append(f"input {spec.name!r} is a trigger but no transition uses it")
        for state in spec.states:
            if state not in decl.states:
                problems.append(f"input {spec.name!r} names unknown state {state!r}")
    for t in decl.transitions:
        where = f"transition #{t.index} ({t.trigger})"
        for state in (*t.source, t.dest):
            if state not in decl.states:
                problems.append(f"{where} names unknown state {state!r}")
        for guard in (*t.guards, *t.unless):
            if guard not in decl.guards:
                problems.append(f"{where} names undeclared guard {guard!r}")
        for action in t.emits:
            if action not in decl.emits:
                problems.append(f"{where} names undeclared emit action {action!r}")
        if decl.final in t.source:
            problems.append(f"{where} leaves the final state {decl.final!r}")
    if problems:
        raise DeclarationError("; ".join(problems))


def _states_dir() -> Path | None:
    checkout = Path(__file__).resolve().parent.parent / "states"
    if (checkout / "agent_loop.toml").is_file():
        return checkout
    return None


def _read(name: str) -> str:
    checkout = _states_dir()
    if checkout is not None:
        return (checkout / f"{name}.toml").read_text(encoding="utf-8")
    return resources.files("agentcore_fsm.states").joinpath(f"{name}.toml").read_text("utf-8")


def declaration_names() -> list[str]:
    """The names of the shipped declarations (``agent_loop``, ``agent``)."""
    checkout = _states_dir()
    if checkout is not None:
        return sorted(p.stem for p in checkout.glob("*.toml"))
    folder = resources.files("agentcore_fsm.states")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


@cache
def load_declaration(name: str = "agent_loop") -> Declaration:
    """Load (once) and check the declaration ``states/<name>.toml``."""
    try:
        text = _read(name)
    except FileNotFoundError:
        raise DeclarationError(
            f"no declaration named {name!r}; known: {', '.join(declaration_names())}"
        ) from None
    return parse_declaration(text)


_MACHINES: dict[int, Any] = {}
_KEEP: list[Declaration] = []


def _lean_machine_class() -> type[Any]:
    from transitions import Machine

    class LeanMachine(Machine):
        """A ``transitions.Machine`` whose ``add_model`` binds only ``model.trigger``.

        The stock ``add_model`` also binds a method per trigger, a ``may_<trigger>`` and an
        ``is_<state>`` per state, and looks for ``on_enter_<state>`` methods: some forty
        attribute writes per run that this library never reads (it fires triggers by name and
        reads ``model.state``), and an O(models) membership scan. Transitions themselves --
        guards, state changes, callbacks -- are processed by ``transitions`` unchanged.
        """

        def add_model(self, model: Any, initial: Any = None) -> None:
            model.trigger = partial(self._get_trigger, model)
            self.set_state(self.initial if initial is None else initial, model=model)  # type: ignore[arg-type]
            self.models.append(model)

    return LeanMachine


def _LeanMachine(**kwargs: Any) -> Any:
    global _LEAN_CLASS
    if _LEAN_CLASS is None:
        _LEAN_CLASS = _lean_machine_class()
    return _LEAN_CLASS(**kwargs)


_LEAN_CLASS: type[Any] | None = None


def _check_guard(name: str) -> Any:
    return lambda event: event.model.owner.check_guard(name)


def _record(spec: TransitionSpec) -> Any:
    return lambda event: event.model.owner._after_transition(spec)


def shared_machine(decl: Declaration) -> Any:
    """The one ``transitions.Machine`` for ``decl`` (built on first use, then shared).

    Each run joins it with ``add_model`` (a small handle object whose ``owner`` is the run's
    :class:`~agentcore_fsm.machine.LoopMachine`) and leaves it when it stops. Guards call
    ``owner.check_guard(name)``; each transition's ``after`` callback tells the owner which
    declared transition fired, so the owner can run that transition's emit actions.
    """
    machine = _MACHINES.get(id(decl))
    if machine is not None:
        return machine

    table = [
        {
            "trigger": t.trigger,
            "source": list(t.source),
            "dest": t.dest,
            "conditions": [_check_guard(g) for g in t.guards],
            "unless": [_check_guard(g) for g in t.unless],
            "after": [_record(t)],
        }
        for t in decl.transitions
    ]
    machine = _LeanMachine(
        model=None,
        states=list(decl.states),
        transitions=table,
        initial=decl.initial,
        auto_transitions=False,
        send_event=True,
        # Not queued: a queued Machine keeps ONE transition queue for all its models, so two
        # threads stepping different runs would run each other's triggers. No callback here ever
        # fires a trigger (the engine fires follow-up triggers after `trigger()` returns), so
        # unqueued processing is both correct and safe to share across threads.
        queued=False,
        ignore_invalid_triggers=False,
    )
    # keep the declaration alive while its machine is cached, so that its id is not reused
    _MACHINES[id(decl)] = machine
    _KEEP.append(decl)
    return machine
