"""Agents that call agents (docs/multi-agent.md): an agent as a tool, its events passed up with
the path of calls, typed input and output, history, the depth rule and the check of the inner
configuration when the outer run starts. Budget, abort and approval: test_nested_sharing.py.
Every async test runs on trio and on asyncio."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from agentcore_fsm import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.agent.nested import NestedAgentTool, run_tool
from agentcore_fsm.core.messages import Usage
from agentcore_fsm.core.nesting import NestedEvent, levels, nested_event_of
from agentcore_fsm.devtools.testing import (
    FauxProvider,
    NestedRunViolation,
    check_nested_run,
    faux_response,
    faux_tool_call,
)

pytestmark = pytest.mark.anyio

MODEL = Model(id="m")


def call(name: str, prompt: str, id: str) -> Any:
    return faux_response(tool_calls=[faux_tool_call(name, {"prompt": prompt}, id=id)])


def result_texts(messages: list[Any]) -> dict[str, str]:
    return {
        m.tool_call_id: m.content[0].text
        for m in messages
        if getattr(m, "role", "") == "toolResult"
    }


async def test_an_agent_as_a_tool_answers_with_its_final_text_and_events_carry_the_path() -> None:
    worker_model = FauxProvider([faux_response("Paris is the capital.")])
    worker = Agent(system_prompt="You research.", stream_fn=worker_model)
    tool = worker.as_tool("researcher", "Ask the researcher.")
    assert isinstance(tool, NestedAgentTool)
    assert tool.parameters["required"] == ["prompt"]
    boss = Agent(
        tools=[tool],
        stream_fn=FauxProvider([call("researcher", "capital?", "c1"), faux_response("Paris.")]),
    )
    events: list[Any] = []
    boss.subscribe(lambda e, s: events.append(e))
    messages = await boss.prompt("Find it")
    assert result_texts(messages) == {"c1": "Paris is the capital."}
    # the inner run saw its own system prompt and the prompt the model gave
    (inner_context,) = worker_model.calls
    assert inner_context.system_prompt == "You research."
    assert [m.content for m in inner_context.messages] == ["capital?"]
    # the template agent is untouched
    assert worker.state.messages == []
    split = levels(events)
    assert set(split) == {(), ("c1",)}
    assert split[("c1",)][0].type == "agent_start" and split[("c1",)][-1].type == "agent_end"
    tagged = [nested_event_of(e) for e in events if nested_event_of(e) is not None]
    assert all(t is not None and t.agents == ("researcher",) for t in tagged)
    # the progress updates carry the inner answer's text as it streams
    texts = [
        e.partial_result.content[0].text
        for e in events
        if nested_event_of(e) is not None and e.partial_result.content
    ]
    assert texts[-1] == "Paris is the capital."
    assert any(len(t) < len(texts[-1]) for t in texts)  # streamed, not only the final text
    summaries = check_nested_run(events, messages)
    assert summaries[("c1",)] is not None and summaries[("c1",)].reason == "completed"
    # the update is an ordinary event of the outer call, inside its start and end
    kinds = [
        (e.type, getattr(e, "tool_call_id", None)) for e in events if e.type.startswith("tool")
    ]
    assert kinds[0] == ("tool_execution_start", "c1") and kinds[-1] == ("tool_execution_end", "c1")


async def test_nested_events_pass_up_two_levels_with_the_full_path() -> None:
    leaf = Agent(stream_fn=FauxProvider([faux_response("leaf answer")]))
    middle = Agent(
        tools=[leaf.as_tool("leaf", "The leaf.")],
        stream_fn=FauxProvider([call("leaf", "go", "m1"), faux_response("middle answer")]),
    )
    events: list[Any] = []
    messages = await run_agent_loop(
        [UserMessage(content="start")],
        AgentContext(tools=[middle.as_tool("middle", "The middle.")]),
        AgentLoopConfig(model=MODEL),
        events.append,
        stream_fn=FauxProvider([call("middle", "go", "o1"), faux_response("outer answer")]),
    )
    assert result_texts(messages) == {"o1": "middle answer"}
    split = levels(events)
    assert set(split) == {(), ("o1",), ("o1", "m1")}
    deep = [nested_event_of(e) for e in events]
    assert {d.agents for d in deep if d is not None and d.path == ("o1", "m1")} == {
        ("middle", "leaf")
    }
    # the middle run's result for the leaf call is in its own stream
    middle_results = [
        e.message
        for e in split[("o1",)]
        if e.type == "message_end" and e.message.role == "toolResult"
    ]
    assert [m.content[0].text for m in middle_results] == ["leaf answer"]
    summaries = check_nested_run(events, messages)
    assert set(summaries) == {(), ("o1",), ("o1", "m1")}


async def test_typed_input_and_output() -> None:
    class Question(BaseModel):
        topic: str
        depth: int

    class Finding(BaseModel):
        answer: str
        confidence: float

    answer = {"answer": "42", "confidence": 0.5}
    worker_model = FauxProvider(
        [
            faux_response(tool_calls=[faux_tool_call("final_result", answer, id="f")]),
            faux_response("sent"),
        ]
    )
    worker = Agent(stream_fn=worker_model)
    tool = worker.as_tool("research", "Research.", input_type=Question, output_type=Finding)
    assert tool.parameters is Question
    messages = await run_agent_loop(
        [UserMessage(content="q")],
        AgentContext(tools=[tool]),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider(
            [
                faux_response(
                    tool_calls=[faux_tool_call("research", {"topic": "life", "depth": 2}, id="t")]
                ),
                faux_response("ok"),
            ]
        ),
    )
    # the inner prompt is the typed input's JSON
    assert json.loads(worker_model.calls[0].messages[0].content) == {"topic": "life", "depth": 2}
    (result,) = [m for m in messages if m.role == "toolResult"]
    assert json.loads(result.content[0].text) == {"answer": "42", "confidence": 0.5}
    assert result.details["output"] == {"answer": "42", "confidence": 0.5}
    assert not result.is_error


async def test_typed_output_that_never_validates_is_an_error_result() -> None:
    class Finding(BaseModel):
        answer: str

    worker = Agent(stream_fn=FauxProvider([faux_response("not json"), faux_response("still not")]))
    messages = await run_agent_loop(
        [UserMessage(content="q")],
        AgentContext(tools=[worker.as_tool("research", "Research.", output_type=Finding)]),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([call("research", "x", "t"), faux_response("ok")]),
    )
    (result,) = [m for m in messages if m.role == "toolResult"]
    assert result.is_error
    assert "agent 'research' ended with" in result.content[0].text


async def test_history_is_fresh_per_call_unless_kept() -> None:
    for keep in (False, True):
        worker_model = FauxProvider([faux_response("first"), faux_response("second")])
        worker = Agent(stream_fn=worker_model)
        messages = await run_agent_loop(
            [UserMessage(content="q")],
            AgentContext(tools=[worker.as_tool("w", "Worker.", keep_history=keep)]),
            AgentLoopConfig(model=MODEL),
            stream_fn=FauxProvider(
                [call("w", "one", "a"), call("w", "two", "b"), faux_response("done")]
            ),
        )
        assert result_texts(messages) == {"a": "first", "b": "second"}
        second = [
            m.content if isinstance(m.content, str) else m.content[0].text
            for m in worker_model.calls[1].messages
        ]
        assert second == (["one", "first", "two"] if keep else ["two"])


async def test_inner_usage_is_the_tool_results_usage() -> None:
    used = Usage(input=10, output=5, total_tokens=15)
    worker = Agent(
        tools=[],
        stream_fn=FauxProvider([faux_response("a", usage=used)]),
    )
    messages = await run_agent_loop(
        [UserMessage(content="q")],
        AgentContext(tools=[worker.as_tool("w", "Worker.")]),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([call("w", "x", "a"), faux_response("done")]),
    )
    (result,) = [m for m in messages if m.role == "toolResult"]
    assert result.usage is not None
    assert (result.usage.input, result.usage.output, result.usage.total_tokens) == (10, 5, 15)


async def test_a_plain_run_configuration_as_a_tool() -> None:
    seen: list[str] = []

    async def note(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        seen.append(args["x"])
        return AgentToolResult(content=[TextContent(text="noted")])

    inner_tools = [AgentTool("note", "Note.", {"type": "object"}, note)]
    tool = run_tool(
        AgentLoopConfig(model=MODEL),
        "noter",
        "Takes notes.",
        system_prompt="Note things.",
        tools=inner_tools,
        stream_fn=FauxProvider(
            [
                faux_response(tool_calls=[faux_tool_call("note", {"x": "hi"}, id="n")]),
                faux_response("noted it"),
            ]
        ),
    )
    events: list[Any] = []
    messages = await run_agent_loop(
        [UserMessage(content="q")],
        AgentContext(tools=[tool]),
        AgentLoopConfig(model=MODEL),
        events.append,
        stream_fn=FauxProvider([call("noter", "x", "a"), faux_response("done")]),
    )
    assert seen == ["hi"]
    assert result_texts(messages) == {"a": "noted it"}
    check_nested_run(events, messages)


async def test_an_agent_reaching_itself_stops_at_the_depth_limit_naming_the_path() -> None:
    def always_call(context: Any) -> Any:
        return faux_response(tool_calls=[faux_tool_call("self", {"prompt": "again"})])

    def answer(context: Any) -> Any:
        last = context.messages[-1]
        if getattr(last, "role", "") == "toolResult":
            return faux_response(f"saw: {last.content[0].text}")
        return always_call(context)

    model = FauxProvider([answer] * 20)
    agent = Agent(stream_fn=model)
    agent.state.tools = [agent.as_tool("self", "Myself.", max_depth=2)]
    events: list[Any] = []
    messages = await run_agent_loop(
        [UserMessage(content="q")],
        AgentContext(tools=agent.state.tools),
        AgentLoopConfig(model=MODEL),
        events.append,
        stream_fn=model,
    )
    split = levels(events)
    assert max(len(p) for p in split) == 2  # two nested runs, the third call refused
    refused = [
        e.message
        for p, es in split.items()
        for e in es
        if len(p) == 2 and e.type == "message_end" and e.message.role == "toolResult"
    ]
    assert len(refused) == 1 and refused[0].is_error
    assert refused[0].content[0].text == (
        "agent 'self' was not called: the call would nest runs 3 deep, deeper than its "
        "max_depth 2 (path of agents: outer > self > self > self)"
    )
    assert messages[-1].content[0].text.startswith("saw: saw: ")
    check_nested_run(events, messages)


async def test_the_default_depth_is_three() -> None:
    model = FauxProvider(
        [lambda c: faux_response(tool_calls=[faux_tool_call("self", {"prompt": "x"})])]
        + [lambda c: faux_response("end")] * 4
    )
    agent = Agent(stream_fn=model)
    agent.state.tools = [agent.as_tool("self", "Myself.")]
    for _ in range(3):
        model.responses.appendleft(
            lambda c: faux_response(tool_calls=[faux_tool_call("self", {"prompt": "x"})])
        )
    events: list[Any] = []
    await run_agent_loop(
        [UserMessage(content="q")],
        AgentContext(tools=agent.state.tools),
        AgentLoopConfig(model=MODEL),
        events.append,
        stream_fn=model,
    )
    assert max(len(p) for p in levels(events)) == 3


async def test_an_invalid_inner_agent_is_reported_when_the_outer_run_starts() -> None:
    broken = Agent()  # no model, no stream function
    outer_model = FauxProvider([call("helper", "x", "a"), faux_response("done")])
    middle = Agent(
        stream_fn=FauxProvider([faux_response("m")]),
        tools=[broken.as_tool("helper", "Helps.")],
    )
    with pytest.raises(ValueError, match=r"inner agent outer > middle > helper: .*stream"):
        await run_agent_loop(
            [UserMessage(content="q")],
            AgentContext(tools=[middle.as_tool("middle", "The middle.")]),
            AgentLoopConfig(model=MODEL),
            stream_fn=outer_model,
        )
    assert outer_model.calls == []  # reported before the model was asked anything
    boss = Agent(stream_fn=outer_model, tools=[broken.as_tool("helper", "Helps.")])
    with pytest.raises(ValueError, match=r"inner agent outer > helper"):
        await boss.prompt("go")
    assert outer_model.calls == [] and not boss.is_busy


async def test_duplicate_and_edited_tools_of_an_inner_agent_are_reported() -> None:
    async def run(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult()

    twice = Agent(
        stream_fn=FauxProvider([]),
        tools=[AgentTool("t", "T.", {"type": "object"}, run), AgentTool("t", "T.", {}, run)],
    )
    with pytest.raises(ValueError, match="two tools are named 't'"):
        await run_agent_loop(
            [UserMessage(content="q")],
            AgentContext(tools=[twice.as_tool("w", "W.")]),
            AgentLoopConfig(model=MODEL),
            stream_fn=FauxProvider([]),
        )
    schema: dict[str, Any] = {"type": "object"}
    edited = Agent(stream_fn=FauxProvider([]), tools=[AgentTool("t", "T.", schema, run)])
    schema["type"] = 12  # an in-place edit the tool did not see
    with pytest.raises(ValueError, match="inner agent outer > w"):
        await run_agent_loop(
            [UserMessage(content="q")],
            AgentContext(tools=[edited.as_tool("w", "W.")]),
            AgentLoopConfig(model=MODEL),
            stream_fn=FauxProvider([]),
        )


def test_as_tool_checks_its_options() -> None:
    agent = Agent(stream_fn=FauxProvider([]))
    with pytest.raises(ValueError, match="max_depth"):
        agent.as_tool("a", "A.", max_depth=0)
    with pytest.raises(TypeError, match="input_type"):
        agent.as_tool("a", "A.", input_type=dict)
    with pytest.raises(TypeError, match="keep_history"):
        agent.as_tool("a", "A.", keep_history="yes")
    with pytest.raises(TypeError, match="output_type"):
        agent.as_tool("a", "A.", output_type=object())
    with pytest.raises(TypeError, match="AgentLoopConfig"):
        run_tool({}, "a", "A.")  # type: ignore[arg-type]


def test_the_checker_finds_events_outside_their_call_and_runs_cut_without_cause() -> None:
    from agentcore_fsm.core.events import AgentStartEvent, ToolExecutionUpdateEvent

    stray = ToolExecutionUpdateEvent(
        tool_call_id="c9",
        tool_name="w",
        partial_result=AgentToolResult(details=NestedEvent(("c9",), ("w",), AgentStartEvent())),
    )
    with pytest.raises(NestedRunViolation) as caught:
        check_nested_run([AgentStartEvent(), stray])
    assert caught.value.rule == "N1.enclosure" and caught.value.path == ("c9",)


async def test_the_checker_refuses_an_inner_run_cut_while_its_call_succeeded() -> None:
    from agentcore_fsm.core.events import AgentStartEvent

    for is_error in (False, True):

        async def half(
            call_id: str, args: Any, signal: Any, on_update: Any, is_error: bool = is_error
        ) -> Any:
            # a tool that shows the start of an inner run and never its end
            on_update(AgentToolResult(details=NestedEvent((call_id,), ("w",), AgentStartEvent())))
            return AgentToolResult(content=[TextContent(text="r")], is_error=is_error)

        events: list[Any] = []
        messages = await run_agent_loop(
            [UserMessage(content="q")],
            AgentContext(tools=[AgentTool("w", "W.", {"type": "object"}, half)]),
            AgentLoopConfig(model=MODEL),
            events.append,
            stream_fn=FauxProvider([call("w", "x", "c1"), faux_response("done")]),
        )
        if is_error:  # cut, as an aborted call's would be: checked as a prefix
            assert check_nested_run(events, messages)[("c1",)] is None
        else:
            with pytest.raises(NestedRunViolation) as caught:
                check_nested_run(events, messages)
            assert caught.value.rule == "N2.cut" and caught.value.path == ("c1",)
