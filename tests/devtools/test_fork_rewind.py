"""Agent.rewind: the session goes back to an earlier user turn, as a fork goes back to a step;
the next prompt goes on from there, in memory and in a store."""

from __future__ import annotations

from typing import Any

import pytest

from agentcore_fsm import Agent, MemoryRunStore, Model
from agentcore_fsm.agent.rewind import RewindBusyError, RewindError, turn_starts
from agentcore_fsm.core.config import ModelCallOptions
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response

MODEL = Model(id="faux-1", provider="faux", api="faux")


def _texts(messages: list[Any]) -> list[str]:
    out = []
    for m in messages:
        content = m.content
        out.append(content if isinstance(content, str) else "".join(b.text for b in content))
    return out


def _agent(store: MemoryRunStore | None = None, session: str | None = None) -> Agent:
    faux = FauxProvider([faux_response(f"answer {i}") for i in range(6)])
    options = ModelCallOptions(session_id=session)
    return Agent(model=MODEL, stream_fn=faux, store=store, options=options)


def test_rewind_cuts_before_a_user_turn_and_the_next_prompt_goes_on_from_there() -> None:
    agent = _agent()
    for question in ("one", "two", "three"):
        agent.prompt_sync(question)
    assert turn_starts(agent.state.messages) == [0, 2, 4]
    dropped = agent.rewind(1)
    assert _texts(dropped) == ["two", "answer 1", "three", "answer 2"]
    assert _texts(agent.state.messages) == ["one", "answer 0"]
    agent.prompt_sync("two again")
    assert _texts(agent.state.messages) == ["one", "answer 0", "two again", "answer 3"]
    assert _texts(agent.rewind(-1)) == ["two again", "answer 3"]  # -1: the last turn
    assert _texts(agent.rewind(0)) == ["one", "answer 0"]
    assert agent.state.messages == []


@pytest.mark.parametrize("turn", [2, -3, 7])
def test_a_turn_the_transcript_does_not_have_changes_nothing(turn: int) -> None:
    agent = _agent()
    agent.prompt_sync("one")
    agent.prompt_sync("two")
    before = list(agent.state.messages)
    with pytest.raises(
        RewindError, match=rf"the transcript has turns 0 to 1; there is no turn {turn}"
    ):
        agent.rewind(turn)
    assert agent.state.messages == before


def test_an_empty_transcript_and_a_bad_turn() -> None:
    agent = _agent()
    with pytest.raises(RewindError, match="the transcript has no turn; there is no turn 0"):
        agent.rewind(0)
    with pytest.raises(RewindError, match="a turn is a number"):
        agent.rewind(True)


def test_a_busy_agent_is_not_rewound() -> None:
    agent = _agent()
    agent.prompt_sync("one")
    seen: list[str] = []

    def listener(event: Any, signal: Any) -> None:
        if event.type == "turn_start":
            try:
                agent.rewind(0)
            except RewindBusyError as exc:
                seen.append(str(exc))

    agent.subscribe(listener)
    agent.prompt_sync("two")
    assert seen == ["Agent is already processing. Wait for completion before rewinding."]
    assert len(agent.state.messages) == 4


def test_a_session_in_a_store_reads_back_rewound_after_the_next_run() -> None:
    store = MemoryRunStore()
    agent = _agent(store, "s1")
    agent.prompt_sync("one")
    agent.prompt_sync("two")
    agent.rewind(1)
    agent.prompt_sync("two again")
    again = Agent(model=MODEL, store=store, options=ModelCallOptions(session_id="s1"))
    assert _texts(again.state.messages) == ["one", "answer 0", "two again", "answer 2"]
    assert len(store.runs("s1")) == 3  # the runs are kept; none was rewritten
