"""The core is pure: the inputs a run was fed, fed again to a fresh machine, give the same steps.

Generated runs go through the real driver (trio and asyncio) with tools that succeed, fail or
hang, sequential or parallel mode, steering, an abort at a random event and failures of ``emit``.
Every input the driver feeds (``feed`` and the delta fast path ``stream_update``) is recorded;
a fresh :class:`LoopMachine` fed the same inputs takes the same transitions and produces the same
events and effects, step by step.

Time is an input too: the driver stamps every input it feeds (the machine has no clock), each
message the machine makes carries the timestamp of the input that made it, and the same inputs
with other timestamps give the same steps but for those messages' timestamps.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentcore_fsm.runtime.driver as driver_module
from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    LoopMachine,
    Model,
    TextContent,
    UserMessage,
)
from agentcore_fsm.core.messages import ToolResultMessage, now_ms
from agentcore_fsm.core.protocol import Step
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

MODEL = Model(id="m", provider="p")


class RecordingMachine(LoopMachine):
    """Records every input, and what each produced."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log: list[tuple[str, Any, Any]] = []
        RECORDED.append(self)

    def feed(self, input: Any) -> Any:
        step = super().feed(input)
        self.log.append(("feed", input, step))
        return step

    def stream_update(self, event: Any) -> Any:
        update = super().stream_update(event)
        self.log.append(("update", event, update))
        return update


RECORDED: list[RecordingMachine] = []


async def _tool(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
    behaviour = args.get("do", "ok")
    if behaviour == "fail":
        raise RuntimeError("tool failed")
    if behaviour == "hang":  # until aborted, or a moment
        with anyio.move_on_after(0.005):
            await signal.wait()
    on_update(AgentToolResult(content=[TextContent(text="…")]))
    await anyio.lowlevel.checkpoint()
    return AgentToolResult(content=[TextContent(text=f"{call_id} done")])


TOOL = AgentTool("t", "a tool", {"type": "object"}, _tool)

turns = st.lists(
    st.lists(st.sampled_from(["ok", "ok", "fail", "hang"]), max_size=3), min_size=1, max_size=3
)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=turns,
    mode=st.sampled_from(["parallel", "sequential"]),
    abort_at=st.one_of(st.none(), st.integers(0, 40)),
    fail_at=st.one_of(st.none(), st.integers(0, 40)),
    steer=st.booleans(),
)
def test_feeding_the_recorded_inputs_again_gives_the_same_steps(
    backend: str,
    script: list[list[str]],
    mode: str,
    abort_at: int | None,
    fail_at: int | None,
    steer: bool,
) -> None:
    responses = [
        faux_response(
            "working",
            tool_calls=[
                faux_tool_call("t", {"do": do}, id=f"r{r}c{i}") for i, do in enumerate(calls)
            ],
        )
        for r, calls in enumerate(script)
    ]
    responses.append(faux_response("done"))
    steering = [[UserMessage(content="steer")]] if steer else []
    config = AgentLoopConfig(
        model=MODEL,
        tool_execution=mode,  # type: ignore[arg-type]
        get_steering_messages=lambda: steering.pop() if steering else [],
    )
    controller = AbortController()
    seen = 0

    def emit(event: Any) -> None:
        nonlocal seen
        seen += 1
        if seen == abort_at:
            controller.abort()
        if seen == fail_at:
            raise RuntimeError("listener failed")

    RECORDED.clear()
    original = driver_module.LoopMachine
    driver_module.LoopMachine = RecordingMachine  # type: ignore[misc]
    try:

        async def main() -> None:
            with anyio.fail_after(10):
                await driver_module.run_agent_loop(
                    [UserMessage(content="go")],
                    AgentContext(tools=[TOOL]),
                    config,
                    emit,
                    signal=controller.signal,
                    stream_fn=FauxProvider(responses, chunk_size=3),
                )

        anyio.run(main, backend=backend)
    finally:
        driver_module.LoopMachine = original  # type: ignore[misc]

    (recorded,) = RECORDED
    assert recorded.finished
    fresh = LoopMachine(recorded.prompts, AgentContext(tools=[TOOL]), config)
    # the same inputs, each stamped a second later, fed to another fresh machine
    later = LoopMachine(recorded.prompts, AgentContext(tools=[TOOL]), config)
    for kind, input, produced in recorded.log:
        if kind == "update":
            again = fresh.stream_update(input)
            assert again == produced
            assert later.stream_update(input) == produced
        else:
            # the driver stamped it, with the time its outcome happened
            assert 0 < input.timestamp <= now_ms()
            step = fresh.feed(input)
            assert step.events == produced.events  # messages (their timestamps) included
            assert step.transitions == produced.transitions
            assert [type(e) for e in step.effects] == [type(e) for e in produced.effects]
            assert (step.stream_over, step.run_over) == (produced.stream_over, produced.run_over)
            # the machine's own messages carry the timestamp of the input that made them
            assert all(t == input.timestamp for t in made_timestamps(produced))
            shifted = later.feed(dataclasses.replace(input, timestamp=input.timestamp + 1000))
            assert made_timestamps(shifted) == [t + 1000 for t in made_timestamps(produced)]
            assert [type(e).__name__ for e in shifted.events] == [
                type(e).__name__ for e in produced.events
            ]
            assert shifted.transitions == produced.transitions
    assert later.history == recorded.history
    assert fresh.history == recorded.history
    assert fresh.new_messages == recorded.new_messages
    assert fresh.end_reason == recorded.end_reason
    assert [[r.trigger for r in c.history] for c in fresh.tool_calls] == [
        [r.trigger for r in c.history] for c in recorded.tool_calls
    ]


def made_timestamps(step: Step) -> list[int]:
    """The timestamps of the tool result messages ``step`` appended (only the machine makes
    them, while handling the input that answers the call)."""
    return [
        e.message.timestamp
        for e in step.events
        if e.type == "message_end" and isinstance(e.message, ToolResultMessage)
    ]
