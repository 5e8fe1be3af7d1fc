"""Exact replay of a recorded run: a JSONL recording becomes a regression test in one call.

A recording written by :class:`~agentcore_fsm.persist.recorder.RunRecorder` (events *and*
transitions)
holds everything the world outside the loop did during the run: what the model streamed, what
each tool returned, what the polls and hooks answered, when the signal fired and where something
raised. :func:`replay_script` turns it into a script that plays the world's part again, offline:

* the prompts: the messages of the run's start (see docs/reference.md#control-flow-of-a-run);
* the model: each model call streams the recorded stream events again (the ``start`` event and
  every ``message_update``'s stream event, partial messages included, so that the same deltas
  come out), then ends as it ended: its recorded final message (``done``, or ``error`` for a
  message that stopped with "error" or "aborted"), a raise with the recorded error text (a
  failure of the model call), or nothing (an abort ends it);
* the tools: one stub :class:`~agentcore_fsm.core.tools.AgentTool` per tool name seen, accepting any
  arguments, whose ``execute`` replays the call's recorded ``tool_execution_update`` events
  through ``on_update`` and returns its recorded result (content, details, ``is_error``,
  ``terminate``...); a call rejected before it ran (unknown tool, invalid arguments, blocked,
  ``prepare_arguments`` raised) is rejected again with the recorded text, through the stub's
  ``prepare_arguments``; a call that was still running when the run was aborted never returns;
* the approvals: a call that waited for approval (``approval_requested``) asks for it again,
  with the recorded reason, and ``decide_approval`` gives the recorded decision (approved or
  not, reason, who decided, the arguments the approver changed) once the events recorded
  before its ``approval_decided`` have been produced again; a denial for want of an approver,
  by a timeout or by an error is given as recorded, and a call the abort answered waits until
  the abort replays;
* the polls and hooks that were configured (the transitions say which): the steering and
  follow-up polls return the recorded injected messages at the same points,
  ``prepare_next_turn`` returns nothing, ``should_stop_after_turn`` the recorded decision, and
  each raises the recorded error text where the run failed there;
* aborts and the other failures: the signal fires once the replay has produced what the
  recording holds before the ``abort`` transition (a poll that returned after the signal fired
  fires it itself); a failure that no component above accounts for (a listener that raised) is
  raised from the replay's own ``emit`` at the same point.

The tools run concurrently as they did: each update and each result is handed to the loop only
once the events recorded before it have been produced again, so that parallel tools interleave
exactly as recorded.

:func:`replay_run` (async) runs the script through
:func:`~agentcore_fsm.runtime.driver.run_agent_loop`
and compares, as they come, every event (their JSON form, ``timestamp`` fields left out) and
every transition (index, trigger, source, dest) with the recording. The first mismatch is a
:class:`Divergence`: where, what was expected, what came, the first differing field and the
records just before it; the replay is then aborted. A replay that stops producing anything
while the recording expects more (for ``stall_timeout`` seconds) diverges there too.
:func:`assert_replays` is the regression test in one call; :func:`replay_run_sync` the same from
synchronous code; ``agentcore-fsm replay RUN.jsonl`` the same from a terminal (:func:`main`).
``replay_run(..., decide_approval=policy)`` replays the approvals with another approver instead
of the recorded decisions: the first decision that differs from the recorded one diverges at its
``approval_decided`` event, or at the transition it caused when it sends the loop another way
at once (recorded just before the event): a policy checked against what people decided.

What a recording does not hold cannot be replayed: the system prompt and the earlier context
(the model is not asked anything, so they do not matter to the events), the tools' parameters,
``before_tool_call``/``after_tool_call`` (their effect is in the recorded results), and what
``prepare_next_turn`` changed. See docs/replay.md for the full list of what is reproduced and
what is not.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import itertools
import json
import math
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, cast

import anyio
from pydantic import BaseModel, ConfigDict
from pydantic_core import to_jsonable_python

from agentcore_fsm.core.abort import AbortController
from agentcore_fsm.core.approval import ApprovalDecision
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, LlmContext, StreamOptions
from agentcore_fsm.core.declaration import TransitionSpec, load_declaration
from agentcore_fsm.core.events import StreamDone, StreamError, StreamStart
from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.core.messages import LLM_ROLES, AssistantMessage, Model, TextContent, clip
from agentcore_fsm.core.tools import (
    AgentTool,
    AgentToolResult,
    BeforeToolCallResult,
    ToolExecutionMode,
)
from agentcore_fsm.persist.recorder import RecordedRun, RunFileError, describe_event, load_run
from agentcore_fsm.runtime.driver import run_agent_loop

__all__ = [
    "DEFAULT_STALL_TIMEOUT",
    "Divergence",
    "Outcome",
    "ReplayError",
    "ReplayResult",
    "ReplayScript",
    "ReplayedFailure",
    "RunScript",
    "assert_replays",
    "main",
    "replay_run",
    "replay_run_sync",
    "replay_script",
]

LOOP = "agent_loop"
DEFAULT_STALL_TIMEOUT = 2.0
"""Seconds without a new event or transition after which a replay that still expects some is
reported as stalled (a replay performs no I/O and never sleeps: it only stalls when the
recording and the loop disagree)."""
CONTEXT_LINES = 4
"""How many records before a divergence its report shows."""
Approver = Callable[[Any, Any], Any]
"""A ``decide_approval(request, signal)`` (see
:class:`~agentcore_fsm.core.config.AgentLoopConfig`)."""

# the states whose failure the replay reproduces by having the component there raise; any other
# failure (a listener that raised) is raised from the replay's emit
_COMPONENT_STATES = frozenset(
    {"streaming", "awaiting_steering", "awaiting_follow_up", "preparing_next_turn", "deciding_stop"}
)
_FINAL_ERRORS = ("error", "aborted")
_UNSET: Any = object()


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
class _ModelCall:
    """One model call: the stream events to play, then how the call ends."""

    events: list[Any]
    end: Literal["done", "raise", "wait"]
    message: AssistantMessage | None = None  # the message_end of the call's assistant message
    error: str | None = None  # "raise": the failure text
    abort: bool = False  # "raise": the signal fired too


@dataclass
class _ToolCall:
    """One tool call (the n-th ``tool_execution_start`` of its id) and what it did."""

    tool_call_id: str
    name: str
    start: int  # index of its tool_execution_start
    args: Any
    prepared: Any = _UNSET  # the arguments it ran with, when an update shows them
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
class _ToolSpec:
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
    _calls: list[_ModelCall] = field(default_factory=list, repr=False)
    _tool_calls: dict[tuple[str, int], _ToolCall] = field(default_factory=dict, repr=False)
    _tools: list[_ToolSpec] = field(default_factory=list, repr=False)
    _order: list[tuple[str, int]] = field(default_factory=list, repr=False)

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
        return [copy.deepcopy(c.message) for c in self._calls if c.message is not None]

    @property
    def tool_names(self) -> list[str]:
        """The name of every tool the recording calls, in order of first use."""
        return [spec.name for spec in self._tools]


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
        calls: list[_ModelCall] = []
        runs: list[RunScript] = []
        bounds: list[tuple[int, int, int]] = []  # per run: e0, e1, where its end was decided
        for r, t0 in enumerate(starts):
            last = r + 1 == len(starts)
            t1 = len(transitions) if last else starts[r + 1]
            e0 = 0 if r == 0 else self.e_before[t0]
            e1 = len(self.events) if last else self.e_before[t1]
            script, run_calls, decided = self._run(t0, t1, e0, e1)
            runs.append(script)
            calls.extend(run_calls)
            bounds.append((e0, e1, decided))
        tool_calls = self._tool_calls(bounds)
        mode, specs = self._tool_specs(tool_calls, bounds)
        for script in runs:
            script.tool_execution = mode
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
            _calls=calls,
            _tool_calls=tool_calls,
            _tools=specs,
            _order=self.order,
        )

    def _run(self, t0: int, t1: int, e0: int, e1: int) -> tuple[RunScript, list[_ModelCall], int]:
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
        calls: list[_ModelCall] = []
        steering: list[Outcome] = []
        follow_up: list[Outcome] = []
        prepare: list[Outcome] = []
        stop: list[Outcome] = []
        polls_steering = polls_follow_up = has_prepare = has_stop = False
        decided = e1  # where the run's end was decided (its abort or failure)
        for j in range(t0, t1):
            t = transitions[j]
            if t.source == "awaiting_steering" and t.trigger != "skip_steering_poll":
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
                if t.source == "awaiting_steering":
                    steering.append(failure)
                elif t.source == "awaiting_follow_up":
                    follow_up.append(failure)
                elif t.source == "preparing_next_turn":
                    prepare.append(failure)
                elif t.source == "deciding_stop":
                    stop.append(failure)
                elif t.source not in _COMPONENT_STATES and script.fail_at is None:
                    script.fail_at = (self.e_before[j], text, after_abort)
            elif t.trigger in ("steering_polled", "follow_up_polled"):
                aborted = "poll_aborted" in self._guards(j)
                spec = self._spec(j)
                injected = (
                    [
                        _replayable(m, self.notes)
                        for m in self._injected(self._window(j, t1, e1), aborted)
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

    def _model_call(self, j: int, t1: int, e1: int) -> _ModelCall:
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
            return _ModelCall(played, "wait")
        message = self._first_assistant_end(self.e_before[k], e1)
        trigger = self.transitions[k].trigger
        if trigger == "model_finished" and message is not None:
            return _ModelCall(played, "done", message)
        if trigger == "fail":
            return _ModelCall(
                played,
                "raise",
                message,
                self._failure_text(k, e1),
                abort="failed_after_abort" in self._guards(k),
            )
        return _ModelCall(played, "wait", message)

    def _tool_calls(self, bounds: list[tuple[int, int, int]]) -> dict[tuple[str, int], _ToolCall]:
        calls: dict[tuple[str, int], _ToolCall] = {}
        seen: dict[str, int] = {}
        current: dict[str, tuple[str, int]] = {}
        for i, event in enumerate(self.events):
            kind = event.type
            if kind == "tool_execution_start":
                n = seen.get(event.tool_call_id, 0)
                seen[event.tool_call_id] = n + 1
                key = (event.tool_call_id, n)
                current[event.tool_call_id] = key
                calls[key] = _ToolCall(event.tool_call_id, event.tool_name, i, event.args)
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
                    if call.prepared is _UNSET:
                        call.prepared = event.args  # as validated: what the approver saw
                elif kind == "approval_decided":
                    if call.decided_at is None:
                        call.decision, call.decided_at = event, i
                elif kind == "tool_execution_update":
                    call.updates.append((i, event.partial_result))
                    if call.prepared is _UNSET:
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
        self, calls: dict[tuple[str, int], _ToolCall], bounds: list[tuple[int, int, int]]
    ) -> tuple[ToolExecutionMode, list[_ToolSpec]]:
        names: list[str] = []
        prepare: set[str] = set()
        for call in calls.values():
            if call.name not in names:
                names.append(call.name)
            if call.rejected is not None or (
                call.prepared is not _UNSET and call.prepared != call.args
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
        specs = [
            _ToolSpec(n, n in prepare, "sequential" if n in one_by_one else None) for n in names
        ]
        return mode, specs

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
                ok = calls and message.stop_reason not in (*_FINAL_ERRORS, "length")
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


# --- comparing ------------------------------------------------------------------------------


def _plain(event: Any) -> Any:
    """An event as JSON data (what a recording holds), ``timestamp`` fields left out."""
    return _strip(to_jsonable_python(event.model_dump(mode="python", by_alias=True), fallback=repr))


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # what a recording writes
    return value


def _show(value: Any) -> str:
    text = clip(json.dumps(value, ensure_ascii=False, default=repr), 60)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _difference(want: Any, got: Any, path: str = "") -> str | None:
    """Where two JSON values first differ, as ``path: expected X, got Y``; None when equal."""
    where = path or "the whole value"
    if isinstance(want, dict) and isinstance(got, dict):
        for key in [*want, *(k for k in got if k not in want)]:
            sub = f"{path}.{key}" if path else str(key)
            if key not in got:
                return f"{sub}: expected {_show(want[key])}, got nothing"
            if key not in want:
                return f"{sub}: expected nothing, got {_show(got[key])}"
            found = _difference(want[key], got[key], sub)
            if found is not None:
                return found
        return None
    if isinstance(want, list) and isinstance(got, list):
        for i, (a, b) in enumerate(zip(want, got, strict=False)):
            found = _difference(a, b, f"{path}[{i}]")
            if found is not None:
                return found
        if len(want) != len(got):
            return f"{where}: expected {len(want)} items, got {len(got)}"
        return None
    if want == got:
        return None
    return f"{where}: expected {_show(want)}, got {_show(got)}"


def _transition_text(record: TransitionRecord) -> str:
    return f"{record.source} --{record.trigger}--> {record.dest}"


def _transition_key(record: TransitionRecord) -> tuple[int, str, str, str]:
    return (record.index, record.trigger, record.source, record.dest)


@dataclass(frozen=True)
class Divergence:
    """The first place where a replay and its recording differ.

    ``kind``: "event" or "transition"; ``index``: its position among the recording's events
    (or transitions), ``recorded``: how many of those the recording holds. ``expected``: the
    recorded one, described (``tool_execution_end(add)``, ``executing --tools_settled-->
    turn_end``), None when the recording holds no more; ``got``: what the replay produced
    there, None when it produced nothing (``detail`` says why). ``detail``: the first field that
    differs (``result.content[0].text: expected "3", got "4"``), or why nothing came.
    ``context``: the records just before it in the recording. ``str()`` is the report."""

    kind: Literal["event", "transition"]
    index: int
    expected: str | None
    got: str | None
    detail: str | None = None
    context: tuple[str, ...] = ()
    recorded: int = 0

    def __str__(self) -> str:
        lines = [
            f"replay diverged at {self.kind} #{self.index} (the recording has {self.recorded} "
            f"{self.kind}s):",
            f"  expected: {self.expected or 'nothing (the recording has no more)'}",
            f"  got:      {self.got or 'nothing'}",
        ]
        if self.detail:
            lines.append(f"  {self.detail}")
        if self.context:
            lines.append("recorded just before it:")
            lines += [f"  {line}" for line in self.context]
        return "\n".join(lines)


@dataclass
class ReplayResult:
    """What a replay produced: its ``events`` and ``transitions`` (all of them, also those
    after a divergence), the first ``divergence`` from the recording (None: identical), how many
    events and transitions the recording holds, and the script's ``notes``. ``str()`` is the
    one-line verdict or the divergence's report."""

    events: list[Any]
    transitions: list[TransitionRecord]
    divergence: Divergence | None
    recorded_events: int
    recorded_transitions: int
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """The replay produced the recorded events and transitions, and nothing else."""
        return self.divergence is None

    def summary(self) -> str:
        if self.divergence is not None:
            return str(self.divergence)
        return (
            f"replayed {self.recorded_events} events and {self.recorded_transitions} "
            f"transitions: identical"
        )

    def __str__(self) -> str:
        return self.summary()

    def check(self) -> ReplayResult:
        """Raise ``AssertionError`` with the divergence's report unless the replay was
        identical; return the result when it was."""
        if self.divergence is not None:
            raise AssertionError(self.summary())
        return self


# --- running ------------------------------------------------------------------------------


class _Replayer:
    """Plays a :class:`ReplayScript`'s outside world to the loop and compares what comes out."""

    def __init__(
        self,
        script: ReplayScript,
        stall_timeout: float,
        decide_approval: Approver | None = None,
    ) -> None:
        self.script = script
        self.stall_timeout = stall_timeout
        self.approver = decide_approval
        self.approvals = any(call.asked for call in script._tool_calls.values())
        self.expected = [_plain(e) for e in script.events]
        self.expected_transitions = [_transition_key(t) for t in script.transitions]
        self.position = {item: p for p, item in enumerate(script._order)}
        self.events: list[Any] = []
        self.transitions: list[TransitionRecord] = []
        self.divergence: Divergence | None = None
        self.stopped = False  # no more comparing: diverged, or the recording's end was reached
        self.controller: AbortController | None = None
        self.run: RunScript | None = None
        self.scope: anyio.CancelScope | None = None
        self.waiters: list[tuple[int, anyio.Event]] = []
        self.progress = time.monotonic()
        self.model_calls = 0
        self.counts: dict[str, int] = {}
        self.starts: dict[str, int] = {}
        self.last_started: tuple[str, int] | None = None
        self.abort_fired = False
        self.fail_fired = False
        self.tools = [
            AgentTool(
                name=spec.name,
                description=f"Replays the recorded results of {spec.name}.",
                parameters={},
                execute=self._execute,
                prepare_arguments=self._prepare if spec.prepare else None,
                execution_mode=spec.mode,
            )
            for spec in script._tools
        ]

    # --- the whole replay ----------------------------------------------------------------

    async def replay(self) -> ReplayResult:
        error: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch)
            try:
                for number, run in enumerate(self.script.runs, 1):
                    if self.stopped:
                        break
                    await self._run_one(number, run)
            except Exception as exc:  # kept out of the task group's exception group
                error = exc
            finally:
                tg.cancel_scope.cancel()
        if error is not None:
            raise error
        if not self.stopped:
            missing = self._missing()
            if missing is not None:
                self.divergence = self._describe(*missing, None, "the replay ended here")
        return ReplayResult(
            events=self.events,
            transitions=self.transitions,
            divergence=self.divergence,
            recorded_events=len(self.script.events),
            recorded_transitions=len(self.script.transitions),
            notes=list(self.script.notes),
        )

    async def _run_one(self, number: int, run: RunScript) -> None:
        self.run = run
        self.controller = AbortController()
        self.counts = {}
        self.abort_fired = self.fail_fired = False
        config = AgentLoopConfig(model=run.model.model_copy(), tool_execution=run.tool_execution)
        if run.steering is not None:
            config.get_steering_messages = partial(self._outcome, "steering", run.steering)
        if run.follow_up is not None:
            config.get_follow_up_messages = partial(self._outcome, "follow_up", run.follow_up)
        if run.prepare_next_turn is not None:
            config.prepare_next_turn = partial(self._hook, "prepare", run.prepare_next_turn)
        if run.should_stop_after_turn is not None:
            config.should_stop_after_turn = partial(self._hook, "stop", run.should_stop_after_turn)
        if self.approvals:
            # before_tool_call asks for approval with the recorded reason (it emits nothing
            # itself); decide_approval gives the recorded decisions
            config.before_tool_call = self._before
            config.decide_approval = self._decide
        prompts = copy.deepcopy(run.prompts)
        self.progress = time.monotonic()
        try:
            with anyio.CancelScope() as scope:
                self.scope = scope
                await run_agent_loop(
                    prompts,
                    AgentContext(tools=list(self.tools)),
                    config,
                    self._emit,
                    signal=self.controller.signal,
                    stream_fn=self._stream,
                    on_transition=self._on_transition,
                )
        except (TypeError, ValueError) as exc:
            raise ReplayError(f"run {number} of the recording cannot be replayed: {exc}") from exc
        finally:
            self.scope = None
            self.run = None

    async def _watch(self) -> None:
        """Report a stall (nothing produced while the recording expects more), then, if the
        aborted replay still does not end, cancel it."""
        tick = max(0.01, min(0.1, self.stall_timeout / 4))
        while True:
            await anyio.sleep(tick)
            if self.run is None or time.monotonic() - self.progress < self.stall_timeout:
                continue
            self.progress = time.monotonic()
            if not self.stopped:
                missing = self._missing()
                if missing is not None:
                    why = f"nothing came for {self.stall_timeout:g} s: the replay stalled"
                    self.divergence = self._describe(*missing, None, why)
                self.stopped = True
                self._abort()
            elif self.scope is not None:
                self.scope.cancel()

    def _missing(self) -> tuple[Literal["event", "transition"], int] | None:
        """The first recorded record the replay has not produced."""
        produced = {"event": len(self.events), "transition": len(self.transitions)}
        for kind, i in self.script._order:
            if i >= produced[kind]:
                return ("event" if kind == "event" else "transition", i)
        return None

    def _abort(self) -> None:
        controller = self.controller
        if controller is not None and not controller.signal.aborted:
            controller.abort("replay")

    # --- what the loop produces ----------------------------------------------------------

    def _emit(self, event: Any) -> None:
        index = len(self.events)
        self.events.append(event)
        self.progress = time.monotonic()
        if event.type == "tool_execution_start":
            n = self.starts.get(event.tool_call_id, 0)
            self.starts[event.tool_call_id] = n + 1
            self.last_started = (event.tool_call_id, n)
        if not self.stopped:
            expected = self.expected
            if index >= len(expected) or _plain(event) != expected[index]:
                self._diverge("event", index, event)
        self._wake()
        if self.stopped:
            return
        self._check_end()
        self._check_abort()
        run = self.run
        if run is not None and run.fail_at is not None and not self.fail_fired and not self.stopped:
            count, text, abort = run.fail_at
            if len(self.events) >= count:
                self.fail_fired = True
                if abort:
                    self._abort()
                raise ReplayedFailure(text)

    def _on_transition(self, record: Any) -> None:
        made = TransitionRecord(
            int(record.index), str(record.trigger), str(record.source), str(record.dest)
        )
        index = len(self.transitions)
        self.transitions.append(made)
        self.progress = time.monotonic()
        if self.stopped:
            return
        expected = self.expected_transitions
        if index >= len(expected) or _transition_key(made) != expected[index]:
            self._diverge("transition", index, made)
            return
        self._check_end()
        self._check_abort()

    def _check_end(self) -> None:
        """A recording that stops mid-run: once all of it was produced, stop the replay."""
        if (
            not self.script.complete
            and len(self.events) >= len(self.expected)
            and len(self.transitions) >= len(self.expected_transitions)
        ):
            self.stopped = True
            self._abort()

    def _check_abort(self) -> None:
        run = self.run
        if self.stopped or run is None or run.abort_at is None or self.abort_fired:
            return
        events, transitions = run.abort_at
        if len(self.events) >= events and len(self.transitions) >= transitions:
            self.abort_fired = True
            self._abort()

    def _diverge(self, kind: Literal["event", "transition"], index: int, got: Any) -> None:
        self.divergence = self._describe(kind, index, got, None)
        self.stopped = True
        self._abort()

    def _describe(
        self, kind: Literal["event", "transition"], index: int, got: Any, why: str | None
    ) -> Divergence:
        script = self.script
        if kind == "event":
            want: Any = script.events[index] if index < len(script.events) else None
            expected = describe_event(want) if want is not None else None
            shown = describe_event(got) if got is not None else None
            if want is not None and got is not None:
                why = _difference(self.expected[index], _plain(got))
            recorded = len(script.events)
        else:
            want = script.transitions[index] if index < len(script.transitions) else None
            expected = _transition_text(want) if want is not None else None
            shown = _transition_text(got) if got is not None else None
            if want is not None and got is not None and want.index != got.index:
                why = f"index: expected {want.index}, got {got.index}"
            recorded = len(script.transitions)
        at = self.position.get((kind, index), len(script._order))
        context = tuple(
            f"event #{i}: {describe_event(script.events[i])}"
            if what == "event"
            else f"transition #{i}: {_transition_text(script.transitions[i])}"
            for what, i in script._order[max(0, at - CONTEXT_LINES) : at]
        )
        return Divergence(kind, index, expected, shown, why, context, recorded)

    def _wake(self) -> None:
        count = len(self.events)
        if not any(index <= count for index, _ in self.waiters):
            return
        ready = [event for index, event in self.waiters if index <= count]
        self.waiters = [(index, event) for index, event in self.waiters if index > count]
        for event in ready:
            event.set()

    async def _until(self, count: int) -> None:
        """Wait until ``count`` events have been produced."""
        if len(self.events) >= count:
            return
        event = anyio.Event()
        self.waiters.append((count, event))
        await event.wait()

    # --- the outside world, played back --------------------------------------------------

    def _stream(self, model: Model, context: LlmContext, options: StreamOptions) -> Any:
        index = self.model_calls
        self.model_calls += 1
        calls = self.script._calls
        return self._play(calls[index] if index < len(calls) else None)

    async def _play(self, call: _ModelCall | None) -> AsyncIterator[Any]:
        if call is None:
            raise ReplayedFailure("replay: the recording holds no more model calls")
        for event in call.events:
            yield copy.deepcopy(event)
        if call.end == "done" and call.message is not None:
            message = copy.deepcopy(call.message)
            reason = message.stop_reason
            if reason in _FINAL_ERRORS:
                yield StreamError(reason=cast(Any, reason), error=message)
            else:
                yield StreamDone(reason=cast(Any, reason), message=message)
        elif call.end == "raise":
            if call.abort:
                self._abort()
            raise ReplayedFailure(call.error or "replayed failure")
        else:  # aborted (the signal fires at the recorded point) or the recording stops here
            await anyio.sleep_forever()

    def _outcome(self, name: str, outcomes: list[Outcome]) -> Any:
        index = self.counts.get(name, 0)
        self.counts[name] = index + 1
        if index >= len(outcomes):
            return None
        outcome = outcomes[index]
        if outcome.abort:
            self._abort()
        if outcome.error is not None:
            raise ReplayedFailure(outcome.error)
        return copy.deepcopy(outcome.value)

    def _hook(self, name: str, outcomes: list[Outcome], ctx: Any, signal: Any) -> Any:
        return self._outcome(name, outcomes)

    def _current_call(self, key: tuple[str, int] | None) -> _ToolCall | None:
        return self.script._tool_calls.get(key) if key is not None else None

    def _prepare(self, raw: dict[str, Any]) -> dict[str, Any]:
        # the call being prepared is the one whose tool_execution_start came last
        call = self._current_call(self.last_started)
        if call is None:
            return raw
        if call.rejected is not None:
            raise ReplayedFailure(call.rejected)
        if call.prepared is not _UNSET:
            prepared: dict[str, Any] = copy.deepcopy(call.prepared)
            return prepared
        return raw

    def _before(self, ctx: Any, signal: Any) -> BeforeToolCallResult | None:
        call_id = ctx.tool_call.id
        call = self._current_call((call_id, self.starts.get(call_id, 0) - 1))
        if call is None or not call.asked:
            return None
        return BeforeToolCallResult(require_approval=True, reason=call.approval)

    async def _decide(self, request: Any, signal: Any) -> Any:
        call_id = request.tool_call_id
        call = self._current_call((call_id, self.starts.get(call_id, 0) - 1))
        if call is None or call.decision is None or call.decided_at is None:
            # undecided where the recording stops, or answered by the abort, which replays
            await anyio.sleep_forever()
            raise AssertionError("unreachable")  # pragma: no cover
        await self._until(call.decided_at)
        if self.approver is not None:  # replaying with another approver
            approver: Any = self.approver
            value = approver(request, signal)
            return await value if inspect.isawaitable(value) else value
        decision = call.decision
        return ApprovalDecision(
            approved=decision.approved,
            reason=decision.reason,
            decided_by=decision.decided_by,
            args=copy.deepcopy(decision.args),
        )

    async def _execute(
        self,
        tool_call_id: str,
        params: Any,
        signal: Any,
        on_update: Callable[[AgentToolResult], None],
    ) -> AgentToolResult:
        call = self._current_call((tool_call_id, self.starts.get(tool_call_id, 0) - 1))
        if call is None:
            raise ReplayedFailure(f"replay: the recording holds no call {tool_call_id}")
        for index, update in call.updates:
            await self._until(index)
            on_update(copy.deepcopy(update))
        if call.end is None or call.result is None:
            await anyio.sleep_forever()  # it was still running when the run was aborted
            raise AssertionError("unreachable")  # pragma: no cover
        await self._until(call.end)
        return copy.deepcopy(call.result)


async def replay_run(
    source: RecordedRun | ReplayScript | str | os.PathLike[str],
    *,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    decide_approval: Approver | None = None,
) -> ReplayResult:
    """Re-run a recording offline (a path, a :class:`~agentcore_fsm.persist.recorder.RecordedRun`
    or a
    :class:`ReplayScript`) and compare what comes out with it, event by event and transition by
    transition; see the module docstring. Runs on trio or asyncio.

    ``stall_timeout``: seconds without progress, while the recording expects more, after which
    the replay is reported as stalled. ``decide_approval``: decide the recorded approvals with
    this approver (sync or async, as ``AgentLoopConfig.decide_approval``) instead of giving the
    recorded decisions; it is asked at the point each recorded decision came, and the first
    decision that differs from the recorded one diverges at its ``approval_decided`` event (or
    at the transition it caused, recorded just before it). Raises as :func:`replay_script`
    does."""
    if not stall_timeout > 0:
        raise ValueError(f"stall_timeout must be a positive number of seconds, not {stall_timeout}")
    return await _Replayer(replay_script(source), stall_timeout, decide_approval).replay()


def replay_run_sync(
    source: RecordedRun | ReplayScript | str | os.PathLike[str],
    *,
    backend: Literal["trio", "asyncio"] = "trio",
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    decide_approval: Approver | None = None,
) -> ReplayResult:
    """:func:`replay_run` from synchronous code, on ``backend`` (not from inside a running
    event loop: there, ``await replay_run(...)``)."""
    script = replay_script(source)  # read errors raise here, bare
    run: Callable[[], Any] = partial(
        replay_run, script, stall_timeout=stall_timeout, decide_approval=decide_approval
    )
    result: ReplayResult = anyio.run(run, backend=backend)
    return result


def assert_replays(
    source: RecordedRun | ReplayScript | str | os.PathLike[str],
    *,
    backend: Literal["trio", "asyncio"] = "trio",
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    decide_approval: Approver | None = None,
) -> ReplayResult:
    """The regression test in one call: replay the recording and raise ``AssertionError``
    with the report of the first divergence, if any; return the :class:`ReplayResult` when
    the replay was identical. Synchronous (in async code: ``(await
    replay_run(path)).check()``)."""
    return replay_run_sync(
        source, backend=backend, stall_timeout=stall_timeout, decide_approval=decide_approval
    ).check()


# --- the command --------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentcore-fsm replay",
        description="Re-run a run recorded by RunRecorder offline: the recorded model answers, "
        "tool results, polls and aborts are played back, and every event and transition is "
        "compared with the recording. Exit status 0 when identical, 1 at the first divergence "
        "(which is printed) or when the file cannot be replayed.",
    )
    parser.add_argument("run", metavar="RUN.jsonl", help="a recording (events and transitions)")
    parser.add_argument(
        "--backend",
        choices=("trio", "asyncio"),
        default="trio",
        help="the event loop to replay on (default: trio)",
    )
    parser.add_argument(
        "--stall-timeout",
        type=float,
        default=DEFAULT_STALL_TIMEOUT,
        metavar="SECONDS",
        help="report a stall after this long without progress (default: "
        f"{DEFAULT_STALL_TIMEOUT:g})",
    )
    return parser


def _error(message: str, status: int = 1) -> int:
    print(f"agentcore-fsm replay: error: {message}", file=sys.stderr)
    return status


def main(argv: list[str]) -> int:
    """``agentcore-fsm replay RUN.jsonl [--backend trio|asyncio]``: returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.run:
        parser.error("RUN.jsonl needs a file name")
    if not args.stall_timeout > 0:
        parser.error("--stall-timeout must be a positive number of seconds")
    try:
        result = replay_run_sync(
            Path(args.run), backend=args.backend, stall_timeout=args.stall_timeout
        )
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return _error(f"cannot read {args.run}: {reason}")
    except RunFileError as exc:
        return _error(str(exc))
    except ReplayError as exc:
        return _error(f"cannot replay {args.run}: {exc}")
    for note in result.notes:
        print(f"note: {note}")
    print(result.summary())
    return 0 if result.ok else 1
