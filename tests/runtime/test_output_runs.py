"""Structured output through run_agent_loop, the Agent and the sync facade (docs/output.md):
the retry path, the retry limit, an abort while an answer is validated, validators, what a
journaled run records and what cannot be an output type."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from agentcore_fsm import (
    AbortController,
    Agent,
    AgentContext,
    AgentLoopConfig,
    Model,
    run_agent_loop,
)
from agentcore_fsm.core.output import ModelRetry, OutputError, output_spec
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.journal import RunSnapshot, derive_run
from agentcore_fsm.persist.store import MemoryRunStore

pytestmark = pytest.mark.anyio
MODEL = Model(id="faux")


class Point(BaseModel):
    x: int
    y: int


def answer(args: Any, id: str = "f1") -> Any:
    return faux_response(tool_calls=[faux_tool_call("final_result", args, id=id)])


async def test_an_invalid_answer_goes_back_and_the_retry_gives_the_output() -> None:
    model = FauxProvider([answer({"x": 1, "y": "two"}, "f1"), answer({"x": 1, "y": 2}, "f2")])
    result = await run_agent_loop(
        ["where?"], AgentContext(), AgentLoopConfig(model=MODEL), stream_fn=model, output_type=Point
    )
    assert result.output == Point(x=1, y=2)
    bad = result[2]
    assert bad.role == "toolResult" and bad.is_error and bad.tool_call_id == "f1"
    assert "y: Input should be a valid integer" in bad.content[0].text


async def test_the_retry_limit_ends_the_run_with_the_last_problem() -> None:
    events: list[Any] = []
    model = FauxProvider([answer({"x": "a", "y": 1}), faux_response("I refuse"), answer({})])
    result = await run_agent_loop(
        ["where?"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        events.append,
        stream_fn=model,
        output_type=Point,
        output_retries=1,
    )
    assert events[-1].reason == "error" and events[-1].output is None
    assert [m.role for m in result] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "assistant",
    ]
    assert "No valid output after 2 answers: No final answer" in result[-1].error_message
    assert not result.has_output
    with pytest.raises(OutputError, match="No final answer"):
        _ = result.output


async def test_a_validator_sends_the_model_back_and_may_change_the_value() -> None:
    def positive(p: Point) -> Point:
        if p.x < 0:
            raise ModelRetry("x must be positive")
        return Point(x=p.x * 10, y=p.y)

    model = FauxProvider([answer({"x": -1, "y": 0}, "f1"), answer({"x": 3, "y": 0}, "f2")])
    result = await run_agent_loop(
        ["where?"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        stream_fn=model,
        output_type=Point,
        output_validators=[positive],
    )
    assert result[2].content[0].text == "x must be positive"
    assert result.output == Point(x=30, y=0)


async def test_an_abort_while_validating_ends_cleanly() -> None:
    controller = AbortController()

    async def stop(p: Point) -> Point:
        controller.abort("enough")
        return p

    events: list[Any] = []
    result = await run_agent_loop(
        ["where?"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        events.append,
        signal=controller.signal,
        stream_fn=FauxProvider([answer({"x": 1, "y": 2})]),
        output_type=Point,
        output_validators=[stop],
    )
    assert events[-1].reason == "aborted"
    assert result[-1].role == "toolResult" and result[-1].content[0].text == "Operation aborted"
    assert not result.has_output


class Pair(TypedDict):
    a: int
    b: str


@dataclasses.dataclass
class Box:
    size: float


@pytest.mark.parametrize(
    ("output_type", "args", "value"),
    [
        (int, {"response": 7}, 7),
        (list[str], {"response": ["a", "b"]}, ["a", "b"]),
        (Pair, {"a": 1, "b": "x"}, {"a": 1, "b": "x"}),
        (Box, {"size": 1.5}, Box(size=1.5)),
        (Point | int, {"response": {"x": 1, "y": 2}}, Point(x=1, y=2)),
    ],
)
async def test_output_types_of_every_kind(output_type: Any, args: Any, value: Any) -> None:
    events: list[Any] = []
    result = await run_agent_loop(
        ["?"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        events.append,
        stream_fn=FauxProvider([answer(args)]),
        output_type=output_type,
    )
    assert result.output == value
    assert events[-1].output == output_spec(output_type).dump(value)


def test_a_type_pydantic_cannot_describe_is_refused() -> None:
    class Opaque:
        pass

    with pytest.raises(TypeError, match="cannot be an output type"):
        output_spec(Opaque)
    with pytest.raises(ValueError, match="output_retries"):
        output_spec(int, retries=-1)
    with pytest.raises(ValueError, match="output mode"):
        output_spec(int, mode="json")  # type: ignore[arg-type]


async def test_a_journaled_run_records_its_output_and_derives_again() -> None:
    store = MemoryRunStore()
    model = FauxProvider([faux_response("plain"), answer({"x": 1, "y": 2})])
    result = await run_agent_loop(
        ["where?"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        stream_fn=model,
        output_type=Point,
        store=store,
        run_id="r1",
    )
    assert result.output == Point(x=1, y=2)
    stored = store.load("r1")
    header = stored.header
    assert header["output"]["mode"] == "tool" and header["output"]["retries"] == 1
    assert header["output"]["schema"]["required"] == ["x", "y"]
    kinds = [e["input"] for e in stored.entries]
    assert kinds.count("output_checked") == 2
    snapshot = RunSnapshot(
        format=header["format"],
        declaration=header["declaration"],
        declaration_hash=header["declaration_hash"],
        header=header,
        entries=stored.entries,
    )
    derived = derive_run(snapshot)
    assert derived.machine.output == {"x": 1, "y": 2}
    assert derived.machine.vars.output_retries_used == 1


async def test_the_agent_prompt_takes_an_output_type() -> None:
    agent = Agent(
        model=MODEL,
        stream_fn=FauxProvider([answer({"x": 1}, "f1"), answer({"x": 1, "y": 2}, "f2")]),
    )
    seen: list[str] = []
    agent.subscribe(lambda event, signal: seen.append(event.type))
    result = await agent.prompt("where?", output_type=Point)
    assert result.output == Point(x=1, y=2)
    assert [m.role for m in agent.state.messages][-2:] == ["assistant", "toolResult"]
    assert "output_partial" in seen and seen[-1] == "agent_end"


def test_the_sync_facade_takes_an_output_type() -> None:
    agent = Agent(model=MODEL, stream_fn=FauxProvider([answer({"x": 4, "y": 5})]))
    result = agent.prompt_sync("where?", output_type=Point)
    assert result.output == Point(x=4, y=5)


async def test_a_continued_run_takes_the_output_of_its_config() -> None:
    from agentcore_fsm import UserMessage, run_agent_loop_continue

    config = AgentLoopConfig(model=MODEL, output=output_spec(Point))
    result = await run_agent_loop_continue(
        AgentContext(messages=[UserMessage(content="where?")]),
        config,
        stream_fn=FauxProvider([answer({"x": 0, "y": 1})]),
    )
    assert result.output == Point(x=0, y=1)
    assert config.output is not None and config.output.mode is None  # the caller's, unchanged


async def test_replaying_a_run_with_an_output_type_is_refused_clearly(tmp_path: Any) -> None:
    from agentcore_fsm.devtools.replay import replay_run
    from agentcore_fsm.devtools.replay_world import ReplayError
    from agentcore_fsm.persist.recorder import RunRecorder, load_run

    path = tmp_path / "run.jsonl"
    with RunRecorder(path) as recorder:
        await run_agent_loop(
            ["where?"],
            AgentContext(),
            AgentLoopConfig(model=MODEL),
            recorder,
            stream_fn=FauxProvider([answer({"x": 1, "y": 2})]),
            output_type=Point,
            store=recorder.store,
            run_id="r1",
            on_transition=recorder,
        )
    run = load_run(path)
    assert run.events[-1].output == {"x": 1, "y": 2}  # derived from the inputs
    with pytest.raises(ReplayError, match="has an output type"):
        await replay_run(path)


def test_a_wrapped_answer_without_its_field_says_what_is_missing() -> None:
    """A type whose schema is not an object is wrapped in ``{"response": ...}``: an answer
    without that field is sent back saying so, in tool mode and in native mode."""
    from agentcore_fsm.core.messages import AssistantMessage, TextContent, ToolCall
    from agentcore_fsm.core.output import OutputInvalid

    tool = output_spec(int, mode="tool")
    native = output_spec(int, mode="native")
    assert tool.wrapped and native.wrapped
    call = ToolCall(id="c1", name=tool.tool_name, arguments={"value": 3})
    with pytest.raises(OutputInvalid) as info:
        tool.parse(AssistantMessage(content=[call]))
    assert str(info.value) == "Invalid final answer: the arguments need the field 'response'."
    with pytest.raises(OutputInvalid) as info:
        native.parse(AssistantMessage(content=[TextContent(text='{"value": 3}')]))
    assert str(info.value) == "Invalid answer: the JSON object needs the field 'response'."
    good = ToolCall(id="c2", name=tool.tool_name, arguments={"response": 3})
    assert tool.parse(AssistantMessage(content=[good])) == 3
    assert native.parse(AssistantMessage(content=[TextContent(text='{"response": 4}')])) == 4


async def test_the_event_stream_form_takes_the_output_of_its_config() -> None:
    """``agent_loop`` (``async with``): ``config.output`` without a mode gets the model's
    default mode, listeners get the partial outputs, and the result carries ``.output``."""
    from agentcore_fsm import agent_loop

    model = FauxProvider([answer({"x": 3, "y": 4})])
    config = AgentLoopConfig(model=MODEL, output=output_spec(Point))
    assert config.output is not None and config.output.mode is None
    async with agent_loop(["where?"], AgentContext(), config, stream_fn=model) as events:
        seen = [event async for event in events]
        result = await events.result()
    assert result.output == Point(x=3, y=4)
    assert model.calls[0].output is not None and model.calls[0].output.mode == "tool"
    partials = [e.output for e in seen if e.type == "output_partial"]
    assert partials and partials[-1] == {"x": 3, "y": 4}
    assert seen[-1].type == "agent_end" and seen[-1].output == {"x": 3, "y": 4}


def test_junk_output_outcomes_are_refused() -> None:
    """An ``output_checked`` input whose error is not a str, and a recorded ``output_checked``
    entry of the wrong shape, are refused with errors that name what is wrong; the machine is
    left where it was."""
    from agentcore_fsm.core.declared import MachineInputError
    from agentcore_fsm.core.events import StreamDone
    from agentcore_fsm.core.machine import LoopMachine
    from agentcore_fsm.core.messages import UserMessage
    from agentcore_fsm.core.protocol import OutputChecked, ValidateOutput
    from agentcore_fsm.persist.codec import RecordError
    from agentcore_fsm.persist.inputs import decode_entry

    config = AgentLoopConfig(model=MODEL, output=output_spec(Point, mode="tool"))
    m = LoopMachine([UserMessage(content="where?")], AgentContext(), config)
    m.start()
    final = answer({"x": 1, "y": 2})
    step = m.stream_event(StreamDone(reason="toolUse", message=final))
    assert m.state == "validating_output" and isinstance(step.effects[0], ValidateOutput)
    with pytest.raises(MachineInputError) as info:
        m.feed(OutputChecked(error=3))  # type: ignore[arg-type]
    assert "output_checked: error must be a str or None, not" in str(info.value)
    assert m.state == "validating_output"
    for entry, problem in [
        ({"input": "output_checked", "error": 3}, "error"),
        ({"input": "output_checked", "value": 1, "extra": True}, "unknown field 'extra'"),
    ]:
        with pytest.raises(RecordError) as bad:
            decode_entry(entry, 0, lambda name: None)
        assert "output_checked" in str(bad.value) and problem in str(bad.value), bad.value
    assert m.feed(OutputChecked(value={"x": 1, "y": 2})).run_over
