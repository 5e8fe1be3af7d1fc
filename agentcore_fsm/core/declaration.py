"""Loading the machine declarations in ``states/`` (the single source of truth).

A declaration is plain TOML (see ``states/agent_loop.toml`` for the vocabulary). It is read once
into frozen :class:`Declaration` objects and checked for consistency; the engine
(:mod:`agentcore_fsm.core.declared`) compiles it, once per class that runs it, onto a
``transitions.Machine`` the declaration object owns. The diagrams, the engine and the tests all
read the same objects.

The files ship inside the wheel as the package ``agentcore_fsm.states``; in a source checkout
they are read from the top-level ``states/`` folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
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

REASONS = ("completed", "stopped", "aborted", "error")


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
    offers: tuple[str, ...] = ()  # triggers offered after an internal input was handled


@dataclass(frozen=True)
class TransitionSpec:
    index: int
    trigger: str
    source: tuple[str, ...]
    dest: str
    guards: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    emits: tuple[str, ...] = ()
    auto: bool = False  # offered by the engine on entering its source state
    reason: str | None = None  # why the run ends, on a transition into the final state

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
    # the engine's compiled machines, one per class that runs this declaration (owned here,
    # so they live exactly as long as the declaration)
    compiled: dict[type, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

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
    import tomllib  # loaded with the first declaration, not with the package

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
            name: InputSpec(
                name,
                spec["kind"],
                spec.get("doc", ""),
                _tuple(spec.get("states")),
                _tuple(spec.get("offers")),
            )
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
                auto=bool(t.get("auto", False)),
                reason=t.get("reason"),
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
        if t.reason is not None:
            if t.dest != decl.final:
                problems.append(f"{where} gives a reason but does not end in {decl.final!r}")
            elif t.reason not in REASONS:
                problems.append(f"{where} has unknown reason {t.reason!r}")
        if t.auto and t.trigger in decl.inputs:
            problems.append(f"{where} is automatic but {t.trigger!r} is also an input")
    with_reason = [t for t in decl.transitions if t.reason is not None]
    if with_reason:
        for t in decl.transitions:
            if t.dest == decl.final and t.reason is None:
                problems.append(
                    f"transition #{t.index} ({t.trigger}) ends the run without a reason"
                )
    for trigger in decl.triggers:
        kinds = {t.auto for t in decl.transitions if t.trigger == trigger}
        if len(kinds) > 1:
            problems.append(f"trigger {trigger!r} is automatic in some transitions only")
    for spec in decl.inputs.values():
        for offered in spec.offers:
            if offered not in decl.triggers:
                problems.append(f"input {spec.name!r} offers unknown trigger {offered!r}")
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
    from importlib import resources  # an installed package's files: read on first use

    return resources.files("agentcore_fsm.states").joinpath(f"{name}.toml").read_text("utf-8")


def declaration_names() -> list[str]:
    """The names of the shipped declarations (``agent_loop``, ``agent``)."""
    checkout = _states_dir()
    if checkout is not None:
        return sorted(p.stem for p in checkout.glob("*.toml"))
    from importlib import resources

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
