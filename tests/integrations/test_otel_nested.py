"""Traces of nested runs (an agent as a tool, docs/multi-agent.md; docs/tracing.md#nested-runs),
on trio and asyncio, against the real OpenTelemetry SDK's in-memory exporter: a nested run's
spans are children of the ``execute_tool`` span of the call that started it, with the same
instrumentation, named after the tool, and each run span counts its own model calls only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentcore_fsm import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    run_agent_loop,
)
from agentcore_fsm.core.messages import Usage
from agentcore_fsm.integrations import otel
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

pytestmark = pytest.mark.anyio

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
OBJECT: dict[str, Any] = {"type": "object"}


class Spans:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name == name]

    def parent_of(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        (found,) = [s for s in self.all() if s.context.span_id == span.parent.span_id]
        return found

    def tree(self) -> list[tuple[str, list[Any]]]:
        """The spans as (name, children), children sorted by name."""
        spans = self.all()

        def children(parent: int | None) -> list[tuple[str, list[Any]]]:
            found = [
                s for s in spans if (s.parent.span_id if s.parent is not None else None) == parent
            ]
            return sorted((s.name, children(s.context.span_id)) for s in found)

        return children(None)


@pytest.fixture
def spans() -> Iterator[Spans]:
    made = Spans()
    try:
        yield made
    finally:
        otel.uninstrument()
        made.provider.shutdown()


def usage(tokens_in: int, tokens_out: int) -> Usage:
    return Usage(input=tokens_in, output=tokens_out, total_tokens=tokens_in + tokens_out)


def ask(name: str, *ids: str) -> Any:
    calls = [faux_tool_call(name, {"prompt": f"question {i}"}, id=i) for i in ids]
    return faux_response(tool_calls=calls, usage=usage(100, 10))


async def add(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text="3")])


def researcher() -> Agent:
    """An agent with a tool of its own: each call makes two model calls and runs ``add`` (its
    answers depend on its own transcript only, so parallel calls get the same ones)."""

    def stream_fn(model: Any, context: Any, options: Any) -> Any:
        if context.messages[-1].role == "user":
            reply = faux_response(tool_calls=[faux_tool_call("add", {}, id="a")], usage=usage(7, 1))
        else:
            reply = faux_response("three", usage=usage(5, 2))
        return FauxProvider([reply])(model, context, options)

    return Agent(tools=[AgentTool("add", "Add.", OBJECT, add)], stream_fn=stream_fn, model=MODEL)


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_nested_runs_are_children_of_the_calls_that_started_them(
    anyio_backend: str, spans: Spans
) -> None:
    inst = otel.Instrumentation(spans.provider, agent_name="boss")
    tool = researcher().as_tool("researcher", "Ask the researcher.")
    messages = await run_agent_loop(
        ["Research twice"],
        AgentContext(tools=[tool]),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider(
            [ask("researcher", "c1", "c2"), faux_response("done", usage=usage(300, 3))]
        ),
        instrument=inst,  # only this run asks: the nested runs follow it
    )
    assert messages[-1].text() == "done"
    inner = (
        "invoke_agent researcher",
        [("chat faux-1", []), ("chat faux-1", []), ("execute_tool add", [])],
    )
    assert spans.tree() == [
        (
            "invoke_agent boss",
            [
                ("chat faux-1", []),
                ("chat faux-1", []),
                ("execute_tool researcher", [inner]),
                ("execute_tool researcher", [inner]),
            ],
        )
    ]
    # each nested run is under the execute_tool span of its own call (parallel calls)
    for run in spans.named("invoke_agent researcher"):
        call = spans.parent_of(run)
        assert call is not None
        call_id = attributes(call)["gen_ai.tool.call.id"]
        assert attributes(run) == {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": "faux",
            "gen_ai.request.model": "faux-1",
            "gen_ai.agent.name": "researcher",
            "agentcore_fsm.nested.path": (call_id,),
            "agentcore_fsm.nested.agents": ("researcher",),
            "gen_ai.usage.input_tokens": 12,  # its own two model calls
            "gen_ai.usage.output_tokens": 3,
            "agentcore_fsm.run.end_reason": "completed",
        }
        assert run.context.trace_id == call.context.trace_id
    (outer,) = spans.named("invoke_agent boss")
    # the outer run span counts its own model calls, not the nested runs' (no double count)
    assert attributes(outer)["gen_ai.usage.input_tokens"] == 400
    assert attributes(outer)["gen_ai.usage.output_tokens"] == 13
    assert "agentcore_fsm.nested.path" not in attributes(outer)
    tokens = sum(
        attributes(s)["gen_ai.usage.input_tokens"]
        for s in spans.all()
        if s.name.startswith("invoke_agent")
    )
    assert tokens == sum(
        attributes(s)["gen_ai.usage.input_tokens"] for s in spans.all() if s.name == "chat faux-1"
    )


async def test_two_levels_nest_and_the_global_switch_traces_each_run_once(
    anyio_backend: str, spans: Spans
) -> None:
    leaf = Agent(stream_fn=FauxProvider([faux_response("leaf answer")]), model=MODEL)
    middle = Agent(
        tools=[leaf.as_tool("leaf", "The leaf.")],
        stream_fn=FauxProvider([ask("leaf", "m1"), faux_response("middle answer")]),
        model=MODEL,
    )
    boss = Agent(
        tools=[middle.as_tool("middle", "The middle.")],
        stream_fn=FauxProvider([ask("middle", "o1"), faux_response("outer answer")]),
        model=MODEL,
    )
    otel.instrument(spans.provider)  # every run follows the switch: each is traced once
    messages = await boss.prompt("start")
    assert messages[-1].text() == "outer answer"
    leaf_run = ("invoke_agent leaf", [("chat faux-1", [])])
    middle_run = (
        "invoke_agent middle",
        [("chat faux-1", []), ("chat faux-1", []), ("execute_tool leaf", [leaf_run])],
    )
    assert spans.tree() == [
        (
            "invoke_agent",
            [("chat faux-1", []), ("chat faux-1", []), ("execute_tool middle", [middle_run])],
        )
    ]
    (deep,) = spans.named("invoke_agent leaf")
    assert attributes(deep)["agentcore_fsm.nested.path"] == ("o1", "m1")
    assert attributes(deep)["agentcore_fsm.nested.agents"] == ("middle", "leaf")
    assert len({s.context.trace_id for s in spans.all()}) == 1


async def test_an_untraced_run_leaves_its_nested_runs_untraced(
    anyio_backend: str, spans: Spans
) -> None:
    tool = researcher().as_tool("researcher", "Ask the researcher.")
    inst = otel.Instrumentation(spans.provider)

    async def one(instrument: Any) -> None:
        await run_agent_loop(
            ["Research"],
            AgentContext(tools=[tool]),
            AgentLoopConfig(model=MODEL),
            stream_fn=FauxProvider([ask("researcher", "c1"), faux_response("done")]),
            instrument=instrument,
        )

    await one(None)  # no switch on, nothing asked: no spans at all
    assert spans.all() == []
    await one(inst)  # then traced: the nested run with it
    assert [s.name for s in spans.all() if s.name.startswith("invoke_agent")] == [
        "invoke_agent researcher",
        "invoke_agent",
    ]


async def test_a_nested_run_is_observed_as_the_run_that_started_it(
    anyio_backend: str, spans: Spans
) -> None:
    """A nested run gets its outer run's observers: with the switch on, an outer run that says
    ``instrument=False`` leaves its nested runs untraced too; and importing this module leaves
    every run's observers as they were (no observer is added to runs that trace nothing)."""
    from agentcore_fsm.runtime.observer import registered_observers

    assert registered_observers() == ()  # imported, nothing switched on: plain runs stay plain
    otel.instrument(spans.provider)
    tool = researcher().as_tool("researcher", "Ask the researcher.")
    await run_agent_loop(
        ["Research"],
        AgentContext(tools=[tool]),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([ask("researcher", "c1"), faux_response("done")]),
        instrument=False,
    )
    assert spans.all() == []
