"""A fast "certainly valid" check for the simple JSON schemas most tools have.

Validating arguments with ``jsonschema`` costs tens of microseconds per call even when they are
valid, which they nearly always are. :func:`fast_checker` compiles a schema that uses only a small,
plain subset of JSON Schema into a chain of closures answering one question: *is this value
certainly valid?* ``True`` is a promise that ``jsonschema`` would report no problem. ``False``
means "not sure": the caller then runs ``jsonschema`` (which gives the exact verdict and the
problem texts). So the fast path never changes a verdict; it only skips work.

The subset (anything else, at any depth, means no fast checker and always the full validator):

* ``type`` (one name or a list), ``properties``, ``required``, ``additionalProperties`` (a bool
  or a schema of the subset), ``items`` (a schema of the subset), ``enum``, ``const``,
  ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``minLength``,
  ``maxLength``, ``minItems``, ``maxItems``;
* annotations, which never fail: ``title``, ``description``, ``default``, ``examples``,
  ``deprecated``, ``readOnly``, ``writeOnly``, ``$comment``;
* the schemas ``true`` and ``false``.

A schema naming its draft (``$schema``), or using ``$ref``, ``format``, ``pattern`` or any other
keyword, is always checked by ``jsonschema``. Where Python and JSON Schema could disagree (``1.0``
is an integer to JSON Schema, ``True == 1`` in Python), the fast check answers "not sure".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["fast_checker"]

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
    }
)
_SUPPORTED = _ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
}
# JSON values whose equality Python decides exactly like JSON Schema (no bool/int mixing, no
# containers): enum and const are checked fast only for these
_SCALARS = (str, int, float, bool, type(None))


def _is_number(value: Any) -> bool:
    cls = value.__class__
    return cls is int or cls is float


def _type_check(name: str) -> Check | None:
    if name == "object":
        return lambda v: v.__class__ is dict
    if name == "array":
        return lambda v: v.__class__ is list
    if name == "string":
        return lambda v: v.__class__ is str
    if name == "integer":
        return lambda v: v.__class__ is int  # 1.0 is an integer too: "not sure"
    if name == "number":
        return _is_number
    if name == "boolean":
        return lambda v: v.__class__ is bool
    if name == "null":
        return lambda v: v is None
    return None


class _Unsupported(Exception):
    pass


def fast_checker(schema: Any) -> Check | None:
    """The fast check of ``schema``, or None when it uses anything outside the subset."""
    if isinstance(schema, Mapping) and "$schema" in schema:
        return None
    try:
        return _compile(schema)
    except _Unsupported:
        return None


def _compile(schema: Any) -> Check:
    if schema is True:
        return lambda v: True
    if schema is False:
        return lambda v: False
    if not isinstance(schema, Mapping) or not set(schema) <= _SUPPORTED:
        raise _Unsupported
    checks: list[Check] = []
    if "type" in schema:
        checks.append(_compile_type(schema["type"]))
    if "enum" in schema:
        checks.append(_compile_options(schema["enum"]))
    if "const" in schema:
        checks.append(_compile_options([schema["const"]]))
    checks += _compile_bounds(schema)
    if {"properties", "required", "additionalProperties"} & set(schema):
        checks.append(_compile_object(schema))
    if {"items", "minItems", "maxItems"} & set(schema):
        checks.append(_compile_array(schema))
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:  # the usual {"type": ..., "properties": ...}: no loop
        first, second = checks
        return lambda v: first(v) and second(v)
    chain = tuple(checks)

    def every(value: Any) -> bool:
        for check in chain:
            if not check(value):
                return False
        return True

    return every


def _compile_type(wanted: Any) -> Check:
    names = [wanted] if isinstance(wanted, str) else wanted
    if not isinstance(names, list) or not names:
        raise _Unsupported
    tests = []
    for name in names:
        test = _type_check(name) if isinstance(name, str) else None
        if test is None:
            raise _Unsupported
        tests.append(test)
    if len(tests) == 1:
        return tests[0]
    chain = tuple(tests)
    return lambda v: any(test(v) for test in chain)


def _compile_options(options: Any) -> Check:
    if not isinstance(options, list):
        raise _Unsupported
    # (class, value) pairs: a match needs the same class and an equal value
    known = {(o.__class__, o) for o in options if o.__class__ in _SCALARS}
    return lambda v: v.__class__ in _SCALARS and (v.__class__, v) in known


def _number(value: Any) -> float | int:
    if not _is_number(value):
        raise _Unsupported
    return value  # type: ignore[no-any-return]


def _count(value: Any) -> int:
    if value.__class__ is not int or value < 0:
        raise _Unsupported
    return int(value)


def _compile_bounds(schema: Mapping[str, Any]) -> list[Check]:
    checks: list[Check] = []
    # numeric bounds apply to numbers only (other values pass them)
    if "minimum" in schema:
        low = _number(schema["minimum"])
        checks.append(lambda v: not _is_number(v) or v >= low)
    if "maximum" in schema:
        high = _number(schema["maximum"])
        checks.append(lambda v: not _is_number(v) or v <= high)
    if "exclusiveMinimum" in schema:
        xlow = _number(schema["exclusiveMinimum"])
        checks.append(lambda v: not _is_number(v) or v > xlow)
    if "exclusiveMaximum" in schema:
        xhigh = _number(schema["exclusiveMaximum"])
        checks.append(lambda v: not _is_number(v) or v < xhigh)
    # lengths apply to strings only
    if "minLength" in schema:
        shortest = _count(schema["minLength"])
        checks.append(lambda v: v.__class__ is not str or len(v) >= shortest)
    if "maxLength" in schema:
        longest = _count(schema["maxLength"])
        checks.append(lambda v: v.__class__ is not str or len(v) <= longest)
    return checks


def _compile_object(schema: Mapping[str, Any]) -> Check:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        raise _Unsupported
    if not all(isinstance(name, str) for name in required):
        raise _Unsupported
    named = {str(name): _compile(sub) for name, sub in properties.items()}
    if not all(isinstance(name, str) for name in properties):
        raise _Unsupported
    must = tuple(required)
    other = None if extra is True else _compile(extra)

    def check(value: Any) -> bool:
        if value.__class__ is not dict:
            return True  # object keywords apply to objects only
        for name in must:
            if name not in value:
                return False
        for key, item in value.items():
            sub = named.get(key)
            if sub is not None:
                if not sub(item):
                    return False
            elif other is not None and (key.__class__ is not str or not other(item)):
                return False
        return True

    return check


def _compile_array(schema: Mapping[str, Any]) -> Check:
    each = _compile(schema["items"]) if "items" in schema else None
    fewest = _count(schema["minItems"]) if "minItems" in schema else 0
    most = _count(schema["maxItems"]) if "maxItems" in schema else None

    def check(value: Any) -> bool:
        if value.__class__ is not list:
            return True  # array keywords apply to arrays only
        if len(value) < fewest or (most is not None and len(value) > most):
            return False
        return each is None or all(each(item) for item in value)

    return check
