"""Helpers shared by the Agent tests: compact, exact descriptions of events and a listener."""

from __future__ import annotations

from typing import Any

from agentcore_fsm import TextContent


def text_of(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content if isinstance(b, TextContent))


def label(message: Any) -> str:
    role = getattr(message, "role", "?")
    if role == "user":
        return f"user:{text_of(message)}"
    if role == "assistant":
        return f"assistant:{message.stop_reason}"
    if role == "toolResult":
        return f"toolResult:{message.tool_call_id}" + (":error" if message.is_error else "")
    return str(role)


def describe(event: Any) -> str:
    """A compact, exact description of an event (taken when the event arrives)."""
    kind = event.type
    if kind in ("message_start", "message_end"):
        return f"{kind}:{label(event.message)}"
    if kind == "tool_execution_start":
        return f"{kind}:{event.tool_call_id}"
    if kind == "tool_execution_end":
        return f"{kind}:{event.tool_call_id}" + (":error" if event.is_error else "")
    if kind == "agent_end":
        return f"agent_end:{event.reason}"
    return str(kind)


class Recorder:
    """A listener that records every event and its description."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.all: list[str] = []
        self.signals: list[Any] = []

    def __call__(self, event: Any, signal: Any) -> None:
        self.events.append(event)
        self.all.append(describe(event))
        self.signals.append(signal)

    @property
    def seq(self) -> list[str]:
        """The descriptions without message_update events."""
        return [d for d in self.all if d != "message_update"]


def prompt_turn(text: str) -> list[str]:
    return [f"message_start:user:{text}", f"message_end:user:{text}"]


ASSISTANT_STOP = ["message_start:assistant:pending", "message_end:assistant:stop"]
ASSISTANT_TOOLS = ["message_start:assistant:pending", "message_end:assistant:toolUse"]
