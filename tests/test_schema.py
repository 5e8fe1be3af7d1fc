"""The JSON-schema checker used for tools whose parameters are a JSON-schema dict."""

from __future__ import annotations

from typing import Any

import pytest

from agentcore_fsm.schema import validate_json_schema


@pytest.mark.parametrize(
    ("type_name", "good", "bad"),
    [
        ("integer", [0, -3, 2.0], [1.5, True, "1", None]),
        ("number", [0, 1.5, -2], [True, "1", None]),
        ("string", ["", "x"], [1, None, ["x"]]),
        ("boolean", [True, False], [0, 1, "true", None]),
        ("null", [None], [0, "", False]),
        ("array", [[], [1, "a"]], [(), {}, "[]"]),
        ("object", [{}, {"a": 1}], [[], "{}", None]),
    ],
)
def test_types(type_name: str, good: list[Any], bad: list[Any]) -> None:
    for value in good:
        assert validate_json_schema({"type": type_name}, value) == [], value
    for value in bad:
        problems = validate_json_schema({"type": type_name}, value)
        assert len(problems) == 1, value
        assert problems[0][0] == "root"
        assert problems[0][1].startswith(f"must be {type_name}, got "), problems


def test_type_messages_name_what_came() -> None:
    assert validate_json_schema({"type": "integer"}, "7") == [
        ("root", "must be integer, got string")
    ]
    assert validate_json_schema({"type": "string"}, True) == [
        ("root", "must be string, got boolean")
    ]
    assert validate_json_schema({"type": "object"}, None) == [("root", "must be object, got null")]
    assert validate_json_schema({"type": ["string", "null"]}, 3) == [
        ("root", "must be string or null, got integer")
    ]
    assert validate_json_schema({"type": ["string", "null"]}, None) == []


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "nested": {
            "type": "object",
            "properties": {"depth": {"type": "integer", "minimum": 0}},
            "required": ["depth"],
        },
    },
    "required": ["name", "nested"],
    "additionalProperties": False,
}


def test_every_problem_is_reported_with_its_path() -> None:
    value = {"name": "", "tags": ["a", 2, "c"], "nested": {"depth": -1}, "extra": 1}
    assert validate_json_schema(SCHEMA, value) == [
        ("name", "must have at least 1 characters"),
        ("tags.1", "must be string, got integer"),
        ("tags", "must have at most 2 items"),
        ("nested.depth", "must be >= 0"),
        ("extra", "property is not allowed"),
    ]


def test_required_properties() -> None:
    assert validate_json_schema(SCHEMA, {}) == [
        ("name", "required property is missing"),
        ("nested", "required property is missing"),
    ]
    assert validate_json_schema(SCHEMA, {"name": "x", "nested": {}}) == [
        ("nested.depth", "required property is missing")
    ]
    assert validate_json_schema(SCHEMA, {"name": "x", "nested": {"depth": 0}}) == []


def test_additional_properties_as_a_schema() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert validate_json_schema(schema, {"a": 1, "b": "x"}) == [
        ("b", "must be integer, got string")
    ]


def test_enum_const_and_pattern_show_json_values() -> None:
    assert validate_json_schema({"enum": ["a", True, None]}, "b") == [
        ("root", 'must be one of "a", true, null')
    ]
    assert validate_json_schema({"enum": [1, 2]}, 2) == []
    assert validate_json_schema({"const": "fixed"}, "other") == [
        ("root", 'must be equal to "fixed"')
    ]
    assert validate_json_schema({"type": "string", "pattern": "^[a-z]+$"}, "ABC") == [
        ("root", 'must match pattern "^[a-z]+$"')
    ]
    assert validate_json_schema({"type": "string", "pattern": "b"}, "abc") == []  # search


def test_numeric_and_length_bounds() -> None:
    schema = {"type": "number", "minimum": 1, "maximum": 3}
    assert validate_json_schema(schema, 0) == [("root", "must be >= 1")]
    assert validate_json_schema(schema, 4) == [("root", "must be <= 3")]
    assert validate_json_schema(schema, 3) == []
    ex = {"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 3}
    assert validate_json_schema(ex, 1) == [("root", "must be > 1")]
    assert validate_json_schema(ex, 3) == [("root", "must be < 3")]
    assert validate_json_schema(ex, 2) == []
    text = {"type": "string", "maxLength": 2}
    assert validate_json_schema(text, "abc") == [("root", "must have at most 2 characters")]
    items = {"type": "array", "minItems": 1}
    assert validate_json_schema(items, []) == [("root", "must have at least 1 items")]


def test_combinators() -> None:
    any_of = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert validate_json_schema(any_of, 1) == []
    assert validate_json_schema(any_of, None) == [("root", "must match any of the allowed schemas")]
    one_of = {"oneOf": [{"type": "number"}, {"type": "integer"}]}
    assert validate_json_schema(one_of, 1.5) == []
    assert validate_json_schema(one_of, 1) == [
        ("root", "must match exactly one of the allowed schemas")
    ]
    all_of = {"allOf": [{"type": "integer"}, {"minimum": 5}]}
    assert validate_json_schema(all_of, 3) == [("root", "must be >= 5")]
    assert validate_json_schema(all_of, 7) == []


def test_false_schema_and_unknown_keywords() -> None:
    schema = {"type": "object", "properties": {"never": False}, "x-custom": 1, "format": "email"}
    assert validate_json_schema(schema, {"never": 1}) == [("never", "no value is allowed here")]
    assert validate_json_schema(schema, {"other": "not an email"}) == []
    assert validate_json_schema({}, object()) == []


def test_a_type_failure_stops_the_checks_below_it() -> None:
    assert validate_json_schema({"type": "object", "required": ["a"]}, []) == [
        ("root", "must be object, got array")
    ]
