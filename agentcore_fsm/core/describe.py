"""One-line descriptions of agent events and messages, for people reading a run.

The one describer of the package: the steps of a recorded run (``diagram --run --steps``, a
replay's divergence report) list events in the short form, and the grammar checker shows the
events around a violation in the form with ids (``ids=True``: the tool call ids, an assistant
message's stop reason and calls, a turn's results)::

    describe_event(end)            # 'tool_execution_end(add: error)'
    describe_event(end, ids=True)  # 'tool_execution_end(c1 add is_error=True)'

Never raises on odd input (a custom message, a dict, something that is not a message at all):
it says what it got.
"""

from __future__ import annotations

from typing import Any

from agentcore_fsm.core.messages import (
    TEXT_LIMIT,
    AssistantMessage,
    ToolResultMessage,
    UserMessage,
    clip,
)

__all__ = ["LIBRARY_MESSAGES", "describe_event", "describe_message", "message_label", "role_of"]

LIBRARY_MESSAGES = (UserMessage, AssistantMessage, ToolResultMessage)
"""The message classes of the library (any other message is a custom one)."""

_BAD_ENDS = ("error", "aborted")


def role_of(message: Any) -> Any:
    """A message's ``role`` (a dict's ``"role"`` in the JSON form of a recording); None if it
    has none."""
    if isinstance(message, dict):
        return message.get("role")
    return getattr(message, "role", None)


def describe_message(message: Any) -> str:
    """One short line for a message of a transcript: ``str(message)`` for the library's messages
    (``assistant: "Hi" [toolUse: read(path='a.txt')]``); for a custom message its role and its
    ``repr()``, cut to 60 characters; for anything else, what it is."""
    if isinstance(message, LIBRARY_MESSAGES):
        return str(message)
    role = role_of(message)
    text = clip(repr(message), TEXT_LIMIT)
    if isinstance(role, str):
        return f"{role}: {text}"
    return f"not a message: {type(message).__name__} {text}"


def message_label(message: Any, *, ids: bool = False) -> str:
    """A message in a few words: its role, and ``error``/``aborted`` when it failed
    (``assistant: error``, ``toolResult: error``); with ``ids``, a tool result's call id
    (``toolResult c1``) and an assistant message's stop reason and calls (``assistant toolUse
    calls=c1,c2``)."""
    role = role_of(message)
    if not isinstance(role, str):
        return f"not a message: {type(message).__name__} {clip(repr(message), 40)}"
    if ids:
        if role == "toolResult":
            return f"toolResult {getattr(message, 'tool_call_id', '?')}"
        if role == "assistant" and isinstance(message, AssistantMessage):
            calls = ",".join(c.id for c in message.tool_calls())
            return f"assistant {message.stop_reason}{f' calls={calls}' if calls else ''}"
        return role
    if getattr(message, "is_error", False) is True:
        return f"{role}: error"
    stop = getattr(message, "stop_reason", None)
    return f"{role}: {stop}" if stop in _BAD_ENDS else role


def describe_event(event: Any, *, ids: bool = False) -> str:
    """A short label of an agent event: ``turn_start``, ``message_end(assistant: error)``,
    ``tool_execution_end(add: error)``, ``approval_requested(pay)``, ``approval_decided(pay:
    approved)`` (``denied``, and ``by WHO`` when another than "user" decided:
    ``approval_decided(pay: denied by timeout)``), ``agent_end(completed)``. With ``ids``, the
    tool call ids and the messages' details too (see :func:`message_label`), a ``turn_end``'s
    message and results, and an ``agent_end``'s message count."""
    kind = str(getattr(event, "type", "?"))
    if kind in ("message_start", "message_end"):
        return f"{kind}({message_label(event.message, ids=ids)})"
    if kind == "message_update":
        return f"message_update({event.assistant_message_event.type})"
    call = f"{event.tool_call_id} " if ids and hasattr(event, "tool_call_id") else ""
    if kind in ("tool_execution_start", "tool_execution_update", "approval_requested"):
        return f"{kind}({call}{event.tool_name})"
    if kind == "tool_execution_end":
        if ids:
            return f"{kind}({call}{event.tool_name} is_error={event.is_error})"
        return f"{kind}({event.tool_name}{': error' if event.is_error else ''})"
    if kind == "approval_decided":
        verdict = "approved" if event.approved else "denied"
        who = str(event.decided_by)
        by = f" by {clip(who, 24)}" if who != "user" else ""
        return f"{kind}({call}{event.tool_name}: {verdict}{by})"
    if kind == "turn_end" and ids:
        results = ",".join(str(getattr(r, "tool_call_id", "?")) for r in event.tool_results)
        return f"turn_end({message_label(event.message, ids=True)}; results=[{results}])"
    if kind == "agent_end":
        if ids:
            return f"agent_end(reason={event.reason}, {len(event.messages)} messages)"
        return f"agent_end({event.reason})"
    return kind
