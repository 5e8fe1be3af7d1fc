"""Tools and their pure helpers (docs/reference.md#tool-calls): the AgentTool shape, lookup,
argument validation,
the after-hook merge, and the loop's error results."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from agentcore_fsm import (
    AfterToolCallResult,
    AgentTool,
    AgentToolResult,
    BeforeToolCallResult,
    TextContent,
)
from agentcore_fsm.core.messages import Usage
from agentcore_fsm.core.tools import (
    ToolCallRejected,
    error_result,
    find_tool,
    merge_after,
    validate_arguments,
)


def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text="x")])


class Point(BaseModel):
    x: int
    y: int = 0
    tags: list[str] = Field(default_factory=list)


def test_agent_tool_positional_shape_and_defaults() -> None:
    schema = {"type": "object"}
    tool = AgentTool("move", "moves things", schema, execute)
    assert (tool.name, tool.description, tool.parameters, tool.execute) == (
        "move",
        "moves things",
        schema,
        execute,
    )
    assert (tool.label, tool.prepare_arguments, tool.execution_mode) == ("", None, None)
    labelled = AgentTool("m", "d", schema, execute, "Move", None, "sequential")
    assert (labelled.label, labelled.execution_mode) == ("Move", "sequential")


def test_json_schema_of_both_parameter_kinds() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    tool = AgentTool("t", "d", schema, execute)
    assert tool.json_schema() == schema and tool.json_schema() is not schema
    model_tool = AgentTool("p", "d", Point, execute)
    produced = model_tool.json_schema()
    assert produced["type"] == "object"
    assert set(produced["properties"]) == {"x", "y", "tags"}
    assert produced["required"] == ["x"]


def test_find_tool() -> None:
    a, b = AgentTool("a", "", {}, execute), AgentTool("b", "", {}, execute)
    assert find_tool([a, b], "b") is b
    with pytest.raises(ToolCallRejected) as info:
        find_tool([a, b], "c")
    assert str(info.value) == "Tool c not found"


def test_error_result_shape() -> None:
    result = error_result("went wrong")
    assert result.content == [TextContent(text="went wrong")]
    assert result.details is None and result.is_error is True
    assert (result.terminate, result.usage, result.added_tool_names) == (None, None, None)


def test_validate_arguments_with_a_json_schema_returns_the_dict() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    tool = AgentTool("count", "", schema, execute)
    raw = {"n": 3}
    assert validate_arguments(tool, raw) is raw
    with pytest.raises(ToolCallRejected) as info:
        validate_arguments(tool, {"n": "three"})
    assert str(info.value) == "\n".join(
        [
            'Validation failed for tool "count":',
            "  - n: must be integer, got string",
            "",
            "Received arguments:",
            "{",
            '  "n": "three"',
            "}",
        ]
    )


def test_validate_arguments_with_a_pydantic_model_returns_an_instance() -> None:
    tool = AgentTool("p", "", Point, execute)
    assert validate_arguments(tool, {"x": "4", "tags": ["a"]}) == Point(x=4, tags=["a"])
    with pytest.raises(ToolCallRejected) as info:
        validate_arguments(tool, {"y": 1, "tags": ["ok", 5]})
    assert str(info.value) == "\n".join(
        [
            'Validation failed for tool "p":',
            "  - x: Field required",
            "  - tags.1: Input should be a valid string",
            "",
            "Received arguments:",
            "{",
            '  "y": 1,',
            '  "tags": [',
            '    "ok",',
            "    5",
            "  ]",
            "}",
        ]
    )


def test_validation_of_a_non_object_names_the_root() -> None:
    tool = AgentTool("p", "", Point, execute)
    with pytest.raises(ToolCallRejected) as info:
        validate_arguments(tool, [1, 2])
    assert "  - root: " in str(info.value)
    assert str(info.value).endswith("Received arguments:\n[\n  1,\n  2\n]")


def test_empty_arguments_print_as_an_empty_object() -> None:
    tool = AgentTool("t", "", {"type": "object", "required": ["a"]}, execute)
    with pytest.raises(ToolCallRejected) as info:
        validate_arguments(tool, {})
    assert str(info.value).endswith(
        "  - a: required property is missing\n\nReceived arguments:\n{}"
    )


def test_merge_after_replaces_each_given_field() -> None:
    original = AgentToolResult(
        content=[TextContent(text="orig")], details={"a": 1}, usage=Usage(input=1), terminate=False
    )
    assert merge_after(original, False, None) == (original, False)
    same, flag = merge_after(original, True, AfterToolCallResult())
    assert same == original and flag is True
    merged, flag = merge_after(
        original,
        False,
        AfterToolCallResult(
            content=[TextContent(text="new")],
            details={"b": 2},
            is_error=True,
            usage=Usage(output=2),
            terminate=True,
        ),
    )
    assert merged.content == [TextContent(text="new")]
    assert merged.details == {"b": 2} and merged.usage == Usage(output=2)
    assert merged.terminate is True and merged.is_error is True and flag is True
    assert original.content == [TextContent(text="orig")]  # not mutated
    merged, flag = merge_after(original, True, {"is_error": False})
    assert flag is False and merged.is_error is False and merged.details == {"a": 1}


def test_hook_result_defaults() -> None:
    assert (BeforeToolCallResult().block, BeforeToolCallResult().reason) == (False, None)
    after = AfterToolCallResult()
    assert (after.content, after.details, after.is_error, after.usage, after.terminate) == (
        None,
        None,
        None,
        None,
        None,
    )


def test_arguments_a_provider_could_not_parse_always_fail_validation() -> None:
    """A provider hands unparsable tool-call JSON over as ``_raw_arguments`` plus
    ``_arguments_error``: validation names the parse error even for a tool whose schema would
    accept any object."""
    from agentcore_fsm.core.tools import ToolCallRejected, validate_arguments

    tool = AgentTool(
        name="anything", description="", parameters={"type": "object"}, execute=lambda *a: None
    )
    raw = {"_raw_arguments": '{"a": 1', "_arguments_error": "invalid JSON: Expecting ','"}
    with pytest.raises(ToolCallRejected) as info:
        validate_arguments(tool, raw)
    text = str(info.value)
    assert text.startswith('Validation failed for tool "anything":\n  - root: invalid JSON: ')
    assert '"_raw_arguments": "{\\"a\\": 1"' in text
    assert validate_arguments(tool, {"a": 1}) == {"a": 1}
