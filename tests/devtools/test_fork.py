"""Forking a run (agentcore_fsm.devtools.fork): the steps before the fork point are replayed
without calling anything, the edit is applied at the step, the run goes on live under a new id
with its parent and step in its header; from recordings, from memory and SQLite stores, into a
recording; forks of forks; bad input is one line and writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    MemoryRunStore,
    Model,
    SqliteRunStore,
    TextContent,
    run_agent_loop,
)
from agentcore_fsm.devtools.fork import (
    ChangeModel,
    ForkError,
    Messages,
    ModelAnswer,
    Settings,
    Steer,
    ToolResult,
    fork_run,
    fork_run_sync,
    plan_fork,
    read_parent,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.recorder import RunRecorder, load_run

MODEL = Model(id="faux-1", provider="faux", api="faux")
CALLED: list[dict[str, Any]] = []


async def _add(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    CALLED.append(params)
    return AgentToolResult(content=[TextContent(text=str(params["a"] + params["b"]))])


ADD = AgentTool("add", "Add.", {"type": "object"}, _add)


def _answers() -> list[Any]:
    return [
        faux_response("adding", tool_calls=[faux_tool_call("add", {"a": 1, "b": 2}, id="c1")]),
        faux_response("1 + 2 = 3."),
    ]


class Counted:
    """A faux model that counts the calls it answers."""

    def __init__(self, *answers: Any) -> None:
        self.faux = FauxProvider(list(answers))
        self.call_count = 0

    def __call__(self, model: Model, context: Any, options: Any) -> Any:
        self.call_count += 1
        return self.faux(model, context, options)


def _steering() -> list[Any]:
    return []


def _config(**kwargs: Any) -> AgentLoopConfig:
    return AgentLoopConfig(model=MODEL, get_steering_messages=_steering, **kwargs)


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"

    async def go() -> None:
        with RunRecorder(path) as recorder:
            await run_agent_loop(
                ["What is 1 + 2?"],
                AgentContext(tools=[ADD]),
                _config(),
                stream_fn=FauxProvider(_answers()),
                store=recorder.store,
                run_id="add-1",
            )

    anyio.run(go, backend="trio")
    CALLED.clear()
    return path


def _kinds(path: Path) -> list[str]:
    return [str(e["input"]) for e in read_parent(path).entries]


def test_the_record_s_steps(recording: Path) -> None:
    assert _kinds(recording) == [
        "start",
        "steering_polled",
        "stream_done",
        "tool_finished",
        "proceeded",
        "steering_polled",
        "steering_polled",
        "stream_done",
        "proceeded",
        "steering_polled",
    ]


def test_an_edited_tool_result_goes_on_live_under_a_new_id(recording: Path) -> None:
    model = Counted(faux_response("1 + 2 = 4?"))
    result = fork_run_sync(
        recording, 3, ToolResult("4"), config=_config(), tools=[ADD], stream_fn=model
    )
    assert result.run_id == "add-1@3" and result.parent == "add-1" and result.step == 3
    assert CALLED == []  # the replayed steps called no tool, the edited one neither
    texts = [b.text for m in result.messages for b in m.content if isinstance(b, TextContent)]
    assert texts == ["What is 1 + 2?", "adding", "4", "1 + 2 = 4?"]
    snapshot = result.snapshot()
    fork = snapshot.header["fork"]
    assert (fork["parent"], fork["step"], fork["edit"]["kind"]) == ("add-1", 3, "tool_result")
    assert snapshot.entries[3]["result"]["content"][0]["text"] == "4"
    assert result.store.load(result.run_id).end_reason == "completed"
    assert model.call_count == 1  # only the step after the edit asked the model


def test_a_fork_without_edit_performs_the_step_live(recording: Path) -> None:
    result = fork_run_sync(
        recording, 3, config=_config(), tools=[ADD], stream_fn=FauxProvider(_answers()[1:])
    )
    assert CALLED == [{"a": 1, "b": 2}]  # the tool in flight at the step ran again
    assert [e["input"] for e in result.snapshot().entries] == _kinds(recording)


def test_an_edited_answer_replaces_the_model_s_answer(recording: Path) -> None:
    result = fork_run_sync(
        recording, 2, ModelAnswer("I will not add."), config=_config(), tools=[ADD]
    )
    assert CALLED == []
    assert [e["input"] for e in result.snapshot().entries] == [
        "start",
        "steering_polled",
        "stream_done",
        "proceeded",
        "steering_polled",
    ]
    assert result.messages[-1].content[0].text == "I will not add."
    assert result.messages[-1].model == "faux-1"  # the recorded answer's other fields stay


def test_a_steering_message_is_injected_at_a_poll(recording: Path) -> None:
    model = Counted(faux_response("ok, 3 in French: trois"))
    result = fork_run_sync(
        recording, 6, Steer("in French please"), config=_config(), tools=[ADD], stream_fn=model
    )
    users = [m.content for m in result.messages if m.role == "user"]
    assert users[-1] in ("in French please", [TextContent(text="in French please")])
    assert model.call_count == 1


def test_new_prompts_at_the_start(recording: Path) -> None:
    model = FauxProvider([faux_response("5")])
    result = fork_run_sync(
        recording, 0, Messages(["What is 2 + 3?"]), config=_config(), tools=[ADD], stream_fn=model
    )
    assert result.messages[0].content[0].text == "What is 2 + 3?"
    assert result.snapshot().header["prompts"][0]["message"]["content"][0]["text"] == (
        "What is 2 + 3?"
    )


def test_another_model_and_settings_from_the_step_on(recording: Path) -> None:
    seen: list[str] = []
    faux = FauxProvider([faux_response("three")])

    def stream(model: Model, context: Any, options: Any) -> Any:
        seen.append(model.id)
        return faux(model, context, options)

    other = Model(id="faux-2", provider="faux", api="faux")
    result = fork_run_sync(
        recording, 7, ChangeModel(other), config=_config(), tools=[ADD], stream_fn=stream
    )
    assert seen == ["faux-2"]
    assert result.snapshot().header["model"]["id"] == "faux-2"
    result = fork_run_sync(
        recording,
        3,
        Settings(tool_execution="sequential"),
        config=_config(),
        tools=[ADD],
        stream_fn=FauxProvider(_answers()[1:]),
    )
    header = result.snapshot().header
    assert header["tool_execution"] == "sequential"
    assert header["fork"]["edit"] == {"kind": "settings", "tool_execution": "sequential"}


def test_forks_from_stores_and_into_a_recording(recording: Path, tmp_path: Path) -> None:
    sqlite = SqliteRunStore(tmp_path / "runs.db")
    first = fork_run_sync(
        recording,
        3,
        ToolResult("4"),
        config=_config(),
        tools=[ADD],
        store=sqlite,
        stream_fn=FauxProvider([faux_response("4 it is")]),
    )
    # a fork of the fork, from the SQLite store, recorded into a file
    out = tmp_path / "fork2.jsonl"

    async def go() -> str:
        with RunRecorder(out) as recorder:
            result = await fork_run(
                sqlite,
                5,
                Steer("double it"),
                run=first.run_id,
                config=_config(),
                tools=[ADD],
                store=recorder.store,
                stream_fn=FauxProvider([faux_response("8")]),
                run_id="second",
            )
        return result.run_id

    assert anyio.run(go, backend="trio") == "second"
    (record,) = load_run(out).records
    assert record.run_id == "second" and record.end_reason == "completed"
    assert record.header["fork"]["parent"] == "add-1@3"
    assert record.entries[3]["result"]["content"][0]["text"] == "4"  # the first edit is kept
    # the id is numbered when taken
    store = MemoryRunStore()
    ids = [
        fork_run_sync(
            recording,
            8,
            config=_config(),
            tools=[ADD],
            store=store,
        ).run_id
        for _ in range(2)
    ]
    assert ids == ["add-1@8", "add-1@8.2"]


@pytest.mark.parametrize(
    ("at", "edit", "message"),
    [
        (10, None, "run 'add-1' has steps 0 to 9; there is no step 10"),
        (-1, None, "run 'add-1' has steps 0 to 9; there is no step -1"),
        (
            2,
            ToolResult("4"),
            "step 2 of run 'add-1' is a stream_done; a ToolResult edit fits a "
            "tool_finished step (steps 3)",
        ),
        (
            3,
            ModelAnswer("x"),
            "step 3 of run 'add-1' is a tool_finished; a ModelAnswer edit fits "
            "a stream_done or stream_error step (steps 2, 7)",
        ),
        (
            2,
            Steer("x"),
            "step 2 of run 'add-1' is a stream_done; a Steer edit fits a "
            "steering_polled step (steps 1, 5, 6, 9)",
        ),
        (0, Messages([]), "a run starts with at least one prompt; the edit gives none"),
    ],
)
def test_bad_forks_are_one_line_and_write_nothing(
    recording: Path, at: int, edit: Any, message: str
) -> None:
    store = MemoryRunStore()
    with pytest.raises(ForkError) as caught:
        fork_run_sync(recording, at, edit, config=_config(), tools=[ADD], store=store)
    assert str(caught.value) == message
    assert store.runs() == []


def test_a_config_or_tools_that_do_not_fit_write_nothing(recording: Path) -> None:
    store = MemoryRunStore()
    with pytest.raises(ForkError, match="the tool 'add', which was not given again"):
        fork_run_sync(recording, 3, config=_config(), store=store)
    with pytest.raises(ForkError, match="get_steering_messages"):
        fork_run_sync(recording, 3, config=AgentLoopConfig(model=MODEL), tools=[ADD], store=store)
    assert store.runs() == []


def test_damaged_and_missing_records(recording: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.jsonl"
    lines = recording.read_text(encoding="utf-8").splitlines()
    damaged.write_text("\n".join([*lines[:3], "{not json", *lines[4:]]) + "\n", encoding="utf-8")
    with pytest.raises(ForkError, match=r"damaged.jsonl:4: not JSON"):
        plan_fork(read_parent(damaged), 1)
    with pytest.raises(ForkError, match=r"cannot read .*nothing\.jsonl"):
        read_parent(tmp_path / "nothing.jsonl")
    with pytest.raises(ForkError, match="no run 'other'"):
        read_parent(recording, "other")
    with pytest.raises(ForkError, match="name the run"):
        read_parent(MemoryRunStore())
    with pytest.raises(ForkError, match="no run 'x'"):
        read_parent(MemoryRunStore(), "x")
