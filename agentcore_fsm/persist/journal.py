"""Runs that survive: a run as its header plus the inputs it was fed (docs/record.md).

The loop machine is pure: feeding the same inputs to a fresh machine gives the same steps. So a
run is recorded as its **header** (the prompts, the starting context, the model and the few
settings that shape the machine) and its **entries**: one JSON entry per input that changed
the run, each with its input's timestamp
(:mod:`agentcore_fsm.persist.inputs`; values by the rules of :mod:`agentcore_fsm.persist.codec`).
:class:`JournaledLoopMachine` is a :class:`~agentcore_fsm.core.machine.LoopMachine` that keeps
both as it goes; :meth:`~JournaledLoopMachine.snapshot` turns them into a versioned
:class:`RunSnapshot` at any step boundary, and :meth:`~JournaledLoopMachine.restore` rebuilds a
machine from one (given the live objects a record cannot hold: the tools and the config's
callables) by feeding the entries again. :func:`derive_run` does the same without the live
objects, for readers (a recording's diagram, a replay): it stands in for the tools and hooks
with stubs made from what the header says of them, which the pure machine never calls.

Every record is validated as it is read: a header or entry that is damaged (a field of the
wrong type, an index that names no call, a class that is not a registered message type) or that
does not fit (another declaration, tools or hooks that differ, an input the machine refuses)
raises :class:`JournalError`, a :class:`~agentcore_fsm.persist.codec.RecordError`, naming the
run, the entry and what is wrong.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from agentcore_fsm.core.boundary import exc_text, json_data, pydantic_problems
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig
from agentcore_fsm.core.declaration import Declaration, load_declaration
from agentcore_fsm.core.declared import MachineError
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import Model, ThinkingLevel
from agentcore_fsm.core.output import OutputSpec
from agentcore_fsm.core.protocol import Effect, Input, Step
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.persist.codec import (
    JournaledError,
    RecordData,
    RecordError,
    ToolResolver,
    decode_context,
    decode_message,
    decode_model,
    encode_context,
    encode_message,
    encode_model,
    need,
    specs_of,
    tools_by_name,
)
from agentcore_fsm.persist.inputs import decode_entry, encode_input, partial_of
from agentcore_fsm.persist.output_record import encode_output, output_for_restore, read_output
from agentcore_fsm.persist.policy_record import (
    encode_policies,
    policies_differ,
    policies_for_reader,
)

__all__ = [
    "JOURNAL_FORMAT",
    "READABLE_FORMATS",
    "DerivedRun",
    "JournalError",
    "JournaledError",
    "JournaledLoopMachine",
    "RunSnapshot",
    "current_declaration_hash",
    "declaration_hash",
    "declarations_hash",
    "decode_message",
    "derive_run",
    "encode_message",
]

logger = logging.getLogger("agentcore_fsm")

JOURNAL_FORMAT = 2
"""The version of the header/entry format this code writes (format 2 added the tools'
descriptions to the header's contexts)."""
READABLE_FORMATS = (1, 2)
"""The formats this code reads."""

HOOK_NAMES = (
    "transform_context",
    "convert_to_llm",
    "get_api_key",
    "before_tool_call",
    "after_tool_call",
    "prepare_next_turn",
    "should_stop_after_turn",
    "get_steering_messages",
    "get_follow_up_messages",
)
# the ones whose presence decides transitions: a resumed run must have the same set
SHAPING_HOOKS = (
    "before_tool_call",
    "after_tool_call",
    "prepare_next_turn",
    "should_stop_after_turn",
    "get_steering_messages",
    "get_follow_up_messages",
)
_HEADER_FIELDS = frozenset(
    {
        "format",
        "declaration",
        "declaration_hash",
        "prompts",
        "context",
        "model",
        "reasoning",
        "tool_execution",
        "hooks",
        "continuing",
        "output",  # a run with an output type only (persist/output_record.py)
        "policies",  # a run with a fallback or a compaction only (persist/policy_record.py)
        "fork",  # a forked run only: its parent, step and edit (devtools/fork.py)
        "parent",  # a nested run only: the run and call that started it (agent/nested.py)
    }
)
_LEVELS = frozenset(get_args(ThinkingLevel))


class JournalError(RecordError, MachineError):
    """A record that cannot be written or read back: a value it cannot hold, a damaged header
    or entry, a record of another declaration or format, tools or hooks that differ from the
    run's, an entry the machine refuses. The text names the run (when known), the entry and
    what is wrong."""


class RunSnapshot(BaseModel):
    """A run at a step boundary, as JSON-able data: the format version, the declaration it was
    made with (name and hash), the run's header and its entries. Rebuild a machine from it
    with :meth:`JournaledLoopMachine.restore`."""

    format: Any = JOURNAL_FORMAT
    declaration: Any = None
    declaration_hash: Any = None
    header: dict[str, Any]
    entries: list[dict[str, Any]]
    """(``format``, ``declaration`` and ``declaration_hash`` are checked when the snapshot is
    restored, so that a damaged one is refused there with a :class:`JournalError`.)"""

    @classmethod
    def of(cls, header: dict[str, Any], entries: list[dict[str, Any]]) -> RunSnapshot:
        """The snapshot of a stored run's ``header`` and ``entries`` (a store's ``StoredRun``,
        a fork's plan): the format and the declaration as the header names them (0 and ``""``
        when it names none, which :meth:`JournaledLoopMachine.restore` then refuses)."""
        return cls(
            format=header.get("format", 0),
            declaration=header.get("declaration", ""),
            declaration_hash=header.get("declaration_hash", ""),
            header=header,
            entries=entries,
        )


def declaration_hash(machine: LoopMachine) -> str:
    """A hash of the declarations a loop machine runs (the loop's and the tool call's): see
    :func:`declarations_hash`. Worked out once per pair of declaration objects (every journaled
    run's header holds it; a declaration is frozen)."""
    loop, call = machine.declaration, machine.call_declaration
    known = _PAIRS.get(loop)
    if known is not None and known[0]() is call:
        return known[1]
    value = declarations_hash(loop, call)
    _PAIRS[loop] = (weakref.ref(call), value)
    return value


_PAIRS: weakref.WeakKeyDictionary[Declaration, tuple[weakref.ref[Declaration], str]] = (
    weakref.WeakKeyDictionary()
)


def current_declaration_hash() -> str:
    """The :func:`declaration_hash` of the machines this version runs (``states/``)."""
    return declarations_hash(load_declaration("agent_loop"), load_declaration("tool_call"))


def declarations_hash(*declarations: Declaration) -> str:
    """A hash of what decides the machines' path — states and their effects, hooks and
    suspensions, inputs, transitions with their guards, emits and reasons, in order, the
    declared variables (type, initial value, setters, readers), the stream event kinds — and
    not of the prose (docs, comments), so that a release that only rewords a declaration still
    resumes and re-derives the runs of the one before. A run recorded under another hash is
    read as it was recorded, never fed again (docs/record.md). Each declaration's part is
    worked out once per declaration object (every journaled run's header holds the hash)."""
    digest = hashlib.sha256()
    for decl in declarations:
        digest.update(_shape(decl))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


_SHAPES: weakref.WeakKeyDictionary[Declaration, bytes] = weakref.WeakKeyDictionary()


def _shape(decl: Declaration) -> bytes:
    known = _SHAPES.get(decl)
    if known is not None:
        return known
    shape: list[Any] = [
        decl.name,
        decl.initial,
        decl.final,
        [[s.name, s.effect] for s in decl.states.values()],
        [[i.name, i.kind, list(i.states), list(i.offers)] for i in decl.inputs.values()],
        sorted(decl.guards),
        sorted(decl.emits),
        [
            [t.trigger, t.source, t.dest, t.guards, t.unless, t.emits, t.auto, t.reason]
            for t in decl.transitions
        ],
        # the declared variables, what reads them, the hook and suspension tables, the stream
        # event kinds: they decide the path too
        [[v.name, v.type, v.initial, list(v.set_by)] for v in decl.variables.values()],
        [[g, list(r)] for g, r in sorted(decl.guard_reads.items())],
        [[i.name, list(i.reads)] for i in decl.inputs.values()],
        [[s.name, s.hook, s.suspend_when] for s in decl.states.values()],
        sorted(decl.stream_events.items()),
    ]
    text = json.dumps(shape, separators=(",", ":")).encode()
    _SHAPES[decl] = text
    return text


# --- the header ---------------------------------------------------------------------------------


@dataclasses.dataclass
class RunHeader:
    """A header read back (validated): what a machine is rebuilt from."""

    format: int
    declaration: str
    declaration_hash: str
    prompts: list[Any]
    context: AgentContext
    model: Model
    reasoning: Any
    tool_execution: Any
    hooks: list[str]
    continuing: bool
    output: OutputSpec | None = None


def read_header(header: Any, tools: ToolResolver) -> RunHeader:
    """Validate a run's header and decode it (``tools`` gives the tools it names); raises
    :class:`~agentcore_fsm.persist.codec.RecordError` saying what is wrong."""
    what = "the header"
    if not isinstance(header, dict):
        raise RecordError(f"{what} is {type(header).__name__}, not an object")
    fmt = need(header, "format", int, what)
    if fmt not in READABLE_FORMATS:
        raise RecordError(
            f"record format {fmt} is not a format this version reads "
            f"({', '.join(map(str, READABLE_FORMATS))})"
        )
    unknown = sorted(k for k in header if k not in _HEADER_FIELDS)
    if unknown:
        raise RecordError(f"{what} has an unknown field {unknown[0]!r}")
    prompts_data = need(header, "prompts", list, what)
    prompts = [decode_message(m, f"prompt #{i}") for i, m in enumerate(prompts_data)]
    context = decode_context(need(header, "context", dict, what), tools, f"{what}'s context")
    model = decode_model(need(header, "model", dict, what), f"{what}'s model")
    for name in ("reasoning", "tool_execution", "hooks", "continuing"):
        if name not in header:
            raise RecordError(f"{what} has no {name!r}")
    reasoning = header["reasoning"]
    if reasoning is not None and not (isinstance(reasoning, str) and reasoning in _LEVELS):
        raise RecordError(f"{what}'s reasoning {reasoning!r} is not a thinking level")
    mode = header["tool_execution"]
    if not isinstance(mode, str) or mode not in ("parallel", "sequential"):
        raise RecordError(f"{what}'s tool_execution {mode!r} is not parallel or sequential")
    hooks = header["hooks"]
    if not isinstance(hooks, list) or not all(
        isinstance(h, str) and h in HOOK_NAMES for h in hooks
    ):
        raise RecordError(f"{what}'s hooks must be a list of hook names, not {hooks!r}")
    return RunHeader(
        fmt,
        need(header, "declaration", str, what),
        need(header, "declaration_hash", str, what),
        prompts,
        context,
        model,
        reasoning,
        mode,
        list(hooks),
        need(header, "continuing", bool, what),
        read_output(header),
    )


# --- the machine --------------------------------------------------------------------------------


class JournaledLoopMachine(LoopMachine):
    """A :class:`~agentcore_fsm.core.machine.LoopMachine` that journals what it is fed.

    ``header`` is the run's starting data as JSON; ``entries`` the journal so far (one entry per
    input that changed the run, appended in order as each input is taken); ``feed`` calls
    nobody: the driver takes the new entries after each step and writes them through the run's
    journal (:mod:`agentcore_fsm.runtime.recording`). A value that cannot be recorded (a custom
    message whose class is not a registered message type) raises :class:`JournalError` from
    the constructor for the header, and for an entry stops the journal: :attr:`journal_error`
    is then set (a driver fails the run with it). Everything else is the loop machine's."""

    def __init__(
        self,
        prompts: Iterable[Any],
        context: AgentContext,
        config: AgentLoopConfig,
        *,
        continuing: bool = False,
        parent: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        prompts = list(prompts)
        super().__init__(prompts, context, config, **kwargs)
        self.journal_error: Exception | None = None
        """Set when an entry could not be made: journaling stopped there (a driver fails the
        run)."""
        self.entries: list[dict[str, Any]] = []
        try:
            self.header: dict[str, Any] = RecordData(
                {
                    "format": JOURNAL_FORMAT,
                    "declaration": self.declaration.name,
                    "declaration_hash": declaration_hash(self),
                    "prompts": [encode_message(m) for m in prompts],
                    "context": encode_context(context),
                    "model": encode_model(config.model),
                    "reasoning": config.reasoning,
                    "tool_execution": config.tool_execution,
                    "hooks": [name for name in HOOK_NAMES if getattr(config, name) is not None],
                    "continuing": continuing,
                }
            )
            output = encode_output(config.output)
            if output is not None:
                self.header["output"] = output
            policies = encode_policies(config)  # fallback, compaction (persist/policy_record.py)
            if policies is not None:
                self.header["policies"] = policies
            if parent is not None:  # a nested run: the run and the call that started it
                self.header["parent"] = json_data(parent)
        except RecordError as exc:
            raise JournalError(f"the run cannot be recorded: {exc}") from None

    def feed(self, input: Input) -> Step:
        """Feed ``input`` (see :meth:`LoopMachine.feed`) and journal it."""
        partial = partial_of(self, input)
        failed_before = self.failure is not None
        step = super().feed(input)
        if self.journal_error is not None:
            return step  # the journal stopped: nothing after a gap is worth keeping
        try:
            entry = encode_input(self, input, step, partial, failed_before)
        except RecordError as exc:
            self.journal_error = JournalError(f"the run cannot be recorded further: {exc}")
            return step
        if entry is not None:
            entry = RecordData(entry)  # JSON data by construction: encoded once, unchecked
            if input.timestamp:
                entry["timestamp"] = input.timestamp
            # the driver takes new entries from here after each step and writes them through
            # the run's journal (agentcore_fsm.runtime.recording): feed calls nobody
            self.entries.append(entry)
        return step

    def snapshot(self) -> RunSnapshot:
        """The run so far as a :class:`RunSnapshot` (take it between steps)."""
        return RunSnapshot(
            declaration=self.declaration.name,
            declaration_hash=self.header["declaration_hash"],
            header=dict(self.header),
            entries=[dict(e) for e in self.entries],
        )

    @classmethod
    def restore(
        cls,
        snapshot: RunSnapshot | dict[str, Any],
        config: AgentLoopConfig,
        *,
        tools: Sequence[AgentTool] = (),
        run_id: str | None = None,
        on_transition: Any = None,
    ) -> tuple[JournaledLoopMachine, list[Step]]:
        """Rebuild the machine of ``snapshot`` and feed it the entries again; return it and the
        steps they produced (their events are the run's history up to the snapshot).

        ``config`` gives the callables again (hooks, polls): the same ones must be configured
        as in the run (the machine's path depends on which are). ``tools`` are matched by name
        with the tools the run used. Raises :class:`JournalError` naming the run, the entry and
        what is wrong for a damaged record, a record of another declaration or format, tools or
        hooks that differ, or entries the machine refuses."""
        resolver = tools_by_name({t.name: t for t in tools})
        machine, steps, _ = _restore(cls, snapshot, config, resolver, run_id, on_transition)
        return machine, steps


class _Emitting(list):  # type: ignore[type-arg]
    """A derived machine's ``history``: as each transition is recorded (before its emit
    actions run), notes the index, among the run's events, of the first event it may emit."""

    def __init__(self, machine: LoopMachine, emitted: list[int], before: Any) -> None:
        super().__init__()
        self.machine, self.emitted, self.before = machine, emitted, before

    def append(self, record: Any) -> None:
        self.emitted.append(self.before() + self.machine.events_pending)
        super().append(record)


def _snapshot_of(snapshot: Any, where: str, run_id: str | None) -> RunSnapshot:
    if isinstance(snapshot, RunSnapshot):
        return snapshot
    try:
        return RunSnapshot.model_validate(snapshot)
    except ValidationError as exc:
        raise JournalError(
            f"{where}not a run record: {pydantic_problems(exc)}", run_id=run_id
        ) from None


def _restore(
    cls: type[JournaledLoopMachine],
    snapshot: Any,
    config: AgentLoopConfig,
    tools: ToolResolver,
    run_id: str | None,
    on_transition: Any,
    emitted: list[int] | None = None,
) -> tuple[JournaledLoopMachine, list[Step], list[list[tuple[int, int]]]]:
    where = f"run {run_id!r}: " if run_id else ""
    snap = _snapshot_of(snapshot, where, run_id)
    for name, value in (("declaration", snap.declaration), ("hash", snap.declaration_hash)):
        if not isinstance(value, str):
            raise JournalError(f"{where}the header's {name} is {value!r}, not a str", run_id=run_id)
    if isinstance(snap.format, bool) or snap.format not in READABLE_FORMATS:
        raise JournalError(
            f"{where}the header's journal format {snap.format!r} is not a format this version "
            f"reads ({', '.join(map(str, READABLE_FORMATS))})",
            run_id=run_id,
        )
    try:
        header = read_header(snap.header, tools)
    except RecordError as exc:
        raise JournalError(f"{where}{exc}", run_id=run_id) from None
    hooks = [name for name in SHAPING_HOOKS if getattr(config, name) is not None]
    recorded = [name for name in SHAPING_HOOKS if name in header.hooks]
    if hooks != recorded:
        raise JournalError(
            f"{where}the header says the run was made with the hooks {recorded or 'none'}, the "
            f"config given "
            f"has {hooks or 'none'}: give the same ones to resume it"
        )
    different = policies_differ(snap.header, config)  # persist/policy_record.py
    if different is not None:
        raise JournalError(f"{where}{different}", run_id=run_id)
    try:
        output = output_for_restore(config.output, header.output, where)
    except ValueError as exc:
        raise JournalError(str(exc), run_id=run_id) from None
    config = dataclasses.replace(
        config,
        model=header.model,
        reasoning=header.reasoning,
        tool_execution=header.tool_execution,
        output=output,
    )
    try:
        machine = cls(
            header.prompts,
            header.context,
            config,
            continuing=header.continuing,
        )
    except JournalError as exc:
        raise JournalError(f"{where}{exc}", run_id=run_id) from None
    mine = machine.header["declaration_hash"]
    if snap.declaration != machine.declaration.name or snap.declaration_hash != mine:
        raise JournalError(
            f"{where}the header says the run was made with the declaration {snap.declaration!r} "
            f"(hash {snap.declaration_hash}); this version runs {machine.declaration.name!r} "
            f"(hash {mine}): it cannot be replayed here"
        )
    machine.header = dict(snap.header)
    steps: list[Step] = []
    marks: list[list[tuple[int, int]]] = []  # per entry, per input: transitions, events so far
    events = 0
    if emitted is not None:  # where each transition's events begin (see DerivedRun.emitted)
        machine.history = _Emitting(machine, emitted, lambda: events)
    for number, entry in enumerate(snap.entries):
        kind = entry.get("input")
        at = f"{where}entry #{number}" + (f" ({kind})" if isinstance(kind, str) else "")
        try:
            decoded = decode_entry(entry, len(machine.calls), tools)
        except RecordError as exc:
            raise JournalError(f"{at}: {exc}", run_id=run_id, entry=number) from None
        if decoded.args is not None:  # redo what before_tool_call did to the arguments
            index, args = decoded.args
            live = machine.calls[index].args
            if isinstance(live, dict):
                live.clear()
                live.update(args)
        fed: list[Step] = []
        entry_marks: list[tuple[int, int]] = []
        try:
            for item in decoded.inputs:
                step = LoopMachine.feed(machine, item)
                fed.append(step)
                events += len(step.events)
                entry_marks.append((len(machine.history), events))
                if on_transition is not None:  # the machine calls nobody: the reader does
                    _report(on_transition, step.transitions)
        except MachineError as exc:
            raise JournalError(
                f"{at} does not fit the machine in state {machine.state!r}: {exc_text(exc)}",
                run_id=run_id,
                entry=number,
            ) from None
        except Exception as exc:  # a value the checks let through and the machine cannot take
            raise JournalError(
                f"{at} cannot be fed to the machine in state {machine.state!r}: "
                f"{type(exc).__name__}: {exc_text(exc)}",
                run_id=run_id,
                entry=number,
            ) from None
        steps += fed
        marks.append(entry_marks)
        machine.entries.append(entry)
    return machine, steps, marks


def _report(on_transition: Any, records: Sequence[Any]) -> None:
    for record in records:
        try:
            on_transition(record)
        except Exception:  # an observer never breaks reading the run back
            logger.exception("on_transition raised; ignored")


# --- reading a run without its live objects ------------------------------------------------------


def _never(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a run derived from its record calls nothing")


def _stub_tool(spec: Any) -> AgentTool:
    name = need(spec, "name", str, "it")
    what = f"the description of tool {name!r}"
    parameters = need(spec, "parameters", dict, what)
    mode = spec.get("mode")
    if mode not in (None, "parallel", "sequential"):
        raise RecordError(f"{what} has the execution mode {mode!r}")
    approval = spec.get("approval", False)
    if approval not in (True, False, "check"):
        raise RecordError(f'{what} has approval {approval!r} (true, false or "check")')
    prepare = need(spec, "prepare", bool, what)
    try:
        return AgentTool(
            name,
            f"the recorded tool {name}",
            parameters,
            _never,
            prepare_arguments=_never if prepare else None,
            execution_mode=mode,
            requires_approval=_never if approval == "check" else bool(approval),
        )
    except (TypeError, ValueError) as exc:
        raise RecordError(f"{what} is not a tool: {exc_text(exc)}") from None


def _stubs(snapshot: RunSnapshot) -> dict[str, AgentTool]:
    """Stand-ins for the tools a record names, from the descriptions it holds."""
    contexts = [snapshot.header.get("context")]
    for entry in snapshot.entries:
        value = entry.get("value")
        if entry.get("name") == "prepare_next_turn" and isinstance(value, dict):
            contexts.append(value.get("context"))
    stubs: dict[str, AgentTool] = {}
    for context in contexts:
        for spec in specs_of(context):
            tool = _stub_tool(spec)
            stubs.setdefault(tool.name, tool)
        if snapshot.format == 1 and isinstance(context, dict):  # no descriptions: any arguments
            for name in context.get("tools") or ():
                if isinstance(name, str) and name not in stubs:
                    stubs[name] = AgentTool(name, "a recorded tool", {}, _never)
    return stubs


@dataclasses.dataclass
class DerivedRun:
    """A run derived from its record (:func:`derive_run`): the ``machine`` the entries were fed
    to (its ``history`` holds the transitions, ``new_messages`` the transcript, ``state`` where
    the run stands), the ``steps`` they produced (their events, in order: the run's events but
    the model's deltas and the tools' progress updates, which a record does not hold), and for
    each entry, ``marks[k]``: for each input entry ``k`` gave (two for a model call cut short:
    its partial message's start, then the input), how many transitions and events the run had
    produced once that input was fed; and :attr:`emitted`, where each transition's events
    begin."""

    machine: JournaledLoopMachine
    steps: list[Step]
    marks: list[list[tuple[int, int]]]
    emitted: list[int] = dataclasses.field(default_factory=list)
    """For each transition (``machine.history[i]``), the index in :attr:`events` of the first
    event it emitted (of the next event, when it emitted none): the events from
    ``emitted[i]`` up to ``emitted[i + 1]`` are the ones transition ``i``'s emit actions made,
    and those of the inputs after it that took no transition (a model answer's start)."""

    @property
    def transitions(self) -> list[Any]:
        return list(self.machine.history)

    @property
    def events(self) -> list[Any]:
        return [event for step in self.steps for event in step.events]


def derive_run(
    snapshot: RunSnapshot | dict[str, Any],
    *,
    tools: Sequence[AgentTool] = (),
    run_id: str | None = None,
    on_transition: Any = None,
) -> DerivedRun:
    """Feed a record's entries again without the run's live objects (see :class:`DerivedRun`
    for what comes out). The hooks the header names and its tools are stood in for by stubs
    made from the header: the pure machine reads only whether a hook is configured and what a
    tool's parameters, mode and approval are, and never calls them. ``tools`` given by name
    replace the stubs (use it for tools whose parameters are a pydantic model, which validates
    more leniently than its JSON schema). Raises :class:`JournalError` as
    :meth:`JournaledLoopMachine.restore` does."""
    where = f"run {run_id!r}: " if run_id else ""
    snap = _snapshot_of(snapshot, where, run_id)
    try:
        stubs = _stubs(snap)
    except RecordError as exc:
        raise JournalError(
            f"{where}a tool's description in the record: {exc}", run_id=run_id
        ) from None
    stubs.update({t.name: t for t in tools})
    try:  # the recorded fallback and compaction settings (persist/policy_record.py)
        policies = policies_for_reader(snap.header)
    except RecordError as exc:
        raise JournalError(f"{where}{exc}", run_id=run_id) from None
    config = AgentLoopConfig(model=Model(id="recorded"), **policies)
    hooks = snap.header.get("hooks")
    for name in hooks if isinstance(hooks, list) else ():
        if name in SHAPING_HOOKS:
            setattr(config, name, _never)
    emitted: list[int] = []
    machine, steps, marks = _restore(
        JournaledLoopMachine,
        snap,
        config,
        tools_by_name(stubs, "described in the record"),
        run_id,
        on_transition,
        emitted,
    )
    machine.history = list(machine.history)  # a plain list again
    return DerivedRun(machine, steps, marks, emitted)


def pending_effects(machine: LoopMachine) -> list[Effect]:
    """The effects a machine at a step boundary is waiting for (see
    :meth:`~agentcore_fsm.core.machine.LoopMachine.pending_effects`)."""
    return machine.pending_effects()
