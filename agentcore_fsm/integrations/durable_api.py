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

import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentcore_fsm.core.approval import ApprovalDecision
from agentcore_fsm.core.config import AgentLoopConfig, StreamFn
from agentcore_fsm.core.messages import AgentMessage
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.persist.journal import RunSnapshot, derive_run
from agentcore_fsm.persist.recorder import RunRecorder

__all__ = ["DurableAgent", "DurableEngine", "write_recording"]


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
