"""Durable, distributed runs of the agent loop as Temporal workflows (the ``temporal`` extra).

A run is the Temporal workflow :data:`WORKFLOW_NAME`: the pure machine and the ordinary driver
run inside the workflow, deterministically; everything the run asks of the outside world is an
activity whose result Temporal records in the workflow's history: the model call (its stream
consumed inside the activity, the final message returned), each tool execution, the polls, the
tool and turn hooks, a callable ``requires_approval``. When a worker dies, another worker replays
the history: completed activities return their recorded results without running, the machine is
fed exactly the inputs it had, and the run goes on from the first activity that had not
completed. Results are encoded by the codec of the run record
(:mod:`agentcore_fsm.persist.codec`), as on DBOS, and the machine is a
:class:`~agentcore_fsm.persist.journal.JournaledLoopMachine`: the run's record (header and
entries, the format every store writes) is the workflow's result and its ``record`` query.

Decisions (documented in docs/durable.md):

* Tool calls run one at a time (``tool_execution="sequential"`` is forced), as on DBOS.
* The machine's clock is the workflow's clock (``workflow.now()``), which replays exactly.
* A tool that is not ``idempotent`` gets one attempt: if its worker dies (the activity times out
  after ``tool_timeout_s``) it is answered as interrupted, with the text of the other engines. An
  idempotent tool is retried by Temporal (``tool_attempts`` attempts). A model call is retried
  ``model_attempts`` times (a provider's error is a result, not a retry).
* Approval is the workflow signal :data:`DECISION_SIGNAL`; a decision sent before the call
  waits is kept. The wait costs nothing while no worker runs. ``approval_timeout_s`` is a
  durable workflow timer.
* Abort is Temporal's cancellation: the run's abort signal fires, the machine ends the run as
  ``"aborted"`` (its ``agent_end``), and the workflow *completes* with that result, as an aborted
  run in memory returns its messages.
* The tool and turn hooks are activities, given their contexts as JSON data
  (:mod:`agentcore_fsm.integrations.temporal_hooks`); ``transform_context`` and
  ``convert_to_llm`` run in the workflow (keep them free of effects, as on DBOS).
* Events (``message_update`` deltas excepted) are kept by the workflow and read with the query
  :data:`EVENTS_QUERY` (:func:`follow_async` polls it); live listeners of the worker process
  (:func:`listen`) get them as the workflow makes them (not again when a worker replays it).
  The model's deltas stay inside the model activity: a Temporal run has no ``message_update``
  events (an activity's result is all the workflow sees), and an assistant ``message_start``
  carries the finished answer, as a run regenerated from its journal does.

Workflow code is import-safe for the SDK's sandbox: this module runs nothing at import but
definitions, and the worker passes ``agentcore_fsm`` (and the agents' modules) through the
sandbox, so the registry of agents is the process's one.

See docs/durable.md.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import anyio
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ActivityError, WorkflowAlreadyStartedError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentcore_fsm.core.abort import AbortController
from agentcore_fsm.core.approval import TIMEOUT_TEXT, ApprovalDecision
from agentcore_fsm.core.boundary import exc_text, json_data
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, LlmContext, StreamOptions
from agentcore_fsm.core.events import AGENT_EVENT_ADAPTER, StreamDone, StreamError, StreamStart
from agentcore_fsm.core.messages import AgentMessage
from agentcore_fsm.core.run_context import bind_run
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.integrations.durable_api import (
    DurableAgent,
    maybe_await,
    nested_agents,
    nested_call,
    raise_or,
)
from agentcore_fsm.integrations.temporal_hooks import HOOK_NAMES, call_hook, encode_hook_context
from agentcore_fsm.persist.codec import (
    decode_hook_value,
    decode_message,
    decode_model,
    decode_poll,
    decode_tool_outcome,
    encode_message,
    encode_model,
    encode_poll,
    encode_tool_outcome,
    tools_by_name,
)
from agentcore_fsm.persist.journal import JournaledLoopMachine, RunSnapshot
from agentcore_fsm.runtime.driver import as_prompts, run_machine
from agentcore_fsm.runtime.resume import INTERRUPTED_TEXT

__all__ = [
    "DATA_CONVERTER",
    "DECISION_SIGNAL",
    "EVENTS_QUERY",
    "RECORD_QUERY",
    "RUNS_QUEUE",
    "WORKFLOW_NAME",
    "DurableAgent",
    "RecordJSONPayloadConverter",
    "RecordPayloadConverter",
    "RunOptions",
    "TemporalRunError",
    "abort_async",
    "activities",
    "connect",
    "follow_async",
    "launch",
    "listen",
    "record_async",
    "register",
    "result_async",
    "run_durable",
    "send_decision_async",
    "shutdown",
    "start_run",
    "worker_for",
    "worker_for_runner",
]

logger = logging.getLogger("agentcore_fsm.integrations")

WORKFLOW_NAME = "agentcore_fsm.run"
"""The Temporal workflow type of a run."""
RUNS_QUEUE = "agentcore_runs"
"""The default task queue of runs (and of their activities) that workers poll."""
DECISION_SIGNAL = "agentcore_fsm.decide"
"""The signal that decides an approval: ``(call_id, decision as a JSON object)``."""
EVENTS_QUERY = "agentcore_fsm.events"
"""The query of a run's events from number ``n`` on: ``{"events": [...], "done": bool}``."""
RECORD_QUERY = "agentcore_fsm.record"
"""The query of a run's record so far (a :class:`RunSnapshot` as JSON)."""
PASSED_THROUGH = (
    "agentcore_fsm",
    "pydantic",
    "pydantic_core",
    "anyio",
    "sniffio",
    "trio",
    "transitions",
    "six",
    "jsonschema",
)
"""Modules the workflow sandbox shares with the worker process instead of importing again."""


from agentcore_fsm.integrations.temporal_payloads import (  # noqa: E402
    DATA_CONVERTER,
    RecordJSONPayloadConverter,
    RecordPayloadConverter,
)


class TemporalRunError(RuntimeError):
    """A run cannot go on: unknown agent, Temporal not launched in this process."""


@dataclass(frozen=True)
class RunOptions:
    """How a run's activities are scheduled (a run's workflow argument, so it replays)."""

    model_timeout_s: float = 300.0
    """How long one model call may take (its worker dying shows after this long)."""
    model_attempts: int = 3
    tool_timeout_s: float = 300.0
    """How long one tool (or hook, or poll) may take (its worker dying shows after this)."""
    tool_attempts: int = 3
    """Attempts of an idempotent tool and of hooks and polls; other tools get one."""

    def data(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class _State:
    client: Client | None = None
    worker: Worker | None = None
    task: asyncio.Task[None] | None = None
    queue: str = RUNS_QUEUE
    agents: dict[str, DurableAgent] = field(default_factory=dict)
    listeners: dict[str, Callable[[Any], Any]] = field(default_factory=dict)


_state = _State()


def register(agent: DurableAgent) -> DurableAgent:
    """Register ``agent`` (by its name) for the runs of this process, and the durable agents of
    its agent tools' nested runs (docs/durable.md#nested-runs); returns it."""
    _state.agents[agent.name] = agent
    for inner in nested_agents(agent):
        _state.agents[inner.name] = inner
    return agent


def _agent(name: str) -> DurableAgent:
    agent = _state.agents.get(name)
    if agent is None:
        raise TemporalRunError(
            f"no durable agent named {name!r} is registered in this process (registered: "
            f"{', '.join(sorted(_state.agents)) or 'none'}): register(DurableAgent(...))"
        )
    return agent


def listen(run_id: str, listener: Callable[[Any], Any]) -> Callable[[], None]:
    """Give the events of the run ``run_id`` that this worker process's workflow makes to
    ``listener(event)`` (sync; not again on a replay); returns a function that stops it."""
    _state.listeners[run_id] = listener

    def remove() -> None:
        if _state.listeners.get(run_id) is listener:
            del _state.listeners[run_id]

    return remove


def _tell(run_id: str, event: Any) -> None:
    listener = _state.listeners.get(run_id)
    if listener is not None:
        try:
            listener(event)
        except Exception:
            logger.exception("a listener of run %s raised; ignored", run_id)


# --- activities (they run in a worker, outside the workflow) ----------------------------------


@activity.defn(name="agentcore_fsm.model_call")
async def model_call(
    agent_name: str, run_id: str, model: Any, call: dict[str, Any]
) -> dict[str, Any]:
    """One model call: the agent's stream consumed here, its end returned (as the codec
    encodes it; the deltas are not kept)."""
    agent = _agent(agent_name)
    config = agent.config
    tools = {t.name: t for t in agent.tools}
    spec = config.output
    if spec is not None and spec.uses_tool:
        tools[spec.final_tool.name] = spec.final_tool
    context = LlmContext(
        call["system_prompt"],
        [decode_message(m) for m in call["messages"]],
        [tools[name] for name in call["tools"] if name in tools],
        spec,
    )
    api_key = config.api_key
    if config.get_api_key is not None:  # never recorded: asked for in the activity
        api_key = await maybe_await(config.get_api_key(decode_model(model).provider)) or api_key
    options = StreamOptions(
        api_key=api_key,
        reasoning=call.get("reasoning"),
        session_id=config.session_id,
        thinking_budgets=config.thinking_budgets,
        transport=config.transport,
        max_retry_delay_ms=config.max_retry_delay_ms,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        headers=config.headers,
        on_payload=config.on_payload,
        on_response=config.on_response,
    )
    partial: Any = None
    stream: Any = None
    out: dict[str, Any]
    try:
        stream = await maybe_await(agent.stream_fn(decode_model(model), context, options))
        async for event in stream:
            partial = getattr(event, "partial", partial)
            if getattr(event, "type", None) in ("done", "error"):
                message = event.message if event.type == "done" else event.error
                return {
                    "type": event.type,
                    "reason": event.reason,
                    "message": encode_message(message),
                }
        out = {"exhausted": True}
    except Exception as exc:
        out = {"raise": exc_text(exc)}
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    if partial is not None:
        out["partial"] = encode_message(partial)
    return out


@activity.defn(name="agentcore_fsm.tool")
async def tool_call(agent_name: str, name: str, call_id: str, args: Any) -> dict[str, Any]:
    """One tool execution; its outcome as the codec encodes it (an error is an outcome). The
    tool gets a signal of its own and an ``on_update`` that drops its progress updates (a
    Temporal run has no ``tool_execution_update`` events: an activity's result is all the
    workflow sees)."""
    tool = {t.name: t for t in _agent(agent_name).tools}[name]
    execute: Any = tool.execute
    signal = AbortController().signal  # a tool's progress updates stay in the activity

    def on_update(partial: Any) -> None:
        return None

    try:
        if inspect.iscoroutinefunction(execute):
            value = await execute(call_id, args, signal, on_update)
        else:
            value = await maybe_await(
                await asyncio.to_thread(execute, call_id, args, signal, on_update)
            )
    except Exception as exc:
        return encode_tool_outcome(name, error=exc)
    return encode_tool_outcome(name, value)


@activity.defn(name="agentcore_fsm.requires_approval")
async def approval_check(agent_name: str, name: str, args: Any) -> dict[str, Any]:
    """A tool's callable ``requires_approval``."""
    check: Any = {t.name: t for t in _agent(agent_name).tools}[name].requires_approval
    try:
        return {"value": json_data(await maybe_await(check(args)))}
    except Exception as exc:
        return {"raise": exc_text(exc)}


@activity.defn(name="agentcore_fsm.poll")
async def poll_call(agent_name: str, name: str) -> dict[str, Any]:
    """A steering or follow-up poll of the agent's config."""
    poll = getattr(_agent(agent_name).config, name)
    try:
        return encode_poll(name, await maybe_await(poll()))
    except Exception as exc:
        return {"raise": exc_text(exc)}


@activity.defn(name="agentcore_fsm.hook")
async def hook_call(agent_name: str, name: str, ctx: dict[str, Any]) -> dict[str, Any]:
    """A tool or turn hook of the agent's config, given its context as JSON data."""
    return await call_hook(_agent(agent_name), name, ctx)


def activities() -> list[Callable[..., Any]]:
    """The activities a worker of runs registers."""
    return [model_call, tool_call, approval_check, poll_call, hook_call]


# --- the workflow ------------------------------------------------------------------------------


@workflow.defn(name=WORKFLOW_NAME, sandboxed=True)
class RunWorkflow:
    """One agent run (see the module's documentation)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.decisions: dict[str, dict[str, Any]] = {}
        self.machine: JournaledLoopMachine | None = None
        self.done = False

    @workflow.signal(name=DECISION_SIGNAL)
    def decide(self, call_id: str, decision: dict[str, Any]) -> None:
        self.decisions.setdefault(call_id, decision)

    @workflow.query(name=EVENTS_QUERY)
    def events_from(self, start: int) -> dict[str, Any]:
        return {"events": self.events[start:], "done": self.done}

    @workflow.query(name=RECORD_QUERY)
    def record(self) -> dict[str, Any] | None:
        return None if self.machine is None else self.machine.snapshot().model_dump(mode="json")

    @workflow.run
    async def run(
        self, agent_name: str, prompts: list[dict[str, Any]], options: dict[str, Any]
    ) -> dict[str, Any]:
        run = _WorkflowRun(self, _agent(agent_name), RunOptions(**options))
        return await run.run(prompts)


def _ms() -> int:
    return int(workflow.now().timestamp() * 1000)


class _WorkflowRun:
    """The driver's side of a run, inside the workflow."""

    def __init__(self, flow: RunWorkflow, agent: DurableAgent, options: RunOptions) -> None:
        self.flow = flow
        self.agent = agent
        self.options = options
        self.run_id = workflow.info().workflow_id
        self.tools = [self._wrap_tool(t) for t in agent.tools]
        self.controller = AbortController()

    def _activity_options(self, attempts: int, timeout_s: float) -> dict[str, Any]:
        return {
            "start_to_close_timeout": timedelta(seconds=timeout_s),
            "retry_policy": RetryPolicy(maximum_attempts=attempts),
            "task_queue": workflow.info().task_queue,
        }

    def emit(self, event: Any) -> None:
        if event.type != "message_update":
            self.flow.events.append(event.model_dump(mode="json"))
        if not workflow.unsafe.is_replaying():
            _tell(self.run_id, event)

    async def run(self, prompts: list[dict[str, Any]]) -> dict[str, Any]:
        agent = self.agent
        config = self._config(agent.config)
        context = AgentContext(agent.system_prompt, [], self.tools)
        machine = JournaledLoopMachine([decode_message(p) for p in prompts], context, config)
        self.flow.machine = machine
        with bind_run():  # its transcript, for the ids of its nested runs
            driving = asyncio.ensure_future(
                run_machine(
                    machine,
                    stream_fn=self._stream_fn,
                    emit=self.emit,
                    signal=self.controller.signal,
                    observers=(),
                    run_id=self.run_id,
                    clock=_ms,
                )
            )
        try:
            messages = await asyncio.shield(driving)
        except asyncio.CancelledError:  # Temporal's cancellation: the run is aborted
            self.controller.abort("cancelled")
            messages = await driving
        self.flow.done = True
        return {
            "messages": [encode_message(m) for m in messages],
            "reason": machine.end_reason,
            "record": machine.snapshot().model_dump(mode="json"),
        }

    def _config(self, config: AgentLoopConfig) -> AgentLoopConfig:
        changes: dict[str, Any] = {
            "tool_execution": "sequential",
            "approval_timeout_s": None,
            "decide_approval": self._decide(config.approval_timeout_s),
            "get_api_key": None,  # asked for inside the model activity: never in the history
        }
        for name in ("get_steering_messages", "get_follow_up_messages"):
            if getattr(config, name) is not None:
                changes[name] = self._wrap_poll(name)
        for name in HOOK_NAMES:
            if getattr(config, name) is not None:
                changes[name] = self._wrap_hook(name)
        return dataclasses.replace(config, **changes)

    # --- the model call ---

    def _stream_fn(self, model: Any, context: Any, options: Any) -> AsyncIterator[Any]:
        return self._model_stream(model, context, options)

    async def _model_stream(self, model: Any, context: Any, options: Any) -> AsyncIterator[Any]:
        call = {
            "system_prompt": context.system_prompt,
            "messages": [encode_message(m) for m in context.messages],
            "tools": [t.name for t in context.tools],
            "reasoning": options.reasoning,
        }
        out: dict[str, Any] = await workflow.execute_activity(
            model_call,
            args=[self.agent.name, self.run_id, encode_model(model), call],
            **self._activity_options(self.options.model_attempts, self.options.model_timeout_s),
        )
        if "partial" in out:  # as the journal restores it: the message begun, then the end
            yield StreamStart(partial=decode_message(out["partial"]))
        if "message" not in out:
            raise_or(out)
            return  # exhausted
        message = decode_message(out["message"])
        if out["type"] == "done":
            yield StreamDone(reason=out["reason"], message=message)
        else:
            yield StreamError(reason=out["reason"], error=message)

    # --- tools ---

    def _wrap_tool(self, tool: AgentTool) -> AgentTool:
        if getattr(tool, "resumes_nested", False):
            return self._nested_tool(tool)
        run = self
        name = tool.name
        attempts = run.options.tool_attempts if tool.idempotent else 1

        async def durable_execute(call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
            try:
                out = await workflow.execute_activity(
                    tool_call,
                    args=[run.agent.name, name, call_id, json_data(args)],
                    **run._activity_options(attempts, run.options.tool_timeout_s),
                )
            except ActivityError:  # its worker died (or the activity was lost) every attempt
                out = {"error": INTERRUPTED_TEXT.format(name=name)}
            return decode_tool_outcome(out)

        wrapped = copy.copy(tool)
        wrapped.execute = durable_execute
        wrapped.execution_mode = None
        if callable(tool.requires_approval):

            async def requires_approval(args: Any) -> Any:
                out = await workflow.execute_activity(
                    approval_check,
                    args=[run.agent.name, name, json_data(args)],
                    **run._activity_options(run.options.tool_attempts, run.options.tool_timeout_s),
                )
                return raise_or(out)["value"]

            wrapped.requires_approval = requires_approval
        return wrapped

    def _nested_tool(self, tool: AgentTool) -> AgentTool:
        """An agent tool: each call a child workflow (docs/durable.md#nested-runs)."""
        run = self

        async def nested_execute(call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
            call = nested_call(tool, run.agent.name, run.run_id, call_id, args)
            if call.refused is not None:
                return call.refused
            handle = await workflow.start_child_workflow(
                RunWorkflow.run,
                args=[call.agent, call.prompts, run.options.data()],
                id=call.run_id,
                task_queue=workflow.info().task_queue,
            )
            unlink = signal.add_callback(handle.cancel)  # an abort cancels the nested run
            try:
                out = await handle
            finally:
                unlink()
            inner = [decode_message(m) for m in out["messages"]]
            return tool.result_of(inner, out["reason"], call.agents)  # type: ignore[attr-defined]

        wrapped = copy.copy(tool)
        wrapped.execute = nested_execute
        wrapped.execution_mode = None
        return wrapped

    # --- polls, hooks, approvals ---

    def _wrap_poll(self, name: str) -> Callable[[], Any]:
        async def durable_poll() -> Any:
            out = await workflow.execute_activity(
                poll_call,
                args=[self.agent.name, name],
                **self._activity_options(self.options.tool_attempts, self.options.tool_timeout_s),
            )
            return decode_poll(raise_or(out))

        return durable_poll

    def _wrap_hook(self, name: str) -> Callable[..., Any]:
        tools = tools_by_name({t.name: t for t in self.tools})

        async def durable_hook(ctx: Any, signal: Any) -> Any:
            out = await workflow.execute_activity(
                hook_call,
                args=[self.agent.name, name, encode_hook_context(name, ctx)],
                **self._activity_options(self.options.tool_attempts, self.options.tool_timeout_s),
            )
            out = raise_or(out)
            if "args" in out and isinstance(ctx.args, dict) and isinstance(out["args"], dict):
                if ctx.args != out["args"]:  # before_tool_call edited them in place
                    ctx.args.clear()
                    ctx.args.update(out["args"])
            return decode_hook_value(name, {k: v for k, v in out.items() if k != "args"}, tools)

        return durable_hook

    def _decide(self, timeout: float | None) -> Callable[[Any, Any], Any]:
        decisions = self.flow.decisions

        async def decide(request: Any, signal: Any) -> Any:
            call_id = request.tool_call_id
            try:
                await workflow.wait_condition(
                    lambda: call_id in decisions,
                    timeout=None if timeout is None else timedelta(seconds=timeout),
                )
            except TimeoutError:
                reason = TIMEOUT_TEXT.format(seconds=timeout)
                return ApprovalDecision(approved=False, reason=reason, decided_by="timeout")
            return ApprovalDecision.model_validate(decisions[call_id])

        return decide


# --- launching, starting and following runs ---------------------------------------------------


def worker_for_runner(passed_through: Sequence[str] = ()) -> SandboxedWorkflowRunner:
    """The workflow runner of a worker (or of a :class:`temporalio.worker.Replayer`): the SDK's
    sandbox, with ``agentcore_fsm`` and ``passed_through`` passed through. Call it from async
    code on asyncio: it loads anyio's asyncio backend here, outside the sandbox (the driver's
    cancel scopes need it; imported inside a workflow, its threads would be refused)."""
    anyio.get_cancelled_exc_class()
    restrictions = SandboxRestrictions.default.with_passthrough_modules(
        *PASSED_THROUGH, *passed_through
    )
    return SandboxedWorkflowRunner(restrictions=restrictions)


def worker_for(
    client: Client,
    *,
    queue: str = RUNS_QUEUE,
    passed_through: Sequence[str] = (),
    max_concurrent_activities: int | None = None,
    sticky_timeout_s: float = 10.0,
) -> Worker:
    """A Temporal worker of runs and their activities on the task queue ``queue``. The
    sandbox passes ``agentcore_fsm`` and ``passed_through`` (the modules of your agents)
    through. ``sticky_timeout_s``: how long a run's next workflow task waits for this worker
    (which caches the run) before any worker takes it: after a crash, the run goes on elsewhere
    that much later (Temporal's default, 10 s). Run it with ``async with`` or :func:`launch`."""
    return Worker(
        client,
        task_queue=queue,
        workflows=[RunWorkflow],
        activities=activities(),
        workflow_runner=worker_for_runner(passed_through),
        max_concurrent_activities=max_concurrent_activities,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=sticky_timeout_s),
    )


async def connect(address: str, *, namespace: str = "default") -> Client:
    """A client of the Temporal server at ``address`` (``host:port``), kept for this
    process's calls of this module."""
    _state.client = await Client.connect(
        address, namespace=namespace, data_converter=DATA_CONVERTER
    )
    return _state.client


async def launch(
    address: str,
    *,
    agents: Sequence[DurableAgent] = (),
    namespace: str = "default",
    queue: str | None = None,
    passed_through: Sequence[str] = (),
    max_concurrent_activities: int | None = None,
    sticky_timeout_s: float = 10.0,
) -> Client:
    """Connect this process to the Temporal server at ``address`` and register ``agents``;
    with ``queue``, also run a worker of that task queue (in a task of this event loop, until
    :func:`shutdown`; ``passed_through``, ``max_concurrent_activities`` and
    ``sticky_timeout_s`` as for :func:`worker_for`). Returns the client."""
    for agent in agents:
        register(agent)
    if _state.client is not None:
        raise TemporalRunError("Temporal is already launched in this process (await shutdown())")
    client = await connect(address, namespace=namespace)
    if queue is not None:
        _state.queue = queue
        worker = worker_for(
            client,
            queue=queue,
            passed_through=passed_through,
            max_concurrent_activities=max_concurrent_activities,
            sticky_timeout_s=sticky_timeout_s,
        )
        _state.worker = worker
        _state.task = asyncio.ensure_future(worker.run())
    return client


async def shutdown() -> None:
    """Stop this process's worker (its activities in flight are cancelled; their runs go on on
    another worker) and forget the client. Await it before the process exits."""
    worker, task = _state.worker, _state.task
    _state.worker = _state.task = None
    _state.client = None
    _state.queue = RUNS_QUEUE
    if worker is not None:
        await worker.shutdown()
    if task is not None:
        await asyncio.gather(task, return_exceptions=True)


def _client() -> Client:
    if _state.client is None:
        raise TemporalRunError("Temporal is not launched in this process: await launch(address)")
    return _state.client


def _handle(run_id: str) -> WorkflowHandle[Any, Any]:
    return _client().get_workflow_handle(run_id)


async def start_run(
    agent: str,
    prompts: Any,
    *,
    run_id: str,
    queue: str | None = None,
    options: RunOptions | None = None,
) -> str:
    """Start a run of the registered agent ``agent`` as the workflow ``run_id`` on the task
    queue ``queue`` (default: the one this process launched with, or :data:`RUNS_QUEUE`).
    Starting an id again attaches to the existing run. Returns the id."""
    encoded = [encode_message(m) for m in as_prompts(prompts)]
    data = (options or RunOptions()).data()
    try:
        await _client().start_workflow(
            WORKFLOW_NAME,
            args=[agent, encoded, data],
            id=run_id,
            task_queue=queue or _state.queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:  # started before: attach to it
        pass
    return run_id


async def result_async(run_id: str) -> list[AgentMessage]:
    """Wait for the run ``run_id`` and return its new messages."""
    out: dict[str, Any] = await _handle(run_id).result()
    return [decode_message(m) for m in out["messages"]]


async def record_async(run_id: str) -> RunSnapshot:
    """The record of the run ``run_id`` so far (once it ended: its whole record), in the
    format of every run store: ``derive_run``, replay and ``diagram`` read it."""
    data = await _handle(run_id).query(RECORD_QUERY)
    if data is None:
        raise TemporalRunError(f"the run {run_id!r} has not started yet")
    return RunSnapshot.model_validate(data)


async def run_durable(
    agent: str,
    prompts: Any,
    *,
    run_id: str,
    emit: Callable[[Any], Any] | None = None,
    options: RunOptions | None = None,
) -> list[AgentMessage]:
    """Start the run and wait for its messages; ``emit(event)`` gets the events that this
    process's worker executes live (deltas included)."""
    remove = listen(run_id, emit) if emit is not None else None
    try:
        await start_run(agent, prompts, run_id=run_id, options=options)
        return await result_async(run_id)
    finally:
        if remove is not None:
            remove()


async def follow_async(run_id: str, *, timeout_s: float | None = None) -> AsyncIterator[Any]:
    """The run's events (``message_update`` deltas excepted) from its first one until it
    ends, read by polling the workflow's :data:`EVENTS_QUERY` (also when no worker runs the
    workflow, Temporal needs one to answer a query; it waits for one). ``timeout_s``: stop
    after that long."""
    handle = _handle(run_id)
    loop = asyncio.get_running_loop()
    deadline = None if timeout_s is None else loop.time() + timeout_s
    seen = 0
    delay = 0.02
    while True:
        out = await handle.query(EVENTS_QUERY, seen)
        for data in out["events"]:
            yield AGENT_EVENT_ADAPTER.validate_python(data)
        seen += len(out["events"])
        if out["done"] or (deadline is not None and loop.time() >= deadline):
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.25)


async def send_decision_async(run_id: str, call_id: str, decision: ApprovalDecision | bool) -> None:
    """Decide about the call ``call_id`` of the run ``run_id`` (the signal
    :data:`DECISION_SIGNAL`), from any connected process; kept until the call waits."""
    if isinstance(decision, bool):
        decision = ApprovalDecision(approved=decision)
    await _handle(run_id).signal(DECISION_SIGNAL, args=[call_id, decision.model_dump(mode="json")])


async def abort_async(run_id: str) -> None:
    """Abort the run ``run_id``: Temporal's cancellation of its workflow (it ends as
    ``"aborted"``)."""
    await _handle(run_id).cancel()
