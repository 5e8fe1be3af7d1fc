"""The agent's lifecycle: the declared machine ``states/agent.toml`` (``idle`` → ``running`` →
``aborting`` → ``finished``), run by the same declared-machine engine as the loop.

Whether a run is active is not a flag: it is this machine's state. Each run of the agent is one
run of the machine, made when the run starts and dropped when it has finished, so an idle agent
holds none.
"""

from __future__ import annotations

from agentcore_fsm.core.declaration import Declaration, load_declaration
from agentcore_fsm.core.declared import DeclaredMachine, MachineInputError, TransitionRecord
from agentcore_fsm.core.machine import MachineError

__all__ = ["Lifecycle"]


class _LifecycleRun(DeclaredMachine):
    """One run of the declared lifecycle (``states/agent.toml``): it declares no guards, emit
    actions or effects, so the engine only changes its state and records the transitions."""

    declaration_name = "agent"


class Lifecycle:
    """Steps the declared lifecycle for one agent, one run at a time. An agent with no run
    active is ``idle`` and holds no machine."""

    __slots__ = ("_run", "declaration", "history")

    def __init__(self) -> None:
        self.declaration: Declaration = load_declaration("agent")
        self._run: _LifecycleRun | None = None
        self.history: list[TransitionRecord] = []

    @property
    def state(self) -> str:
        run = self._run
        return run.state if run is not None else self.declaration.initial

    @property
    def idle(self) -> bool:
        """True when no run is active."""
        return self._run is None

    def accepts(self, trigger: str) -> bool:
        return bool(self.declaration.transitions_from(self.state, trigger))

    def fire(self, trigger: str) -> None:
        """Feed ``trigger`` (``start``, ``abort``, ``finish``); one the state does not accept
        raises :class:`~agentcore_fsm.core.declared.MachineInputError`."""
        run = self._run
        if run is None:
            if trigger != "start":
                raise MachineError(f"lifecycle input {trigger!r} with no run active")
            run = self._run = _LifecycleRun(self.declaration)
            self.history = run.history
        if not run.accepts(trigger):
            raise MachineInputError(trigger, run.state, run.accepted_inputs())
        run.fire(trigger)
        if run.finished:
            self._run = None
