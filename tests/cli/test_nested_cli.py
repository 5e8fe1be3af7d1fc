"""Nested runs from the command line: ``diagram --run`` draws them as clusters (a recording or
a SQLite run store), ``view`` nests them on its own, ``fork`` keeps the records of the nested
runs it replays; a nested record that does not fit its parent is one line on standard error,
exit status 2, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from nested_view_runs import (
    CHECKER,
    RESEARCHER,
    copy_run,
    nested_store,
    record_nested,
    sqlite_copy,
)

from agentcore_fsm.cli.commands import main
from agentcore_fsm.devtools.nested_records import nesting
from agentcore_fsm.persist.sqlite_store import SqliteRunStore
from agentcore_fsm.persist.store import MemoryRunStore


@pytest.fixture(scope="module")
def store() -> MemoryRunStore:
    return nested_store()


@pytest.fixture(scope="module")
def runs_db(store: MemoryRunStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("db") / "runs.db"
    return sqlite_copy(store, path, {"run-1": None, RESEARCHER: None, CHECKER: None})


@pytest.fixture(scope="module")
def bad_db(store: MemoryRunStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``run-1`` and a nested run whose parent, ``run-9``, is not there."""
    path = tmp_path_factory.mktemp("bad") / "bad.db"
    sqlite_copy(store, path, {"run-1": None})
    parent = {"run": "run-9", "call": "c1", "path": ["c1"], "agents": ["researcher"]}
    with SqliteRunStore(path) as target:
        copy_run(store, RESEARCHER, target, "run-9/1.c1", parent)
    return path


def test_diagram_of_a_recording_and_of_a_store_with_nested_runs(
    store: MemoryRunStore, runs_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recording = record_nested(tmp_path / "run.jsonl")
    for source in (recording, runs_db):
        assert main(["diagram", "--run", str(source), "--format", "dot"]) == 0
        dot = capsys.readouterr().out
        assert 'subgraph "cluster_n1"' in dot and 'subgraph "cluster_n2"' in dot
        assert "researcher (c1) &gt; checker (c7)" in dot
    out = tmp_path / "run.mmd"
    assert main(["diagram", "--run", str(runs_db), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "subgraph nested_1[" in text and 'executing -.->|"researcher (c1)"| nested_1' in text


def test_a_nested_record_without_its_parent_is_refused_and_nothing_written(
    bad_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    words = "run 'run-9/1.c1': its parent run 'run-9' is not among the runs"
    commands = [
        ["diagram", "--run", str(bad_db), "--out", str(tmp_path / "d.dot")],
        ["view", str(bad_db), "-o", str(tmp_path / "v.html")],
        [
            "fork", str(bad_db), "--run", "run-1", "--at", "4", "--answer", "No.",
            "--tools", "nested_view_runs:TOOLS", "-o", str(tmp_path / "f.jsonl"),
        ],
    ]  # fmt: skip
    for argv in commands:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_fork_keeps_the_nested_runs_it_replays_and_view_shows_them(
    runs_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "fork.jsonl"
    argv = ["fork", str(runs_db), "--run", "run-1", "--at", "4", "--answer", "About 600,000."]
    assert main([*argv, "--tools", "nested_view_runs:TOOLS", "-o", str(out)]) == 0
    assert "into run 'run-1@4'" in capsys.readouterr().out
    assert nesting(out) == {
        "run-1@4": [(1, "run-1@4/1.c1")],
        "run-1@4/1.c1": [(2, "run-1@4/1.c1/1.c7")],
    }
    page = tmp_path / "fork.html"
    assert main(["view", str(out), "-o", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert '"id":"run-1@4/1.c1/1.c7"' in html and '"label":"checker (c7)"' in html
