"""OpenTelemetry tracing and metrics (agentcore_fsm.integrations.otel, docs/tracing.md), on trio
and asyncio,
against the real SDK: spans go to its in-memory exporter, measurements to its in-memory reader.

Every test asserts exact values: the span tree, each span's attributes and status, the
transition events of the run span, the data points of each histogram.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import agentcore_fsm
from agentcore_fsm import (
    AbortController,
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UserMessage,
    agent_loop,
    run_agent_loop,
    run_agent_loop_continue,
)
from agentcore_fsm.cli import commands as cli
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.messages import Cost, ModelCost, Usage
from agentcore_fsm.integrations import otel
from agentcore_fsm.integrations.otel import DURATION_BUCKETS, TOKEN_BUCKETS, Instrumentation
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.store import MemoryRunStore
from agentcore_fsm.runtime import observer
from agentcore_fsm.runtime.resume import resume_run
from tests.integrations.providers._provider_sse_server import Reply, ScriptedServer

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
MODEL = Model(id="faux-1", provider="faux", api="faux-api")
OBJECT: dict[str, Any] = {"type": "object"}
SECRET_PROMPT = "my secret prompt 7f3a"
SECRET_ARG = "secret-argument-91b2"
SECRET_RESULT = "secret-result-c4d8"


# --- the SDK, in memory -------------------------------------------------------------------------


@dataclass
class Telemetry:
    spans_out: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def instrumentation(self, **kwargs: Any) -> Instrumentation:
        return Instrumentation(self.tracer_provider, self.meter_provider, **kwargs)

    def spans(self) -> list[ReadableSpan]:
        return list(self.spans_out.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        (found,) = [s for s in self.spans() if s.name == name]
        return found

    def tree(self) -> list[tuple[str, list[Any]]]:
        """The finished spans as a tree of (name, children), children sorted by name (parallel
        tools start in no fixed order)."""
        spans = self.spans()
        ids = {s.context.span_id for s in spans}

        def children(parent: int | None) -> list[tuple[str, list[Any]]]:
            found = [
                s
                for s in spans
                if (s.parent.span_id if s.parent is not None else None) == parent
                or (parent is None and s.parent is not None and s.parent.span_id not in ids)
            ]
            return sorted((s.name, children(s.context.span_id)) for s in found)

        return children(None)

    def points(self, metric: str) -> list[HistogramDataPoint]:
        data = self.reader.get_metrics_data()
        found: list[HistogramDataPoint] = []
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        found.extend(p for p in m.data.data_points)  # type: ignore[misc]
        return found

    def histogram(self, metric: str) -> list[tuple[dict[str, Any], int, float]]:
        """(attributes, count, sum) of each data point, sorted."""
        rows = [(dict(p.attributes or {}), p.count, p.sum) for p in self.points(metric)]
        return sorted(rows, key=lambda r: json.dumps(r[0], sort_keys=True))


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    try:
        yield Telemetry(exporter, reader, tracer_provider, meter_provider)
    finally:
        otel.uninstrument()
        tracer_provider.shutdown()
        meter_provider.shutdown()


def status(span: ReadableSpan) -> tuple[str, str | None]:
    return span.status.status_code.name, span.status.description


def transitions(span: ReadableSpan) -> list[tuple[int, str, str, str]]:
    out = []
    for event in span.events:
        if event.name == otel.TRANSITION_EVENT:
            a = event.attributes or {}
            index, trigger = a[otel.TRANSITION_INDEX], a[otel.TRANSITION_TRIGGER]
            source, dest = a[otel.TRANSITION_SOURCE], a[otel.TRANSITION_DESTINATION]
            assert isinstance(index, int)
            out.append((index, str(trigger), str(source), str(dest)))
    return out


def exceptions(span: ReadableSpan) -> list[tuple[Any, Any]]:
    return [
        ((e.attributes or {})["exception.type"], (e.attributes or {})["exception.message"])
        for e in span.events
        if e.name == "exception"
    ]


TOOL_OPERATION = {"gen_ai.operation.name": "execute_tool"}


def result(text: str, **kwargs: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=text)], **kwargs)


# --- a run with parallel tools, each making a span of its own ---------------------------------

TOOLS_RUN = [
    ("start", "idle", "awaiting_steering"),
    ("skip_steering_poll", "awaiting_steering", "streaming"),
    ("model_finished", "streaming", "preparing_tools"),
    ("tools_prepared", "preparing_tools", "executing"),
    ("tools_settled", "executing", "turn_end"),
    ("after_turn", "turn_end", "closing_turn"),
    ("proceeded", "closing_turn", "awaiting_steering"),
    ("skip_steering_poll", "awaiting_steering", "streaming"),
    ("model_finished", "streaming", "turn_end"),
    ("after_turn", "turn_end", "closing_turn"),
    ("proceeded", "closing_turn", "awaiting_steering"),
    ("skip_steering_poll", "awaiting_steering", "awaiting_follow_up"),
    ("skip_follow_up_poll", "awaiting_follow_up", "stopped"),
]


def tools_for(telemetry: Telemetry) -> list[AgentTool]:
    tracer = telemetry.tracer_provider.get_tracer("the-tools")

    async def lookup(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        with tracer.start_as_current_span("lookup's own work"):
            await anyio.sleep(0)
        return result(f"found {params['q']}")

    def compute(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        # a plain function: it runs in a worker thread
        with tracer.start_as_current_span("compute's own work in a thread"):
            pass
        return result(str(params["n"] * 2))

    return [
        AgentTool("lookup", "Look something up.", OBJECT, lookup),
        AgentTool("compute", "Double a number.", OBJECT, compute),
    ]


def tools_script() -> FauxProvider:
    calls = [
        faux_tool_call("lookup", {"q": "otel"}, id="call_a"),
        faux_tool_call("compute", {"n": 21}, id="call_b"),
    ]
    return FauxProvider(
        [
            faux_response(
                tool_calls=calls,
                usage=Usage(
                    input=100,
                    output=20,
                    cache_read=30,
                    cache_write=10,
                    total_tokens=160,
                    cost=Cost(total=0.25),
                ),
            ),
            faux_response("Found otel; 42.", usage=Usage(input=200, output=7, total_tokens=207)),
        ]
    )


async def test_a_run_with_parallel_tools_is_one_tree_of_spans(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    seen: list[TransitionRecord] = []
    inst = telemetry.instrumentation(agent_name="helper")
    config = AgentLoopConfig(model=MODEL, temperature=0.2, max_tokens=512, session_id="s-1")
    messages = await run_agent_loop(
        ["Look it up and double 21"],
        AgentContext(system_prompt="Be brief.", tools=tools_for(telemetry)),
        config,
        stream_fn=tools_script(),
        on_transition=seen.append,
        instrument=inst,
    )
    assert messages[-1].text() == "Found otel; 42."

    assert telemetry.tree() == [
        (
            "invoke_agent helper",
            [
                ("chat faux-1", []),
                ("chat faux-1", []),
                ("execute_tool compute", [("compute's own work in a thread", [])]),
                ("execute_tool lookup", [("lookup's own work", [])]),
            ],
        )
    ]
    run = telemetry.span("invoke_agent helper")
    assert run.kind == SpanKind.INTERNAL
    scope = run.instrumentation_scope
    assert scope is not None
    assert (scope.name, scope.version, scope.schema_url) == (
        "agentcore_fsm",
        agentcore_fsm.__version__,
        "https://opentelemetry.io/schemas/1.41.0",
    )
    assert status(run) == ("UNSET", None)
    assert dict(run.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "faux",
        "gen_ai.request.model": "faux-1",
        "gen_ai.agent.name": "helper",
        "gen_ai.conversation.id": "s-1",
        "gen_ai.usage.input_tokens": 140 + 200,
        "gen_ai.usage.output_tokens": 27,
        "gen_ai.usage.cache_read.input_tokens": 30,
        "gen_ai.usage.cache_creation.input_tokens": 10,
        "agentcore_fsm.usage.cost": 0.25,
        "agentcore_fsm.run.end_reason": "completed",
    }
    # every transition is an event of the run span, as on_transition (still called) got it
    assert [t[1:] for t in transitions(run)] == TOOLS_RUN
    assert transitions(run) == [(r.index, r.trigger, r.source, r.dest) for r in seen]
    assert [e.name for e in run.events] == [otel.TRANSITION_EVENT] * len(TOOLS_RUN)

    first, second = sorted(
        (s for s in telemetry.spans() if s.name == "chat faux-1"), key=lambda s: s.start_time or 0
    )
    request = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "faux",
        "gen_ai.request.model": "faux-1",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 512,
        "gen_ai.conversation.id": "s-1",
        "gen_ai.response.model": "faux-1",
    }
    assert first.kind == SpanKind.CLIENT
    assert first.parent is not None and first.parent.span_id == run.context.span_id
    assert dict(first.attributes or {}) == {
        **request,
        "gen_ai.response.finish_reasons": ("tool_call",),
        "gen_ai.usage.input_tokens": 140,  # the cached tokens included
        "gen_ai.usage.output_tokens": 20,
        "gen_ai.usage.cache_read.input_tokens": 30,
        "gen_ai.usage.cache_creation.input_tokens": 10,
        "agentcore_fsm.usage.cost": 0.25,
    }
    assert dict(second.attributes or {}) == {
        **request,
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 200,
        "gen_ai.usage.output_tokens": 7,
    }
    assert status(first) == status(second) == ("UNSET", None)

    for name, call_id, description in [
        ("lookup", "call_a", "Look something up."),
        ("compute", "call_b", "Double a number."),
    ]:
        span = telemetry.span(f"execute_tool {name}")
        assert span.kind == SpanKind.INTERNAL
        assert span.parent is not None and span.parent.span_id == run.context.span_id
        assert status(span) == ("UNSET", None)
        assert dict(span.attributes or {}) == {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.description": description,
        }
        # the tool's own span is a child of its execute_tool span (the same trace)
        (own,) = [s for s in telemetry.spans() if s.name.startswith(f"{name}'s own work")]
        assert own.parent is not None and own.parent.span_id == span.context.span_id
        assert own.context.trace_id == run.context.trace_id

    measured = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "faux",
        "gen_ai.request.model": "faux-1",
        "gen_ai.response.model": "faux-1",
    }
    assert telemetry.histogram("gen_ai.client.token.usage") == [
        ({**measured, "gen_ai.token.type": "input"}, 2, 340),
        ({**measured, "gen_ai.token.type": "output"}, 2, 27),
    ]
    ((attributes, count, total),) = telemetry.histogram("gen_ai.client.operation.duration")
    assert (attributes, count) == (measured, 2) and total > 0
    tools = telemetry.histogram("gen_ai.execute_tool.duration")
    assert [(a, n) for a, n, _ in tools] == [
        ({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "compute"}, 1),
        ({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}, 1),
    ]
    # the conventions' bucket boundaries
    (duration,) = telemetry.points("gen_ai.client.operation.duration")
    assert tuple(duration.explicit_bounds) == DURATION_BUCKETS
    assert tuple(telemetry.points("gen_ai.client.token.usage")[0].explicit_bounds) == TOKEN_BUCKETS
    assert DURATION_BUCKETS[0] == 0.01 and DURATION_BUCKETS[-1] == 81.92
    assert TOKEN_BUCKETS[-1] == 67108864


async def test_the_global_switch_traces_runs_and_the_agent(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    otel.instrument(telemetry.tracer_provider, telemetry.meter_provider)
    switched_on = otel.get_instrumentation()
    assert switched_on is not None and switched_on in observer.registered_observers()
    user_tracer = telemetry.tracer_provider.get_tracer("the-app")
    with user_tracer.start_as_current_span("request"):
        await run_agent_loop(
            ["hi"],
            AgentContext(),
            AgentLoopConfig(model=MODEL),
            stream_fn=FauxProvider([faux_response("hello")]),
        )
    agent = Agent(stream_fn=FauxProvider([faux_response("hello")]), model=MODEL)
    await agent.prompt("hi")
    async with agent_loop(
        ["hi"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([faux_response("streamed")]),
    ) as events:
        async for _ in events:
            pass
    # instrument=True takes the global instrumentation
    await run_agent_loop(
        ["hi"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([faux_response("asked for")]),
        instrument=True,
    )
    # instrument=False wins over the switch, and so does uninstrument()
    await run_agent_loop(
        ["hi"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([faux_response("quiet")]),
        instrument=False,
    )
    otel.uninstrument()
    assert otel.get_instrumentation() is None
    assert switched_on not in observer.registered_observers(requested=True)
    await run_agent_loop(
        ["hi"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([faux_response("quiet")]),
    )
    # with the switch off, instrument=True uses OpenTelemetry's global providers (none is set
    # in this process: the run goes on, nothing reaches this test's exporter)
    await run_agent_loop(
        ["hi"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([faux_response("global providers")]),
        instrument=True,
    )
    assert isinstance(otel._default, Instrumentation)
    assert telemetry.tree() == [
        ("invoke_agent", [("chat faux-1", [])]),  # the Agent's prompt
        ("invoke_agent", [("chat faux-1", [])]),  # agent_loop
        ("invoke_agent", [("chat faux-1", [])]),  # instrument=True
        ("request", [("invoke_agent", [("chat faux-1", [])])]),  # nested in the caller's span
    ]


async def test_continuing_and_an_awaitable_stream_function(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    faux = FauxProvider([faux_response("again")])

    async def stream_fn(model: Any, context: Any, options: Any) -> Any:
        return faux(model, context, options)  # an awaitable of the stream

    context = AgentContext(messages=[UserMessage(content="go on")])
    messages = await run_agent_loop_continue(
        context,
        AgentLoopConfig(model=MODEL),
        stream_fn=stream_fn,  # type: ignore[arg-type]
        instrument=telemetry.instrumentation(),
    )
    assert messages[-1].text() == "again"
    assert telemetry.tree() == [("invoke_agent", [("chat faux-1", [])])]
    chat = telemetry.span("chat faux-1")
    assert status(chat) == ("UNSET", None)
    assert dict(chat.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)


async def test_a_stream_function_s_own_spans_nest_under_its_model_call(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    tracer = telemetry.tracer_provider.get_tracer("the-provider")
    faux = FauxProvider([faux_response("first"), faux_response("second")])

    def calling(model: Any, context: Any, options: Any) -> Any:
        with tracer.start_as_current_span("prepare request"):
            pass
        return streaming(model, context, options)

    async def streaming(model: Any, context: Any, options: Any) -> Any:
        with tracer.start_as_current_span("http request"):
            async for event in faux(model, context, options):
                yield event

    current: list[str] = []

    async def follow_up() -> Any:
        # after a stream whose generator held a span across its yields, the run span is
        # current again: the stream's context was left in order
        current.append(getattr(trace.get_current_span(), "name", "?"))
        return "and again" if len(faux.calls) == 1 else None

    config = AgentLoopConfig(model=MODEL, get_follow_up_messages=follow_up)
    await run_agent_loop(
        ["hi"],
        AgentContext(),
        config,
        stream_fn=calling,
        instrument=telemetry.instrumentation(),
    )
    model_call: tuple[str, list[Any]] = (
        "chat faux-1",
        [("http request", []), ("prepare request", [])],
    )
    assert telemetry.tree() == [("invoke_agent", [model_call, model_call])]
    assert current == ["invoke_agent", "invoke_agent"]


async def test_a_resumed_run_is_traced_like_a_fresh_one(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    tracer = telemetry.tracer_provider.get_tracer("the-tools")
    ran: list[str] = []

    async def lookup(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        ran.append(call_id)
        with tracer.start_as_current_span("lookup's own work"):
            await anyio.lowlevel.checkpoint()
        return result("found")

    tools = [AgentTool("lookup", "Look up.", OBJECT, lookup, idempotent=True)]
    responses = [
        faux_response(tool_calls=[faux_tool_call("lookup", id="c1")]),
        faux_response("Found it."),
    ]
    store = MemoryRunStore()
    await run_agent_loop(
        ["look"],
        AgentContext(tools=tools),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider(responses),
        store=store,
        run_id="first",
        instrument=False,
    )
    # the run as a crash during the tool left it: its start and first answer written
    stored = store.load("first")
    cut = MemoryRunStore()
    cut.create_run("r", stored.header, session_id=None, owner="elsewhere:1:x", lease_s=-1.0)
    for seq, entry in enumerate(stored.entries[:2]):
        cut.append("r", seq, entry, owner="elsewhere:1:x", lease_s=-1.0)
    assert [s.name for s in telemetry.spans()] == ["lookup's own work"]  # not traced
    telemetry.spans_out.clear()
    ran.clear()
    messages = await resume_run(
        "r",
        cut,
        AgentLoopConfig(model=MODEL),
        tools=tools,
        stream_fn=FauxProvider(responses[1:]),
        instrument=telemetry.instrumentation(),
    )
    assert messages[-1].text() == "Found it." and ran == ["c1"]
    assert telemetry.tree() == [
        (
            "invoke_agent",
            [("chat faux-1", []), ("execute_tool lookup", [("lookup's own work", [])])],
        )
    ]
    run = telemetry.span("invoke_agent")
    attributes = dict(run.attributes or {})
    assert attributes["agentcore_fsm.run.id"] == "r"
    assert attributes[otel.RESUMED] is True
    assert attributes["agentcore_fsm.run.end_reason"] == "completed"
    assert status(run) == ("UNSET", None)
    # the transitions taken from the resume point on (the journaled ones are the first run's)
    assert transitions(run)[0][1:] == ("tools_settled", "executing", "turn_end")
    assert [t[1:] for t in transitions(run)][-1] == (
        "skip_follow_up_poll",
        "awaiting_follow_up",
        "stopped",
    )
    tool = telemetry.span("execute_tool lookup")
    assert dict(tool.attributes or {})["gen_ai.tool.call.id"] == "c1"
    assert [(a, n) for a, n, _ in telemetry.histogram("gen_ai.execute_tool.duration")] == [
        ({**TOOL_OPERATION, "gen_ai.tool.name": "lookup"}, 1)
    ]
    # and the global switch traces a resumed run too
    otel.instrument(telemetry.tracer_provider, telemetry.meter_provider)
    again = MemoryRunStore()
    again.create_run("r2", stored.header, session_id=None, owner="elsewhere:1:x", lease_s=-1.0)
    for seq, entry in enumerate(stored.entries[:2]):
        again.append("r2", seq, entry, owner="elsewhere:1:x", lease_s=-1.0)
    await resume_run(
        "r2",
        again,
        AgentLoopConfig(model=MODEL),
        tools=tools,
        stream_fn=FauxProvider(responses[1:]),
    )
    resumed = [s for s in telemetry.spans() if s.name == "invoke_agent"]
    assert [dict(s.attributes or {})["agentcore_fsm.run.id"] for s in resumed] == ["r", "r2"]


# --- failures -------------------------------------------------------------------------------


async def test_a_failed_run_is_an_error_span(anyio_backend: str, telemetry: Telemetry) -> None:
    def broken(messages: Any, signal: Any) -> Any:
        raise ValueError("context broke")

    config = AgentLoopConfig(model=MODEL, transform_context=broken)
    messages = await run_agent_loop(
        ["hi"],
        AgentContext(),
        config,
        stream_fn=FauxProvider([faux_response("never")]),
        instrument=telemetry.instrumentation(),
    )
    assert messages[-1].error_message == "context broke"
    assert telemetry.tree() == [("invoke_agent", [])]  # the model was never called
    run = telemetry.span("invoke_agent")
    assert status(run) == ("ERROR", "context broke")
    attributes = dict(run.attributes or {})
    assert attributes["error.type"] == "_OTHER"
    assert attributes["agentcore_fsm.run.end_reason"] == "error"
    assert "agentcore_fsm.aborted" not in attributes
    assert [t[1:] for t in transitions(run)] == [
        ("start", "idle", "awaiting_steering"),
        ("skip_steering_poll", "awaiting_steering", "streaming"),
        ("fail", "streaming", "stopped"),
    ]
    assert telemetry.histogram("gen_ai.client.operation.duration") == []


async def test_failing_tools_are_error_spans_in_a_run_that_goes_on(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    async def raises(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        raise KeyError("no such row")

    def soft(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return {"content": [{"type": "text", "text": "not today"}], "is_error": True}

    tools = [AgentTool("raises", "", OBJECT, raises), AgentTool("soft", "", OBJECT, soft)]
    calls = [faux_tool_call("raises", id="c1"), faux_tool_call("soft", id="c2")]
    script = FauxProvider([faux_response(tool_calls=calls), faux_response("sorry")])
    await run_agent_loop(
        ["go"],
        AgentContext(tools=tools),
        AgentLoopConfig(model=MODEL),
        stream_fn=script,
        instrument=telemetry.instrumentation(),
    )
    run = telemetry.span("invoke_agent")
    assert status(run) == ("UNSET", None)
    assert dict(run.attributes or {})["agentcore_fsm.run.end_reason"] == "completed"
    raised = telemetry.span("execute_tool raises")
    assert status(raised) == ("ERROR", "'no such row'")
    assert dict(raised.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "raises",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "error.type": "KeyError",
    }
    assert exceptions(raised) == [("KeyError", "'no such row'")]
    reported = telemetry.span("execute_tool soft")
    assert status(reported) == ("ERROR", "the tool returned an error result")
    assert dict(reported.attributes or {})["error.type"] == "tool_error"
    assert exceptions(reported) == []
    assert [(a, n) for a, n, _ in telemetry.histogram("gen_ai.execute_tool.duration")] == [
        ({**TOOL_OPERATION, "gen_ai.tool.name": "raises", "error.type": "KeyError"}, 1),
        ({**TOOL_OPERATION, "gen_ai.tool.name": "soft", "error.type": "tool_error"}, 1),
    ]


class Interrupt(BaseException):
    """A BaseException that is not cancellation (what Ctrl-C's KeyboardInterrupt is)."""


async def test_an_interrupt_escaping_the_run_is_an_error_of_the_run(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    async def interrupts(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        raise Interrupt("stop everything")

    script = FauxProvider([faux_response(tool_calls=[faux_tool_call("interrupts", id="c1")])])
    with pytest.raises(Interrupt):
        await run_agent_loop(
            ["go"],
            AgentContext(tools=[AgentTool("interrupts", "", OBJECT, interrupts)]),
            AgentLoopConfig(model=MODEL),
            stream_fn=script,
            instrument=telemetry.instrumentation(),
        )
    run = telemetry.span("invoke_agent")
    assert status(run) == ("ERROR", "Interrupt: stop everything")
    attributes = dict(run.attributes or {})
    assert attributes["error.type"] == "Interrupt"
    assert attributes["agentcore_fsm.run.end_reason"] == "aborted"  # closed like an abort
    assert attributes["agentcore_fsm.aborted"] is True
    assert exceptions(run) == [(f"{__name__}.Interrupt", "stop everything")]
    # the tool's execution was cut short by it: no result, no error of its own
    tool = telemetry.span("execute_tool interrupts")
    assert status(tool) == ("UNSET", None)
    assert dict(tool.attributes or {})["agentcore_fsm.aborted"] is True


# --- aborts ---------------------------------------------------------------------------------


async def test_an_abort_while_tools_run_is_marked_not_an_error(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    controller = AbortController()

    async def stuck(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        controller.abort("user pressed stop")
        await anyio.sleep_forever()

    async def quick(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return result("done")

    tools = [AgentTool("stuck", "", OBJECT, stuck), AgentTool("quick", "", OBJECT, quick)]
    calls = [faux_tool_call("quick", id="c1"), faux_tool_call("stuck", id="c2")]
    config = AgentLoopConfig(model=MODEL, tool_execution="sequential")
    await run_agent_loop(
        ["go"],
        AgentContext(tools=tools),
        config,
        stream_fn=FauxProvider([faux_response(tool_calls=calls)]),
        signal=controller.signal,
        instrument=telemetry.instrumentation(),
    )
    run = telemetry.span("invoke_agent")
    assert status(run) == ("UNSET", None)
    attributes = dict(run.attributes or {})
    assert attributes["agentcore_fsm.run.end_reason"] == "aborted"
    assert attributes["agentcore_fsm.aborted"] is True
    assert transitions(run)[-1][1:] == ("abort", "executing", "stopped")
    stuck_span = telemetry.span("execute_tool stuck")
    assert status(stuck_span) == ("UNSET", None)
    assert dict(stuck_span.attributes or {})["agentcore_fsm.aborted"] is True
    assert "agentcore_fsm.aborted" not in dict(
        telemetry.span("execute_tool quick").attributes or {}
    )
    assert telemetry.tree() == [
        (
            "invoke_agent",
            [("chat faux-1", []), ("execute_tool quick", []), ("execute_tool stuck", [])],
        )
    ]


async def test_an_abort_while_streaming_cuts_the_model_call(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    controller = AbortController()

    def emit(event: Any) -> None:
        if event.type == "message_update":
            controller.abort()

    await run_agent_loop(
        ["hi"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        emit,
        stream_fn=FauxProvider([faux_response("a long answer, cut short")]),
        signal=controller.signal,
        instrument=telemetry.instrumentation(),
    )
    chat = telemetry.span("chat faux-1")
    assert status(chat) == ("UNSET", None)
    assert dict(chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "faux",
        "gen_ai.request.model": "faux-1",
        "agentcore_fsm.aborted": True,
    }
    run = telemetry.span("invoke_agent")
    assert dict(run.attributes or {})["agentcore_fsm.run.end_reason"] == "aborted"
    assert transitions(run)[-1][1:] == ("abort", "streaming", "stopped")
    ((attributes, count, _),) = telemetry.histogram("gen_ai.client.operation.duration")
    assert count == 1 and "error.type" not in attributes
    assert telemetry.histogram("gen_ai.client.token.usage") == []


async def test_an_outside_cancellation_closes_the_spans_as_aborted(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    started = anyio.Event()

    async def slow(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        started.set()
        await anyio.sleep_forever()

    async def cancel_when_started(scope: anyio.CancelScope) -> None:
        await started.wait()
        scope.cancel()

    script = FauxProvider([faux_response(tool_calls=[faux_tool_call("slow", id="c1")])])
    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            tg.start_soon(cancel_when_started, scope)
            await run_agent_loop(
                ["go"],
                AgentContext(tools=[AgentTool("slow", "", OBJECT, slow)]),
                AgentLoopConfig(model=MODEL),
                stream_fn=script,
                instrument=telemetry.instrumentation(),
            )
    assert scope.cancelled_caught
    run = telemetry.span("invoke_agent")
    assert status(run) == ("UNSET", None)
    assert dict(run.attributes or {})["agentcore_fsm.aborted"] is True
    assert dict(run.attributes or {})["agentcore_fsm.run.end_reason"] == "aborted"
    assert dict(telemetry.span("execute_tool slow").attributes or {})["agentcore_fsm.aborted"]


# --- a real provider against the local SSE server ---------------------------------------------


@pytest.fixture(scope="module")
def sse_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(sse_server: ScriptedServer) -> Iterator[ScriptedServer]:
    sse_server.reset()
    yield sse_server
    sse_server.reset()


def openai_model(server: ScriptedServer) -> Model:
    return Model(
        id="gpt-4o-mini",
        api="openai-completions",
        provider="openai",
        base_url=server.url + "/v1",
        cost=ModelCost(input=0.15, output=0.60, cache_read=0.075),
    )


def openai() -> Callable[..., Any]:
    from agentcore_fsm.integrations.providers.openai import OpenAIProvider

    return OpenAIProvider(api_key="test-key", max_retries=0)


async def test_a_provider_error_is_an_error_span(
    anyio_backend: str, telemetry: Telemetry, server: ScriptedServer
) -> None:
    server.queue(Reply(status=429, body="openai/error_429.json"))
    model = openai_model(server)
    await run_agent_loop(
        ["hi"],
        AgentContext(),
        AgentLoopConfig(model=model),
        stream_fn=openai(),
        instrument=telemetry.instrumentation(),
    )
    text = (
        "HTTP 429 (requests): Rate limit reached for gpt-4o-mini on requests per min (RPM): "
        "Limit 3, Used 3, Requested 1."
    )
    assert telemetry.tree() == [("invoke_agent", [("chat gpt-4o-mini", [])])]
    chat = telemetry.span("chat gpt-4o-mini")
    assert status(chat) == ("ERROR", text)
    port = int(server.url.rsplit(":", 1)[1])
    assert dict(chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "server.address": "127.0.0.1",
        "server.port": port,
        "gen_ai.response.model": "gpt-4o-mini",
        "gen_ai.response.finish_reasons": ("error",),
        "error.type": "429",
    }
    run = telemetry.span("invoke_agent")
    assert status(run) == ("ERROR", text)
    assert dict(run.attributes or {})["agentcore_fsm.run.end_reason"] == "error"
    ((attributes, count, _),) = telemetry.histogram("gen_ai.client.operation.duration")
    assert count == 1
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini",
        "server.address": "127.0.0.1",
        "server.port": port,
        "error.type": "429",
    }


async def test_a_provider_s_usage_cache_and_cost(
    anyio_backend: str, telemetry: Telemetry, server: ScriptedServer
) -> None:
    server.queue(Reply(sse="openai/text.sse"))
    await run_agent_loop(
        ["hi"],
        AgentContext(),
        AgentLoopConfig(model=openai_model(server)),
        stream_fn=openai(),
        instrument=telemetry.instrumentation(),
    )
    chat = dict(telemetry.span("chat gpt-4o-mini").attributes or {})
    cost = chat.pop("agentcore_fsm.usage.cost")
    assert cost == pytest.approx(176 * 0.15e-6 + 5 * 0.60e-6 + 1024 * 0.075e-6)
    assert {k: v for k, v in chat.items() if k.startswith("gen_ai.")} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 1200,  # 176 uncached + 1024 read from the cache
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.usage.cache_read.input_tokens": 1024,
    }
    assert [
        (a["gen_ai.token.type"], n, s)
        for a, n, s in telemetry.histogram("gen_ai.client.token.usage")
    ] == [("input", 1, 1200), ("output", 1, 5)]


# --- content ----------------------------------------------------------------------------------


def content_run_tools() -> list[AgentTool]:
    async def echo(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return result(SECRET_RESULT)

    return [AgentTool("echo", "Echo.", OBJECT, echo)]


def content_script() -> FauxProvider:
    call = faux_tool_call("echo", {"value": SECRET_ARG}, id="c1")
    return FauxProvider(
        [faux_response("Let me see.", thinking="hmm", tool_calls=[call]), faux_response("Done.")]
    )


def every_value(spans: list[ReadableSpan]) -> str:
    """Every attribute and event attribute value of ``spans``, as one text."""
    values: list[str] = []
    for span in spans:
        values.extend(str(v) for v in (span.attributes or {}).values())
        for event in span.events:
            values.extend(str(v) for v in (event.attributes or {}).values())
        values.append(str(span.status.description))
    return "\n".join(values)


CONTENT_ATTRIBUTES = {
    "gen_ai.system_instructions",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


async def test_no_content_is_recorded_by_default(anyio_backend: str, telemetry: Telemetry) -> None:
    await run_agent_loop(
        [SECRET_PROMPT],
        AgentContext(system_prompt="secret system text", tools=content_run_tools()),
        AgentLoopConfig(model=MODEL),
        stream_fn=content_script(),
        instrument=telemetry.instrumentation(),
    )
    spans = telemetry.spans()
    assert len(spans) == 4
    keys = {k for s in spans for k in (s.attributes or {})}
    assert keys.isdisjoint(CONTENT_ATTRIBUTES)
    text = every_value(spans)
    for secret in (SECRET_PROMPT, SECRET_ARG, SECRET_RESULT, "secret system text", "Let me"):
        assert secret not in text


async def test_content_is_recorded_when_asked(anyio_backend: str, telemetry: Telemetry) -> None:
    await run_agent_loop(
        [SECRET_PROMPT],
        AgentContext(system_prompt="secret system text", tools=content_run_tools()),
        AgentLoopConfig(model=MODEL),
        stream_fn=content_script(),
        instrument=telemetry.instrumentation(record_content=True),
    )
    first, second = sorted(
        (s for s in telemetry.spans() if s.name == "chat faux-1"), key=lambda s: s.start_time or 0
    )
    a = dict(first.attributes or {})
    system = [{"type": "text", "content": "secret system text"}]
    user = {"role": "user", "parts": [{"type": "text", "content": SECRET_PROMPT}]}
    assistant = {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "content": "hmm"},
            {"type": "text", "content": "Let me see."},
            {"type": "tool_call", "id": "c1", "name": "echo", "arguments": {"value": SECRET_ARG}},
        ],
    }
    assert json.loads(str(a["gen_ai.system_instructions"])) == system
    assert json.loads(str(a["gen_ai.input.messages"])) == [user]
    assert json.loads(str(a["gen_ai.output.messages"])) == [
        {**assistant, "finish_reason": "tool_call"}
    ]
    b = dict(second.attributes or {})
    tool_message = {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": SECRET_RESULT}],
    }
    assert json.loads(str(b["gen_ai.input.messages"])) == [user, assistant, tool_message]
    assert json.loads(str(b["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Done."}],
            "finish_reason": "stop",
        }
    ]
    tool = dict(telemetry.span("execute_tool echo").attributes or {})
    assert json.loads(str(tool["gen_ai.tool.call.arguments"])) == {"value": SECRET_ARG}
    assert json.loads(str(tool["gen_ai.tool.call.result"])) == {
        "content": [{"type": "text", "text": SECRET_RESULT}]
    }
    # the run span itself carries no content
    assert set(dict(telemetry.span("invoke_agent").attributes or {})).isdisjoint(CONTENT_ATTRIBUTES)


# --- tracing off costs nothing ----------------------------------------------------------------


async def test_tracing_off_installs_no_wrapper(anyio_backend: str, telemetry: Telemetry) -> None:
    """Off, the driver calls the caller's own stream function and tool directly; on, the
    observer's wrappers are in between (so this test can tell)."""
    callers: dict[str, list[str]] = {"stream": [], "tool": []}
    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("probe", id="c1")]), faux_response("ok")] * 2
    )

    def stream_fn(model: Any, context: Any, options: Any) -> Any:
        callers["stream"].append(sys._getframe(1).f_code.co_name)
        return faux(model, context, options)

    async def probe(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        # the tool's caller, and the task function that called it
        caller = sys._getframe(1)
        assert caller.f_back is not None
        callers["tool"].append(f"{caller.f_back.f_code.co_name}>{caller.f_code.co_name}")
        return result("probed")

    async def one_run(instrument: Any) -> None:
        await run_agent_loop(
            ["go"],
            AgentContext(tools=[AgentTool("probe", "", OBJECT, probe)]),
            AgentLoopConfig(model=MODEL),
            stream_fn=stream_fn,
            instrument=instrument,
        )

    otel.instrument(telemetry.tracer_provider)  # the global switch is on, the run says no
    await one_run(False)
    assert callers == {
        "stream": ["_call_model", "_call_model"],
        # started by the task machinery itself (trio's scope wrapper, asyncio's Task._run)
        "tool": ["_in_scope>run_tool" if anyio_backend == "trio" else "_run>run_tool"],
    }
    assert telemetry.spans() == []
    otel.uninstrument()
    callers = {"stream": [], "tool": []}
    await one_run(telemetry.instrumentation())
    assert callers == {
        "stream": ["observed_stream_fn", "observed_stream_fn"],
        "tool": ["observed_tool>run_tool"],
    }


def test_importing_and_running_untraced_loads_no_opentelemetry() -> None:
    code = (
        "import json, sys, trio\n"
        "from agentcore_fsm import AgentContext, AgentLoopConfig, Model, run_agent_loop\n"
        "from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response\n"
        "trio.run(lambda: run_agent_loop(['hi'], AgentContext(), "
        "AgentLoopConfig(model=Model(id='m')), stream_fn=FauxProvider([faux_response('x')])))\n"
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.startswith(('opentelemetry', 'agentcore_fsm.integrations.otel')))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_the_instrument_setting_is_checked(telemetry: Telemetry) -> None:
    with pytest.raises(TypeError, match="instrument must be True, False, None or an "):
        anyio.run(
            lambda: run_agent_loop(
                ["hi"],
                AgentContext(),
                AgentLoopConfig(model=MODEL),
                stream_fn=FauxProvider([faux_response("x")]),
                instrument="yes",  # type: ignore[arg-type]
            )
        )


def test_the_bench_runs_traced(capsys: pytest.CaptureFixture[str]) -> None:
    tiny = ["--iterations", "2", "--warmup", "1", "--concurrent", "3", "--repeats", "1"]
    tiny += ["--import-runs", "0", "--store-iterations", "0"]
    assert cli.main(["bench", *tiny, "--otel"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("agentcore-fsm bench: backend=trio, ")
    assert ", otel=on" in out.splitlines()[0]
    assert otel.get_instrumentation() is None  # switched off again
