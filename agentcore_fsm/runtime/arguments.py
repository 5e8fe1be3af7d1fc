"""The argument checks of the public run functions (``run_agent_loop``, ``agent_loop`` and
their ``_continue`` forms): made before anything else, so that a value of the wrong type is
refused with a :class:`TypeError` naming the function, the argument and what it expected
(``run_agent_loop: context must be an AgentContext, not str ('a string')``) instead of an
``AttributeError`` from deep inside a run. The checks use :mod:`agentcore_fsm.core.checks`,
as configuration objects do; they run once per call, never per input.
"""

from __future__ import annotations

from typing import Any

from agentcore_fsm.core import checks
from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig

__all__ = ["check_run_arguments"]

_CONTEXT = checks.instance(AgentContext, "an AgentContext")
_CONFIG = checks.instance(AgentLoopConfig, "an AgentLoopConfig")
_SIGNAL = checks.instance_or_none(AbortSignal, "an AbortSignal (AbortController().signal)")


def check_run_arguments(
    where: str,
    context: Any,
    config: Any,
    *,
    emit: Any = None,
    signal: Any = None,
    stream_fn: Any = None,
    on_transition: Any = None,
) -> None:
    """Refuse an argument of the wrong type, naming ``where`` (the function) and the argument:
    ``context`` an :class:`AgentContext`, ``config`` an :class:`AgentLoopConfig`, ``signal``
    an :class:`AbortSignal` or None, ``emit``, ``stream_fn`` and ``on_transition`` callables
    or None. The prompts are checked by the run itself (each item is named)."""
    _CONTEXT(where, "context", context)
    _CONFIG(where, "config", config)
    checks.callable_or_none(where, "emit", emit)
    _SIGNAL(where, "signal", signal)
    checks.callable_or_none(where, "stream_fn", stream_fn)
    checks.callable_or_none(where, "on_transition", on_transition)
