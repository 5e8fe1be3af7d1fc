"""Durable, distributed runs of the agent loop as DBOS workflows (the ``dbos`` extra).

A run is a DBOS workflow (:data:`WORKFLOW_NAME`) driven by the ordinary driver. Everything the
run asks of the outside world is a DBOS step whose outcome is checkpointed: the model call, each
tool execution, the polls, the tool and turn hooks, ``requires_approval``. When a process dies,
DBOS recovery runs the workflow again: the steps that completed return their recorded outcomes
without running, and since the machine is pure and fed those same outcomes in the same order,
the run reaches exactly the state it had and goes on live from the first step that did not
complete. Outcomes are recorded by the codec of the run record (:mod:`agentcore_fsm.persist.codec`),
with the rules every other record of a run follows: the same agent behaves the same in memory,
journaled in a run store and here.

Exactness needs a deterministic order of steps, so a durable run performs its effects one at a
time: tool calls run sequentially (``tool_execution="sequential"`` is forced) and a second step
starting while one is in flight is refused. The driver stamps the machine's inputs with the
completion time of the last step (recorded with each step's outcome), so timestamps replay
exactly too.

Events go to live listeners in this process (streamed deltas included, during the first
execution of a model call) and, except the ``message_update`` deltas, to the workflow's DBOS
stream :data:`EVENTS_STREAM`, so a client anywhere can :func:`follow` a run. A call that needs
approval waits on the workflow's messages (topic :func:`approval_topic`);
:func:`send_decision` from any process decides it.

DBOS runs on asyncio: under trio everything here raises :class:`DurableBackendError`.

See docs/durable.md.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import logging
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import sniffio
from dbos import DBOS, DBOSClient, DBOSConfig, SetWorkflowID

from agentcore_fsm.core.approval import TIMEOUT_TEXT, ApprovalDecision
from agentcore_fsm.core.boundary import exc_text, json_data
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig
from agentcore_fsm.core.events import AGENT_EVENT_ADAPTER, StreamDone, StreamError, StreamStart
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import AgentMessage, now_ms
from agentcore_fsm.core.run_context import bind_run
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.integrations.durable_api import (
    DurableAgent,
    maybe_await,
    nested_agents,
    nested_call,
    raise_or,
)
from agentcore_fsm.persist.codec import (
    decode_hook_value,
    decode_message,
    decode_poll,
    decode_tool_outcome,
    encode_hook_value,
    encode_message,
    encode_poll,
    encode_tool_outcome,
    tools_by_name,
)
from agentcore_fsm.runtime.driver import as_prompts, run_machine
from agentcore_fsm.runtime.resume import INTERRUPTED_TEXT

__all__ = [
    "EVENTS_STREAM",
    "MODEL_QUEUE",
    "RUNS_QUEUE",
    "WORKFLOW_NAME",
    "DurableAgent",
    "DurableBackendError",
    "DurableRunError",
    "abort_async",
    "approval_topic",
    "enqueue_run",
    "follow",
    "follow_async",
    "launch",
    "listen",
    "register",
    "result",
    "result_async",
    "run_durable",
    "send_decision",
    "send_decision_async",
    "shutdown",
    "start_run",
]

logger = logging.getLogger("agentcore_fsm.integrations")

WORKFLOW_NAME = "agentcore_fsm.run"
"""The DBOS workflow name of a run (what a :class:`dbos.DBOSClient` enqueues)."""
RUNS_QUEUE = "agentcore_runs"
"""The default queue of runs that workers consume."""
MODEL_QUEUE = "agentcore_model_calls"
"""The queue whose rate limit every worker's model calls share (see ``model_rate_limit``)."""
EVENTS_STREAM = "events"
"""The key of the DBOS stream a run writes its events to (lists of event dicts)."""
APP_VERSION = "agentcore_fsm-durable-1"
"""The application version every process uses, so that any worker may recover any run."""
_FOREVER_S = 100 * 365 * 24 * 3600.0


class DurableBackendError(RuntimeError):
    """A durable run was asked for outside asyncio (DBOS runs its workflows on asyncio)."""


class DurableRunError(RuntimeError):
    """A durable run cannot go on: unknown agent, DBOS not launched, or steps that would not
    replay in order."""


TRIO_TEXT = (
    "agentcore_fsm.integrations.dbos needs asyncio: DBOS runs its workflows on asyncio, and this "
    "code is running under trio. Run it with asyncio.run(...) (the agent loop itself runs on "
    "either backend; only durable runs are asyncio-only)."
)


def _check_asyncio() -> None:
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return  # not in async code (launch from sync code)
    if library != "asyncio":
        raise DurableBackendError(TRIO_TEXT)


# --- agents -----------------------------------------------------------------------------------


_agents: dict[str, DurableAgent] = {}
_listeners: dict[str, Callable[[Any], Any]] = {}


@dataclass
class _State:
    launched: bool = False
    rate_limited: bool = False
    model_queue: Any = None
    permits: threading.Event = field(default_factory=threading.Event)


_state = _State()


def register(agent: DurableAgent) -> DurableAgent:
    """Register ``agent`` (by its name) for the runs of this process, and the durable agents of
    its agent tools' nested runs (docs/durable.md#nested-runs); returns it."""
    _agents[agent.name] = agent
    for inner in nested_agents(agent):
        _agents[inner.name] = inner
    return agent


def _agent(name: str) -> DurableAgent:
    agent = _agents.get(name)
    if agent is None:
        raise DurableRunError(
            f"no durable agent named {name!r} is registered in this process (registered: "
            f"{', '.join(sorted(_agents)) or 'none'}): register(DurableAgent(name={name!r}, ...))"
        )
    return agent


def listen(run_id: str, listener: Callable[[Any], Any]) -> Callable[[], None]:
    """Give every event of the run ``run_id`` executed in this process to ``listener(event)``
    (sync; deltas included) from now on, recovered executions too (call it before
    :func:`launch` to see a recovery from its start); returns a function that stops it."""
    _listeners[run_id] = listener

    def remove() -> None:
        if _listeners.get(run_id) is listener:
            del _listeners[run_id]

    return remove


def approval_topic(call_id: str) -> str:
    """The workflow-message topic a call waiting for approval listens on."""
    return f"agentcore_fsm.core.approval:{call_id}"


# --- launching ----------------------------------------------------------------------------


async def launch(
    database_url: str,
    *,
    agents: Sequence[DurableAgent] = (),
    app_name: str = "agentcore_fsm",
    executor_id: str | None = None,
    queue: str | None = None,
    concurrency: int | None = None,
    worker_concurrency: int | None = None,
    model_rate_limit: tuple[int, float] | None = None,
    polling_interval_s: float = 0.2,
    sqlite_synchronous: str = "NORMAL",
) -> None:
    """Start DBOS in this process on the system database ``database_url`` (``sqlite:///path``,
    or ``postgresql://...``), registering ``agents``; pending runs of this executor are recovered.

    ``queue``: also consume that queue of runs (a worker), with at most ``concurrency`` runs at
    once over all workers and ``worker_concurrency`` in this process. ``model_rate_limit``:
    ``(limit, period_s)``, at most ``limit`` model calls per ``period_s`` seconds over every
    process that launches with the same limit (the last process to launch sets the queues'
    limits in the database). ``sqlite_synchronous``: a SQLite system
    database is in WAL mode with this ``PRAGMA synchronous`` ("NORMAL": a recorded step survives
    the process being killed, the last ones may be lost to a power failure and run again;
    "FULL": an fsync per commit). Call it from the thread of the asyncio loop that
    will run the workflows."""
    _check_asyncio()
    for agent in agents:
        register(agent)
    if _state.launched:
        raise DurableRunError("DBOS is already launched in this process (call shutdown() first)")
    config: DBOSConfig = {
        "name": app_name,
        "system_database_url": database_url,
        "application_version": APP_VERSION,
        "log_level": os.environ.get("AGENTCORE_DBOS_LOG_LEVEL", "WARNING"),
        "notification_listener_polling_interval_sec": 0.05,
    }
    if executor_id is not None:
        config["executor_id"] = executor_id
    if database_url.startswith("sqlite"):
        config["system_database_engine"] = _sqlite_engine(database_url, sqlite_synchronous)
    DBOS(config=config)
    # this process dequeues only from the queue it is told to consume (and the model-call
    # permits, when it is rate limited): a process that only starts runs takes none
    DBOS.listen_queues(([queue] if queue else []) + ([MODEL_QUEUE] if model_rate_limit else []))
    _state.rate_limited = model_rate_limit is not None
    _state.permits.clear()
    DBOS.launch()  # recovers this executor's pending runs, on this event loop
    _state.launched = True
    if queue is not None:
        await DBOS.register_queue_async(
            queue,
            global_concurrency=concurrency,
            worker_concurrency=worker_concurrency,
            polling_interval_sec=polling_interval_s,
            on_conflict="always_update",
        )
    if model_rate_limit is not None:
        limit, period = model_rate_limit
        _state.model_queue = await DBOS.register_queue_async(
            MODEL_QUEUE,
            limiter={"limit": limit, "period": period},
            polling_interval_sec=min(polling_interval_s, 0.05),
            on_conflict="always_update",
        )
        _state.permits.set()  # model calls of recovered runs waited for it


def _sqlite_engine(database_url: str, synchronous: str) -> Any:
    """The SQLite engine DBOS would make (IMMEDIATE transactions, a long busy timeout, foreign
    keys), in WAL mode with ``synchronous``."""
    import sqlalchemy as sa

    if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        raise ValueError(f"sqlite_synchronous must be NORMAL, FULL, EXTRA or OFF: {synchronous!r}")
    engine = sa.create_engine(database_url)

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, record: Any) -> None:
        dbapi_conn.isolation_level = "IMMEDIATE"
        dbapi_conn.execute("PRAGMA busy_timeout=30000")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute(f"PRAGMA synchronous={synchronous.upper()}")

    return engine


def shutdown() -> None:
    """Stop DBOS in this process (runs in flight are recovered by the next launch)."""
    if _state.launched:
        DBOS.destroy(destroy_registry=False)
    _state.launched = False
    _state.rate_limited = False
    _state.model_queue = None


# --- the workflow -------------------------------------------------------------------------


@DBOS.workflow(name=WORKFLOW_NAME)
async def _run_workflow(agent_name: str, prompts: list[dict[str, Any]]) -> dict[str, Any]:
    _check_asyncio()
    workflow_id = DBOS.workflow_id
    assert workflow_id is not None
    return await _DurableRun(_agent(agent_name), workflow_id).run(prompts)


@DBOS.workflow(name="agentcore_fsm.model_permit")
def _model_permit() -> int:
    """A no-op, run from the model-call queue: its rate limit spaces the model calls."""
    return now_ms()


def _take_permit() -> None:
    _state.permits.wait()
    _state.model_queue.enqueue(_model_permit).get_result(polling_interval_sec=0.02)


_END = object()


class _DurableRun:
    """One execution (first or recovered) of a run's workflow."""

    def __init__(self, agent: DurableAgent, workflow_id: str) -> None:
        self.agent = agent
        self.workflow_id = workflow_id
        self.now = 0  # the machine's clock: completion time of the last step
        self.pending: list[dict[str, Any]] = []  # events not yet written to the stream
        self.in_flight: str | None = None
        self.tools = [self._wrap_tool(t) for t in agent.tools]
        self.by_name = {t.name: t for t in self.tools}

    def clock(self) -> int:
        return self.now

    # --- steps and the event stream ---

    async def flush(self) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            await DBOS.write_stream_async(EVENTS_STREAM, batch)

    async def step(self, name: str, body: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``body`` as the DBOS step ``name``; return its (recorded) outcome."""
        if self.in_flight is not None:
            raise DurableRunError(
                f"the step {name!r} would start while {self.in_flight!r} is in flight: a durable "
                f"run performs its effects one at a time"
            )
        await self.flush()
        self.in_flight = name

        async def timed() -> dict[str, Any]:
            return {"out": await body(), "at": now_ms()}

        try:
            recorded = await DBOS.run_step_async({"name": name}, timed)
        finally:
            self.in_flight = None
        self.now = int(recorded["at"])
        return recorded["out"]

    def emit(self, event: Any) -> None:
        if event.type != "message_update":
            self.pending.append(event.model_dump(mode="json"))
        listener = _listeners.get(self.workflow_id)
        if listener is not None:
            try:
                listener(event)
            except Exception:
                logger.exception("a listener of run %s raised; ignored", self.workflow_id)

    # --- the run ---

    async def run(self, prompts: list[dict[str, Any]]) -> dict[str, Any]:
        async def start() -> int:
            return now_ms()

        self.now = int(await self.step("agentcore.start", start))
        agent = self.agent
        config = self._config(agent.config)
        context = AgentContext(agent.system_prompt, [], self.tools)
        # the driver stamps the inputs with the recorded time; DBOS checkpoints each step
        machine = LoopMachine([decode_message(p) for p in prompts], context, config)
        with bind_run():  # its transcript, for the ids of its nested runs
            messages = await run_machine(
                machine, stream_fn=self._stream_fn, emit=self.emit, observers=(), clock=self.clock
            )
        await self.flush()
        await DBOS.close_stream_async(EVENTS_STREAM)
        return {"messages": [encode_message(m) for m in messages], "reason": machine.end_reason}

    def _config(self, config: AgentLoopConfig) -> AgentLoopConfig:
        changes: dict[str, Any] = {
            "tool_execution": "sequential",
            "approval_timeout_s": None,
            "decide_approval": self._decide(config.approval_timeout_s),
        }
        for name in ("get_steering_messages", "get_follow_up_messages"):
            poll = getattr(config, name)
            if poll is not None:
                changes[name] = self._wrap_poll(name, poll)
        for name in ("before_tool_call", "after_tool_call", "prepare_next_turn"):
            hook = getattr(config, name)
            if hook is not None:
                changes[name] = self._wrap_hook(name, hook)
        if config.should_stop_after_turn is not None:
            changes["should_stop_after_turn"] = self._wrap_hook(
                "should_stop_after_turn", config.should_stop_after_turn
            )
        return dataclasses.replace(config, **changes)

    # --- the model call ---

    def _stream_fn(self, model: Any, context: Any, options: Any) -> AsyncIterator[Any]:
        return self._model_stream(model, context, options)

    async def _model_stream(self, model: Any, context: Any, options: Any) -> AsyncIterator[Any]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        real = self.agent.stream_fn

        async def body() -> dict[str, Any]:
            if _state.rate_limited:
                await asyncio.get_running_loop().run_in_executor(None, _take_permit)
            final: Any = None
            partial: Any = None  # the message as the last event left it
            stream: Any = None
            out: dict[str, Any]
            try:
                stream = await maybe_await(real(model, context, options))
                async for event in stream:
                    partial = getattr(event, "partial", partial)
                    queue.put_nowait(event)
                    if getattr(event, "type", None) in ("done", "error"):
                        final = event
                        break
                    await queue.join()  # in step with the driver, as a direct stream is
            except Exception as exc:
                out = {"raise": exc_text(exc)}
            else:
                if final is not None:
                    message = final.message if final.type == "done" else final.error
                    return {
                        "type": final.type,
                        "reason": final.reason,
                        "message": encode_message(message),
                    }
                out = {"exhausted": True}
            finally:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
            if partial is not None:  # the call ended without an answer, a message begun
                out["partial"] = encode_message(partial)
            return out

        task = asyncio.ensure_future(self.step("model_call", body))
        task.add_done_callback(lambda _: queue.put_nowait(_END))
        live = ended = False
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    break
                live = True
                ended = getattr(item, "type", None) in ("done", "error")
                yield item
                if not ended:
                    queue.task_done()
        finally:
            if not task.done():
                if ended:  # the driver is done with the stream: let the step record it
                    await asyncio.shield(task)
                else:
                    task.cancel()
        out = task.result()
        if live:  # the first execution: the events went by live
            raise_or(out)
            return
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
        execute: Any = tool.execute

        async def durable_execute(call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
            ran = False

            async def started() -> int:
                nonlocal ran
                ran = True
                return now_ms()

            await run.step(f"tool_started:{name}", started)
            restarted = not ran  # it started in an execution that died

            async def body() -> dict[str, Any]:
                if restarted and not tool.idempotent:
                    return {"error": INTERRUPTED_TEXT.format(name=name)}
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

            out = raise_or(await run.step(f"tool:{name}", body))
            if "other" in out:  # recorded by an earlier release: the value as it was
                out = encode_tool_outcome(name, out["other"])
            return decode_tool_outcome(out)

        wrapped = copy.copy(tool)
        wrapped.execute = durable_execute
        wrapped.execution_mode = None
        check = tool.requires_approval
        if callable(check):

            async def requires_approval(args: Any) -> Any:
                async def body() -> dict[str, Any]:
                    try:
                        return {"value": json_data(await maybe_await(check(args)))}
                    except Exception as exc:
                        return {"raise": exc_text(exc)}

                return raise_or(await run.step(f"requires_approval:{name}", body))["value"]

            wrapped.requires_approval = requires_approval
        return wrapped

    def _nested_tool(self, tool: AgentTool) -> AgentTool:
        """An agent tool: each call is a child workflow, the nested run as a durable run of its
        own (docs/durable.md#nested-runs), whose steps DBOS checkpoints as the outer run's."""
        run = self

        async def nested_execute(call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
            call = nested_call(tool, run.agent.name, run.workflow_id, call_id, args)
            if call.refused is not None:
                return call.refused
            with SetWorkflowID(call.run_id):
                handle = await DBOS.start_workflow_async(_run_workflow, call.agent, call.prompts)
            out = await handle.get_result()
            inner = [decode_message(m) for m in out["messages"]]
            return tool.result_of(inner, out["reason"], call.agents)  # type: ignore[attr-defined]

        wrapped = copy.copy(tool)
        wrapped.execute = nested_execute
        wrapped.execution_mode = None
        return wrapped

    # --- polls, hooks, approvals ---

    def _wrap_poll(self, name: str, poll: Callable[[], Any]) -> Callable[[], Any]:
        async def durable_poll() -> Any:
            async def body() -> dict[str, Any]:
                try:
                    return encode_poll(name, await maybe_await(poll()))
                except Exception as exc:
                    return {"raise": exc_text(exc)}

            return decode_poll(raise_or(await self.step(name, body)))

        return durable_poll

    def _wrap_hook(self, name: str, hook: Callable[..., Any]) -> Callable[..., Any]:
        tools = tools_by_name(self.by_name)

        async def durable_hook(ctx: Any, signal: Any) -> Any:
            async def body() -> dict[str, Any]:
                try:
                    out = encode_hook_value(name, await maybe_await(hook(ctx, signal)))
                except Exception as exc:
                    return {"raise": exc_text(exc)}
                if name == "before_tool_call":
                    out["args"] = json_data(ctx.args)  # it may edit them in place
                return out

            out = raise_or(await self.step(name, body))
            if "args" in out and isinstance(ctx.args, dict) and isinstance(out["args"], dict):
                if ctx.args != out["args"]:
                    ctx.args.clear()
                    ctx.args.update(out["args"])
            return decode_hook_value(name, {k: v for k, v in out.items() if k != "args"}, tools)

        return durable_hook

    def _decide(self, timeout: float | None) -> Callable[[Any, Any], Any]:
        async def decide(request: Any, signal: Any) -> Any:
            if self.in_flight is not None:
                raise DurableRunError(
                    f"an approval wait would start while {self.in_flight!r} is in flight"
                )
            await self.flush()  # approval_requested reaches the followers before the wait
            topic = approval_topic(request.tool_call_id)
            message = await DBOS.recv_async(topic, _FOREVER_S if timeout is None else timeout)
            if message is None:
                reason = TIMEOUT_TEXT.format(seconds=timeout)
                return ApprovalDecision(approved=False, reason=reason, decided_by="timeout")
            return message

        return decide


# --- starting and following runs ----------------------------------------------------------


def _launched() -> None:
    if not _state.launched:
        raise DurableRunError("DBOS is not launched in this process: call launch(database_url)")


def _encoded_prompts(prompts: Any) -> list[dict[str, Any]]:
    return [encode_message(m) for m in as_prompts(prompts)]


async def start_run(agent: str, prompts: Any, *, run_id: str, queue: str | None = None) -> str:
    """Start a durable run of the registered agent ``agent`` under the workflow id ``run_id``:
    here, or (``queue``) on whichever worker dequeues it. Returns the id. Starting an id again
    attaches to the existing run."""
    _check_asyncio()
    _launched()
    await _start(agent, prompts, run_id, queue)
    return run_id


async def _start(agent: str, prompts: Any, run_id: str, queue: str | None) -> Any:
    args = (agent, _encoded_prompts(prompts))
    with SetWorkflowID(run_id):
        if queue is not None:
            q = await DBOS.retrieve_queue_async(queue)  # the sync call refuses a running loop
            if q is None:
                raise DurableRunError(f"no queue named {queue!r} is registered in this process")
            return await q.enqueue_async(_run_workflow, *args)
        return await DBOS.start_workflow_async(_run_workflow, *args)


def enqueue_run(
    client: DBOSClient, agent: str, prompts: Any, *, run_id: str, queue: str = RUNS_QUEUE
) -> str:
    """Enqueue a run from a process that does not run DBOS (a :class:`dbos.DBOSClient` on the
    same system database); a worker consuming ``queue`` runs it."""
    client.enqueue(
        {
            "queue_name": queue,
            "workflow_name": WORKFLOW_NAME,
            "workflow_id": run_id,
            "app_version": APP_VERSION,
        },
        agent,
        _encoded_prompts(prompts),
    )
    return run_id


async def run_durable(
    agent: str,
    prompts: Any,
    *,
    run_id: str,
    emit: Callable[[Any], Any] | None = None,
) -> list[AgentMessage]:
    """Run ``agent`` durably in this process and return the run's new messages; ``emit(event)``
    (sync) gets every event live, streamed deltas included. If the process dies, the next
    :func:`launch` on the same database recovers the run; :func:`result` then waits for it."""
    _check_asyncio()
    _launched()
    remove = listen(run_id, emit) if emit is not None else None
    try:
        handle = await _start(agent, prompts, run_id, None)
        return _decode_result(await handle.get_result())
    finally:
        if remove is not None:
            remove()


def _decode_result(out: dict[str, Any]) -> list[AgentMessage]:
    return [decode_message(m) for m in out["messages"]]


async def result_async(run_id: str) -> list[AgentMessage]:
    """Wait for the run ``run_id`` (started anywhere) and return its new messages."""
    handle: Any = await DBOS.retrieve_workflow_async(run_id)
    return _decode_result(await handle.get_result(polling_interval_sec=0.1))


def result(run_id: str, *, client: DBOSClient | None = None) -> list[AgentMessage]:
    """Wait for the run ``run_id`` and return its new messages (sync; with ``client`` from a
    process that does not run DBOS)."""
    handle: Any = client.retrieve_workflow(run_id) if client else DBOS.retrieve_workflow(run_id)
    return _decode_result(handle.get_result(polling_interval_sec=0.1))


def follow(
    run_id: str, *, client: DBOSClient | None = None, timeout_s: float | None = None
) -> Iterator[Any]:
    """The run's events (``message_update`` deltas excepted) from its DBOS stream, from the
    first one, as they are written, until the run ends. Sync; from any process (``client``)."""
    reader: Any = client if client is not None else DBOS
    for batch in reader.read_stream(
        run_id, EVENTS_STREAM, polling_interval_sec=0.05, timeout_seconds=timeout_s
    ):
        for data in batch:
            yield AGENT_EVENT_ADAPTER.validate_python(data)


async def follow_async(run_id: str, *, timeout_s: float | None = None) -> AsyncIterator[Any]:
    """:func:`follow` in a process that launched DBOS, from async code."""
    async for batch in DBOS.read_stream_async(
        run_id, EVENTS_STREAM, polling_interval_sec=0.05, timeout_seconds=timeout_s
    ):
        for data in batch:
            yield AGENT_EVENT_ADAPTER.validate_python(data)


def send_decision(
    run_id: str,
    call_id: str,
    decision: ApprovalDecision | bool,
    *,
    client: DBOSClient | None = None,
) -> None:
    """Decide about the call ``call_id`` of the run ``run_id`` waiting for approval, from any
    process (``client``: one that does not run DBOS). A decision sent before the call waits is
    kept until it does."""
    if isinstance(decision, bool):
        decision = ApprovalDecision(approved=decision)
    message = decision.model_dump(mode="json")
    topic = approval_topic(call_id)
    if client is not None:
        client.send(run_id, message, topic)
    else:
        DBOS.send(run_id, message, topic)


async def send_decision_async(run_id: str, call_id: str, decision: ApprovalDecision | bool) -> None:
    """:func:`send_decision` from async code in a process that launched DBOS (the
    :class:`~agentcore_fsm.integrations.durable_api.DurableEngine` interface)."""
    if isinstance(decision, bool):
        decision = ApprovalDecision(approved=decision)
    await DBOS.send_async(run_id, decision.model_dump(mode="json"), approval_topic(call_id))


async def abort_async(run_id: str) -> None:
    """Abort the run ``run_id``: DBOS cancels its workflow (the
    :class:`~agentcore_fsm.integrations.durable_api.DurableEngine` interface)."""
    await DBOS.cancel_workflow_async(run_id)
