"""Shared helpers for the loop and machine tests: a recorder, a compact event summary, a checker
of the event grammar (docs/reference.md#event-grammar), and small builders for tools and
hand-written streams.

The summary is what most tests compare against an exact expected list. It names every event
except ``message_update`` (tests that care about updates ask for them) and adds what matters:

* ``message_start:user``, ``message_end:assistant:toolUse`` (role; stop reason for assistant
  message ends), ``message_end:toolResult:c1`` (tool call id for tool results);
* ``tool_execution_start:c1``, ``tool_execution_update:c1``, ``tool_execution_end:c1`` (plus
  ``:error`` when ``is_error``);
* ``agent_end:completed`` (the reason); ``message_update:text_delta`` (the stream event type).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    Model,
    TextContent,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
    run_agent_loop_continue,
)
from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.config import LlmContext, StreamOptions
from agentcore_fsm.core.events import StreamDone, StreamStart, TextDelta, TextStart
from agentcore_fsm.core.messages import AgentMessage

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}


def user(text: str) -> UserMessage:
    return UserMessage(content=text)


def text_of(message: Any) -> str:
    """The text of a message or tool result (its text blocks joined)."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))


def text_result(text: str, **kwargs: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=text)], **kwargs)


def make_tool(
    name: str,
    execute: Callable[..., Any] | None = None,
    *,
    parameters: Any = None,
    **kwargs: Any,
) -> AgentTool:
    """A tool; without ``execute`` it answers ``"<name> done"``."""

    async def default(
        tool_call_id: str, params: Any, signal: AbortSignal | None, on_update: Any
    ) -> AgentToolResult:
        return text_result(f"{name} done")

    return AgentTool(
        name=name,
        description=f"the {name} tool",
        parameters=OBJECT_SCHEMA if parameters is None else parameters,
        execute=execute or default,
        **kwargs,
    )


# --- summaries ------------------------------------------------------------------------------


def describe(event: Any) -> str:
    kind: str = event.type
    if kind in ("message_start", "message_end"):
        message = event.message
        role = getattr(message, "role", None)
        if role is None and isinstance(message, dict):
            role = message.get("role")
        text = f"{kind}:{role}"
        if kind == "message_end" and role == "assistant":
            text += f":{message.stop_reason}"
        if role == "toolResult":
            text += f":{message.tool_call_id}"
        return text
    if kind == "message_update":
        return f"message_update:{event.assistant_message_event.type}"
    if kind.startswith("tool_execution_"):
        text = f"{kind}:{event.tool_call_id}"
        if kind == "tool_execution_end" and event.is_error:
            text += ":error"
        return text
    if kind == "agent_end":
        return f"agent_end:{event.reason}"
    return kind


def summarize(events: Iterable[Any], *, updates: bool = False) -> list[str]:
    return [describe(e) for e in events if updates or e.type != "message_update"]


# --- the event grammar (docs/reference.md#event-grammar) ------------------------------------------


def _role(message: Any) -> Any:
    role = getattr(message, "role", None)
    if role is None and isinstance(message, dict):
        role = message.get("role")
    return role


def check_grammar(events: list[Any]) -> None:
    """Assert every rule of the event grammar (docs/reference.md#event-grammar) on one run's
    events."""
    types = [e.type for e in events]
    assert types, "no events"
    assert types[0] == "agent_start" and types.count("agent_start") == 1, types
    assert types[-1] == "agent_end" and types.count("agent_end") == 1, types
    assert len(types) > 1 and types[1] == "turn_start", types
    created: list[Any] = []
    in_turn = False
    open_message: Any = None
    turn_message: Any = None
    turn_assistants = 0
    turn_results: list[ToolResultMessage] = []
    tool_state: dict[str, str] = {}
    turn_calls: list[str] = []
    for position, event in enumerate(events[1:-1], start=1):
        kind = event.type
        where = f"event #{position} ({kind})"
        if open_message is not None:
            if kind == "message_update":
                assert _role(open_message) == "assistant", f"{where}: update of a non-assistant"
                continue
            assert kind == "message_end", f"{where}: inside an open message"
            role = _role(event.message)
            assert role == _role(open_message), f"{where}: start/end roles differ"
            if role != "assistant":
                assert event.message is open_message, f"{where}: a different message ended"
            open_message = None
            created.append(event.message)
            if role == "assistant":
                turn_assistants += 1
                turn_message = event.message
            elif role == "toolResult":
                call_id = event.message.tool_call_id
                assert tool_state.get(call_id) == "ended", f"{where}: result before its end"
                tool_state[call_id] = "answered"
                turn_results.append(event.message)
            continue
        if kind == "turn_start":
            assert not in_turn, f"{where}: nested turn"
            in_turn, turn_message, turn_assistants = True, None, 0
            turn_results, turn_calls = [], []
        elif kind == "turn_end":
            assert in_turn, f"{where}: turn_end outside a turn"
            assert turn_assistants == 1, f"{where}: {turn_assistants} assistant messages"
            assert event.message is turn_message, f"{where}: turn_end names another message"
            assert list(event.tool_results) == turn_results, f"{where}: tool_results differ"
            asked = [c.id for c in turn_message.tool_calls()]
            if turn_message.stop_reason in ("error", "aborted"):
                assert not turn_calls, f"{where}: tools ran for a failed message"
            else:
                assert turn_calls == asked, f"{where}: calls {turn_calls} != asked {asked}"
                answered = [r.tool_call_id for r in turn_results]
                assert sorted(answered) == sorted(asked), f"{where}: answered {answered}"
            in_turn = False
        elif kind == "message_start":
            assert in_turn, f"{where}: message outside a turn"
            open_message = event.message
        elif kind in ("message_update", "message_end"):
            raise AssertionError(f"{where}: no message is open")
        elif kind == "tool_execution_start":
            assert in_turn and turn_assistants == 1, f"{where}: no assistant message yet"
            assert event.tool_call_id not in tool_state, f"{where}: started twice"
            tool_state[event.tool_call_id] = "started"
            turn_calls.append(event.tool_call_id)
        elif kind == "tool_execution_update":
            assert tool_state.get(event.tool_call_id) == "started", f"{where}: stray update"
        elif kind == "tool_execution_end":
            assert tool_state.get(event.tool_call_id) == "started", f"{where}: stray end"
            tool_state[event.tool_call_id] = "ended"
        else:
            raise AssertionError(f"{where}: unexpected event")
    assert not in_turn, "the last turn was not closed"
    end = events[-1]
    assert len(end.messages) == len(created), "agent_end.messages differs from the run's messages"
    for listed, made in zip(end.messages, created, strict=True):
        assert listed is made, "agent_end.messages differs from the run's messages"
    assert all(state == "answered" for state in tool_state.values()), tool_state


# --- running --------------------------------------------------------------------------------


@dataclass
class Run:
    messages: list[AgentMessage]
    events: list[Any]

    def summary(self, *, updates: bool = False) -> list[str]:
        return summarize(self.events, updates=updates)

    def of_type(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]

    @property
    def end(self) -> Any:
        return self.events[-1]


@dataclass
class ContextSnapshot:
    context: AgentContext
    messages_list: list[AgentMessage] = field(init=False)
    messages: list[AgentMessage] = field(init=False)
    tools_list: list[AgentTool] = field(init=False)
    tools: list[AgentTool] = field(init=False)
    system_prompt: str = field(init=False)

    def __post_init__(self) -> None:
        c = self.context
        self.messages_list, self.messages = c.messages, list(c.messages)
        self.tools_list, self.tools = c.tools, list(c.tools)
        self.system_prompt = c.system_prompt

    def assert_unchanged(self) -> None:
        c = self.context
        assert c.messages is self.messages_list and c.messages == self.messages
        assert c.tools is self.tools_list and c.tools == self.tools
        assert c.system_prompt == self.system_prompt


async def run(
    prompts: Iterable[AgentMessage] | None,
    context: AgentContext,
    config: AgentLoopConfig,
    stream_fn: Any,
    *,
    signal: AbortSignal | None = None,
    on_event: Callable[[Any], Any] | None = None,
) -> Run:
    """Run the loop (``prompts=None``: continue) recording every event; check the grammar and
    that the caller's context was not touched. ``on_event`` runs inside ``emit`` after the
    event is recorded (it may abort, raise, or await)."""
    events: list[Any] = []

    async def emit(event: Any) -> None:
        events.append(event)
        if on_event is not None:
            result = on_event(event)
            if inspect.isawaitable(result):
                await result

    snapshot = ContextSnapshot(context)
    if prompts is None:
        messages = await run_agent_loop_continue(
            context, config, emit, signal=signal, stream_fn=stream_fn
        )
    else:
        messages = await run_agent_loop(
            prompts, context, config, emit, signal=signal, stream_fn=stream_fn
        )
    snapshot.assert_unchanged()
    check_grammar(events)
    assert list(messages) == list(events[-1].messages)
    for returned, listed in zip(messages, events[-1].messages, strict=True):
        assert returned is listed
    return Run(list(messages), events)


# --- hand-written streams --------------------------------------------------------------------


class BlockingStream:
    """A stream function that streams ``text`` in one delta, then blocks until cancelled or
    ``release`` is set (then finishes with ``done``). ``started`` is set once the delta is out;
    ``closed`` records that the stream's generator was closed."""

    def __init__(self, text: str = "Hel", *, after: str = "lo") -> None:
        self.text = text
        self.after = after
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.closed = False
        self.calls: list[tuple[Model, LlmContext, StreamOptions]] = []

    def __call__(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[Any]:
        self.calls.append((model, context, options))
        return self._play(model)

    async def _play(self, model: Model) -> AsyncIterator[Any]:
        partial = AssistantMessage(
            api=model.api, provider=model.provider, model=model.id, stop_reason="pending"
        )
        try:
            yield StreamStart(partial=partial)
            block = TextContent(text="")
            partial.content.append(block)
            yield TextStart(content_index=0, partial=partial)
            block.text += self.text
            yield TextDelta(content_index=0, delta=self.text, partial=partial)
            self.started.set()
            await self.release.wait()
            block.text += self.after
            yield TextDelta(content_index=0, delta=self.after, partial=partial)
            partial.stop_reason = "stop"
            yield StreamDone(reason="stop", message=partial)
        finally:
            self.closed = True


def events_stream(*events: Any) -> Callable[..., AsyncIterator[Any]]:
    """A stream function yielding exactly ``events`` on every call."""

    async def play() -> AsyncIterator[Any]:
        for event in events:
            yield event

    def stream_fn(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        return play()

    return stream_fn
