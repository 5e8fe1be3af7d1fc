"""Reading a recording back (docs/record.md): :func:`load_run` and what it gives.

A recording is a JSONL file written by :class:`~agentcore_fsm.persist.recorder.RunRecorder`:
a first line saying what it is (``{"kind": "run", "format": "agentcore-fsm.run", "version":
2, ...}``), then one record per line. A **run's record** is its ``header`` line and its
``input`` lines (the header and entries of :mod:`agentcore_fsm.persist.journal`, one input per
line, numbered from 0), and an ``end`` line once it finished; ``event`` and ``transition``
lines hold what the run emitted and the transitions it took, as they happened. Everything a
reader needs is derived by feeding the inputs again through the codec
(:func:`~agentcore_fsm.persist.journal.derive_run`): the transitions of a run that has input
lines are always the derived ones (transition lines, when the file has them too, are checked
against them), and its events are derived when the file holds no event lines. A version 1
recording (events and transitions only, as earlier releases wrote) reads as it always did.

Every line is validated: a line that is not UTF-8 or not JSON, an unknown kind of record, an
invalid event or transition, a header or entry the codec refuses, an input of a run with no
header, entries out of order. The error is a :class:`RunFileError` (a
:class:`~agentcore_fsm.persist.codec.RecordError`) naming the file and the line (and, for a JSON
error, the column) and what is wrong. One thing is tolerated: a last line that a crash cut
short (it has no line end and does not parse, after a whole ``run`` line) is skipped, with a
warning logged on the ``agentcore_fsm`` logger and kept in :attr:`RecordedRun.warnings`.

**Approvals** (``approval_requested``/``approval_decided`` events) are read back as
:attr:`RecordedRun.approvals`: each request with its decision and, from the clock readings, how
long it waited (:class:`RecordedApproval`); the summary lists them.

**What went wrong** is read back from the events: :attr:`RecordedRun.error` is the error text of
a last run that ended in an error or an abort (the ``error_message`` of its failed or aborted
assistant message, else its last failed tool result), :attr:`RecordedRun.tool_errors` every tool
result that was an error, and :meth:`RecordedRun.summary` says in a few lines what the recording
holds and how it ended, error text included. :func:`run_error` and :func:`tool_errors` do the
same for a list of messages (a live run's).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentcore_fsm.core.describe import describe_event
from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.core.messages import clip
from agentcore_fsm.core.nesting import event_data, event_from_data
from agentcore_fsm.persist import json_text
from agentcore_fsm.persist.codec import RecordError
from agentcore_fsm.persist.event_marks import emitted_among, split_at
from agentcore_fsm.persist.journal import (
    JournalError,
    RunSnapshot,
    current_declaration_hash,
    derive_run,
)

__all__ = [
    "RUN_FORMAT",
    "RUN_FORMAT_VERSION",
    "RecordedApproval",
    "RecordedRun",
    "RunFileError",
    "RunRecord",
    "describe_event",
    "duration_text",
    "event_data",
    "event_from_data",
    "load_run",
    "run_error",
    "split_records",
    "tool_errors",
]

RUN_FORMAT = "agentcore-fsm.run"
RUN_FORMAT_VERSION = 2
"""The version of the recording format this code writes (2: runs' records, header and inputs,
in the file)."""
READABLE_VERSIONS = (1, 2)
"""The versions this code reads."""
LOOP = "agent_loop"
STREAMED = frozenset({"message_update", "output_partial", "tool_execution_update"})
"""The events a run's record does not give back (they follow the stream and the tools'
progress): left out when derived events are lined up with recorded ones."""
LOOK_AHEAD = 3
"""How many recorded events past the expected one a derived event is looked for."""

logger = logging.getLogger("agentcore_fsm")

# what decoding with errors="surrogateescape" makes of a byte that is not UTF-8
_UNDECODABLE = re.compile("[\udc80-\udcff]")


class RunFileError(RecordError):
    """A run recording cannot be read (not JSONL, an unknown record, an invalid event, a
    damaged record of a run, ...): the text names the file, the line and what is wrong."""


@dataclass
class RunRecord:
    """The record of one run in a recording: its ``run_id``, ``header`` and ``entries`` (as
    :mod:`agentcore_fsm.persist.journal` makes them), the ``end_reason`` of its ``end`` line
    (None: the recording stops before the run finished), and the line of the header and of
    each entry in the file (0 when the record was not read from a file)."""

    run_id: str
    header: dict[str, Any]
    entries: list[dict[str, Any]] = field(default_factory=list)
    end_reason: str | None = None
    header_line: int = 0
    entry_lines: list[int] = field(default_factory=list)

    def snapshot(self) -> RunSnapshot:
        """The record as a :class:`~agentcore_fsm.persist.journal.RunSnapshot` (resume or
        derive it, see :mod:`agentcore_fsm.persist.journal`)."""
        header = self.header
        return RunSnapshot(
            format=header.get("format"),
            declaration=header.get("declaration"),
            declaration_hash=header.get("declaration_hash"),
            header=header,
            entries=self.entries,
        )


@dataclass(frozen=True)
class RecordedApproval:
    """A tool call that waited for approval in a recording (see :attr:`RecordedRun.approvals`):
    its request (``approval_requested``: ``tool_call_id``, ``tool_name``, ``args``,
    ``reason``), its decision (the ``approval_decided`` event; None when the recording holds
    none: the call was still waiting where it stops), and the clock readings of the two
    records (None when the recording has none)."""

    tool_call_id: str
    tool_name: str
    args: Any
    reason: str | None
    decision: Any = None
    requested_at: float | None = None
    decided_at: float | None = None

    @property
    def waited(self) -> float | None:
        """Seconds between the request and the decision (None: undecided, or no clock)."""
        if self.decision is None or self.requested_at is None or self.decided_at is None:
            return None
        return max(0.0, self.decided_at - self.requested_at)

    def text(self) -> str:
        """One line for a person: ``write_file approved by alice after 2.3 s``, ``pay denied by
        timeout: no decision within 5 s after 5.0 s``, ``pay waiting (no decision recorded)``."""
        decision = self.decision
        if decision is None:
            return f"{self.tool_name} waiting (no decision recorded)"
        text = f"{self.tool_name} {'approved' if decision.approved else 'denied'}"
        text += f" by {clip(str(decision.decided_by), 40)}"
        if not decision.approved and decision.reason:
            text += f": {clip(str(decision.reason), 60)}"
        waited = self.waited
        return text + (f" after {duration_text(waited)}" if waited is not None else "")


def duration_text(seconds: float) -> str:
    """A duration for a person: ``0.04 s``, ``2.3 s``, ``4 min 10 s``, ``2 h 5 min``, ``3 d 4 h``
    (approvals can wait for days)."""
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


@dataclass
class RecordedRun:
    """A run read back by :func:`load_run` (or taken from a live :class:`RunRecorder`).

    ``events``: the validated agent events, in order. ``machines``: every recorded machine's
    transitions, in order. ``machine``: the recording's main machine (``agent_loop`` for a
    loop run); :attr:`transitions` are its transitions. ``order``: every record in the order it
    was written, ``(None, i)`` for ``events[i]`` and ``(name, i)`` for ``machines[name][i]``
    (see :meth:`events_after`). ``times``: the clock reading (``t``: seconds since the recorder
    was made) of each record of ``order``, None where a record has none; empty when unknown.
    The transitions of a run whose record the recording holds are derived from its inputs, and
    so are its events when the file holds none (see the module docstring).
    """

    machine: str
    events: list[Any] = field(default_factory=list)
    machines: dict[str, list[TransitionRecord]] = field(default_factory=dict)
    order: list[tuple[str | None, int]] = field(default_factory=list)
    times: list[float | None] = field(default_factory=list)
    records: list[RunRecord] = field(default_factory=list)
    """The runs' records the recording holds (header and inputs), in the order they began:
    the runs of the recording, each an outermost run (its header has no ``parent``)."""
    nested_records: list[RunRecord] = field(default_factory=list)
    """The records of nested runs (an agent as a tool, docs/multi-agent.md) the recording holds
    beside their outer run's, in the order they began: a header with a ``parent`` (its outer
    run, call, path and agents). They are validated line by line but not derived: the
    transitions and events of the recording are its outer runs' (a nested run's events are in
    its outer run's ``tool_execution_update`` events)."""
    warnings: list[str] = field(default_factory=list)
    """What the reader tolerated (a torn last line)."""
    emitted: list[int] | None = None
    """A recording of one run that holds its record: for each transition of the main machine,
    the index in :attr:`events` where the events it emitted begin; None otherwise."""

    def _clock_readings(self) -> dict[tuple[str | None, int], float]:
        if len(self.times) != len(self.order):
            return {}
        return {key: t for key, t in zip(self.order, self.times, strict=True) if t is not None}

    def transition_times(self, machine: str | None = None) -> list[float | None]:
        """The clock reading of each transition of ``machine`` (default: the main one), None
        where the recording has none."""
        name = self.machine if machine is None else machine
        readings = self._clock_readings()
        return [readings.get((name, i)) for i in range(len(self.machines.get(name, [])))]

    @property
    def last_time(self) -> float | None:
        """The clock reading of the last record that has one (None: none has)."""
        for t in reversed(self.times):
            if t is not None:
                return t
        return None

    @property
    def approvals(self) -> list[RecordedApproval]:
        """Every tool call that waited for approval, in the order of the requests, each with
        its decision and how long it waited (see :class:`RecordedApproval`)."""
        readings = self._clock_readings()
        found: list[RecordedApproval] = []
        open_requests: dict[str, int] = {}  # call id -> its last undecided request in found
        for i, event in enumerate(self.events):
            kind = getattr(event, "type", None)
            if kind == "approval_requested":
                open_requests[event.tool_call_id] = len(found)
                found.append(
                    RecordedApproval(
                        event.tool_call_id,
                        event.tool_name,
                        event.args,
                        event.reason,
                        requested_at=readings.get((None, i)),
                    )
                )
            elif kind == "approval_decided":
                at = open_requests.pop(event.tool_call_id, None)
                if at is not None:
                    found[at] = replace(
                        found[at], decision=event, decided_at=readings.get((None, i))
                    )
        return found

    @property
    def transitions(self) -> list[TransitionRecord]:
        return self.machines.get(self.machine, [])

    @property
    def end_reason(self) -> str | None:
        """The ``reason`` of the last ``agent_end`` event, or None when there is none."""
        for event in reversed(self.events):
            if getattr(event, "type", None) == "agent_end":
                reason: str = event.reason
                return reason
        return None

    def last_run_messages(self) -> list[Any]:
        """The messages of the last run: its ``agent_end``'s, or for a run that has none (the
        recording stops mid-run) those of the ``message_end`` events since its ``agent_start``."""
        start = max(
            (i for i, e in enumerate(self.events) if getattr(e, "type", None) == "agent_start"),
            default=0,
        )
        ended: list[Any] = []
        for event in self.events[start:]:
            kind = getattr(event, "type", None)
            if kind == "agent_end":
                return list(event.messages)
            if kind == "message_end":
                ended.append(event.message)
        return ended

    @property
    def error(self) -> str | None:
        """Why the last run ended in an error or an abort (:func:`run_error`); None when it
        did not, or when the recording holds no events."""
        return run_error(self.last_run_messages(), self.end_reason)

    @property
    def tool_errors(self) -> list[str]:
        """Every tool result of the recording that was an error, as ``tool: text``
        (:func:`tool_errors`), every run's, in order."""
        return tool_errors(
            e.message
            for e in self.events
            if getattr(e, "type", None) == "message_end"
            and getattr(e.message, "role", None) == "toolResult"
        )

    def events_after(self, machine: str | None = None) -> list[list[Any]]:
        """For each transition of ``machine`` (default: the main one), the events recorded
        after it and before the next one, in order; events recorded before its first
        transition go with the first. Events are delivered once the machine has taken every
        transition an input caused, so an event may be listed a step or two after the
        transition whose emit action produced it. Empty lists when no events were kept."""
        name = self.machine if machine is None else machine
        out: list[list[Any]] = [[] for _ in self.machines.get(name, [])]
        if not out:
            return out
        at = 0
        for who, i in self.order:
            if who is None and i < len(self.events):
                out[at].append(self.events[i])
            elif who == name:
                at = min(i, len(out) - 1)
        return out

    def events_by_transition(self, machine: str | None = None) -> list[list[Any]]:
        """For each transition of ``machine`` (default: the main one), the events it emitted,
        then the inputs' after it that took none (:attr:`emitted`); else :meth:`events_after`."""
        name = self.machine if machine is None else machine
        emitted = self.emitted
        transitions = self.machines.get(name, [])
        if name != self.machine or emitted is None or len(emitted) != len(transitions):
            return self.events_after(machine)
        return split_at(self.events, emitted)

    def summary(self) -> str:
        """A few lines for a person: what the recording holds and how its last run ended,
        with the error text when it ended in an error or an abort, and the tool errors.

        ::

            agent_loop: 9 transitions, 20 events
            ended: error: model overloaded
            tool errors (1): add: no threes today
            approvals (1): write_file approved by alice after 2.3 s
        """
        others = ", ".join(
            f"{_count(len(r), 'transition')} of {n}"
            for n, r in self.machines.items()
            if r and n != self.machine
        )
        lines = [
            f"{self.machine}: {_count(len(self.transitions), 'transition')}, "
            f"{_count(len(self.events), 'event')}" + (f" (and {others})" if others else "")
        ]
        reason = self.end_reason
        if reason is None:
            lines.append("ended: no agent_end recorded")
        else:
            error = self.error
            lines.append(f"ended: {reason}" + (f": {error}" if error else ""))
        errors = self.tool_errors
        if errors:
            lines.append(f"tool errors ({len(errors)}): " + "; ".join(errors))
        approvals = self.approvals
        if approvals:
            lines.append(f"approvals ({len(approvals)}): " + "; ".join(a.text() for a in approvals))
        return "\n".join(lines)


_BAD_ENDS = ("error", "aborted")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _text_of(message: Any) -> str:
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    parts = [getattr(b, "text", None) for b in content or ()]
    return " ".join(p for p in parts if isinstance(p, str)).strip()


def run_error(messages: Iterable[Any], reason: str | None = None) -> str | None:
    """The error text of a run that ended in an error or an abort, from its ``messages`` and
    its ``agent_end`` ``reason``: the ``error_message`` of its last assistant message when that
    one stopped with ``error`` or ``aborted`` (a failed model call, or the failure message of a
    failure elsewhere); else, when ``reason`` says the run ended badly, its last failed tool
    result (``tool: text``, e.g. an abort while tools ran), else ``ended with reason ...``.
    None for a run that ended well (``completed``/``stopped``) or whose end is unknown and
    whose last assistant message did not fail."""
    if reason in ("completed", "stopped"):
        return None
    items = list(messages)
    for message in reversed(items):
        if getattr(message, "role", None) == "assistant":
            if getattr(message, "stop_reason", None) in _BAD_ENDS:
                text = getattr(message, "error_message", None)
                return str(text) if text else f"the model call ended with {message.stop_reason!r}"
            break
    if reason not in _BAD_ENDS:
        return None
    failed = tool_errors(m for m in items if getattr(m, "role", None) == "toolResult")
    return failed[-1] if failed else f"the run ended with reason {reason!r}"


def tool_errors(messages: Iterable[Any]) -> list[str]:
    """Each tool result among ``messages`` that is an error, as ``tool: text``."""
    return [
        f"{getattr(m, 'tool_name', '?')}: {_text_of(m) or '(no text)'}"
        for m in messages
        if getattr(m, "role", None) == "toolResult" and getattr(m, "is_error", False)
    ]


def split_records(records: Iterable[RunRecord]) -> tuple[list[RunRecord], list[RunRecord]]:
    """The outermost runs' records (their header has no ``parent``) and the nested runs'
    (see :attr:`RecordedRun.nested_records`), each in the given order."""
    top: list[RunRecord] = []
    nested: list[RunRecord] = []
    for record in records:
        (nested if "parent" in record.header else top).append(record)
    return top, nested


# --- reading a file -----------------------------------------------------------------------------


def _lines(path: Path) -> Iterator[tuple[int, str, bool]]:
    """The file's lines, numbered, each with whether it is the last line and has no line end
    (what a crash leaves). Bytes that are not UTF-8 come as lone surrogates (the reader
    refuses them)."""
    with path.open(encoding="utf-8", errors="surrogateescape") as file:
        previous: tuple[int, str] | None = None
        for number, line in enumerate(file, 1):
            if previous is not None:
                yield previous[0], previous[1], False
            previous = (number, line)
        if previous is not None:
            yield previous[0], previous[1], not previous[1].endswith("\n")


def _not_utf8(where: str, line: str) -> RunFileError | None:
    bad = _UNDECODABLE.search(line)
    if bad is None:
        return None
    byte = ord(bad.group()) - 0xDC00
    return RunFileError(f"{where}: not UTF-8 text (byte 0x{byte:02x} at column {bad.start() + 1})")


def _parse(where: str, line: str, code_points: bool) -> dict[str, Any]:
    line = line.rstrip("\r\n")  # a column past the line's end is on this line, not the next
    try:
        obj = json_text.loads(line, every_surrogate_escape=code_points)
    except json.JSONDecodeError as exc:
        column = exc.colno
        try:  # the column in the line as written (unescaping may have shifted it)
            json.loads(line)
        except json.JSONDecodeError as plain:
            column = plain.colno
        raise RunFileError(f"{where}: not JSON at column {column}: {exc.msg}") from None
    except RecursionError:
        raise RunFileError(f"{where}: not JSON this reader can take: nested too deeply") from None
    if not isinstance(obj, dict) or "kind" not in obj:
        raise RunFileError(f"{where}: expected a JSON object with a 'kind'")
    return obj


def _field(obj: dict[str, Any], name: str, kind: type[Any]) -> Any:
    value = obj[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"{name!r} must be {kind.__name__}, not {type(value).__name__}")
    return value


def _reading(obj: dict[str, Any]) -> float | None:
    t = obj.get("t")
    reading = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None
    return reading if reading is not None and math.isfinite(reading) else None


class _Reader:
    """Reads the lines of a recording, in order, into a :class:`RecordedRun`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.run: RecordedRun | None = None
        self.code_points = False
        self.records: dict[str, RunRecord] = {}
        # every record in file order: ("event", i) / (machine, i) / ("input", run id, k)
        self.sequence: list[tuple[Any, ...]] = []
        self.times: list[float | None] = []
        self.loop_lines: list[int] = []  # the line of each recorded transition of the loop
        self.warnings: list[str] = []

    def read(self) -> RecordedRun:
        for number, line, torn in _lines(self.path):
            where = f"{self.path}:{number}"
            if not line.strip():
                continue
            # a torn last line is tolerated after a whole header line: a crash while writing
            # (the recorder writes the header when it is made, before anything can crash)
            tolerated = torn and self.run is not None
            try:
                error = _not_utf8(where, line)
                if error is not None:
                    raise error
                obj: dict[str, Any] | None = _parse(where, line, self.code_points)
            except RunFileError:
                if not tolerated:
                    raise
                obj = None
            if obj is None:  # the torn last line a crash leaves
                text = f"{where}: the last line was cut short (a crash while writing it); skipped"
                logger.warning("%s", text)
                self.warnings.append(text)
                continue
            self.record(where, number, obj)
        return self.finish()

    def record(self, where: str, number: int, obj: dict[str, Any]) -> None:
        kind = obj["kind"]
        if kind == "run":
            self.begin(where, obj)
            return
        run = self.run
        if run is None:
            raise RunFileError(f"{where}: the file does not start with a 'run' header")
        reading = _reading(obj)
        if kind == "event":
            nested = obj.get("nested", False)
            if nested is not True and nested is not False:
                raise RunFileError(
                    f"{where}: an event record's 'nested' must be true, not {nested!r}"
                )
            try:
                event = event_from_data(obj["event"], nested)
            except KeyError:
                raise RunFileError(f"{where}: an event record without 'event'") from None
            except ValueError as exc:
                raise RunFileError(f"{where}: invalid event: {exc}") from None
            run.events.append(event)
            self.sequence.append(("event", len(run.events) - 1))
        elif kind == "transition":
            try:
                record = TransitionRecord(
                    _field(obj, "index", int),
                    _field(obj, "trigger", str),
                    _field(obj, "source", str),
                    _field(obj, "dest", str),
                )
                machine = _field(obj, "machine", str)
            except (KeyError, TypeError) as exc:
                raise RunFileError(f"{where}: invalid transition: {exc}") from None
            records = run.machines.setdefault(machine, [])
            records.append(record)
            self.sequence.append((machine, len(records) - 1))
            if machine == LOOP:
                self.loop_lines.append(number)
        elif kind in ("header", "input", "end"):
            self.run_record(where, number, kind, obj)
        else:
            raise RunFileError(f"{where}: unknown record kind {kind!r}")
        self.times.append(reading)

    def begin(self, where: str, obj: dict[str, Any]) -> None:
        if self.run is not None:
            raise RunFileError(f"{where}: a second 'run' header")
        if obj.get("format") != RUN_FORMAT:
            raise RunFileError(f"{where}: not an agentcore-fsm run (format {obj.get('format')!r})")
        version = obj.get("version")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            raise RunFileError(
                f"{where}: run format version {version!r} is not supported (this version reads "
                f"{', '.join(map(str, READABLE_VERSIONS))})"
            )
        machine = obj.get("machine")
        if not isinstance(machine, str):
            raise RunFileError(f"{where}: the header has no machine name")
        self.run = RecordedRun(machine=machine, machines={machine: []})
        self.code_points = obj.get("surrogates") == "escaped"

    def run_record(self, where: str, number: int, kind: str, obj: dict[str, Any]) -> None:
        run_id = obj.get("run")
        if not isinstance(run_id, str) or not run_id:
            raise RunFileError(f"{where}: a {kind} record without its run's id ('run')")
        record = self.records.get(run_id)
        if kind == "header":
            header = obj.get("header")
            if not isinstance(header, dict):
                raise RunFileError(f"{where}: the header record of run {run_id!r} has no header")
            if record is not None:
                raise RunFileError(f"{where}: a second header for run {run_id!r}")
            self.records[run_id] = RunRecord(run_id, header, header_line=number)
            self.sequence.append(("header", run_id))
            return
        if record is None:
            raise RunFileError(
                f"{where}: an {kind} record of run {run_id!r}, whose header line "
                f"does not come before it"
            )
        if record.end_reason is not None:
            raise RunFileError(f"{where}: an {kind} record of run {run_id!r}, which has ended")
        if kind == "end":
            reason = obj.get("reason")
            if not isinstance(reason, str) or not reason:
                raise RunFileError(f"{where}: the end of run {run_id!r} has no reason")
            record.end_reason = reason
            self.sequence.append(("end", run_id))
            return
        n = obj.get("n")
        entry = obj.get("entry")
        if not isinstance(n, int) or isinstance(n, bool) or not isinstance(entry, dict):
            raise RunFileError(
                f"{where}: an input record needs 'n' (an int) and 'entry' (an object)"
            )
        if n != len(record.entries):
            raise RunFileError(
                f"{where}: input #{n} of run {run_id!r} is out of order (the next one is "
                f"#{len(record.entries)})"
            )
        record.entries.append(entry)
        record.entry_lines.append(number)
        self.sequence.append(("input", run_id, n))

    # --- deriving what the records give ---------------------------------------------------

    def finish(self) -> RecordedRun:
        run = self.run
        if run is None:
            raise RunFileError(f"{self.path}: empty file, not a run recording")
        run.records, run.nested_records = split_records(self.records.values())
        run.warnings = self.warnings
        if not run.records or self.recorded_elsewhere(run):
            # the lines as recorded: events and transitions (a record's lines have no place)
            kept = [
                (item, t)
                for item, t in zip(self.sequence, self.times, strict=True)
                if item[0] not in ("header", "input", "end")
            ]
            run.order = [(None if item[0] == "event" else item[0], item[1]) for item, _ in kept]
            run.times = [t for _, t in kept]
            return run
        derived = {record.run_id: self.derive(record) for record in run.records}
        self.check_transitions(run, derived)
        recorded_events = bool(run.events)
        placed = self.place(run, derived) if recorded_events else None
        loop: list[TransitionRecord] = []
        order: list[tuple[str | None, int]] = []
        times: list[float | None] = []
        for item, t in zip(self.sequence, self.times, strict=True):
            if item[0] == "event":
                for record in placed[item[1]] if placed is not None else ():
                    loop.append(record)
                    order.append((LOOP, len(loop) - 1))
                    times.append(t)
                order.append((None, item[1]))
                times.append(t)
            elif item[0] == "input":
                _, run_id, k = item
                if run_id not in derived or placed is not None:
                    continue  # a nested run's input, or placed with the events
                machine, events, marks, _ = derived[run_id]
                done = marks[k - 1][-1] if k else (0, 0)
                for t1, e1 in marks[k]:  # each input of the entry: its transitions, its events
                    t0, e0 = done
                    for record in machine.history[t0:t1]:
                        loop.append(record)
                        order.append((LOOP, len(loop) - 1))
                        times.append(t)
                    if not recorded_events:
                        for event in events[e0:e1]:
                            run.events.append(event)
                            order.append((None, len(run.events) - 1))
                            times.append(t)
                    done = (t1, e1)
            elif item[0] not in ("header", "end", LOOP):
                order.append(item)
                times.append(t)
        if placed is not None:  # what the runs' last inputs did after their last event
            for record in placed[len(run.events)]:
                loop.append(record)
                order.append((LOOP, len(loop) - 1))
                times.append(times[-1] if times else None)
        run.machines[LOOP] = loop
        run.order, run.times = order, times
        if len(derived) == 1:  # where each transition's events begin (RecordedRun.emitted)
            _, events, _, emitted = next(iter(derived.values()))
            run.emitted = emitted_among(run.events, events, emitted, STREAMED, LOOK_AHEAD)
        return run

    def place(
        self, run: RecordedRun, derived: dict[str, Any]
    ) -> list[list[TransitionRecord]] | None:
        """A file with event lines beside the runs' records (the recorder given as ``emit``
        and as the store): where each derived transition goes among the recorded events, so
        that the order is the one the run had (the store writes its inputs in groups, after
        the events they caused). The events the inputs give are lined up, by type, with the
        recorded ones (leaving out the :data:`STREAMED` ones, which a record does not give
        back): each input's transitions go just before the recorded event its first event
        matches, or the next matched one. A derived event with no match among the next
        :data:`LOOK_AHEAD` recorded ones (an event line edited out) is passed over. Index ``i``
        lists the transitions before ``run.events[i]``, the last index those after the last
        event. None when no event lines up (the transitions then go where the input lines
        are)."""
        matched = [i for i, event in enumerate(run.events) if event.type not in STREAMED]
        placed: list[list[TransitionRecord]] = [[] for _ in range(len(run.events) + 1)]
        pending: list[TransitionRecord] = []
        at = 0
        lined_up = False
        for item in self.sequence:
            if item[0] != "input" or item[1] not in derived:
                continue
            _, run_id, k = item
            machine, events, marks, _ = derived[run_id]
            done = marks[k - 1][-1] if k else (0, 0)
            for t1, e1 in marks[k]:
                t0, e0 = done
                pending.extend(machine.history[t0:t1])
                for event in events[e0:e1]:
                    ahead = matched[at : at + LOOK_AHEAD + 1]
                    found = [j for j, i in enumerate(ahead) if run.events[i].type == event.type]
                    if not found:
                        continue
                    at += found[0]
                    placed[matched[at]].extend(pending)
                    pending = []
                    at += 1
                    lined_up = True
                done = (t1, e1)
        placed[len(run.events)].extend(pending)
        return placed if lined_up or not run.events else None

    def recorded_elsewhere(self, run: RecordedRun) -> bool:
        """Whether a run of the recording was made by a release whose machines differ (another
        declaration hash): its inputs cannot be fed to this version's machine, so the file is
        read as it was recorded — its transition and event lines — with a warning; a file that
        holds only the inputs of such a run is refused."""
        current = current_declaration_hash()
        for record in run.records:
            recorded = record.header.get("declaration_hash")
            if recorded == current:
                continue
            where = f"{self.path}:{record.header_line}"
            if not run.events and not run.machines.get(LOOP):
                raise RunFileError(
                    f"{where}: run {record.run_id!r} was recorded by a release whose machines "
                    f"differ (declaration hash {recorded}; this version runs {current}), and "
                    f"the recording holds only its inputs, which this version cannot feed "
                    f"again",
                    run_id=record.run_id,
                )
            warning = (
                f"{where}: run {record.run_id!r} was recorded by a release whose machines "
                f"differ (declaration hash {recorded}; this version runs {current}): its "
                f"transitions and events are read as recorded, not derived from its inputs"
            )
            self.warnings.append(warning)
            logger.warning("%s", warning)
            return True
        return False

    def derive(self, record: RunRecord) -> Any:
        try:
            derived = derive_run(record.snapshot(), run_id=record.run_id)
        except JournalError as exc:
            k = exc.entry
            line = record.entry_lines[k] if k is not None else record.header_line
            raise RunFileError(
                f"{self.path}:{line}: {exc}", run_id=record.run_id, entry=k
            ) from None
        return derived.machine, derived.events, derived.marks, derived.emitted

    def check_transitions(self, run: RecordedRun, derived: dict[str, Any]) -> None:
        """Transition lines of the loop, when the file has them too, must be the ones the
        inputs give (a run in flight at a crash may have a few more)."""
        recorded = run.machines.get(LOOP, [])
        if not recorded:
            return
        expected = [t for machine, *_ in derived.values() for t in machine.history]
        for i, (got, want) in enumerate(zip(recorded, expected, strict=False)):
            if got != want:
                raise RunFileError(
                    f"{self.path}:{self.loop_lines[i]}: transition #{i} ({got.source} "
                    f"--{got.trigger}--> {got.dest}) is not the one the run's inputs give "
                    f"({want.source} --{want.trigger}--> {want.dest})"
                )


def load_run(path: str | os.PathLike[str]) -> RecordedRun:
    """Read a recording written by :class:`~agentcore_fsm.persist.recorder.RunRecorder`;
    validate every line, and derive what the runs' records give (see the module docstring).

    Raises :class:`RunFileError` (a :class:`~agentcore_fsm.persist.codec.RecordError`, a
    ``ValueError``) naming the line at fault, ``OSError`` when the file cannot be read.
    """
    return _Reader(Path(path)).read()
