"""The demo's multi-agent part (docs/demo.md#agents-that-call-agents, docs/multi-agent.md).

After the budget, the demo runs two agents: a bookkeeper whose one tool is an auditor, an
:class:`~agentcore_fsm.Agent` made a tool with :meth:`~agentcore_fsm.Agent.as_tool`. The
bookkeeper asks the auditor to check the invoices' sum; the auditor's own run (its own system
prompt, model and calculator tool) is nested inside that tool call, and its answer is the call's
result. Every event of the nested run reaches the bookkeeper's listener, tagged with the path of
calls that led to it; :func:`run_nested` prints the tree compactly, one line per step, indented
by depth. The scripted models read what they are sent, so the sum is computed during the run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agentcore_fsm.agent.agent import Agent
from agentcore_fsm.cli.calculator import calculator_tool
from agentcore_fsm.core.config import LlmContext
from agentcore_fsm.core.messages import AssistantMessage, TextContent, ToolResultMessage
from agentcore_fsm.core.nesting import nested_event_of
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

__all__ = ["run_nested"]

SHOWN = ("agent_start", "tool_execution_start", "tool_execution_end", "agent_end")
"""The events the tree shows (with each assistant answer that has text)."""


def _last_result(context: LlmContext) -> str:
    """The text of the last tool result the model was sent."""
    for message in reversed(context.messages):
        if isinstance(message, ToolResultMessage):
            return "".join(b.text for b in message.content if isinstance(b, TextContent))
    return ""


def _line(event: Any) -> str | None:
    """One step of the tree, or None for an event it does not show."""
    kind = event.type
    if kind == "message_end" and isinstance(event.message, AssistantMessage):
        text = "".join(b.text for b in event.message.content if isinstance(b, TextContent))
        return f"assistant > {text}" if text else None
    if kind not in SHOWN:
        return None
    if kind == "tool_execution_start":
        args = ", ".join(f"{k}={v!r}" for k, v in dict(event.args or {}).items())
        return f"tool  {event.tool_name}({args})"
    if kind == "tool_execution_end":
        content = event.result.content
        text = content[0].text if content and isinstance(content[0], TextContent) else ""
        return f"{'error' if event.is_error else 'ok   '} {event.tool_name} -> {text}"
    return f"{kind} {event.reason}" if kind == "agent_end" else kind


async def run_nested(amounts: Sequence[str]) -> list[str]:
    """The bookkeeper asks the auditor (an agent as a tool) to check the sum of ``amounts``;
    return the lines of the run's tree and its outcome."""
    expression = " + ".join(amounts)

    def confirm(context: LlmContext) -> AssistantMessage:
        return faux_response(f"Checked with the calculator: {_last_result(context)}.")

    def report(context: LlmContext) -> AssistantMessage:
        checked = re.search(r"\d[\d.]*\d", _last_result(context))
        total = checked.group(0) if checked is not None else "?"
        return faux_response(f"The auditor confirms the total: {total} EUR.")

    auditor = Agent(
        system_prompt="You check sums with the calculator.",
        tools=[calculator_tool()],
        stream_fn=FauxProvider(
            [
                faux_response(
                    tool_calls=[faux_tool_call("calculator", {"expression": expression}, id="c1")]
                ),
                confirm,
            ],
            chunk_size=64,
        ),
    )
    ask = faux_tool_call("auditor", {"prompt": f"Please check {expression}"}, id="a1")
    bookkeeper = Agent(
        system_prompt="You are a bookkeeper; an auditor checks your sums.",
        tools=[auditor.as_tool("auditor", "Ask the auditor to check a sum.")],
        stream_fn=FauxProvider([faux_response(tool_calls=[ask]), report], chunk_size=64),
    )
    lines = ["agents: a bookkeeper asks an auditor (an agent as a tool) to check the sum"]
    ends: list[str] = []

    def show(event: Any, signal: Any) -> None:
        nested = nested_event_of(event)
        if nested is None and event.type == "agent_end":
            ends.append(event.reason)
        path, inner = ((), event) if nested is None else (nested.path, nested.event)
        line = _line(inner)
        if line is not None:
            where = f"[{'/'.join(path)}] " if path else ""
            lines.append("    " + "  " * len(path) + where + line)

    bookkeeper.subscribe(show)
    await bookkeeper.prompt(f"Have the auditor check {expression}.")
    error = bookkeeper.state.error_message
    lines.append(f"agents outcome: {ends[-1] if ends else 'none'}{f': {error}' if error else ''}")
    return lines
