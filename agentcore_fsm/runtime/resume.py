"""Journaling a run into a run store, and resuming it after a crash.

``run_agent_loop(..., store=, run_id=)`` journals a run as it goes (see
:mod:`agentcore_fsm.persist.journal` for what an entry holds): each input the machine takes is
appended
to the store in one transaction *before* the events of its step are delivered, so what a
listener has seen is always covered by the journal, up to the step in progress.

:func:`resume_run` continues a run that did not finish (its process died, or was killed):

1. it takes the run's lease in the store (a run is resumed by one process at a time; the lease
   of a process that died on this host is taken over at once, another host's when it expires);
2. it rebuilds the machine from the journal, given the tools and the config's callables again;
3. it performs again what was in flight: a model call is made again (its partial answer is
   lost); a tool whose result was journaled is never run again; a tool that had started but
   whose result was not journaled runs again only if it says it is safe to
   (``AgentTool(idempotent=True)``), otherwise it gets an error result saying it was
   interrupted; polls and hooks in flight are called again;
4. it continues live, journaling, and returns the run's new messages (all of them, from before
   the crash too), like ``run_agent_loop``.

What listeners see on resume: the events from the resume point on; with ``history=True``, first
the events of every journaled step (regenerated from the journal: the same events, except that
a model answer's deltas are not repeated). Either way, the events of the journaled steps
followed by the resumed events form one well-formed run
(``agentcore_fsm.devtools.testing.check_run``
accepts them). Events a listener got after the last journaled step (the beginning of an answer
that was in flight) are superseded: the resumed run starts that answer again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentcore_fsm.core.abort import AbortController, AbortSignal
from agentcore_fsm.core.approval import RunSuspended
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, StreamFn
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import AgentMessage
from agentcore_fsm.core.protocol import ExecuteTool, Start, Step, ToolFinished
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.persist.journal import JournaledLoopMachine, RunSnapshot, pending_effects
from agentcore_fsm.persist.store import RunFinishedError, RunStore, default_owner

__all__ = ["INTERRUPTED_TEXT", "StoreJournal", "ToolInterrupted", "load_run_state", "resume_run"]

INTERRUPTED_TEXT = (
    'Tool "{name}" was interrupted: the process running it stopped before it finished, and it '
    "was not run again because it is not marked idempotent (AgentTool(idempotent=True))."
)

DEFAULT_LEASE_S = 30.0


class ToolInterrupted(Exception):
    """The error of a tool call that was running when its run's process stopped."""


class StoreJournal:
    """Appends a run's journal entries to a store (made by ``run_agent_loop(store=...)``)."""

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        session_id: str | None,
        *,
        owner: str | None = None,
        lease_s: float = DEFAULT_LEASE_S,
        seq: int = 0,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.session_id = session_id
        self.owner = owner or default_owner()
        self.lease_s = lease_s
        self.seq = seq

    def machine(
        self,
        prompts: list[AgentMessage],
        context: AgentContext,
        config: AgentLoopConfig,
        on_transition: Callable[[TransitionRecord], None] | None,
        continuing: bool,
    ) -> JournaledLoopMachine:
        """A new journaled machine for the run, the run created in the store."""
        machine = JournaledLoopMachine(
            prompts,
            context,
            config,
            on_transition=on_transition,
            continuing=continuing,
            on_entry=self.append,
        )
        self.store.create_run(
            self.run_id,
            machine.header,
            session_id=self.session_id,
            owner=self.owner,
            lease_s=self.lease_s,
        )
        return machine

    def append(self, entry: dict[str, Any]) -> None:
        self.store.append(self.run_id, self.seq, entry, owner=self.owner, lease_s=self.lease_s)
        self.seq += 1

    def close(self, machine: LoopMachine) -> None:
        """Mark the run finished (it reached ``stopped``), or give up its lease."""
        if machine.finished and machine.end_reason is not None:
            self.store.finish(self.run_id, machine.end_reason, owner=self.owner)
        else:
            self.store.release(self.run_id, self.owner)


def _snapshot(stored: Any) -> RunSnapshot:
    header = stored.header
    return RunSnapshot(
        format=header.get("format", 0),
        declaration=header.get("declaration", ""),
        declaration_hash=header.get("declaration_hash", ""),
        header=header,
        entries=stored.entries,
    )


def load_run_state(
    store: RunStore,
    run_id: str,
    config: AgentLoopConfig,
    *,
    tools: Sequence[AgentTool] = (),
) -> tuple[JournaledLoopMachine, list[Step]]:
    """The machine of a stored run rebuilt from its journal, and the steps of the journal (for
    reading a run: its transcript is ``machine.context.messages``, its state ``machine.state``).
    Nothing is performed and the store is not changed."""
    stored = store.load(run_id)
    return JournaledLoopMachine.restore(_snapshot(stored), config, tools=tools, run_id=run_id)


async def resume_run(
    run_id: str,
    store: RunStore,
    config: AgentLoopConfig,
    emit: Callable[[Any], Any] | None = None,
    *,
    tools: Sequence[AgentTool] = (),
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    history: bool = False,
    on_transition: Callable[[TransitionRecord], None] | None = None,
    lease_s: float = DEFAULT_LEASE_S,
) -> list[AgentMessage]:
    """Continue the journaled run ``run_id`` from ``store`` (see the module's documentation);
    return the run's new messages. ``config`` and ``tools`` give again what a journal cannot
    hold (the same hooks must be configured); ``emit``, ``signal`` and ``stream_fn`` are as for
    ``run_agent_loop``; ``history=True`` delivers the journaled steps' events first.

    Raises :class:`~agentcore_fsm.persist.store.UnknownRunError` for an unknown id,
    :class:`~agentcore_fsm.persist.store.RunOwnedError` while another live process holds the run,
    :class:`~agentcore_fsm.persist.store.RunStoreError` for a run that has finished, and
    :class:`~agentcore_fsm.persist.journal.JournalError` for a journal that does not fit (another
    declaration, missing tools, different hooks) — each naming the run."""
    from agentcore_fsm.runtime.driver import _Driver, _resolve_stream_fn

    stored = store.load(run_id)
    if stored.status == "finished":
        raise RunFinishedError(
            f"run {run_id!r} has finished ({stored.end_reason}); there is nothing to resume"
        )
    journal = StoreJournal(store, run_id, stored.session_id, lease_s=lease_s)
    store.acquire(run_id, journal.owner, lease_s=lease_s)
    machine: JournaledLoopMachine | None = None
    try:
        machine, steps = JournaledLoopMachine.restore(
            _snapshot(stored), config, tools=tools, run_id=run_id, on_transition=on_transition
        )
        journal.seq = len(machine.entries)
        machine.on_entry = journal.append
        events: list[Any] = [e for s in steps for e in s.events] if history else []
        if not machine.entries:  # stopped before its start was journaled: start it now
            step = machine.feed(Start())
            events += step.events
            effects = list(step.effects)
        else:
            effects = pending_effects(machine)
        # a tool that was running and cannot safely run twice is answered as interrupted
        for effect in list(effects):
            if isinstance(effect, ExecuteTool) and not getattr(effect.tool, "idempotent", False):
                effects.remove(effect)
                error = ToolInterrupted(INTERRUPTED_TEXT.format(name=effect.tool.name))
                step = machine.feed(ToolFinished(effect.index, error=error))
                events += step.events
                effects += step.effects
        first = Step(events, effects, machine.state != "streaming", machine.finished)
        fn = _resolve_stream_fn(stream_fn)
        if signal is None:
            signal = AbortController().signal
        driver = _Driver(machine, fn, emit, signal)
        driver.suspendable = True
        await driver.run(first)
    finally:
        if machine is not None:
            journal.close(machine)
        else:
            store.release(run_id, journal.owner)
    if driver.suspended is not None:
        raise RunSuspended(run_id, driver.suspended, machine.new_messages)
    return machine.new_messages
