"""Nested runs seen: found in a store or a recording (devtools/nested_records.py), drawn as
clusters by ``diagram --run`` (DOT and Mermaid text), nested on their own in the viewer's data,
kept or run again by a fork, compared by a diff; and a nested record that does not fit its
parent refused with one line. The records of nested runs are made by hand
(tests/nested_view_runs.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import trio
from nested_view_runs import (
    CHECKER,
    MODEL,
    RESEARCHER,
    boss_answers,
    boss_tools,
    copy_run,
    nested_store,
    record_nested,
    researcher_model,
)
from viewer_runs import add_tool

from agentcore_fsm import AgentContext, AgentLoopConfig, run_agent_loop
from agentcore_fsm.devtools.diagram_model import TIMES
from agentcore_fsm.devtools.diagrams import to_dot, to_mermaid
from agentcore_fsm.devtools.diff import diff_runs
from agentcore_fsm.devtools.fork import ForkError, fork_run_sync
from agentcore_fsm.devtools.nested_records import (
    NestedRecordError,
    nested_runs,
    nesting,
    read_records,
)
from agentcore_fsm.devtools.run_views import view_with_nested
from agentcore_fsm.devtools.testing import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.devtools.viewer import ViewerError, view_data
from agentcore_fsm.persist.store import MemoryRunStore
from agentcore_fsm.persist.store_rules import RunStore


@pytest.fixture(scope="module")
def store() -> MemoryRunStore:
    return nested_store()


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_nested(tmp_path_factory.mktemp("nested") / "run.jsonl")


def test_the_nested_runs_of_a_run_in_a_store_and_in_a_recording(
    store: MemoryRunStore, recording: Path
) -> None:
    for source in (store, recording):
        (researcher,) = nested_runs(source, "run-1")
        assert (researcher.run_id, researcher.parent, researcher.call) == (
            RESEARCHER,
            "run-1",
            "c1",
        )
        assert researcher.path == ("c1",) and researcher.agents == ("researcher",)
        # entries: start, stream_done (asks for c1 and starts it), tool_finished (c1's result)
        assert (researcher.requested, researcher.step, researcher.finished) == (1, 1, 2)
        (checker,) = researcher.children
        assert (checker.run_id, checker.parent, checker.call) == (CHECKER, RESEARCHER, "c7")
        assert checker.path == ("c1", "c7") and checker.agents == ("researcher", "checker")
        assert checker.label == "researcher (c1) > checker (c7)"
        # the researcher's entries: start, steering_polled, stream_done (asks for c7), ...
        assert (checker.step, checker.finished) == (2, 3) and checker.children == ()
        assert nesting(source) == {"run-1": [(1, RESEARCHER)], RESEARCHER: [(2, CHECKER)]}
        assert nested_runs(source, CHECKER) == []


def _sequential_store() -> MemoryRunStore:
    """A boss whose one answer asks for ``add`` (c0) then the researcher (c1), run one after
    the other: the researcher starts at the step of add's result, not at the answer."""
    store = MemoryRunStore()
    answers = [
        faux_response(
            tool_calls=[
                faux_tool_call("add", {"a": 1, "b": 2}, id="c0"),
                faux_tool_call("researcher", {"prompt": "How big is Lyon?"}, id="c1"),
            ]
        ),
        faux_response("Done."),
    ]

    async def main() -> None:
        await run_agent_loop(
            ["Go"],
            AgentContext(tools=[add_tool(), *boss_tools()]),
            AgentLoopConfig(model=MODEL, tool_execution="sequential"),
            stream_fn=FauxProvider(answers),
            store=store,
            run_id="seq",
        )

    trio.run(main)  # the researcher's run journaled as "seq/1.c1"
    return store


def test_a_call_run_after_another_starts_at_the_step_of_the_earlier_result() -> None:
    store = _sequential_store()
    inputs = [e["input"] for e in store.load("seq").entries]
    (run,) = nested_runs(store, "seq")
    assert inputs[run.requested] == "stream_done"
    assert inputs[run.step] == "tool_finished" and run.step > run.requested
    assert inputs[run.finished or 0] == "tool_finished" and (run.finished or 0) > run.step


# --- bad input ---------------------------------------------------------------------------------


def _with_child(header_parent: Any, run_id: str = "run-1/1.c1") -> MemoryRunStore:
    source = nested_store()
    store = MemoryRunStore()
    copy_run(source, "run-1", store, "run-1", None)
    copy_run(source, RESEARCHER, store, run_id, header_parent)
    return store


GOOD = {"run": "run-1", "call": "c1", "path": ["c1"], "agents": ["researcher"]}
BAD_PARENTS: list[tuple[Any, str, str]] = [
    ("run-1", "run-1/1.c1", '"parent" must be an object, not str'),
    ({**GOOD, "call": ""}, "run-1/1.c1", "needs 'call', a non-empty string"),
    ({**GOOD, "path": "c1"}, "run-1/1.c1", "needs 'path' and 'agents', non-empty lists"),
    ({**GOOD, "agents": ["a", "b"]}, "run-1/1.c1", "'path' has 1 calls but 'agents' 2 names"),
    ({**GOOD, "path": ["c2"]}, "run-1/1.c1", "'path' must end with its call 'c1'"),
    (GOOD, "run-1/x.c1", "should be 'run-1/<n>.c1'"),
    ({**GOOD, "run": "run-9"}, "run-9/1.c1", "its parent run 'run-9' is not among the runs"),
    ({**GOOD, "call": "c9", "path": ["c9"]}, "run-1/1.c9", "has no tool call 'c9' that started"),
    ({**GOOD, "path": ["c0", "c1"], "agents": ["a", "b"]}, "run-1/1.c1", "parent's path and"),
]


@pytest.mark.parametrize(("parent", "run_id", "words"), BAD_PARENTS)
def test_a_nested_record_that_does_not_fit_is_one_line_naming_the_run(
    parent: Any, run_id: str, words: str
) -> None:
    store = _with_child(parent, run_id)
    for find in (lambda: nesting(store), lambda: nested_runs(store, "run-1")):
        with pytest.raises(NestedRecordError) as caught:
            find()
        text = str(caught.value)
        assert "\n" not in text and text.startswith(f"run {run_id!r}"), text
        assert words in text, text
    with pytest.raises(ViewerError, match=re.escape(words)):
        view_data(store)
    with pytest.raises(NestedRecordError, match=re.escape(words)):
        view_with_nested(store, "run-1")


def test_a_fork_of_a_run_whose_nested_record_does_not_fit_writes_nothing() -> None:
    store = _with_child({**GOOD, "run": "run-9"}, "run-9/1.c1")
    target = MemoryRunStore()
    with pytest.raises(ForkError, match="its parent run 'run-9' is not among the runs"):
        fork_run_sync(
            store,
            3,
            run="run-1",
            config=AgentLoopConfig(model=MODEL),
            tools=boss_tools(),
            store=target,
        )
    assert target.runs() == []


# --- the diagram -------------------------------------------------------------------------------


def _block(text: str, opening: str, closing: str) -> str:
    """The lines from ``opening`` to its ``closing`` line at the same indentation."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(opening))
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    end = next(i for i in range(start + 1, len(lines)) if lines[i] == indent + closing)
    return "\n".join(lines[start : end + 1])


def test_the_dot_diagram_draws_a_cluster_per_nested_run_inside_its_callers(
    store: MemoryRunStore, recording: Path
) -> None:
    for source in (store, recording):
        decl, view = view_with_nested(source)
        assert view.label == "run run-1" and len(view.nested) == 1
        dot = to_dot(decl, view)
        assert 'compound="true"' in dot.splitlines()[2]
        outer = _block(dot, 'subgraph "cluster_n1"', "}")
        inner = _block(dot, 'subgraph "cluster_n2"', "}")
        assert inner in outer  # the checker's cluster is inside the researcher's
        assert "<b>researcher (c1)</b>" in outer and "run-1/1.c1 · from step 1" in outer
        assert "<b>researcher (c1) &gt; checker (c7)</b>" in inner
        # the states each nested run visited, with the transitions it took and their counts
        assert '"n1:executing" [' in outer and '"n2:executing" [' not in inner
        assert f'"n1:idle" -> "n1:awaiting_steering" [label=<1{TIMES} start>' in outer
        assert f'"n1:closing_turn" -> "n1:awaiting_steering" [label=<2{TIMES} proceeded>' in outer
        assert 'class="current"' in inner and "final state" in inner
        # dotted arrows from where the caller stood while the call ran
        assert '"executing" -> "n1:idle" [style="dotted"' in dot
        assert 'lhead="cluster_n1"' in dot
        assert '"n1:executing" -> "n2:idle" [style="dotted"' in dot


def test_the_mermaid_diagram_draws_subgraphs_and_styles_every_link(store: MemoryRunStore) -> None:
    decl, view = view_with_nested(store)
    text = to_mermaid(decl, view)
    outer = _block(text, "subgraph nested_1[", "end")
    inner = _block(text, "subgraph nested_2[", "end")
    assert inner in outer
    assert "<b>researcher (c1)</b><br/>run-1/1.c1 · from step 1" in outer
    assert "researcher (c1) #gt; checker (c7)" in inner
    assert f'n1_idle -->|"1{TIMES} start"| n1_awaiting_steering' in outer
    assert 'executing -.->|"researcher (c1)"| nested_1' in text
    assert 'n1_executing -.->|"checker (c7)"| nested_2' in text
    links = [line for line in text.splitlines() if re.search(r"-->|-\.->", line)]
    styled = [line for line in text.splitlines() if line.strip().startswith("linkStyle")]
    assert len(styled) == len(links)
    assert styled[-1].strip().startswith(f"linkStyle {len(links) - 1} ")
    assert re.search(r"class [^ ]*n2_stopped[^ ]* current", text)


def test_a_run_without_nested_runs_draws_as_before(store: MemoryRunStore) -> None:
    plain = MemoryRunStore()
    copy_run(store, "run-1", plain, "run-1", None)
    decl, view = view_with_nested(plain)
    assert view.nested == () and "cluster" not in to_dot(decl, view)
    assert "subgraph" not in to_mermaid(decl, view)


# --- the viewer ----------------------------------------------------------------------------------


def test_the_viewer_nests_the_runs_on_its_own(store: MemoryRunStore, recording: Path) -> None:
    for source in (store, recording):
        (run,) = view_data(source)
        assert run["id"] == "run-1" and run["label"] is None
        (child,) = run["nested"]
        assert child["step"] == 1 and child["run"]["id"] == RESEARCHER
        assert child["run"]["label"] == "researcher (c1)"
        assert [(n["step"], n["run"]["id"]) for n in child["run"]["nested"]] == [(2, CHECKER)]
    # a run picked by id brings its nested runs; a nested run picked alone stands alone
    (picked,) = view_data(store, run_ids=["run-1"])
    assert [n["run"]["id"] for n in picked["nested"]] == [RESEARCHER]
    (alone,) = view_data(store, run_ids=[RESEARCHER])
    assert alone["id"] == RESEARCHER and [n["run"]["id"] for n in alone["nested"]] == [CHECKER]


# --- fork and diff -------------------------------------------------------------------------------


def _fork(store: RunStore, at: int, researcher: FauxProvider, answers: list[Any]) -> Any:
    return fork_run_sync(
        store,
        at,
        run="run-1",
        config=AgentLoopConfig(model=MODEL),
        tools=boss_tools(researcher),
        stream_fn=FauxProvider(answers),
    )


def test_a_fork_after_a_nested_call_replays_its_result_and_keeps_its_records(
    store: MemoryRunStore,
) -> None:
    researcher = researcher_model()
    fork = _fork(store, 3, researcher, [faux_response("About 600,000 people.")])
    assert researcher.calls == []  # the nested call was not made again
    assert fork.run_id == "run-1@3"
    assert [r.run_id for r in fork.store.runs()] == ["run-1@3", "run-1@3/1.c1", "run-1@3/1.c1/1.c7"]
    (copied,) = nested_runs(fork.store, "run-1@3")
    assert copied.run_id == "run-1@3/1.c1" and copied.children[0].run_id == "run-1@3/1.c1/1.c7"
    kept = fork.store.load("run-1@3/1.c1/1.c7")
    assert kept.header["parent"]["run"] == "run-1@3/1.c1"
    assert kept.entries == store.load(CHECKER).entries
    # the diff of the two outer runs points at the edited answer; nested runs diff too
    diff = diff_runs((store, "run-1"), fork)
    assert diff.first is not None and (diff.first.step, diff.first.what) == (4, "input")
    inner = diff_runs((store, RESEARCHER), (fork.store, "run-1@3/1.c1"))
    assert inner.same and inner.header == ['parent.run: A "run-1", B "run-1@3"']


def test_a_fork_before_a_nested_call_runs_it_live(store: MemoryRunStore) -> None:
    researcher = researcher_model()
    fork = _fork(store, 1, researcher, boss_answers())
    assert len(researcher.calls) == 2  # the researcher's two model calls, made again
    results = [m for m in fork.messages if getattr(m, "role", "") == "toolResult"]
    assert [r.content[0].text for r in results] == ["Lyon: 522,000."]
    # the nested runs made live are journaled under the fork's run id, not copied
    (live,) = nested_runs(fork.store, "run-1@1")
    assert live.run_id == "run-1@1/1.c1" and live.children[0].run_id == "run-1@1/1.c1/1.c7"
    made = fork.store.load("run-1@1/1.c1")
    assert made.header["parent"] == {
        "run": "run-1@1",
        "call": "c1",
        "path": ["c1"],
        "agents": ["researcher"],
    }


def test_records_of_a_recording_include_the_nested_runs(recording: Path) -> None:
    records = read_records(recording)
    assert list(records) == ["run-1", RESEARCHER, CHECKER]
    assert records[CHECKER].header["parent"]["agents"] == ["researcher", "checker"]


def test_a_fork_whose_nested_run_id_is_taken_says_so(store: MemoryRunStore) -> None:
    target = MemoryRunStore()
    copy_run(store, CHECKER, target, "mine/1.c1", None)  # the id the fork's copy would take
    with pytest.raises(ForkError, match=re.escape("nested run 'mine/1.c1' already exists")):
        fork_run_sync(
            store,
            3,
            run="run-1",
            config=AgentLoopConfig(model=MODEL),
            tools=boss_tools(),
            stream_fn=FauxProvider([faux_response("x")]),
            store=target,
            run_id="mine",
        )
