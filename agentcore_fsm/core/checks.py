"""Checks of configuration values, made when a value is set (construction and assignment).

A configuration object (``AgentLoopConfig``, ``ModelCallOptions``, ``AgentContext`` in
:mod:`agentcore_fsm.core.config`, ``AgentTool``, the ``Agent``) keeps a table from each field's name
to one of the checks below and runs it in ``__setattr__``, so a wrong value is refused where it
was written — ``TypeError`` for a value of the wrong type, ``ValueError`` for one of the right type
but out of range (NaN, an infinity, a negative duration) — with a message naming the field,
instead of failing the run later. Nothing here runs per input or per streamed delta.

Every check takes ``(where, name, value)`` — ``where`` names the object (``"AgentLoopConfig"``,
``'tool "search"'``), ``name`` the field — and returns the value to store.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "Check",
    "callable_or_none",
    "choice",
    "duration_or_none",
    "finite_number_or_none",
    "instance",
    "instance_or_none",
    "int_or_none",
    "str_dict_or_none",
    "str_int_dict_or_none",
    "str_or_none",
    "text",
]

Check = Callable[[str, str, Any], Any]


def _kind(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    return type(value).__name__


def _wrong(where: str, name: str, expected: str, value: Any) -> TypeError:
    return TypeError(f"{where}: {name} must be {expected}, not {_kind(value)} ({value!r:.60})")


def text(where: str, name: str, value: Any) -> str:
    """A str."""
    if not isinstance(value, str):
        raise _wrong(where, name, "a str", value)
    return value


def str_or_none(where: str, name: str, value: Any) -> str | None:
    """A str, or None."""
    if value is not None and not isinstance(value, str):
        raise _wrong(where, name, "a str or None", value)
    return value


def callable_or_none(where: str, name: str, value: Any) -> Any:
    """Something to call (a function, ``async def``, a bound method, an object with
    ``__call__``), or None."""
    if value is not None and not callable(value):
        raise _wrong(where, name, "a callable or None", value)
    return value


def _number(where: str, name: str, value: Any, expected: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong(where, name, expected, value)
    if math.isnan(value):
        raise ValueError(f"{where}: {name} must be {expected}, not NaN")
    if math.isinf(value):
        raise ValueError(f"{where}: {name} must be {expected}, not {value}")
    return value


def duration_or_none(where: str, name: str, value: Any) -> float | None:
    """A finite number of seconds, zero or more (not a bool), or None."""
    if value is None:
        return None
    expected = "a finite number of seconds >= 0 or None"
    number = _number(where, name, value, expected)
    if number < 0:
        raise ValueError(f"{where}: {name} must be {expected}, not {value}")
    return value  # type: ignore[no-any-return]


def finite_number_or_none(where: str, name: str, value: Any) -> float | None:
    """A finite number zero or more (not a bool), or None."""
    if value is None:
        return None
    expected = "a finite number >= 0 or None"
    if _number(where, name, value, expected) < 0:
        raise ValueError(f"{where}: {name} must be {expected}, not {value}")
    return value  # type: ignore[no-any-return]


def int_or_none(minimum: int) -> Check:
    """An int of at least ``minimum`` (not a bool), or None."""
    expected = f"an int >= {minimum} or None"

    def check(where: str, name: str, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise _wrong(where, name, expected, value)
        if value < minimum:
            raise ValueError(f"{where}: {name} must be {expected}, not {value}")
        return value

    return check


def str_dict_or_none(where: str, name: str, value: Any) -> dict[str, str] | None:
    """A dict of str to str, or None."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _wrong(where, name, "a dict of str to str or None", value)
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise TypeError(f"{where}: {name} must map str to str; {key!r}: {item!r:.60} is not")
    return value


def str_int_dict_or_none(where: str, name: str, value: Any) -> dict[str, int] | None:
    """A dict of str to an int >= 0, or None."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _wrong(where, name, "a dict of str to int or None", value)
    for key, item in value.items():
        if (
            not isinstance(key, str)
            or isinstance(item, bool)
            or not isinstance(item, int)
            or item < 0
        ):
            raise TypeError(
                f"{where}: {name} must map str to an int >= 0; {key!r}: {item!r:.60} is not"
            )
    return value


def choice(allowed: Iterable[str | None]) -> Check:
    """One of ``allowed``."""
    options = tuple(allowed)
    listed = ", ".join(repr(v) for v in options)

    def check(where: str, name: str, value: Any) -> Any:
        if not (value is None or isinstance(value, str)) or value not in options:
            raise ValueError(f"{where}: {name} must be one of {listed}; got {value!r:.60}")
        return value

    return check


def instance(cls: type, what: str) -> Check:
    """An instance of ``cls`` (``what`` names it in the message)."""

    def check(where: str, name: str, value: Any) -> Any:
        if not isinstance(value, cls):
            raise _wrong(where, name, what, value)
        return value

    return check


def instance_or_none(cls: type, what: str) -> Check:
    """An instance of ``cls``, or None."""

    def check(where: str, name: str, value: Any) -> Any:
        if value is not None and not isinstance(value, cls):
            raise _wrong(where, name, f"{what} or None", value)
        return value

    return check
