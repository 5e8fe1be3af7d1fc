"""Fork a run: replay its first steps exactly, change one thing, and go on live (docs/debugging.md).

A run's record is its header and the inputs its machine was fed (docs/record.md); its **steps**
are those inputs, numbered from 0 as the record numbers them (``n`` in a recording, the entry's
number in a store). :func:`fork_run` makes a new run from a record:

1. the steps before ``at`` are fed again as recorded: no model, tool, poll or approver is
   called for them;
2. the **edit** is applied at step ``at`` (None: nothing is changed):

   - :class:`ToolResult` replaces the result of the tool call finished at that step (the step
     must be a ``tool_finished``);
   - :class:`ModelAnswer` replaces the model's answer of that step (a ``stream_done`` or
     ``stream_error``);
   - :class:`Steer` adds a steering message to what the steering poll returned at that step (a
     ``steering_polled``);
   - :class:`Messages` replaces the messages of that step: the prompts of the ``start`` step
     (step 0), or what a poll returned (a ``steering_polled`` or ``follow_up_polled``);
   - :class:`ChangeModel` and :class:`Settings` (any step): the model, or the reasoning level
     and tool execution mode, the run continues with from that step on;

   an edit that replaces a step's outcome is fed as that step, and the machine goes on from
   it; an edit of the model or a setting leaves the step to be performed live;
3. the run goes on live from there, with the model and tools the caller gives (and the config's
   hooks, polls and approver), journaled under a new run id into ``store`` (default: a new
   :class:`~agentcore_fsm.persist.store.MemoryRunStore`; a
   :class:`~agentcore_fsm.persist.recorder.RunRecorder`'s ``store`` writes a recording).

The fork's header is the parent's, with the model and settings an edit changed, plus a
``fork`` field: ``{"parent": PARENT_ID, "step": AT, "edit": {...}}`` (the edit as JSON data).
A fork of a fork is a fork like any other: its ``fork`` names the fork it came from. What was
in flight at the fork point is performed live: a model call is made, a tool that had started
runs (a fork is not a crash: unlike :func:`~agentcore_fsm.runtime.resume.resume_run`, a tool
that is not idempotent runs too), an approval is asked for, a poll is called. A run whose
record shows its abort signal fired before the fork point continues aborted, as it did.

Bad input raises :class:`ForkError` (a ``ValueError``) with one line naming what was wrong, and
nothing is written: a step the run does not have, an edit that does not fit the step, a
damaged record, or a config or tools that do not fit the record (another hook set, a missing
tool).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from agentcore_fsm.core.abort import AbortController, AbortSignal
from agentcore_fsm.core.boundary import InvalidValueError, coerce_messages
from agentcore_fsm.core.config import AgentLoopConfig, StreamFn
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.messages import AgentMessage, AssistantMessage, Model, TextContent, now_ms
from agentcore_fsm.core.protocol import Start, Step
from agentcore_fsm.core.run_context import own_scope
from agentcore_fsm.core.tools import AgentTool, AgentToolResult
from agentcore_fsm.devtools.nested_records import (
    NestedRecordError,
    Record,
    nested_runs,
    read_records,
    without_parent,
)
from agentcore_fsm.persist.codec import (
    RecordError,
    decode_message,
    encode_message,
    encode_model,
    encode_tool_outcome,
    poll_data,
)
from agentcore_fsm.persist.journal import JournaledLoopMachine, RunSnapshot, pending_effects
from agentcore_fsm.persist.recording import RecordedRun, load_run
from agentcore_fsm.persist.run_journal import DEFAULT_LEASE_S, StoreJournal
from agentcore_fsm.persist.store import MemoryRunStore, RunExistsError, RunStore, RunStoreError
from agentcore_fsm.persist.store_rules import default_owner
from agentcore_fsm.runtime.driver import resolve_stream_fn, run_machine
from agentcore_fsm.runtime.observer import RunObserver, select_observers
from agentcore_fsm.runtime.resume import abort_journaled

__all__ = [
    "KEEP",
    "ChangeModel",
    "Edit",
    "ForkError",
    "ForkPlan",
    "ForkResult",
    "ForkSource",
    "Messages",
    "ModelAnswer",
    "ParentRun",
    "Settings",
    "Steer",
    "ToolResult",
    "check_fork",
    "fork_run",
    "fork_run_sync",
    "nested_to_keep",
    "plan_fork",
    "polled_items",
    "read_parent",
]

KEEP: Any = "keep"
"""For :class:`Settings`: leave this setting as the parent run had it."""


class ForkError(ValueError):
    """A fork that cannot be made: the text is one line naming the run, the step and what is
    wrong. Nothing was written."""


# --- the edits ---------------------------------------------------------------------------------


def _kinds(kinds: Sequence[str]) -> str:
    return " or ".join(kinds)


@dataclass(frozen=True)
class ToolResult:
    """Replace the result of the tool call that finished at the fork step (a ``tool_finished``
    step): ``result`` is an :class:`~agentcore_fsm.core.messages.AgentToolResult` or a text
    (one text block; ``is_error`` marks it as an error result)."""

    result: AgentToolResult | str
    is_error: bool = False

    fits = ("tool_finished",)

    def describe(self) -> dict[str, Any]:
        outcome = encode_tool_outcome("the tool", self._result())
        return {"kind": "tool_result", **outcome}

    def _result(self) -> AgentToolResult:
        if isinstance(self.result, str):
            return AgentToolResult(
                content=[TextContent(text=self.result)], is_error=self.is_error or None
            )
        return self.result

    def entry(self, parent: dict[str, Any], entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
        index = parent.get("index")
        name = _call_name(entries, index)
        outcome = encode_tool_outcome(name, self._result())
        if "result" not in outcome:
            raise ForkError(f"the tool result does not fit tool {name!r}: {outcome['error']}")
        return {"input": "tool_finished", "index": index, "result": outcome["result"]} | {
            "aborted": parent.get("aborted", False)
        }


@dataclass(frozen=True)
class ModelAnswer:
    """Replace the model's answer at the fork step (a ``stream_done`` or ``stream_error``
    step): an :class:`~agentcore_fsm.core.messages.AssistantMessage`, or a text (the recorded
    answer with its content replaced by that one text block and no tool calls, so the run
    stops there unless something else keeps it going)."""

    message: AssistantMessage | str

    fits = ("stream_done", "stream_error")

    def describe(self) -> dict[str, Any]:
        if isinstance(self.message, str):
            return {"kind": "model_answer", "text": self.message}
        return {"kind": "model_answer", **encode_message(self.message)}

    def entry(self, parent: dict[str, Any], entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
        if isinstance(self.message, str):
            try:
                recorded = decode_message(parent.get("message"), "the recorded answer")
            except RecordError as exc:
                raise ForkError(str(exc)) from None
            message = recorded.model_copy(
                update={
                    "content": [TextContent(text=self.message)],
                    "stop_reason": "stop",
                    "error_message": None,
                }
            )
        else:
            message = self.message
        stop = message.stop_reason
        kind = "stream_error" if stop in ("error", "aborted") else "stream_done"
        return {"input": kind, "reason": stop, "message": encode_message(message)}


@dataclass(frozen=True)
class Steer:
    """Add a steering message (a text, or a message) to what the steering poll returned at the
    fork step (a ``steering_polled`` step: the run must have been made with
    ``get_steering_messages``; the record's other steps show where it was polled)."""

    message: AgentMessage | str

    fits = ("steering_polled",)

    def describe(self) -> dict[str, Any]:
        return {"kind": "steer", "messages": poll_data([self.message])}

    def entry(self, parent: dict[str, Any], entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {
            "input": parent["input"],
            "messages": {"items": [*polled_items(parent), *poll_data([self.message])["items"]]}
            | {"list": True},
            "aborted": parent.get("aborted", False),
        }


def polled_items(entry: dict[str, Any]) -> list[Any]:
    """The messages a poll's entry holds, as data (none for a poll that returned nothing)."""
    polled = entry.get("messages")
    items = polled.get("items") if isinstance(polled, dict) else None
    return list(items) if isinstance(items, list) else []


@dataclass(frozen=True)
class Messages:
    """Replace the messages of the fork step: the run's prompts at its ``start`` step, or what
    a poll returned at a ``steering_polled`` or ``follow_up_polled`` step (an empty list: the
    poll returned nothing)."""

    messages: Sequence[AgentMessage | str]

    fits = ("start", "steering_polled", "follow_up_polled")

    def describe(self) -> dict[str, Any]:
        return {"kind": "messages", "messages": poll_data(list(self.messages))}

    def entry(self, parent: dict[str, Any], entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
        if parent["input"] == "start":
            return {"input": "start"}
        return {
            "input": parent["input"],
            "messages": poll_data(list(self.messages)),
            "aborted": parent.get("aborted", False),
        }

    def header(self, header: dict[str, Any], kind: str) -> dict[str, Any]:
        if kind != "start":
            return header
        try:
            prompts = coerce_messages(list(self.messages), "the prompts")
        except InvalidValueError as exc:
            raise ForkError(str(exc)) from None
        if not prompts:
            raise ForkError("a run starts with at least one prompt; the edit gives none")
        return header | {"prompts": [encode_message(m) for m in prompts]}


@dataclass(frozen=True)
class ChangeModel:
    """Continue with another model from the fork step on (any step): the step is performed
    live, with ``model`` (the stream function the caller gives, or the default one of the
    model's provider)."""

    model: Model

    fits = ()

    def describe(self) -> dict[str, Any]:
        return {"kind": "model", "model": encode_model(self.model)}

    def header(self, header: dict[str, Any], kind: str) -> dict[str, Any]:
        return header | {"model": encode_model(self.model)}


@dataclass(frozen=True)
class Settings:
    """Continue with other settings from the fork step on (any step): the reasoning level
    (None: none) and the tool execution mode; :data:`KEEP` leaves one as it was."""

    reasoning: Any = KEEP
    tool_execution: Literal["parallel", "sequential"] | Any = KEEP

    fits = ()

    def describe(self) -> dict[str, Any]:
        changed = {"reasoning": self.reasoning, "tool_execution": self.tool_execution}
        return {"kind": "settings"} | {k: v for k, v in changed.items() if v is not KEEP}

    def header(self, header: dict[str, Any], kind: str) -> dict[str, Any]:
        return header | {k: v for k, v in self.describe().items() if k != "kind"}


Edit = ToolResult | ModelAnswer | Steer | Messages | ChangeModel | Settings
"""What a fork changes at its step."""

ForkSource = str | os.PathLike[str] | RecordedRun | RunSnapshot | RunStore
"""Where the parent run is read from: a recording's path, a loaded recording, a snapshot, or a
run store (then ``run`` names the run)."""


def _call_name(entries: Sequence[dict[str, Any]], index: Any) -> str:
    """The name of tool call ``index`` of the last model answer in ``entries``."""
    for entry in reversed(entries):
        if entry.get("input") in ("stream_done", "stream_error"):
            message = entry.get("message")
            inner = message.get("message") if isinstance(message, dict) else None
            content = inner.get("content") if isinstance(inner, dict) else None
            calls = [
                c for c in content or () if isinstance(c, dict) and c.get("type") == "toolCall"
            ]
            if isinstance(index, int) and 0 <= index < len(calls):
                return str(calls[index].get("name"))
            break
    return "the tool"


# --- reading the parent ------------------------------------------------------------------------


@dataclass(frozen=True)
class ParentRun:
    """The run a fork is made from: its id, header and steps (entries)."""

    run_id: str
    header: dict[str, Any]
    entries: list[dict[str, Any]]


def read_parent(source: ForkSource, run: str | None = None) -> ParentRun:
    """The run ``run`` of ``source`` (default: a recording's last run; a store needs ``run``).
    Raises :class:`ForkError` for a file that cannot be read, a damaged record or an unknown
    run."""
    if isinstance(source, RunSnapshot):
        return ParentRun(run or "run", dict(source.header), [dict(e) for e in source.entries])
    named = ""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        named = f"{path}: "
        try:
            source = load_run(path)
        except OSError as exc:
            raise ForkError(f"cannot read {path}: {exc.strerror or exc}") from None
        except RecordError as exc:
            raise ForkError(str(exc).splitlines()[0]) from None
    if isinstance(source, RecordedRun):
        records = [*source.records, *source.nested_records]
        if not records:
            raise ForkError(f"{named}the recording holds no run's record (header and inputs)")
        if run is None:  # the last run that is not nested in another
            chosen = (source.records or records)[-1]
        else:
            found = [r for r in records if r.run_id == run]
            if not found:
                names = ", ".join(repr(r.run_id) for r in records)
                raise ForkError(f"{named}the recording has no run {run!r} (it has {names})")
            chosen = found[0]
        return ParentRun(chosen.run_id, dict(chosen.header), [dict(e) for e in chosen.entries])
    if run is None:
        raise ForkError("name the run of the store to fork (run=)")
    try:
        stored = source.load(run)
    except RunStoreError as exc:
        raise ForkError(str(exc)) from None
    return ParentRun(run, stored.header, stored.entries)


# --- the plan ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForkPlan:
    """What a fork writes before it goes live: its ``header`` and the ``entries`` fed again
    (the parent's before the step, then the edited step when the edit replaces it)."""

    parent: ParentRun
    at: int
    header: dict[str, Any]
    entries: list[dict[str, Any]]


def _step_problem(parent: ParentRun, at: Any) -> str | None:
    if isinstance(at, bool) or not isinstance(at, int):
        return f"the fork step must be a step number, not {at!r}"
    count = len(parent.entries)
    if not 0 <= at < count:
        have = f"steps 0 to {count - 1}" if count else "no steps"
        return f"run {parent.run_id!r} has {have}; there is no step {at}"
    return None


def plan_fork(parent: ParentRun, at: int, edit: Edit | None = None) -> ForkPlan:
    """The header and entries of a fork of ``parent`` at step ``at`` with ``edit``, checked
    against the step (not yet against a machine: :func:`fork_run` does that). Raises
    :class:`ForkError`."""
    problem = _step_problem(parent, at)
    if problem is not None:
        raise ForkError(problem)
    step = parent.entries[at]
    kind = str(step.get("input"))
    where = f"step {at} of run {parent.run_id!r}"
    fits: tuple[str, ...] = getattr(edit, "fits", ())
    if edit is not None and fits and kind not in fits:
        name = type(edit).__name__
        places = [i for i, e in enumerate(parent.entries) if e.get("input") in fits]
        hint = f" (steps {', '.join(map(str, places[:8]))}" + (", ...)" if len(places) > 8 else ")")
        raise ForkError(
            f"{where} is a {kind}; a {name} edit fits a {_kinds(fits)} step"
            + (hint if places else ": the run has none")
        )
    header = without_parent(parent.header)  # a fork of a nested run is a run of its own
    header = dict(header)
    entries = [dict(e) for e in parent.entries[:at]]
    described: dict[str, Any] | None = None
    if edit is not None:
        described = edit.describe()
        if isinstance(edit, (Messages, ChangeModel, Settings)):
            header = edit.header(header, kind)
        if isinstance(edit, (ToolResult, ModelAnswer, Steer, Messages)):
            try:
                new = edit.entry(step, entries)
            except ForkError as exc:
                raise ForkError(f"{where}: {exc}") from None
            if "timestamp" in step:
                new["timestamp"] = step["timestamp"]
            entries.append(new)
    header["fork"] = {"parent": parent.run_id, "step": at, "edit": described}
    return ForkPlan(parent, at, header, entries)


# --- the fork ----------------------------------------------------------------------------------


@dataclass
class ForkResult:
    """A fork that ran: its ``run_id``, the ``parent`` it came from and the ``step`` it forked
    at, the run's new ``messages`` (from its start, the replayed steps' included, as
    ``run_agent_loop`` returns them), and the ``store`` that holds its record."""

    run_id: str
    parent: str
    step: int
    messages: list[AgentMessage]
    store: RunStore

    def snapshot(self) -> RunSnapshot:
        """The fork's record as the store holds it."""
        stored = self.store.load(self.run_id)
        return RunSnapshot.of(stored.header, stored.entries)


def _restore(
    plan: ForkPlan,
    config: AgentLoopConfig,
    tools: Sequence[AgentTool],
    run_id: str,
    on_transition: Callable[[TransitionRecord], None] | None,
) -> tuple[JournaledLoopMachine, list[Step]]:
    snapshot = RunSnapshot.of(plan.header, plan.entries)
    try:
        return JournaledLoopMachine.restore(
            snapshot, config, tools=tools, run_id=run_id, on_transition=on_transition
        )
    except RecordError as exc:
        text = str(exc).splitlines()[0]
        raise ForkError(
            f"cannot fork run {plan.parent.run_id!r} at step {plan.at}: {text}"
        ) from None


def _stream_fn(stream_fn: StreamFn | None, model: Model) -> StreamFn:
    """``stream_fn``, or the default one for ``model``; when there is none, one that raises
    that error when the fork asks the model (a fork that never does needs none)."""
    try:
        return resolve_stream_fn(stream_fn, model)
    except ValueError as exc:
        error = exc

        def missing(*args: Any, **kwargs: Any) -> Any:
            raise error

        return missing


def check_fork(plan: ForkPlan, config: AgentLoopConfig, tools: Sequence[AgentTool] = ()) -> None:
    """Feed ``plan`` to a machine with ``config`` and ``tools`` as :func:`fork_run` would,
    writing nothing: :class:`ForkError` when the record, the edit, the config or the tools do
    not fit."""
    _restore(plan, config, tools, f"{plan.parent.run_id}@{plan.at}", None)


def _create(store: RunStore, plan: ForkPlan, run_id: str | None, owner: str, lease_s: float) -> str:
    """Create the fork's run in ``store`` (its id: ``run_id``, or ``PARENT@STEP``, numbered
    ``.2``, ``.3``... when taken) and write its replayed entries; return its id."""
    base = run_id or f"{plan.parent.run_id}@{plan.at}"
    for n in range(1, 1000):
        candidate = base if n == 1 else f"{base}.{n}"
        try:
            store.create_run(candidate, plan.header, session_id=None, owner=owner, lease_s=lease_s)
        except RunExistsError:
            if run_id is not None:
                raise ForkError(f"run {run_id!r} already exists in {store!r}") from None
            continue
        for seq, entry in enumerate(plan.entries):
            store.append(candidate, seq, entry, owner=owner, lease_s=lease_s)
        return candidate
    raise ForkError(f"no free run id like {base!r} in {store!r}")


def nested_to_keep(source: ForkSource, plan: ForkPlan) -> list[Record]:
    """The records of the runs nested in the parent (at any depth) whose call finished before
    the fork step: the fork replays their results, so it keeps their records too. A nested
    record that does not fit its parent is a :class:`ForkError`."""
    if isinstance(source, RunSnapshot):
        return []
    try:
        records = read_records(source)
        if plan.parent.run_id not in records:
            return []
        runs = nested_runs(records, plan.parent.run_id)
    except OSError as exc:
        raise ForkError(f"cannot read the nested runs: {exc.strerror or exc}") from None
    except (NestedRecordError, RecordError) as exc:
        raise ForkError(str(exc).splitlines()[0]) from None
    return [
        records[inner.run_id]
        for run in runs
        if run.finished is not None and run.finished < plan.at
        for inner in run.walk()
    ]


def _copy_nested(
    records: Sequence[Record], parent: str, fork: str, store: RunStore, owner: str, lease_s: float
) -> None:
    """Copy nested runs' records into the fork's store, under the fork's run id."""
    for record in records:
        run_id = fork + record.run_id[len(parent) :]
        header = dict(record.header)
        link = dict(header["parent"])
        link["run"] = fork + str(link["run"])[len(parent) :]
        header["parent"] = link
        try:
            store.create_run(run_id, header, session_id=None, owner=owner, lease_s=lease_s)
        except RunExistsError:
            raise ForkError(
                f"the fork's nested run {run_id!r} already exists in {store!r} (the fork "
                f"{fork!r} was written, its nested runs not)"
            ) from None
        for seq, entry in enumerate(record.entries):
            store.append(run_id, seq, entry, owner=owner, lease_s=lease_s)
        if record.end_reason is not None:
            store.finish(run_id, record.end_reason, owner=owner)
        elif callable(release := getattr(store, "release", None)):
            release(run_id, owner)


async def fork_run(
    source: ForkSource,
    at: int,
    edit: Edit | None = None,
    *,
    run: str | None = None,
    config: AgentLoopConfig | None = None,
    tools: Sequence[AgentTool] = (),
    stream_fn: StreamFn | None = None,
    store: RunStore | None = None,
    run_id: str | None = None,
    emit: Callable[[Any], Any] | None = None,
    signal: AbortSignal | None = None,
    history: bool = True,
    on_transition: Callable[[TransitionRecord], None] | None = None,
    lease_s: float = DEFAULT_LEASE_S,
    instrument: bool | RunObserver | None = None,
    observers: Sequence[RunObserver] | None = None,
) -> ForkResult:
    """Fork run ``run`` of ``source`` at step ``at`` with ``edit`` and run the fork to its end
    (see the module's documentation); return the :class:`ForkResult`.

    ``config`` gives the callables the run goes on with (the same hooks and polls must be
    configured as in the parent; its model, reasoning and tool execution are the record's, or
    the edit's); ``tools`` the tools, by name; ``stream_fn`` the model. ``emit`` gets the
    events, the replayed steps' first (regenerated from the record: a model answer's deltas are
    not repeated) unless ``history=False``. ``signal``, ``on_transition``, ``instrument`` and
    ``observers`` are as for ``run_agent_loop``. ``store`` (default: a new
    :class:`~agentcore_fsm.persist.store.MemoryRunStore`) receives the fork's record under
    ``run_id`` (default: ``PARENT@STEP``). Raises :class:`ForkError`, having written nothing."""
    parent = read_parent(source, run)
    plan = plan_fork(parent, at, edit)
    config = config if config is not None else AgentLoopConfig(model=Model(id="fork"))
    check_fork(plan, config, tools)  # before anything is written
    kept = nested_to_keep(source, plan)
    store = store if store is not None else MemoryRunStore()
    owner = default_owner()
    new_id = _create(store, plan, run_id, owner, lease_s)
    _copy_nested(kept, plan.parent.run_id, new_id, store, owner, lease_s)
    journal = StoreJournal(store, new_id, owner=owner, lease_s=lease_s, existing=len(plan.entries))
    try:
        machine, steps = _restore(plan, config, tools, new_id, on_transition)
        events: list[Any] = [e for s in steps for e in s.events] if history else []
        transitions: list[TransitionRecord] = []
        if not machine.entries:  # a fork at step 0 that keeps the start: start it now
            step = machine.feed(Start(timestamp=now_ms()))
            events += step.events
            transitions += step.transitions
            effects = list(step.effects)
        else:
            effects = pending_effects(machine)
        first = Step(events, effects, machine.state != "streaming", machine.finished, transitions)
        fn = _stream_fn(stream_fn, machine.config.model)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await journal.close(len(plan.entries), [], None)
        raise
    remove: Callable[[], None] = lambda: None  # noqa: E731
    if abort_journaled(plan.entries):  # the parent had been aborted by then: so is the fork
        controller = AbortController()
        if signal is not None:
            outer = signal
            remove = outer.add_callback(lambda: controller.abort(outer.reason))
        controller.abort()
        signal = controller.signal
    try:
        # a scope of its own (an Agent's bound one aside), so that a nested call the fork
        # makes live is journaled under the fork's run id (docs/multi-agent.md)
        with own_scope():
            messages = await run_machine(
                machine,
                first=first,
                journal=journal,
                stream_fn=fn,
                emit=emit,
                signal=signal,
                observers=select_observers(instrument, observers),
                run_id=new_id,
                resumed=True,
                on_transition=on_transition,
            )
    finally:
        remove()
    return ForkResult(new_id, parent.run_id, at, messages, store)


def fork_run_sync(
    source: ForkSource, at: int, edit: Edit | None = None, *, backend: str = "trio", **kwargs: Any
) -> ForkResult:
    """:func:`fork_run` from synchronous code, on ``backend`` ("trio" or "asyncio")."""

    async def go() -> ForkResult:
        return await fork_run(source, at, edit, **kwargs)

    return anyio.run(go, backend=backend)
