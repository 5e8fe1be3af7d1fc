"""An agent's stored session: reading it from a run store, and holding it as its one writer.

A session is the runs a store keeps under one session id; its transcript is the transcript of
its last run. :func:`read_session` reads it. A session has one writer at a time: before each run
an agent takes the session's lease in the store (:class:`SessionLease`, on
:meth:`~agentcore_fsm.persist.store.RunStore.acquire_session`) and releases it when the run ends,
so a second agent on the same store and session id — in this process or another one — is
refused with :class:`~agentcore_fsm.persist.store.SessionBusyError` naming the session and the
holder, or waits for the first one when it was made with ``session_wait_s``. See
docs/survive.md#one-writer-per-session.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.approval import ApprovalRequest
from agentcore_fsm.core.config import AgentLoopConfig
from agentcore_fsm.core.messages import AgentMessage
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.persist.store import RunStore, SessionBusyError, default_owner
from agentcore_fsm.persist.store_rules import local_pid
from agentcore_fsm.runtime.resume import load_run_state

__all__ = [
    "DEFAULT_SESSION_LEASE_S",
    "SessionLease",
    "StoredSession",
    "free_ended_run",
    "read_session",
]

DEFAULT_SESSION_LEASE_S = 300.0
"""How long a session's lease lasts without renewal. It only matters for a writer on another
host (a live process of this host keeps its lease however old); an agent renews it at each turn
once a third of it has passed."""

_FIRST_POLL_S = 0.01
_LAST_POLL_S = 0.25


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A session as a store holds it: its last run, the transcript of that run, and whether it
    finished (when it did not, the calls it waits for approval of)."""

    last_run: str | None
    messages: list[AgentMessage] = field(default_factory=list)
    finished: bool = True
    pending_approvals: list[ApprovalRequest] = field(default_factory=list)


def read_session(
    store: RunStore, session_id: str, config: AgentLoopConfig, tools: Sequence[AgentTool]
) -> StoredSession:
    """The session ``session_id`` of ``store`` (no runs: ``last_run`` is None)."""
    runs = store.runs(session_id)
    if not runs:
        return StoredSession(None)
    last = runs[-1]
    machine, steps = load_run_state(store, last.run_id, config, tools=tools)
    finished = last.status == "finished"
    messages = list(machine.context.messages)
    if not finished and not steps:
        # created, never started (nothing journaled): its prompts are not part of the session
        # yet — resuming it starts it, and delivers them then
        messages = messages[: len(messages) - len(machine.new_messages)]
    return StoredSession(
        last.run_id,
        messages,
        finished,
        [] if finished else machine.pending_approvals,
    )


def free_ended_run(store: RunStore, run_id: str) -> None:
    """Give back the lease that run ``run_id``, which ended in this process, still holds in the
    store: its journal could not (the store failed, or hung past its bound, when the run ended),
    and a lease of a live process of this host is never taken over, so without this the run
    could not be resumed while the process lives. Only a lease of this process is given back;
    a run that finished, or that nobody holds, is left as it is."""
    stored = store.load(run_id)
    owner = stored.owner
    if stored.status == "running" and owner is not None and local_pid(owner) == os.getpid():
        store.release(run_id, owner)


class SessionLease:
    """One agent's hold on its session in a store: :meth:`acquire` before a run,
    :meth:`renew` as it goes, :meth:`release` when it ends. ``owner`` names the agent in the
    store (``HOST:PID:NONCE``, one per agent, so two agents of one process are two writers)."""

    __slots__ = ("_renewed", "lease_s", "owner", "session_id", "store")

    def __init__(
        self, store: RunStore, owner: str | None = None, lease_s: float = DEFAULT_SESSION_LEASE_S
    ) -> None:
        self.store = store
        self.lease_s = lease_s
        self.owner = owner if owner is not None else default_owner()
        self.session_id: str | None = None  # while held
        self._renewed = 0.0

    async def acquire(
        self, session_id: str, wait_s: float | None, signal: AbortSignal | None = None
    ) -> None:
        """Take the session's lease. Held by another writer: with ``wait_s`` 0, raise
        :class:`~agentcore_fsm.persist.store.SessionBusyError` at once; else try again until it
        is free, for at most ``wait_s`` seconds (None: as long as it takes), then raise it.
        Waiting stops (raising it) once ``signal`` has fired."""
        deadline = None if wait_s is None else anyio.current_time() + wait_s
        pause = _FIRST_POLL_S
        while True:
            try:
                self.store.acquire_session(session_id, self.owner, lease_s=self.lease_s)
            except SessionBusyError:
                now = anyio.current_time()
                if (deadline is not None and now >= deadline) or (
                    signal is not None and signal.aborted
                ):
                    raise
                await anyio.sleep(pause if deadline is None else min(pause, deadline - now))
                pause = min(pause * 2, _LAST_POLL_S)
                continue
            self.session_id = session_id
            self._renewed = time.monotonic()
            return

    def renew(self) -> None:
        """Renew the lease when a third of it has passed (a no-op otherwise, or when not held)."""
        session_id = self.session_id
        if session_id is None or time.monotonic() - self._renewed < self.lease_s / 3:
            return
        self.store.acquire_session(session_id, self.owner, lease_s=self.lease_s)
        self._renewed = time.monotonic()

    def release(self) -> None:
        """Give the session up (a no-op when not held)."""
        session_id, self.session_id = self.session_id, None
        if session_id is not None:
            self.store.release_session(session_id, self.owner)
