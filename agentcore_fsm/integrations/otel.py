"""OpenTelemetry traces and metrics for runs of the loop, with the state machine in the trace.

Tracing is a run observer (:mod:`agentcore_fsm.runtime.observer`, docs/ports.md): an
:class:`Instrumentation` watches a run through the runtime's public port, nothing else. One
switch turns it on for every run, :func:`instrument` (it registers the instrumentation with
:func:`~agentcore_fsm.runtime.observer.register_observer`; :func:`uninstrument` removes it);
``run_agent_loop(..., instrument=...)``, ``run_agent_loop_continue`` and ``resume_run`` decide
per run: ``True`` (the global :class:`Instrumentation`, or a default one on the global
OpenTelemetry providers), ``False`` (never), an :class:`Instrumentation`, or ``None`` (the
default: follow the global switch). ``agent_loop``, ``agent_loop_continue`` and every
:class:`~agentcore_fsm.Agent` follow the global switch. A run continued with ``resume_run`` is
traced like a fresh one (its run span has ``agentcore_fsm.run.resumed=true``). docs/tracing.md
is the guide.

What a traced run records follows the GenAI semantic conventions published with
OpenTelemetry semantic conventions v1.41.0 (docs/tracing.md#what-a-run-records): an
``invoke_agent`` span per run (current while the run goes on; every transition of the loop
machine is an ``agentcore_fsm.transition`` event on it), a ``chat`` span per model call
(current from the stream function's call until its stream is closed) and an ``execute_tool``
span per tool execution (current while the tool runs, in its task or worker thread), and the
histograms ``gen_ai.client.operation.duration``, ``gen_ai.client.token.usage`` and
``gen_ai.execute_tool.duration``. **Nested runs** (an agent as a tool, docs/multi-agent.md) are
traced as the run that started them is, by the same :class:`Instrumentation`: a nested run's
``invoke_agent`` span (``gen_ai.agent.name``: the tool's name) is a child of the
``execute_tool`` span of its call, and so on down the tree; each run span sums its own model
calls only, so adding up a tree's ``invoke_agent`` spans counts every token once.

Decisions where the task or the conventions leave a choice (docs/tracing.md gives each):
failures set ERROR with ``error.type`` (the exception's class name, an HTTP status, ``tool_error``
or ``_OTHER``); an abort is not an error (``agentcore_fsm.aborted=true``, status UNSET) and a
suspended run is not either (``agentcore_fsm.run.suspended=true``); ``gen_ai.usage.input_tokens``
counts cached input tokens too, and the cost is ``agentcore_fsm.usage.cost``; finish reasons use
the conventions' words; content is recorded only with ``record_content=True`` (error texts
always); a tool call that never executes has no span, hooks and polls have none; transitions
are span events (the SDK's limit of events per span applies).

Nothing here runs when tracing is off: the runtime never imports this module (importing it
registers the observer that ``instrument=True`` asks for), and a run without observers makes
one check.
"""

from __future__ import annotations

import re
import time
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError(
        "agentcore_fsm.integrations.otel needs the OpenTelemetry API: "
        "pip install 'agentcore-fsm[otel]'"
    ) from exc

import anyio

from agentcore_fsm.core.approval import RunSuspended
from agentcore_fsm.core.boundary import exc_text
from agentcore_fsm.core.events import AgentEndEvent, StreamDone, StreamError
from agentcore_fsm.core.nesting import current_nesting
from agentcore_fsm.core.protocol import (
    Effect,
    ExecuteTool,
    Input,
    Step,
    StreamEvent,
    StreamExhausted,
    ToolFinished,
)
from agentcore_fsm.core.tools import AgentToolResult
from agentcore_fsm.core.version import __version__
from agentcore_fsm.integrations.otel_content import (
    FINISH_REASON,
    conventions_message,
    json_text,
    jsonable,
)
from agentcore_fsm.runtime.observer import (
    ModelRequest,
    RunObserver,
    RunStart,
    register_observer,
    registered_observers,
    unregister_observer,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

    from opentelemetry.context import Context
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider

    from agentcore_fsm.core.declared import TransitionRecord
    from agentcore_fsm.core.messages import AssistantMessage

__all__ = [
    "ABORTED",
    "COST",
    "END_REASON",
    "RESUMED",
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "TRANSITION_EVENT",
    "Instrumentation",
    "get_instrumentation",
    "instrument",
    "uninstrument",
]

SEMCONV_VERSION = "1.41.0"
"""The version of the OpenTelemetry semantic conventions whose GenAI part is followed."""
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
"""The schema URL of the instrumentation scope (``agentcore_fsm``)."""
SCOPE = "agentcore_fsm"

# --- names: the conventions' ----------------------------------------------------------------

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
TOKEN_TYPE = "gen_ai.token.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"
OTHER_ERROR = "_OTHER"

OPERATION_DURATION = "gen_ai.client.operation.duration"
TOKEN_USAGE = "gen_ai.client.token.usage"
TOOL_DURATION = "gen_ai.execute_tool.duration"
DURATION_BUCKETS = tuple(0.01 * 2**i for i in range(14))  # 0.01, 0.02, 0.04, ... 81.92
TOKEN_BUCKETS = tuple(float(4**i) for i in range(14))  # 1, 4, 16, ... 67108864

# --- names: this library's (for what the conventions do not cover) ---------------------------

ABORTED = "agentcore_fsm.aborted"
"""``true`` on a span that an abort cut short (its status stays UNSET: an abort is no error)."""
END_REASON = "agentcore_fsm.run.end_reason"
"""How the run ended: ``agent_end.reason`` (``completed``, ``stopped``, ``aborted``, ``error``)."""
SUSPENDED = "agentcore_fsm.run.suspended"
"""``true`` on the run span of a journaled run that stopped to wait for approval decisions."""
RUN_ID = "agentcore_fsm.run.id"
"""The run id of a journaled run (``run_agent_loop(..., store=..., run_id=...)``)."""
RESUMED = "agentcore_fsm.run.resumed"
"""``true`` on the run span of a run continued from its journal (``resume_run``)."""
COST = "agentcore_fsm.usage.cost"
"""What the model calls cost in dollars (``Usage.cost.total``; on the run span, the sum)."""
REQUEST_REASONING = "agentcore_fsm.request.reasoning"
"""The thinking level asked for (``StreamOptions.reasoning``), when one is."""
TRANSITION_EVENT = "agentcore_fsm.transition"
"""The name of the run span's event for each transition of the loop machine."""
TRANSITION_INDEX = "agentcore_fsm.transition.index"
TRANSITION_TRIGGER = "agentcore_fsm.transition.trigger"
TRANSITION_SOURCE = "agentcore_fsm.transition.source"
TRANSITION_DESTINATION = "agentcore_fsm.transition.destination"

_HTTP_STATUS = re.compile(r"^HTTP (\d{3})\b")


class Instrumentation(RunObserver):
    """Where a traced run's spans and measurements go, and what they hold: a run observer
    (give it to a run as ``instrument=``, or make it global with :func:`instrument`).

    ``tracer_provider`` and ``meter_provider`` default to OpenTelemetry's global ones (read when
    a span or measurement is made, so they may be set later). ``record_content=True`` records
    message content, tool arguments and tool results (see the module docstring); off by
    default. ``agent_name`` names the run span (``invoke_agent {agent_name}``) and fills
    ``gen_ai.agent.name``. The instruments are created once, here."""

    __slots__ = (
        "agent_name",
        "meter",
        "operation_duration",
        "record_content",
        "token_usage",
        "tool_duration",
        "tracer",
    )

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        *,
        record_content: bool = False,
        agent_name: str | None = None,
    ) -> None:
        self.tracer = trace.get_tracer(SCOPE, __version__, tracer_provider, schema_url=SCHEMA_URL)
        self.meter = metrics.get_meter(SCOPE, __version__, meter_provider, schema_url=SCHEMA_URL)
        self.record_content = record_content
        self.agent_name = agent_name
        self.operation_duration = self.meter.create_histogram(
            OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.token_usage = self.meter.create_histogram(
            TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.tool_duration = self.meter.create_histogram(
            TOOL_DURATION,
            unit="s",
            description="Duration of tool executions.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )

    def observe_run(self, run: RunStart) -> RunObserver | None:
        """A trace of ``run``: its ``invoke_agent`` span starts now. A nested run (an agent as
        a tool gives it its outer run's observers) started by a call this instrumentation
        traces is traced in the same trace, its span a child of the call's ``execute_tool``
        span and named after the tool; one started by a call another instrumentation traces is
        left to that one (one trace per tree)."""
        call = _starting_call()
        if call is None:
            return _RunTrace(self, run)
        return _RunTrace(self, run, call) if call.run.inst is self else None


def instrument(
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    *,
    record_content: bool = False,
    agent_name: str | None = None,
) -> Instrumentation:
    """Trace every run from now on (those given ``instrument=False`` excepted): register an
    :class:`Instrumentation` of these arguments as a run observer of every run and return it.
    Calling it again replaces the global instrumentation."""
    made = Instrumentation(
        tracer_provider, meter_provider, record_content=record_content, agent_name=agent_name
    )
    uninstrument()
    register_observer(made)
    return made


def uninstrument() -> None:
    """Stop tracing runs that follow the global switch (runs in progress are still traced)."""
    for observer in registered_observers():
        if isinstance(observer, Instrumentation):
            unregister_observer(observer)


def get_instrumentation() -> Instrumentation | None:
    """The global :class:`Instrumentation` (None when :func:`instrument` is not in effect)."""
    for observer in registered_observers():
        if isinstance(observer, Instrumentation):
            return observer
    return None


_default: Instrumentation | None = None
"""The instrumentation on OpenTelemetry's global providers that ``instrument=True`` uses while
:func:`instrument` is not in effect (made when first needed)."""


class _OnRequest(RunObserver):
    """Traces a run that asks for it (``instrument=True``) while :func:`instrument` is not in
    effect, on OpenTelemetry's global providers; registered for such runs when this module is
    imported."""

    def observe_run(self, run: RunStart) -> RunObserver | None:
        global _default
        if get_instrumentation() is not None:
            return None  # the global instrumentation traces the run already
        if _default is None:
            _default = Instrumentation()
        return _default.observe_run(run)


register_observer(_OnRequest(), always=False)


# --- nested runs ------------------------------------------------------------------------------

_CALL: ContextVar[_ToolCall | None] = ContextVar("agentcore_fsm_otel_call", default=None)
"""The traced tool execution the current code runs in (set in the tool's task)."""

NESTED_PATH = "agentcore_fsm.nested.path"
"""On a nested run's span: the call ids from the outermost run down to the call that started it."""
NESTED_AGENTS = "agentcore_fsm.nested.agents"
"""On a nested run's span: the names of the tools (agents as tools) of those calls."""


def _starting_call() -> _ToolCall | None:
    """The traced call that is starting the current run, when the run is the nested run of an
    agent as a tool (its position is that call's child) started inside a traced execution."""
    call = _CALL.get()
    if call is None or current_nesting().path != call.child_path:
        return None
    return call


# --- the traced run ---------------------------------------------------------------------------


def _type_name(exc: BaseException) -> str:
    return type(exc).__qualname__


def _set_error(span: Span, error_type: str, description: str) -> None:
    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, description))


class _Current(AbstractContextManager[None]):
    """Makes an OpenTelemetry context current (in the task that enters it) until exited."""

    __slots__ = ("context", "token")

    def __init__(self, context: Context) -> None:
        self.context = context
        self.token: object = None

    def __enter__(self) -> None:
        self.token = otel_context.attach(self.context)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        token, self.token = self.token, None
        if token is not None:
            otel_context.detach(token)  # type: ignore[arg-type]
        self.left(exc)

    def left(self, exc: BaseException | None) -> None:
        """What a subclass does once the context is no longer current (``exc``: what the
        block raised, if anything)."""


class _InRun(_Current):
    """The run's context: its span current, and no traced call (a run started by this run's
    hooks is no nested run of the call that started this one)."""

    __slots__ = ("call_token",)

    def __enter__(self) -> None:
        super().__enter__()
        self.call_token: Token[_ToolCall | None] | None = _CALL.set(None)

    def left(self, exc: BaseException | None) -> None:
        token, self.call_token = self.call_token, None
        if token is not None:
            _CALL.reset(token)


class _Span(_Current):
    """A span of one run (a model call's, a tool execution's), started when this is made and
    current while this is entered; ``started`` is when (``time.perf_counter()``), for the
    duration metric."""

    __slots__ = ("run", "span", "started")

    def __init__(
        self, run: _RunTrace, name: str, kind: SpanKind, attributes: dict[str, Any]
    ) -> None:
        self.run = run
        self.span = run.inst.tracer.start_span(name, run.context, kind, attributes)
        super().__init__(trace.set_span_in_context(self.span, run.context))
        self.started = time.perf_counter()


class _RunTrace(RunObserver):
    """One traced run: its ``invoke_agent`` span, its model call and tool executions in
    flight, and what its model calls added up to."""

    def __init__(
        self, inst: Instrumentation, run: RunStart, parent: _ToolCall | None = None
    ) -> None:
        self.inst = inst
        self.control = run.signal  # the signal that decides (it fires on every abort)
        self.cancelled = anyio.get_cancelled_exc_class()
        model = run.config.model
        attributes: dict[str, Any] = {
            OPERATION: "invoke_agent",
            PROVIDER: model.provider,
            REQUEST_MODEL: model.id,
        }
        name = "invoke_agent"
        agent_name = inst.agent_name if parent is None else parent.attributes[TOOL_NAME]
        if agent_name:
            attributes[AGENT_NAME] = agent_name
            name = f"invoke_agent {agent_name}"
        if parent is not None:
            nesting = current_nesting()
            attributes[NESTED_PATH], attributes[NESTED_AGENTS] = nesting.path, nesting.agents
        if run.config.session_id:
            attributes[CONVERSATION_ID] = run.config.session_id
        if run.run_id is not None:
            attributes[RUN_ID] = run.run_id
        if run.resumed:
            attributes[RESUMED] = True
        above = None if parent is None else parent.context  # its call's execute_tool span
        self.span = inst.tracer.start_span(name, above, SpanKind.INTERNAL, attributes)
        self.context = trace.set_span_in_context(self.span)
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read = 0
        self.cache_write = 0
        self.cost = 0.0
        self.reported = False
        self.end_event: AgentEndEvent | None = None
        self.current_call: _ModelCall | None = None
        self.tools: dict[int, _ToolCall] = {}

    # --- the port ---

    def run_context(self) -> AbstractContextManager[None]:
        return _InRun(self.context)

    def input_fed(self, input: Input, step: Step, transitions: Sequence[TransitionRecord]) -> None:
        add_event = self.span.add_event
        for record in transitions:
            add_event(
                TRANSITION_EVENT,
                {
                    TRANSITION_INDEX: record.index,
                    TRANSITION_TRIGGER: record.trigger,
                    TRANSITION_SOURCE: record.source,
                    TRANSITION_DESTINATION: record.dest,
                },
            )
        call = self.current_call
        if call is not None:
            kind = type(input)
            if kind is StreamEvent:
                event: Any = input.event  # type: ignore[union-attr]
                if type(event) is StreamDone:
                    call.done(event.message)
                elif type(event) is StreamError:
                    call.done(event.error)
            elif kind is StreamExhausted:
                call.failed(OTHER_ERROR, "Stream function ended without a done or error event")
        if step.run_over and step.events and type(step.events[-1]) is AgentEndEvent:
            self.end_event = step.events[-1]

    def model_call(self, request: ModelRequest) -> AbstractContextManager[None]:
        call = self.current_call = _ModelCall(self, request)
        return call

    def tool_execution(self, effect: ExecuteTool) -> AbstractContextManager[None]:
        call = self.tools[effect.index] = _ToolCall(self, effect)
        return call

    def effect_performed(self, effect: Effect, seconds: float, outcome: Input | None) -> None:
        if type(effect) is ExecuteTool:
            call = self.tools.pop(effect.index, None)
            if call is not None:
                call.finished(outcome if type(outcome) is ToolFinished else None)

    def run_ended(self, error: BaseException | None) -> None:
        self.end(error)

    # --- the end ---

    def add_usage(self, input_tokens: int, output: int, cache_read: int, cache_write: int) -> None:
        self.reported = True
        self.input_tokens += input_tokens
        self.output_tokens += output
        self.cache_read += cache_read
        self.cache_write += cache_write

    def end(self, exc: BaseException | None) -> None:
        span = self.span
        attributes: dict[str, Any] = {}
        if self.reported:
            attributes[INPUT_TOKENS] = self.input_tokens
            attributes[OUTPUT_TOKENS] = self.output_tokens
            if self.cache_read:
                attributes[CACHE_READ_TOKENS] = self.cache_read
            if self.cache_write:
                attributes[CACHE_CREATION_TOKENS] = self.cache_write
        if self.cost:
            attributes[COST] = self.cost
        event = self.end_event
        if event is not None:
            attributes[END_REASON] = event.reason
            if event.reason == "aborted":
                attributes[ABORTED] = True
            elif event.reason == "error":
                _set_error(span, OTHER_ERROR, _run_error_text(event.messages))
        if exc is not None:
            if isinstance(exc, self.cancelled):
                attributes[ABORTED] = True  # cancelled from outside: closed like an abort
            elif isinstance(exc, RunSuspended):
                attributes[SUSPENDED] = True  # waits for approvals: not an error
            else:
                span.record_exception(exc)
                _set_error(span, _type_name(exc), f"{_type_name(exc)}: {exc_text(exc)}")
        span.set_attributes(attributes)
        span.end()


def _run_error_text(messages: Sequence[Any]) -> str:
    for message in reversed(messages):
        if getattr(message, "role", None) == "assistant" and message.stop_reason == "error":
            text = message.error_message
            if isinstance(text, str) and text:
                return text
            break
    return "the run ended with an error"


# --- model calls ------------------------------------------------------------------------------


def _server(base_url: str) -> tuple[str, int] | None:
    if not base_url:
        return None
    try:
        parts = urlsplit(base_url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return host, port


class _ModelCall(_Span):
    """One model call's ``chat`` span, current while the driver is in the call (the stream
    function's call, its stream, its ``aclose``); it ends at the stream's terminal event, or
    when the call is left without one."""

    __slots__ = ("attributes", "finished")

    def __init__(self, run: _RunTrace, request: ModelRequest) -> None:
        model, llm_context, options = request.model, request.context, request.options
        self.finished = False
        measured: dict[str, Any] = {
            OPERATION: "chat",
            PROVIDER: model.provider,
            REQUEST_MODEL: model.id,
        }
        server = _server(model.base_url)
        if server is not None:
            measured[SERVER_ADDRESS], measured[SERVER_PORT] = server
        self.attributes = measured  # the metrics' attributes (the span has more)
        attributes = dict(measured)
        if options.temperature is not None:
            attributes[REQUEST_TEMPERATURE] = options.temperature
        if options.max_tokens is not None:
            attributes[REQUEST_MAX_TOKENS] = options.max_tokens
        if options.reasoning:
            attributes[REQUEST_REASONING] = options.reasoning
        if options.session_id:
            attributes[CONVERSATION_ID] = options.session_id
        if run.inst.record_content:
            if llm_context.system_prompt:
                attributes[SYSTEM_INSTRUCTIONS] = json_text(
                    [{"type": "text", "content": llm_context.system_prompt}]
                )
            attributes[INPUT_MESSAGES] = json_text(
                [conventions_message(m) for m in llm_context.messages]
            )
        name = f"chat {model.id}" if model.id else "chat"
        super().__init__(run, name, SpanKind.CLIENT, attributes)

    def left(self, exc: BaseException | None) -> None:
        if self.run.current_call is self:
            self.run.current_call = None
        if exc is not None:
            self.raised(exc)
        else:
            self.closed()

    def _end(self, usage: tuple[int, int] | None) -> None:
        self.finished = True
        self.span.end()
        inst = self.run.inst
        inst.operation_duration.record(time.perf_counter() - self.started, self.attributes)
        if usage is not None:
            measured = {k: v for k, v in self.attributes.items() if k != ERROR_TYPE}
            inst.token_usage.record(usage[0], {**measured, TOKEN_TYPE: "input"})
            inst.token_usage.record(usage[1], {**measured, TOKEN_TYPE: "output"})

    def failed(self, error_type: str, description: str) -> None:
        if self.finished:
            return
        _set_error(self.span, error_type, description)
        self.attributes[ERROR_TYPE] = error_type
        self._end(None)

    def aborted(self) -> None:
        if self.finished:
            return
        self.span.set_attribute(ABORTED, True)
        self._end(None)

    def raised(self, exc: BaseException) -> None:
        if self.finished:
            return
        if isinstance(exc, self.run.cancelled):
            self.aborted()
        else:
            self.span.record_exception(exc)
            self.failed(_type_name(exc), exc_text(exc))

    def closed(self) -> None:
        """The driver left the call; before its terminal event, that is an abort or the run
        stopping for another reason (a failure elsewhere)."""
        if self.finished:
            return
        if self.run.control.aborted:
            self.aborted()
        else:
            self.failed(OTHER_ERROR, "the stream was closed before its done or error event")

    def done(self, message: AssistantMessage) -> None:
        """The terminal event: ``message`` is the call's final assistant message."""
        if self.finished:
            return
        span = self.span
        stop = message.stop_reason
        attributes: dict[str, Any] = {FINISH_REASONS: (FINISH_REASON.get(stop, stop),)}
        if message.model and message.model != "unknown":
            attributes[RESPONSE_MODEL] = message.model
            self.attributes[RESPONSE_MODEL] = message.model
        usage = message.usage
        input_tokens = usage.input + usage.cache_read + usage.cache_write
        counted: tuple[int, int] | None = None
        if input_tokens or usage.output:
            counted = (input_tokens, usage.output)
            attributes[INPUT_TOKENS] = input_tokens
            attributes[OUTPUT_TOKENS] = usage.output
            if usage.cache_read:
                attributes[CACHE_READ_TOKENS] = usage.cache_read
            if usage.cache_write:
                attributes[CACHE_CREATION_TOKENS] = usage.cache_write
            self.run.add_usage(input_tokens, usage.output, usage.cache_read, usage.cache_write)
        cost = usage.cost.total
        if cost:
            attributes[COST] = cost
            self.run.cost += cost
        if self.run.inst.record_content:
            attributes[OUTPUT_MESSAGES] = json_text([conventions_message(message, output=True)])
        span.set_attributes(attributes)
        if stop == "error":
            text = message.error_message or "the model call failed"
            match = _HTTP_STATUS.match(text)
            error_type = match.group(1) if match else OTHER_ERROR
            _set_error(span, error_type, text)
            self.attributes[ERROR_TYPE] = error_type
        elif stop == "aborted":
            span.set_attribute(ABORTED, True)
        self._end(counted)


# --- tool executions --------------------------------------------------------------------------


class _ToolCall(_Span):
    """One tool execution's ``execute_tool`` span, current while the tool runs."""

    __slots__ = ("attributes", "call_token", "child_path", "ended")

    def __init__(self, run: _RunTrace, effect: ExecuteTool) -> None:
        self.ended = False
        self.call_token: Token[_ToolCall | None] | None = None
        name = effect.tool_call.name
        # the position of a nested run this call may start (agent/nested.py)
        self.child_path = (*current_nesting().path, effect.tool_call.id)
        self.attributes: dict[str, Any] = {OPERATION: "execute_tool", TOOL_NAME: name}
        attributes = {**self.attributes, TOOL_CALL_ID: effect.tool_call.id, TOOL_TYPE: "function"}
        if effect.tool.description:
            attributes[TOOL_DESCRIPTION] = effect.tool.description
        if run.inst.record_content:
            attributes[TOOL_CALL_ARGUMENTS] = json_text(jsonable(effect.args))
        super().__init__(run, f"execute_tool {name}", SpanKind.INTERNAL, attributes)

    def __enter__(self) -> None:
        super().__enter__()
        self.call_token = _CALL.set(self)

    def left(self, exc: BaseException | None) -> None:
        token, self.call_token = self.call_token, None
        if token is not None:
            _CALL.reset(token)
        if exc is not None:
            self.raised(exc)

    def _end(self) -> None:
        self.ended = True
        self.span.end()
        self.run.inst.tool_duration.record(time.perf_counter() - self.started, self.attributes)

    def _failed(self, error_type: str, description: str) -> None:
        _set_error(self.span, error_type, description)
        self.attributes[ERROR_TYPE] = error_type

    def raised(self, exc: BaseException) -> None:
        """The execution was cancelled (an abort, or the run's cancellation), or raised past
        the driver."""
        if self.ended:
            return
        if isinstance(exc, self.run.cancelled):
            self.span.set_attribute(ABORTED, True)
        else:
            self.span.record_exception(exc)
            self._failed(_type_name(exc), exc_text(exc))
        self._end()

    def finished(self, outcome: ToolFinished | None) -> None:
        if self.ended:
            return
        span = self.span
        if outcome is None:
            # no outcome: the run was stopping (the signal fired before the tool started, or
            # user code raised a BaseException)
            span.set_attribute(ABORTED, True)
        elif outcome.error is not None:
            error = outcome.error
            span.record_exception(error)
            self._failed(_type_name(error), exc_text(error))
        else:
            result = outcome.result
            if isinstance(result, dict):
                try:
                    result = AgentToolResult.model_validate(result)
                except ValueError:
                    pass
            if not isinstance(result, AgentToolResult):
                self._failed(OTHER_ERROR, f"the tool returned {type(result).__name__}")
            elif result.is_error:
                self._failed("tool_error", "the tool returned an error result")
            if self.run.inst.record_content:
                span.set_attribute(TOOL_CALL_RESULT, json_text(jsonable(result)))
        self._end()
