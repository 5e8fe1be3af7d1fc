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
from functools import cache, cached_property
from pathlib import Path
from typing import Any

__all__ = [
    "Declaration",
    "DeclarationError",
    "InputSpec",
    "StateSpec",
    "TransitionSpec",
    "VariableSpec",
    "declaration_names",
    "load_declaration",
    "parse_declaration",
]

REASONS = ("completed", "stopped", "aborted", "error", "limit")
STREAM_HANDLING = ("start", "update", "finish")
"""How a stream event kind is handled (``[stream_events]``): ``start`` begins the assistant
message, ``update`` is a ``message_update`` of a started message (the hot path), ``finish``
ends the model call (fires ``model_finished``)."""


class DeclarationError(ValueError):
    """A declaration is inconsistent (unknown state, guard or emit action, ...)."""


@dataclass(frozen=True)
class StateSpec:
    name: str
    doc: str = ""
    effect: str | None = None
    hook: str | None = None  # the user hook whose answer the state waits for, if any
    suspend_when: str | None = None  # a guard: when it holds, the run is suspended here


@dataclass(frozen=True)
class VariableSpec:
    """A declared context variable: a fact that decides transitions and is not a state.

    ``type`` is the Python annotation of its field in the machine's variables record (checked
    when the declaration is compiled for a class), ``initial`` its value when a run begins (an
    absent ``initial`` is None; a TOML array is a fresh list per run), ``set_by`` the declared
    names allowed to write it: emit actions, state effects or inputs (whose handler writes it
    from the input's data before the trigger fires). A write by anything else is a
    :class:`~agentcore_fsm.core.declared.MachineError`."""

    name: str
    type: str
    initial: Any = None
    doc: str = ""
    set_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class InputSpec:
    name: str
    kind: str  # "trigger" | "internal"
    doc: str = ""
    states: tuple[str, ...] = ()
    offers: tuple[str, ...] = ()  # triggers offered after an internal input was handled
    reads: tuple[str, ...] = ()  # the variables its handling reads (besides guards)


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
    variables: dict[str, VariableSpec] = field(default_factory=dict)
    guard_reads: dict[str, tuple[str, ...]] = field(default_factory=dict)
    stream_events: dict[str, str] = field(default_factory=dict)
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
        """The inputs a machine in ``state`` accepts, in declaration order (a new list)."""
        return list(self._accepted_by_state.get(state, ()))

    @cached_property
    def _accepted_by_state(self) -> dict[str, tuple[str, ...]]:
        """``accepted_inputs`` of every state, worked out once per declaration (a declaration
        never changes; a changed copy made with ``dataclasses.replace`` works out its own)."""
        by_state: dict[str, tuple[str, ...]] = {}
        for state in self.states:
            accepted = []
            for name, spec in self.inputs.items():
                if spec.kind == "internal":
                    if state in spec.states:
                        accepted.append(name)
                elif any(state in t.source for t in self.transitions if t.trigger == name):
                    accepted.append(name)
            by_state[state] = tuple(accepted)
        return by_state

    def transitions_from(self, state: str, trigger: str) -> list[TransitionSpec]:
        return [t for t in self.transitions if t.trigger == trigger and state in t.source]

    def reads(self, t: TransitionSpec) -> tuple[str, ...]:
        """The variables the guards of ``t`` read, in declaration order of the variables."""
        names = {v for g in (*t.guards, *t.unless) for v in self.guard_reads.get(g, ())}
        return tuple(v for v in self.variables if v in names)

    @property
    def suspending_states(self) -> dict[str, str]:
        """The states that suspend a run, each with its ``suspend_when`` guard."""
        return {s.name: s.suspend_when for s in self.states.values() if s.suspend_when}

    def sets(self, t: TransitionSpec) -> tuple[str, ...]:
        """The variables taking ``t`` may write: those whose setters include its trigger (an
        input's handler), one of its emit actions, or the effect of its destination."""
        effect = self.states[t.dest].effect if t.dest in self.states else None
        doers = {t.trigger, *t.emits} | ({effect} if effect is not None else set())
        return tuple(v.name for v in self.variables.values() if doers & set(v.set_by))

    def hook_of(self, state: str) -> str | None:
        """The hook whose answer a machine in ``state`` waits for (the state's ``hook``)."""
        spec = self.states.get(state)
        return spec.hook if spec is not None else None

    def state_of_hook(self, hook: str) -> str | None:
        """The state that waits for ``hook``'s answer (the first that names it)."""
        for spec in self.states.values():
            if spec.hook == hook:
                return spec.name
        return None

    def stream_kinds(self, handling: str) -> frozenset[str]:
        """The stream event kinds handled as ``handling`` (see :data:`STREAM_HANDLING`)."""
        return frozenset(k for k, h in self.stream_events.items() if h == handling)


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
            name: StateSpec(
                name,
                spec.get("doc", ""),
                spec.get("effect"),
                spec.get("hook"),
                spec.get("suspend_when"),
            )
            for name, spec in raw["states"].items()
        }
        inputs = {
            name: InputSpec(
                name,
                spec["kind"],
                spec.get("doc", ""),
                _tuple(spec.get("states")),
                _tuple(spec.get("offers")),
                _tuple(spec.get("reads")),
            )
            for name, spec in raw.get("inputs", {}).items()
        }
        variables = {
            name: VariableSpec(
                name,
                spec["type"],
                spec.get("initial"),
                spec.get("doc", ""),
                _tuple(spec.get("set_by")),
            )
            for name, spec in raw.get("variables", {}).items()
        }
        guards: dict[str, str] = {}
        guard_reads: dict[str, tuple[str, ...]] = {}
        for name, spec in raw.get("guards", {}).items():
            # a guard is its doc, or a table: doc and the variables it reads
            if isinstance(spec, dict):
                guards[name] = spec.get("doc", "")
                guard_reads[name] = _tuple(spec.get("reads"))
            else:
                guards[name] = spec
                guard_reads[name] = ()
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
            guards=guards,
            emits=dict(raw.get("emits", {})),
            transitions=transitions,
            variables=variables,
            guard_reads=guard_reads,
            stream_events=dict(raw.get("stream_events", {})),
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
    _check_variables(decl, problems)
    if problems:
        raise DeclarationError("; ".join(problems))


def _check_variables(decl: Declaration, problems: list[str]) -> None:
    """Every variable has a type and a setter, every setter is a declared name, every read
    names a declared variable; hooks and stream event handlings are well formed."""
    effects = {s.effect for s in decl.states.values() if s.effect is not None}
    doers = set(decl.emits) | effects | set(decl.inputs)
    for var in decl.variables.values():
        if not isinstance(var.type, str) or not var.type:
            problems.append(f"variable {var.name!r} has no type")
        elif var.initial is None and "None" not in var.type:
            problems.append(f"variable {var.name!r} has no initial value and is not optional")
        if not var.set_by:
            problems.append(f"variable {var.name!r} has no setter (set_by)")
        for setter in var.set_by:
            if setter not in doers:
                problems.append(
                    f"variable {var.name!r} is set by {setter!r}, which is no emit action, "
                    f"effect or input of {decl.name!r}"
                )
    reads = [(f"guard {g!r}", r) for g, r in decl.guard_reads.items()]
    reads += [(f"input {i.name!r}", i.reads) for i in decl.inputs.values()]
    for who, names in reads:
        for name in names:
            if name not in decl.variables:
                problems.append(f"{who} reads undeclared variable {name!r}")
    for spec in decl.states.values():
        if spec.hook is not None and not isinstance(spec.hook, str):
            problems.append(f"state {spec.name!r} names a hook that is not a str")
        if spec.suspend_when is not None and spec.suspend_when not in decl.guards:
            problems.append(
                f"state {spec.name!r} suspends when undeclared guard {spec.suspend_when!r}"
            )
    for kind, handling in decl.stream_events.items():
        if handling not in STREAM_HANDLING:
            problems.append(
                f"stream event {kind!r} has unknown handling {handling!r} (known: "
                f"{', '.join(STREAM_HANDLING)})"
            )


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
