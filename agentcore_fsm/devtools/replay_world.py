"""The recorded world of a replay (see :mod:`agentcore_fsm.devtools.replay`): what the model, the
tools, the polls, the hooks and the approvers did in a recorded run, derived from the recording
as a :class:`ReplayScript` that :func:`~agentcore_fsm.devtools.replay.replay_run` plays again.

The recording is read through :func:`~agentcore_fsm.persist.recording.load_run`, which validates
every line and derives the transitions (and, without event lines, the events) of a run whose
record (header and inputs) the recording holds; the world itself is taken from the events,
which hold what a record leaves out (the model's deltas, the tools' progress updates).
"""

from __future__ import annotations

import copy
import itertools
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agentcore_fsm.core.declaration import TransitionSpec, load_declaration
from agentcore_fsm.core.events import StreamStart
from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.core.messages import LLM_ROLES, AssistantMessage, Model, TextContent
from agentcore_fsm.core.tools import AgentToolResult, ToolExecutionMode
from agentcore_fsm.persist.recording import RecordedRun, load_run

__all__ = [
    "COMPONENT_STATES",
    "FINAL_ERRORS",
    "LOOP",
    "UNSET",
    "ModelCall",
    "Outcome",
    "ReplayError",
    "ReplayScript",
    "ReplayedFailure",
    "RunScript",
    "ToolCallScript",
    "ToolSpec",
    "replay_script",
]

LOOP = "agent_loop"
# the states whose failure the replay reproduces by having the component there raise; any other
# failure (a listener that raised) is raised from the replay's emit
COMPONENT_STATES = frozenset(
    {
        "streaming",
        "awaiting_steering",
        "awaiting_steering_again",
        "awaiting_follow_up",
        "preparing_next_turn",
        "deciding_stop",
    }
)
STEERING_STATES = ("awaiting_steering", "awaiting_steering_again")
FINAL_ERRORS = ("error", "aborted")
UNSET: Any = object()


class ReplayError(ValueError):
    """A recording that cannot be replayed (it holds no transitions, is not a loop run, ...)."""


class ReplayedFailure(Exception):
    """What the replay raises to reproduce a recorded failure: its text is the recorded text
    (the loop turns it into the same failure message, or the same rejected tool call)."""


# --- the script ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """What a poll or a turn hook gave back in the recorded run: ``value`` (the messages a
    poll returned, a stop decision), or ``error`` (the text of the failure it is replayed as);
    ``abort``: the signal had fired by the time it returned."""

    value: Any = None
    error: str | None = None
    abort: bool = False


@dataclass
class ModelCall:
    """One model call: the stream events to play, then how the call ends."""

    events: list[Any]
    end: Literal["done", "raise", "wait"]
    message: AssistantMessage | None = None  # the message_end of the call's assistant message
    error: str | None = None  # "raise": the failure text
    abort: bool = False  # "raise": the signal fired too


@dataclass
class ToolCallScript:
    """One tool call (the n-th ``tool_execution_start`` of its id) and what it did."""

    tool_call_id: str
    name: str
    start: int  # index of its tool_execution_start
    args: Any
    prepared: Any = UNSET  # the arguments it ran with, when an update shows them
    updates: list[tuple[int, AgentToolResult]] = field(default_factory=list)
    end: int | None = None  # index of its tool_execution_end; None: never finished by itself
    result: AgentToolResult | None = None
    is_error: bool = False
    rejected: str | None = None  # the text of a call rejected before it ran
    asked: bool = False  # an approval_requested was recorded for it
    approval: str | None = None  # the reason of that request
    decision: Any = None  # the approval_decided event, when the approver (not an abort) decided
    decided_at: int | None = None  # index of that approval_decided


@dataclass
class ToolSpec:
    name: str
    prepare: bool
    mode: ToolExecutionMode | None


@dataclass
class RunScript:
    """One run of a recording (a recording holds one run per ``start`` transition), as the
    replay runs it again.

    ``prompts``: the messages of its start. ``model``: the model of its assistant messages (it
    names the failure messages the loop makes itself). ``tool_execution``: the mode its tool
    batches show. ``steering``/``follow_up``: one :class:`Outcome` per poll (the ``value`` is
    the list of messages it injected), None when the poll was not configured.
    ``prepare_next_turn``/``should_stop_after_turn``: one outcome per call of that hook (for
    the latter the ``value`` is the decision), None when it was not configured.
    ``end_reason``: its ``agent_end`` reason, None when the recording stops mid-run."""

    prompts: list[Any]
    model: Model
    tool_execution: ToolExecutionMode
    end_reason: str | None
    steering: list[Outcome] | None = None
    follow_up: list[Outcome] | None = None
    prepare_next_turn: list[Outcome] | None = None
    should_stop_after_turn: list[Outcome] | None = None
    abort_at: tuple[int, int] | None = None
    """(events, transitions): the signal fires once this many of each have been produced."""
    fail_at: tuple[int, str, bool] | None = None
    """(events, text, abort): ``emit`` raises ``text`` once this many events have been
    produced (abort: the signal fires first)."""


@dataclass
class ReplayScript:
    """What :func:`replay_script` derives from a recording: the recorded ``events`` and
    ``transitions`` (of ``agent_loop``) that a replay must produce again, its ``runs``, and
    ``notes`` on what the recording leaves out. :attr:`responses` is the model's part as a
    script for :class:`~agentcore_fsm.integrations.providers.faux.FauxProvider`; :attr:`tool_names`
    the
    tools that were called. Replay it with :func:`replay_run` (it can be replayed any number of
    times)."""

    events: list[Any]
    transitions: list[TransitionRecord]
    runs: list[RunScript]
    notes: list[str] = field(default_factory=list)
    model_calls: list[ModelCall] = field(default_factory=list, repr=False)
    """Every model call, in order, as the replay plays it."""
    tool_calls: dict[tuple[str, int], ToolCallScript] = field(default_factory=dict, repr=False)
    """Every tool call by (id, how many earlier calls had that id)."""
    tool_specs: list[ToolSpec] = field(default_factory=list, repr=False)
    """The tools the replay stands in for, in order of first use."""
    order: list[tuple[str, int]] = field(default_factory=list, repr=False)
    """Every recorded record in order: ("event", i) or ("transition", i)."""

    @property
    def complete(self) -> bool:
        """The recording holds its last run's ``agent_end`` (it did not stop mid-run)."""
        return bool(self.runs) and self.runs[-1].end_reason is not None

    @property
    def prompts(self) -> list[Any]:
        """The prompts of the first run."""
        return self.runs[0].prompts if self.runs else []

    @property
    def responses(self) -> list[AssistantMessage]:
        """The final assistant message of every model call, in order (those of calls that
        failed or were aborted included): a script for ``FauxProvider``, which streams them in
        its own chunks (the exact replay plays the recorded stream events instead)."""
        return [copy.deepcopy(c.message) for c in self.model_calls if c.message is not None]

    @property
    def tool_names(self) -> list[str]:
        """The name of every tool the recording calls, in order of first use."""
        return [spec.name for spec in self.tool_specs]


def replay_script(source: RecordedRun | ReplayScript | str | os.PathLike[str]) -> ReplayScript:
    """The :class:`ReplayScript` of a recording (a path to a JSONL file, a
    :class:`~agentcore_fsm.persist.recorder.RecordedRun`, or a script, returned as it is).

    Raises :class:`ReplayError` (a ``ValueError``) when the recording cannot be replayed,
    :class:`~agentcore_fsm.persist.recorder.RunFileError` when the file is not a recording and
    ``OSError`` when it cannot be read."""
    if isinstance(source, ReplayScript):
        return source
    run = source if isinstance(source, RecordedRun) else load_run(source)
    return _Builder(run).build()


def _role(message: Any) -> Any:
    role = getattr(message, "role", None)
    if role is None and isinstance(message, dict):
        role = message.get("role")
    return role


def _assistant_end(event: Any) -> AssistantMessage | None:
    if event.type == "message_end" and isinstance(event.message, AssistantMessage):
        return event.message
    return None


def _text_of(result: AgentToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def _error_shaped(result: AgentToolResult) -> bool:
    """The result the loop makes for a rejected call: one text block and nothing else."""
    content = result.content
    return (
        len(content) == 1
        and isinstance(content[0], TextContent)
        and content[0].text_signature is None
        and result.details is None
        and result.usage is None
        and not result.added_tool_names
        and result.terminate is None
        and result.is_error is True
    )


class _Builder:
    """Derives a :class:`ReplayScript` from a :class:`RecordedRun` (see the module docstring)."""

    def __init__(self, run: RecordedRun) -> None:
        if LOOP not in run.machines and run.machine != LOOP:
            raise ReplayError(
                f"the recording is of the machine {run.machine!r}; a replay re-runs the agent "
                f"loop and needs its ({LOOP}) transitions"
            )
        self.events: list[Any] = list(run.events)
        self.transitions: list[TransitionRecord] = list(run.machines.get(LOOP, []))
        if not self.events:
            raise ReplayError(
                "the recording holds no events (a RunRecorder that writes a file keeps none in "
                "memory: replay the file)"
            )
        if not self.transitions:
            raise ReplayError(
                f"the recording holds no transitions of {LOOP}: record them too "
                f"(on_transition=recorder.on_transition)"
            )
        self.order: list[tuple[str, int]] = []
        self.e_before: list[int] = []  # per transition: how many events were recorded before it
        self.t_before: list[int] = []  # per event: how many transitions were recorded before it
        for who, i in run.order:
            if who is None:
                if i != len(self.t_before):
                    raise ReplayError("the recording's record order is inconsistent")
                self.t_before.append(len(self.e_before))
                self.order.append(("event", i))
            elif who == LOOP:
                if i != len(self.e_before):
                    raise ReplayError("the recording's record order is inconsistent")
                self.e_before.append(len(self.t_before))
                self.order.append(("transition", i))
        if len(self.t_before) != len(self.events) or len(self.e_before) != len(self.transitions):
            raise ReplayError("the recording does not say in which order its records came")
        self.notes: list[str] = []
        self.declaration = load_declaration(LOOP)
        self.records = list(run.records)

    # --- helpers over one run (transitions t0..t1, events e0..e1) ----------------------------

    def _window(self, j: int, t1: int, e1: int) -> list[Any]:
        """The events delivered after transition ``j`` (and those taken with it) up to the
        next transition that came after an event."""
        start = self.e_before[j]
        for k in range(j + 1, t1):
            if self.e_before[k] > start:
                return self.events[start : self.e_before[k]]
        return self.events[start:e1]

    def _first_assistant_end(self, start: int, stop: int) -> AssistantMessage | None:
        for event in self.events[start:stop]:
            message = _assistant_end(event)
            if message is not None:
                return message
        return None

    def _failure_text(self, j: int, e1: int) -> str:
        message = self._first_assistant_end(self.e_before[j], e1)
        if message is not None and message.error_message:
            return message.error_message
        return "replayed failure"

    def _injecting(self, j: int, t1: int) -> int:
        """The transition that injected the messages of the poll taken at transition ``j``:
        that one, or, when ``prepare_next_turn`` ran before the turn they joined, the one that
        left ``preparing_next_turn``."""
        if self.transitions[j].dest != "preparing_next_turn":
            return j
        for k in range(j + 1, t1):
            if self.transitions[k].source == "preparing_next_turn":
                return k
        return j

    def _spec(self, j: int) -> TransitionSpec | None:
        """The declared transition that transition ``j`` took."""
        index = self.transitions[j].index
        declared = self.declaration.transitions
        return declared[index] if 0 <= index < len(declared) else None

    def _guards(self, j: int) -> tuple[str, ...]:
        spec = self._spec(j)
        return spec.guards if spec is not None else ()

    @staticmethod
    def _injected(window: list[Any], aborted: bool) -> list[Any]:
        """The messages a poll injected: the message pairs of its step, before ``turn_end``
        (an aborted poll's step also closes the turn: its last message is the loop's own)."""
        messages: list[Any] = []
        closed = False
        for event in window:
            if event.type == "turn_end":
                closed = True
                break
            if event.type == "message_end":
                messages.append(event.message)
        if aborted and closed and messages:
            messages.pop()
        return messages

    # --- building ------------------------------------------------------------------------

    def build(self) -> ReplayScript:
        transitions = self.transitions
        starts = [j for j, t in enumerate(transitions) if t.trigger == "start"]
        if not starts or starts[0] != 0:
            raise ReplayError(
                "the recording does not begin with the start of a run (its first transition "
                "is not 'start')"
            )
        calls: list[ModelCall] = []
        runs: list[RunScript] = []
        bounds: list[tuple[int, int, int]] = []  # per run: e0, e1, where its end was decided
        for r, t0 in enumerate(starts):
            last = r + 1 == len(starts)
            t1 = len(transitions) if last else starts[r + 1]
            e0 = 0 if r == 0 else self.e_before[t0]
            e1 = len(self.events) if last else self.e_before[t1]
            script, run_calls, decided = self._run(t0, t1, e0, e1)
            self._configured(script, r, len(starts))
            runs.append(script)
            calls.extend(run_calls)
            bounds.append((e0, e1, decided))
        tool_calls = self._tool_calls(bounds)
        mode, specs = self._tool_specs(tool_calls, bounds)
        headers = self._headers(len(starts))
        for number, (script, header) in enumerate(zip(runs, headers, strict=True), 1):
            if header and "output" in header:  # docs/output.md#the-record-of-such-a-run
                raise ReplayError(
                    f"run {number} has an output type (structured output): its validations are "
                    f"recorded, but replaying such a run is not supported yet (derive it "
                    f"instead: agentcore_fsm.persist.journal.derive_run)"
                )
            recorded = header.get("tool_execution") if header else None
            script.tool_execution = recorded if recorded in ("parallel", "sequential") else mode
        if not any(e.type == "message_update" for e in self.events) and any(
            c.message is not None and c.message.content for c in calls
        ):
            self.notes.append(
                "the recording holds no message_update events (recorded with updates=False): "
                "the model's answers are replayed without their deltas"
            )
        if runs[-1].end_reason is None:
            self.notes.append(
                "the recording stops mid-run (no agent_end): the replay is compared with it up "
                "to its last record, then aborted"
            )
        return ReplayScript(
            events=self.events,
            transitions=transitions,
            runs=runs,
            notes=self.notes,
            model_calls=calls,
            tool_calls=tool_calls,
            tool_specs=specs,
            order=self.order,
        )

    def _headers(self, runs: int) -> list[dict[str, Any] | None]:
        """The header of each run, when the recording holds the runs' records (one per run)."""
        records = self.records
        if len(records) != runs:
            return [None] * runs
        return [r.header for r in records]

    def _configured(self, script: RunScript, r: int, runs: int) -> None:
        """What the run's header says was configured, for the polls and turn hooks the
        recording does not reach (it stops before): the replay configures them too, so that the
        loop waits for them where the recorded one did."""
        header = self._headers(runs)[r]
        hooks = header.get("hooks") if header else None
        if not isinstance(hooks, list):
            return
        for hook, name in (
            ("get_steering_messages", "steering"),
            ("get_follow_up_messages", "follow_up"),
            ("prepare_next_turn", "prepare_next_turn"),
            ("should_stop_after_turn", "should_stop_after_turn"),
        ):
            if hook in hooks and getattr(script, name) is None:
                setattr(script, name, [])

    def _run(self, t0: int, t1: int, e0: int, e1: int) -> tuple[RunScript, list[ModelCall], int]:
        transitions = self.transitions
        end_reason: str | None = None
        for event in reversed(self.events[e0:e1]):
            if event.type == "agent_end":
                end_reason = str(event.reason)
                break
        model = Model(id="replay")
        for event in self.events[e0:e1]:
            message = getattr(event, "message", None)
            if event.type in ("message_start", "message_end") and isinstance(
                message, AssistantMessage
            ):
                model = Model(id=message.model, api=message.api, provider=message.provider)
                break
        prompts = [
            _replayable(e.message, self.notes)
            for e in self._window(t0, t1, e1)
            if e.type == "message_end"
        ]
        script = RunScript(
            prompts=prompts, model=model, tool_execution="parallel", end_reason=end_reason
        )
        calls: list[ModelCall] = []
        steering: list[Outcome] = []
        follow_up: list[Outcome] = []
        prepare: list[Outcome] = []
        stop: list[Outcome] = []
        polls_steering = polls_follow_up = has_prepare = has_stop = False
        decided = e1  # where the run's end was decided (its abort or failure)
        for j in range(t0, t1):
            t = transitions[j]
            if t.source in STEERING_STATES and t.trigger != "skip_steering_poll":
                polls_steering = True
            if t.source == "awaiting_follow_up" and t.trigger != "skip_follow_up_poll":
                polls_follow_up = True
            has_prepare = has_prepare or t.dest == "preparing_next_turn"
            has_stop = has_stop or t.dest == "deciding_stop"
            if t.dest == "streaming":
                calls.append(self._model_call(j, t1, e1))
            if t.trigger in ("abort", "fail") and decided == e1:
                decided = self.e_before[j]
            if t.trigger == "abort" and script.abort_at is None:
                script.abort_at = (self.e_before[j], j)
            if t.trigger == "fail":
                text = self._failure_text(j, e1)
                after_abort = "failed_after_abort" in self._guards(j)
                failure = Outcome(error=text, abort=after_abort)
                if t.source in STEERING_STATES:
                    steering.append(failure)
                elif t.source == "awaiting_follow_up":
                    follow_up.append(failure)
                elif t.source == "preparing_next_turn":
                    prepare.append(failure)
                elif t.source == "deciding_stop":
                    stop.append(failure)
                elif t.source not in COMPONENT_STATES and script.fail_at is None:
                    script.fail_at = (self.e_before[j], text, after_abort)
            elif t.trigger in ("steering_polled", "follow_up_polled"):
                aborted = "poll_aborted" in self._guards(j)
                k = self._injecting(j, t1)
                spec = self._spec(k)
                closed = aborted or self.transitions[k].trigger in ("abort", "fail")
                injected = (
                    [
                        _replayable(m, self.notes)
                        for m in self._injected(self._window(k, t1, e1), closed)
                    ]
                    if spec is not None and "injected_messages" in spec.emits
                    else []
                )
                outcomes = steering if t.trigger == "steering_polled" else follow_up
                outcomes.append(Outcome(value=injected, abort=aborted))
            elif t.trigger == "next_turn_prepared":
                prepare.append(Outcome())
            elif t.trigger == "stop_decided":
                stop.append(Outcome(value=t.dest == "stopped"))
        script.steering = steering if polls_steering else None
        script.follow_up = follow_up if polls_follow_up else None
        script.prepare_next_turn = prepare if has_prepare else None
        script.should_stop_after_turn = stop if has_stop else None
        return script, calls, decided

    def _model_call(self, j: int, t1: int, e1: int) -> ModelCall:
        """The model call made on entering ``streaming`` at transition ``j``."""
        k = j + 1 if j + 1 < t1 else None
        stop = self.e_before[k] if k is not None else e1
        segment = self.events[self.e_before[j] : stop]
        # the stream's events are the trailing message_start(assistant) and message_updates
        i = len(segment)
        while i > 0 and segment[i - 1].type == "message_update":
            i -= 1
        if (
            i > 0
            and segment[i - 1].type == "message_start"
            and isinstance(segment[i - 1].message, AssistantMessage)
        ):
            i -= 1
        played: list[Any] = []
        for event in segment[i:]:
            if event.type == "message_start":
                played.append(StreamStart(partial=event.message))
            else:
                played.append(event.assistant_message_event)
        if k is None:
            return ModelCall(played, "wait")
        message = self._first_assistant_end(self.e_before[k], e1)
        trigger = self.transitions[k].trigger
        if trigger == "model_finished" and message is not None:
            return ModelCall(played, "done", message)
        if trigger == "fail":
            return ModelCall(
                played,
                "raise",
                message,
                self._failure_text(k, e1),
                abort="failed_after_abort" in self._guards(k),
            )
        return ModelCall(played, "wait", message)

    def _tool_calls(
        self, bounds: list[tuple[int, int, int]]
    ) -> dict[tuple[str, int], ToolCallScript]:
        calls: dict[tuple[str, int], ToolCallScript] = {}
        seen: dict[str, int] = {}
        current: dict[str, tuple[str, int]] = {}
        for i, event in enumerate(self.events):
            kind = event.type
            if kind == "tool_execution_start":
                n = seen.get(event.tool_call_id, 0)
                seen[event.tool_call_id] = n + 1
                key = (event.tool_call_id, n)
                current[event.tool_call_id] = key
                calls[key] = ToolCallScript(event.tool_call_id, event.tool_name, i, event.args)
            elif kind in (
                "tool_execution_update",
                "tool_execution_end",
                "approval_requested",
                "approval_decided",
            ):
                found = current.get(event.tool_call_id)
                if found is None:
                    continue
                call = calls[found]
                if kind == "approval_requested":
                    call.asked, call.approval = True, event.reason
                    if call.prepared is UNSET:
                        call.prepared = event.args  # as validated: what the approver saw
                elif kind == "approval_decided":
                    if call.decided_at is None:
                        call.decision, call.decided_at = event, i
                elif kind == "tool_execution_update":
                    call.updates.append((i, event.partial_result))
                    if call.prepared is UNSET:
                        call.prepared = event.args
                elif call.end is None:
                    call.end, call.result, call.is_error = i, event.result, bool(event.is_error)
        for call in calls.values():
            decided = next((d for e0, e1, d in bounds if e0 <= call.start < e1), len(self.events))
            if call.decided_at is not None and call.decided_at >= decided:
                call.decision = call.decided_at = None  # answered by the abort: never decided
            if call.end is not None and call.end >= decided:
                call.end = None  # answered by the abort or the failure: it never finished
                continue
            if (
                call.decided_at is not None
                and call.decision.approved
                and call.decision.args is not None
                and call.end == call.decided_at + 1
                and call.result is not None
                and _error_shaped(call.result)
                and _text_of(call.result).startswith("Validation failed for tool")
            ):
                note = (
                    "an approver's changed arguments were rejected by validation: the stub "
                    "tools accept any arguments, so the replay runs that call instead"
                )
                if note not in self.notes:
                    self.notes.append(note)
            if (
                call.end == call.start + 1
                and call.result is not None
                and call.is_error
                and _error_shaped(call.result)
                and not any(
                    self.transitions[j].source == "executing"
                    for j in range(self.t_before[call.start], self.t_before[call.end])
                )
            ):
                first = call.result.content[0]
                assert isinstance(first, TextContent)
                call.rejected = first.text
        return calls

    def _tool_specs(
        self, calls: dict[tuple[str, int], ToolCallScript], bounds: list[tuple[int, int, int]]
    ) -> tuple[ToolExecutionMode, list[ToolSpec]]:
        names: list[str] = []
        prepare: set[str] = set()
        for call in calls.values():
            if call.name not in names:
                names.append(call.name)
            if call.rejected is not None or (
                call.prepared is not UNSET and call.prepared != call.args
            ):
                prepare.add(call.name)
        sequential: list[list[str]] = []
        parallel: list[list[str]] = []
        for e0, e1, _ in bounds:
            for kind, batch in self._batches(e0, e1):
                (sequential if kind == "sequential" else parallel).append(batch)
        mode: ToolExecutionMode = "sequential" if sequential and not parallel else "parallel"
        one_by_one: set[str] = set()
        if mode == "parallel" and sequential:
            in_parallel = {name for batch in parallel for name in batch}
            one_by_one = {n for batch in sequential for n in batch if n not in in_parallel}
            if any(not set(batch) & one_by_one for batch in sequential):
                self.notes.append(
                    "some tool batches ran one call at a time and others in parallel with the "
                    "same tools: the replay cannot tell which tool was sequential"
                )
        described = self._described_tools()
        for name, spec in described.items():
            if spec.get("prepare") is True:
                prepare.add(name)
            if spec.get("mode") == "sequential":
                one_by_one.add(name)
        specs = [
            ToolSpec(n, n in prepare, "sequential" if n in one_by_one else None) for n in names
        ]
        return mode, specs

    def _described_tools(self) -> dict[str, dict[str, Any]]:
        """What the runs' headers say of their tools (whether they prepare their arguments,
        their execution mode), when the recording holds the runs' records."""
        out: dict[str, dict[str, Any]] = {}
        for record in self.records:
            context = record.header.get("context")
            specs = context.get("tool_specs") if isinstance(context, dict) else None
            for spec in specs if isinstance(specs, list) else ():
                if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                    out.setdefault(spec["name"], spec)
        return out

    def _batches(self, e0: int, e1: int) -> list[tuple[str, list[str]]]:
        """The tool batches of a run with two calls or more that started: ("sequential" or
        "parallel", the names of their calls)."""
        found: list[tuple[str, list[str]]] = []
        ids: list[str] = []
        names: list[str] = []
        started: dict[str, int] = {}
        answered: dict[str, int] = {}

        def close() -> None:
            if len(started) < 2:
                return
            for a, b in itertools.pairwise(ids):
                if a in answered and b in started and started[b] > answered[a]:
                    found.append(("sequential", list(names)))
                    return
            if not answered or max(started.values()) < min(answered.values()):
                found.append(("parallel", list(names)))

        for i in range(e0, e1):
            event = self.events[i]
            message = _assistant_end(event)
            if message is not None:
                close()
                calls = message.tool_calls()
                ok = calls and message.stop_reason not in (*FINAL_ERRORS, "length")
                ids = [c.id for c in calls] if ok else []
                names = [c.name for c in calls] if ok else []
                started, answered = {}, {}
            elif event.type == "tool_execution_start" and event.tool_call_id in ids:
                started.setdefault(event.tool_call_id, i)
            elif event.type == "message_end" and _role(event.message) == "toolResult":
                call_id = getattr(event.message, "tool_call_id", None)
                if call_id in ids:
                    answered.setdefault(call_id, i)
            elif event.type == "turn_end":
                close()
                ids, names, started, answered = [], [], {}, {}
        close()
        return found


class _CustomMessage(BaseModel):
    """A custom message read back from a recording (a dict with a role the model does not
    know), given back to the loop as an object with a ``role`` attribute that dumps to the same
    dict."""

    model_config = ConfigDict(extra="allow")
    role: str


def _replayable(message: Any, notes: list[str]) -> Any:
    if isinstance(message, dict):
        role = message.get("role")
        if isinstance(role, str) and role and role not in LLM_ROLES:
            return _CustomMessage.model_validate(message)
    elif isinstance(message, str):
        note = (
            "a custom message was recorded as its repr (it was not JSON data): it cannot be "
            "injected again"
        )
        if note not in notes:
            notes.append(note)
    return message
