"""The pieces both providers share, and the model table."""

from __future__ import annotations

from typing import Any

import pytest

from agentcore_fsm import (
    AssistantMessage,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentcore_fsm.core.messages import ModelCost, ThinkingContent, Usage
from agentcore_fsm.integrations.providers._common import (
    describe_error,
    parse_tool_arguments,
    prepare_transcript,
    safe_tool_id,
    set_cost,
)
from agentcore_fsm.integrations.providers.models import (
    get_model,
    list_models,
    openai_compatible_model,
)

# --- tool arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", {}),
        ("   ", {}),
        ("null", {}),
        ('{"a": 1, "nested": {"b": [1, 2]}}', {"a": 1, "nested": {"b": [1, 2]}}),
        (
            "[1, 2]",
            {"_raw_arguments": "[1, 2]", "_arguments_error": "expected a JSON object, got list"},
        ),
        (
            '"text"',
            {"_raw_arguments": '"text"', "_arguments_error": "expected a JSON object, got str"},
        ),
    ],
)
def test_parse_tool_arguments(raw: str, expected: dict[str, Any]) -> None:
    assert parse_tool_arguments(raw) == expected


def test_parse_tool_arguments_keeps_malformed_text() -> None:
    parsed = parse_tool_arguments('{"a": 1,')
    assert parsed["_raw_arguments"] == '{"a": 1,'
    assert parsed["_arguments_error"].startswith("invalid JSON: Expecting property name")


def test_safe_tool_id() -> None:
    assert safe_tool_id("call_abc-123") == "call_abc-123"
    assert safe_tool_id("fc_1|item/2") == "fc_1_item_2"
    assert safe_tool_id("x" * 80) == "x" * 64
    assert safe_tool_id("") == "call"


# --- transcripts ----------------------------------------------------------------------------


def test_prepare_transcript_keeps_a_clean_transcript_as_is() -> None:
    messages: list[Any] = [
        UserMessage(content="hi"),
        AssistantMessage(content=[ToolCall(id="c1", name="t")], stop_reason="toolUse"),
        ToolResultMessage(tool_call_id="c1", tool_name="t"),
        AssistantMessage(content=[TextContent(text="done")]),
    ]
    assert prepare_transcript(messages) == messages


def test_prepare_transcript_failed_messages() -> None:
    failed = AssistantMessage(
        content=[
            ThinkingContent(thinking="half a thou"),
            TextContent(text="Partial"),
            TextContent(text=""),
            ToolCall(id="c1", name="t"),
        ],
        stop_reason="aborted",
    )
    messages: list[Any] = [
        UserMessage(content="hi"),
        failed,
        ToolResultMessage(tool_call_id="c1", tool_name="t"),
        AssistantMessage(content=[TextContent(text="")], stop_reason="error"),
        UserMessage(content="again"),
    ]
    out = prepare_transcript(messages)
    assert [m.role for m in out] == ["user", "assistant", "user"]
    assert out[1].content == [TextContent(text="Partial")]
    assert out[1].stop_reason == "aborted"
    assert len(failed.content) == 4  # the caller's message is not changed


def test_prepare_transcript_answers_unanswered_calls_in_order() -> None:
    messages: list[Any] = [
        AssistantMessage(
            content=[ToolCall(id="c1", name="a"), ToolCall(id="c2", name="b")],
            stop_reason="toolUse",
        ),
        ToolResultMessage(tool_call_id="c2", tool_name="b", content=[TextContent(text="ok")]),
        # a duplicate result and an orphan are dropped
        ToolResultMessage(tool_call_id="c2", tool_name="b"),
        ToolResultMessage(tool_call_id="zz", tool_name="b"),
    ]
    out = prepare_transcript(messages)
    assert [(m.role, getattr(m, "tool_call_id", None)) for m in out] == [
        ("assistant", None),
        ("toolResult", "c2"),
        ("toolResult", "c1"),
    ]
    synthetic = out[2]
    assert synthetic.is_error and synthetic.tool_name == "a"
    assert synthetic.content == [TextContent(text="No result provided")]


def test_prepare_transcript_accepts_wire_dicts() -> None:
    out = prepare_transcript([{"role": "user", "content": "hi", "timestamp": 5}])  # type: ignore[list-item]
    assert out == [UserMessage(content="hi", timestamp=5)]


# --- cost and errors ------------------------------------------------------------------------


def test_set_cost() -> None:
    model = Model(id="m", cost=ModelCost(input=2.0, output=8.0, cache_read=0.5, cache_write=2.5))
    usage = Usage(input=1_000_000, output=500_000, cache_read=2_000_000, cache_write=100_000)
    set_cost(model, usage)
    assert usage.total_tokens == 3_600_000
    assert usage.cost.input == pytest.approx(2.0)
    assert usage.cost.output == pytest.approx(4.0)
    assert usage.cost.cache_read == pytest.approx(1.0)
    assert usage.cost.cache_write == pytest.approx(0.25)
    assert usage.cost.total == pytest.approx(7.25)


class FakeStatusError(Exception):
    def __init__(self, status_code: int, body: Any) -> None:
        super().__init__("Error code: ...")
        self.status_code = status_code
        self.body = body


class APIError(Exception):
    def __init__(self, body: Any) -> None:
        super().__init__("stream failed")
        self.body = body


def test_describe_error() -> None:
    assert (
        describe_error(FakeStatusError(404, {"message": "no such model", "type": "not_found"}))
        == "HTTP 404 (not_found): no such model"
    )
    assert (
        describe_error(FakeStatusError(400, {"error": {"message": "bad", "code": "invalid"}}))
        == "HTTP 400 (invalid): bad"
    )
    assert describe_error(FakeStatusError(503, {"error": "down"})) == "HTTP 503: down"
    assert describe_error(FakeStatusError(418, {"detail": "teapot"})) == (
        'HTTP 418: {"detail": "teapot"}'
    )
    assert describe_error(FakeStatusError(500, None)) == "HTTP 500: Error code: ..."
    assert describe_error(APIError({"message": "Overloaded", "type": "overloaded_error"})) == (
        "Stream error (overloaded_error): Overloaded"
    )
    assert describe_error(ValueError("boom")) == "ValueError: boom"
    assert describe_error(RuntimeError()) == "RuntimeError"


# --- the model table ------------------------------------------------------------------------


def test_get_model_openai() -> None:
    model = get_model("openai", "gpt-4o-mini")
    assert model == Model(
        id="gpt-4o-mini",
        name="gpt-4o-mini",
        api="openai-completions",
        provider="openai",
        base_url="https://api.openai.com/v1",
        reasoning=False,
        input=["text", "image"],
        cost=ModelCost(input=0.15, output=0.60, cache_read=0.075),
        context_window=128_000,
        max_tokens=16_384,
    )


def test_get_model_anthropic_alias_keeps_the_alias() -> None:
    model = get_model("anthropic", "claude-haiku-4-5")
    assert model.id == "claude-haiku-4-5"
    assert model.api == "anthropic-messages" and model.provider == "anthropic"
    assert model.base_url == "https://api.anthropic.com"
    assert model.reasoning and model.input == ["text", "image"]
    assert model.cost == ModelCost(input=1.0, output=5.0, cache_read=0.10, cache_write=1.25)
    assert (model.context_window, model.max_tokens) == (200_000, 64_000)
    assert get_model("anthropic", "claude-haiku-4-5-20251001").cost == model.cost


def test_every_listed_model_resolves() -> None:
    for entry in list_models():
        provider, model_id = entry.split("/", 1)
        model = get_model(provider, model_id)
        assert model.id == model_id and model.provider == provider
        assert model.cost.input > 0 and model.cost.output > model.cost.input
        assert model.context_window > 0 and model.max_tokens > 0
    assert "gpt-4o-mini" in list_models("openai")
    assert "claude-sonnet-4-6" in list_models("anthropic")


def test_unknown_models_and_providers() -> None:
    with pytest.raises(KeyError, match="Unknown openai model 'gpt-0'; known: "):
        get_model("openai", "gpt-0")
    with pytest.raises(KeyError, match="Unknown provider 'mistral'"):
        get_model("mistral", "x")


def test_openai_compatible_model() -> None:
    model = openai_compatible_model(
        "llama3.2", "http://localhost:11434/v1", provider="ollama", images=True, context_window=8192
    )
    assert model.api == "openai-completions" and model.provider == "ollama"
    assert model.base_url == "http://localhost:11434/v1"
    assert model.input == ["text", "image"] and model.context_window == 8192
    assert model.cost == ModelCost() and not model.reasoning
    assert openai_compatible_model("m", "http://x/v1").provider == "openai-compatible"
