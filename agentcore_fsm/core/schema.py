"""Tool arguments checked against a JSON-schema dict, with the ``jsonschema`` library.

:func:`compile_schema` checks a schema once (when a tool is made) and returns a
:class:`CompiledSchema`, whose :meth:`~CompiledSchema.problems` lists everything wrong with a
value. ``jsonschema`` is imported on first use only, so that ``import agentcore_fsm`` stays cheap.

What is enforced:

* The whole of JSON Schema draft 2020-12 (``$ref``/``$defs``, ``not``, ``prefixItems``,
  ``if``/``then``/``else``, ``dependentRequired``, ``unevaluatedProperties`` …). A schema whose
  ``$schema`` names an older draft that ``jsonschema`` knows (draft 7, for instance) is checked
  by that draft's rules; any other ``$schema`` falls back to 2020-12.
* ``format`` is checked for a fixed set of formats that the standard library can check, so the
  result never depends on which optional packages happen to be installed: ``date-time`` (RFC
  3339: date, ``T``, time and a ``Z`` or ``±hh:mm`` offset), ``date``, ``email`` and
  ``idn-email`` (an ``@``), ``ipv4``, ``ipv6``, ``uuid`` and ``regex``. Other formats are
  annotations only, as the 2020-12 draft has it by default.
* A schema is rejected when it is compiled: when it breaks its draft's meta-schema (``"type":
  "integr"``, a ``pattern`` that is no regular expression …) or when one of its ``$ref`` cannot be
  resolved (``#/$defs/Missing``; remote schemas are never fetched).

How problems read (the model reads them, so values are shown as JSON: ``true``, ``null``,
``"text"``):

* Each problem is ``(path, message)``; the path joins the keys and indices with dots
  (``items.0.price``), ``root`` is the value itself. Problems are sorted by path (indices in
  numeric order); problems at one path keep the order of the schema's keywords.
* A missing required property, a property that ``additionalProperties: false`` or
  ``unevaluatedProperties: false`` forbids, and a property that ``dependentRequired`` asks for
  are reported at that property's own path (``address.city: required property is missing``), as
  pydantic does for model parameters.
* ``anyOf``/``oneOf`` that no alternative matches: an alternative *does not fit* the value when it
  fails on ``type``, ``const`` or ``enum`` at the value itself (the value is not even of the kind
  it describes). If no alternative fits, one problem names what each one wanted (``must be
  integer or null, got string`` when they all only differ in type). If exactly one alternative
  fits, its problems are listed as if it were the only schema (so ``Optional[Address]`` reports
  ``billing.city: required property is missing``). If several fit, the closest (fewest
  problems; the first on a tie) is chosen: one problem at the ``anyOf`` says so, followed by that
  alternative's own problems. ``oneOf`` matched by more than one alternative is one problem.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import cache
from typing import Any, TypeAlias

from agentcore_fsm.core.fast_schema import fast_checker

__all__ = ["CompiledSchema", "compile_schema"]

Path: TypeAlias = tuple[str | int, ...]
Problem: TypeAlias = tuple[Path, str]

# Keywords whose value maps names (not keywords) to schemas or lists.
_NAME_MAPS = frozenset(
    {
        "properties",
        "patternProperties",
        "$defs",
        "definitions",
        "dependentSchemas",
        "dependentRequired",
        "dependencies",
    }
)
# Keywords whose value is data, not a schema: a "$ref" in there is not a reference.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples", "example"})
# The alternatives of anyOf/oneOf "do not fit" a value that fails one of these at its own path.
_SHAPE_KEYWORDS = frozenset({"type", "const", "enum"})
_STDLIB_FORMATS = ("date", "email", "idn-email", "ipv4", "ipv6", "uuid", "regex")
_FORMAT_HINTS = {
    "date-time": ' (RFC 3339, for example "2024-05-01T13:45:00Z")',
    "date": ' (for example "2024-05-01")',
}
_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:(?P<second>\d{2})(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})",
    re.ASCII,
)
_NEVER: dict[str, Any] = {"not": {}}  # fails every value, like the schema `false`
_CHECKED_LIMIT = 256
# Schemas (by repr, with the draft's validator class) already found valid: tools are often made
# again and again with the same schema, and checking one costs one to several milliseconds.
_checked: dict[tuple[type[Any], str], None] = {}


class CompiledSchema:
    """A JSON schema checked once, ready to validate values. ``source`` is the schema given."""

    __slots__ = ("_fast", "_validator", "source")

    def __init__(self, source: Mapping[str, Any], validator: Any) -> None:
        self.source = source
        self._validator = validator
        # a quick "certainly valid" for plain schemas; the validator decides everything else
        self._fast = fast_checker(source)

    def problems(self, value: Any) -> list[tuple[str, str]]:
        """Every problem of ``value`` as ``(path, message)``, sorted by path; ``[]`` if valid."""
        fast = self._fast
        if fast is not None and fast(value):
            return []
        errors = list(self._validator.iter_errors(value))
        if not errors:
            return []
        found = list(dict.fromkeys(_describe_all(errors)))  # drop exact repeats, keep order
        found.sort(key=lambda problem: _path_key(problem[0]))
        return [(_dotted(path), message) for path, message in found]


def compile_schema(schema: Mapping[str, Any], tool_name: str) -> CompiledSchema:
    """Check ``schema`` and compile it; raise ``ValueError`` naming the tool if it is invalid."""
    from jsonschema.validators import (  # type: ignore[import-untyped]
        Draft202012Validator,
        validator_for,
    )

    plain = schema if isinstance(schema, dict) else dict(schema)
    cls: Any = validator_for(plain, default=Draft202012Validator)
    key = _cache_key(cls, plain)
    if key is None or key not in _checked:
        _check_schema(cls, plain, tool_name)
        if key is not None:
            if len(_checked) >= _CHECKED_LIMIT:
                del _checked[next(iter(_checked))]
            _checked[key] = None
    return CompiledSchema(schema, _with_false_paths(cls)(plain, format_checker=_format_checker()))


# --- checking a schema --------------------------------------------------------------------------


def _cache_key(cls: type[Any], schema: dict[str, Any]) -> tuple[type[Any], str] | None:
    """The schema's ``repr`` (unlike JSON text, it tells a tuple from a list, ``1`` from
    ``"1"``); None for an object that cannot show itself, which is then checked every time."""
    try:
        return cls, repr(schema)
    except Exception:
        return None


def _check_schema(cls: type[Any], schema: dict[str, Any], tool_name: str) -> None:
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
    from referencing import Registry
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import specification_with

    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        location = _dotted(tuple(exc.absolute_path))
        raise ValueError(
            f'Tool "{tool_name}": its parameters are not a valid JSON schema: '
            f"at {location}: {exc.message}"
        ) from None
    specification = specification_with(cls.ID_OF(cls.META_SCHEMA) or "")
    resolver = Registry().resolver_with_root(specification.create_resource(schema))
    for ref, where in _local_refs(schema, ()):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            raise ValueError(
                f'Tool "{tool_name}": its parameters schema has a "$ref" that cannot be '
                f"resolved: {_show(ref)} at {_dotted(where)} (remote schemas are not fetched)"
            ) from None


def _local_refs(node: Any, where: Path, names: bool = False) -> Iterable[tuple[str, Path]]:
    """Every ``$ref`` of the schema with its location, except under a nested ``$id``."""
    if isinstance(node, Mapping):
        if not names:
            if where and "$id" in node:
                return  # another base URI: its references are resolved against it
            ref = node.get("$ref")
            if isinstance(ref, str):
                yield ref, (*where, "$ref")
        for key, value in node.items():
            if not names and key in _DATA_KEYWORDS:
                continue
            yield from _local_refs(value, (*where, key), not names and key in _NAME_MAPS)
    elif isinstance(node, list) and not names:
        for index, value in enumerate(node):
            yield from _local_refs(value, (*where, index))


@cache
def _with_false_paths(cls: Any) -> Any:
    """``cls`` reporting a ``false`` schema under ``properties``, ``patternProperties``,
    ``prefixItems``, an array of ``items``, ``anyOf`` or ``oneOf`` with its instance and schema
    paths (jsonschema drops both for a ``false`` subschema).

    Such a ``false`` is checked as ``{"not": {}}``, which fails the same values.
    """
    from jsonschema.validators import extend

    def keeping_paths(check: Any) -> Any:
        def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
            return check(validator, _false_as_never(value), instance, schema)

        return keyword

    names = ("properties", "patternProperties", "prefixItems", "items", "anyOf", "oneOf")
    wrapped = {
        name: keeping_paths(cls.VALIDATORS[name]) for name in names if name in cls.VALIDATORS
    }
    return extend(cls, wrapped)


def _false_as_never(value: Any) -> Any:
    if isinstance(value, dict) and any(sub is False for sub in value.values()):
        return {key: _NEVER if sub is False else sub for key, sub in value.items()}
    if isinstance(value, list) and any(sub is False for sub in value):
        return [_NEVER if sub is False else sub for sub in value]
    return value


@cache
def _format_checker() -> Any:
    from jsonschema import FormatChecker  # type: ignore[import-untyped]

    checker = FormatChecker(formats=_STDLIB_FORMATS)
    checker.checks("date-time", raises=ValueError)(_is_date_time)
    return checker


def _is_date_time(value: object) -> bool:
    """RFC 3339 ``date-time``; out-of-range fields raise ``ValueError`` (a leap second passes)."""
    if not isinstance(value, str):
        return True
    match = _DATE_TIME.fullmatch(value)
    if match is None:
        return False
    text = value.upper().replace("Z", "+00:00")
    if match["second"] == "60":
        start = match.start("second")
        text = text[:start] + "59" + text[start + 2 :]
    datetime.fromisoformat(text)
    return True


# --- describing errors --------------------------------------------------------------------------


def _describe_all(errors: Iterable[Any]) -> list[Problem]:
    problems: list[Problem] = []
    expanded: set[tuple[Path, int, str]] = set()
    for error in errors:
        if error.validator in ("required", "dependentRequired", "dependencies"):
            # these yield one error per missing name: describe them all from the first one
            mark = (tuple(error.absolute_path), id(error.schema), error.validator)
            if mark in expanded:
                continue
            expanded.add(mark)
        problems += _describe(error)
    return problems


def _describe(error: Any) -> list[Problem]:
    keyword = error.validator
    path: Path = tuple(error.absolute_path)
    value = error.instance
    wanted = error.validator_value
    if keyword in ("anyOf", "oneOf"):
        return _describe_alternatives(error, path)
    if keyword == "required":
        names = [name for name in wanted if name not in value]
        return [((*path, name), "required property is missing") for name in names]
    if keyword in ("dependentRequired", "dependencies"):
        return [
            ((*path, name), f"required property is missing (required when {_show(key)} is set)")
            for key, names in wanted.items()
            if key in value and isinstance(names, list)
            for name in names
            if name not in value
        ]
    if keyword == "additionalProperties":
        return [((*path, key), "property is not allowed") for key in _extra_keys(error)]
    if keyword == "unevaluatedProperties":
        keys = _unexpected_in_message(error.message)
        if keys is not None:
            return [((*path, key), "property is not allowed") for key in keys]
    message = _message(error)
    if _is_about_a_property_name(error):
        message = f"property name {_show(value)} {message}"
    return [(path, message)]


def _message(error: Any) -> str:
    """The message of an error that stays at its own path (values shown as JSON)."""
    keyword, value, wanted = error.validator, error.instance, error.validator_value
    if keyword == "type":
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        return f"must be {' or '.join(names)}, got {_type_name(value)}"
    if keyword == "enum":
        return "must be one of " + ", ".join(_show(option) for option in wanted)
    if keyword == "const":
        return f"must be equal to {_show(wanted)}"
    bounds = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if keyword in bounds:
        return f"must be {bounds[keyword]} {_show(wanted)}"
    if keyword == "multipleOf":
        return f"must be a multiple of {_show(wanted)}"
    counts = {
        "minLength": ("at least", "character"),
        "maxLength": ("at most", "character"),
        "minItems": ("at least", "item"),
        "maxItems": ("at most", "item"),
        "minProperties": ("at least", "property"),
        "maxProperties": ("at most", "property"),
    }
    if keyword in counts:
        bound, noun = counts[keyword]
        return f"must have {bound} {_count(wanted, noun)}"
    if keyword == "pattern":
        return f"must match pattern {_show(wanted)}"
    if keyword == "format":
        return f"must match format {_show(wanted)}{_FORMAT_HINTS.get(wanted, '')}"
    if keyword == "uniqueItems":
        return "must not contain duplicate items"
    if keyword in ("contains", "minContains", "maxContains"):
        bound = "at most" if keyword == "maxContains" else "at least"
        number = wanted if keyword != "contains" else error.schema.get("minContains", 1)
        matching = _short(error.schema.get("contains", {}))
        return f"must contain {bound} {_count(number, 'item')} matching {matching}"
    if keyword == "items" and wanted is False:  # after prefixItems
        return f"must have at most {_count(len(error.schema.get('prefixItems', ())), 'item')}"
    if keyword == "additionalItems" and wanted is False:  # draft 7: after an array of items
        items = error.schema.get("items", ())
        return f"must have at most {_count(len(items) if isinstance(items, list) else 0, 'item')}"
    if _is_never(error):
        return "no value is allowed here"
    if keyword == "not":
        return f"must not match {_short(wanted)}"
    return str(error.message)


def _describe_alternatives(error: Any, path: Path) -> list[Problem]:
    keyword = error.validator
    total = len(error.validator_value)
    if not error.context:  # oneOf: more than one alternative matched
        return [(path, f"must match exactly one of the {total} alternatives ({keyword}), not more")]
    branches: dict[Any, list[Any]] = {}
    for sub in error.context:
        steps = sub.relative_schema_path
        branches.setdefault(steps[0] if steps else None, []).append(sub)

    def misfit(sub: Any) -> bool:
        if tuple(sub.absolute_path) != path:
            return False
        return sub.validator in _SHAPE_KEYWORDS or _is_never(sub)

    fitting = [index for index, subs in branches.items() if not any(map(misfit, subs))]
    if not fitting:
        shapes = [next(sub for sub in subs if misfit(sub)) for subs in branches.values()]
        shapes = [sub for sub in shapes if not _is_never(sub)]  # alternatives nothing matches
        if not shapes:
            return [(path, "no value is allowed here")]
        if all(sub.validator == "type" for sub in shapes):
            names: list[str] = []
            for sub in shapes:
                wanted = sub.validator_value
                names += [wanted] if isinstance(wanted, str) else wanted
            names = list(dict.fromkeys(names))
            return [(path, f"must be {' or '.join(names)}, got {_type_name(error.instance)}")]
        messages = list(dict.fromkeys(map(_message, shapes)))
        if len(messages) == 1:
            return [(path, messages[0])]
        each = "; or ".join(messages)
        return [(path, f"must match one of the {total} alternatives ({keyword}): {each}")]
    described = {index: _describe_all(branches[index]) for index in fitting}
    best = min(fitting, key=lambda index: (len(described[index]), fitting.index(index)))
    if len(fitting) == 1 or not isinstance(best, int):
        return described[best]
    note = (
        f"must match one of the {total} alternatives ({keyword}); the closest is alternative "
        f"{best + 1}, whose problems are listed"
    )
    return [(path, note), *described[best]]


def _is_never(error: Any) -> bool:
    """Whether the error comes from a schema that no value matches (``false``, ``not: {}``)."""
    if error.validator is None:
        return True
    wanted = error.validator_value
    return error.validator == "not" and (wanted is True or wanted == {})


def _extra_keys(error: Any) -> list[str]:
    """The properties that ``additionalProperties: false`` forbids, in the value's order."""
    schema = error.schema
    named = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [
        key
        for key in error.instance
        if key not in named and not any(re.search(pattern, key) for pattern in patterns)
    ]


def _unexpected_in_message(message: str) -> list[str] | None:
    """The keys that jsonschema names in "… ('a', 'b' were unexpected)", or None."""
    match = re.search(r"\((.*) (?:was|were) unexpected\)$", message)
    if match is None:
        return None
    import ast

    try:
        keys = ast.literal_eval(f"({match[1]},)")
    except (ValueError, SyntaxError):
        return None
    return [key for key in keys if isinstance(key, str)] or None


def _is_about_a_property_name(error: Any) -> bool:
    """Whether the error comes from ``propertyNames`` (its value is then a key, not a value)."""
    steps = list(error.absolute_schema_path)
    return any(
        step == "propertyNames" and (index == 0 or steps[index - 1] not in _NAME_MAPS)
        for index, step in enumerate(steps)
    )


# --- small helpers --------------------------------------------------------------------------------


def _show(value: Any) -> str:
    """A value as JSON (``true``/``null``, not Python's ``True``/``None``)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _short(value: Any, limit: int = 120) -> str:
    text = _show(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _count(number: Any, noun: str) -> str:
    if number == 1:
        return f"1 {noun}"
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{_show(number)} {plural}"


# JSON Schema's name of each type, checked in this order (bool before int: a bool is an int)
_JSON_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (type(None), "null"),
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (Mapping, "object"),
)


def _type_name(value: Any) -> str:
    for kind, name in _JSON_TYPE_NAMES:
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _dotted(path: Path) -> str:
    return ".".join(str(part) for part in path) or "root"


def _path_key(path: Path) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, part, "") if isinstance(part, int) else (1, 0, part) for part in path)
