"""Function tools agree with pydantic: hypothesis writes functions (parameter names, types from a
pool, defaults, keyword-only parameters, a run-context parameter, docstrings in the Google,
NumPy and Sphinx styles) and checks, against pydantic's own ``TypeAdapter`` of each type:

* the schema the model sees: one property per parameter, in order, whose schema is the type's
  (``$ref``\\ s inlined, no titles) plus the docstring's description and the default;
  ``required`` lists exactly the parameters without a default; nothing else is allowed;
* validation: arguments (mostly plausible, some junk, some missing, some unknown) pass exactly
  when every present one validates with the adapter and every missing one has a default; a
  failing call's text lists the adapter's problems, each under its parameter, then
  ``Field required`` for the missing and ``Extra inputs are not permitted`` for the unknown;
* the call: the function receives, by keyword, the adapter's validated values and the defaults.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import keyword
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from agentcore_fsm import RunContext, tool
from agentcore_fsm.core.tools import ToolCallRejected, validate_arguments


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


@dataclasses.dataclass
class Box:
    w: float
    tags: list[str] = dataclasses.field(default_factory=list)


class Span(TypedDict):
    start: int
    end: int


INTS = st.integers(-(10**6), 10**6)
FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=32)
TEXT = st.text(max_size=8)
JSON = st.recursive(
    st.none() | st.booleans() | INTS | FLOATS | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)

# (type, valid raw values, other plausible raw values, a default)
POOL: list[tuple[Any, st.SearchStrategy[Any], st.SearchStrategy[Any], Any]] = [
    (int, INTS | st.sampled_from(["12", 2.0]), st.sampled_from(["1.5", 2.5, True]), 7),
    (float, FLOATS | INTS | st.just("2.5"), st.sampled_from(["x", None]), 1.5),
    (str, TEXT, st.sampled_from([1, None, b"x"]), "x"),
    (
        bool,
        st.booleans() | st.sampled_from(["true", "no", 0]),
        st.sampled_from([2, "maybe"]),
        False,
    ),
    (int | None, st.none() | INTS, st.just("none"), None),
    (list[int], st.lists(INTS, max_size=4), st.lists(INTS | TEXT, min_size=1, max_size=3), [1, 2]),
    (dict[str, int], st.dictionaries(TEXT, INTS, max_size=3), st.just({"a": "b"}), {"a": 1}),
    (Literal["a", "b", 3], st.sampled_from(["a", "b", 3]), st.sampled_from(["c", "3", 3.5]), "a"),
    (Color, st.sampled_from(["red", "blue"]), st.sampled_from(["green", "RED"]), Color.RED),
    (
        Point,
        st.fixed_dictionaries({"x": INTS}, optional={"y": INTS}),
        st.fixed_dictionaries({"y": INTS}, optional={"x": TEXT, "z": INTS}),
        Point(x=1),
    ),
    (
        Box | None,
        st.none()
        | st.fixed_dictionaries({"w": FLOATS}, optional={"tags": st.lists(TEXT, max_size=2)}),
        st.fixed_dictionaries({"w": TEXT}, optional={"tags": TEXT}),
        None,
    ),
    (
        Span,
        st.fixed_dictionaries({"start": INTS, "end": INTS}),
        st.fixed_dictionaries({"end": TEXT}),
        {"start": 0, "end": 1},
    ),
    (
        Annotated[int, Field(ge=0, le=100, description="a percentage")],
        st.integers(0, 100),
        st.integers(-10, -1) | st.integers(101, 110),
        50,
    ),
    (
        Annotated[str, Field(min_length=2, max_length=5)],
        st.text(min_size=2, max_size=5),
        st.text(max_size=1) | st.text(min_size=6, max_size=8),
        "ab",
    ),
    (tuple[int, str], st.tuples(INTS, TEXT).map(list), st.just([1]), (1, "a")),
    (int | str, INTS | TEXT, st.sampled_from([None, [1]]), "z"),
    (
        datetime.date,
        st.dates().map(str),
        st.sampled_from(["2024-13-01", "soon"]),
        datetime.date(2024, 1, 1),
    ),
]
ADAPTERS = [TypeAdapter(tp) for tp, _, _, _ in POOL]
TRICKY_NAMES = ["model_config", "json", "copy", "schema", "_hidden", "__dunder", "model_fields"]
NAMES = st.builds(
    lambda head, tail: head + tail,
    st.sampled_from("abcdefghijklmnopqrstuvwxyz"),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", max_size=7),
).filter(lambda name: not keyword.iskeyword(name)) | st.sampled_from(TRICKY_NAMES)
WORDS = st.lists(st.text(alphabet="abcdefghij", min_size=1, max_size=6), min_size=1, max_size=6)


@dataclasses.dataclass
class Param:
    name: str
    pool: int
    has_default: bool
    doc: list[str] | None  # the docstring's words for it, if documented


@st.composite
def functions(draw: st.DrawFn) -> tuple[list[Param], bool, str, list[str], int]:
    names = draw(
        st.lists(NAMES, min_size=0, max_size=6, unique=True).filter(
            lambda names: "ctx" not in names
        )
    )
    params = [
        Param(
            name,
            draw(st.integers(0, len(POOL) - 1)),
            draw(st.booleans()),
            draw(st.none() | WORDS),
        )
        for name in names
    ]
    params.sort(key=lambda p: p.has_default)  # defaults last, unless keyword-only
    keyword_only = draw(st.integers(0, len(params)))
    style = draw(st.sampled_from(["google", "numpy", "sphinx", "none"]))
    with_context = draw(st.booleans())
    summary = draw(WORDS)
    return params, with_context, style, summary, keyword_only


def docstring(summary: list[str], params: list[Param], style: str) -> str | None:
    if style == "none":
        return None
    lines = [" ".join(summary).capitalize() + ".", ""]
    documented = [p for p in params if p.doc is not None]

    def wrapped(words: list[str]) -> list[str]:  # a long description goes on two lines
        half = (len(words) + 1) // 2
        return [" ".join(words[:half])] + ([" ".join(words[half:])] if words[half:] else [])

    if style == "google" and documented:
        lines.append("Args:")
        for p in documented:
            first, *rest = wrapped(p.doc or [])
            lines.append(f"    {p.name} (some type): {first}")
            lines += [f"        {line}" for line in rest]
        lines += ["", "Returns:", "    what it got."]
    elif style == "numpy" and documented:
        lines += ["Parameters", "----------"]
        for p in documented:
            lines.append(f"{p.name} : some type")
            lines += [f"    {line}" for line in wrapped(p.doc or [])]
        lines += ["", "Returns", "-------", "dict", "    what it got."]
    elif style == "sphinx" and documented:
        for p in documented:
            first, *rest = wrapped(p.doc or [])
            lines.append(f":param {p.name}: {first}")
            lines += [f"    {line}" for line in rest]
            lines.append(f":type {p.name}: some type")
        lines.append(":returns: what it got.")
    return "\n    ".join(lines)


def make_function(
    params: list[Param], with_context: bool, doc: str | None, keyword_only: int
) -> tuple[Any, list[dict[str, Any]]]:
    """The function, written as source and run, and the list its calls' arguments go to."""
    calls: list[dict[str, Any]] = []
    namespace: dict[str, Any] = {
        "RunContext": RunContext,
        "Any": Any,
        "__record__": calls.append,
        "__locals__": locals,
        "__dict__": dict,
    }
    parts = ["ctx: RunContext[Any]"] if with_context else []
    for i, p in enumerate(params):
        if i == keyword_only:
            parts.append("*")
        namespace[f"T{i}"] = POOL[p.pool][0]
        namespace[f"D{i}"] = POOL[p.pool][3]
        parts.append(f"{p.name}: T{i}" + (f" = D{i}" if p.has_default else ""))
    if parts and parts[-1] == "*":
        parts.pop()
    body = "__record__(__dict__(__locals__()))\n    return 'ok'"
    source = f"def generated({', '.join(parts)}):\n    {body}\n"
    exec(source, namespace)
    fn = namespace["generated"]
    fn.__doc__ = doc
    return fn, calls


def inline(schema: Any, defs: dict[str, Any]) -> Any:
    """``schema`` with every local ``$ref`` replaced by its definition, and no ``title``."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            target = defs[schema["$ref"].rsplit("/", 1)[-1]]
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return inline({**target, **rest}, defs)
        return {k: inline(v, defs) for k, v in schema.items() if k not in ("title", "$defs")}
    if isinstance(schema, list):
        return [inline(item, defs) for item in schema]
    return schema


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(functions(), st.data())
def test_schema_validation_and_call_agree_with_pydantic(
    spec: tuple[list[Param], bool, str, list[str], int], data: st.DataObject
) -> None:
    params, with_context, style, summary, keyword_only = spec
    doc = docstring(summary, params, style)
    fn, calls = make_function(params, with_context, doc, keyword_only)
    made = tool(fn)
    assert made.name == "generated"
    assert made.description == ("" if doc is None else " ".join(summary).capitalize() + ".")

    # the schema the model sees
    schema = made.json_schema()
    assert json.loads(json.dumps(schema)) == schema
    assert "title" not in schema and schema["additionalProperties"] is False
    assert list(schema["properties"]) == [p.name for p in params]
    assert schema.get("required", []) == [p.name for p in params if not p.has_default]
    defs = schema.get("$defs", {})
    for i, p in enumerate(params):
        default = POOL[p.pool][3]
        expected = inline(
            ADAPTERS[p.pool].json_schema(), ADAPTERS[p.pool].json_schema().get("$defs", {})
        )
        if p.doc is not None and style != "none" and "description" not in expected:
            expected["description"] = " ".join(p.doc)
        if p.has_default:
            expected["default"] = ADAPTERS[p.pool].dump_python(default, mode="json")
        assert inline(schema["properties"][p.name], defs) == expected, (i, p)

    # validation and the call
    # half the calls are valid; the others mix valid values, likely mistakes, junk, missing
    # parameters and an unknown one
    valid = data.draw(st.booleans(), label="valid call")
    raw: dict[str, Any] = {}
    for p in params:
        _, good, bad, _ = POOL[p.pool]
        if valid:
            if not p.has_default or data.draw(st.booleans(), label=f"{p.name} given"):
                raw[p.name] = data.draw(good, label=p.name)
        elif data.draw(st.integers(0, 9), label=f"{p.name} given") > 0:
            raw[p.name] = data.draw(st.one_of(good, good, bad, JSON), label=p.name)
    unknown = None
    if not valid:
        unknown = data.draw(st.sampled_from([None, None, "unknown_arg", "ctx"]), label="unknown")
    if unknown is not None:
        raw[unknown] = 1
    problems: list[str] = []
    values: dict[str, Any] = {}
    for p in params:
        adapter = ADAPTERS[p.pool]
        if p.name in raw:
            try:
                values[p.name] = adapter.validate_python(raw[p.name])
            except ValidationError as exc:
                for err in exc.errors(include_url=False):
                    path = ".".join(str(part) for part in (p.name, *err["loc"]))
                    problems.append(f"  - {path}: {err['msg']}")
        elif p.has_default:
            values[p.name] = POOL[p.pool][3]
        else:
            problems.append(f"  - {p.name}: Field required")
    if unknown is not None:
        problems.append(f"  - {unknown}: Extra inputs are not permitted")

    event(f"style {style}, {'valid' if not problems else 'invalid'}")
    event(f"{len(params)} parameters, context {with_context}")
    assert not (valid and problems), problems
    if problems:
        with pytest.raises(ToolCallRejected) as info:
            validate_arguments(made, raw)
        text = str(info.value)
        head, tail = text.split("\n\nReceived arguments:\n")
        assert head.splitlines() == ['Validation failed for tool "generated":', *problems]
        assert tail == json.dumps(raw, indent=2, default=str, ensure_ascii=False)
        return
    args = validate_arguments(made, raw)
    assert isinstance(args, made.args_model)
    result = made.execute("call-1", args, None, None)
    assert result.content[0].text == "ok"
    (call,) = calls
    context = call.pop("ctx", None)
    if with_context:
        assert isinstance(context, RunContext) and context.tool_call_id == "call-1"
    assert call == values
    for name, value in values.items():
        assert type(call[name]) is type(value), name
