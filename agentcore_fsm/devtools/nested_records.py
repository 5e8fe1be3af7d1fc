"""The nested runs of a run, found in its store or recording (docs/debugging.md#nested-runs).

A run of an outer agent that calls another agent as a tool (docs/multi-agent.md) keeps the
inner run's record beside its own, in the same store or recording:

* its run id is ``"<outer run id>/<n>.<call id>"``: ``n`` is the index, in the outer run's
  transcript, of the assistant message that holds the call (a call id can come back in a later
  turn), and deeper runs nest the id again (``"run-1/1.c1/1.c7"``);
* its header is an ordinary run header plus ``"parent"``: ``{"run": OUTER RUN ID, "call":
  CALL ID, "path": [call ids from the outermost run down], "agents": [the tools' names along
  that path]}``;
* its entries are an ordinary run's.

:func:`nested_runs` lists the runs nested in one run, recursively (a :class:`NestedRun` each,
with its own ``children``); :func:`nesting` gives, for every run of a source, the runs started
in it, in the form the viewer takes (``{parent: [(step, child)]}``). Both read a run store
(``MemoryRunStore``, ``SqliteRunStore``: any object with ``runs()`` and ``load()``), a path to
a JSONL recording or a SQLite store, or records already read (:func:`read_records`).

**The step a nested run started at** (:attr:`NestedRun.step`) is the step of the parent (an
entry of its record, counted from 0) whose input made the machine start the call: the one whose
events hold the call's ``tool_execution_start``. That is usually the model answer that
requested it (:attr:`NestedRun.requested`), but a call run after others (sequential tools) or
after an approval starts at a later step: the step of the earlier call's result, or of the
decision. The nested run runs while the parent waits after that step. :attr:`NestedRun.finished`
is the step whose input fed the call's result back (its ``tool_execution_end``), None while the
call had not finished when the record stops.

**Bad input** raises :class:`NestedRecordError` (a ``ValueError``), one line naming the run and
what is wrong: a ``"parent"`` that is not of the shape above, or does not fit the run's id, a
parent run the source does not hold, a parent whose record has no such call.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentcore_fsm.persist.codec import RecordError
from agentcore_fsm.persist.journal import RunSnapshot, derive_run
from agentcore_fsm.persist.recording import RecordedRun, RunRecord, load_run
from agentcore_fsm.persist.store_rules import RunStoreError

__all__ = [
    "NestedRecordError",
    "NestedRun",
    "ParentLink",
    "Record",
    "nested_runs",
    "nesting",
    "parent_link",
    "read_records",
    "recording_records",
    "top_level",
    "without_parent",
]

SQLITE_MAGIC = b"SQLite format 3\x00"
_CHILD_TAIL = re.compile(r"/(\d+)\.([^/]+)$")


class NestedRecordError(ValueError):
    """A nested run's record that does not fit its parent (one line: the run, what is wrong)."""


@dataclass
class Record:
    """One run's record as a source holds it: its id, header, entries, end reason (None while
    unfinished) and where it came from (for error texts)."""

    run_id: str
    header: dict[str, Any]
    entries: list[dict[str, Any]]
    end_reason: str | None = None
    origin: str = ""


@dataclass(frozen=True)
class ParentLink:
    """A nested run's ``"parent"`` header field, checked: the parent's run id, the call, the
    path of calls and the agents along it (outermost first), and ``n``, the index of the
    assistant message holding the call in the parent's transcript (from the run id)."""

    run: str
    call: str
    path: tuple[str, ...]
    agents: tuple[str, ...]
    n: int


@dataclass(frozen=True)
class NestedRun:
    """A run nested in another (see the module's documentation for the steps)."""

    run_id: str
    parent: str
    call: str
    path: tuple[str, ...]
    agents: tuple[str, ...]
    step: int
    """The parent's step whose input started the call (its ``tool_execution_start``)."""
    requested: int
    """The parent's step whose model answer requested the call."""
    finished: int | None
    """The parent's step that fed the call's result back; None when the record stops first."""
    children: tuple[NestedRun, ...] = field(default=())

    def walk(self) -> Iterable[NestedRun]:
        """This run and every run below it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    @property
    def label(self) -> str:
        """``researcher (c1) > checker (c7)``: the agents and calls from the outermost run."""
        return " > ".join(f"{a} ({c})" for a, c in zip(self.agents, self.path, strict=True))


def _strings(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(v, str) and v for v in value):
        return None
    return tuple(value)


def parent_link(run_id: str, header: Mapping[str, Any]) -> ParentLink | None:
    """The checked ``"parent"`` of a run's header (None when it has none: a top-level run).
    Raises :class:`NestedRecordError` for one of the wrong shape."""
    if "parent" not in header:
        return None
    parent = header["parent"]
    where = f'run {run_id!r}: its header\'s "parent"'
    if not isinstance(parent, dict):
        raise NestedRecordError(f"{where} must be an object, not {type(parent).__name__}")
    for key in ("run", "call"):
        value = parent.get(key)
        if not isinstance(value, str) or not value:
            raise NestedRecordError(f"{where} needs {key!r}, a non-empty string (got {value!r})")
    path, agents = _strings(parent.get("path")), _strings(parent.get("agents"))
    if path is None or agents is None:
        raise NestedRecordError(f"{where} needs 'path' and 'agents', non-empty lists of strings")
    if len(path) != len(agents):
        raise NestedRecordError(
            f"{where}: 'path' has {len(path)} calls but 'agents' {len(agents)} names"
        )
    if path[-1] != parent["call"]:
        raise NestedRecordError(f"{where}: 'path' must end with its call {parent['call']!r}")
    match = _CHILD_TAIL.search(run_id)
    if (
        match is None
        or match.group(2) != parent["call"]
        or run_id[: match.start()] != parent["run"]
    ):
        raise NestedRecordError(
            f"{where} names run {parent['run']!r} and call {parent['call']!r}, so the run's id "
            f"should be '{parent['run']}/<n>.{parent['call']}'"
        )
    return ParentLink(parent["run"], parent["call"], path, agents, int(match.group(1)))


def without_parent(header: dict[str, Any]) -> dict[str, Any]:
    """``header`` without its ``"parent"`` (what the machine is fed: the link to the parent is
    the store's business, not the run's)."""
    if "parent" not in header:
        return header
    return {k: v for k, v in header.items() if k != "parent"}


# --- reading the records of a source ------------------------------------------------------------


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _of_store(store: Any, origin: str) -> list[Record]:
    try:
        loaded = [store.load(info.run_id) for info in store.runs()]
    except (RunStoreError, RecordError) as exc:
        raise NestedRecordError(f"{origin}: {_one_line(exc)}") from None
    return [Record(r.run_id, r.header, r.entries, r.end_reason, origin) for r in loaded]


def recording_records(path: str | os.PathLike[str]) -> list[RunRecord]:
    """Every run's record in a JSONL recording: the outermost runs' (in the order they began),
    then the nested runs' (:attr:`~agentcore_fsm.persist.recording.RecordedRun.nested_records`).
    The file is read, and validated, by :func:`~agentcore_fsm.persist.recording.load_run`,
    whose errors pass through (a :class:`~agentcore_fsm.persist.codec.RecordError` naming the
    line, ``OSError`` when the file cannot be read)."""
    recorded = load_run(path)
    return [*recorded.records, *recorded.nested_records]


def _of_recording(path: Path) -> list[Record]:
    records = recording_records(path)
    return [
        Record(r.run_id, r.header, r.entries, r.end_reason, f"{path}:{r.header_line}")
        for r in records
    ]


def read_records(source: Any) -> dict[str, Record]:
    """Every run's record in ``source`` by run id: a run store, a path to a SQLite run store or
    a JSONL recording (told apart by the first bytes), a
    :class:`~agentcore_fsm.persist.recording.RecordedRun`, a mapping of run ids to
    :class:`Record`, or records. Raises :class:`NestedRecordError`, the reader's
    :class:`~agentcore_fsm.persist.codec.RecordError` for a damaged recording, ``OSError`` for
    a file that cannot be read."""
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        with path.open("rb") as file:
            magic = file.read(len(SQLITE_MAGIC))
        if magic == SQLITE_MAGIC:
            from agentcore_fsm.persist.sqlite_store import SqliteRunStore

            try:
                store = SqliteRunStore(path)
            except (RunStoreError, sqlite3.Error) as exc:
                raise NestedRecordError(f"{path}: {_one_line(exc)}") from None
            try:
                records = _of_store(store, str(path))
            finally:
                store.close()
        else:
            records = _of_recording(path)
    elif isinstance(source, RecordedRun):
        records = [
            Record(r.run_id, r.header, r.entries, r.end_reason)
            for r in [*source.records, *source.nested_records]
        ]
    elif callable(getattr(source, "runs", None)) and callable(getattr(source, "load", None)):
        records = _of_store(source, type(source).__name__)
    elif isinstance(source, Iterable):
        records = list(source)
    else:
        raise NestedRecordError(f"cannot read runs from a {type(source).__name__}")
    return {r.run_id: r for r in records}


# --- finding the nested runs --------------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    requested: int
    started: int
    finished: int | None
    message: int  # the index of the assistant message holding it in the full transcript
    new_message: int  # ... among the run's new messages only


def _calls(record: Record) -> dict[str, list[_Call]]:
    """Each tool call of a run's record: the steps it was requested, started and finished at."""
    snapshot = RunSnapshot.of(without_parent(record.header), record.entries)
    try:
        derived = derive_run(snapshot, run_id=record.run_id)
    except RecordError as exc:
        raise NestedRecordError(_one_line(exc)) from None
    context = record.header.get("context")
    earlier = context.get("messages") if isinstance(context, dict) else None
    before = len(earlier) if isinstance(earlier, list) else 0
    events = derived.events
    requested: dict[str, tuple[int, int]] = {}
    started: dict[str, int] = {}
    calls: dict[str, list[_Call]] = {}
    messages = 0
    done = 0
    for k in range(len(record.entries)):
        marks = derived.marks[k] if k < len(derived.marks) else []
        end = marks[-1][1] if marks else done
        for event in events[done:end]:
            kind = event.type
            if kind == "message_end":
                message = event.message
                if getattr(message, "role", None) == "assistant":
                    for block in message.content:
                        if getattr(block, "type", None) == "toolCall":
                            requested[block.id] = (k, messages)
                messages += 1
            elif kind == "tool_execution_start":
                started[event.tool_call_id] = k
            elif kind == "tool_execution_end":
                _close(calls, requested, started, event.tool_call_id, k, before)
        done = end
    for call_id in list(started):
        _close(calls, requested, started, call_id, None, before)
    return calls


def _close(
    calls: dict[str, list[_Call]],
    requested: dict[str, tuple[int, int]],
    started: dict[str, int],
    call_id: str,
    finished: int | None,
    before: int,
) -> None:
    step = started.pop(call_id, None)
    asked = requested.get(call_id)
    if step is None or asked is None:
        return
    calls.setdefault(call_id, []).append(
        _Call(asked[0], step, finished, before + asked[1], asked[1])
    )


def _the_call(child: str, link: ParentLink, calls: list[_Call]) -> _Call:
    if not calls:
        raise NestedRecordError(
            f"run {child!r}: its parent run {link.run!r} has no tool call {link.call!r} "
            f"that started"
        )
    if len(calls) == 1:
        return calls[0]
    # n counts the whole transcript (the context the run began with included); a count of
    # the run's own messages is taken too
    chosen = [c for c in calls if c.message == link.n] or [
        c for c in calls if c.new_message == link.n
    ]
    if chosen:
        return chosen[0]
    raise NestedRecordError(
        f"run {child!r}: its parent run {link.run!r} has no tool call {link.call!r} in its "
        f"message #{link.n}"
    )


def _links(records: Mapping[str, Record]) -> dict[str, ParentLink]:
    links: dict[str, ParentLink] = {}
    for run_id, record in records.items():
        link = parent_link(run_id, record.header)
        if link is None:
            continue
        parent = records.get(link.run)
        if parent is None:
            where = f" of {record.origin}" if record.origin else ""
            raise NestedRecordError(
                f"run {run_id!r}: its parent run {link.run!r} is not among the runs{where}"
            )
        above = parent_link(link.run, parent.header)
        expected = (*(above.path if above else ()), link.call)
        if link.path != expected:
            raise NestedRecordError(
                f'run {run_id!r}: its header\'s "parent" has path {list(link.path)}, but its '
                f"parent's path and call make {list(expected)}"
            )
        links[run_id] = link
    return links


def _tree(
    records: Mapping[str, Record],
    links: Mapping[str, ParentLink],
    run_id: str,
    calls_of: dict[str, dict[str, list[_Call]]],
) -> tuple[NestedRun, ...]:
    out: list[NestedRun] = []
    parent = records[run_id]
    for child_id, link in links.items():
        if link.run != run_id:
            continue
        if run_id not in calls_of:
            calls_of[run_id] = _calls(parent)
        call = _the_call(child_id, link, calls_of[run_id].get(link.call, []))
        out.append(
            NestedRun(
                run_id=child_id,
                parent=run_id,
                call=link.call,
                path=link.path,
                agents=link.agents,
                step=call.started,
                requested=call.requested,
                finished=call.finished,
                children=_tree(records, links, child_id, calls_of),
            )
        )
    out.sort(key=lambda r: (r.step, r.run_id))
    return tuple(out)


def nested_runs(source: Any, run_id: str) -> list[NestedRun]:
    """The runs nested in run ``run_id`` of ``source`` (see :func:`read_records`), each with
    its own nested runs in ``children``, ordered by the step they started at. Every nested run
    of the source is checked (its ``"parent"``, its parent, the call), not only those below
    ``run_id``. Raises :class:`NestedRecordError`."""
    records = read_records(source)
    if run_id not in records:
        raise NestedRecordError(f"no run {run_id!r} (the source holds {len(records)} runs)")
    links = _links(records)
    return list(_tree(records, links, run_id, {}))


def nesting(source: Any) -> dict[str, list[tuple[int, str]]]:
    """Every run of ``source`` that has nested runs: ``{parent run id: [(step, child run id),
    ...]}`` (the step as :attr:`NestedRun.step`), the form the viewer's ``nested=`` takes.
    Empty when no run is nested. Raises :class:`NestedRecordError`."""
    records = read_records(source)
    links = _links(records)
    calls_of: dict[str, dict[str, list[_Call]]] = {}
    out: dict[str, list[tuple[int, str]]] = {}
    for top in [r for r in records if r not in links]:
        for nested in _tree(records, links, top, calls_of):
            for run in nested.walk():
                out.setdefault(run.parent, []).append((run.step, run.run_id))
    return out


def top_level(records: Mapping[str, Record]) -> list[str]:
    """The ids of the runs that are not nested in another, in the source's order."""
    return [run_id for run_id, record in records.items() if "parent" not in record.header]
