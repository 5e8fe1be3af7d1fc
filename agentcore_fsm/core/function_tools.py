"""Tools made from plain functions: :func:`tool`.

``@tool`` (or ``tool(fn, name=..., ...)``) reads a function and makes a :class:`FunctionTool`,
an :class:`~agentcore_fsm.core.tools.AgentTool` like any other (the same events, results,
validation errors, approval, journaling and resume):

* the **name** is the function's (``name=`` overrides it); the **description** is its
  docstring's description, and each parameter's description comes from the docstring's
  Google, NumPy or Sphinx parameter section (:mod:`agentcore_fsm.core.docstrings`);
* the **parameters** are the function's parameters, their types read from the type hints by
  pydantic: defaults, ``Optional``, enums and ``Literal``, nested models, dataclasses,
  ``TypedDict``, ``Annotated[..., Field(...)]`` constraints. They become a pydantic model (the
  tool's ``parameters``, also :attr:`FunctionTool.args_model`): pydantic validates the model's
  arguments, so a bad call gets today's validation error text, and unknown arguments are
  refused. The schema the model sees is a plain JSON schema: no generated ``title``\\ s,
  ``$defs`` for nested types. A description given in ``Field(description=...)`` wins over the
  docstring's;
* a first parameter typed ``RunContext[Deps]`` is **injected** (not shown to the model): see
  :class:`~agentcore_fsm.core.run_context.RunContext`;
* the function is called with the validated arguments as **keyword arguments**; what it
  returns becomes the result (:func:`~agentcore_fsm.core.run_context.to_tool_result`). An
  ``async def`` runs on the event loop, a plain function in a worker thread (the driver does
  that for a plain ``execute``), and an exception it raises is an error result, as for any tool.

A function whose signature cannot become a tool is refused when the tool is made, with a
``TypeError`` naming the function and the parameter: ``*args``/``**kwargs``, a positional-only
parameter, a parameter without a type hint (or whose hint cannot be resolved), a type pydantic
cannot validate or describe in JSON schema, a ``RunContext`` parameter that is not the first, has
a default or is only part of a type (``RunContext | None``), a generator function, a class.

The analysis of a function (its model and schema) is made once and shared by every tool made
from the same function object, so ``isinstance(args, tool.args_model)`` holds across them.
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
import typing
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, overload

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    create_model,
    model_validator,
)
from pydantic.json_schema import DEFAULT_REF_TEMPLATE, GenerateJsonSchema, JsonSchemaMode
from pydantic_core import InitErrorDetails, PydanticCustomError

from agentcore_fsm.core.docstrings import parse_docstring
from agentcore_fsm.core.retry import RetryPolicy
from agentcore_fsm.core.run_context import RunContext, to_tool_result
from agentcore_fsm.core.tools import AgentTool, AgentToolResult, ToolExecutionMode

__all__ = ["FunctionTool", "ToolJsonSchema", "plain_json_schema", "tool"]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_EMPTY = inspect.Parameter.empty
_KIND_PROBLEMS = {
    inspect.Parameter.VAR_POSITIONAL: (
        "*{}",
        "collects extra positional arguments, which the model cannot send: a tool's "
        "parameters must each be named",
    ),
    inspect.Parameter.VAR_KEYWORD: (
        "**{}",
        "collects extra keyword arguments, which have no schema: a tool's parameters must "
        "each be named and typed",
    ),
    inspect.Parameter.POSITIONAL_ONLY: (
        "{}",
        "is positional-only, but a tool receives its arguments by keyword (remove the '/')",
    ),
}


# --- the JSON schema the model sees ---------------------------------------------------------


class ToolJsonSchema(GenerateJsonSchema):
    """pydantic's JSON schema without the titles it makes up: none per field, and none for a
    type in ``$defs`` (a model, dataclass, ``TypedDict`` or enum) whose title only repeats its
    name there. A title given explicitly (``Field(title=...)``, a model's configured title
    that differs from its name) stays."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def generate(self, schema: Any, mode: JsonSchemaMode = "validation") -> dict[str, Any]:
        json_schema = super().generate(schema, mode)
        definitions = json_schema.get("$defs")
        if isinstance(definitions, dict):
            for key, definition in definitions.items():
                if isinstance(definition, dict) and definition.get("title") == key:
                    del definition["title"]
        return json_schema


def plain_json_schema(tp: Any) -> dict[str, Any]:
    """The JSON schema of any type pydantic handles, made as a tool's parameters are shown to
    the model (:class:`ToolJsonSchema`; ``$defs`` for nested types; no title that only
    repeats the type's name)."""
    from pydantic import TypeAdapter

    schema: dict[str, Any] = TypeAdapter(tp).json_schema(schema_generator=ToolJsonSchema)
    if schema.get("title") == getattr(tp, "__name__", None):
        del schema["title"]
    return schema


_SCHEMAS: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = weakref.WeakKeyDictionary()


class ArgsModel(BaseModel):
    """The base of the parameter models made from functions.

    An argument the function does not take is refused (``extra_forbidden``, at its own path,
    after the other problems), as ``extra="forbid"`` would; but the model's config is not
    set for that, because pydantic hands a model's config down to the stdlib dataclasses and
    ``TypedDict`` classes inside it: those validate here exactly as on their own
    (``TypeAdapter``). Any parameter name is allowed (``model_name`` too), and the JSON schema
    is the plain one (:class:`ToolJsonSchema`, no title, ``additionalProperties: false``),
    made once per model."""

    model_config = ConfigDict(protected_namespaces=(), serialize_by_alias=True)

    @model_validator(mode="wrap")
    @classmethod
    def refuse_unknown_arguments(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Validate, then refuse the keys of ``data`` that name no parameter."""
        if not isinstance(data, dict):
            return handler(data)
        known = _argument_names(cls)
        unknown = [key for key in data if key not in known]
        if not unknown:
            return handler(data)
        errors: list[Any] = []
        try:
            handler({key: value for key, value in data.items() if key in known})
        except ValidationError as exc:
            errors = list(exc.errors())
        extra = [
            InitErrorDetails(type="extra_forbidden", loc=(key,), input=data[key]) for key in unknown
        ]
        try:
            combined = ValidationError.from_exception_data(cls.__name__, [*errors, *extra])
        except KeyError:  # a custom error type (PydanticCustomError): keep its type and text
            errors = [
                InitErrorDetails(
                    type=PydanticCustomError(error["type"], error["msg"]),
                    loc=error["loc"],
                    input=error["input"],
                )
                for error in errors
            ]
            combined = ValidationError.from_exception_data(cls.__name__, [*errors, *extra])
        raise combined

    @classmethod
    def model_json_schema(
        cls,
        by_alias: bool | None = None,
        ref_template: str = DEFAULT_REF_TEMPLATE,
        schema_generator: type[GenerateJsonSchema] = ToolJsonSchema,
        mode: JsonSchemaMode = "validation",
        *,
        union_format: Literal["any_of", "primitive_type_array"] = "any_of",
    ) -> dict[str, Any]:
        """The model's JSON schema; by default the plain one the model is shown."""
        usual = (
            by_alias in (None, True)
            and ref_template == DEFAULT_REF_TEMPLATE
            and schema_generator is ToolJsonSchema
            and mode == "validation"
            and union_format == "any_of"
        )
        if usual:
            known = _SCHEMAS.get(cls)
            if known is not None:
                return copy.deepcopy(known)
        schema = super().model_json_schema(
            True if by_alias is None else by_alias,
            ref_template,
            schema_generator,
            mode,
            union_format=union_format,
        )
        schema.pop("title", None)
        schema["additionalProperties"] = False
        if usual:
            _SCHEMAS[cls] = copy.deepcopy(schema)
        return schema


def _argument_names(model: type[BaseModel]) -> set[str]:
    """The keys a model's arguments may have: each field's alias (or name)."""
    names: set[str] = set()
    for name, info in model.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, str):
            names.add(alias)
        elif isinstance(alias, AliasChoices):
            names.update(choice for choice in alias.choices if isinstance(choice, str))
        else:
            names.add(info.alias or name)
    return names


# --- reading a function ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Analysis:
    """What a function becomes: its parameters' model, which field is which parameter, the
    name of its context parameter, its docstring's description, and whether it is async."""

    model: type[BaseModel]
    fields: tuple[tuple[str, str], ...]
    context: str | None
    description: str
    is_async: bool


_ANALYSES: weakref.WeakKeyDictionary[Any, _Analysis] = weakref.WeakKeyDictionary()


def _analyse(fn: Any) -> _Analysis:
    """The analysis of ``fn``, made once per function object (when it can be weakly kept)."""
    try:
        known = _ANALYSES.get(fn)
    except TypeError:  # not hashable, or not weakly referable: analysed every time
        known = None
    if known is not None:
        return known
    analysis = _read(fn)
    try:
        _ANALYSES[fn] = analysis
    except TypeError:
        pass
    return analysis


def _what(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None and isinstance(fn, functools.partial):
        return f"a partial of {_what(fn.func)}"
    return f"function {name!r}" if name else repr(fn)


def _refuse(what: str, parameter: str, problem: str) -> TypeError:
    return TypeError(f"Cannot make a tool from {what}: parameter {parameter!r} {problem}")


def _read(fn: Any) -> _Analysis:
    what = _what(fn)
    if isinstance(fn, type):
        raise TypeError(
            f"Cannot make a tool from class {fn.__qualname__!r}: pass a function (or a "
            f"callable object), not a class"
        )
    if not callable(fn):
        raise TypeError(f"tool() needs a function, got {type(fn).__name__}")
    inner = fn.func if isinstance(fn, functools.partial) else fn
    if inspect.isgeneratorfunction(inner) or inspect.isasyncgenfunction(inner):
        raise TypeError(
            f"Cannot make a tool from {what}: it is a generator, and a tool returns one result "
            f"(report progress with RunContext.report)"
        )
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    )
    signature = _signature(fn, what)
    doc = parse_docstring(getattr(inner, "__doc__", None))
    definitions: dict[str, Any] = {}
    fields: list[tuple[str, str]] = []
    context: str | None = None
    taken = set(signature.parameters)
    for index, param in enumerate(signature.parameters.values()):
        if param.kind in _KIND_PROBLEMS:
            shown, problem = _KIND_PROBLEMS[param.kind]
            raise _refuse(what, shown.format(param.name), problem)
        hint = param.annotation
        if hint is _EMPTY:
            raise _refuse(
                what, param.name, "has no type hint: every parameter the model fills needs one"
            )
        if _is_context(hint):
            if index != 0:
                raise _refuse(
                    what,
                    param.name,
                    "is a RunContext but not the first parameter: the run "
                    "context must be the first parameter",
                )
            if param.default is not _EMPTY:
                raise _refuse(what, param.name, "is the run context and cannot have a default")
            context = param.name
            continue
        if _mentions_context(hint):
            raise _refuse(
                what,
                param.name,
                f"has RunContext inside its type ({_show_type(hint)}): the run context must be "
                f"the whole type of the first parameter",
            )
        field_name = _field_name(param.name, taken)
        definitions[field_name] = _definition(param, hint, field_name, doc.params)
        fields.append((field_name, param.name))
    model = _make_model(fn, what, definitions, fields)
    return _Analysis(model, tuple(fields), context, doc.description, is_async)


def _signature(fn: Any, what: str) -> inspect.Signature:
    try:
        return inspect.signature(fn, eval_str=True)
    except ValueError as exc:
        raise TypeError(
            f"Cannot make a tool from {what}: its signature cannot be read ({exc})"
        ) from None
    except Exception as exc:  # a string annotation that does not evaluate
        problem = exc
    plain = inspect.signature(fn)
    inner = fn.func if isinstance(fn, functools.partial) else fn
    names = getattr(inspect.unwrap(inner), "__globals__", {})
    for param in plain.parameters.values():
        if isinstance(param.annotation, str):
            try:
                eval(param.annotation, names)  # what inspect.signature(eval_str=True) does
            except Exception as exc:
                raise _refuse(
                    what,
                    param.name,
                    f"has a type hint that cannot be resolved: {param.annotation!r} "
                    f"({type(exc).__name__}: {exc})",
                ) from None
    raise TypeError(
        f"Cannot make a tool from {what}: its type hints cannot be resolved "
        f"({type(problem).__name__}: {problem})"
    ) from None


def _is_context(hint: Any) -> bool:
    return hint is RunContext or typing.get_origin(hint) is RunContext


def _mentions_context(hint: Any, depth: int = 0) -> bool:
    if depth > 20:
        return False
    return any(
        _is_context(arg) or _mentions_context(arg, depth + 1) for arg in typing.get_args(hint)
    )


def _field_name(name: str, taken: set[str]) -> str:
    """The model field of parameter ``name``: the name itself, unless pydantic keeps it for
    itself (a leading underscore, an attribute of the model class); then a free ``arg_<n>`` name,
    with the parameter's name as the field's alias."""
    if not name.startswith("_") and not hasattr(ArgsModel, name):
        return name
    n = 0
    while f"arg_{n}" in taken:
        n += 1
    taken.add(f"arg_{n}")
    return f"arg_{n}"


def _definition(param: inspect.Parameter, hint: Any, field_name: str, docs: dict[str, str]) -> Any:
    """The field of ``param`` for ``create_model``: the docstring's description (and the
    alias) go first among the type's metadata, so that a ``Field`` of the user's wins."""
    ours: dict[str, Any] = {}
    if docs.get(param.name):
        ours["description"] = docs[param.name]
    if field_name != param.name:
        ours["alias"] = param.name
    if ours:
        if typing.get_origin(hint) is Annotated:
            base, *metadata = typing.get_args(hint)
            hint = Annotated[(base, Field(**ours), *metadata)]
        else:
            hint = Annotated[hint, Field(**ours)]
    return hint if param.default is _EMPTY else (hint, param.default)


def _model_name(fn: Any) -> str:
    inner = fn.func if isinstance(fn, functools.partial) else fn
    words = re.findall(r"[A-Za-z0-9]+", getattr(inner, "__name__", "") or "")
    name = "".join(word[:1].upper() + word[1:] for word in words)
    if not name or name[0].isdigit():
        name = "Tool" + name
    return name + "Args"


def _make_model(
    fn: Any, what: str, definitions: dict[str, Any], fields: list[tuple[str, str]]
) -> type[BaseModel]:
    module = getattr(fn, "__module__", None) or __name__
    try:
        model = create_model(_model_name(fn), __base__=ArgsModel, __module__=module, **definitions)
        model.model_json_schema()  # refused now, not when a provider first asks for it
        return model
    except Exception as exc:
        problem = exc
    from pydantic import TypeAdapter

    for field_name, param in fields:
        definition = definitions[field_name]
        hint = definition[0] if isinstance(definition, tuple) else definition
        try:
            TypeAdapter(hint).json_schema(schema_generator=ToolJsonSchema)
        except Exception as exc:
            raise _refuse(
                what,
                param,
                f"has a type that pydantic cannot validate or describe in JSON schema: "
                f"{_show_type(hint)} ({_first_line(exc)})",
            ) from None
    raise TypeError(f"Cannot make a tool from {what}: {_first_line(problem)}") from None


def _show_type(hint: Any) -> str:
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__qualname__
    return repr(hint).replace("typing.", "")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# --- the tool ----------------------------------------------------------------------------------


@dataclass(eq=False)
class FunctionTool(AgentTool):
    """A tool made from a function by :func:`tool`: an :class:`AgentTool` whose
    ``parameters`` is :attr:`args_model` and whose ``execute`` calls :attr:`function`.

    ``function`` is the function as given (call it directly in tests); ``args_model`` the
    pydantic model of its parameters (what ``before_tool_call`` hooks and approval checks
    receive as ``args``); ``context_parameter`` the name of the parameter that receives the
    run context, if any. ``execute`` also accepts a dict of raw arguments, or an object with
    the arguments as attributes, and validates them first: ``tool.execute("id", {"x": 1},
    None, None)`` works outside a run.
    """

    function: Callable[..., Any] = field(kw_only=True, repr=False)
    args_model: type[BaseModel] = field(kw_only=True, repr=False)
    context_parameter: str | None = field(default=None, kw_only=True, repr=False)
    """The name of the parameter that receives the :class:`RunContext` (None: it takes none)."""


@overload
def tool(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    label: str = "",
    idempotent: bool = False,
    requires_approval: bool | Callable[[Any], Any] = False,
    execution_mode: ToolExecutionMode | None = None,
    prepare_arguments: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    timeout_s: float | None = None,
    retry: RetryPolicy | None = None,
    max_concurrency: int | None = None,
) -> FunctionTool: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    label: str = "",
    idempotent: bool = False,
    requires_approval: bool | Callable[[Any], Any] = False,
    execution_mode: ToolExecutionMode | None = None,
    prepare_arguments: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    timeout_s: float | None = None,
    retry: RetryPolicy | None = None,
    max_concurrency: int | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    label: str = "",
    idempotent: bool = False,
    requires_approval: bool | Callable[[Any], Any] = False,
    execution_mode: ToolExecutionMode | None = None,
    prepare_arguments: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    timeout_s: float | None = None,
    retry: RetryPolicy | None = None,
    max_concurrency: int | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a tool from a plain or async function: ``@tool``, ``@tool(name=...)`` or
    ``tool(fn, ...)`` (see the module's documentation).

    ``name`` (default: the function's name) must be 1 to 64 letters, digits, ``_`` or ``-``
    (what the OpenAI and Anthropic APIs accept); ``description`` defaults to the docstring's
    description. ``label``, ``idempotent``, ``requires_approval``, ``execution_mode``,
    ``prepare_arguments``, ``timeout_s``, ``retry`` and ``max_concurrency`` are those of
    :class:`~agentcore_fsm.core.tools.AgentTool` (checked the same way).

    Raises ``TypeError`` for a function that cannot become a tool (naming it and the
    parameter), ``ValueError`` for a bad name or execution mode.
    """

    def make(function: Callable[..., Any]) -> FunctionTool:
        return _make_tool(
            function,
            name=name,
            description=description,
            label=label,
            idempotent=idempotent,
            requires_approval=requires_approval,
            execution_mode=execution_mode,
            prepare_arguments=prepare_arguments,
            timeout_s=timeout_s,
            retry=retry,
            max_concurrency=max_concurrency,
        )

    return make if fn is None else make(fn)


def _make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    label: str,
    idempotent: bool,
    requires_approval: bool | Callable[[Any], Any],
    execution_mode: ToolExecutionMode | None,
    prepare_arguments: Callable[[dict[str, Any]], dict[str, Any]] | None,
    timeout_s: float | None = None,
    retry: RetryPolicy | None = None,
    max_concurrency: int | None = None,
) -> FunctionTool:
    analysis = _analyse(fn)
    if name is None:
        inner = fn.func if isinstance(fn, functools.partial) else fn
        name = getattr(inner, "__name__", None)
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(
                f"Cannot make a tool from {_what(fn)}: its name {name!r} is not a tool name; "
                f"give one with name= (1 to 64 letters, digits, '_' or '-')"
            )
    elif not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"tool name {name!r} is not a tool name: it must be 1 to 64 letters, digits, '_' or "
            f"'-' (what the OpenAI and Anthropic APIs accept)"
        )
    if description is None:
        description = analysis.description
    elif not isinstance(description, str):
        raise TypeError(
            f"tool {name!r}: description must be a str, not {type(description).__name__}"
        )
    if not isinstance(label, str):
        raise TypeError(f"tool {name!r}: label must be a str, not {type(label).__name__}")
    if not isinstance(idempotent, bool):
        raise TypeError(
            f"tool {name!r}: idempotent must be a bool, not {type(idempotent).__name__}"
        )
    if execution_mode not in (None, "parallel", "sequential"):
        raise ValueError(
            f"tool {name!r}: execution_mode must be 'parallel', 'sequential' or None, "
            f"not {execution_mode!r}"
        )
    return FunctionTool(
        name=name,
        description=description,
        parameters=analysis.model,
        execute=_executor(fn, analysis, name),
        label=label,
        prepare_arguments=prepare_arguments,
        execution_mode=execution_mode,
        idempotent=idempotent,
        requires_approval=requires_approval,
        timeout_s=timeout_s,
        retry=retry,
        max_concurrency=max_concurrency,
        function=fn,
        args_model=analysis.model,
        context_parameter=analysis.context,
    )


def _executor(fn: Callable[..., Any], analysis: _Analysis, name: str) -> Callable[..., Any]:
    """The tool's ``execute``: async for an async function, plain for a plain one."""
    model = analysis.model
    fields = analysis.fields
    context = analysis.context

    def arguments(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> dict[str, Any]:
        if not isinstance(params, model):
            if isinstance(params, dict):
                params = model.model_validate(params)
            else:
                params = model.model_validate(params, from_attributes=True)
        kwargs = {parameter: getattr(params, field_name) for field_name, parameter in fields}
        if context is not None:
            kwargs[context] = RunContext.for_call(tool_call_id, name, signal, on_update)
        return kwargs

    if analysis.is_async:

        async def execute_async(
            tool_call_id: str, params: Any, signal: Any, on_update: Any
        ) -> AgentToolResult:
            value = await fn(**arguments(tool_call_id, params, signal, on_update))
            return to_tool_result(value, name)

        return execute_async

    async def finish(pending: Any) -> AgentToolResult:
        return to_tool_result(await pending, name)

    def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        value = fn(**arguments(tool_call_id, params, signal, on_update))
        if inspect.isawaitable(value):  # a plain callable that returned an awaitable
            return finish(value)
        return to_tool_result(value, name)

    return execute
