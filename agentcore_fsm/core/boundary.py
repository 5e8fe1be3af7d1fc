"""Checks for values that cross from user code into a run.

Everything a user callable hands back — a poll's messages, a hook's return value, what
``transform_context`` or ``convert_to_llm`` produced, the stream function's final message — is
checked here before the loop uses it. A wrong value raises :class:`InvalidValueError`, whose text
names the callable and says what was wrong and what is accepted; the loop turns that into a
failure of the run (or, for tool hooks, an error result of that call). Turning an exception into
text never fails (:func:`exc_text`).

The functions are pure and synchronous: the sans-IO machine calls them.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import math
import reprlib
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import PurePath
from typing import Any, TypeVar, get_args
from uuid import UUID

from pydantic import BaseModel, ValidationError

from agentcore_fsm.core.config import AgentContext, AgentLoopTurnUpdate
from agentcore_fsm.core.messages import (
    LLM_ROLES,
    MESSAGE_ADAPTER,
    AgentMessage,
    AssistantMessage,
    Message,
    Model,
    TextContent,
    ThinkingLevel,
    ToolResultMessage,
    UserMessage,
)
from agentcore_fsm.core.tools import (
    AfterToolCallResult,
    AgentTool,
    AgentToolResult,
    BeforeToolCallResult,
)

__all__ = [
    "InvalidValueError",
    "check_after_result",
    "check_api_key",
    "check_before_result",
    "check_llm_messages",
    "check_message_list",
    "check_should_stop",
    "check_terminal_message",
    "check_tool_result",
    "check_turn_update",
    "coerce_messages",
    "describe_value",
    "exc_text",
    "is_json_data",
    "is_message",
    "json_data",
    "pydantic_problems",
]

_LLM_CLASSES = (UserMessage, AssistantMessage, ToolResultMessage)
FINAL_STOP_REASONS = frozenset({"stop", "length", "toolUse", "error", "aborted"})
_short = reprlib.Repr()
_short.maxstring = 40
_short.maxother = 40


class InvalidValueError(TypeError):
    """A user callable returned (or a caller passed) a value the loop cannot use."""


def exc_text(exc: BaseException) -> str:
    """The text of an exception for an error message; never raises and is never empty.

    ``str(exc)`` when it works and is not empty; the class name when it is empty; when ``str()``
    itself raises (or returns a non-str), the class name and what went wrong reading it."""
    name = _class_name(exc)
    try:
        text = str(exc)
    except Exception as inner:
        return f"{name} (its message could not be read: str() raised {_class_name(inner)})"
    except BaseException:  # a KeyboardInterrupt from __str__: keep going, report it plainly
        return f"{name} (its message could not be read)"
    return text if text else name


def _class_name(value: object) -> str:
    name = getattr(type(value), "__name__", None)
    return name if isinstance(name, str) and name else "object"


def describe_value(value: Any) -> str:
    """A short description of a value for an error message: its type and a clipped repr."""
    name = _class_name(value)
    if value is None:
        return "None"
    try:
        shown = _short.repr(value)
    except Exception:
        return name
    return f"{name} {shown}"


def is_message(value: Any) -> bool:
    """A message the loop can carry: one of the library's messages, or a custom object whose
    ``role`` attribute is a non-empty str (not a str, a mapping or a class)."""
    if isinstance(value, _LLM_CLASSES):
        return True
    if isinstance(value, (str, bytes, dict, type)) or value is None:
        return False
    try:
        role = getattr(value, "role", None)
    except Exception:
        return False
    return isinstance(role, str) and bool(role)


def _coerce_one(value: Any, what: str, where: str, timestamp: int | None = None) -> AgentMessage:
    if isinstance(value, str):
        if timestamp is not None:
            return UserMessage(content=[TextContent(text=value)], timestamp=timestamp)
        return UserMessage(content=[TextContent(text=value)])
    if isinstance(value, dict):
        role = value.get("role")
        if role in LLM_ROLES:
            if timestamp is not None and "timestamp" not in value:
                value = {**value, "timestamp": timestamp}
            try:
                message: AgentMessage = MESSAGE_ADAPTER.validate_python(value)
            except ValidationError as exc:
                raise InvalidValueError(
                    f"{what} {where}is a {role!r} message that does not validate: "
                    f"{pydantic_problems(exc)}"
                ) from None
            return message
        raise InvalidValueError(
            f"{what} {where}is a dict with role {role!r}; a message given as a dict needs "
            f"role 'user', 'assistant' or 'toolResult' (custom messages are objects with a "
            f"role attribute)"
        )
    if is_message(value):
        if isinstance(value, AssistantMessage) and value.stop_reason not in FINAL_STOP_REASONS:
            raise InvalidValueError(
                f"{what} {where}is an AssistantMessage with stop_reason "
                f"{value.stop_reason!r}; a message in a transcript has a final stop reason "
                f"(stop, length, toolUse, error or aborted)"
            )
        return value
    raise InvalidValueError(
        f"{what} {where}is {describe_value(value)}; expected a message (a UserMessage, "
        f"AssistantMessage, ToolResultMessage, an object with a str role, or a str)"
    )


def coerce_messages(value: Any, what: str, timestamp: int | None = None) -> list[AgentMessage]:
    """Messages from ``value`` as ``Agent.steer()`` takes them: ``None`` is no message; a str
    becomes one user message; one message is one message; a list or tuple holds messages or
    strs. A dict with role user/assistant/toolResult is validated into that message. Anything
    else raises :class:`InvalidValueError` naming ``what`` and the offending item.

    ``timestamp`` (ms): the time of each message made here (from a str, or a dict without a
    ``timestamp``); None reads the wall clock (the messages' default). The machine passes its
    input's timestamp, so that it never reads a clock."""
    if value is None:
        return []
    if isinstance(value, (str, dict)) or is_message(value):
        return [_coerce_one(value, what, "", timestamp)]
    if not isinstance(value, (list, tuple)):
        raise InvalidValueError(
            f"{what} gave {describe_value(value)}; expected a list of messages (or None, "
            f"one message, or a str)"
        )
    return [_coerce_one(item, what, f"item {i} ", timestamp) for i, item in enumerate(value)]


def check_message_list(value: Any, what: str) -> list[AgentMessage]:
    """A list (or tuple) of messages, as ``transform_context`` must return: no coercion."""
    if not isinstance(value, (list, tuple)):
        raise InvalidValueError(
            f"{what} returned {describe_value(value)}; expected a list of messages"
        )
    for i, item in enumerate(value):
        if not is_message(item) or (
            isinstance(item, AssistantMessage) and item.stop_reason not in FINAL_STOP_REASONS
        ):
            raise InvalidValueError(
                f"{what} returned a list whose item {i} is {describe_value(item)}; expected "
                f"a message (an assistant message with a final stop reason)"
            )
    return list(value)


def check_llm_messages(value: Any, what: str = "convert_to_llm") -> list[Message]:
    """What a model may see: user, assistant and toolResult messages (dicts with those roles
    are validated into them)."""
    if not isinstance(value, (list, tuple)):
        raise InvalidValueError(
            f"{what} returned {describe_value(value)}; expected a list of user, assistant "
            f"and toolResult messages"
        )
    out: list[Message] = []
    for i, item in enumerate(value):
        if isinstance(item, _LLM_CLASSES):
            out.append(item)
            continue
        if isinstance(item, dict) and item.get("role") in LLM_ROLES:
            out.append(_coerce_one(item, what, f"returned a list whose item {i} "))
            continue
        raise InvalidValueError(
            f"{what} returned a list whose item {i} is {describe_value(item)}; the model "
            f"accepts only user, assistant and toolResult messages"
        )
    return out


def check_api_key(value: Any) -> str | None:
    """What ``get_api_key`` returned, when it is a ``str`` or ``None``; otherwise raise
    :class:`InvalidValueError`."""
    if value is None or isinstance(value, str):
        return value
    raise InvalidValueError(f"get_api_key returned {describe_value(value)}; expected a str or None")


def check_terminal_message(kind: str, message: Any) -> AssistantMessage:
    """The message of a ``done``/``error`` stream event: an :class:`AssistantMessage` with a
    final stop reason whose tool calls have unique, non-empty str ids, str names and dict
    arguments. Raises :class:`InvalidValueError` saying what the stream function did wrong."""
    field = "message" if kind == "done" else "error"
    if not isinstance(message, AssistantMessage):
        raise InvalidValueError(
            f"Stream function ended with a {kind!r} event whose {field} is "
            f"{describe_value(message)}; expected an AssistantMessage"
        )
    if message.stop_reason not in FINAL_STOP_REASONS:
        raise InvalidValueError(
            f"Stream function ended with a {kind!r} event whose message has stop_reason "
            f"{message.stop_reason!r}; expected one of stop, length, toolUse, error, aborted"
        )
    if message.stop_reason in ("error", "aborted"):
        # its tool calls are never executed nor answered; it always says what went wrong
        if not isinstance(message.error_message, str) or not message.error_message:
            text = (
                "Request was aborted"
                if message.stop_reason == "aborted"
                else "The stream function reported an error without an error message"
            )
            fixed: AssistantMessage = message.model_copy(update={"error_message": text})
            return fixed
        return message
    content = message.content
    if not isinstance(content, list):
        raise InvalidValueError(
            f"Stream function ended with a message whose content is {describe_value(content)}"
            f"; expected a list of content blocks"
        )
    seen: set[str] = set()
    n = 0
    for block in content:
        if getattr(block, "type", None) != "toolCall":
            continue
        n += 1
        call_id, name, args = (
            getattr(block, "id", None),
            getattr(block, "name", None),
            getattr(block, "arguments", None),
        )
        label = f"tool call #{n}" + (f" ({name})" if isinstance(name, str) else "")
        problem = None
        if not isinstance(call_id, str) or not call_id:
            problem = f"has id {call_id!r}; each tool call needs a non-empty str id"
        elif call_id in seen:
            problem = f"repeats the id {call_id!r}; tool call ids must be unique in a message"
        elif not isinstance(name, str) or not name:
            problem = f"has name {name!r}; expected a non-empty str"
        elif not isinstance(args, dict):
            problem = f"has arguments {describe_value(args)}; expected a dict"
        if problem is not None:
            raise InvalidValueError(
                f"Stream function returned an assistant message whose {label} {problem}"
            )
        seen.add(str(call_id))
    return message


def pydantic_problems(exc: ValidationError) -> str:
    """One line listing a pydantic validation error's problems as ``path: message``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'root'}: {err['msg']}"
        for err in exc.errors(include_url=False)
    )


# --- hook return values -----------------------------------------------------------------------

_THINKING_LEVELS = get_args(ThinkingLevel)  # a tuple: a value that is not hashable is no level
_R = TypeVar("_R", BeforeToolCallResult, AfterToolCallResult)
_TURN_FIELDS = ("context", "model", "thinking_level")


def _invalid(hook: str, problem: str) -> InvalidValueError:
    return InvalidValueError(f"{hook} returned an invalid value: {problem}")


def check_turn_update(value: Any) -> AgentLoopTurnUpdate | None:
    """What ``prepare_next_turn`` returned: None, an :class:`AgentLoopTurnUpdate` or a dict
    with its fields. Each given field is checked (a context with a list of messages and a list
    of tools, a :class:`Model` or a dict that validates as one, a thinking level)."""
    hook = "prepare_next_turn"
    if value is None:
        return None
    if isinstance(value, AgentLoopTurnUpdate):
        fields = {name: getattr(value, name) for name in _TURN_FIELDS}
    elif isinstance(value, dict):
        unknown = [k for k in value if k not in _TURN_FIELDS]
        if unknown:
            raise _invalid(
                hook,
                f"unknown field(s) {', '.join(map(repr, unknown))}; an "
                f"AgentLoopTurnUpdate has context, model and thinking_level",
            )
        fields = {name: value.get(name) for name in _TURN_FIELDS}
    else:
        raise _invalid(
            hook,
            f"{describe_value(value)}; expected an AgentLoopTurnUpdate, a dict with "
            f"its fields, or None",
        )
    context, model, level = fields["context"], fields["model"], fields["thinking_level"]
    if context is not None:
        if not isinstance(context, AgentContext):
            raise _invalid(hook, f"context is {describe_value(context)}; expected an AgentContext")
        if not isinstance(context.system_prompt, str):
            raise _invalid(
                hook,
                f"context.system_prompt is {describe_value(context.system_prompt)}; expected a str",
            )
        try:
            check_message_list(context.messages, "context.messages")
        except InvalidValueError as exc:
            raise _invalid(hook, str(exc).replace(" returned", " is", 1)) from None
        tools = context.tools
        if not isinstance(tools, (list, tuple)) or not all(isinstance(t, AgentTool) for t in tools):
            raise _invalid(hook, "context.tools must be a list of AgentTool")
    if model is not None and not isinstance(model, Model):
        if isinstance(model, dict):
            try:
                model = Model.model_validate(model)
            except ValidationError as exc:
                raise _invalid(hook, f"model does not validate: {pydantic_problems(exc)}") from None
        else:
            raise _invalid(hook, f"model is {describe_value(model)}; expected a Model")
    if level is not None and level not in _THINKING_LEVELS:
        raise _invalid(
            hook,
            f"thinking_level is {describe_value(level)}; expected one of "
            f"{', '.join(get_args(ThinkingLevel))}",
        )
    return AgentLoopTurnUpdate(context=context, model=model, thinking_level=level)


def check_should_stop(value: Any) -> bool:
    """What ``should_stop_after_turn`` returned: a bool (None counts as False)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    raise _invalid("should_stop_after_turn", f"{describe_value(value)}; expected a bool")


def _hook_result(hook: str, cls: type[_R], article: str, value: Any) -> _R | None:
    """None, an instance of ``cls``, or a dict that validates as one."""
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, dict):
        try:
            return cls.model_validate(value)
        except ValidationError as exc:
            raise _invalid(hook, pydantic_problems(exc)) from None
    raise _invalid(
        hook,
        f"{describe_value(value)}; expected {article} {cls.__name__}, a dict with its fields, "
        f"or None",
    )


def check_before_result(value: Any) -> BeforeToolCallResult | None:
    """What ``before_tool_call`` returned: None, a :class:`BeforeToolCallResult` or a dict."""
    return _hook_result("before_tool_call", BeforeToolCallResult, "a", value)


def check_after_result(value: Any) -> AfterToolCallResult | None:
    """What ``after_tool_call`` returned: None, an :class:`AfterToolCallResult` or a dict. Its
    ``details`` are made JSON data as a tool's are (:func:`json_data`)."""
    after = _hook_result("after_tool_call", AfterToolCallResult, "an", value)
    if after is not None and after.details is not None:
        details = json_data(after.details)
        if details is not after.details:
            after = after.model_copy(update={"details": details})
    return after


# --- tool results -------------------------------------------------------------------------------


def check_tool_result(value: Any, tool_name: str) -> AgentToolResult:
    """What a tool returned, as the result the run keeps: an :class:`AgentToolResult` or a dict
    that validates as one, with its ``details`` made JSON data (:func:`json_data`). Anything
    else raises :class:`InvalidValueError` naming the tool (the call's error result is that
    text). The machine calls this for every tool result, and the durable engines call it where
    the tool ran, so that the same value gives the same result everywhere."""
    if isinstance(value, AgentToolResult):
        result = value
    elif isinstance(value, dict):
        try:
            result = AgentToolResult.model_validate(value)
        except ValidationError as exc:
            raise InvalidValueError(
                f"Tool {tool_name} returned an invalid AgentToolResult: {pydantic_problems(exc)}"
            ) from None
    else:
        raise InvalidValueError(
            f"Tool {tool_name} returned {type(value).__name__}; expected an AgentToolResult"
        )
    if result.details is not None:
        details = json_data(result.details)
        if details is not result.details:
            result = result.model_copy(update={"details": details})
    return result


_MAX_DEPTH = 100


def is_json_data(value: Any) -> bool:
    """True when ``value`` is JSON data already (None, bool, int, str, a finite float, and lists
    and dicts with str keys of those, at most 100 levels deep): :func:`json_data` keeps it as
    it is."""
    cls = value.__class__
    if cls is str or cls is int or cls is bool or value is None:
        return True
    if cls is float:
        return math.isfinite(value)
    stack: list[tuple[Any, int]] = [(value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        cls = item.__class__
        subs: Iterable[Any]
        if cls is dict:
            for key in item:
                if key.__class__ is not str:
                    return False
            subs = item.values()
        elif cls is list:
            subs = item
        else:
            return False
        if depth >= _MAX_DEPTH:
            return False
        for sub in subs:
            kind = sub.__class__
            if kind is str or kind is int or kind is bool or sub is None:
                continue
            if kind is float:
                if not math.isfinite(sub):
                    return False
                continue
            push((sub, depth + 1))
    return True


def json_data(value: Any) -> Any:
    """``value`` as JSON data, by the rule every record of a run keeps (docs/record.md): the
    value itself when it is JSON data already (None, bool, int, str, a finite float, lists and
    dicts with str keys of those); otherwise a converted copy, where

    * tuples, sets and frozensets become lists (a set's items sorted when they can be);
    * dict keys that are not str become their JSON text (``1`` → ``"1"``, ``None`` →
      ``"null"``) or their repr;
    * NaN and the infinities become None (JSON has no such numbers);
    * bytes (and bytearray, memoryview) become their standard base64 text;
    * pydantic models and dataclasses become dicts of their fields; enums their value;
      datetimes, dates and times their ISO text; Decimals, UUIDs and paths their str;
    * anything else becomes its ``repr()`` (the class name when ``repr()`` raises), and so
      does a value nested more than 100 levels deep.

    Strings are kept exactly, lone surrogates included. Pure and cheap: a value that is JSON
    data already is checked, not copied."""
    if is_json_data(value):
        return value
    return _convert(value, 0)


def _repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"<{_class_name(value)}>"
    return text if isinstance(text, str) else f"<{_class_name(value)}>"


def _key(key: Any) -> str:
    if isinstance(key, str):
        return str.__str__(key)
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return float.__repr__(key) if math.isfinite(key) else "null"
    return _repr(key)


def _convert(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, enum.Enum):
        return _convert(value.value, depth + 1) if depth < _MAX_DEPTH else _repr(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        number = float(value)
        return number if math.isfinite(number) else None
    if depth >= _MAX_DEPTH:
        return _repr(value)
    if isinstance(value, Mapping):
        return {_key(k): _convert(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_convert(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [_convert(v, depth + 1) for v in value]
        try:
            items.sort()
        except TypeError:
            pass  # items of kinds that do not compare: iteration order
        return items
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, BaseModel):
        return _convert(value.model_dump(mode="python"), depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
        return _convert(fields, depth + 1)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (Decimal, UUID, PurePath)):
        return str(value)
    return _repr(value)
