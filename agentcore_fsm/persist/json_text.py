"""The JSON text every record of a run is written in: standard JSON that keeps every Python
string exactly, code point for code point.

A Python ``str`` may hold surrogate code points: a lone one (half of an emoji cut by a stream
delta, a provider's ``"\\ud83d"``), or two that happen to form a pair (``"\\ud83d\\ude00"``
is two code points, not the emoji ``"\\U0001f600"``). Plain UTF-8 cannot carry them, and a
standard JSON reader joins an escaped pair into one character. So, writing
(:func:`dumps`): every character is written as itself, except each surrogate code point, which
is written as its own escape with UPPER-case hex digits (``\\uD83D``); reading
(:func:`loads`): an upper-case escape of a surrogate is that one code point, never joined with
the next; every other escape means what JSON says (so a lower-case escaped pair, as
``json.dumps`` and other writers produce for an emoji, is the one character). Text written by
the previous releases (ASCII with lower-case escapes) therefore reads back as it always did.

A reader that knows nothing of this rule still reads the text as valid JSON; it only joins an
escaped pair of surrogates into one character.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["dumps", "loads"]

_SURROGATE = re.compile("[\ud800-\udfff]")
# the escape of a high surrogate that is a real escape (after an even run of backslashes)
_UPPER_HIGH = re.compile(r"(?<!\\)((?:\\\\)*)\\u(D[89AB][0-9A-F]{2})")
_ANY_HIGH = re.compile(r"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2})")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04X}"


def _unescape(match: re.Match[str]) -> str:
    return match.group(1) + chr(int(match.group(2), 16))


def dumps(
    value: Any,
    *,
    default: Callable[[Any], Any] | None = None,
    allow_nan: bool = True,
    indent: int | None = None,
) -> str:
    """``value`` as one compact JSON text (see the module docstring for strings). Raises
    ``TypeError`` for a value JSON cannot hold (unless ``default`` converts it) and, with
    ``allow_nan=False``, ``ValueError`` for NaN and the infinities."""
    text = json.dumps(
        value,
        ensure_ascii=False,
        separators=(",", ": ") if indent is not None else (",", ":"),
        allow_nan=allow_nan,
        default=default,
        indent=indent,
    )
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a surrogate somewhere
        return _SURROGATE.sub(_escape, text)
    return text


def loads(text: str, *, every_surrogate_escape: bool = False) -> Any:
    """Parse one JSON text (see the module docstring). ``every_surrogate_escape``: read every
    escape of a surrogate, whatever the case of its digits, as that one code point (the rule
    of recordings whose header says ``"surrogates": "escaped"``). Raises
    ``json.JSONDecodeError`` (a ``ValueError``) for text that is not JSON, ``RecursionError``
    for text nested too deeply."""
    if every_surrogate_escape:
        if "\\u" in text:
            text = _ANY_HIGH.sub(_unescape, text)
    elif "\\uD" in text:
        text = _UPPER_HIGH.sub(_unescape, text)
    return json.loads(text)
