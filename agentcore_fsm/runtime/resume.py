"""Journaling a run into a run store, and resuming it after a crash.

``run_agent_loop(..., store=, run_id=)`` journals a run as it goes (see
:mod:`agentcore_fsm.persist.journal` for what an entry holds): the entries of the inputs the
machine takes are written to the store in order, grouped, where it matters: before a tool that
is not idempotent starts (every entry that led to it), before a model call or a tool starts
(every model answer and tool result before it), and at the run's end
(docs/survive.md#what-is-durable-when).

:func:`resume_run` continues a run that did not finish (its process died, or was killed):

1. it takes the run's lease in the store (a run is resumed by one process at a time; the lease
   of a process that died on this host is taken over at once, another host's when it expires);
2. it rebuilds the machine from the journal, given the tools and the config's callables again;
3. it performs again what was in flight: a model call is made again (its partial answer is
   lost); a tool whose result was journaled is never run again; a tool that had started but
   whose result was not journaled runs again only if it says it is safe to
   (``AgentTool(idempotent=True)``), otherwise it gets an error result saying it was
   interrupted; an agent used as a tool runs again and resumes its nested run from that run's
   own record (docs/multi-agent.md#runs-that-survive); polls and hooks in flight are called
   again;
4. it continues live, journaling, and returns the run's new messages (all of them, from before
   the crash too), like ``run_agent_loop``: through the same entry
   (:func:`~agentcore_fsm.runtime.driver.run_machine`), so a resumed run has its observers and
   is traced like a fresh one.

What listeners see on resume: the events from the resume point on; with ``history=True``, first
the events of every journaled step (regenerated from the journal: the same events, except that
a model answer's deltas are not repeated). Either way, the events of the journaled steps
followed by the resumed events form one well-formed run
(``agentcore_fsm.devtools.testing.check_run`` accepts them). Events a listener got after the
last journaled step are superseded: the resumed run starts again from there (an answer that was
in flight is asked for again; a tool whose result was not written yet runs again when it is
idempotent, or is answered as interrupted).

An abort outlives the process: when the journal shows that the run's abort signal had fired
(an ``abort`` entry, or an outcome taken after it fired: ``"aborted": true``), the resumed run
starts with its signal fired, and ends as the run that was not cut would have (aborted). A run
can be cut between the outcome of a tool that fired the abort (or that finished after someone
did) and the ``abort`` entry that follows it; without this, the resumed run, given a fresh
signal, would go on with the next turn as if nobody had aborted. The signal the tools and hooks
of such a run receive is then the run's own, fired, one; ``signal`` (if given) still fires it
with its reason. (The reason the crashed process's signal was fired with is not journaled: the
resumed run's is None.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio

from agentcore_fsm.core.abort import AbortController, AbortSignal
from agentcore_fsm.core.config import AgentLoopConfig, StreamFn
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.messages import AgentMessage, now_ms
from agentcore_fsm.core.protocol import ExecuteTool, Start, Step, ToolFinished
from agentcore_fsm.core.run_context import own_scope
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.persist.journal import JournaledLoopMachine, RunSnapshot, pending_effects
from agentcore_fsm.persist.run_journal import DEFAULT_LEASE_S, StoreJournal
from agentcore_fsm.persist.store import RunStore
from agentcore_fsm.runtime.driver import resolve_stream_fn, run_machine
from agentcore_fsm.runtime.observer import RunObserver, select_observers

__all__ = [
    "DEFAULT_LEASE_S",
    "INTERRUPTED_TEXT",
    "StoreJournal",
    "ToolInterrupted",
    "abort_journaled",
    "load_run_state",
    "resume_run",
]

INTERRUPTED_TEXT = (
    'Tool "{name}" was interrupted: the process running it stopped before it finished, and it '
    "was not run again because it is not marked idempotent (AgentTool(idempotent=True))."
)


class ToolInterrupted(Exception):
    """The error of a tool call that was running when its run's process stopped."""


def _snapshot(stored: Any) -> RunSnapshot:
    return RunSnapshot.of(stored.header, stored.entries)


def abort_journaled(entries: Sequence[dict[str, Any]]) -> bool:
    """Whether the run's abort signal had fired in the process that journaled ``entries``: an
    ``abort`` entry, or an outcome taken after it fired (``"aborted": true``)."""
    return any(e.get("input") == "abort" or e.get("aborted") is True for e in entries)


def _fired_signal(signal: AbortSignal | None) -> tuple[AbortSignal, Callable[[], None]]:
    """A signal that has fired, for a run whose journal says it was aborted, fired again with
    ``signal``'s reason when ``signal`` fires; and the function that unlinks them."""
    controller = AbortController()
    remove: Callable[[], None] = lambda: None  # noqa: E731
    if signal is not None:
        remove = signal.add_callback(lambda: controller.abort(signal.reason))
    controller.abort()
    return controller.signal, remove


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
    instrument: bool | RunObserver | None = None,
    observers: Sequence[RunObserver] | None = None,
) -> list[AgentMessage]:
    """Continue the journaled run ``run_id`` from ``store`` (see the module's documentation);
    return the run's new messages. ``config`` and ``tools`` give again what a journal cannot
    hold (the same hooks must be configured); ``emit``, ``signal``, ``stream_fn``,
    ``instrument`` and ``observers`` are as for ``run_agent_loop``; ``history=True`` delivers
    the journaled steps' events first.

    Raises :class:`~agentcore_fsm.persist.store.UnknownRunError` for an unknown id,
    :class:`~agentcore_fsm.persist.store.RunOwnedError` while another live process holds the run,
    :class:`~agentcore_fsm.persist.store.RunStoreError` for a run that has finished, and
    :class:`~agentcore_fsm.persist.journal.JournalError` for a journal that does not fit (another
    declaration, missing tools, different hooks) — each naming the run."""
    chosen = select_observers(instrument, observers)
    journal, stored = await StoreJournal.take_over(store, run_id, lease_s=lease_s)
    try:
        machine, steps = JournaledLoopMachine.restore(
            _snapshot(stored), config, tools=tools, run_id=run_id, on_transition=on_transition
        )
        events: list[Any] = [e for s in steps for e in s.events] if history else []
        transitions: list[TransitionRecord] = []  # taken here: the driver reports them
        if not machine.entries:  # stopped before its start was journaled: start it now
            step = machine.feed(Start(timestamp=now_ms()))
            events += step.events
            transitions += step.transitions
            effects = list(step.effects)
        else:
            effects = pending_effects(machine)
        # a tool that was running and cannot safely run twice is answered as interrupted (an
        # agent as a tool runs again: it resumes its nested run from that run's own record)
        for effect in list(effects):
            if isinstance(effect, ExecuteTool) and not _runs_again(effect.tool):
                effects.remove(effect)
                error = ToolInterrupted(INTERRUPTED_TEXT.format(name=effect.tool.name))
                step = machine.feed(ToolFinished(effect.index, error=error, timestamp=now_ms()))
                events += step.events
                transitions += step.transitions
                effects += step.effects
        first = Step(events, effects, machine.state != "streaming", machine.finished, transitions)
        fn = resolve_stream_fn(stream_fn, machine.config.model)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await journal.close(len(stored.entries), [], None)  # give the lease back
        raise
    unlink: Callable[[], None] = lambda: None  # noqa: E731
    if abort_journaled(stored.entries):  # aborted before the crash: still aborted
        signal, unlink = _fired_signal(signal)
    try:
        with own_scope():
            return await run_machine(
                machine,
                first=first,
                journal=journal,
                stream_fn=fn,
                emit=emit,
                signal=signal,
                observers=chosen,
                run_id=run_id,
                resumed=True,
                on_transition=on_transition,
            )
    finally:
        unlink()


def _runs_again(tool: Any) -> bool:
    """Whether a tool that was running when the process stopped is run again on resume: an
    idempotent one, or one that resumes what it started (``resumes_nested``: an agent as a
    tool, whose nested run has its own record)."""
    return bool(getattr(tool, "idempotent", False) or getattr(tool, "resumes_nested", False))
