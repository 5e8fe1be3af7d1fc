"""A small JSON-schema checker for tool arguments given as a JSON-schema dict.

It covers the subset that tool schemas use in practice: ``type`` (one or a list), ``properties``,
``required``, ``additionalProperties`` (false or a schema), ``items``, ``enum``, ``const``,
numeric and length bounds, ``pattern``, ``anyOf``/``oneOf``/``allOf``. Unknown keywords are
ignored, as JSON schema says. It returns every problem as ``(path, message)``; no coercion.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["validate_json_schema"]

_TYPE_NAMES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}


def _show(value: Any) -> str:
    """A value as JSON (the model reads these messages; ``true``/``null``, not Python's)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _type_name(value: Any) -> str:
    for cls, name in _TYPE_NAMES.items():
        if type(value) is cls:
            return name
    return type(value).__name__


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return (type(value) is int) or (type(value) is float and value.is_integer())
    if name == "number":
        return type(value) in (int, float)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return type(value) is bool
    if name == "object":
        return isinstance(value, Mapping)
    if name == "array":
        return isinstance(value, list)
    if name == "null":
        return value is None
    return True


def validate_json_schema(schema: Mapping[str, Any], value: Any) -> list[tuple[str, str]]:
    """Check ``value`` against ``schema``; return the problems as ``(path, message)`` pairs."""
    problems: list[tuple[str, str]] = []
    _check(schema, value, "", problems)
    return problems


def _join(path: str, key: str | int) -> str:
    return f"{path}.{key}" if path else str(key)


def _check(schema: Any, value: Any, path: str, out: list[tuple[str, str]]) -> None:
    if schema is False:
        out.append((path or "root", "no value is allowed here"))
        return
    if not isinstance(schema, Mapping):
        return
    where = path or "root"
    expected = schema.get("type")
    if expected is not None:
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_is_type(value, n) for n in names):
            out.append((where, f"must be {' or '.join(names)}, got {_type_name(value)}"))
            return
    if "const" in schema and value != schema["const"]:
        out.append((where, f"must be equal to {_show(schema['const'])}"))
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(_show(v) for v in schema["enum"])
        out.append((where, f"must be one of {allowed}"))
    if type(value) in (int, float):
        if "minimum" in schema and value < schema["minimum"]:
            out.append((where, f"must be >= {schema['minimum']}"))
        if "maximum" in schema and value > schema["maximum"]:
            out.append((where, f"must be <= {schema['maximum']}"))
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            out.append((where, f"must be > {schema['exclusiveMinimum']}"))
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            out.append((where, f"must be < {schema['exclusiveMaximum']}"))
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            out.append((where, f"must have at least {schema['minLength']} characters"))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append((where, f"must have at most {schema['maxLength']} characters"))
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            out.append((where, f"must match pattern {_show(schema['pattern'])}"))
    if isinstance(value, Mapping):
        props = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                out.append((_join(path, name), "required property is missing"))
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                _check(props[key], item, _join(path, key), out)
            elif extra is False:
                out.append((_join(path, key), "property is not allowed"))
            elif isinstance(extra, Mapping):
                _check(extra, item, _join(path, key), out)
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                _check(items, item, _join(path, index), out)
        if "minItems" in schema and len(value) < schema["minItems"]:
            out.append((where, f"must have at least {schema['minItems']} items"))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            out.append((where, f"must have at most {schema['maxItems']} items"))
    for sub in schema.get("allOf") or ():
        _check(sub, value, path, out)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options:
            passing = sum(1 for sub in options if not validate_json_schema(sub, value))
            if passing == 0 or (key == "oneOf" and passing > 1):
                word = "any" if key == "anyOf" else "exactly one"
                out.append((where, f"must match {word} of the allowed schemas"))
