"""The run viewer: one self-contained HTML file to step through a run in a browser.

``agentcore-fsm view RUN.jsonl -o run.html`` (or :func:`write_viewer`) writes a page that needs
no network and no server (open it from disk): the declared machine's diagram
(:mod:`agentcore_fsm.devtools.viewer_svg`) with the current state and the path so far
highlighted, a timeline of the run's steps (buttons, the arrow keys, a slider, and jumps to the
first error, the next tool call and the next approval), the transcript at that step, the
step's input, transitions and events, the usage and the timing. Nested runs are sub-timelines
that open under the step they began in. What a step is, and which steps count as an error, a
tool call or an approval: :mod:`agentcore_fsm.devtools.viewer_data`.

The page's script and style are package data (``viewer_assets/``), put inline; the runs' data
is one JSON document in the page, read once; the transcript is built as the viewer moves, each
message once, and moving from one step to another touches only the steps in between, so a
run of 10,000 steps opens in well under a second.

The viewer reads a run's record (its header and inputs: docs/record.md), from a recording, a
run store or the objects that hold one, and validates it by feeding it to the machine again.
A record it cannot show (damaged, of another declaration, no record at all) is a
:class:`~agentcore_fsm.devtools.viewer_data.ViewerError` whose text is one line naming what is
wrong; :func:`write_viewer` then writes nothing.
"""

from __future__ import annotations

import html
import json
import os
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from agentcore_fsm.devtools.dot import GraphvizError
from agentcore_fsm.devtools.nested_records import (
    NestedRecordError,
    Record,
    nesting,
)
from agentcore_fsm.devtools.viewer_data import (
    RunSource,
    ViewerError,
    declaration_of,
    nest,
    run_data,
)
from agentcore_fsm.devtools.viewer_svg import Layout, diagram_svg
from agentcore_fsm.persist.codec import RecordError
from agentcore_fsm.persist.recording import RecordedRun, RunRecord, load_run
from agentcore_fsm.persist.store_rules import RunStoreError, StoredRun

__all__ = [
    "RunSource",
    "ViewerError",
    "load_sources",
    "view_data",
    "viewer_html",
    "write_viewer",
]

SQLITE_MAGIC = b"SQLite format 3\x00"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _of_recorded(recording: RecordedRun, origin: str) -> list[RunSource]:
    if not recording.records:
        raise ViewerError(
            f"{origin}: no run's record (header and inputs) in it: the viewer shows runs "
            f"recorded with store=recorder.store (docs/record.md)"
        )
    return [
        RunSource(
            r.run_id,
            r.header,
            r.entries,
            r.end_reason,
            f"{origin}:{r.header_line}" if r.header_line else origin,
        )
        for r in [*recording.records, *recording.nested_records]  # nested runs' records too
    ]


def _of_store(store: Any, run_ids: Sequence[str] | None, origin: str) -> list[RunSource]:
    try:
        ids = list(run_ids) if run_ids else [info.run_id for info in store.runs()]
        if not ids:
            raise ViewerError(f"{origin}: the run store holds no run")
        loaded = [store.load(run_id) for run_id in ids]
    except (RunStoreError, RecordError) as exc:
        raise ViewerError(f"{origin}: {_one_line(str(exc))}") from None
    return [
        RunSource(run.run_id, run.header, run.entries, run.end_reason, f"{origin}: run")
        for run in loaded
    ]


def _of_path(path: Path, run_ids: Sequence[str] | None) -> list[RunSource]:
    try:
        with path.open("rb") as file:
            magic = file.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise ViewerError(f"cannot read {path}: {exc.strerror or exc}") from None
    if magic == SQLITE_MAGIC:
        from agentcore_fsm.persist.sqlite_store import SqliteRunStore

        try:
            store = SqliteRunStore(path)
        except (RunStoreError, sqlite3.Error) as exc:
            raise ViewerError(f"{path}: {_one_line(str(exc))}") from None
        try:
            return _of_store(store, run_ids, str(path))
        finally:
            store.close()
    try:
        recording = load_run(path)
    except RecordError as exc:
        raise ViewerError(_one_line(str(exc))) from None
    except OSError as exc:
        raise ViewerError(f"cannot read {path}: {exc.strerror or exc}") from None
    sources = _of_recorded(recording, str(path))
    if run_ids:
        known = {s.run_id for s in sources}
        missing = [r for r in run_ids if r not in known]
        if missing:
            raise ViewerError(
                f"{path}: no run {missing[0]!r} in it (it holds: {', '.join(sorted(known))})"
            )
        sources = [s for s in sources if s.run_id in run_ids]
    return sources


def load_sources(source: Any, run_ids: Sequence[str] | None = None) -> list[RunSource]:
    """The runs to show, read from ``source``: a path to a JSONL recording or to a SQLite run
    store (told apart by the file's first bytes), a
    :class:`~agentcore_fsm.persist.recording.RecordedRun`, a run store (any object with
    ``runs()`` and ``load(run_id)``: ``MemoryRunStore``, ``SqliteRunStore``), a
    :class:`~agentcore_fsm.persist.recording.RunRecord`, a
    :class:`~agentcore_fsm.persist.store_rules.StoredRun`, a
    :class:`RunSource`, or a list of those. ``run_ids`` picks runs of a recording or a store
    (default: all of them, in the order they began). Raises :class:`ViewerError`."""
    if isinstance(source, str | os.PathLike):
        return _of_path(Path(source), run_ids)
    if isinstance(source, RunSource):
        return [source]
    if isinstance(source, RecordedRun):
        sources = _of_recorded(source, "recording")
        return [s for s in sources if not run_ids or s.run_id in run_ids]
    if isinstance(source, RunRecord):
        return [RunSource(source.run_id, source.header, source.entries, source.end_reason)]
    if isinstance(source, StoredRun):
        return [RunSource(source.run_id, source.header, source.entries, source.end_reason)]
    if callable(getattr(source, "runs", None)) and callable(getattr(source, "load", None)):
        return _of_store(source, run_ids, type(source).__name__)
    if isinstance(source, Iterable) and not isinstance(source, str | bytes | dict):
        return [run for item in source for run in load_sources(item, run_ids)]
    raise ViewerError(f"cannot show a {type(source).__name__}: give a recording or a run store")


def _asset(name: str) -> str:
    return (resources.files("agentcore_fsm.devtools") / "viewer_assets" / name).read_text(
        encoding="utf-8"
    )


_SURROGATE = re.compile("[\ud800-\udfff]")


def _script_json(data: Any) -> str:
    """JSON text safe inside a ``<script>`` element (no ``</`` and no ``<!--`` in it) and in a
    UTF-8 file: a lone surrogate code point (a record keeps strings code point for code point,
    docs/record.md) is written as its JSON escape, which the page reads back as that code
    point."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _text(text: str) -> str:
    """``text`` for the page's HTML: escaped, a lone surrogate made U+FFFD."""
    return html.escape(_SURROGATE.sub("\ufffd", text))


def view_data(
    source: Any,
    *,
    run_ids: Sequence[str] | None = None,
    nested: Mapping[str, Sequence[tuple[int, str]]] | None = None,
) -> list[dict[str, Any]]:
    """The data the viewer's page holds for the runs in ``source`` (see :func:`viewer_html`
    for the arguments and :func:`~agentcore_fsm.devtools.viewer_data.run_data` for the form):
    one item per top-level run, nested runs inside their parents."""
    if nested is None:  # found in the runs' headers (a nested run names its parent)
        if run_ids:
            load_sources(source, run_ids)  # an unknown run: the source's own error text
        every = load_sources(source)
        try:
            nested = nesting([Record(r.run_id, r.header, r.entries) for r in every])
        except NestedRecordError as exc:
            raise ViewerError(str(exc)) from None
        runs = nest(_picked(every, run_ids, nested), nested)
    else:
        runs = nest(load_sources(source, run_ids), nested)
    if not runs:
        raise ViewerError("no run to show")
    return [run_data(run) for run in runs]


def _picked(
    runs: Sequence[RunSource],
    run_ids: Sequence[str] | None,
    nested: dict[str, list[tuple[int, str]]],
) -> list[RunSource]:
    """The runs ``run_ids`` names with the runs nested in them (all runs when None); ``nested``
    is cut down to the parents kept."""
    if not run_ids:
        return list(runs)
    kept = set(run_ids)
    stack = list(run_ids)
    while stack:
        for _, child in nested.get(stack.pop(), ()):
            kept.add(child)
            stack.append(child)
    for parent in list(nested):
        if parent not in kept:
            del nested[parent]
    return [run for run in runs if run.run_id in kept]


def viewer_html(
    source: Any,
    *,
    run_ids: Sequence[str] | None = None,
    nested: Mapping[str, Sequence[tuple[int, str]]] | None = None,
    layout: Layout = "auto",
    dot_binary: str | None = None,
    title: str | None = None,
) -> str:
    """The viewer's page (one HTML document) of the runs in ``source`` (see
    :func:`load_sources`). Several runs get a run picker; ``nested`` puts runs under others
    (parent run id: ``(step, child run id)`` pairs, the step counted from 0), drawn as
    expandable sub-timelines under that step. ``layout`` chooses how the diagram is laid out
    (:mod:`agentcore_fsm.devtools.viewer_svg`). Raises :class:`ViewerError` with a one-line
    text for anything it cannot show."""
    data = view_data(source, run_ids=run_ids, nested=nested)
    diagrams: dict[str, str] = {}
    drawn_by = ""
    for run in _all_runs(data):
        name = str(run["declaration"])
        if name not in diagrams:
            try:
                diagrams[name], drawn_by = diagram_svg(
                    declaration_of(run), layout, dot_binary=dot_binary
                )
            except GraphvizError as exc:
                raise ViewerError(_one_line(str(exc))) from None
    heading = title or (
        f"run {data[0]['id']}" if len(data) == 1 else f"{len(data)} runs: {data[0]['id']} …"
    )
    figures = "\n".join(
        f'<template data-declaration="{html.escape(name)}">{svg}</template>'
        for name, svg in diagrams.items()
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="agentcore-fsm view">\n'
        f"<title>{_text(heading)} · agentcore-fsm viewer</title>\n"
        f"<style>\n{_asset('viewer.css')}</style>\n"
        "</head>\n"
        f'<body data-layout="{drawn_by}">\n'
        f"{_asset('viewer.html')}\n"
        f"{figures}\n"
        f'<script type="application/json" id="run-data">{_script_json(data)}</script>\n'
        f"<script>\n{_asset('viewer.js')}</script>\n"
        "</body></html>\n"
    )


def _all_runs(data: Sequence[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    for run in data:
        yield run
        yield from _all_runs([child["run"] for child in run["nested"]])


def write_viewer(source: Any, out: str | os.PathLike[str], **options: Any) -> Path:
    """Write the viewer's page of ``source`` (see :func:`viewer_html`, which takes the same
    ``options``) to ``out`` and return its path. Everything is checked before the file is
    opened: on a :class:`ViewerError` nothing is written. The page is written to a temporary
    file beside ``out`` and renamed over it, so a reader never sees half a page."""
    page = viewer_html(source, **options)
    target = Path(out)
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.write_text(page, encoding="utf-8")
        os.replace(partial, target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ViewerError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target
