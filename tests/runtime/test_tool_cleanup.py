"""A tool cancelled by an abort can finish its shielded cleanup (docs/reference.md#abort).

An abort cancels the running tools once. A tool may catch the cancellation and do some
cleanup under a shielded cancel scope (tell a server its request is cancelled, remove a
temporary file); that cleanup runs to its end on both backends, and the call still gets
``Operation aborted``.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from helpers import MODEL, text_of

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.devtools.testing import EventRecorder, check_run
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

pytestmark = pytest.mark.anyio


async def test_a_cancelled_tool_finishes_its_shielded_cleanup() -> None:
    controller = AbortController()
    log: list[str] = []

    started = anyio.Event()

    async def slow(call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
        try:
            started.set()
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                try:
                    await anyio.sleep(0.2)
                    log.append("cleanup done")
                except BaseException as exc:  # pragma: no cover - the failure this test catches
                    log.append(f"cleanup interrupted: {type(exc).__name__}")
                    raise
            raise
        return None

    tool = AgentTool("slow", "waits", {"type": "object"}, slow)
    model = FauxProvider([faux_response(tool_calls=[faux_tool_call("slow", {}, id="s")])])
    recorder = EventRecorder()
    messages: list[Any] = []

    async def abort_once_started() -> None:
        await started.wait()
        controller.abort()  # from outside the tool, while it waits

    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_once_started)
        messages = await run_agent_loop(
            [UserMessage(content="go")],
            AgentContext(tools=[tool]),
            AgentLoopConfig(model=MODEL),
            recorder,
            stream_fn=model,
            signal=controller.signal,
        )
    check_run(recorder.events, messages)
    assert log == ["cleanup done"]
    assert text_of(messages[-1]) == "Operation aborted"
    assert recorder.events[-1].reason == "aborted"
