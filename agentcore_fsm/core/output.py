"""Structured output: the type a run must end with, how the model is asked for it, and how its
answer is validated (see docs/output.md).

:class:`OutputSpec` is a run's output configuration: the type (a pydantic model, a dataclass, a
``TypedDict``, a primitive, ``list[...]`` or a union of them, anything pydantic's
``TypeAdapter`` takes), the mode, the number of retries and the user's validators. The loop
machine reads only its JSON part (mode, tool name, retries, schema: what a run's record keeps);
the driver validates the model's answer with it (:meth:`OutputSpec.parse`) and the user's
validators, and feeds the outcome back (:class:`~agentcore_fsm.core.protocol.OutputChecked`).

Modes:

* ``"tool"``: a final-answer tool (``final_result``) is offered with the run's tools; the run
  ends when the model calls it with arguments that validate. Works with every provider.
* ``"native"``: the provider asks the model for JSON text of the schema (OpenAI's
  ``response_format`` of type ``json_schema``); the answer is the text of a message without
  tool calls.
* ``"forced_tool"``: as ``"tool"``, and the provider forces a tool call (Anthropic's
  ``tool_choice``: the final tool when it is the only tool, any tool otherwise).

A type whose JSON schema is not an object (a primitive, a list, a union) is wrapped in an
object with one property, ``response``: tool arguments (and OpenAI's schemas) must be objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, TypeAlias, get_args

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from agentcore_fsm.core.messages import AssistantMessage, TextContent, ToolCall
from agentcore_fsm.core.tools import AgentTool, AgentToolResult

__all__ = [
    "DEFAULT_OUTPUT_RETRIES",
    "OUTPUT_MODES",
    "OUTPUT_TOOL_NAME",
    "ModelRetry",
    "OutputError",
    "OutputInvalid",
    "OutputMode",
    "OutputSpec",
    "OutputValidator",
    "output_spec",
]

OutputMode: TypeAlias = Literal["tool", "native", "forced_tool"]
OUTPUT_MODES: tuple[str, ...] = get_args(OutputMode)
OUTPUT_TOOL_NAME = "final_result"
DEFAULT_OUTPUT_RETRIES = 1
"""One retry by default: a model that gets the answer wrong twice in a row rarely gets it
right on a third try, and every retry is a paid model call."""

OutputValidator: TypeAlias = Callable[[Any], Any]
"""``validator(value)`` (sync or async) returns the value (the same or a changed one) or raises
:class:`ModelRetry` to send the model back with a message."""

_WRAP_KEY = "response"


class ModelRetry(Exception):
    """Raised by an output validator (or a function tool) to send the model back with
    ``message``: the answer is refused and the model tries again, within ``output_retries``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class OutputInvalid(ValueError):
    """The model's answer did not give a valid output; ``str()`` is the text the model sees."""


class OutputError(RuntimeError):
    """The run ended without a valid output: its retries were used up (the text names the last
    problem), or it stopped otherwise (aborted, failed)."""


def _plain_schema(adapter: TypeAdapter[Any]) -> dict[str, Any]:
    schema = adapter.json_schema()
    return schema if isinstance(schema, dict) else {}


@dataclass(frozen=True, eq=False)
class OutputSpec:
    """A run's structured-output configuration (build it with :func:`output_spec`).

    ``mode`` None means "the provider's default" (resolved when the run starts: see
    :meth:`resolved`); ``retries`` is how many invalid answers go back to the model before the
    run fails. ``output_type`` and ``validators`` are the live objects; a spec read back from a
    run's record has neither (``output_type`` None): it can drive the machine but not validate."""

    schema: dict[str, Any]
    wrapped: bool
    type_name: str
    mode: OutputMode | None = None
    retries: int = DEFAULT_OUTPUT_RETRIES
    tool_name: str = OUTPUT_TOOL_NAME
    description: str = "Give the final answer. Call this tool once, with the complete answer."
    output_type: Any = None
    validators: tuple[OutputValidator, ...] = ()
    adapter: TypeAdapter[Any] | None = field(default=None, repr=False)

    # --- what the model is asked for ----------------------------------------------------

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the final tool's arguments (and of the native JSON answer)."""
        if not self.wrapped:
            return self.schema
        defs = self.schema.get("$defs")
        inner = {k: v for k, v in self.schema.items() if k != "$defs"}
        out: dict[str, Any] = {
            "type": "object",
            "properties": {_WRAP_KEY: inner},
            "required": [_WRAP_KEY],
        }
        if defs is not None:
            out["$defs"] = defs
        return out

    @property
    def uses_tool(self) -> bool:
        """True when the answer comes as a call of the final tool (modes tool and forced_tool)."""
        return self.mode != "native"

    @cached_property
    def final_tool(self) -> AgentTool:
        """The final-answer tool the model is offered (modes tool and forced_tool). The loop
        answers its calls itself (validation, then a result): its ``execute`` never runs."""
        return AgentTool(self.tool_name, self.description, self.parameters, _never_executed)

    def resolved(self, default: OutputMode) -> OutputSpec:
        """This spec with ``mode`` set (``default`` when it is None)."""
        if self.mode is not None:
            return self
        return _replace(self, mode=default)

    # --- reading the answer --------------------------------------------------------------

    def answer_call(self, message: AssistantMessage) -> ToolCall | None:
        """The message's first call of the final tool (None in native mode or without one)."""
        if not self.uses_tool:
            return None
        for call in message.tool_calls():
            if call.name == self.tool_name:
                return call
        return None

    def parse(self, message: AssistantMessage) -> Any:
        """The output the message gives, validated by the type (not by the user's
        validators). Raises :class:`OutputInvalid` with the text the model is sent back with."""
        adapter = self.adapter
        if adapter is None:
            raise OutputError(
                "this run's output type is not known here (a run read back from its record "
                "keeps the schema, not the type): pass output_type to validate its answers"
            )
        if self.uses_tool:
            call = self.answer_call(message)
            if call is None:
                raise OutputInvalid(
                    f"No final answer: call the {self.tool_name} tool with the answer "
                    f"(plain text is not accepted)."
                )
            where = "Invalid final answer: the arguments need"
            return self._validated(adapter, call.arguments, where)
        text = "".join(b.text for b in message.content if isinstance(b, TextContent))
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise OutputInvalid(f"Invalid JSON: {exc}. Answer with JSON text only.") from None
        return self._validated(adapter, data, "Invalid answer: the JSON object needs")

    def _validated(self, adapter: Any, data: Any, missing: str) -> Any:
        """``data`` (unwrapped first when the type is wrapped) validated by ``adapter``; an
        :class:`OutputInvalid` saying what was wrong (``missing``: the text for an answer
        without the wrapping field)."""
        if self.wrapped:
            if not isinstance(data, dict) or _WRAP_KEY not in data:
                raise OutputInvalid(f"{missing} the field {_WRAP_KEY!r}.")
            data = data[_WRAP_KEY]
        try:
            return adapter.validate_python(data)
        except ValidationError as exc:
            raise OutputInvalid(_problems(exc)) from None

    def partial(self, message: AssistantMessage) -> tuple[bool, Any]:
        """The output the message gives so far, validated as far as it goes (pydantic's partial
        validation), as JSON data: ``(True, value)``, or ``(False, None)`` when nothing
        validates yet."""
        adapter = self.adapter
        if adapter is None:
            return False, None
        try:
            if self.uses_tool:
                call = self.answer_call(message)
                if call is None:
                    return False, None
                data: Any = call.arguments
                if self.wrapped:
                    if not isinstance(data, dict) or _WRAP_KEY not in data:
                        return False, None
                    data = data[_WRAP_KEY]
                value = adapter.validate_python(data, experimental_allow_partial="trailing-strings")
            else:
                text = "".join(b.text for b in message.content if isinstance(b, TextContent))
                if not text.strip():
                    return False, None
                if self.wrapped:
                    from pydantic_core import from_json

                    raw = from_json(text, allow_partial="trailing-strings")
                    if not isinstance(raw, dict) or _WRAP_KEY not in raw:
                        return False, None
                    value = adapter.validate_python(
                        raw[_WRAP_KEY], experimental_allow_partial="trailing-strings"
                    )
                else:
                    value = adapter.validate_json(
                        text, experimental_allow_partial="trailing-strings"
                    )
        except (ValidationError, ValueError):
            return False, None
        return True, self.dump(value)

    def dump(self, value: Any) -> Any:
        """``value`` as JSON data: pydantic's JSON mode (models, dataclasses and TypedDicts as
        dicts, dates as ISO text, enums as values, tuples and sets as lists, bytes as text)."""
        if self.adapter is not None:
            try:
                return self.adapter.dump_python(value, mode="json")
            except Exception:  # a validator returned a value of another type
                pass
        return to_jsonable_python(value, fallback=repr)

    def load(self, data: Any) -> Any:
        """The typed value of ``data`` (JSON data as :meth:`dump` gives it)."""
        if self.adapter is None:
            return data
        return self.adapter.validate_python(data)

    # --- the record -----------------------------------------------------------------------

    def to_record(self) -> dict[str, Any]:
        """What a run's record keeps of this spec: everything but the live type and validators."""
        return {
            "type": self.type_name,
            "mode": self.mode,
            "retries": self.retries,
            "tool_name": self.tool_name,
            "description": self.description,
            "schema": self.schema,
            "wrapped": self.wrapped,
            "validators": len(self.validators),
        }

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> OutputSpec:
        """A spec read back from a record (no live type: it drives a machine, not validation)."""
        return cls(
            schema=data["schema"],
            wrapped=data["wrapped"],
            type_name=data["type"],
            mode=data["mode"],
            retries=data["retries"],
            tool_name=data["tool_name"],
            description=data["description"],
        )


def _never_executed(*args: Any) -> AgentToolResult:
    raise RuntimeError("the final-answer tool is answered by the loop, never executed")


def _replace(spec: OutputSpec, **changes: Any) -> OutputSpec:
    from dataclasses import replace

    return replace(spec, **changes)


def _problems(exc: ValidationError) -> str:
    lines = [
        f"{'.'.join(str(p) for p in err['loc']) or 'the answer'}: {err['msg']}"
        for err in exc.errors(include_url=False)
    ]
    return "Validation failed: " + "; ".join(lines) + ". Fix the errors and answer again."


def _type_name(tp: Any) -> str:
    name = getattr(tp, "__qualname__", None)
    module = getattr(tp, "__module__", None)
    if isinstance(name, str) and isinstance(module, str) and not hasattr(tp, "__args__"):
        return f"{module}:{name}"
    return repr(tp)


def output_spec(
    output_type: Any,
    *,
    mode: OutputMode | None = None,
    retries: int = DEFAULT_OUTPUT_RETRIES,
    validators: Sequence[OutputValidator] = (),
    tool_name: str = OUTPUT_TOOL_NAME,
    description: str | None = None,
) -> OutputSpec:
    """The :class:`OutputSpec` of ``output_type``. Raises ``TypeError`` when pydantic cannot
    make a JSON schema for the type (the message names the type), ``ValueError`` for an unknown
    mode, a negative ``retries`` or an empty ``tool_name``, and ``TypeError`` for a validator
    that is not callable."""
    if mode is not None and mode not in OUTPUT_MODES:
        raise ValueError(
            f"output mode must be one of {', '.join(OUTPUT_MODES)} or None, not {mode!r}"
        )
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"output_retries must be an int >= 0, not {retries!r}")
    if not isinstance(tool_name, str) or not tool_name:
        raise ValueError("the output tool's name must be a non-empty str")
    for v in validators:
        if not callable(v):
            raise TypeError(f"an output validator must be callable, not {v!r}")
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = _plain_schema(adapter)
    except Exception as exc:
        raise TypeError(
            f"output_type {output_type!r} cannot be an output type: pydantic cannot make a JSON "
            f"schema for it ({exc})"
        ) from None
    wrapped = schema.get("type") != "object"
    spec = OutputSpec(
        schema=schema,
        wrapped=wrapped,
        type_name=_type_name(output_type),
        mode=mode,
        retries=retries,
        tool_name=tool_name,
        output_type=output_type,
        validators=tuple(validators),
        adapter=adapter,
    )
    if description is not None:
        spec = _replace(spec, description=description)
    return spec
