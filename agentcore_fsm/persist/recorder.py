"""Recording a run to JSONL (for diagrams, debugging, regression tests and resuming), in the
format of docs/record.md; :func:`~agentcore_fsm.persist.recording.load_run` reads it back.

A :class:`RunRecorder` is four things at once:

* a run store (:attr:`RunRecorder.store`): ``run_agent_loop(..., store=rec.store,
  run_id=...)`` journals the run into it, so the file holds the run's **record**, its header
  and every input its machine was fed, from which everything else is derived;
* an ``emit`` sink: ``run_agent_loop(..., emit=rec)`` — it is called with each event;
* an ``Agent`` listener: ``agent.subscribe(rec)`` — it is called as ``rec(event, signal)``;
* a transition callback: ``run_agent_loop(..., on_transition=rec.on_transition)``.

It writes one JSON object per line, in the order things happened::

    {"kind": "run", "format": "agentcore-fsm.run", "version": 2, "machine": "agent_loop",
     "surrogates": "escaped"}
    {"kind": "header", "seq": 1, "t": 0.0001, "run": "run-1", "header": {...}}
    {"kind": "transition", "seq": 2, "t": 0.0002, "machine": "agent_loop", "index": 0,
     "trigger": "start", "source": "idle", "dest": "awaiting_steering"}
    {"kind": "input", "seq": 3, "t": 0.0002, "run": "run-1", "n": 0,
     "entry": {"input": "start", "clock": [1717171717171]}}
    {"kind": "event", "seq": 4, "t": 0.0003, "event": {"type": "agent_start"}}
    ...
    {"kind": "end", "seq": 40, "t": 0.02, "run": "run-1", "reason": "completed"}

The events and transitions are what the run emitted and took, kept for people and regression
diffs; a reader derives the transitions (and, when the file has no events, the events) from
the inputs. A recorder given only as ``emit`` and ``on_transition`` writes events and
transitions only, as earlier releases did.

``seq`` numbers every record; ``t`` is seconds since the recorder was made, one clock reading
(monotonic) per record. Nothing compares it: the reader keeps it
(:attr:`~agentcore_fsm.persist.recording.RecordedRun.times`) so that a run view can say how long
the run waited, e.g. for an approval. Events are stored in their camelCase JSON form,
serialised *when they are emitted* — a streamed partial message is mutated in place
afterwards, so this is the only faithful moment. An update that carries a nested run's event
(an agent as a tool) holds it in its JSON form, the line marked ``"nested": true``
(docs/record.md#nested-runs). Each line is written as it happens, so a run
that crashes the process still leaves a readable record up to its last step (the reader skips
a last line the crash cut short).

**Any text is recorded exactly.** The file is UTF-8 JSON written by
:mod:`agentcore_fsm.persist.json_text`: every character as itself, except surrogate code points
(a lone half of an emoji, or two halves that stayed two code points), each written as its own
upper-case ``\\uXXXX`` escape and read back as that one code point.

**A recorder never breaks the run it records.** Once the file is open and its header written
(failures there raise from the constructor, before anything ran), nothing it is handed raises
into the run: when writing fails (a full disk, the file closed underneath, ...), the error is
logged on the ``agentcore_fsm`` logger and kept in :attr:`RunRecorder.error`, the half-written
line is taken back, and the recorder stops writing, so the file holds whole lines up to the
failure; an event that cannot be serialised at all (nested deeper than the serialiser goes) is
logged and left out. The in-memory side (transitions, the store's records,
:attr:`RunRecorder.end_reason`, the event count) keeps going. Handing it something that is not
an agent event is a programming error and raises ``TypeError`` (a ``ValidationError`` for an
invalid event dict). (The store itself refuses what any run store refuses: an entry out of
sequence, a run id taken; the run then fails as with any store.)

``agentcore-fsm diagram --run RUN.jsonl`` renders a recording (``--steps`` lists its steps in
order, the summary above them); ``agentcore-fsm replay RUN.jsonl`` replays it.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from agentcore_fsm.core.boundary import json_data
from agentcore_fsm.core.events import AGENT_EVENT_ADAPTER
from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.core.nesting import nested_event_of
from agentcore_fsm.persist import json_text
from agentcore_fsm.persist.recording import (
    RUN_FORMAT,
    RUN_FORMAT_VERSION,
    RecordedApproval,
    RecordedRun,
    RunFileError,
    RunRecord,
    describe_event,
    duration_text,
    event_data,
    event_from_data,
    load_run,
    run_error,
    split_records,
    tool_errors,
)
from agentcore_fsm.persist.store import MemoryRunStore

__all__ = [
    "RUN_FORMAT",
    "RUN_FORMAT_VERSION",
    "RecordedApproval",
    "RecordedRun",
    "RecordingStore",
    "RunFileError",
    "RunRecord",
    "RunRecorder",
    "describe_event",
    "duration_text",
    "load_run",
    "run_error",
    "tool_errors",
]

logger = logging.getLogger("agentcore_fsm")


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float made None (what pydantic's JSON mode does)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _dumps(obj: dict[str, Any]) -> str:
    """One line of strict JSON (:mod:`agentcore_fsm.persist.json_text`): a value JSON cannot
    carry is made JSON data (:func:`~agentcore_fsm.core.boundary.json_data`: its repr, at
    worst); NaN and the infinities become null."""
    try:
        return json_text.dumps(obj, default=json_data, allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere (or a cycle: that raises again)
        return json_text.dumps(_finite(obj), default=json_data, allow_nan=False)


class RunRecorder:
    """Records a run's events and transitions (see the module docstring).

    ``path``: the JSONL file to write (created or truncated when the recorder is made); ``None``
    records in memory only. ``machine``: the declaration whose transitions
    :meth:`on_transition` receives (``agent_loop`` unless you record another machine; use
    :meth:`transition_callback` to record a second machine into the same file). ``updates``:
    record ``message_update`` events, the nested runs' included (default True; pass False to keep
    long streamed runs small).
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
        self.store = RecordingStore(self._run_record)
        """The run store whose runs' records (header, inputs, end) this recorder writes:
        ``run_agent_loop(..., store=rec.store, run_id=...)`` (see :class:`RecordingStore`)."""
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
        nested = nested_event_of(event)
        if not self.updates and (
            kind == "message_update" or (nested is not None and nested.type == "message_update")
        ):
            return
        self.event_count += 1
        t = self._clock()
        if kind == "agent_end":
            self.end_reason = getattr(event, "reason", None)
        try:
            data = event_data(event)
            kept = event_from_data(data, nested is not None) if self.keep_events else None
        except Exception as exc:
            logger.error("RunRecorder: cannot record a %s event (%s); it is left out", kind, exc)
            return
        if kept is not None:
            self.events.append(kept)
            self._order.append((None, len(self.events) - 1))
            self._times.append(t)
        line: dict[str, Any] = {"kind": "event", "event": data}
        if nested is not None:
            line["nested"] = True
        self._record(line, t)

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

    def _run_record(self, obj: dict[str, Any]) -> None:
        """Write one line of a run's record (the store's side); never raises."""
        self._record(obj, self._clock())

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
        records = []
        for info in self.store.runs():
            stored = self.store.load(info.run_id)
            ended = stored.end_reason if stored.status == "finished" else None
            records.append(RunRecord(info.run_id, stored.header, stored.entries, ended))
        top, nested = split_records(records)
        return RecordedRun(
            machine=self.machine,
            events=list(self.events),
            machines={name: list(recs) for name, recs in self.machine_transitions.items()},
            order=list(self._order),
            times=list(self._times),
            records=top,
            nested_records=nested,
        )


class RecordingStore(MemoryRunStore):
    """The run store of a :class:`RunRecorder` (:attr:`RunRecorder.store`): a
    :class:`~agentcore_fsm.persist.store.MemoryRunStore` (so the runs can be loaded and resumed
    from it while the process lives) that also writes each run's record to the recording as it
    is made: a ``header`` line when a run is created, an ``input`` line per entry appended, an
    ``end`` line when it finishes. ``write(obj)`` writes one line and never raises."""

    def __init__(self, write: Callable[[dict[str, Any]], None]) -> None:
        super().__init__()
        self.write = write

    def __repr__(self) -> str:
        return f"RecordingStore({len(self.runs())} runs)"

    def create_run(
        self,
        run_id: str,
        header: dict[str, Any],
        *,
        session_id: str | None,
        owner: str,
        lease_s: float,
    ) -> None:
        super().create_run(run_id, header, session_id=session_id, owner=owner, lease_s=lease_s)
        self.write({"kind": "header", "run": run_id, "header": header})

    def append(
        self, run_id: str, seq: int, entry: dict[str, Any], *, owner: str, lease_s: float
    ) -> None:
        super().append(run_id, seq, entry, owner=owner, lease_s=lease_s)
        self.write({"kind": "input", "run": run_id, "n": seq, "entry": entry})

    def finish(self, run_id: str, end_reason: str, *, owner: str) -> None:
        super().finish(run_id, end_reason, owner=owner)
        self.write({"kind": "end", "run": run_id, "reason": end_reason})


class _Unserialisable(Exception):
    """A record could not be turned into a JSON line (its cause says why)."""
