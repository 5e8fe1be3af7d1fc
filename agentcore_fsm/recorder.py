"""Recording a run to JSONL, and reading it back (for diagrams, debugging and regression tests).

A :class:`RunRecorder` is three things at once:

* an ``emit`` sink: ``run_agent_loop(..., emit=rec)`` — it is called with each event;
* an ``Agent`` listener: ``agent.subscribe(rec)`` — it is called as ``rec(event, signal)``;
* a transition callback: ``run_agent_loop(..., on_transition=rec.on_transition)``.

It writes one JSON object per line, in the order things happened::

    {"kind": "run", "format": "agentcore-fsm.run", "version": 1, "machine": "agent_loop", ...}
    {"kind": "transition", "seq": 1, "t": 0.0001, "machine": "agent_loop", "index": 0,
     "trigger": "start", "source": "idle", "dest": "awaiting_steering"}
    {"kind": "event", "seq": 2, "t": 0.0002, "event": {"type": "agent_start"}}

``seq`` numbers every record; ``t`` is seconds since the recorder was made (for reading, never
compared by anything here). Events are stored in their camelCase JSON form
(``event.model_dump(mode="json", by_alias=True)``), serialised *when they are emitted* — a
streamed partial message is mutated in place afterwards, so this is the only faithful moment.
Each line is flushed as it is written, so a run that crashes the process still leaves a readable
record up to its last step.

:func:`load_run` reads a file back: every event is validated with ``AGENT_EVENT_ADAPTER``
(so you get the same event classes the loop emits), every transition becomes a
:class:`~agentcore_fsm.machine.TransitionRecord`. A malformed line raises :class:`RunFileError`
naming the file and line. ``agentcore-fsm diagram --run RUN.jsonl`` renders a recording.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .events import AGENT_EVENT_ADAPTER
from .machine import TransitionRecord

__all__ = [
    "RUN_FORMAT",
    "RUN_FORMAT_VERSION",
    "RecordedRun",
    "RunFileError",
    "RunRecorder",
    "load_run",
]

RUN_FORMAT = "agentcore-fsm.run"
RUN_FORMAT_VERSION = 1


class RunFileError(ValueError):
    """A run recording cannot be read (not JSONL, an unknown record, an invalid event, ...)."""


def _event_json(event: Any) -> Any:
    """The camelCase JSON form of an agent event (a dict is validated first)."""
    if isinstance(event, dict):
        event = AGENT_EVENT_ADAPTER.validate_python(event)
    dump = getattr(event, "model_dump", None)
    if dump is None:
        raise TypeError(f"cannot record {type(event).__name__!r}: not an agent event")
    try:
        return dump(mode="json", by_alias=True)
    except Exception:
        # a tool's ``details`` may hold something JSON cannot carry: keep its repr rather than
        # losing the event (or failing the run being recorded)
        return dump(mode="json", by_alias=True, fallback=repr)


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
        self.end_reason: str | None = None
        self.event_count = 0
        self._seq = 0
        self._t0 = time.monotonic()
        self._file: IO[str] | None = None
        if self.path is not None:
            self._file = self.path.open("w", encoding="utf-8")
            self._write(
                {
                    "kind": "run",
                    "format": RUN_FORMAT,
                    "version": RUN_FORMAT_VERSION,
                    "machine": machine,
                }
            )

    # --- sinks --------------------------------------------------------------------------------

    def __call__(self, event: Any, signal: Any = None) -> None:
        """Record one event. The signature fits both an ``emit`` sink and an Agent listener."""
        kind = getattr(event, "type", None)
        if kind is None and isinstance(event, dict):
            kind = event.get("type")
        if kind == "message_update" and not self.updates:
            return
        data = _event_json(event)
        self.event_count += 1
        if kind == "agent_end":
            self.end_reason = data.get("reason")
        if self.keep_events:
            self.events.append(AGENT_EVENT_ADAPTER.validate_python(data))
        if self._file is not None:
            self._write({"kind": "event", "event": data})

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
        self.machine_transitions.setdefault(machine, []).append(rec)
        if self._file is not None:
            self._write(
                {
                    "kind": "transition",
                    "machine": machine,
                    "index": rec.index,
                    "trigger": rec.trigger,
                    "source": rec.source,
                    "dest": rec.dest,
                }
            )

    # --- file ---------------------------------------------------------------------------------

    def _write(self, obj: dict[str, Any]) -> None:
        file = self._file
        if file is None:
            raise ValueError("the recorder is closed")
        if obj["kind"] != "run":
            self._seq += 1
            obj = {
                "kind": obj["kind"],
                "seq": self._seq,
                "t": round(time.monotonic() - self._t0, 6),
                **{k: v for k, v in obj.items() if k != "kind"},
            }
        file.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
        file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

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
        )


@dataclass
class RecordedRun:
    """A run read back by :func:`load_run` (or taken from a live :class:`RunRecorder`).

    ``events``: the validated agent events, in order. ``machines``: every recorded machine's
    transitions, in order. ``machine``: the recording's main machine (``agent_loop`` for a
    loop run); :attr:`transitions` are its transitions.
    """

    machine: str
    events: list[Any] = field(default_factory=list)
    machines: dict[str, list[TransitionRecord]] = field(default_factory=dict)

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


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RunFileError(f"{path}:{number}: not JSON: {exc.msg}") from None
            if not isinstance(obj, dict) or "kind" not in obj:
                raise RunFileError(f"{path}:{number}: expected a JSON object with a 'kind'")
            yield number, obj


def load_run(path: str | os.PathLike[str]) -> RecordedRun:
    """Read a recording written by :class:`RunRecorder`; validate every event and transition.

    Raises :class:`RunFileError` (a ``ValueError``) naming the line at fault.
    """
    path = Path(path)
    run: RecordedRun | None = None
    for number, obj in _lines(path):
        kind = obj["kind"]
        where = f"{path}:{number}"
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
            continue
        if run is None:
            raise RunFileError(f"{where}: the file does not start with a 'run' header")
        if kind == "event":
            try:
                event = AGENT_EVENT_ADAPTER.validate_python(obj["event"])
            except KeyError:
                raise RunFileError(f"{where}: an event record without 'event'") from None
            except ValueError as exc:
                raise RunFileError(f"{where}: invalid event: {exc}") from None
            run.events.append(event)
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
            run.machines.setdefault(machine, []).append(record)
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
