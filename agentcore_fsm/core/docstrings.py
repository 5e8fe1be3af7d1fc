"""Reading a function's docstring: its description and the description of each parameter.

:func:`parse_docstring` understands the three styles in common use, and finds which one a
docstring is written in by itself:

* **Google**: a section header alone on its line (``Args:``, ``Arguments:``, ``Parameters:``,
  ``Keyword Args:`` …), then one item per parameter, ``name: text`` or ``name (type): text``,
  indented under the header; deeper-indented lines continue the item.
* **NumPy**: a section title underlined with dashes (``Parameters`` / ``----------``), then one
  item per parameter, ``name : type`` (or ``a, b : type``), with its text indented below.
* **Sphinx** (reST fields): ``:param name: text`` or ``:param type name: text`` (also
  ``:parameter:``, ``:arg:``, ``:argument:``, ``:key:``, ``:keyword:``); deeper-indented lines
  continue the field.

The description is the text before the first section or field, as written (the common
indentation removed, blank lines at either end dropped). A parameter's text is unwrapped: the
lines of a paragraph are joined with single spaces, paragraphs are separated by a blank line.
A docstring with none of these sections is all description. Sections that do not describe
parameters (``Returns``, ``Raises``, ``Examples`` …) end the description and are otherwise
ignored, as are ``:type:``/``:rtype:`` fields. ``*args``/``**kwargs`` items are named without
their stars.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Docstring", "parse_docstring"]

_GOOGLE_PARAMS = frozenset(
    {
        "args",
        "arguments",
        "parameters",
        "params",
        "keyword args",
        "keyword arguments",
        "kwargs",
        "other parameters",
        "other params",
    }
)
_GOOGLE_OTHER = frozenset(
    {
        "attributes",
        "example",
        "examples",
        "note",
        "notes",
        "raises",
        "references",
        "return",
        "returns",
        "see also",
        "todo",
        "warning",
        "warnings",
        "warns",
        "yield",
        "yields",
    }
)
_NUMPY_PARAMS = frozenset({"parameters", "other parameters", "keyword arguments", "receives"})
_NUMPY_OTHER = frozenset(
    {
        "attributes",
        "examples",
        "methods",
        "notes",
        "raises",
        "references",
        "returns",
        "see also",
        "warns",
        "warnings",
        "yields",
    }
)
_SPHINX_PARAMS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})

_GOOGLE_HEADER = re.compile(r"^(?P<name>[A-Za-z][A-Za-z ]*?)\s*:\s*$")
_GOOGLE_ITEM = re.compile(r"^(?P<name>\*{0,2}[A-Za-z_]\w*)\s*(?:\((?P<type>.*?)\))?\s*:\s*")
_NUMPY_RULE = re.compile(r"^-{3,}\s*$")
_NUMPY_ITEM = re.compile(
    r"^(?P<names>\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::(?P<type>.*))?$"
)
_SPHINX_FIELD = re.compile(r"^:(?P<kind>[A-Za-z_]+)(?P<args>[^:]*):(?:\s+|$)")


@dataclass(frozen=True)
class Docstring:
    """What a docstring says: the ``description`` (the text before its first section) and
    ``params``, each documented parameter's text by name (in the docstring's order);
    ``style`` is the style it was read as: ``"google"``, ``"numpy"``, ``"sphinx"`` or
    ``"plain"`` (no sections)."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)
    style: str = "plain"


def parse_docstring(text: str | None) -> Docstring:
    """Read ``text`` (a docstring as written, or None); see the module's documentation."""
    if not text or not text.strip():
        return Docstring()
    lines = inspect.cleandoc(text).splitlines()
    finders = (("numpy", _numpy_start), ("sphinx", _sphinx_start), ("google", _google_start))
    for style, find in finders:
        start = find(lines)
        if start is not None:
            description = _block(lines[:start])
            params = _PARSERS[style](lines[start:])
            return Docstring(description, params, style)
    return Docstring(_block(lines))


# --- finding the style ---------------------------------------------------------------------


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _numpy_header(lines: list[str], i: int) -> str | None:
    """The section name when ``lines[i]`` is a NumPy section title (underlined next line)."""
    if i + 1 >= len(lines) or not _NUMPY_RULE.match(lines[i + 1].strip()):
        return None
    name = lines[i].strip().lower()
    return name if name in _NUMPY_PARAMS or name in _NUMPY_OTHER else None


def _numpy_start(lines: list[str]) -> int | None:
    return next((i for i in range(len(lines)) if _numpy_header(lines, i)), None)


def _sphinx_start(lines: list[str]) -> int | None:
    return next((i for i, line in enumerate(lines) if _SPHINX_FIELD.match(line.strip())), None)


def _google_header(line: str) -> str | None:
    match = _GOOGLE_HEADER.match(line.strip())
    if match is None:
        return None
    name = " ".join(match["name"].lower().split())
    return name if name in _GOOGLE_PARAMS or name in _GOOGLE_OTHER else None


def _google_start(lines: list[str]) -> int | None:
    return next((i for i, line in enumerate(lines) if _google_header(line)), None)


# --- the three parsers ---------------------------------------------------------------------


def _google(lines: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        header = _google_header(lines[i])
        if header is None:
            i += 1
            continue
        base = _indent(lines[i])
        body_end = i + 1
        while body_end < len(lines) and (
            not lines[body_end].strip() or _indent(lines[body_end]) > base
        ):
            body_end += 1
        if header in _GOOGLE_PARAMS:
            _collect_items(lines[i + 1 : body_end], params, _google_item)
        i = body_end
    return params


def _google_item(line: str) -> tuple[list[str], str] | None:
    match = _GOOGLE_ITEM.match(line)
    if match is None:
        return None
    return [match["name"]], line[match.end() :]


def _numpy(lines: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        header = _numpy_header(lines, i)
        if header is None:
            i += 1
            continue
        body_end = i + 2
        while body_end < len(lines) and not _numpy_header(lines, body_end):
            body_end += 1
        if header in _NUMPY_PARAMS:
            _collect_items(lines[i + 2 : body_end], params, _numpy_item)
        i = body_end
    return params


def _numpy_item(line: str) -> tuple[list[str], str] | None:
    match = _NUMPY_ITEM.match(line)
    if match is None:
        return None
    return [name.strip() for name in match["names"].split(",")], ""


def _collect_items(
    body: list[str],
    params: dict[str, str],
    read_item: Callable[[str], tuple[list[str], str] | None],
) -> None:
    """Items at the section's first indentation, each continued by deeper lines."""
    first = next((line for line in body if line.strip()), None)
    if first is None:
        return
    level = _indent(first)
    names: list[str] = []
    text: list[str] = []

    def flush() -> None:
        for name in names:
            params[name.lstrip("*")] = _unwrap(text)

    for line in body:
        if line.strip() and _indent(line) <= level:
            item = read_item(line.strip())
            flush()
            names, text = [], []
            if item is not None:
                names, rest = item
                text = [rest] if rest.strip() else []
            continue
        text.append(line)
    flush()


def _sphinx(lines: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        match = _SPHINX_FIELD.match(stripped)
        if match is None:
            i += 1
            continue
        base = _indent(lines[i])
        end = i + 1
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > base):
            end += 1
        words = match["args"].split()
        if match["kind"].lower() in _SPHINX_PARAMS and words:
            params[words[-1].lstrip("*")] = _unwrap([stripped[match.end() :], *lines[i + 1 : end]])
        i = end
    return params


_PARSERS = {"google": _google, "numpy": _numpy, "sphinx": _sphinx}


# --- text ------------------------------------------------------------------------------------


def _block(lines: list[str]) -> str:
    """Lines as written, without the blank lines at either end."""
    return "\n".join(lines).strip()


def _unwrap(lines: list[str]) -> str:
    """The lines' text: a paragraph's lines joined with spaces, paragraphs by a blank line."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n\n".join(" ".join(p) for p in paragraphs if p)
