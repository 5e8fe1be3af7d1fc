"""The shared methods of the library's small data classes (inputs, effects, steps, events).

Each of those classes is a slots dataclass, and Python writes (and compiles) its ``__repr__``,
``__eq__`` and, for a frozen one, ``__hash__`` anew for every class, which was most of what
``import agentcore_fsm`` spent on its own modules. They are declared with ``repr=False,
eq=False`` and inherit the generic methods below instead, which behave exactly as the generated
ones: ``Name(field=value, ...)``, equality of instances of the same class field by field (the
comparison of two tuples), and for a frozen class the hash of that tuple.
"""

from __future__ import annotations

import dataclasses
import reprlib
from typing import Any

__all__ = ["Data", "Value"]

_NAMES: dict[type, tuple[str, ...]] = {}


def _names(cls: type) -> tuple[str, ...]:
    """The names of ``cls``'s fields, in order (found once per class)."""
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


class Data:
    """Base of a mutable slots dataclass declared with ``repr=False, eq=False``: the methods a
    dataclass would generate (its instances are unhashable, as a dataclass with ``eq``)."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        cls = self.__class__
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _names(cls))
        return f"{cls.__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = _names(self.__class__)
        mine: tuple[Any, ...] = tuple(getattr(self, name) for name in names)
        return mine == tuple(getattr(other, name) for name in names)


class Value(Data):
    """Base of a frozen slots dataclass declared with ``repr=False, eq=False``: hashable, by
    the tuple of its fields."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(getattr(self, name) for name in _names(self.__class__)))
