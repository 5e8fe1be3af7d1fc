"""Recording a run to JSONL, and reading it back (for diagrams, debugging and regression tests).

A :class:`RunRecorder` is three things at once:

* an ``emit`` sink: ``run_agent_loop(..., emit=rec)`` — it is called with each event;
* an ``Agent`` listener: ``agent.subscribe(rec)`` — it is called as ``rec(event, signal)``;
* a transition callback: ``run_agent_loop(..., on_transition=rec.on_transition)``.

It writes one JSON object per line, in the order things happened::

    {"kind": "run", "format": "agentcore-fsm.run", "version": 1, "machine": "agent_loop",
     "surrogates": "escaped"}
    {"kind": "transition", "seq": 1, "t": 0.0001, "machine": "agent_loop", "index": 0,
     "trigger": "start", "source": "idle", "dest": "awaiting_steering"}
    {"kind": "event", "seq": 2, "t": 0.0002, "event": {"type": "agent_start"}}

``seq`` numbers every record; ``t`` is seconds since the recorder was made, one clock reading
(monotonic) per record. Nothing compares it: :func:`load_run` keeps it
(:attr:`RecordedRun.times`) so that a run view can say how long the run waited, e.g. for an
approval (a record without a ``t``, as a file written by hand may have, reads as None).
Events are stored in their camelCase JSON form (what
``event.model_dump(mode="json", by_alias=True)`` gives, though the recorder writes it itself so
that no text is lost, see below), serialised *when they are emitted* — a streamed partial
message is mutated in place afterwards, so this is the only faithful moment.
Each line is written as it happens, so a run that crashes the process still leaves a readable
record up to its last step.

**Any text is recorded exactly.** A model or a tool can produce strings that are not valid
Unicode text: a provider's JSON ``"\\ud83d"`` (half of an emoji) becomes a lone surrogate, and a
surrogate pair split across two stream deltas leaves two separate surrogates in the partial
message. The file is plain UTF-8, every character written as itself except surrogates, each of
which is written as its own ``\\uXXXX`` escape. The header says so (``"surrogates": "escaped"``),
and :func:`load_run` then reads every escape back as that one code point, never joining two into
one character, so the events it returns are the ones that were emitted. (A file without that
header field is read as standard JSON, where an escaped pair is one character.)

**A recorder never breaks the run it records.** Once the file is open and its header written
(failures there raise from the constructor, before anything ran), nothing it is handed raises
into the run: when writing fails (a full disk, the file closed underneath, ...), the error is
logged on the ``agentcore_fsm`` logger and kept in :attr:`RunRecorder.error`, the half-written
line is taken back, and the recorder stops writing, so the file holds whole lines up to the
failure; an event that cannot be serialised at all (nested deeper than the serialiser goes) is
logged and left out. The in-memory side (transitions, :attr:`RunRecorder.end_reason`, the event
count) keeps going. Handing it something that is not an agent event is a programming error and
raises ``TypeError`` (a ``ValidationError`` for an invalid event dict).

:func:`load_run` reads a file back: every event is validated with ``AGENT_EVENT_ADAPTER``
(so you get the same event classes the loop emits), every transition becomes a
:class:`~agentcore_fsm.core.machine.TransitionRecord`. A malformed line raises :class:`RunFileError`
naming the file and line (so do a line that is not UTF-8 and one nested too deeply to parse).
It keeps the order the records were written in (:attr:`RecordedRun.order`), so that each event
can be placed after the transition it followed.

**Approvals** (``approval_requested``/``approval_decided`` events) are read back as
:attr:`RecordedRun.approvals`: each request with its decision and, from the clock readings, how
long it waited (:class:`RecordedApproval`); the summary lists them.

**What went wrong** is read back from the events: :attr:`RecordedRun.error` is the error text of
a last run that ended in an error or an abort (the ``error_message`` of its failed or aborted
assistant message, else its last failed tool result), :attr:`RecordedRun.tool_errors` every tool
result that was an error, and :meth:`RecordedRun.summary` says in a few lines what the recording
holds and how it ended, error text included. :func:`run_error` and :func:`tool_errors` do the
same for a list of messages (a live run's).

``agentcore-fsm diagram --run RUN.jsonl`` renders a recording (``--steps`` lists its steps in
order, the summary above them).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from pydantic_core import to_jsonable_python

from agentcore_fsm.core.events import AGENT_EVENT_ADAPTER
from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.core.messages import clip

__all__ = [
    "RUN_FORMAT",
    "RUN_FORMAT_VERSION",
    "RecordedApproval",
    "RecordedRun",
    "RunFileError",
    "RunRecorder",
    "describe_event",
    "load_run",
    "run_error",
    "tool_errors",
]

RUN_FORMAT = "agentcore-fsm.run"
RUN_FORMAT_VERSION = 1

logger = logging.getLogger("agentcore_fsm")

_SURROGATE = re.compile("[\ud800-\udfff]")
# a \uXXXX escape of a high surrogate that is a real escape (after an even run of backslashes)
_HIGH_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2})")
# what decoding with errors="surrogateescape" makes of a byte that is not UTF-8
_UNDECODABLE = re.compile("[\udc80-\udcff]")


class RunFileError(ValueError):
    """A run recording cannot be read (not JSONL, an unknown record, an invalid event, ...)."""


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float made None (what pydantic's JSON mode does)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    """What ``json.dumps`` writes for a value it does not know, as pydantic's JSON mode would
    (something JSON cannot carry at all becomes its repr)."""
    return _finite(to_jsonable_python(value, fallback=repr))


def _dumps(obj: dict[str, Any]) -> str:
    """One line of strict JSON: every character as itself, except that each surrogate code
    point is written as its own escape (which plain UTF-8 could not carry)."""
    options: dict[str, Any] = {
        "ensure_ascii": False,
        "separators": (",", ":"),
        "allow_nan": False,
        "default": _jsonable,
    }
    try:
        text = json.dumps(obj, **options)
    except ValueError:  # a NaN or an infinity somewhere (or a cycle: that raises again)
        text = json.dumps(_finite(obj), **options)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _loads_code_points(line: str) -> Any:
    """Parse a line whose surrogate escapes each stand for one code point: the escapes of high
    surrogates become the characters themselves first, so that the parser cannot join an
    escaped pair into one character (an unpaired escape means the same either way)."""
    return json.loads(_HIGH_ESCAPE.sub(lambda m: m.group(1) + chr(int(m.group(2), 16)), line))


def _event_data(event: Any) -> Any:
    """An agent event as camelCase data, for :func:`_dumps` (a snapshot: a streamed partial
    message is mutated in place afterwards).

    Not pydantic's JSON mode: it loses text that is not valid Unicode (a lone surrogate in a
    dict key becomes U+FFFD, or raises). ``_dumps`` does what that mode would do for the rest:
    a value JSON cannot carry (a tool's ``details`` may hold anything) becomes its repr, rather
    than the event being lost; NaN and infinities become null."""
    return event.model_dump(mode="python", by_alias=True)


class RunRecorder:
    """Records a run's events and transitions (see the module docstring).

    ``path``: the JSONL file to write (created or truncated when the recorder is made); ``None``
    records in memory only. ``machine``: the declaration whose transitions
    :meth:`on_transition` receives (``agent_loop`` unless you record another machine; use
    :meth:`transition_callback` to record a second machine into the same file). ``updates``:
    record ``message_update`` events (default True; pass False to keep long streamed runs small).
    ``keep_events``: also keep the events in :attr:`events` (default: only when there is no
    file, so a recorder that writes a long session to disk does not grow in memory).
    Transitions are always kept in :attr:`transitions`, and the reason of the last ``agent_end``
    in :attr:`end_reason`, so a live run can be drawn at any moment.

    Use it as a context manager, or call :meth:`close`, to close the file.

    It never raises into the run it records (see the module docstring): a failure to write
    is logged, stops the writing, and is kept in :attr:`error` (None while all is well).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        machine: str = "agent_loop",
        updates: bool = True,
        keep_events: bool | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.machine = machine
        self.updates = updates
        self.keep_events = self.path is None if keep_events is None else keep_events
        self.events: list[Any] = []
        self.transitions: list[TransitionRecord] = []
        self.machine_transitions: dict[str, list[TransitionRecord]] = {machine: self.transitions}
        # what was recorded, in order: (None, i) is events[i], (machine, i) that machine's i-th
        self._order: list[tuple[str | None, int]] = []
        self._times: list[float] = []  # the clock reading of each record of _order
        self.end_reason: str | None = None
        self.event_count = 0
        self.error: Exception | None = None
        self._seq = 0
        self._size = 0  # bytes of whole lines written
        self._t0 = time.monotonic()
        self._file: BinaryIO | None = None
        if self.path is not None:
            # unbuffered: each line is one write, and a failed one leaves nothing behind in a
            # buffer to be written later
            self._file = self.path.open("wb", buffering=0)
            header = {
                "kind": "run",
                "format": RUN_FORMAT,
                "version": RUN_FORMAT_VERSION,
                "machine": machine,
                "surrogates": "escaped",
            }
            try:
                self._write(header)
            except BaseException:
                self._file.close()
                self._file = None
                raise

    # --- sinks --------------------------------------------------------------------------------

    def __call__(self, event: Any, signal: Any = None) -> None:
        """Record one event. The signature fits both an ``emit`` sink and an Agent listener.

        Raises only when ``event`` is not an agent event (``TypeError``; a dict is validated
        first); a failure to serialise or write it is logged (see the module docstring)."""
        if isinstance(event, dict):
            event = AGENT_EVENT_ADAPTER.validate_python(event)
        kind = getattr(event, "type", None)
        if not isinstance(kind, str) or not callable(getattr(event, "model_dump", None)):
            raise TypeError(f"cannot record {type(event).__name__!r}: not an agent event")
        if kind == "message_update" and not self.updates:
            return
        self.event_count += 1
        t = self._clock()
        if kind == "agent_end":
            self.end_reason = getattr(event, "reason", None)
        try:
            data = _event_data(event)
            kept = AGENT_EVENT_ADAPTER.validate_python(data) if self.keep_events else None
        except Exception as exc:
            logger.error("RunRecorder: cannot record a %s event (%s); it is left out", kind, exc)
            return
        if kept is not None:
            self.events.append(kept)
            self._order.append((None, len(self.events) - 1))
            self._times.append(t)
        self._record({"kind": "event", "event": data}, t)

    def on_transition(self, record: Any) -> None:
        """Record one transition of :attr:`machine` (a ``TransitionRecord``)."""
        self._transition(self.machine, record)

    def transition_callback(self, machine: str) -> Callable[[Any], None]:
        """An ``on_transition`` callback that records transitions of another ``machine``."""
        return lambda record: self._transition(machine, record)

    def _transition(self, machine: str, record: Any) -> None:
        rec = TransitionRecord(
            int(record.index), str(record.trigger), str(record.source), str(record.dest)
        )
        t = self._clock()
        records = self.machine_transitions.setdefault(machine, [])
        records.append(rec)
        self._order.append((machine, len(records) - 1))
        self._times.append(t)
        self._record(
            {
                "kind": "transition",
                "machine": machine,
                "index": rec.index,
                "trigger": rec.trigger,
                "source": rec.source,
                "dest": rec.dest,
            },
            t,
        )

    def _clock(self) -> float:
        """Seconds since the recorder was made, as a record's ``t`` holds them."""
        return round(time.monotonic() - self._t0, 6)

    # --- file ---------------------------------------------------------------------------------

    def _record(self, obj: dict[str, Any], t: float) -> None:
        """Write one record (taken at ``t``) if there is a file; never raises (see the module
        docstring)."""
        if self._file is None:
            return
        try:
            self._write(obj, t)
        except _Unserialisable as exc:
            what = obj["kind"]
            if what == "event" and isinstance(obj.get("event"), dict):
                what = f"{obj['event'].get('type')} event"
            logger.error(
                "RunRecorder: cannot serialise a %s record for %s (%s); it is left out",
                what,
                self.path,
                exc.__cause__,
            )
        except Exception as exc:
            self._give_up(exc)

    def _write(self, obj: dict[str, Any], t: float | None = None) -> None:
        """Write one record (a ``seq`` and ``t``, now unless given, are added to all but the
        header); raises."""
        file = self._file
        if file is None:
            raise ValueError("the recorder is closed")
        seq = self._seq
        if obj["kind"] != "run":
            seq += 1
            obj = {
                "kind": obj["kind"],
                "seq": seq,
                "t": self._clock() if t is None else t,
                **{k: v for k, v in obj.items() if k != "kind"},
            }
        try:
            data = (_dumps(obj) + "\n").encode("utf-8")
        except Exception as exc:  # nothing was written: the file is as it was
            raise _Unserialisable() from exc
        view = memoryview(data)
        while view:
            count = file.write(view)
            if not count:
                raise OSError(f"the file took none of {len(view)} bytes")
            view = view[count:]
        self._seq = seq
        self._size += len(data)

    def _give_up(self, exc: Exception) -> None:
        """A write failed: log it, take back the part of a line it may have left, stop writing."""
        self.error = exc
        logger.error(
            "RunRecorder: writing %s failed (%s: %s); the recording stops here, the run goes on",
            self.path,
            type(exc).__name__,
            exc,
        )
        file, self._file = self._file, None
        if file is None:
            return
        try:
            file.truncate(self._size)
        except Exception:
            pass  # closed underneath, or the file system refuses: nothing more can be done
        try:
            file.close()
        except Exception:
            pass

    def close(self) -> None:
        """Close the file (a failure to close is logged and kept in :attr:`error`)."""
        file, self._file = self._file, None
        if file is None:
            return
        try:
            file.close()
        except Exception as exc:
            self.error = self.error or exc
            logger.error("RunRecorder: closing %s failed (%s)", self.path, exc)

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading ------------------------------------------------------------------------------

    def recorded(self) -> RecordedRun:
        """What was recorded so far, as a :class:`RecordedRun` (events only if kept)."""
        return RecordedRun(
            machine=self.machine,
            events=list(self.events),
            machines={name: list(recs) for name, recs in self.machine_transitions.items()},
            order=list(self._order),
            times=list(self._times),
        )


class _Unserialisable(Exception):
    """A record could not be turned into a JSON line (its cause says why)."""


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
    """

    machine: str
    events: list[Any] = field(default_factory=list)
    machines: dict[str, list[TransitionRecord]] = field(default_factory=dict)
    order: list[tuple[str | None, int]] = field(default_factory=list)
    times: list[float | None] = field(default_factory=list)

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


def describe_event(event: Any) -> str:
    """A short label of an agent event, as the steps of a run list it: ``turn_start``,
    ``message_end(assistant: error)``, ``tool_execution_end(add: error)``,
    ``approval_requested(pay)``, ``approval_decided(pay: approved)`` (``denied``, and ``by
    WHO`` when another than "user" decided: ``approval_decided(pay: denied by timeout)``),
    ``agent_end(completed)``."""
    kind = str(getattr(event, "type", "?"))
    if kind in ("message_start", "message_end"):
        message = event.message
        role = str(getattr(message, "role", "?"))
        stop = getattr(message, "stop_reason", None)
        if getattr(message, "is_error", False):
            role += ": error"
        elif stop in _BAD_ENDS:
            role += f": {stop}"
        return f"{kind}({role})"
    if kind == "message_update":
        return f"message_update({event.assistant_message_event.type})"
    if kind in ("tool_execution_start", "tool_execution_update"):
        return f"{kind}({event.tool_name})"
    if kind == "tool_execution_end":
        return f"{kind}({event.tool_name}{': error' if event.is_error else ''})"
    if kind == "approval_requested":
        return f"{kind}({event.tool_name})"
    if kind == "approval_decided":
        verdict = "approved" if event.approved else "denied"
        who = str(event.decided_by)
        by = f" by {clip(who, 24)}" if who != "user" else ""
        return f"{kind}({event.tool_name}: {verdict}{by})"
    if kind == "agent_end":
        return f"agent_end({event.reason})"
    return kind


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """The file's non-blank lines, numbered; a line that is not UTF-8 raises RunFileError."""
    with path.open(encoding="utf-8", errors="surrogateescape") as file:
        for number, line in enumerate(file, 1):
            bad = _UNDECODABLE.search(line)
            if bad is not None:
                byte = ord(bad.group()) - 0xDC00
                raise RunFileError(
                    f"{path}:{number}: not UTF-8 text (byte 0x{byte:02x} at column "
                    f"{bad.start() + 1})"
                )
            if line.strip():
                yield number, line


def _parse(where: str, line: str, code_points: bool) -> dict[str, Any]:
    try:
        obj = _loads_code_points(line) if code_points else json.loads(line)
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{where}: not JSON: {exc.msg}") from None
    except RecursionError:
        raise RunFileError(f"{where}: not JSON this reader can take: nested too deeply") from None
    if not isinstance(obj, dict) or "kind" not in obj:
        raise RunFileError(f"{where}: expected a JSON object with a 'kind'")
    return obj


def load_run(path: str | os.PathLike[str]) -> RecordedRun:
    """Read a recording written by :class:`RunRecorder`; validate every event and transition.

    Raises :class:`RunFileError` (a ``ValueError``) naming the line at fault, ``OSError`` when
    the file cannot be read.
    """
    path = Path(path)
    run: RecordedRun | None = None
    code_points = False  # the header says surrogate escapes are single code points
    for number, line in _lines(path):
        where = f"{path}:{number}"
        obj = _parse(where, line, code_points)
        kind = obj["kind"]
        if kind == "run":
            if run is not None:
                raise RunFileError(f"{where}: a second 'run' header")
            if obj.get("format") != RUN_FORMAT:
                raise RunFileError(
                    f"{where}: not an agentcore-fsm run (format {obj.get('format')!r})"
                )
            version = obj.get("version")
            if version != RUN_FORMAT_VERSION:
                raise RunFileError(
                    f"{where}: run format version {version!r} is not supported "
                    f"(this version reads {RUN_FORMAT_VERSION})"
                )
            machine = obj.get("machine")
            if not isinstance(machine, str):
                raise RunFileError(f"{where}: the header has no machine name")
            run = RecordedRun(machine=machine, machines={machine: []})
            code_points = obj.get("surrogates") == "escaped"
            continue
        if run is None:
            raise RunFileError(f"{where}: the file does not start with a 'run' header")
        t = obj.get("t")
        reading = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None
        if reading is not None and not math.isfinite(reading):
            reading = None
        if kind == "event":
            try:
                event = AGENT_EVENT_ADAPTER.validate_python(obj["event"])
            except KeyError:
                raise RunFileError(f"{where}: an event record without 'event'") from None
            except ValueError as exc:
                raise RunFileError(f"{where}: invalid event: {exc}") from None
            run.events.append(event)
            run.order.append((None, len(run.events) - 1))
            run.times.append(reading)
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
            run.order.append((machine, len(records) - 1))
            run.times.append(reading)
        else:
            raise RunFileError(f"{where}: unknown record kind {kind!r}")
    if run is None:
        raise RunFileError(f"{path}: empty file, not a run recording")
    return run


def _field(obj: dict[str, Any], name: str, kind: type[Any]) -> Any:
    value = obj[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"{name!r} must be {kind.__name__}, not {type(value).__name__}")
    return value
