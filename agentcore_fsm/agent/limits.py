"""An Agent's usage limits: for the session (``Agent(limits=...)``, ``agent.state.limits``) and
for one prompt (``agent.prompt(..., limits=...)``); see docs/policies.md#an-agents-limits.

Every run of an agent with limits starts its counters from the session's usage so far
(``agent.state.usage``, :class:`~agentcore_fsm.core.limits.RunUsage`, given to the run as its
limits' ``used_before``), and its ``agent_end`` carries them back, so the session's counters
are the last run's. The session's limits therefore bound all its runs together; a prompt's
limits bound that prompt's run alone: each of them is moved up by the session's usage so far,
and the run gets the tighter of the two for each limit. A session whose budget is used up still
runs a prompt, which ends at once with ``agent_end(reason="limit")`` (its first check, before
any model request, sees the budget used up): the prompt is in the transcript and the listeners
hear why nothing else happened. ``seconds`` is never carried over: a session has no clock of its
own, so the session's ``seconds`` bounds each run, as a prompt's does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentcore_fsm.core.limits import LIMIT_NAMES, RunUsage, UsageLimits

__all__ = ["UsageLimits", "check_limits", "run_limits"]


def check_limits(where: str, value: Any) -> UsageLimits | None:
    """``value`` if it is a :class:`UsageLimits` or None, else ``TypeError`` naming ``where``."""
    if value is not None and not isinstance(value, UsageLimits):
        raise TypeError(f"{where} must be a UsageLimits or None, not {type(value).__name__}")
    return value


def run_limits(
    session: UsageLimits | None, prompt: UsageLimits | None, used: RunUsage
) -> UsageLimits | None:
    """The limits of one run of a session that has used ``used`` so far: the session's
    ``session`` and the prompt's ``prompt`` (None: none) combined as the module docstring says;
    None when there are neither."""
    check_limits("limits", prompt)
    if session is None and prompt is None:
        return None
    shifted: UsageLimits | None = None
    if prompt is not None:
        figures = used.figures()
        moved: dict[str, Any] = {}
        for name in LIMIT_NAMES:
            limit = getattr(prompt, name)
            moved[name] = limit if limit is None or name == "seconds" else limit + figures[name]
        shifted = replace(prompt, **moved)
    if session is None:
        combined = shifted
    else:
        combined = session.tighter(shifted) if shifted is not None else session
    assert combined is not None
    return replace(combined, used_before=used)
