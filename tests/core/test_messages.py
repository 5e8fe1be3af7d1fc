"""The data model (messages, stream and agent events): defaults, camelCase wire form, JSON round
trips, and validators built on first use."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any, Literal

import pytest
import trio
from helpers import make_tool, text_result
from pydantic import BaseModel, TypeAdapter, ValidationError

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentToolResult,
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.events import (
    AGENT_EVENT_ADAPTER,
    STREAM_EVENT_ADAPTER,
    AgentEndEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    StreamDone,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from agentcore_fsm.core.messages import Cost, Message, ModelCost, ThinkingContent, Usage
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

MESSAGE = TypeAdapter(Message)


def wire(value: Any) -> Any:
    """The JSON form, through an actual JSON string."""
    return json.loads(json.dumps(value.model_dump(mode="json", by_alias=True)))


# --- content blocks and messages ---------------------------------------------------------------


def test_content_blocks_on_the_wire() -> None:
    assert wire(TextContent(text="hi", text_signature="sig")) == {
        "type": "text",
        "text": "hi",
        "textSignature": "sig",
    }
    assert wire(ThinkingContent(thinking="hm", thinking_signature="s", redacted=True)) == {
        "type": "thinking",
        "thinking": "hm",
        "thinkingSignature": "s",
        "redacted": True,
    }
    assert wire(ImageContent(data="aGk=", mime_type="image/png")) == {
        "type": "image",
        "data": "aGk=",
        "mimeType": "image/png",
    }
    assert wire(ToolCall(id="c1", name="f", arguments={"a": [1, {"b": None}]})) == {
        "type": "toolCall",
        "id": "c1",
        "name": "f",
        "arguments": {"a": [1, {"b": None}]},
    }


def test_defaults() -> None:
    before = time.time_ns() // 1_000_000
    a = AssistantMessage()
    after = time.time_ns() // 1_000_000
    assert before <= a.timestamp <= after
    assert (a.api, a.provider, a.model, a.stop_reason) == ("unknown", "unknown", "unknown", "stop")
    assert a.usage == Usage() and a.usage.cost == Cost() and a.error_message is None
    assert a.content == []
    assert Usage().total_tokens == 0 and Cost().total == 0.0
    r = ToolResultMessage(tool_call_id="c", tool_name="t")
    assert (r.is_error, r.details, r.usage, r.added_tool_names) == (False, None, None, None)
    m = Model(id="gpt-x")
    assert (m.name, m.api, m.provider, m.base_url, m.reasoning) == (
        "gpt-x",
        "unknown",
        "unknown",
        "",
        False,
    )
    assert (m.input, m.cost, m.context_window, m.max_tokens, m.headers) == (
        ["text"],
        ModelCost(),
        0,
        0,
        None,
    )
    assert Model(id="a", name="Alpha").name == "Alpha"
    assert ThinkingContent(thinking="x").redacted is False


def test_assistant_message_round_trip() -> None:
    message = AssistantMessage(
        content=[
            ThinkingContent(thinking="plan"),
            TextContent(text="answer"),
            ToolCall(id="c1", name="f", arguments={"x": 1}),
        ],
        api="api",
        provider="prov",
        model="mod",
        usage=Usage(
            input=1,
            output=2,
            cache_read=3,
            cache_write=4,
            total_tokens=10,
            cost=Cost(input=0.1, output=0.2, cache_read=0.3, cache_write=0.4, total=1.0),
        ),
        stop_reason="toolUse",
        error_message=None,
        timestamp=123,
    )
    data = wire(message)
    assert data == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "plan", "thinkingSignature": None, "redacted": False},
            {"type": "text", "text": "answer", "textSignature": None},
            {"type": "toolCall", "id": "c1", "name": "f", "arguments": {"x": 1}},
        ],
        "api": "api",
        "provider": "prov",
        "model": "mod",
        "usage": {
            "input": 1,
            "output": 2,
            "cacheRead": 3,
            "cacheWrite": 4,
            "totalTokens": 10,
            "cost": {
                "input": 0.1,
                "output": 0.2,
                "cacheRead": 0.3,
                "cacheWrite": 0.4,
                "total": 1.0,
            },
        },
        "stopReason": "toolUse",
        "errorMessage": None,
        "timestamp": 123,
    }
    back = MESSAGE.validate_python(data)
    assert isinstance(back, AssistantMessage) and back == message
    assert AssistantMessage.model_validate_json(json.dumps(data)) == message
    assert back.tool_calls() == [message.content[2]]


def test_user_message_round_trip_with_text_or_blocks() -> None:
    plain = UserMessage(content="hello", timestamp=1)
    assert wire(plain) == {"role": "user", "content": "hello", "timestamp": 1}
    assert MESSAGE.validate_python(wire(plain)) == plain
    rich = UserMessage(
        content=[TextContent(text="look"), ImageContent(data="aGk=", mime_type="image/jpeg")],
        timestamp=2,
    )
    data = wire(rich)
    assert data["content"][1] == {"type": "image", "data": "aGk=", "mimeType": "image/jpeg"}
    back = MESSAGE.validate_python(data)
    assert isinstance(back, UserMessage) and back == rich


def test_tool_result_message_omits_empty_added_tool_names() -> None:
    base = ToolResultMessage(
        tool_call_id="c1",
        tool_name="f",
        content=[TextContent(text="ok")],
        details={"k": [1, 2]},
        usage=Usage(output=5),
        is_error=True,
        timestamp=9,
    )
    data = wire(base)
    assert "addedToolNames" not in data
    assert data["toolCallId"] == "c1" and data["toolName"] == "f" and data["isError"] is True
    assert data["details"] == {"k": [1, 2]} and data["usage"]["output"] == 5
    assert MESSAGE.validate_python(data) == base
    empty = base.model_copy(update={"added_tool_names": []})
    assert "addedToolNames" not in wire(empty)
    named = base.model_copy(update={"added_tool_names": ["new_tool"]})
    assert wire(named)["addedToolNames"] == ["new_tool"]
    assert MESSAGE.validate_python(wire(named)) == named


def test_snake_case_input_is_accepted_too() -> None:
    r = ToolResultMessage.model_validate(
        {"role": "toolResult", "tool_call_id": "c", "tool_name": "t", "is_error": True}
    )
    assert (r.tool_call_id, r.is_error) == ("c", True)
    m = Model.model_validate({"id": "x", "base_url": "http://127.0.0.1", "contextWindow": 8})
    assert (m.base_url, m.context_window) == ("http://127.0.0.1", 8)


def test_model_round_trip() -> None:
    model = Model(
        id="m1",
        name="Model One",
        api="openai-completions",
        provider="local",
        base_url="http://127.0.0.1:1",
        reasoning=True,
        input=["text", "image"],
        cost=ModelCost(input=1, output=2, cache_read=0.5, cache_write=3),
        context_window=1000,
        max_tokens=100,
        headers={"h": "v"},
    )
    data = wire(model)
    assert set(data) == {
        "id",
        "name",
        "api",
        "provider",
        "baseUrl",
        "reasoning",
        "input",
        "cost",
        "contextWindow",
        "maxTokens",
        "headers",
    }
    assert data["cost"] == {"input": 1.0, "output": 2.0, "cacheRead": 0.5, "cacheWrite": 3.0}
    assert Model.model_validate(data) == model


def test_discriminators_reject_unknown_kinds() -> None:
    with pytest.raises(ValidationError):
        MESSAGE.validate_python({"role": "system", "content": "x"})
    with pytest.raises(ValidationError):
        AssistantMessage.model_validate({"content": [{"type": "audio"}]})
    with pytest.raises(ValidationError):
        AssistantMessage.model_validate({"stopReason": "finished"})


def test_agent_tool_result_round_trip() -> None:
    result = AgentToolResult(
        content=[TextContent(text="r")],
        details={"d": 1},
        usage=Usage(input=1),
        added_tool_names=["x"],
        terminate=True,
        is_error=False,
    )
    data = wire(result)
    assert data["addedToolNames"] == ["x"] and data["terminate"] is True
    assert data["isError"] is False
    assert AgentToolResult.model_validate(data) == result


# --- events -----------------------------------------------------------------------------------


def _partial() -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text="ab"), ThinkingContent(thinking="t"), ToolCall(id="c", name="f")],
        stop_reason="pending",
        timestamp=5,
    )


def all_stream_events() -> list[Any]:
    p = _partial()
    final = p.model_copy(update={"stop_reason": "toolUse"})
    failed = p.model_copy(update={"stop_reason": "error", "error_message": "x"})
    return [
        StreamStart(partial=p),
        TextStart(content_index=0, partial=p),
        TextDelta(content_index=0, delta="a", partial=p),
        TextEnd(content_index=0, content="ab", partial=p),
        ThinkingStart(content_index=1, partial=p),
        ThinkingDelta(content_index=1, delta="t", partial=p),
        ThinkingEnd(content_index=1, content="t", partial=p),
        ToolCallStart(content_index=2, partial=p),
        ToolCallDelta(content_index=2, delta="{}", partial=p),
        ToolCallEnd(content_index=2, tool_call=ToolCall(id="c", name="f"), partial=p),
        StreamDone(reason="toolUse", message=final),
        StreamError(reason="error", error=failed),
    ]


@pytest.mark.parametrize("event", all_stream_events(), ids=lambda e: e.type)
def test_stream_events_round_trip(event: Any) -> None:
    data = wire(event)
    assert data["type"] == event.type
    if hasattr(event, "content_index"):
        assert "contentIndex" in data and "content_index" not in data
    if event.type == "toolcall_end":
        assert data["toolCall"] == {"type": "toolCall", "id": "c", "name": "f", "arguments": {}}
    back = STREAM_EVENT_ADAPTER.validate_python(data)
    assert type(back) is type(event) and back == event
    assert type(event).model_validate(data) == event
    assert type(event).model_validate_json(event.model_dump_json(by_alias=True)) == event


def all_agent_events() -> list[Any]:
    p = _partial()
    user = UserMessage(content="q", timestamp=1)
    result = ToolResultMessage(
        tool_call_id="c", tool_name="f", content=[TextContent(text="r")], timestamp=2
    )
    tool_result = AgentToolResult(content=[TextContent(text="r")], details={"n": 1})
    return [
        AgentStartEvent(),
        TurnStartEvent(),
        MessageStartEvent(message=user),
        MessageUpdateEvent(
            message=p, assistant_message_event=TextDelta(content_index=0, delta="a", partial=p)
        ),
        MessageEndEvent(message=p),
        ToolExecutionStartEvent(tool_call_id="c", tool_name="f", args={"a": 1}),
        ToolExecutionUpdateEvent(
            tool_call_id="c", tool_name="f", args={"a": 1}, partial_result=tool_result
        ),
        ToolExecutionEndEvent(tool_call_id="c", tool_name="f", result=tool_result, is_error=True),
        MessageEndEvent(message=result),
        TurnEndEvent(message=p, tool_results=[result]),
        AgentEndEvent(messages=[user, p, result], reason="stopped"),
    ]


@pytest.mark.parametrize("event", all_agent_events(), ids=lambda e: e.type)
def test_agent_events_round_trip(event: Any) -> None:
    data = wire(event)
    assert data["type"] == event.type
    back = AGENT_EVENT_ADAPTER.validate_python(data)
    assert type(back) is type(event) and back == event
    assert type(event).model_validate(data) == event


def test_agent_event_field_names_on_the_wire() -> None:
    events = {e.type: wire(e) for e in all_agent_events()}
    assert set(events["tool_execution_update"]) == {
        "type",
        "toolCallId",
        "toolName",
        "args",
        "partialResult",
    }
    assert set(events["tool_execution_end"]) == {
        "type",
        "toolCallId",
        "toolName",
        "result",
        "isError",
    }
    assert set(events["message_update"]) == {"type", "message", "assistantMessageEvent"}
    assert set(events["turn_end"]) == {"type", "message", "toolResults"}
    assert set(events["agent_end"]) == {"type", "messages", "reason"}
    assert events["agent_end"]["reason"] == "stopped"
    assert [m["role"] for m in events["agent_end"]["messages"]] == [
        "user",
        "assistant",
        "toolResult",
    ]
    assert events["agent_start"] == {"type": "agent_start"}


class Note(BaseModel):
    """A custom message the application defines."""

    role: Literal["note"] = "note"
    text: str


def test_custom_messages_are_carried_and_come_back_as_plain_data() -> None:
    """Decision: known roles are validated back into their classes; a custom message is dumped
    by pydantic and comes back as the plain dict (the application owns its class)."""
    note = Note(text="remember")
    event = AgentEndEvent(messages=[UserMessage(content="q", timestamp=1), note])
    data = wire(event)
    assert data["messages"][1] == {"role": "note", "text": "remember"}
    back = AgentEndEvent.model_validate(data)
    assert isinstance(back.messages[0], UserMessage)
    assert back.messages[1] == {"role": "note", "text": "remember"}
    assert Note.model_validate(back.messages[1]) == note


def test_a_recorded_run_round_trips_event_by_event() -> None:
    """Every event of a real run (text, thinking, tools, updates) survives JSON."""
    dumps: list[Any] = []
    originals: list[Any] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        on_update(text_result("half"))
        return text_result("done", details={"rows": 3})

    def emit(event: Any) -> None:
        # dumped when delivered: the streamed partial changes later
        originals.append(event)
        dumps.append(json.dumps(event.model_dump(mode="json", by_alias=True)))

    async def main() -> None:
        faux = FauxProvider(
            [
                faux_response(
                    "calling", thinking="why", tool_calls=[faux_tool_call("t", {"q": "ü"}, id="c1")]
                ),
                faux_response("finished"),
            ],
            chunk_size=3,
        )
        await run_agent_loop(
            [UserMessage(content="go")],
            AgentContext(tools=[make_tool("t", execute)]),
            AgentLoopConfig(model=Model(id="m")),
            emit,
            stream_fn=faux,
        )

    trio.run(main)
    assert len(dumps) > 20
    kinds = set()
    for text, original in zip(dumps, originals, strict=True):
        back = AGENT_EVENT_ADAPTER.validate_json(text)
        kinds.add(back.type)
        assert type(back) is type(original)
        assert json.dumps(back.model_dump(mode="json", by_alias=True)) == text
    assert kinds == {
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
    }


FIRST_USE = """
import json
from pydantic import ValidationError
from agentcore_fsm import AssistantMessage, TextContent, UserMessage
from agentcore_fsm.core.events import AGENT_EVENT_ADAPTER
from agentcore_fsm.core.messages import MESSAGE_ADAPTER

def built():
    return [
        UserMessage.__pydantic_complete__,
        AssistantMessage.__pydantic_complete__,
        MESSAGE_ADAPTER.pydantic_complete,
        AGENT_EVENT_ADAPTER.pydantic_complete,
    ]

report = {"after_import": built()}
try:
    AssistantMessage(content=[{"type": "nope"}])
except ValidationError as exc:
    report["first_error"] = exc.errors()[0]["type"]
report["message"] = MESSAGE_ADAPTER.validate_python({"role": "user", "content": "hi"}).content
event = AGENT_EVENT_ADAPTER.validate_python({"type": "turn_end", "message": {"role": "user",
    "content": "x"}, "toolResults": []})
report["event"] = type(event.message).__name__
report["dump"] = AssistantMessage(content=[TextContent(text="a")]).model_dump(by_alias=True)[
    "stopReason"]
report["after_use"] = built()
print(json.dumps(report))
"""


def test_validators_are_built_on_first_use_and_validate_from_the_start() -> None:
    """Importing builds no validator (that is import time); the first use builds it and
    validates exactly as an eagerly built one would. A fresh interpreter: this one has used
    every model already."""
    proc = subprocess.run([sys.executable, "-c", FIRST_USE], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report == {
        "after_import": [False, False, False, False],
        "first_error": "union_tag_invalid",
        "message": "hi",
        "event": "UserMessage",
        "dump": "stop",
        "after_use": [False, True, True, True],
    }
