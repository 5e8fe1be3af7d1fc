"""The driver's side of nested runs (docs/multi-agent.md): what a run tells the tools that may
start a nested run, and the check of their configuration when the run starts.

:func:`enter_run` is called once per run, before its first input: it gives the run's scope
(:class:`~agentcore_fsm.core.run_context.RunScope`) the run's config, which a nested run reads
for the outer run's approver and limits, its machine and its journal (a nested run of a run
journaled in a run store is journaled in that store, docs/multi-agent.md#runs-that-survive), and
asks every tool of the run that starts nested runs (a tool with a ``check_nested`` method: an
agent as a tool) to check its inner configuration now, so that an inner agent without a model,
or with a broken tool, is reported when the outer run starts rather than when the model first
calls it. A run whose tools start no nested run pays one context-variable read, four attribute
writes and one attribute look-up per tool.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.run_context import current_scope

__all__ = ["enter_run"]


def enter_run(
    machine: LoopMachine, journal: object = None, observers: Sequence[object] | None = None
) -> None:
    """Note the run's config, machine, journal and observers in its scope (a nested run is
    observed by its outer run's observers: traced in the same trace) and check the inner
    configuration of its tools that start nested runs. Raises ``ValueError`` (from the tool's
    check) naming the path of agents and what is wrong, before anything of the run happened."""
    scope = current_scope()
    if scope is not None:
        scope.config = machine.config
        scope.machine = machine
        scope.journal = journal
        scope.observers = observers
    for tool in machine.context.tools:
        check = getattr(tool, "check_nested", None)
        if check is not None:
            check()
