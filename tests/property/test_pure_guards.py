"""Guards only read: every guard of both declarations, evaluated anywhere, changes nothing.

A guard (``_guard_<name>``, named in ``[guards]`` of ``states/agent_loop.toml`` or
``states/tool_call.toml``) is a total predicate of the machine's data: it reads, returns a bool
and writes nothing, so that the declaration (and its diagram) tells the whole story of what a
transition does. This walks the sans-IO ``LoopMachine`` with the rules of
``test_machine_stateful.LoopWalk`` (every input, approvals, aborts, failures, invalid inputs) and,
at every point a guard could be asked, evaluates EVERY guard of the loop and of each tool call's
machine, twice, then checks that

* each returned a bool, and the same one both times;
* nothing observable changed: the loop's ``__dict__`` and each call machine's, snapshotted by value
  (and by identity: a guard that swaps an object for an equal copy is caught too), the state,
  the current step's events and effects, and (between steps) ``pending_effects()``.

The points: after every step of the walk; before every trigger a machine fires or offers (the
loop's and each call's: the input handler has written the input's data, the guards are about to
read it), and in the middle of every transition taken (the loop's and each call's, through
``on_transition``).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis.stateful import invariant, precondition, rule
from prop_tool_calls import CallCase, CaseRun, call_cases
from test_machine_stateful import LoopWalk
from transition_watch import watch_transitions

from agentcore_fsm import LoopMachine
from agentcore_fsm.core.declaration import Declaration, load_declaration
from agentcore_fsm.core.declared import Compiled, TransitionRecord
from agentcore_fsm.core.tool_call import ToolCallMachine

LOOP_GUARDS = tuple(load_declaration("agent_loop").guards)
CALL_GUARDS = tuple(load_declaration("tool_call").guards)

_SCALARS = frozenset({str, int, float, bool, bytes, complex, type(None)})
# compared by identity only: code, and what every run shares (declarations and their compiled
# machines are immutable once loaded)
_BY_IDENTITY = (
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    types.ModuleType,
    types.TracebackType,
    types.FrameType,
    type,
    Declaration,
    Compiled,
)


def snapshot(obj: Any, memo: dict[int, int] | None = None, *, identities: bool = True) -> Any:
    """A by-value picture of ``obj`` and everything it reaches, comparable with ``==``: each
    object's type and contents (its ``__dict__`` and slots, its items) and, with ``identities``,
    its identity; code and declarations by identity; an object met again by its first visit's
    number."""
    if memo is None:
        memo = {}
    return _snapshot(obj, memo, identities)


def _snapshot(obj: Any, memo: dict[int, int], identities: bool) -> Any:
    cls = type(obj)
    if cls in _SCALARS:
        return obj
    seen = memo.get(id(obj))
    if seen is not None:
        return ("again", seen)
    memo[id(obj)] = len(memo)
    key = id(obj) if identities else None
    if cls is list or cls is tuple:
        return (cls.__name__, key, tuple(_snapshot(v, memo, identities) for v in obj))
    if cls is dict:
        return (
            "dict",
            key,
            tuple(
                (_snapshot(k, memo, identities), _snapshot(v, memo, identities))
                for k, v in obj.items()
            ),
        )
    if cls is set or cls is frozenset:
        return (cls.__name__, key, tuple(sorted(repr(_snapshot(v, memo, identities)) for v in obj)))
    if isinstance(obj, _BY_IDENTITY) or cls.__module__.startswith("transitions"):
        return ("identity", id(obj))
    parts: list[Any] = [cls.__qualname__, key]
    if isinstance(obj, (str, int, float)):  # a subclass (an enum member, a str-like)
        parts.append(repr(obj))
    if isinstance(obj, BaseException):
        parts.append(_snapshot(obj.args, memo, identities))
    fields = getattr(obj, "__dict__", None)
    if fields is not None:
        parts.append(_snapshot(fields, memo, identities))
    for klass in cls.__mro__:
        for name in getattr(klass, "__slots__", ()):
            if name in ("__dict__", "__weakref__"):
                continue
            parts.append((name, _snapshot(getattr(obj, name, "<unset>"), memo, identities)))
    return tuple(parts)


def differences(before: Any, after: Any, path: str = "loop") -> list[str]:
    """Where two snapshots differ (a few paths), for the failure message."""
    if before == after:
        return []
    same_shape = (
        isinstance(before, tuple)
        and isinstance(after, tuple)
        and len(before) == len(after) > 1
        and before[0] == after[0]
        and isinstance(before[0], str)
    )
    if not same_shape:
        return [f"{path}: {_short(before)} -> {_short(after)}"]
    out: list[str] = []
    head = before[0]
    if head == "dict" and len(before[2]) == len(after[2]):
        for (kb, vb), (ka, va) in zip(before[2], after[2], strict=True):
            if (kb, vb) != (ka, va):
                out += differences(vb, va, f"{path}.{kb}" if kb == ka else path)
    elif head in ("list", "tuple") and len(before[2]) == len(after[2]):
        for i, (b, a) in enumerate(zip(before[2], after[2], strict=True)):
            out += differences(b, a, f"{path}[{i}]")
    elif head not in ("dict", "list", "tuple", "again", "identity"):
        for b, a in zip(before[2:], after[2:], strict=True):
            out += differences(b, a, path)
    return out[:5] or [f"{path}: {_short(before)} -> {_short(after)}"]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 160 else text[:157] + "..."


def shallow(m: LoopMachine) -> list[tuple[str, str, Any]]:
    """Each attribute of the loop and of its calls' machines: its value if a scalar, else its
    identity (cheap: what a guard that assigns an attribute changes)."""
    owners: list[tuple[str, Any]] = [("loop", m)]
    owners += [(f"call#{c.index}", c) for c in m.tool_calls]
    return [
        (label, name, value if type(value) in _SCALARS else id(value))
        for label, owner in owners
        for name, value in vars(owner).items()
    ]


def guards_of(m: LoopMachine) -> list[tuple[str, Callable[[], Any]]]:
    """Every guard of the loop and of each of its calls' machines, bound, with a label."""
    out: list[tuple[str, Callable[[], Any]]] = [
        (f"loop.{name}", getattr(m, f"_guard_{name}")) for name in LOOP_GUARDS
    ]
    for c in m.tool_calls:
        out += [(f"call#{c.index}.{name}", getattr(c, f"_guard_{name}")) for name in CALL_GUARDS]
    return out


def world(m: LoopMachine) -> Any:
    """The loop's data and its calls' (they hang off ``_calls``; each call's ``loop`` is the
    loop again), by value."""
    return snapshot(m.__dict__)


def check_guards(m: LoopMachine, where: str, *, between_steps: bool = False) -> None:
    """Evaluate every guard twice at this point: bools, the same both times, nothing changed.
    Each guard's assignments (to the loop's or a call's attributes) are caught as it returns;
    ``between_steps``, the whole data is also compared by value once all returned (changes in
    place), and the pending effects (inside a step, the cheap check only: a step has many
    points)."""
    effects_before = snapshot(m.pending_effects(), identities=False) if between_steps else None
    before = world(m) if between_steps else None
    attributes = shallow(m)
    guards = guards_of(m)
    first: dict[str, Any] = {}
    for label, guard in guards:
        try:
            value = guard()
        except Exception as exc:
            raise AssertionError(f"{where}: guard {label} raised {exc!r}") from exc
        assert type(value) is bool, f"{where}: guard {label} returned {value!r}, not a bool"
        first[label] = value
        now = shallow(m)
        if now != attributes:
            changed = sorted({f"{o}.{n}" for o, n, _ in set(now) ^ set(attributes)})
            raise AssertionError(f"{where}: guard {label} assigned {', '.join(changed)}")
    for label, guard in guards:  # again, in the same order: the same answers
        assert guard() is first[label], f"{where}: guard {label} changed its answer"
    if not between_steps:
        assert shallow(m) == attributes, f"{where}: evaluating the guards again assigned"
        return
    after = world(m)
    if after != before:
        changed = "; ".join(differences(before, after))
        raise AssertionError(f"{where}: evaluating the guards changed {changed}")
    if between_steps:
        effects = snapshot(m.pending_effects(), identities=False)
        assert effects == effects_before, f"{where}: the pending effects changed"


def watch_guards(m: LoopMachine) -> None:
    """Evaluate every guard before each trigger ``m`` or one of its calls fires or offers, and
    in the middle of each transition taken (chained before what was installed)."""

    def spy_triggers(target: Any, label: str) -> None:
        fire, offer = target.fire, target.offer

        def spied_fire(trigger: str) -> None:
            check_guards(m, f"{label} before firing {trigger!r}")
            fire(trigger)

        def spied_offer(trigger: str) -> bool:
            check_guards(m, f"{label} before offering {trigger!r}")
            return bool(offer(trigger))

        target.fire, target.offer = spied_fire, spied_offer

    def observer(label: str) -> Any:
        def on_transition(record: TransitionRecord) -> None:
            check_guards(m, f"{label} in transition {record}")

        return on_transition

    spy_triggers(m, "loop")
    watch_transitions(m, observer("loop"))  # after the callbacks installed before
    make_calls = m._make_calls  # the one place the loop makes its calls' machines

    def watched_make_calls(parallel: bool) -> None:
        make_calls(parallel)
        for c in m.tool_calls:
            assert isinstance(c, ToolCallMachine)
            spy_triggers(c, f"call#{c.index}")
            watch_transitions(c, observer(f"call#{c.index}"))

    m._make_calls = watched_make_calls  # type: ignore[method-assign]


# --- the tool-call cases: every part of the call's machine -----------------------------------


@settings(max_examples=100)
@given(case=call_cases())
def test_guards_only_read_in_generated_tool_call_cases(case: CallCase) -> None:
    run = CaseRun(case)
    watch_guards(run.m)
    run.run().verify()


# --- random walks of the loop ----------------------------------------------------------------


class PureGuardWalk(LoopWalk):
    """:class:`LoopWalk` with every guard evaluated between steps and inside them."""

    watched: LoopMachine | None = None
    checked_at = -1  # the walk's step count at the last check between steps

    # inputs the state does not accept raise and change nothing (LoopWalk checks that): here
    # they are not fed, so that the walks spend their steps where guards are asked
    def invalid_input(self) -> None:  # type: ignore[override]
        raise AssertionError("not a rule here")

    def bad_approval_input(self) -> None:  # type: ignore[override]
        raise AssertionError("not a rule here")

    @precondition(lambda self: self.m is not None and self.m.finished)
    @rule()
    def run_over(self) -> None:
        """Nothing left to feed (without this, a finished walk would have no rule to take)."""

    @invariant()
    def guards_only_read(self) -> None:
        m = self.m
        if m is None:
            return
        if self.watched is not m:
            self.watched = m
            watch_guards(m)
        if self.steps == self.checked_at:
            return  # no input taken since (a rule that fed an invalid one, which changes nothing)
        self.checked_at = self.steps
        check_guards(m, f"between steps, loop in {m.state!r}", between_steps=True)


PureGuardWalk.TestCase.settings = settings(
    settings.default, max_examples=60, stateful_step_count=40
)
TestPureGuardWalk = PureGuardWalk.TestCase
