"""Snapshots: a run restored at any step boundary goes on exactly like the original.

Generated runs go through the real driver (trio and asyncio) with a journaling machine: tools
that succeed, fail or hang, sequential or parallel mode, tool and turn hooks that edit, block,
override or return junk, steering, an abort at a random event and a failing listener. At every
step boundary (after each journaled input) the run's snapshot goes through JSON and back into a
fresh machine; fed the inputs the original was fed from there on (each carrying its
timestamp), it produces the same events, effects and flags step by step, takes the same
transitions, and ends with the same messages and end reason.
"""

from __future__ import annotations

import copy
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentcore_fsm.runtime.driver as driver_module
from agentcore_fsm import (
    AbortController,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    BeforeToolCallResult,
    Model,
    TextContent,
    UserMessage,
)
from agentcore_fsm.core.config import AgentLoopTurnUpdate
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.journal import JournaledLoopMachine, RunSnapshot

MODEL = Model(id="m", provider="p")


class Recording(JournaledLoopMachine):
    """Keeps every input it was fed (with its timestamp and step), and the number of
    journal entries before it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log: list[tuple[str, Any, Any, list[int], int, Any]] = []
        RECORDED.append(self)

    def feed(self, input: Any) -> Any:
        before = len(self.entries)
        # before_tool_call edits a call's arguments in place before its value is fed: keep
        # them as they were then, to redo the edit when the input is fed again
        args = None
        if getattr(input, "name", None) == "before_tool_call":
            args = copy.deepcopy(self.calls[input.index].args)
        step = super().feed(input)
        self.log.append(("feed", input, step, input.timestamp, before, args))
        return step

    def stream_update(self, event: Any) -> Any:
        update = super().stream_update(event)
        self.log.append(("update", event, update, [], len(self.entries), None))
        return update


RECORDED: list[Recording] = []


async def _tool(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
    behaviour = args.get("do", "ok")
    if behaviour == "fail":
        raise RuntimeError("tool failed")
    if behaviour == "hang":
        with anyio.move_on_after(0.005):
            await signal.wait()
    on_update(AgentToolResult(content=[TextContent(text="…")]))
    await anyio.lowlevel.checkpoint()
    return AgentToolResult(content=[TextContent(text=f"{call_id} done {args}")], details={"n": 1})


TOOL = AgentTool("t", "a tool", {"type": "object"}, _tool)

turns = st.lists(
    st.lists(st.sampled_from(["ok", "ok", "fail", "hang"]), max_size=3), min_size=1, max_size=3
)


def _before(kind: str | None) -> Any:
    if kind is None:
        return None

    def hook(ctx: Any, signal: Any) -> Any:
        if kind == "mutate":
            ctx.args["edited"] = True
            return None
        if kind == "block" and ctx.tool_call.id.endswith("c1"):
            return BeforeToolCallResult(block=True, reason="not this one")
        if kind == "junk":
            return 42
        return None

    return hook


def _after(kind: str | None) -> Any:
    if kind is None:
        return None

    async def hook(ctx: Any, signal: Any) -> Any:
        if kind == "override":
            return AfterToolCallResult(content=[TextContent(text="overridden")], details=[1, 2])
        if kind == "junk":
            return "not a result"
        return None

    return hook


def _next_turn(kind: str | None) -> Any:
    if kind is None:
        return None

    def hook(ctx: Any, signal: Any) -> Any:
        if kind == "update":
            return AgentLoopTurnUpdate(thinking_level="low", model=Model(id="m2", provider="p"))
        if kind == "junk":
            return object()
        return None

    return hook


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=turns,
    mode=st.sampled_from(["parallel", "sequential"]),
    abort_at=st.one_of(st.none(), st.integers(0, 40)),
    fail_at=st.one_of(st.none(), st.integers(0, 60)),
    steer=st.booleans(),
    before=st.sampled_from([None, "mutate", "block", "junk"]),
    after=st.sampled_from([None, "override", "junk"]),
    next_turn=st.sampled_from([None, "update", "junk"]),
)
def test_a_run_restored_at_any_step_boundary_goes_on_like_the_original(
    backend: str,
    script: list[list[str]],
    mode: str,
    abort_at: int | None,
    fail_at: int | None,
    steer: bool,
    before: str | None,
    after: str | None,
    next_turn: str | None,
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
    steering = [[UserMessage(content="steer")], ["a str steers too"]] if steer else []
    config = AgentLoopConfig(
        model=MODEL,
        tool_execution=mode,  # type: ignore[arg-type]
        get_steering_messages=lambda: steering.pop() if steering else [],
        before_tool_call=_before(before),
        after_tool_call=_after(after),
        prepare_next_turn=_next_turn(next_turn),
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
    driver_module.LoopMachine = Recording  # type: ignore[misc]
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

    (run,) = RECORDED
    assert run.finished
    full = run.snapshot()
    for boundary in range(len(full.entries) + 1):
        # the snapshot as it was at this boundary, through JSON
        partial = full.model_copy(update={"entries": full.entries[:boundary]})
        text = partial.model_dump_json()
        restored, _ = JournaledLoopMachine.restore(
            RunSnapshot.model_validate_json(text), config, tools=[TOOL]
        )
        # the inputs the original was fed from this boundary on
        # (the input that made entry number `boundary` - 1 is in the snapshot: every input
        # fed from then on found `boundary` entries or more)
        rest = [entry for entry in run.log if entry[4] >= boundary]
        for kind, item, produced, stamp, _, args in rest:
            if kind == "update":
                assert restored.stream_update(item) == produced
                continue
            if args is not None:  # what the hook did to the arguments, done again
                restored.calls[item.index].args.clear()
                restored.calls[item.index].args.update(args)
            assert stamp > 0  # the driver stamped it: the machine reads no clock
            step = restored.feed(item)
            assert step.events == produced.events, (boundary, item)
            assert step.transitions == produced.transitions
            assert [type(e) for e in step.effects] == [type(e) for e in produced.effects]
            assert (step.stream_over, step.run_over) == (produced.stream_over, produced.run_over)
        assert restored.history == run.history, boundary
        assert restored.new_messages == run.new_messages, boundary
        assert restored.end_reason == run.end_reason
        assert restored.entries == run.entries
