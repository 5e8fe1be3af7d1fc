"""The hand-written scenario bank (``prop_bank``) through the real async driver, both backends.

Each scenario is a named, minimal reproduction of one path through the machine; every property
of ``prop_scenarios.verify`` must hold for it. The bank between them takes every declared
transition (see ``test_declaration_coverage``).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from prop_bank import BANK
from prop_scenarios import (
    ASK_TOOL,
    CallPlan,
    Fault,
    ResponsePlan,
    Scenario,
    run_scenario,
    verify,
)
from prop_sync_driver import run_sync

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.devtools.testing import (
    EventRecorder,
    FauxProvider,
    check_run,
    faux_response,
    faux_tool_call,
)

BACKENDS = ["trio", "asyncio"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(BANK))
def test_bank_scenario(name: str, backend: str) -> None:
    run_scenario(BANK[name], backend)


@pytest.mark.parametrize("name", list(BANK))
def test_bank_scenario_through_the_sync_driver(name: str) -> None:
    """The synchronous driver used by the mutation tests agrees with the properties too."""
    sc: Scenario = BANK[name]
    harness, messages = run_sync(sc, record=True)
    verify(sc, harness, messages)


def test_no_after_tool_call_hook_starts_once_the_signal_fired() -> None:
    """docs/reference.md#what-an-abort-does: once the signal has fired, no hook starts.

    Tool ``a`` returns at once; tool ``b`` waits for it, then fires the abort. The driver spawns
    ``a``'s ``after_tool_call`` as a task when ``a``'s result arrives; if ``b`` aborts before that
    task first runs, the hook must not be called. On asyncio the schedule is FIFO, so this order
    is deterministic (on trio it is random, which is why this is not part of the generated runs).
    """

    async def main() -> tuple[list[tuple[str, bool]], list[Any], list[Any]]:
        controller = AbortController()
        a_done = anyio.Event()
        started: list[tuple[str, bool]] = []

        async def a(cid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
            a_done.set()
            return AgentToolResult(content=[TextContent(text="a")])

        async def b(cid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
            await a_done.wait()
            controller.abort()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        def after(ctx: Any, signal: Any) -> None:
            started.append((ctx.tool_call.name, signal.aborted))

        schema = {"type": "object"}
        faux = FauxProvider(
            [
                faux_response(
                    tool_calls=[faux_tool_call("a", id="A"), faux_tool_call("b", id="B")]
                ),
                faux_response("unreachable"),
            ]
        )
        recorder = EventRecorder()
        messages = await run_agent_loop(
            [UserMessage(content="go")],
            AgentContext(tools=[AgentTool("a", "a", schema, a), AgentTool("b", "b", schema, b)]),
            AgentLoopConfig(model=Model(id="m"), after_tool_call=after),
            recorder,
            signal=controller.signal,
            stream_fn=faux,
        )
        return started, recorder.events, messages

    started, events, messages = anyio.run(main, backend="asyncio")
    check_run(events, messages)
    assert events[-1].reason == "aborted"
    assert all(not aborted for _, aborted in started), f"hook started after the abort: {started}"


@pytest.mark.parametrize(
    "backend",
    ["trio", "asyncio"],
)
def test_no_approver_is_asked_once_the_run_failed(backend: str) -> None:
    """docs/reference.md#failures: once a failure was raised nothing starts, not even a
    decide_approval whose task was spawned, but had not run, when the failure came: call 0
    waits for approval while call 1's before_tool_call blocks it, and emitting call 1's
    tool_execution_end raises."""
    sc = Scenario(
        responses=(
            ResponsePlan(calls=(CallPlan(tool=ASK_TOOL), CallPlan(before="block"))),
            ResponsePlan(text="done"),
        ),
        with_before=True,
        faults=(Fault("emit:tool_execution_end", 0),),
    )
    verdict = run_scenario(sc, backend)
    assert verdict.reason == "error"
