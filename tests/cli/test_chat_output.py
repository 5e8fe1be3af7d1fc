"""``agentcore-fsm chat``'s transcript says why a reply or a run failed (tests/providers has the
end-to-end sessions against a local server)."""

from __future__ import annotations

import io

from agentcore_fsm import AssistantMessage, TextContent, ToolResultMessage, UserMessage
from agentcore_fsm.cli.chat import Printer
from agentcore_fsm.core.events import AgentEndEvent, AgentStartEvent, MessageEndEvent


def shown(*events: object) -> str:
    out = io.StringIO()
    printer = Printer(out, color=False)
    for event in events:
        printer(event)
    return out.getvalue()


def test_a_failed_reply_shows_its_error_text_once() -> None:
    failed = AssistantMessage(stop_reason="error", error_message="HTTP 500: upstream timeout")
    assert shown(
        AgentStartEvent(),
        MessageEndEvent(message=failed),
        AgentEndEvent(messages=[UserMessage(content="hi"), failed], reason="error"),
    ) == ("[error] HTTP 500: upstream timeout\n")
    nameless = AssistantMessage(stop_reason="error")
    assert shown(MessageEndEvent(message=nameless)) == "[error] (no error message)\n"


def test_an_aborted_reply_shows_a_reason_when_there_is_one() -> None:
    plain = AssistantMessage(stop_reason="aborted", error_message="Request was aborted")
    assert shown(MessageEndEvent(message=plain)) == "[aborted]\n"
    reason = AssistantMessage(stop_reason="aborted", error_message="user pressed stop")
    assert shown(MessageEndEvent(message=reason)) == "[aborted] user pressed stop\n"


def test_a_run_that_ends_badly_without_a_failed_reply_says_so_at_its_end() -> None:
    # an abort while tools ran: the reply asked for tools, the results were cut short
    asked = AssistantMessage(stop_reason="toolUse")
    cut = ToolResultMessage(
        tool_call_id="c1",
        tool_name="calculator",
        content=[TextContent(text="Operation aborted")],
        is_error=True,
    )
    messages = [UserMessage(content="2+2"), asked, cut]
    assert shown(
        AgentStartEvent(),
        MessageEndEvent(message=asked),
        AgentEndEvent(messages=messages, reason="aborted"),
    ) == ("[aborted] calculator: Operation aborted\n")
    # a clean end adds nothing; a new run starts afresh
    failed = AssistantMessage(stop_reason="error", error_message="boom")
    assert shown(
        AgentStartEvent(),
        MessageEndEvent(message=failed),
        AgentEndEvent(messages=[failed], reason="error"),
        AgentStartEvent(),
        AgentEndEvent(messages=messages, reason="aborted"),
        AgentStartEvent(),
        AgentEndEvent(messages=[], reason="completed"),
    ) == ("[error] boom\n[aborted] calculator: Operation aborted\n")
