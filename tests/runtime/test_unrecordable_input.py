"""An input the record cannot hold (a custom message of no registered type, polled in a
journaled run) ends the run once, as data: the journal stops there and the run fails with a
text that says why; nothing is raised out of the run."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    FauxProvider,
    MemoryRunStore,
    Model,
    faux_response,
    run_agent_loop,
)
from agentcore_fsm.devtools.testing import check_run

pytestmark = pytest.mark.anyio


class Note(BaseModel):
    """A custom message whose type is not registered with the codec."""

    role: Literal["note"] = "note"
    text: str


async def test_an_unrecordable_polled_message_fails_the_run_as_data() -> None:
    polls = [[Note(text="remember this")]]

    def steer() -> list[Note]:
        return polls.pop() if polls else []

    store = MemoryRunStore()
    events: list[object] = []
    config = AgentLoopConfig(model=Model(id="m"), get_steering_messages=steer)
    messages = await run_agent_loop(
        ["hi"],
        AgentContext(),
        config,
        events.append,
        stream_fn=FauxProvider([faux_response("ok"), faux_response("ok")]),
        store=store,
        run_id="r1",
    )
    check_run(events)
    end = events[-1]
    assert getattr(end, "type", None) == "agent_end"
    assert end.reason == "error"  # type: ignore[attr-defined]
    failure = messages[-1]
    assert failure.stop_reason == "error"  # type: ignore[union-attr]
    assert "cannot be recorded" in str(failure.error_message)  # type: ignore[union-attr]
    stored = store.load("r1")
    assert stored.status == "running"  # unfinished: what it holds is a prefix of the run
