"""The one interface of durable runs, whatever engine runs them (docs/durable.md).

A durable engine (:mod:`agentcore_fsm.integrations.dbos`,
:mod:`agentcore_fsm.integrations.temporal`) is a module that implements
:class:`DurableEngine`: starting a run, following its events, deciding an approval, aborting
it and reading its result look the same on every engine. How an engine is started in a process
(its server, its database, its workers) is the engine's own ``launch``; everything after that is
this interface. :func:`agentcore_fsm.integrations.engines.engine` returns an engine by name,
checked against this protocol by the type checker.

:class:`DurableAgent` is what every engine needs of an agent and cannot store: a process that
may run (or recover) a run registers it under its name; a run names its agent, not its objects.
This module imports no engine SDK.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentcore_fsm.core.approval import ApprovalDecision
from agentcore_fsm.core.config import AgentLoopConfig, StreamFn
from agentcore_fsm.core.messages import AgentMessage
from agentcore_fsm.core.tools import AgentTool, AgentToolResult
from agentcore_fsm.persist.codec import JournaledError
from agentcore_fsm.persist.journal import RunSnapshot, derive_run
from agentcore_fsm.persist.recorder import RunRecorder

__all__ = [
    "NESTED_MARK",
    "DurableAgent",
    "DurableEngine",
    "NestedCall",
    "maybe_await",
    "nested_agents",
    "nested_call",
    "raise_or",
    "write_recording",
]


@dataclass
class DurableAgent:
    """What a durable run needs that cannot be stored: the model's stream function, the tools
    and the config's callables. Register it under ``name`` in every process that may run (or
    recover) its runs; a run names its agent, not its objects."""

    name: str
    stream_fn: StreamFn
    config: AgentLoopConfig
    tools: Sequence[AgentTool] = ()
    system_prompt: str = ""


class DurableEngine(Protocol):
    """A durable engine, seen from a process that has launched it (its module's ``launch``).

    Every method may be called from any process connected to the engine, also one that runs no
    worker; a run is named by the ``run_id`` its starter chose."""

    def register(self, agent: DurableAgent) -> DurableAgent:
        """Register ``agent`` (by its name) for the runs of this process; return it."""
        ...

    async def start_run(
        self, agent: str, prompts: Any, *, run_id: str, queue: str | None = None
    ) -> str:
        """Start a run of the registered agent ``agent`` under ``run_id`` (on the workers of
        ``queue``, or the engine's default); return the id. Starting an id again attaches to the
        existing run."""
        ...

    def follow_async(self, run_id: str, *, timeout_s: float | None = None) -> AsyncIterator[Any]:
        """The run's events (``message_update`` deltas excepted), from its first one, as they
        happen, until the run ends."""
        ...

    async def send_decision_async(
        self, run_id: str, call_id: str, decision: ApprovalDecision | bool
    ) -> None:
        """Decide about the call ``call_id`` of ``run_id`` waiting for approval. A decision
        sent before the call waits is kept until it does."""
        ...

    async def abort_async(self, run_id: str) -> None:
        """Abort the run ``run_id`` (the engine's cancellation)."""
        ...

    async def result_async(self, run_id: str) -> list[AgentMessage]:
        """Wait for the run ``run_id`` and return its new messages."""
        ...


async def maybe_await(value: Any) -> Any:
    """``value``, awaited when it is awaitable (what a user's callable returned)."""
    if inspect.isawaitable(value):
        value = await value
    return value


def raise_or(out: dict[str, Any]) -> dict[str, Any]:
    """A step's or activity's recorded outcome ``out``, unless it recorded a raise
    (``{"raise": text}``): then :class:`~agentcore_fsm.persist.codec.JournaledError`."""
    if "raise" in out:
        raise JournaledError(out["raise"])
    return out


def write_recording(
    record: RunSnapshot | dict[str, Any], path: str | os.PathLike[str], *, run_id: str
) -> None:
    """Write a durable run's record (header and entries: what a Temporal run's
    ``record_async`` returns) as a recording at ``path``: the run's record lines only, from
    which :func:`~agentcore_fsm.persist.recording.load_run`, replay and ``agentcore-fsm diagram
    --run`` derive its transitions and events, as for a run recorded in memory. A run that has
    not ended is written without its end (it reads as a run in flight). Raises
    :class:`~agentcore_fsm.persist.journal.JournalError` for a record that does not derive."""
    snapshot = RunSnapshot.model_validate(record) if isinstance(record, dict) else record
    end = derive_run(snapshot, run_id=run_id).machine.end_reason
    owner, lease = "write_recording", 60.0
    with RunRecorder(path) as recorder:
        store = recorder.store
        store.create_run(run_id, snapshot.header, session_id=None, owner=owner, lease_s=lease)
        for seq, entry in enumerate(snapshot.entries):
            store.append(run_id, seq, entry, owner=owner, lease_s=lease)
        if end is not None:
            store.finish(run_id, end, owner=owner)


# --- nested runs (docs/durable.md#nested-runs) -------------------------------------------------

NESTED_MARK = ">"
"""What joins an agent's name and its agent tool's name into the name of the durable agent of
that tool's nested runs: ``"desk>clerk"``."""


def nested_agents(agent: DurableAgent) -> list[DurableAgent]:
    """The durable agents of the nested runs that ``agent``'s agent tools start (and theirs, as
    deep as each tool's ``max_depth`` lets them nest): each named ``<agent>>``\\ ``<tool>``,
    with the inner agent's stream function, config, tools and system prompt as they are now.
    An engine's ``register`` registers them with ``agent``."""
    from agentcore_fsm.agent.nested import NestedAgentTool
    from agentcore_fsm.runtime.driver import resolve_stream_fn

    found: list[DurableAgent] = []

    def walk(name: str, tools: Sequence[AgentTool], depth: int) -> None:
        for tool in tools:
            if not isinstance(tool, NestedAgentTool) or tool.sub is None:
                continue
            if depth > tool.max_depth:
                continue  # a call this deep is refused (nested_call)
            config, system_prompt, inner_tools, stream_fn, _ = tool.sub.parts()
            inner = f"{name}{NESTED_MARK}{tool.name}"
            fn = resolve_stream_fn(stream_fn, config.model)
            found.append(DurableAgent(inner, fn, config, inner_tools, system_prompt))
            walk(inner, inner_tools, depth + 1)

    walk(agent.name, agent.tools, 1)
    return found


@dataclass(frozen=True)
class NestedCall:
    """A call of an agent tool in a durable run: the nested run's id, its durable agent, its
    prompts (encoded) and the path of agents down to it; or ``refused``, the call's error
    result (beyond the tool's ``max_depth``)."""

    run_id: str
    agent: str
    prompts: list[dict[str, Any]]
    agents: tuple[str, ...]
    refused: AgentToolResult | None = None


def nested_call(tool: Any, agent: str, run_id: str, call_id: str, args: Any) -> NestedCall:
    """The nested run the call ``call_id`` of the agent tool ``tool`` starts in the durable run
    ``run_id`` of the durable agent ``agent`` (called from the tool's execution: the run's
    transcript is read from its scope): its id, as a run journaled in a store names it
    (``<run id>/<n>.<call id>``), and the rest of :class:`NestedCall`."""
    from agentcore_fsm.agent.nested_record import child_id
    from agentcore_fsm.core.messages import TextContent, UserMessage
    from agentcore_fsm.core.nesting import depth_error_text
    from agentcore_fsm.core.run_context import current_scope
    from agentcore_fsm.persist.codec import encode_message

    scope = current_scope()
    messages = scope.machine.context.messages if scope and scope.machine else []

    inner = f"{agent}{NESTED_MARK}{tool.name}"
    agents = tuple(inner.split(NESTED_MARK)[1:])
    refused = None
    if len(agents) > tool.max_depth:
        text = depth_error_text(agents, tool.max_depth)
        refused = AgentToolResult(content=[TextContent(text=text)], is_error=True)
    prompts = [encode_message(UserMessage(content=tool.prompt_of(args)))]
    return NestedCall(child_id(run_id, messages, call_id), inner, prompts, agents, refused)
