"""The run viewer's page, without a browser: its data follows the machine step by step, it is
made from recordings and run stores alike, it is self-contained, and bad input is a one-line
error with exit status 2 and nothing written (tests/devtools/test_viewer_browser.py drives the
page itself)."""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio
from viewer_runs import (
    MODEL,
    add_tool,
    expected_steps,
    failing_run,
    lines,
    source_of,
    tool_run,
)

from agentcore_fsm import AgentContext, AgentLoopConfig, run_agent_loop
from agentcore_fsm.cli.commands import main as cli
from agentcore_fsm.core.declaration import load_declaration
from agentcore_fsm.devtools.viewer import (
    ViewerError,
    load_sources,
    view_data,
    viewer_html,
    write_viewer,
)
from agentcore_fsm.devtools.viewer_data import APPROVAL, ERROR, TOOL
from agentcore_fsm.devtools.viewer_svg import compact_dot, diagram_svg, simple_svg
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.recorder import RunRecorder
from agentcore_fsm.persist.recording import load_run
from agentcore_fsm.persist.sqlite_store import SqliteRunStore
from agentcore_fsm.persist.store import MemoryRunStore

DATA = re.compile(r'<script type="application/json" id="run-data">(.*?)</script>', re.S)


def page_data(page: str) -> Any:
    found = DATA.search(page)
    assert found is not None
    return json.loads(found.group(1))


def test_each_step_is_what_the_machine_says(tmp_path: Path) -> None:
    path = tool_run(tmp_path / "run.jsonl")
    source = source_of(path)
    expected = expected_steps(source)
    (run,) = view_data(path)
    assert run["id"] == "add-1" and run["end"] == "completed"
    assert len(run["steps"]) == len(source.entries) == len(expected)
    for k, (step, want) in enumerate(zip(run["steps"], expected, strict=True)):
        assert step["i"] == source.entries[k]["input"]
        assert step["s"] == want.state, k
        assert step["m"] == len(want.messages), k
    roles = [m["r"] for m in run["messages"]]
    assert roles == [m.role for m in expected[-1].messages]
    assert run["messages"][-1]["t"] == "1 + 2 = 3."
    assert run["messages"][1]["c"] == [["add", "c1", '{"a": 1, "b": 2}']]
    # the transitions of all steps are the run's path, in order, each state to the next
    path_taken = [run["transitions"][t] for step in run["steps"] for t in step["tr"]]
    assert path_taken[0][1] == run["initial"]
    assert all(a[2] == b[1] for a, b in itertools.pairwise(path_taken))
    assert path_taken[-1][2] == run["state"] == expected[-1].state


def test_flags_mark_errors_tool_calls_and_approvals(tmp_path: Path) -> None:
    path = failing_run(tmp_path / "fails.jsonl")
    source = source_of(path)
    expected = expected_steps(source)
    (run,) = view_data(path)
    flags = [step["f"] for step in run["steps"]]
    # the failing step: the first after which the transcript holds a failed model answer
    failed = next(
        k
        for k, want in enumerate(expected)
        if any(getattr(m, "stop_reason", None) == "error" for m in want.messages)
    )
    assert next(k for k, f in enumerate(flags) if f & ERROR) == failed
    assert run["end"] == "error"
    # tool calls begin in the steps that took a model answer asking for one
    asked = [
        k
        for k, e in enumerate(source.entries)
        if e["input"] == "stream_done"
        and any(b["type"] == "toolCall" for b in e["message"]["message"]["content"])
    ]
    assert [k for k, f in enumerate(flags) if f & TOOL] == asked and len(asked) == 2
    assert not any(f & APPROVAL for f in flags)


def test_store_runs_show_like_recordings(tmp_path: Path) -> None:
    script = [
        faux_response(tool_calls=[faux_tool_call("add", {"a": 1, "b": 2}, id="c1")]),
        faux_response("3."),
    ]
    memory = MemoryRunStore()
    db = tmp_path / "runs.db"

    async def main() -> None:
        with SqliteRunStore(db) as sqlite:
            for store, run_id in ((memory, "m1"), (sqlite, "s1")):
                await run_agent_loop(
                    ["add"],
                    AgentContext(tools=[add_tool()]),
                    AgentLoopConfig(model=MODEL),
                    stream_fn=FauxProvider(list(script)),
                    store=store,
                    run_id=run_id,
                )

    trio.run(main)
    (from_memory,) = view_data(memory)
    (from_file,) = view_data(db)
    with SqliteRunStore(db) as store:
        stored = store.load("s1")
        (from_object,) = view_data(stored)
    assert (from_memory["id"], from_file["id"], from_object["id"]) == ("m1", "s1", "s1")
    for run in (from_memory, from_file, from_object):
        assert run["end"] == "completed"
        assert [s["s"] for s in run["steps"]] == [s["s"] for s in from_file["steps"]]
        assert [m["t"] for m in run["messages"]] == ["add", "", "3", "3."]
    out = tmp_path / "store.html"
    assert cli(["view", str(db), "--run", "s1", "-o", str(out)]) == 0
    assert page_data(out.read_text(encoding="utf-8"))[0]["id"] == "s1"


def test_the_command_writes_one_self_contained_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tool_run(tmp_path / "run.jsonl")
    assert cli(["view", str(path)]) == 0  # default: beside the record, .html
    out = tmp_path / "run.html"
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    # no network: nothing is fetched (no src/href), and no URL but the SVG/XML namespaces
    assert not re.search(r"\b(src|href)\s*=", page)
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", page))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls
    assert page_data(page)[0]["id"] == "add-1"
    for state in load_declaration("agent_loop").states:
        assert f"state-{state}" in page.replace("&#45;", "-")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_text_that_looks_like_markup_stays_text(tmp_path: Path) -> None:
    # markup, a line separator, and a lone surrogate (a record keeps it, docs/record.md)
    prompt = "</script><script>alert(1)</script><!-- \u2028 & <b> \ud83d!"
    path = tool_run(tmp_path / "run.jsonl", prompt=prompt)
    out = write_viewer(path, tmp_path / "page.html")  # UTF-8, with the surrogate escaped
    page = out.read_text(encoding="utf-8")
    assert page.count("</script>") == 2  # the data's and the script's own
    assert page_data(page)[0]["messages"][0]["t"] == prompt


def test_several_runs_and_nested_runs(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    tool_run(tmp_path / "a.jsonl", run_id="parent")
    tool_run(tmp_path / "b.jsonl", run_id="child")
    with path.open("w", encoding="utf-8") as out:  # one file holding both runs' records
        out.write((tmp_path / "a.jsonl").read_text(encoding="utf-8"))
        out.writelines(
            json.dumps(obj) + "\n" for obj in lines(tmp_path / "b.jsonl") if obj["kind"] != "run"
        )
    both = view_data(path)
    assert [run["id"] for run in both] == ["parent", "child"]
    (parent,) = view_data(path, nested={"parent": [(2, "child")]})
    assert [(n["step"], n["run"]["id"]) for n in parent["nested"]] == [(2, "child")]
    assert len(parent["nested"][0]["run"]["steps"]) == len(both[1]["steps"])
    (only,) = view_data(path, run_ids=["child"])
    assert only["id"] == "child"
    bad = [
        ({"nobody": [(0, "child")]}, "no run 'nobody'"),
        ({"parent": [(0, "nobody")]}, "no run 'nobody'"),
        ({"parent": [(99, "child")]}, "has no step 99"),
        ({"parent": [(0, "parent")]}, "nested twice or in itself"),
        ({"parent": [(0, "child")], "child": [(0, "parent")]}, "nest in each other"),
    ]
    for nested, words in bad:
        with pytest.raises(ViewerError, match=re.escape(words)):
            view_data(path, nested=nested)


def test_the_diagram_is_drawn_with_or_without_graphviz(tmp_path: Path) -> None:
    decl = load_declaration("agent_loop")
    simple, how = diagram_svg(decl, "auto", dot_binary="/nonexistent/dot")
    assert how == "simple" and simple == simple_svg(decl)
    dot, how = diagram_svg(decl, "dot")
    assert how == "dot" and dot.startswith("<svg")
    for svg in (simple, dot):
        text = svg.replace("&#45;", "-")
        for state in decl.states:
            assert f'id="state-{state}"' in text
        assert 'id="edge-streaming-preparing_tools"' in text
        assert '-x"' not in text  # abort and failure arrows are left out
    assert "edge-streaming-preparing_tools" in compact_dot(decl)
    path = tool_run(tmp_path / "run.jsonl")
    with pytest.raises(ViewerError, match="Graphviz"):
        viewer_html(path, layout="dot", dot_binary="/nonexistent/dot")
    page = viewer_html(path, layout="auto", dot_binary="/nonexistent/dot")
    assert '<body data-layout="simple">' in page and simple in page
    with pytest.raises(ViewerError, match="no run to show"):
        viewer_html([])


def test_what_the_viewer_takes(tmp_path: Path) -> None:
    path = tool_run(tmp_path / "run.jsonl")
    recorded = load_run(path)
    for source in (path, str(path), recorded, recorded.records[0], source_of(path), [path]):
        (run,) = load_sources(source)
        assert run.run_id == "add-1" and len(run.entries) == 6
    with pytest.raises(ViewerError, match="cannot show a int"):
        load_sources(3)


def _damage(path: Path, kind: str) -> None:
    objs = lines(path)
    text = [json.dumps(o) for o in objs]
    where = next(
        i for i, o in enumerate(objs) if o.get("entry", {}).get("input") == "tool_finished"
    )
    if kind == "cut":
        text[where] = text[where][: len(text[where]) // 2]
    elif kind == "index":
        objs[where]["entry"]["index"] = 5
        text[where] = json.dumps(objs[where])
    elif kind == "kind":
        objs[where]["entry"]["input"] = "tool_finishd"
        text[where] = json.dumps(objs[where])
    elif kind == "refused":  # an input the machine does not take where the run stands
        objs[where]["entry"] = {"input": "proceeded"}
        text[where] = json.dumps(objs[where])
    elif kind == "hash":
        header = next(i for i, o in enumerate(objs) if o["kind"] == "header")
        objs[header]["header"]["declaration_hash"] = "0" * 64
        text[header] = json.dumps(objs[header])
    path.write_text("\n".join(text) + "\n", encoding="utf-8")


DAMAGED = {
    "cut": r"run\.jsonl:\d+: not JSON",
    "index": r"run\.jsonl:\d+: run 'add-1': entry #\d \(tool_finished\): .*index 5 names no tool",
    "kind": r"run\.jsonl:\d+: .*unknown kind of entry 'tool_finishd'",
    "refused": r"run\.jsonl:\d+: run 'add-1': entry #2 \(proceeded\)",
    "hash": r"run\.jsonl:\d+: run 'add-1' was recorded by a release whose machines differ",
}


@pytest.mark.parametrize("kind", sorted(DAMAGED))
def test_a_damaged_record_is_one_line_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    path = tool_run(tmp_path / "run.jsonl")
    _damage(path, kind)
    out = tmp_path / "page.html"
    assert cli(["view", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("agentcore-fsm view: error: "), err
    assert re.search(DAMAGED[kind], err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl"]
    with pytest.raises(ViewerError):
        write_viewer(path, out)
    assert not out.exists()


def test_other_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tool_run(tmp_path / "run.jsonl")
    events_only = tmp_path / "events.jsonl"

    async def main() -> None:
        with RunRecorder(events_only) as recorder:
            await run_agent_loop(
                ["hi"],
                AgentContext(),
                AgentLoopConfig(model=MODEL),
                recorder,
                stream_fn=FauxProvider([faux_response("hello")]),
                on_transition=recorder.on_transition,
            )

    trio.run(main)
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    other_db = tmp_path / "other.db"
    with sqlite3.connect(other_db) as conn:
        conn.execute("CREATE TABLE t (x)")
    empty_db = tmp_path / "empty.db"
    SqliteRunStore(empty_db).close()
    out = tmp_path / "out" / "page.html"
    cases = [
        ([str(tmp_path / "missing.jsonl")], "cannot read"),
        ([str(events_only)], "no run's record"),
        ([str(tmp_path / "empty.jsonl")], "empty file"),
        ([str(path), "--run", "nope"], "no run 'nope' in it (it holds: add-1)"),
        ([str(other_db)], "other.db"),
        ([str(empty_db)], "holds no run"),
        ([str(empty_db), "--run", "x"], "empty.db"),
        ([str(path), "-o", str(tmp_path / "nodir" / "p.html")], "does not exist"),
        ([str(path), "-o", str(tmp_path / "page.txt")], "must name an .html file"),
    ]
    before = sorted(p.name for p in tmp_path.iterdir())
    for args, words in cases:
        assert cli(["view", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, (args, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not out.exists()
    with pytest.raises(SystemExit) as exited:  # argparse's usage error, as other commands
        cli(["view", str(path), "--layout", "nope"])
    assert exited.value.code == 2
