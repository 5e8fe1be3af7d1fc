"""The hot path builds what the ordinary path builds: a streamed delta's ``message_update``
event, and a run's copy of its context."""

from __future__ import annotations

import dataclasses

from helpers import MODEL, make_tool, user

from agentcore_fsm import AgentContext, AgentLoopConfig, AssistantMessage, LoopMachine
from agentcore_fsm.core.events import MessageUpdateEvent, StreamStart, TextDelta, TextStart
from agentcore_fsm.core.machine import message_update
from agentcore_fsm.core.protocol import Start, StreamEvent


def _partial() -> AssistantMessage:
    return AssistantMessage(api="a", provider="p", model="m", stop_reason="pending")


def test_message_update_equals_the_keyword_construction() -> None:
    partial = _partial()
    event = TextDelta(content_index=0, delta="hi", partial=partial)
    fast = message_update(partial, event)
    slow = MessageUpdateEvent(message=partial, assistant_message_event=event)
    assert type(fast) is MessageUpdateEvent
    assert fast == slow
    assert fast.type == "message_update"
    assert fast.message is partial and fast.assistant_message_event is event
    assert fast.model_dump() == slow.model_dump()


def test_message_update_sets_every_field() -> None:
    # a field added to MessageUpdateEvent must be set by message_update too: this fails first
    names = [f.name for f in dataclasses.fields(MessageUpdateEvent)]
    assert names == ["type", "message", "assistant_message_event"]
    partial = _partial()
    update = message_update(partial, TextStart(content_index=0, partial=partial))
    for name in names:
        getattr(update, name)  # raises AttributeError for a slot left unset


def test_stream_update_answers_a_delta_as_stream_event_does() -> None:
    m = LoopMachine([user("hi")], AgentContext(), AgentLoopConfig(model=MODEL))
    m.feed(Start())
    partial = _partial()
    m.feed(StreamEvent(StreamStart(partial=partial)))
    start = TextStart(content_index=0, partial=partial)
    assert m.stream_update(start) == MessageUpdateEvent(
        message=partial, assistant_message_event=start
    )
    delta = TextDelta(content_index=0, delta="x", partial=partial)
    fast = m.stream_update(delta)
    (slow,) = m.feed(StreamEvent(delta)).events
    assert fast == slow
    assert m.stream_update(StreamStart(partial=partial)) is None  # not a block event
    assert m.stream_update(TextDelta(content_index=0, delta="x", partial="junk")) is None  # type: ignore[arg-type]
    assert m.stream_update(object()) is None


def test_context_copy_is_equal_independent_and_checks_the_tools() -> None:
    tool = make_tool("echo")
    context = AgentContext("sys", [user("a")], [tool])
    copied = AgentContext.copy(context)
    assert type(copied) is AgentContext and copied == context
    assert copied.messages is not context.messages and copied.tools is not context.tools
    copied.messages.append(user("b"))
    assert len(context.messages) == 1
    context.tools.append("junk")  # type: ignore[arg-type]
    try:
        AgentContext.copy(context)
    except TypeError as exc:
        assert "tools[1] must be an AgentTool" in str(exc)
    else:
        raise AssertionError("a junk tool was copied")


def test_grow_text_leaves_the_block_an_assignment_would() -> None:
    from agentcore_fsm.core.messages import TextContent, ThinkingContent, grow_text

    for make, field in ((TextContent, "text"), (ThinkingContent, "thinking")):
        fast, slow = make(**{field: "He"}), make(**{field: "He"})
        for delta in ("l", "lo", ", ünïcode \ud83d"):
            grow_text(fast, delta)
            setattr(slow, field, getattr(slow, field) + delta)
        assert fast == slow and getattr(fast, field) == "Hello, ünïcode \ud83d"
        assert fast.model_fields_set == slow.model_fields_set
        assert fast.model_dump(mode="json", by_alias=True) == slow.model_dump(
            mode="json", by_alias=True
        )
