"""Generated runs of the ``Agent`` class (docs/reference.md#the-agent), on both backends.

A scenario is a model script and tools (the same generators as the loop properties), a few
prompts run one after another, and listener actions fired at the n-th event a listener receives:
steer, follow up, abort, or raise. Two recording listeners (the first and the last subscribed)
must each see a well-formed run every time, and after every run the agent's state must be what
the events say (docs/reference.md#agent-state: the transcript grows only by ``message_end``; nothing
is left streaming
or pending; a failed or aborted run leaves an ``error_message``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prop_scenarios import (
    MODEL,
    SYSTEM,
    Harness,
    Scenario,
    response_plans,
)

from agentcore_fsm import Agent, UserMessage
from agentcore_fsm.devtools.testing import (
    EventRecorder,
    check_model_contexts,
    check_run,
    sequential_tool_names,
)

BACKENDS = ["trio", "asyncio"]


@dataclass(frozen=True)
class Action:
    at: int  # the n-th event the acting listener receives (counted over all runs)
    kind: str  # steer | follow_up | abort | raise


@dataclass(frozen=True)
class AgentScenario:
    loop: Scenario
    prompts: int
    actions: tuple[Action, ...]
    continue_at_end: bool


@st.composite
def agent_scenarios(draw: st.DrawFn) -> AgentScenario:
    responses = tuple(draw(st.lists(response_plans(odd_streams=False), min_size=1, max_size=5)))
    loop = Scenario(
        responses=responses,
        mode=draw(st.sampled_from(["parallel", "sequential"])),
        with_before=draw(st.booleans()),
        with_after=draw(st.booleans()),
        async_hooks=draw(st.booleans()),
    )
    actions = draw(
        st.lists(
            st.builds(
                Action,
                at=st.integers(0, 80),
                kind=st.sampled_from(
                    ["steer", "steer", "follow_up", "follow_up", "abort", "raise"]
                ),
            ),
            max_size=4,
        )
    )
    return AgentScenario(loop, draw(st.integers(1, 3)), tuple(actions), draw(st.booleans()))


class ListenerFailure(RuntimeError):
    pass


async def run_agent(sc: AgentScenario) -> None:
    h = Harness(sc.loop)
    agent = Agent(
        system_prompt=SYSTEM,
        model=MODEL,
        tools=h.tools,
        stream_fn=h.stream_fn,
        before_tool_call=h._hook(h.before_tool_call) if sc.loop.with_before else None,
        after_tool_call=h._hook(h.after_tool_call) if sc.loop.with_after else None,
        tool_execution=sc.loop.mode,  # type: ignore[arg-type]
    )

    class AgentAbort:  # tools and hooks that abort go through the agent
        def abort(self, reason: Any = None) -> None:
            agent.abort()

    h.controller = AgentAbort()  # type: ignore[assignment]
    first, last = EventRecorder(), EventRecorder()
    seen = 0
    queued: list[Any] = []

    def actor(event: Any, signal: Any) -> None:
        nonlocal seen
        if event.type == "agent_start":
            h.signal = signal  # the run's signal: what hooks and tools must watch
        h.on_event(event)
        n, seen = seen, seen + 1
        for action in sc.actions:
            if action.at != n:
                continue
            if action.kind in ("steer", "follow_up"):
                message = UserMessage(content=f"{action.kind} at {n}")
                queued.append(message)
                getattr(agent, action.kind)(message)
            elif action.kind == "abort":
                agent.abort()
            else:
                raise ListenerFailure(f"listener raised at event {n}")

    agent.subscribe(first)
    agent.subscribe(actor)
    agent.subscribe(last)
    runs: list[tuple[str, Any]] = [("prompt", i) for i in range(sc.prompts)]
    if sc.continue_at_end:
        runs.append(("continue", None))
    for kind, i in runs:
        before = list(agent.state.messages)
        first.clear()
        last.clear()
        h.events.clear()
        h.created.clear()
        if kind == "prompt":
            messages = await agent.prompt(f"prompt {i}")
        else:
            try:
                messages = await agent.continue_()
            except ValueError:  # nothing to continue from: not a run
                # (docs/reference.md#prompting-and-continuing)
                assert not first.events and not last.events
                continue
        for recorder in (first, last):
            summary = check_run(
                recorder.events,
                messages,
                tool_execution=sc.loop.mode,  # type: ignore[arg-type]
                sequential_tools=sequential_tool_names(h.tools),
            )
        assert first.types() == last.types()
        state = agent.state
        assert state.messages == [*before, *messages]
        assert not state.is_streaming and state.streaming_message is None
        assert not state.pending_tool_calls and not agent.is_busy
        if summary.reason in ("error", "aborted"):
            assert state.error_message, summary.reason
    check_model_contexts(c.context for c in h.model_calls)
    assert not h.problems, h.problems
    transcript = agent.state.messages
    for message in queued:
        count = sum(1 for m in transcript if m is message)
        assert count <= 1, f"{message.content} injected {count} times"
        if count == 0:
            assert agent.has_queued_messages(), f"{message.content} was lost"


@pytest.mark.parametrize("backend", BACKENDS)
@given(sc=agent_scenarios())
def test_agent_runs_keep_the_grammar_for_every_listener(backend: str, sc: AgentScenario) -> None:
    logger = logging.getLogger("agentcore_fsm")
    logger.disabled = True  # raising listeners are logged by design
    try:
        anyio.run(run_agent, sc, backend=backend)
    finally:
        logger.disabled = False
