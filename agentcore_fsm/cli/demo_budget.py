"""The demo's last part: a budget being reached (docs/demo.md#a-budget-reached,
docs/policies.md#usage-limits).

After the session, the demo asks the same question once more in a fresh workspace, with the
same scripted model, but with ``UsageLimits(tool_calls=3)``: the model lists the workspace (one
call), then asks to read the three invoices at once. That batch would make four tool calls, so
the run's check before each tool batch keeps it from running: each of its calls is answered
with an error result saying why, and the run ends with ``agent_end(reason="limit")`` naming the
limit and the figures. :func:`run_budget` returns the lines the demo prints about it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentcore_fsm.core.config import AgentContext, AgentLoopConfig
from agentcore_fsm.core.limits import UsageLimits
from agentcore_fsm.core.messages import Model, TextContent, ToolResultMessage, UserMessage
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.integrations.providers.faux import FauxProvider
from agentcore_fsm.runtime.driver import run_agent_loop

__all__ = ["BUDGET", "run_budget"]

BUDGET = UsageLimits(tool_calls=3)
"""The budget of the demo's last run."""


async def run_budget(
    question: str,
    make_workspace: Callable[[Path], None],
    tools: Callable[[Path], list[AgentTool]],
    script: Callable[[], list[Any]],
) -> list[str]:
    """Ask ``question`` once more under :data:`BUDGET`, in a fresh workspace made by
    ``make_workspace``, with ``tools(workspace)`` and the model's responses ``script()`` (the
    demo's); return the lines that tell how it ended."""
    ends: list[Any] = []

    def emit(event: Any) -> None:
        if event.type == "agent_end":
            ends.append(event)

    with tempfile.TemporaryDirectory(prefix="agentcore-fsm-demo-budget-") as tmp:
        workspace = Path(tmp)
        make_workspace(workspace)
        context = AgentContext(
            system_prompt="You are a careful bookkeeping assistant.",
            tools=tools(workspace),
        )
        config = AgentLoopConfig(
            model=Model(id="faux-demo", provider="faux", api="faux"), limits=BUDGET
        )
        messages = await run_agent_loop(
            [UserMessage(content=question)],
            context,
            config,
            emit,
            stream_fn=FauxProvider(script(), chunk_size=64),
        )
    end = ends[-1]
    lines = [f"budget: the same question again, with UsageLimits(tool_calls={BUDGET.tool_calls})"]
    refused = [m for m in messages if isinstance(m, ToolResultMessage) and m.is_error]
    if refused:
        names = ", ".join(sorted({m.tool_name for m in refused}))
        first = refused[0].content[0]
        text = first.text if isinstance(first, TextContent) else ""
        lines.append(f"    {len(refused)} {names} call(s) not run, each answered: {text}")
    if end.limit is not None:
        lines.append(f"budget reached before the tool batch: {end.limit.text()}")
    usage = end.usage
    lines.append(
        f"budget outcome: {end.reason} ({usage.requests} model requests, "
        f"{usage.tool_calls} tool call(s) run, every call answered)"
    )
    return lines
