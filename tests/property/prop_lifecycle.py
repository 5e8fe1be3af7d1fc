"""Agent lifecycle runs (``states/agent.toml``): what an Agent's lifecycle must look like from
outside, over three runs of one agent.

1. A plain run: every listener sees the agent ``running`` and busy (``reset()`` is refused with
   :class:`AgentBusyError`); it ends ``completed``; the agent is then idle.
2. A run a listener aborts at its first ``turn_start``: from ``abort()`` on the agent reads
   ``aborting`` and stays busy (a second ``abort()`` changes nothing) until the run ends
   ``aborted``; the agent is then idle.
3. A plain run again: an idle agent starts a new run.

After each run ``lifecycle_history`` holds that run's transitions only: one ``start``, an
``abort`` if it was aborted, one ``finish``. ``decl`` runs another lifecycle declaration (a
mutant); ``record`` reports the transitions to ``prop_coverage``.
"""

from __future__ import annotations

import logging
from typing import Any

from prop_coverage import record_lifecycle

from agentcore_fsm import Agent, Model
from agentcore_fsm.agent.agent import AgentBusyError
from agentcore_fsm.core.declaration import Declaration
from agentcore_fsm.devtools.testing import FauxProvider, faux_response

MODEL = Model(id="m", provider="p", api="a")


def lifecycle_runs(decl: Declaration | None = None, *, record: bool = False) -> None:
    """The three runs above; AssertionError (or what the agent raised) if one goes wrong."""
    faux = FauxProvider([faux_response("one"), faux_response("two"), faux_response("three")])
    agent = Agent(model=MODEL, stream_fn=faux)
    if decl is not None:
        assert hasattr(agent, "_lifecycle"), "Agent no longer keeps its lifecycle"
        agent._lifecycle.declaration = decl
    seen: list[tuple[str, str, bool]] = []
    reasons: list[str] = []
    abort_at_turn_start = False

    def listener(event: Any, signal: Any) -> None:
        seen.append((event.type, agent.lifecycle_state, agent.is_busy))
        if event.type == "agent_end":
            reasons.append(event.reason)
        if event.type == "agent_start":
            try:
                agent.reset()
            except AgentBusyError:
                seen.append(("reset refused", agent.lifecycle_state, agent.is_busy))
        if event.type == "turn_start" and abort_at_turn_start:
            agent.abort()
            seen.append(("abort()", agent.lifecycle_state, agent.is_busy))
            agent.abort()
            seen.append(("abort() again", agent.lifecycle_state, agent.is_busy))

    agent.subscribe(listener)
    logger = logging.getLogger("agentcore_fsm")
    for run, aborted in enumerate((False, True, False)):
        seen.clear()
        reasons.clear()
        abort_at_turn_start = aborted
        assert agent.lifecycle_state == "idle" and not agent.is_busy, f"run {run}: not idle"
        logger.disabled = True  # a broken lifecycle may make listeners raise: they are logged
        try:
            agent.prompt_sync(f"run {run}")
        finally:
            logger.disabled = False
        if record:
            record_lifecycle(agent.lifecycle_history)
        assert ("reset refused", "running", True) in seen, f"run {run}: {seen}"
        assert reasons == ["aborted" if aborted else "completed"], f"run {run}: {reasons}"
        if aborted:
            labels = [label for label, *_ in seen]
            assert "abort()" in labels, f"run {run}: the listener never aborted: {seen}"
            cut = labels.index("abort()")
            assert seen[cut] == ("abort()", "aborting", True), seen
            assert seen[cut + 1] == ("abort() again", "aborting", True), seen
            assert {(state, busy) for _, state, busy in seen[:cut]} == {("running", True)}
            assert {(state, busy) for _, state, busy in seen[cut:]} == {("aborting", True)}
        else:
            assert {(state, busy) for _, state, busy in seen} == {("running", True)}, seen
        assert agent.lifecycle_state == "idle" and not agent.is_busy, f"run {run}: still busy"
        triggers = [r.trigger for r in agent.lifecycle_history]
        assert triggers == ["start", *(["abort"] if aborted else []), "finish"], triggers
