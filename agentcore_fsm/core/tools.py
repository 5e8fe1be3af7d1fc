"""Tools and tool hooks (see docs/reference.md#tool-calls): what a tool is, what it returns, and how
a call is checked.

The functions at the bottom are pure: the machine uses them to look a tool up, validate a
call's arguments and merge an ``after_tool_call`` override. They never await.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentcore_fsm.core import checks
from agentcore_fsm.core.limits import RunUsage
from agentcore_fsm.core.messages import (
    AssistantMessage,
    ToolCall,
    ToolResultContent,
    Usage,
    Wire,
)
from agentcore_fsm.core.retry import RetryPolicy

if TYPE_CHECKING:
    from agentcore_fsm.core.schema import CompiledSchema

__all__ = [
    "AfterToolCallContext",
    "AfterToolCallResult",
    "AgentTool",
    "AgentToolResult",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "ToolExecutionMode",
    "ToolUpdateCallback",
]

ToolExecutionMode: TypeAlias = Literal["parallel", "sequential"]


class AgentToolResult(Wire):
    """What a tool returns. ``terminate=True`` on every result of a batch ends the run."""

    content: list[ToolResultContent] = Field(default_factory=list)
    details: Any = None
    usage: Usage | None = None
    added_tool_names: list[str] | None = None
    terminate: bool | None = None
    is_error: bool | None = None
    run_usage: RunUsage | None = None
    """What the runs this tool ran used (a nested run's requests, turns, tool calls, tokens and
    cost, docs/multi-agent.md): a run with usage limits adds it to its own counters when the
    result arrives, so its later checks count it. None (the default): nothing to add."""


ToolUpdateCallback: TypeAlias = Callable[[AgentToolResult], None]
"""``on_update(partial)``: a plain callable, safe to call from a worker thread."""


@dataclass(eq=False)
class AgentTool:
    """A tool the model may call.

    ``parameters`` is a JSON-schema dict (``execute`` then receives the validated dict) or a
    pydantic model class (``execute`` then receives an instance of it). ``execute(tool_call_id,
    params, signal, on_update)`` may be ``async def`` or a plain function; a plain function runs
    in a worker thread so that it cannot block the event loop.

    A JSON-schema dict is checked and compiled when it is set: making the tool, or assigning
    ``tool.parameters`` later, raises ``ValueError`` (naming the tool) for an invalid schema, and
    ``TypeError`` for parameters that are neither a dict nor a pydantic model class. The compiled
    validator is kept on the tool for the schema object it was made from. Editing that dict in
    place afterwards is not checked again (validation reads the edited dict, but an invalid edit
    shows only when a call is validated): assign a new dict to have it checked.

    The other fields are checked when set too (``TypeError``/``ValueError`` naming the tool and
    the field): ``name`` a non-empty str, ``description`` and ``label`` strs, ``execute`` a
    callable, ``prepare_arguments`` a callable or None, ``execution_mode`` ``"parallel"``,
    ``"sequential"`` or None, ``idempotent`` a bool, ``timeout_s`` a positive finite number
    or None, ``retry`` a :class:`~agentcore_fsm.core.retry.RetryPolicy` or None,
    ``max_concurrency`` an int >= 1 or None.
    """

    name: str
    description: str
    parameters: type[BaseModel] | Mapping[str, Any]
    execute: Callable[..., Awaitable[AgentToolResult] | AgentToolResult]
    label: str = ""
    prepare_arguments: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    execution_mode: ToolExecutionMode | None = None
    idempotent: bool = False
    """Safe to run twice with the same arguments: a journaled run that resumes after a crash
    runs such a call again when its result was not journaled; any other such call gets an
    error result saying it was interrupted."""
    requires_approval: bool | Callable[[Any], Any] = False
    """Whether a call needs a person's approval before it runs: True (every call), or a
    callable ``requires_approval(args) -> bool`` (sync or async) that decides per call from
    the validated arguments. See docs/reference.md#approval-of-tool-calls."""
    timeout_s: float | None = None
    """Cancel an execution still running after this many seconds (a positive finite number;
    None: no limit): the call is answered with an error result saying it timed out (or tried
    again, see ``retry``). See docs/policies-tools.md."""
    retry: RetryPolicy | None = None
    """How a failed execution is tried again (None: never). Only an ``idempotent`` tool is
    retried, unless the policy says ``retry_non_idempotent=True``."""
    max_concurrency: int | None = None
    """At most this many executions of this tool at once in a run (an int >= 1; None: no
    limit). Results still go out in source order."""
    _validator: CompiledSchema | None = field(default=None, init=False, repr=False)

    if not TYPE_CHECKING:  # runtime only: type checkers keep flagging unknown attribute names

        def __setattr__(self, name: str, value: Any) -> None:
            check = _TOOL_CHECKS.get(name)
            if check is not None:
                where = f"tool {self.name!r}" if name != "name" else "AgentTool"
                value = check(where, name, value)
            object.__setattr__(self, name, value)
            if name == "parameters":
                object.__setattr__(self, "_validator", _compile_parameters(self.name, value))
            elif name == "requires_approval" and not (isinstance(value, bool) or callable(value)):
                raise TypeError(
                    f"tool {self.name!r}: requires_approval must be a bool or a callable "
                    f"(args) -> bool, not {type(value).__name__}"
                )

    def compiled_schema(self) -> CompiledSchema:
        """The validator compiled from JSON-schema ``parameters`` (made when they were set, or
        now if the dict was swapped in without going through assignment)."""
        compiled = self._validator
        params = self.parameters
        if compiled is None or compiled.source is not params:
            compiled = _compile_dict_schema(self.name, params)
            object.__setattr__(self, "_validator", compiled)
        return compiled

    def json_schema(self) -> dict[str, Any]:
        """The parameters as a JSON schema (for providers)."""
        if isinstance(self.parameters, type) and issubclass(self.parameters, BaseModel):
            return self.parameters.model_json_schema()
        return dict(self.parameters)


class BeforeToolCallResult(BaseModel):
    """What ``before_tool_call`` may return: ``block=True`` stops the call, which then gets an
    error result with ``reason`` (or "Tool execution was blocked"), and ``terminate=True`` with
    it makes that result count as terminating (a batch whose every result terminates ends the
    run); ``require_approval=True`` makes the call wait for approval, ``reason`` saying why
    (see docs/reference.md#approval-of-tool-calls). A field it does not have is refused, never
    dropped."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    block: bool = False
    reason: str | None = None
    terminate: bool | None = None
    require_approval: bool = False


class AfterToolCallResult(BaseModel):
    """What ``after_tool_call`` may return: every field that is not None replaces that part of
    the tool's result. A field it does not have is refused, never dropped."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    content: list[ToolResultContent] | None = None
    details: Any = None
    is_error: bool | None = None
    usage: Usage | None = None
    terminate: bool | None = None


class BeforeToolCallContext(BaseModel):
    """Handed to ``before_tool_call``. Mutating ``args`` changes what the tool receives."""

    model_config = ConfigDict(arbitrary_types_allowed=True, defer_build=True)
    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    context: Any


class AfterToolCallContext(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, defer_build=True)
    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    result: AgentToolResult
    is_error: bool
    context: Any


def _tool_name(where: str, name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{where}: {name} must be a str, not {type(value).__name__}")
    if not value:
        raise ValueError(f"{where}: {name} must not be empty")
    return value


def _flag(where: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{where}: {name} must be a bool, not {type(value).__name__}")
    return value


def _timeout(where: str, name: str, value: Any) -> float | None:
    """A positive finite number of seconds, or None."""
    if value is None:
        return None
    expected = "a positive finite number of seconds or None"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where}: {name} must be {expected}, not {type(value).__name__}")
    if not 0 < value < float("inf"):  # NaN fails too
        raise ValueError(f"{where}: {name} must be {expected}, not {value!r}")
    return value


def _execute(where: str, name: str, value: Any) -> Any:
    if not callable(value):
        raise TypeError(
            f"{where}: {name} must be a callable (tool_call_id, params, signal, on_update), "
            f"not {type(value).__name__}"
        )
    return value


_TOOL_CHECKS: dict[str, checks.Check] = {
    "name": _tool_name,
    "description": checks.text,
    "execute": _execute,
    "label": checks.text,
    "prepare_arguments": checks.callable_or_none,
    "execution_mode": checks.choice(("parallel", "sequential", None)),
    "idempotent": _flag,
    "timeout_s": _timeout,
    "retry": checks.instance_or_none(RetryPolicy, "a RetryPolicy"),
    "max_concurrency": checks.int_or_none(1),
}


# --- pure helpers used by the machine -------------------------------------------------------


RAW_ARGUMENTS_KEY = "_raw_arguments"
ARGUMENTS_ERROR_KEY = "_arguments_error"


class ToolCallRejected(Exception):
    """A tool call failed one of the checks that run before execution (the text is the result)."""


def error_result(text: str) -> AgentToolResult:
    """An error result made by the loop: one text block, no details."""
    from agentcore_fsm.core.messages import TextContent

    return AgentToolResult(content=[TextContent(text=text)], details=None, is_error=True)


def find_tool(tools: list[AgentTool], name: str) -> AgentTool:
    for tool in tools:
        if tool.name == name:
            return tool
    raise ToolCallRejected(f"Tool {name} not found")


def _is_model_class(params: Any) -> TypeGuard[type[BaseModel]]:
    return isinstance(params, type) and issubclass(params, BaseModel)


def _compile_parameters(tool_name: str, params: Any) -> CompiledSchema | None:
    """The compiled validator of JSON-schema parameters (None for a pydantic model class)."""
    return None if _is_model_class(params) else _compile_dict_schema(tool_name, params)


def _compile_dict_schema(tool_name: str, params: Any) -> CompiledSchema:
    if not isinstance(params, Mapping):
        kind = f"class {params.__name__}" if isinstance(params, type) else type(params).__name__
        raise TypeError(
            f'Tool "{tool_name}": parameters must be a JSON-schema dict or a pydantic model '
            f"class, got {kind}"
        )
    from agentcore_fsm.core.schema import compile_schema

    return compile_schema(params, tool_name)


def _format_validation(tool_name: str, problems: list[tuple[str, str]], raw: Any) -> str:
    """The error text: a header, one ``  - path: message`` line per problem, then the raw
    arguments as indented JSON."""
    lines = [f'Validation failed for tool "{tool_name}":']
    lines += [f"  - {path}: {message}" for path, message in problems]
    lines += ["", "Received arguments:", json.dumps(raw, indent=2, default=str, ensure_ascii=False)]
    return "\n".join(lines)


def validate_arguments(tool: AgentTool, raw: Any) -> Any:
    """Validate ``raw`` against the tool's parameters; raise :class:`ToolCallRejected` if wrong.

    Arguments a provider could not parse arrive as ``{"_raw_arguments": text,
    "_arguments_error": why}`` (see ``providers/_common.py``); they always fail, with ``why``
    as the first problem, whatever the tool's parameters would accept.
    """
    params = tool.parameters
    if isinstance(raw, dict) and RAW_ARGUMENTS_KEY in raw and ARGUMENTS_ERROR_KEY in raw:
        why = str(raw[ARGUMENTS_ERROR_KEY])
        raise ToolCallRejected(_format_validation(tool.name, [("root", why)], raw))
    if _is_model_class(params):
        try:
            return params.model_validate(raw)
        except ValidationError as exc:
            problems = [
                (".".join(str(p) for p in err["loc"]) or "root", err["msg"])
                for err in exc.errors(include_url=False)
            ]
            raise ToolCallRejected(_format_validation(tool.name, problems, raw)) from None
    problems = tool.compiled_schema().problems(raw)
    if problems:
        raise ToolCallRejected(_format_validation(tool.name, problems, raw))
    return raw


def merge_after(
    result: AgentToolResult, is_error: bool, override: Any
) -> tuple[AgentToolResult, bool]:
    """Apply an ``AfterToolCallResult``: every non-None field replaces the original."""
    if override is None:
        return result, is_error
    if not isinstance(override, AfterToolCallResult):
        override = AfterToolCallResult.model_validate(override)
    updates: dict[str, Any] = {}
    for name in ("content", "details", "usage", "terminate"):
        value = getattr(override, name)
        if value is not None:
            updates[name] = value
    if override.is_error is not None:
        is_error = override.is_error
        updates["is_error"] = override.is_error
    if updates:
        result = result.model_copy(update=updates)
    return result, is_error
