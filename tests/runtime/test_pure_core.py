"""The core is pure (issue 26, item 4): time comes in with the inputs, and ``feed`` calls nobody.

The driver stamps every input it feeds with the time (ms) of its outcome, from the run's clock
(``run_machine(clock=...)``); each message the machine makes carries the timestamp of the input
that made it. The run's ``on_transition`` callback is called by the driver with the transitions
a step carries, once ``feed`` has returned and before the step's events are delivered; one that
raises is logged and the run goes on. Both backends.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest
from helpers import MODEL, make_tool, user

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    LoopMachine,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.messages import now_ms
from agentcore_fsm.core.protocol import (
    Input,
    Start,
    SteeringPolled,
    Step,
    ToolFinished,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.runtime.driver import run_machine
from agentcore_fsm.runtime.observer import RunObserver

pytestmark = pytest.mark.anyio


class Inputs(RunObserver):
    """Keeps every input fed, with its step."""

    def __init__(self) -> None:
        self.fed: list[tuple[Input, Step]] = []

    def input_fed(self, input: Input, step: Step, transitions: Sequence[TransitionRecord]) -> None:
        self.fed.append((input, step))


def _tool_then_done() -> FauxProvider:
    return FauxProvider(
        [
            faux_response("calling", tool_calls=[faux_tool_call("t", {}, id="c1")]),
            faux_response("done"),
        ]
    )


def _steer_once() -> Any:
    polls = ["steer me"]  # a str: the machine makes the user message

    def poll() -> Any:
        return polls.pop() if polls else None

    return poll


def _made_here(step: Step) -> list[Any]:
    """The messages the machine made while handling the input (its own: tool results, and user
    messages made from polled strs)."""
    return [
        e.message
        for e in step.events
        if e.type == "message_end" and isinstance(e.message, (ToolResultMessage, UserMessage))
    ]


async def test_the_driver_stamps_every_input_and_the_machine_s_messages_carry_it(
    anyio_backend: str,
) -> None:
    watcher = Inputs()
    before = now_ms()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        AgentLoopConfig(model=MODEL, get_steering_messages=_steer_once()),
        stream_fn=_tool_then_done(),
        observers=[watcher],
    )
    after = now_ms()
    assert watcher.fed and type(watcher.fed[0][0]) is Start
    for input, _ in watcher.fed:
        assert before <= input.timestamp <= after, input
    made = {id(m): input.timestamp for input, step in watcher.fed for m in _made_here(step)}
    result = next(m for m in messages if isinstance(m, ToolResultMessage))
    steered = next(m for m in messages if isinstance(m, UserMessage) and m.content != "go")
    # the tool's result message: the time its ToolFinished was stamped with
    finished = [i for i, _ in watcher.fed if isinstance(i, ToolFinished)]
    assert [result.timestamp] == [i.timestamp for i in finished] == [made[id(result)]]
    # the steering message made from a str: its poll's time
    polled = [i for i, s in watcher.fed if isinstance(i, SteeringPolled) and i.messages]
    assert [steered.timestamp] == [i.timestamp for i in polled] == [made[id(steered)]]


async def test_the_run_s_clock_stamps_the_inputs(anyio_backend: str) -> None:
    watcher = Inputs()
    machine = LoopMachine(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        AgentLoopConfig(model=MODEL, get_steering_messages=_steer_once()),
    )
    messages = await run_machine(
        machine, stream_fn=_tool_then_done(), observers=[watcher], clock=lambda: 42
    )
    assert {input.timestamp for input, _ in watcher.fed} == {42}
    made = [m for m in messages if isinstance(m, ToolResultMessage)]
    made += [m for m in messages if isinstance(m, UserMessage) and m.content != "go"]
    assert len(made) == 2 and {m.timestamp for m in made} == {42}


async def test_on_transition_runs_after_feed_and_before_the_step_s_events(
    anyio_backend: str,
) -> None:
    machine = LoopMachine(
        [user("go")], AgentContext(tools=[make_tool("t")]), AgentLoopConfig(model=MODEL)
    )
    log: list[tuple[str, Any]] = []
    states_seen: list[str] = []

    def on_transition(record: TransitionRecord) -> None:
        log.append(("transition", record))
        states_seen.append(machine.state)

    await run_machine(
        machine,
        stream_fn=_tool_then_done(),
        emit=lambda event: log.append(("event", event.type)),
        on_transition=on_transition,
    )
    # every transition was reported once, in order
    assert [r for kind, r in log if kind == "transition"] == machine.history
    # the first step (Start) took two transitions; both were reported once feed had returned
    # (the machine already in the step's last state), before the step's first event
    assert log[0] == ("transition", machine.history[0])
    assert log[1] == ("transition", machine.history[1])
    assert states_seen[:2] == ["streaming", "streaming"]
    assert log[2] == ("event", "agent_start")
    # the last transition (to stopped) comes before agent_end, the last event
    last = max(i for i, (kind, _) in enumerate(log) if kind == "transition")
    assert log[last + 1 :] == [("event", "agent_end")]


async def test_a_raising_on_transition_is_logged_and_the_run_goes_on(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    def on_transition(record: TransitionRecord) -> None:
        raise RuntimeError("observer broke")

    with caplog.at_level(logging.ERROR, logger="agentcore_fsm"):
        messages = await run_agent_loop(
            [user("go")],
            AgentContext(tools=[make_tool("t")]),
            AgentLoopConfig(model=MODEL),
            stream_fn=_tool_then_done(),
            on_transition=on_transition,
        )
    assert messages[-1].stop_reason == "stop"  # type: ignore[union-attr]
    assert caplog.text.count("on_transition raised; ignored") >= 5


def test_an_input_stepped_by_hand_without_a_timestamp_makes_messages_at_zero() -> None:
    """The machine reads no clock: an unstamped input's messages have timestamp 0, a stamped
    one's have its timestamp."""
    for stamp in (0, 1_700_000_000_123):
        m = LoopMachine(
            [user("go")],
            AgentContext(),
            AgentLoopConfig(model=MODEL, get_steering_messages=lambda: None),
        )
        m.feed(Start())
        step = m.feed(SteeringPolled(["a", {"role": "user", "content": "b"}], timestamp=stamp))
        made = [e.message for e in step.events if e.type == "message_end"]
        assert len(made) == 2
        assert [msg.timestamp for msg in made] == [stamp, stamp]
        # a message given with its own timestamp keeps it
        m2 = LoopMachine(
            [user("go")],
            AgentContext(),
            AgentLoopConfig(model=MODEL, get_steering_messages=lambda: None),
        )
        m2.feed(Start())
        given = {"role": "user", "content": "c", "timestamp": 7}
        step = m2.feed(SteeringPolled([given], timestamp=stamp))
        assert [e.message.timestamp for e in step.events if e.type == "message_end"] == [7]
