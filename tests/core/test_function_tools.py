"""Tools made from functions (agentcore_fsm.core.function_tools): what the model is shown, how
arguments are checked and passed, what a return value becomes, the run context, and every kind
of signature that is refused when the tool is made."""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import json
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from agentcore_fsm import (
    AbortController,
    AgentTool,
    AgentToolResult,
    ImageContent,
    RunContext,
    TextContent,
    tool,
)
from agentcore_fsm.core.function_tools import FunctionTool, plain_json_schema
from agentcore_fsm.core.messages import Usage
from agentcore_fsm.core.run_context import RunScope, bind_run, current_run, to_tool_result
from agentcore_fsm.core.tools import ToolCallRejected, validate_arguments


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Place(BaseModel):
    city: str
    country: str = "NL"


@dataclasses.dataclass
class Reading:
    value: float
    unit: Unit


@tool
def forecast(
    place: Place,
    days: Annotated[int, Field(ge=1, le=7)] = 3,
    unit: Unit = Unit.CELSIUS,
    detail: Literal["short", "long"] = "short",
    note: str | None = None,
) -> list[Reading]:
    """Forecast the weather.

    Args:
        place: Where.
        days: How many days ahead.
        unit: The unit of the temperatures.
    """
    return [Reading(20.5 + day, unit) for day in range(days)]


# --- what the model is shown ---------------------------------------------------------------


def test_name_description_and_a_plain_schema() -> None:
    assert isinstance(forecast, FunctionTool) and isinstance(forecast, AgentTool)
    assert forecast.name == "forecast"
    assert forecast.description == "Forecast the weather."
    assert forecast.json_schema() == {
        "type": "object",
        "properties": {
            "place": {"$ref": "#/$defs/Place", "description": "Where."},
            "days": {
                "type": "integer",
                "minimum": 1,
                "maximum": 7,
                "default": 3,
                "description": "How many days ahead.",
            },
            "unit": {
                "$ref": "#/$defs/Unit",
                "default": "celsius",
                "description": "The unit of the temperatures.",
            },
            "detail": {"type": "string", "enum": ["short", "long"], "default": "short"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["place"],
        "additionalProperties": False,
        "$defs": {
            "Place": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "country": {"type": "string", "default": "NL"},
                },
                "required": ["city"],
            },
            "Unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
    }
    # each call gets its own copy
    forecast.json_schema()["properties"].clear()
    assert "place" in forecast.json_schema()["properties"]
    assert forecast.parameters is forecast.args_model
    assert forecast.args_model.__name__ == "ForecastArgs"


def test_options_override_the_function() -> None:
    def check(args: Any) -> bool:
        return True

    made = tool(
        forecast.function,
        name="weather-v2",
        description="Weather.",
        label="Weather",
        idempotent=True,
        requires_approval=check,
        execution_mode="sequential",
    )
    assert (made.name, made.description, made.label) == ("weather-v2", "Weather.", "Weather")
    assert made.idempotent is True and made.requires_approval is check
    assert made.execution_mode == "sequential"
    # one analysis per function: the same parameters model for every tool made from it
    assert made.args_model is forecast.args_model

    @tool(description="Given.")
    def documented() -> str:
        """Not this."""
        return ""

    assert documented.description == "Given."


def test_a_field_description_wins_over_the_docstring_and_no_docstring_is_fine() -> None:
    def measure(
        depth: Annotated[float, Field(description="In metres.", gt=0)],
        label: str = Field("x", description="A name.", max_length=3),
    ) -> float:
        """Measure.

        :param depth: ignored, the Field says it
        :param label: ignored too
        """
        return depth

    schema = tool(measure).json_schema()
    assert schema["properties"] == {
        "depth": {"type": "number", "exclusiveMinimum": 0, "description": "In metres."},
        "label": {"type": "string", "maxLength": 3, "default": "x", "description": "A name."},
    }

    def bare(x: int) -> int:
        return x

    made = tool(bare)
    assert made.description == ""
    assert made.json_schema()["properties"] == {"x": {"type": "integer"}}


def test_parameter_names_pydantic_keeps_for_itself_still_work() -> None:
    @tool
    def odd(_private: int, model_config: str = "m", json: bool = False) -> dict[str, Any]:
        """Odd names.

        Args:
            _private: A private one.
        """
        return {"_private": _private, "model_config": model_config, "json": json}

    schema = odd.json_schema()
    assert list(schema["properties"]) == ["_private", "model_config", "json"]
    assert schema["properties"]["_private"] == {"type": "integer", "description": "A private one."}
    args = validate_arguments(odd, {"_private": 1, "json": True})
    result = odd.execute("c1", args, None, None)
    assert result.details == {"_private": 1, "model_config": "m", "json": True}
    with pytest.raises(ToolCallRejected, match=r"  - arg_0: Extra inputs are not permitted"):
        validate_arguments(odd, {"_private": 1, "arg_0": 2})  # the internal name is not one


def test_a_function_without_parameters_and_the_run_context_are_not_shown() -> None:
    @tool
    async def now(ctx: RunContext[None]) -> str:
        return "noon"

    assert now.json_schema() == {"type": "object", "properties": {}, "additionalProperties": False}


def test_plain_json_schema_of_any_type() -> None:
    assert plain_json_schema(Place) == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string", "default": "NL"}},
        "required": ["city"],
    }
    assert plain_json_schema(list[Unit]) == {
        "type": "array",
        "items": {"$ref": "#/$defs/Unit"},
        "$defs": {"Unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    }


# --- arguments ---------------------------------------------------------------------------------


def test_a_bad_call_reads_like_any_tools_validation_error() -> None:
    raw = {"place": {"country": "BE"}, "days": 9, "extra": True}
    with pytest.raises(ToolCallRejected) as info:
        validate_arguments(forecast, raw)
    assert str(info.value) == (
        'Validation failed for tool "forecast":\n'
        "  - place.city: Field required\n"
        "  - days: Input should be less than or equal to 7\n"
        "  - extra: Extra inputs are not permitted\n"
        "\n"
        "Received arguments:\n" + json.dumps(raw, indent=2)
    )
    # arguments a provider could not parse fail as for any tool
    broken = {"_raw_arguments": "{", "_arguments_error": "Expecting value"}
    with pytest.raises(ToolCallRejected, match=r"  - root: Expecting value"):
        validate_arguments(forecast, broken)


def test_arguments_are_validated_values_passed_by_keyword() -> None:
    args = validate_arguments(
        forecast, {"place": {"city": "Delft"}, "days": "2", "unit": "celsius"}
    )
    assert isinstance(args, forecast.args_model)
    assert args.place == Place(city="Delft")  # type: ignore[attr-defined]
    result = forecast.execute("c1", args, None, None)
    assert result.details == [
        {"value": 20.5, "unit": "celsius"},
        {"value": 21.5, "unit": "celsius"},
    ]
    assert result.content == [TextContent(text=json.dumps(result.details))]


def test_execute_also_takes_raw_arguments_or_an_object_with_them() -> None:
    calls: list[dict[str, Any]] = []

    @tool
    def record(x: int, y: str = "y") -> str:
        calls.append({"x": x, "y": y})
        return "ok"

    record.execute("c1", {"x": "3"}, None, None)

    @dataclasses.dataclass
    class Given:
        x: int
        y: str

    record.execute("c2", Given(4, "z"), None, None)
    assert calls == [{"x": 3, "y": "y"}, {"x": 4, "y": "z"}]
    with pytest.raises(ValidationError):
        record.execute("c3", {"x": "three"}, None, None)


@pytest.mark.anyio
async def test_async_and_plain_functions_keep_their_kind() -> None:
    @tool
    async def slow(x: int) -> int:
        return x * 2

    @tool
    def fast(x: int) -> int:
        return x * 3

    assert inspect.iscoroutinefunction(slow.execute)
    assert not inspect.iscoroutinefunction(fast.execute)
    assert (await slow.execute("c", {"x": 2}, None, None)).details == 4
    assert fast.execute("c", {"x": 2}, None, None).details == 6

    async def later(x: int) -> str:
        return f"later {x}"

    def deferring(x: int) -> Any:  # a plain function that returns an awaitable
        return later(x)

    pending = tool(deferring).execute("c", {"x": 1}, None, None)
    assert inspect.isawaitable(pending)
    assert (await pending).content == [TextContent(text="later 1")]


def test_replace_keeps_the_function_and_its_model() -> None:
    renamed = dataclasses.replace(forecast, name="weather", label="Weather")
    assert isinstance(renamed, FunctionTool)
    assert renamed.function is forecast.function and renamed.args_model is forecast.args_model


# --- return values ---------------------------------------------------------------------------


IMAGE = ImageContent(data="aGk=", mime_type="image/png")


@pytest.mark.parametrize(
    ("value", "content", "details"),
    [
        ("plain text", [TextContent(text="plain text")], None),
        ("", [TextContent(text="")], None),
        (TextContent(text="a block"), [TextContent(text="a block")], None),
        ([TextContent(text="look"), IMAGE], [TextContent(text="look"), IMAGE], None),
        ((IMAGE,), [IMAGE], None),
        (
            Place(city="Delft"),
            '{"city": "Delft", "country": "NL"}',
            {"city": "Delft", "country": "NL"},
        ),
        ({"a": [1, 2.5, None]}, '{"a": [1, 2.5, null]}', {"a": [1, 2.5, None]}),
        ([], "[]", []),
        (["a", "b"], '["a", "b"]', ["a", "b"]),
        (42, "42", 42),
        (True, "true", True),
        (None, "null", None),
        (Unit.FAHRENHEIT, '"fahrenheit"', "fahrenheit"),
        ({"caf\u00e9": "\u2615"}, '{"caf\u00e9": "\u2615"}', {"caf\u00e9": "\u2615"}),
    ],
)
def test_what_a_return_value_becomes(value: Any, content: Any, details: Any) -> None:
    result = to_tool_result(value)
    if isinstance(content, str):
        content = [TextContent(text=content)]
    assert result == AgentToolResult(content=content, details=details)


def test_a_full_result_is_kept_as_it_is() -> None:
    full = AgentToolResult(content=[TextContent(text="x")], details={"k": 1}, terminate=True)
    assert to_tool_result(full) is full


def test_a_value_that_cannot_be_json_is_an_error_naming_the_tool() -> None:
    @tool
    def leaky() -> Any:
        return object()

    with pytest.raises(TypeError, match=r"^tool 'leaky' returned a object, which cannot be"):
        leaky.execute("c1", {}, None, None)


# --- the run context ---------------------------------------------------------------------------


def test_the_run_context_outside_a_run() -> None:
    seen: list[RunContext[dict[str, str]]] = []

    @tool
    def who(ctx: RunContext[dict[str, str]], greeting: str = "hi") -> str:
        seen.append(ctx)
        ctx.report("halfway")  # no listener outside a run: nothing happens
        return f"{greeting} {ctx.deps}"

    assert who.execute("c1", {}, None, None).content == [TextContent(text="hi None")]
    (ctx,) = seen
    assert (ctx.tool_call_id, ctx.tool_name, ctx.deps) == ("c1", "who", None)
    assert ctx.signal.aborted is False
    assert ctx.usage == Usage()
    # called directly, as in a unit test of the function
    own = RunContext({"user": "ann"})
    assert who.function(own, greeting="hello") == "hello {'user': 'ann'}"
    assert repr(own) == "RunContext(deps={'user': 'ann'}, tool_call_id='', tool_name='')"


def test_the_run_context_reports_progress_and_sees_the_run() -> None:
    updates: list[AgentToolResult] = []
    controller = AbortController()

    @tool
    def work(ctx: RunContext[str]) -> str:
        ctx.report("step 1")
        ctx.report({"done": 2})
        assert ctx.signal is controller.signal
        return f"{ctx.deps} {ctx.usage.output}"

    with bind_run("the deps") as scope:
        assert current_run() is scope
        result = work.execute("c1", {}, controller.signal, updates.append)
    assert result.content == [TextContent(text="the deps 0")]
    assert updates == [
        AgentToolResult(content=[TextContent(text="step 1")]),
        AgentToolResult(content=[TextContent(text='{"done": 2}')], details={"done": 2}),
    ]


def test_current_run_and_nested_runs() -> None:
    with pytest.raises(RuntimeError, match=r"^current_run\(\) was called outside a run"):
        current_run()
    with bind_run("outer") as outer:
        with bind_run("inner"):
            assert current_run().deps == "inner"
        assert current_run() is outer
    with pytest.raises(RuntimeError):
        current_run()


def test_the_scope_counts_the_usage_of_completed_assistant_messages() -> None:
    from agentcore_fsm import AssistantMessage, UserMessage
    from agentcore_fsm.core.events import MessageEndEvent, MessageStartEvent
    from agentcore_fsm.core.messages import Cost

    scope = RunScope("deps")
    seen: list[Any] = []
    emit = scope.watch(seen.append)
    first = Usage(input=10, output=5, total_tokens=15, cost=Cost(input=0.1, total=0.1))
    second = Usage(
        input=7, output=1, cache_read=3, total_tokens=11, cost=Cost(output=0.2, total=0.2)
    )
    events = [
        MessageStartEvent(message=AssistantMessage(usage=first)),  # not complete yet
        MessageEndEvent(message=UserMessage(content="x")),
        MessageEndEvent(message=AssistantMessage(usage=first)),
        MessageEndEvent(message=AssistantMessage(usage=second)),
    ]
    for event in events:
        emit(event)
    assert seen == events
    usage = scope.usage
    assert usage.model_dump(exclude={"cost"}) == {
        "input": 17,
        "output": 6,
        "cache_read": 3,
        "cache_write": 0,
        "total_tokens": 26,
    }
    assert usage.cost.model_dump() == pytest.approx(
        {"input": 0.1, "output": 0.2, "cache_read": 0.0, "cache_write": 0.0, "total": 0.3}
    )
    unheard = RunScope("deps")
    count = unheard.watch(None)
    assert count is not None
    count(events[2])  # no listener: counted all the same
    assert unheard.usage is not None and unheard.usage.total_tokens == 15


def test_only_runs_whose_tools_or_hooks_can_read_the_usage_count_it() -> None:
    def listener(event: Any) -> None:
        pass

    @tool
    def plain(x: int) -> int:
        return x

    @tool
    def aware(ctx: RunContext[None]) -> int:
        return 1

    assert (plain.context_parameter, aware.context_parameter) == (None, "ctx")
    idle = RunScope()
    assert idle.watch(listener, [plain]) is listener  # the run keeps its listener as it is
    assert idle.watch(None, [plain]) is None
    assert idle.usage is None
    for scope, tools in ((RunScope(), [plain, aware]), (RunScope(deps=0), [plain])):
        assert scope.watch(listener, tools) is not listener
        assert scope.usage == Usage()


# --- refused when made ---------------------------------------------------------------------


def star_args(x: int, *more: int) -> int:
    return x


def star_kwargs(x: int, **more: int) -> int:
    return x


def positional_only(x: int, /, y: int) -> int:
    return x


def no_hint(x: int, y) -> int:  # type: ignore[no-untyped-def]
    return x


def unresolvable(x: int, y: NotDefinedAnywhere) -> int:  # type: ignore[name-defined]  # noqa: F821
    return x


def unknown_type(x: int, conn: socket.socket) -> int:
    return x


def no_json_schema(x: int, callback: Callable[[int], int]) -> int:
    return x


def context_not_first(x: int, ctx: RunContext[None]) -> int:
    return x


def context_with_default(ctx: RunContext[None] = None) -> int:  # type: ignore[assignment]
    return 1


def context_in_a_union(ctx: RunContext[None] | None, x: int) -> int:
    return x


def context_in_a_list(items: list[RunContext[None]]) -> int:
    return 1


def generator(x: int) -> Iterator[int]:
    yield x


async def async_generator(x: int) -> AsyncIterator[int]:
    yield x


REFUSED = {
    "*args": (star_args, "parameter '*more' collects extra positional arguments"),
    "**kwargs": (star_kwargs, "parameter '**more' collects extra keyword arguments"),
    "positional-only": (positional_only, "parameter 'x' is positional-only"),
    "no type hint": (no_hint, "parameter 'y' has no type hint"),
    "unresolvable hint": (
        unresolvable,
        "parameter 'y' has a type hint that cannot be resolved: 'NotDefinedAnywhere' "
        "(NameError: name 'NotDefinedAnywhere' is not defined)",
    ),
    "a type pydantic cannot validate": (
        unknown_type,
        "parameter 'conn' has a type that pydantic cannot validate or describe in JSON schema: "
        "socket",
    ),
    "a type without a JSON schema": (
        no_json_schema,
        "parameter 'callback' has a type that pydantic cannot validate or describe in JSON "
        "schema: ",
    ),
    "context not first": (context_not_first, "parameter 'ctx' is a RunContext but not the first"),
    "context with a default": (
        context_with_default,
        "parameter 'ctx' is the run context and cannot have a default",
    ),
    "context in a union": (
        context_in_a_union,
        "parameter 'ctx' has RunContext inside its type (Optional[",
    ),
    "context in a list": (context_in_a_list, "parameter 'items' has RunContext inside its type"),
    "generator": (generator, "it is a generator, and a tool returns one result"),
    "async generator": (async_generator, "it is a generator, and a tool returns one result"),
}


@pytest.mark.parametrize(("fn", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_a_signature_that_cannot_be_a_tool_is_refused_when_made(
    fn: Callable[..., Any], message: str
) -> None:
    with pytest.raises(TypeError) as info:
        tool(fn)
    text = str(info.value)
    assert text.startswith(f"Cannot make a tool from function {fn.__qualname__!r}: "), text
    assert message in text, text


def test_things_that_are_not_functions_are_refused() -> None:
    with pytest.raises(TypeError, match=r"^Cannot make a tool from class 'Place': pass a function"):
        tool(Place)
    with pytest.raises(TypeError, match=r"^tool\(\) needs a function, got int"):
        tool(42)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"its name '<lambda>' is not a tool name; give one"):
        tool(lambda: "x")
    partial = functools.partial(star_args, 1)
    with pytest.raises(TypeError, match=r"^Cannot make a tool from a partial of function 'star_"):
        tool(partial)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"name": "has space"}, ValueError, "tool name 'has space' is not a tool name"),
        ({"name": ""}, ValueError, "tool name '' is not a tool name"),
        ({"name": "x" * 65}, ValueError, "is not a tool name: it must be 1 to 64 letters"),
        ({"description": 3}, TypeError, "tool 'ok': description must be a str, not int"),
        ({"label": None}, TypeError, "tool 'ok': label must be a str, not NoneType"),
        ({"idempotent": "yes"}, TypeError, "tool 'ok': idempotent must be a bool, not str"),
        ({"execution_mode": "serial"}, ValueError, "execution_mode must be 'parallel', "),
        ({"requires_approval": "always"}, TypeError, "requires_approval must be a bool or a"),
    ],
)
def test_bad_options_are_refused(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    def ok(x: int) -> int:
        return x

    with pytest.raises(error) as info:
        tool(ok, **options)
    assert message in str(info.value)


@pytest.mark.anyio
async def test_methods_and_callable_objects_make_tools_too() -> None:
    class Shelf:
        def __init__(self) -> None:
            self.books = {"Dune": "S3"}

        def find(self, title: str) -> str:
            """Find a book.

            Args:
                title: Its title.
            """
            return self.books.get(title, "none")

    class Finder:
        async def __call__(self, ctx: RunContext[None], query: str) -> str:
            return query.upper()

    find = tool(Shelf().find)
    assert (find.name, find.description) == ("find", "Find a book.")
    assert find.json_schema()["properties"] == {
        "title": {"type": "string", "description": "Its title."}
    }
    assert find.execute("c", {"title": "Dune"}, None, None).content == [TextContent(text="S3")]
    finder = tool(Finder(), name="finder")
    assert finder.context_parameter == "ctx" and inspect.iscoroutinefunction(finder.execute)
    assert list(finder.json_schema()["properties"]) == ["query"]
    result = await finder.execute("c", {"query": "x"}, None, None)
    assert result.content == [TextContent(text="X")]
