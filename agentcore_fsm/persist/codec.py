"""The codec of the one record of a run: messages, hook values, polls and tool outcomes as JSON
data, and back, with one set of rules (docs/record.md).

A run is recorded as its header (:mod:`agentcore_fsm.persist.journal`) and the inputs its machine
was fed (:mod:`agentcore_fsm.persist.inputs`); every persisted or recorded form (a run store's
journal, a JSONL recording, a durable engine's step outcomes) holds the values this module
makes, and reads them back through it. The rules:

* **Messages.** The library's messages (user, assistant, toolResult) by value; a custom message
  (an application's own role) only when its class is a pydantic model registered with
  :func:`register_message_type`, under its registered name. Reading a record never imports
  anything: a record naming a class that is not registered is refused.
* **Hook values.** What a hook returned is checked by the very checkers the machine uses
  (:mod:`agentcore_fsm.core.boundary`): a value the machine accepts is recorded in its checked
  form; a value it would reject is recorded as that rejection, with the same text, so a run read
  back (resumed, replayed, recovered by a durable engine) takes the same path as the live one.
* **Polls** are recorded as they were given (strs, dicts, messages), or as the rejection of the
  machine's checker; **tool outcomes** as the result the machine keeps (its ``details`` made
  JSON data, :func:`~agentcore_fsm.core.boundary.json_data`) or the text of the error result.
* **Other values** (arguments, approvals' values) are JSON data by
  :func:`~agentcore_fsm.core.boundary.json_data`.

Every decoding function validates what it reads (types and shape) and raises
:class:`RecordError` saying what is wrong; the caller adds which run and which entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from agentcore_fsm.core.boundary import (
    InvalidValueError,
    check_after_result,
    check_before_result,
    check_should_stop,
    check_tool_result,
    check_turn_update,
    coerce_messages,
    exc_text,
    is_json_data,
    is_message,
    json_data,
    pydantic_problems,
)
from agentcore_fsm.core.config import AgentContext, AgentLoopTurnUpdate
from agentcore_fsm.core.messages import (
    MESSAGE_ADAPTER,
    AssistantMessage,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentcore_fsm.core.model_policies import check_compacted
from agentcore_fsm.core.tools import (
    AfterToolCallResult,
    AgentTool,
    AgentToolResult,
    BeforeToolCallResult,
)

__all__ = [
    "HOOK_NAMES",
    "JournaledError",
    "RecordData",
    "RecordError",
    "ToolResolver",
    "decode_context",
    "decode_hook_value",
    "decode_message",
    "decode_model",
    "decode_poll",
    "decode_tool_outcome",
    "decode_update",
    "encode_context",
    "encode_hook_value",
    "encode_message",
    "encode_model",
    "encode_poll",
    "encode_tool_outcome",
    "encode_update",
    "record_text",
    "register_message_type",
    "registered_message_types",
    "tool_spec",
]

HOOK_NAMES = (
    "before_tool_call",
    "after_tool_call",
    "prepare_next_turn",
    "should_stop_after_turn",
    "compact",
)
"""The hooks whose values a record holds (the others' values are not inputs of the machine)."""

ToolResolver = Callable[[str], AgentTool]
"""Gives the tool of a recorded name (raises :class:`RecordError` when there is none)."""

_M = TypeVar("_M", bound=type[BaseModel])


class RecordError(ValueError):
    """A record of a run that cannot be written or read: a value it cannot hold, or a damaged
    record (a field of the wrong type, an index that names no call, a class that is not a
    registered message type, ...). The text names the run and the entry when they are known,
    and says what is wrong; so do :attr:`run_id` and :attr:`entry` (the entry's number, None
    for the header or when unknown)."""

    def __init__(self, text: str, *, run_id: str | None = None, entry: int | None = None) -> None:
        super().__init__(text)
        self.run_id = run_id
        self.entry = entry


class JournaledError(Exception):
    """An exception read back from a record: only its text survives (``str()`` is that text,
    exactly as the run reported it)."""


class RecordData(dict[str, Any]):
    """A JSON object this codec made (a run's header, an entry): JSON data by construction,
    every value checked or converted on the way in (messages by their typed fields, loose
    values by :func:`~agentcore_fsm.core.boundary.json_data`). It is a plain ``dict`` in every
    other respect; a run store that is handed one encodes it with :func:`record_text`, without
    walking it again to check that it is JSON data (docs/record.md#encoding-once). Put nothing
    in it that is not JSON data (a str, an int, a float, a bool, None, and lists and dicts of
    them)."""

    __slots__ = ()


def record_text(value: Any) -> str | None:
    """The JSON text of ``value`` when it is a :class:`RecordData`, by the rules of
    :mod:`agentcore_fsm.persist.json_text` (every character as itself, NaN and the infinities
    as Python's ``json`` writes them), made by pydantic's serializer, which is several times
    faster than ``json.dumps``; None for anything else, and for a value holding a surrogate
    code point (that text takes :func:`~agentcore_fsm.persist.json_text.dumps`, which escapes
    it). Only the form of a float's exponent may differ from ``json.dumps`` (``1.5e-7``, not
    ``1.5e-07``): the value read back is the same."""
    if value.__class__ is not RecordData:
        return None
    try:
        # a plain dict copy of the top level: pydantic serializes a dict subclass by a slower
        # path (for the whole tree), twice the time of the copy and a dict's serialization
        return to_json(dict(value), inf_nan_mode="constants").decode()
    except Exception:  # a surrogate: the escaping writer takes it
        return None


# --- checking what is read ----------------------------------------------------------------------


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int):
        return "an int"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a str"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def need(data: Any, key: str, kind: type | tuple[type, ...], what: str = "") -> Any:
    """``data[key]``, which must be of ``kind`` (never a bool where an int is asked);
    :class:`RecordError` otherwise (``what`` names ``data`` in the text)."""
    if not isinstance(data, dict):
        raise RecordError(f"{what or 'the record'} is {_kind(data)}, not an object")
    if key not in data:
        raise RecordError(f"{what + ' ' if what else ''}has no {key!r}")
    value = data[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
        raise RecordError(f"{what + ' ' if what else ''}{key!r} is {_kind(value)}, not {names}")
    return value


def _validate(cls: Any, data: Any, what: str) -> Any:
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise RecordError(f"{what} does not validate: {pydantic_problems(exc)}") from None


# --- messages -----------------------------------------------------------------------------------

_LIBRARY_MESSAGES = (UserMessage, AssistantMessage, ToolResultMessage)
_BY_NAME: dict[str, type[BaseModel]] = {}
_NAMES: dict[type[BaseModel], str] = {}


def register_message_type(cls: _M, name: str | None = None) -> _M:
    """Register ``cls`` (a pydantic model with a str ``role``: a custom message) so that runs
    carrying its messages can be recorded and read back; returns ``cls`` (use it as a class
    decorator). ``name`` is what records call the class (default ``"module:QualName"``, what
    earlier releases wrote); every process that reads such records must register the class
    under the same name. Registering the same class again is harmless; another class under a
    taken name raises ``ValueError``."""
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        raise TypeError(f"register_message_type takes a pydantic model class, not {cls!r}")
    if cls in _LIBRARY_MESSAGES:
        raise ValueError(f"{cls.__name__} is a message of the library: it needs no registration")
    if name is None:
        name = f"{cls.__module__}:{cls.__qualname__}"
    if not isinstance(name, str) or not name:
        raise ValueError(f"a message type's name must be a non-empty str, not {name!r}")
    taken = _BY_NAME.get(name)
    if taken is not None and taken is not cls:
        raise ValueError(
            f"the message type name {name!r} is taken by {taken.__module__}.{taken.__qualname__}"
        )
    old = _NAMES.get(cls)
    if old is not None and old != name:
        del _BY_NAME[old]
    _BY_NAME[name] = cls
    _NAMES[cls] = name
    return cls


def registered_message_types() -> dict[str, type[BaseModel]]:
    """The registered custom message classes, by the name records call them."""
    return dict(_BY_NAME)


_RESULTS = (ToolResultMessage, AgentToolResult, AfterToolCallResult)
_TYPED = (UserMessage, Model, BeforeToolCallResult)
_NO_ARGUMENTS = (TextContent, ThinkingContent)


def _loose_is_json(model: BaseModel) -> bool:
    """Whether ``model`` is a library model whose fields that may hold anything (a result's
    details, a tool call's arguments) hold JSON data: then every field is typed or JSON data,
    and pydantic's JSON mode gives what :func:`~agentcore_fsm.core.boundary.json_data` would.
    False for a model whose fields are not all known."""
    cls = model.__class__
    if cls in _RESULTS:
        return is_json_data(model.details)  # type: ignore[attr-defined]
    if cls is AssistantMessage:
        for block in model.content:  # type: ignore[attr-defined]
            kind = block.__class__
            if kind is ToolCall:
                if not is_json_data(block.arguments):
                    return False
            elif kind not in _NO_ARGUMENTS and not is_json_data(getattr(block, "arguments", None)):
                # (pydantic's getattr of a missing name is slow: the known blocks skip it)
                return False
        return True
    return cls in _TYPED


def _dump(model: BaseModel) -> Any:
    if _loose_is_json(model):
        # the other fields are typed: pydantic's JSON mode is json_data for them, and faster;
        # its serializer is called directly (model_dump's keyword handling costs as much)
        try:
            return model.__class__.__pydantic_serializer__.to_python(model, mode="json")
        except Exception:  # a dict key that is a lone surrogate, say
            pass
    return json_data(model.model_dump(mode="python"))


def encode_message(message: Any) -> dict[str, Any]:
    """A message as record data: ``{"message": ...}`` for the library's messages,
    ``{"custom": NAME, "message": ...}`` for a registered custom message. Anything else raises
    :class:`RecordError` saying how to make it recordable."""
    cls = type(message)
    if cls in _LIBRARY_MESSAGES:
        return {"message": _dump(message)}
    name = _NAMES.get(cls)
    if name is None:
        if isinstance(message, BaseModel):
            raise RecordError(
                f"a message of class {cls.__module__}.{cls.__qualname__} cannot be recorded: it "
                f"is not a registered message type (register_message_type({cls.__name__}))"
            )
        raise RecordError(
            f"a message of type {cls.__name__} cannot be recorded: custom messages must be "
            f"pydantic models registered with register_message_type"
        )
    return {"custom": name, "message": _dump(message)}


def decode_message(data: Any, what: str = "the message") -> Any:
    """A message from :func:`encode_message`'s data; :class:`RecordError` for anything else
    (``what`` names it in the text). Never imports anything."""
    if not isinstance(data, dict):
        raise RecordError(f"{what} is {_kind(data)}, not a recorded message")
    unknown = [k for k in data if k not in ("message", "custom")]
    if unknown:
        raise RecordError(f"{what} has an unknown field {unknown[0]!r}")
    body = need(data, "message", dict, what)
    custom = data.get("custom")
    if custom is None:
        if body.get("role") not in ("user", "assistant", "toolResult"):
            raise RecordError(
                f"{what} has role {body.get('role')!r} and no registered class; the library's "
                f"messages have role user, assistant or toolResult"
            )
        try:
            return MESSAGE_ADAPTER.validate_python(body)
        except ValidationError as exc:
            raise RecordError(f"{what} does not validate: {pydantic_problems(exc)}") from None
    if not isinstance(custom, str):
        raise RecordError(f"{what} names its class with {_kind(custom)}, not a str")
    cls = _BY_NAME.get(custom)
    if cls is None:
        known = ", ".join(sorted(_BY_NAME)) or "none"
        raise RecordError(
            f"{what} is of class {custom!r}, which is not a registered message type "
            f"(registered: {known}); register it with register_message_type"
        )
    message = _validate(cls, body, what)
    if not is_message(message):
        raise RecordError(f"{what} of class {custom!r} has no str role: it is not a message")
    return message


def _messages(data: Any, what: str) -> list[Any]:
    if not isinstance(data, list):
        raise RecordError(f"{what} is {_kind(data)}, not a list of messages")
    return [decode_message(m, f"{what}[{i}]") for i, m in enumerate(data)]


def encode_model(model: Model) -> Any:
    return _dump(model)


def decode_model(data: Any, what: str = "the model") -> Model:
    if not isinstance(data, dict):
        raise RecordError(f"{what} is {_kind(data)}, not an object")
    model: Model = _validate(Model, data, what)
    return model


# --- tools and contexts -------------------------------------------------------------------------


def tool_spec(tool: AgentTool) -> dict[str, Any]:
    """What a record keeps of a tool besides its name: what the machine reads of it (its
    parameters' JSON schema, whether it prepares its arguments, its execution mode, whether it
    requires approval), so that a reader without the live tool can feed the inputs again."""
    try:
        schema = json_data(tool.json_schema())
    except Exception as exc:
        raise RecordError(
            f"the parameters of tool {tool.name!r} have no JSON schema: {exc_text(exc)}"
        ) from None
    approval = tool.requires_approval
    return {
        "name": tool.name,
        "parameters": schema,
        "prepare": tool.prepare_arguments is not None,
        "mode": tool.execution_mode,
        "approval": approval if isinstance(approval, bool) else "check",
    }


def encode_context(context: AgentContext) -> dict[str, Any]:
    return {
        "system_prompt": context.system_prompt,
        "messages": [encode_message(m) for m in context.messages],
        "tools": [t.name for t in context.tools],
        "tool_specs": [tool_spec(t) for t in context.tools],
    }


def decode_context(data: Any, tools: ToolResolver, what: str = "the context") -> AgentContext:
    if not isinstance(data, dict):
        raise RecordError(f"{what} is {_kind(data)}, not an object")
    system_prompt = need(data, "system_prompt", str, what)
    messages = _messages(need(data, "messages", list, what), f"{what}'s messages")
    names = need(data, "tools", list, what)
    if not all(isinstance(n, str) for n in names):
        raise RecordError(f"{what}'s tools must be a list of tool names (str)")
    if "tool_specs" in data and not isinstance(data["tool_specs"], list):
        raise RecordError(f"{what}'s tool_specs is {_kind(data['tool_specs'])}, not a list")
    found: list[AgentTool] = []
    for name in names:
        try:
            found.append(tools(name))
        except RecordError as exc:
            raise RecordError(f"{what}: {exc}") from None
    return AgentContext(system_prompt, messages, found)


def specs_of(data: Any) -> list[Any]:
    """The tool specs a recorded context holds (none for a record of format 1)."""
    if isinstance(data, dict) and isinstance(data.get("tool_specs"), list):
        return list(data["tool_specs"])
    return []


# --- hook values --------------------------------------------------------------------------------


def encode_update(update: AgentLoopTurnUpdate) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if update.context is not None:
        out["context"] = encode_context(update.context)
    if update.model is not None:
        out["model"] = encode_model(update.model)
    if update.thinking_level is not None:
        out["thinking_level"] = update.thinking_level
    return out


def decode_update(data: Any, tools: ToolResolver) -> AgentLoopTurnUpdate:
    what = "the prepare_next_turn value"
    if not isinstance(data, dict):
        raise RecordError(f"{what} is {_kind(data)}, not an object")
    unknown = [k for k in data if k not in ("context", "model", "thinking_level")]
    if unknown:
        raise RecordError(f"{what} has an unknown field {unknown[0]!r}")
    context = None
    if "context" in data:
        context = decode_context(data["context"], tools, f"{what}'s context")
    model = decode_model(data["model"], f"{what}'s model") if "model" in data else None
    level = data.get("thinking_level")
    try:
        return (
            check_turn_update(
                AgentLoopTurnUpdate(context=context, model=model, thinking_level=level)
            )
            or AgentLoopTurnUpdate()
        )
    except InvalidValueError as exc:
        raise RecordError(f"{what} is not one the hook could return: {exc}") from None


def encode_hook_value(name: str, value: Any) -> dict[str, Any]:
    """What hook ``name`` returned, by the machine's own rules: ``{"value": V}`` (the checked
    value as data, None for None) when the machine accepts it, ``{"error": TEXT}`` when it
    would reject it (TEXT is the rejection the run reports). Raises :class:`RecordError` for
    an accepted value that cannot be recorded (a message that is not a registered type)."""
    try:
        if name == "before_tool_call":
            before = check_before_result(value)
            return {"value": None if before is None else _dump(before)}
        if name == "after_tool_call":
            after = check_after_result(value)
            return {"value": None if after is None else _dump(after)}
        if name == "should_stop_after_turn":
            return {"value": check_should_stop(value)}
        if name == "prepare_next_turn":
            update = check_turn_update(value)
            return {"value": None if update is None else encode_update(update)}
        if name == "compact":  # the compaction hook: the new messages (core/model_policies.py)
            return {"value": [encode_message(m) for m in check_compacted(value)]}
    except InvalidValueError as exc:
        # the machine makes a blocked call's text of str(exc), a failure's of exc_text(exc):
        # the same text for an InvalidValueError, which always has one
        return {"error": exc_text(exc)}
    raise RecordError(f"unknown hook {name!r}: records hold the values of {', '.join(HOOK_NAMES)}")


def decode_hook_value(name: str, data: Any, tools: ToolResolver) -> Any:
    """The value recorded by :func:`encode_hook_value` (``data`` is its dict); a recorded
    rejection raises :class:`JournaledError` with its text (fed to the machine as the hook
    having raised it, it takes the path the rejection took). :class:`RecordError` for data
    that is not a recorded hook value."""
    if not isinstance(data, dict):
        raise RecordError(f"the {name} value is {_kind(data)}, not an object")
    if "error" in data:
        raise JournaledError(need(data, "error", str, f"the {name} value"))
    if "value" not in data:
        raise RecordError(f"the {name} value has neither 'value' nor 'error'")
    return hook_value(name, data["value"], tools)


def hook_value(name: str, value: Any, tools: ToolResolver) -> Any:
    """A hook's value from its recorded data (validated: a value the machine would not have
    accepted is a damaged record)."""
    what = f"the {name} value"
    if name == "should_stop_after_turn":
        if not isinstance(value, bool):
            raise RecordError(f"{what} is {_kind(value)}, not a bool")
        return value
    if name == "compact":  # never None: the checked list of messages
        return _messages(value, what)
    if value is None:
        return None
    if name == "before_tool_call":
        if not isinstance(value, dict):
            raise RecordError(f"{what} is {_kind(value)}, not an object")
        return _validate(BeforeToolCallResult, value, what)
    if name == "after_tool_call":
        if not isinstance(value, dict):
            raise RecordError(f"{what} is {_kind(value)}, not an object")
        return _validate(AfterToolCallResult, value, what)
    if name == "prepare_next_turn":
        return decode_update(value, tools)
    raise RecordError(f"unknown hook {name!r}")


# --- polls --------------------------------------------------------------------------------------


def encode_poll(name: str, value: Any) -> dict[str, Any]:
    """What the poll ``name`` (``get_steering_messages``/``get_follow_up_messages``)
    returned: ``{"value": V}`` with the messages as they were given (strs, dicts with a role,
    messages; a list of them or one), or ``{"error": TEXT}`` when the machine's checker rejects
    it. :class:`RecordError` for a message that is not a registered type."""
    try:
        coerce_messages(value, name)
    except InvalidValueError as exc:
        return {"error": exc_text(exc)}
    return {"value": poll_data(value)}


def poll_data(messages: Any) -> Any:
    """Polled messages, as they were given, as data (the machine has accepted them)."""
    if messages is None:
        return None
    items = list(messages) if isinstance(messages, (list, tuple)) else [messages]
    out: list[Any] = []
    for item in items:
        if isinstance(item, str):
            out.append({"str": item})
        elif isinstance(item, dict):
            out.append({"dict": json_data(item)})
        else:
            out.append(encode_message(item))
    return {"items": out, "list": isinstance(messages, (list, tuple))}


def decode_poll(data: Any) -> Any:
    """The value recorded by :func:`encode_poll` (its dict); a recorded rejection raises
    :class:`JournaledError`."""
    if not isinstance(data, dict):
        raise RecordError(f"the poll's outcome is {_kind(data)}, not an object")
    if "error" in data:
        raise JournaledError(need(data, "error", str, "the poll's outcome"))
    if "value" not in data:
        raise RecordError("the poll's outcome has neither 'value' nor 'error'")
    return poll_value(data["value"])


def poll_value(data: Any) -> Any:
    """Polled messages from :func:`poll_data`'s data (validated)."""
    if data is None:
        return None
    what = "the polled messages"
    items = need(data, "items", list, what)
    as_list = need(data, "list", bool, what)
    if not as_list and len(items) != 1:
        raise RecordError(f"{what} hold {len(items)} items but were one message")
    out: list[Any] = []
    for i, item in enumerate(items):
        where = f"{what}[{i}]"
        if isinstance(item, dict) and "str" in item:
            out.append(need(item, "str", str, where))
        elif isinstance(item, dict) and "dict" in item:
            out.append(need(item, "dict", dict, where))
        else:
            out.append(decode_message(item, where))
    try:
        coerce_messages(out if as_list else out[0], "the poll")
    except InvalidValueError as exc:
        raise RecordError(f"{what} are not messages the poll could return: {exc}") from None
    return out if as_list else out[0]


# --- tool outcomes (for engines that run the tool in a recorded step) ---------------------------


def encode_tool_outcome(
    tool_name: str, value: Any = None, error: BaseException | None = None
) -> dict[str, Any]:
    """What a tool's execution gave, by the machine's rules: ``{"result": R}`` for the result
    it keeps (:func:`~agentcore_fsm.core.boundary.check_tool_result`), ``{"error": TEXT}`` for
    a raise or a value it refuses (TEXT is the error result's text)."""
    if error is not None:
        return {"error": exc_text(error)}
    try:
        result = check_tool_result(value, tool_name)
    except InvalidValueError as exc:
        return {"error": str(exc)}
    return {"result": _dump(result)}


def decode_tool_outcome(data: Any) -> AgentToolResult:
    """The result recorded by :func:`encode_tool_outcome`; a recorded error raises
    :class:`JournaledError` with its text."""
    if not isinstance(data, dict):
        raise RecordError(f"the tool's outcome is {_kind(data)}, not an object")
    if "error" in data:
        raise JournaledError(need(data, "error", str, "the tool's outcome"))
    return tool_result(need(data, "result", dict, "the tool's outcome"))


def tool_result(data: Any, what: str = "the tool's result") -> AgentToolResult:
    if not isinstance(data, dict):
        raise RecordError(f"{what} is {_kind(data)}, not an object")
    result: AgentToolResult = _validate(AgentToolResult, data, what)
    return result


def dump(model: BaseModel) -> Any:
    """A pydantic model's fields as record data (JSON data by
    :func:`~agentcore_fsm.core.boundary.json_data`)."""
    return _dump(model)


def tools_by_name(tools: Mapping[str, AgentTool], what: str = "given") -> ToolResolver:
    """A :data:`ToolResolver` over ``tools``; a name it lacks raises :class:`RecordError`."""

    def resolve(name: str) -> AgentTool:
        tool = tools.get(name)
        if tool is None:
            raise RecordError(
                f"the run used the tool {name!r}, which was not {what} again (tools {what}: "
                f"{', '.join(sorted(tools)) or 'none'})"
            )
        return tool

    return resolve
