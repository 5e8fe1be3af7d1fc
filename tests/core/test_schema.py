"""Tools whose parameters are a JSON-schema dict: the whole of JSON Schema is enforced (with
jsonschema), every problem is listed with its path, and a bad schema is refused when the tool is
made."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from agentcore_fsm import AgentTool, AgentToolResult, TextContent
from agentcore_fsm.core import schema as schema_module
from agentcore_fsm.core.schema import compile_schema
from agentcore_fsm.core.tools import ToolCallRejected, validate_arguments


def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text="x")])


def problems(schema: dict[str, Any], value: Any) -> list[tuple[str, str]]:
    return compile_schema(schema, "t").problems(value)


def rejection(schema: Any, raw: Any, name: str = "t") -> str:
    """The text of the error result for ``raw`` (the tool is made with ``schema``)."""
    tool = AgentTool(name, "", schema, execute)
    with pytest.raises(ToolCallRejected) as info:
        validate_arguments(tool, raw)
    return str(info.value)


def problem_lines(text: str) -> list[str]:
    """The ``  - path: message`` lines of an error text."""
    head, _, _ = text.partition("\n\nReceived arguments:")
    return head.splitlines()[1:]


# --- types and simple keywords -----------------------------------------------------------------


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
        assert problems({"type": type_name}, value) == [], value
    for value in bad:
        found = problems({"type": type_name}, value)
        assert len(found) == 1, value
        assert found[0][0] == "root"
        assert found[0][1].startswith(f"must be {type_name}, got "), found


def test_type_messages_name_what_came() -> None:
    assert problems({"type": "integer"}, "7") == [("root", "must be integer, got string")]
    assert problems({"type": "string"}, True) == [("root", "must be string, got boolean")]
    assert problems({"type": "object"}, None) == [("root", "must be object, got null")]
    assert problems({"type": ["string", "null"]}, 3) == [
        ("root", "must be string or null, got integer")
    ]
    assert problems({"type": ["string", "null"]}, None) == []


def test_enum_const_and_pattern_show_json_values() -> None:
    assert problems({"enum": ["a", True, None]}, "b") == [
        ("root", 'must be one of "a", true, null')
    ]
    assert problems({"enum": [1, 2]}, 2) == []
    assert problems({"const": "fixed"}, "other") == [("root", 'must be equal to "fixed"')]
    assert problems({"const": False}, 0) == [("root", "must be equal to false")]
    assert problems({"type": "string", "pattern": "^[a-z]+$"}, "ABC") == [
        ("root", 'must match pattern "^[a-z]+$"')
    ]
    assert problems({"type": "string", "pattern": "b"}, "abc") == []  # a search, not a match


def test_numeric_and_length_bounds() -> None:
    schema = {"type": "number", "minimum": 1, "maximum": 3}
    assert problems(schema, 0) == [("root", "must be >= 1")]
    assert problems(schema, 4) == [("root", "must be <= 3")]
    assert problems(schema, 3) == []
    ex = {"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 3}
    assert problems(ex, 1) == [("root", "must be > 1")]
    assert problems(ex, 3) == [("root", "must be < 3")]
    assert problems(ex, 2) == []
    assert problems({"multipleOf": 0.5}, 0.7) == [("root", "must be a multiple of 0.5")]
    assert problems({"type": "string", "maxLength": 2}, "abc") == [
        ("root", "must have at most 2 characters")
    ]
    assert problems({"type": "string", "minLength": 1}, "") == [
        ("root", "must have at least 1 character")
    ]
    assert problems({"type": "array", "minItems": 1}, []) == [("root", "must have at least 1 item")]
    assert problems({"type": "array", "maxItems": 2}, [1, 2, 3]) == [
        ("root", "must have at most 2 items")
    ]
    assert problems({"uniqueItems": True}, [1, 2, 1]) == [
        ("root", "must not contain duplicate items")
    ]


def test_a_type_failure_stops_the_checks_below_it() -> None:
    assert problems({"type": "object", "required": ["a"]}, []) == [
        ("root", "must be object, got array")
    ]


def test_unknown_keywords_are_ignored() -> None:
    schema = {"type": "object", "x-custom": 1, "properties": {"a": {"x-hint": "anything"}}}
    assert problems(schema, {"a": [1]}) == []
    assert problems({}, {"any": ["thing"]}) == []


def test_false_schema_is_reported_at_the_value_it_refuses() -> None:
    schema = {
        "type": "object",
        "properties": {"never": False},
        "patternProperties": {"^x-": False},
    }
    assert problems(schema, {"never": 1, "x-a": 2, "ok": 3}) == [
        ("never", "no value is allowed here"),
        ("x-a", "no value is allowed here"),
    ]


# --- objects -----------------------------------------------------------------------------------


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


def test_every_problem_is_reported_with_its_path_sorted_by_path() -> None:
    value = {"name": "", "tags": ["a", 2, "c"], "nested": {"depth": -1}, "extra": 1}
    assert problems(SCHEMA, value) == [
        ("extra", "property is not allowed"),
        ("name", "must have at least 1 character"),
        ("nested.depth", "must be >= 0"),
        ("tags", "must have at most 2 items"),
        ("tags.1", "must be string, got integer"),
    ]


def test_array_indices_sort_as_numbers() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    found = problems(schema, ["x"] * 12)
    assert [path for path, _ in found] == [str(index) for index in range(12)]


def test_required_properties_are_reported_at_their_own_path() -> None:
    assert problems(SCHEMA, {}) == [
        ("name", "required property is missing"),
        ("nested", "required property is missing"),
    ]
    assert problems(SCHEMA, {"name": "x", "nested": {}}) == [
        ("nested.depth", "required property is missing")
    ]
    assert problems(SCHEMA, {"name": "x", "nested": {"depth": 0}}) == []


def test_additional_properties_as_a_schema_and_with_patterns() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert problems(schema, {"a": 1, "b": "x"}) == [("b", "must be integer, got string")]
    closed = {
        "type": "object",
        "properties": {"a": {}},
        "patternProperties": {"^x-": {}},
        "additionalProperties": False,
    }
    assert problems(closed, {"a": 1, "x-y": 2, "c": 3, "b": 4}) == [
        ("b", "property is not allowed"),
        ("c", "property is not allowed"),
    ]


def test_min_and_max_properties() -> None:
    assert problems({"type": "object", "minProperties": 2}, {"a": 1}) == [
        ("root", "must have at least 2 properties")
    ]
    assert problems({"type": "object", "maxProperties": 1}, {"a": 1, "b": 2}) == [
        ("root", "must have at most 1 property")
    ]
    assert problems({"type": "object", "minProperties": 2}, {"a": 1, "b": 2}) == []


def test_dependent_required() -> None:
    schema = {"type": "object", "dependentRequired": {"card": ["cvv", "expiry"]}}
    assert problems(schema, {"card": "4111"}) == [
        ("cvv", 'required property is missing (required when "card" is set)'),
        ("expiry", 'required property is missing (required when "card" is set)'),
    ]
    assert problems(schema, {"card": "4111", "cvv": "1", "expiry": "12/30"}) == []
    assert problems(schema, {"cvv": "1"}) == []


def test_if_then_else() -> None:
    schema = {
        "type": "object",
        "properties": {"country": {"type": "string"}},
        "if": {"properties": {"country": {"const": "US"}}, "required": ["country"]},
        "then": {"required": ["zip"]},
        "else": {"required": ["postcode"]},
    }
    assert problems(schema, {"country": "US"}) == [("zip", "required property is missing")]
    assert problems(schema, {"country": "FR"}) == [("postcode", "required property is missing")]
    assert problems(schema, {"country": "US", "zip": "12345"}) == []
    assert problems(schema, {"country": "FR", "postcode": "75001"}) == []


def test_unevaluated_properties() -> None:
    schema = {
        "type": "object",
        "allOf": [{"properties": {"a": {"type": "integer"}}}],
        "unevaluatedProperties": False,
    }
    assert problems(schema, {"a": 1}) == []
    assert problems(schema, {"a": 1, "b": 2, "c": None}) == [
        ("b", "property is not allowed"),
        ("c", "property is not allowed"),
    ]


def test_property_names() -> None:
    schema = {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}
    assert problems(schema, {"ok": 1, "Bad Key": 2}) == [
        ("root", 'property name "Bad Key" must match pattern "^[a-z]+$"')
    ]


# --- arrays ------------------------------------------------------------------------------------


def test_prefix_items() -> None:
    schema = {
        "type": "array",
        "prefixItems": [{"type": "string"}, {"type": "integer"}],
        "items": False,
    }
    assert problems(schema, ["a", 1]) == []
    assert problems(schema, ["a", "b"]) == [("1", "must be integer, got string")]
    assert problems(schema, ["a", "b", 3]) == [
        ("root", "must have at most 2 items"),
        ("1", "must be integer, got string"),
    ]


def test_contains() -> None:
    schema = {"type": "array", "contains": {"type": "integer"}, "maxContains": 2}
    assert problems(schema, ["a"]) == [
        ("root", 'must contain at least 1 item matching {"type": "integer"}')
    ]
    assert problems(schema, [1, 2, 3]) == [
        ("root", 'must contain at most 2 items matching {"type": "integer"}')
    ]
    assert problems(schema, ["a", 1]) == []


# --- references and combinators ---------------------------------------------------------------


REF_SCHEMA = {
    "type": "object",
    "properties": {"p": {"$ref": "#/$defs/P"}},
    "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}}}},
}


def test_refs_into_defs_are_followed() -> None:
    assert problems(REF_SCHEMA, {"p": {"x": "not an int"}}) == [
        ("p.x", "must be integer, got string")
    ]
    assert problems(REF_SCHEMA, {"p": {"x": 1}}) == []
    text = rejection(REF_SCHEMA, {"p": {"x": "not an int"}})
    assert problem_lines(text) == ["  - p.x: must be integer, got string"]


def test_recursive_refs() -> None:
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
                "required": ["value"],
            }
        },
        "$ref": "#/$defs/node",
    }
    value = {"value": 1, "children": [{"value": 2, "children": [{"value": "three"}, {}]}]}
    assert problems(schema, value) == [
        ("children.0.children.0.value", "must be integer, got string"),
        ("children.0.children.1.value", "required property is missing"),
    ]


def test_not() -> None:
    schema = {"type": "object", "properties": {"name": {"not": {"const": "admin"}}}}
    assert problems(schema, {"name": "admin"}) == [("name", 'must not match {"const": "admin"}')]
    assert problems(schema, {"name": "bob"}) == []


def test_all_of_lists_the_problems_of_each_part() -> None:
    schema = {"allOf": [{"type": "integer"}, {"minimum": 5}, {"multipleOf": 2}]}
    assert problems(schema, 3) == [("root", "must be >= 5"), ("root", "must be a multiple of 2")]
    assert problems(schema, 8) == []


def test_any_of_alternatives_of_other_types_merge_into_one_type_problem() -> None:
    schema = {"anyOf": [{"type": "string"}, {"type": ["integer", "null"]}]}
    assert problems(schema, 1) == []
    assert problems(schema, 1.5) == [("root", "must be string or integer or null, got number")]


def test_any_of_where_no_alternative_fits_names_what_each_wanted() -> None:
    schema = {"anyOf": [{"const": "auto"}, {"type": "integer", "minimum": 1}]}
    assert problems(schema, "x") == [
        (
            "root",
            'must match one of the 2 alternatives (anyOf): must be equal to "auto"; '
            "or must be integer, got string",
        )
    ]


def test_any_of_with_one_fitting_alternative_reports_its_problems() -> None:
    schema = {"anyOf": [{"const": "auto"}, {"type": "integer", "minimum": 1}]}
    assert problems(schema, 0) == [("root", "must be >= 1")]
    optional_object = {
        "anyOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["b"]},
            {"type": "null"},
        ]
    }
    assert problems(optional_object, {"a": "x"}) == [
        ("a", "must be integer, got string"),
        ("b", "required property is missing"),
    ]


def test_any_of_with_several_fitting_alternatives_reports_the_closest() -> None:
    cat = {
        "type": "object",
        "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
        "required": ["kind", "lives"],
    }
    dog = {
        "type": "object",
        "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}},
        "required": ["kind", "good"],
    }
    schema = {"type": "object", "properties": {"pet": {"anyOf": [cat, dog]}}}
    closest = (
        "must match one of the 2 alternatives (anyOf); the closest is alternative 2, "
        "whose problems are listed"
    )
    assert problems(schema, {"pet": {"kind": "dog", "good": "yes"}}) == [
        ("pet", closest),
        ("pet.good", "must be boolean, got string"),
    ]
    # a tie goes to the first alternative
    assert problems(schema, {"pet": {"kind": "bird"}}) == [
        ("pet", closest.replace("alternative 2", "alternative 1")),
        ("pet.kind", 'must be equal to "cat"'),
        ("pet.lives", "required property is missing"),
    ]


def test_one_of() -> None:
    schema = {"oneOf": [{"type": "number"}, {"type": "integer"}]}
    assert problems(schema, 1.5) == []
    assert problems(schema, 1) == [
        ("root", "must match exactly one of the 2 alternatives (oneOf), not more")
    ]
    assert problems(schema, "1") == [("root", "must be number or integer, got string")]


def test_a_draft_7_schema_is_checked_by_draft_7_rules() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "string"}],
        "additionalItems": False,
    }
    assert problems(schema, ["a"]) == []
    assert problems(schema, [1, 2]) == [
        ("root", "must have at most 1 item"),
        ("0", "must be string, got integer"),
    ]


# --- formats -----------------------------------------------------------------------------------


def test_formats_the_standard_library_can_check_are_enforced() -> None:
    schema = {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "id": {"type": "string", "format": "uuid"},
            "mail": {"type": "string", "format": "email"},
            "ip": {"type": "string", "format": "ipv4"},
            "site": {"type": "string", "format": "uri"},  # an annotation only
        },
    }
    good = {
        "when": "2024-05-01T13:45:00.5+02:00",
        "day": "2024-02-29",
        "id": "123e4567-e89b-12d3-a456-426614174000",
        "mail": "a@example.com",
        "ip": "10.0.0.1",
        "site": "not checked",
    }
    assert problems(schema, good) == []
    bad = {
        "when": "2024-05-01T13:45",
        "day": "2023-02-29",
        "id": "nope",
        "mail": "nobody",
        "ip": "300.1.1.1",
        "site": "::",
    }
    assert problems(schema, bad) == [
        ("day", 'must match format "date" (for example "2024-05-01")'),
        ("id", 'must match format "uuid"'),
        ("ip", 'must match format "ipv4"'),
        ("mail", 'must match format "email"'),
        ("when", 'must match format "date-time" (RFC 3339, for example "2024-05-01T13:45:00Z")'),
    ]


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("2024-05-01T13:45:00Z", True),
        ("2024-05-01t13:45:00z", True),
        ("2016-12-31T23:59:60+00:00", True),  # a leap second
        ("2024-05-01T13:45:00.123456789-05:30", True),
        ("2024-05-01T13:45:00", False),  # no offset
        ("2024-05-01 13:45:00Z", False),
        ("2024-13-01T13:45:00Z", False),
        ("2024-05-01T24:00:00Z", False),
        ("2024-05-01T13:45:00+24:00", False),
    ],
)
def test_date_time_format(text: str, valid: bool) -> None:
    assert (problems({"format": "date-time"}, text) == []) is valid


# --- through the tool: the text, the cached validator, bad schemas -----------------------------


class Address(BaseModel):
    street: str
    city: str
    zip: str = Field(pattern=r"^\d{5}$")


class Item(BaseModel):
    sku: str
    quantity: int = Field(ge=1)


class Order(BaseModel):
    customer: str
    priority: Literal["low", "normal", "high"] = "normal"
    shipping: Address
    billing: Address | None = None
    items: list[Item] = Field(min_length=1)
    count: int | None = None


def test_a_pydantic_generated_schema_used_as_a_dict_lists_every_problem() -> None:
    schema = Order.model_json_schema()
    assert "$defs" in schema  # the nested models are references
    raw = {
        "customer": 5,
        "priority": "urgent",
        "shipping": {"street": "1 Main St", "zip": "1234"},
        "billing": {"street": 1, "city": "X", "zip": "12345"},
        "items": [{"sku": "A", "quantity": 0}, {"quantity": 2}],
        "count": "3",
    }
    text = rejection(schema, raw, name="order")
    assert problem_lines(text) == [
        "  - billing.street: must be string, got integer",
        "  - count: must be integer or null, got string",
        "  - customer: must be string, got integer",
        "  - items.0.quantity: must be >= 1",
        "  - items.1.sku: required property is missing",
        '  - priority: must be one of "low", "normal", "high"',
        "  - shipping.city: required property is missing",
        '  - shipping.zip: must match pattern "^\\\\d{5}$"',
    ]
    tool = AgentTool("order", "", schema, execute)
    good = {"customer": "ACME", "shipping": {"street": "s", "city": "c", "zip": "12345"}}
    good["items"] = [{"sku": "A", "quantity": 1}]
    assert validate_arguments(tool, good) is good


def test_the_exact_error_text() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "flag": {"const": True}},
        "required": ["n", "mode"],
    }
    text = rejection(schema, {"n": "three", "flag": None}, name="count")
    assert text == "\n".join(
        [
            'Validation failed for tool "count":',
            "  - flag: must be equal to true",
            "  - mode: required property is missing",
            "  - n: must be integer, got string",
            "",
            "Received arguments:",
            "{",
            '  "n": "three",',
            '  "flag": null',
            "}",
        ]
    )


def test_valid_arguments_are_returned_as_given() -> None:
    tool = AgentTool("t", "", REF_SCHEMA, execute)
    raw = {"p": {"x": 1}}
    assert validate_arguments(tool, raw) is raw


def test_unparsable_arguments_still_fail_first_with_the_parse_error() -> None:
    tool = AgentTool("t", "", REF_SCHEMA, execute)
    raw = {"_raw_arguments": '{"p": ', "_arguments_error": "invalid JSON: Expecting value"}
    with pytest.raises(ToolCallRejected) as info:
        validate_arguments(tool, raw)
    assert problem_lines(str(info.value)) == ["  - root: invalid JSON: Expecting value"]
    assert str(info.value).endswith(json.dumps(raw, indent=2))


def test_the_validator_is_compiled_once_when_the_tool_is_made() -> None:
    tool = AgentTool("t", "", REF_SCHEMA, execute)
    compiled = tool._validator
    assert compiled is not None and compiled.source is REF_SCHEMA
    validate_arguments(tool, {"p": {"x": 1}})
    with pytest.raises(ToolCallRejected):
        validate_arguments(tool, {"p": {"x": "1"}})
    assert tool._validator is compiled
    assert AgentTool("m", "", Address, execute)._validator is None  # pydantic: no schema


def test_assigning_new_parameters_compiles_and_checks_them() -> None:
    tool = AgentTool("t", "", {"type": "object"}, execute)
    assert validate_arguments(tool, {"a": 1}) == {"a": 1}
    tool.parameters = {"type": "object", "required": ["b"]}
    assert tool._validator is not None and tool._validator.source is tool.parameters
    with pytest.raises(ToolCallRejected, match="  - b: required property is missing"):
        validate_arguments(tool, {"a": 1})
    with pytest.raises(ValueError, match='Tool "t": its parameters are not a valid JSON schema'):
        tool.parameters = {"type": "integr"}
    tool.parameters = Address
    assert tool._validator is None
    assert validate_arguments(tool, {"street": "s", "city": "c", "zip": "12345"}) == Address(
        street="s", city="c", zip="12345"
    )


def test_parameters_set_behind_the_tools_back_are_compiled_when_validating() -> None:
    tool = AgentTool("t", "", {"type": "object"}, execute)
    object.__setattr__(tool, "parameters", {"type": "object", "required": ["b"]})
    with pytest.raises(ToolCallRejected, match="  - b: required property is missing"):
        validate_arguments(tool, {})
    assert tool._validator is not None and tool._validator.source is tool.parameters


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {"type": "object", "properties": {"x": {"type": "integr"}}},
            'Tool "bad": its parameters are not a valid JSON schema: at properties.x.type: ',
        ),
        (
            {"type": "object", "required": "x"},
            'Tool "bad": its parameters are not a valid JSON schema: at required: ',
        ),
        (
            {"properties": {"x": {"type": "string", "pattern": "(("}}},
            'Tool "bad": its parameters are not a valid JSON schema: at properties.x.pattern: ',
        ),
        (
            {"type": "object", "properties": {"p": {"$ref": "#/$defs/Missing"}}},
            'Tool "bad": its parameters schema has a "$ref" that cannot be resolved: '
            '"#/$defs/Missing" at properties.p.$ref',
        ),
        (
            {"$ref": "https://example.com/schema.json"},
            'Tool "bad": its parameters schema has a "$ref" that cannot be resolved: '
            '"https://example.com/schema.json" at $ref (remote schemas are not fetched)',
        ),
    ],
)
def test_an_invalid_schema_is_refused_when_the_tool_is_made(
    schema: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ValueError) as info:
        AgentTool("bad", "", schema, execute)
    assert str(info.value).startswith(expected), str(info.value)


def test_a_schema_found_valid_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[Any] = []
    check = schema_module._check_schema

    def counting(cls: Any, schema: dict[str, Any], tool_name: str) -> None:
        checked.append(schema)
        check(cls, schema, tool_name)

    monkeypatch.setattr(schema_module, "_check_schema", counting)
    monkeypatch.setattr(schema_module, "_checked", {})
    schema = {"type": "object", "properties": {"a": {"type": ["string"]}}}
    AgentTool("a", "", schema, execute)
    AgentTool("b", "", json.loads(json.dumps(schema)), execute)
    assert checked == [schema]
    # a tuple is no JSON array: looking the same as JSON does not skip the check
    with pytest.raises(ValueError, match=r"at properties\.a\.type: "):
        AgentTool("c", "", {"type": "object", "properties": {"a": {"type": ("string",)}}}, execute)
    assert len(checked) == 2


def test_a_ref_in_data_or_a_property_named_ref_is_no_reference() -> None:
    schema = {
        "type": "object",
        "properties": {"$ref": {"type": "string"}, "x": {"default": {"$ref": "#/nowhere"}}},
    }
    tool = AgentTool("t", "", schema, execute)
    assert validate_arguments(tool, {"$ref": "a"}) == {"$ref": "a"}
    assert problem_lines(rejection(schema, {"$ref": 1})) == [
        "  - $ref: must be string, got integer"
    ]


@pytest.mark.parametrize(
    ("parameters", "kind"),
    [(None, "NoneType"), (True, "bool"), ([{"type": "object"}], "list"), (int, "class int")],
)
def test_parameters_of_the_wrong_kind_are_refused(parameters: Any, kind: str) -> None:
    with pytest.raises(TypeError) as info:
        AgentTool("odd", "", parameters, execute)
    assert str(info.value) == (
        f'Tool "odd": parameters must be a JSON-schema dict or a pydantic model class, got {kind}'
    )


def test_importing_the_package_does_not_import_jsonschema() -> None:
    code = (
        "import sys, agentcore_fsm\n"
        "assert 'jsonschema' not in sys.modules\n"
        "agentcore_fsm.AgentTool('t', '', {'type': 'object'}, print)\n"
        "assert 'jsonschema' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
