"""The fast "certainly valid" check never disagrees with jsonschema, and it does engage.

Property: for generated schemas of the supported subset and generated JSON-like values, whenever
the fast check says valid, ``jsonschema`` (Draft 2020-12) finds no error.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agentcore_fsm.core.fast_schema import fast_checker
from agentcore_fsm.core.tools import AgentTool, ToolCallRejected, validate_arguments

TYPES = ["object", "array", "string", "integer", "number", "boolean", "null"]

# small pools, so that values often meet the schemas' bounds, options and lengths exactly
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-2, max_value=2),
    st.sampled_from([0.5, 1.0, 1.5, -1.0, 0.0, math.nan, math.inf]),
    st.text(alphabet="ab", max_size=3),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c", "x"]), inner, max_size=3),
    ),
    max_leaves=8,
)
numbers = st.sampled_from([-1, 0, 1, 2, 0.5, 1.0, 1.5])
counts = st.integers(0, 3)


def schemas() -> st.SearchStrategy[Any]:
    def node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        keyword_values: dict[str, st.SearchStrategy[Any]] = {
            "type": st.one_of(
                st.sampled_from(TYPES), st.lists(st.sampled_from(TYPES), min_size=1, max_size=3)
            ),
            "enum": st.lists(scalars, min_size=1, max_size=4),
            "const": scalars,
            "minimum": numbers,
            "maximum": numbers,
            "exclusiveMinimum": numbers,
            "exclusiveMaximum": numbers,
            "minLength": counts,
            "maxLength": counts,
            "minItems": counts,
            "maxItems": counts,
            "properties": st.dictionaries(st.sampled_from(["a", "b", "x"]), children, max_size=3),
            "required": st.lists(st.sampled_from(["a", "b", "x"]), max_size=3, unique=True),
            "additionalProperties": st.one_of(st.booleans(), children),
            "items": children,
            "description": st.text(max_size=5),
        }
        # a few keywords per schema, so that values often pass and the property is exercised
        chosen = st.lists(st.sampled_from(sorted(keyword_values)), max_size=3, unique=True)
        return (
            chosen.flatmap(
                lambda names: st.fixed_dictionaries({k: keyword_values[k] for k in names})
            )
            | st.booleans()
        )

    return st.recursive(st.just({}) | st.booleans(), node, max_leaves=6)


@settings(max_examples=1500, deadline=None)
@given(schema=schemas(), value=json_values)
def test_fast_valid_implies_jsonschema_valid(schema: Any, value: Any) -> None:
    check = fast_checker(schema)
    assert check is not None  # every generated schema is in the subset
    if check(value):
        errors = [e.message for e in Draft202012Validator(schema).iter_errors(value)]
        assert errors == [], (schema, value)


@settings(max_examples=200, deadline=None)
@given(value=json_values)
def test_fast_agrees_on_a_typical_tool_schema(value: Any) -> None:
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "minimum": 0},
            "mode": {"enum": ["r", "w"]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    check = fast_checker(schema)
    assert check is not None
    valid = not list(Draft202012Validator(schema).iter_errors(value))
    if check(value):
        assert valid


POOL_NUMBERS = [-1, 0, 1, 2, 0.5, 1.0, 1.5]
POOL_VALUES: list[Any] = [
    None,
    True,
    False,
    -1,
    0,
    1,
    2,
    0.5,
    1.0,
    1.5,
    math.nan,
    math.inf,
    "",
    "a",
    "ab",
    "abc",
    [],
    ["a"],
    [1, 2],
    ["a", "b", "c"],
    {},
    {"a": 1},
    {"a": "x", "b": None},
]


def _flat_schemas() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"type": t} for t in TYPES]
    out += [{"type": ["integer", "null"]}, {"type": ["string", "array"]}]
    for bound in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        out += [{bound: n} for n in POOL_NUMBERS]
    for length in ("minLength", "maxLength", "minItems", "maxItems"):
        out += [{length: n} for n in range(4)]
    out += [{"enum": [1, "a", None]}, {"enum": [1.0, True]}, {"const": 1}, {"const": False}]
    out += [{"const": 0.5}, {"enum": [math.nan]}]
    out += [{"required": ["a"]}, {"required": ["a", "b"]}, {"additionalProperties": False}]
    out += [{"properties": {"a": {"type": "string"}}}, {"additionalProperties": {"type": "null"}}]
    out += [{"items": {"type": "integer"}}, {"items": False}, {"items": {"maxLength": 1}}]
    return out


@pytest.mark.parametrize("schema", _flat_schemas(), ids=repr)
def test_fast_valid_implies_jsonschema_valid_exhaustively(schema: dict[str, Any]) -> None:
    """Every one-keyword schema of the subset against every value of the pool."""
    check = fast_checker(schema)
    assert check is not None
    validator = Draft202012Validator(schema)
    for value in POOL_VALUES:
        if check(value):
            assert not list(validator.iter_errors(value)), (schema, value)


TYPICAL = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "where"},
        "n": {"type": "integer", "minimum": 1},
        "opts": {"type": "object", "additionalProperties": {"type": "boolean"}},
    },
    "required": ["path"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("value", "fast"),
    [
        ({"path": "a"}, True),
        ({"path": "a", "n": 3, "opts": {"x": True}}, True),
        ({"path": "a", "n": 0}, False),  # below minimum
        ({"path": "a", "n": 2.0}, False),  # an integer to JSON Schema: not sure, so slow path
        ({"path": "a", "n": True}, False),  # a bool is not an integer
        ({"n": 1}, False),  # required missing
        ({"path": "a", "other": 1}, False),  # additionalProperties false
        ({"path": "a", "opts": {"x": 1}}, False),
        (["path"], False),
    ],
)
def test_fast_verdicts_on_a_typical_schema(value: Any, fast: bool) -> None:
    check = fast_checker(TYPICAL)
    assert check is not None
    assert check(value) is fast


@pytest.mark.parametrize(
    "schema",
    [
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
        {"type": "string", "pattern": "^a"},
        {"type": "string", "format": "date"},
        {"$ref": "#/$defs/A", "$defs": {"A": {"type": "string"}}},
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}},
        {"type": "array", "items": [{"type": "string"}]},
        {"type": "integer", "minimum": True},
    ],
)
def test_schemas_outside_the_subset_get_no_fast_check(schema: dict[str, Any]) -> None:
    assert fast_checker(schema) is None


def test_validation_results_are_unchanged_by_the_fast_path() -> None:
    async def run(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        raise AssertionError("not called")

    tool = AgentTool(name="t", description="d", parameters=TYPICAL, execute=run)
    assert tool._validator is not None and tool._validator._fast is not None
    assert validate_arguments(tool, {"path": "a", "n": 2.0}) == {"path": "a", "n": 2.0}
    with pytest.raises(ToolCallRejected) as info:
        validate_arguments(tool, {"path": "a", "n": 0})
    assert "  - n: must be >= 1" in str(info.value)
