"""The suite catches what it should: small mutations of the declarations must not survive.

Each mutant is an in-memory copy of one declaration (``states/agent_loop.toml``,
``states/tool_call.toml`` or ``states/agent.toml``) with one change:

* ``drop``: one emit action removed from a transition;
* ``swap``: two neighbouring emit actions of a transition swapped;
* ``retarget``: a transition sent to another state;
* ``invert``: a guard moved from ``guards`` to ``unless`` (or back);
* ``unset``: a setter removed from a declared variable's ``set_by`` (the engine then refuses
  that write: a declaration whose variables' setters are wrong must not pass).

Every loop mutant is run (``LoopMachine(..., declaration=mutant)``, stepped by the synchronous
driver of ``prop_sync_driver``) over the scenario bank; it is killed when the grammar checker or
one of the properties of ``prop_scenarios.verify`` fails, or the machine breaks (raises, gets
stuck, never ends). Every tool-call mutant runs the calls of a real loop: over the tool-call
bank of ``prop_tool_calls`` (stepped, each case checked against its oracle), then over the
scenario bank through the synchronous driver; a call's machine that never stops taking
transitions (``Runaway``) is killed too. Every lifecycle mutant runs the Agent runs of
``prop_lifecycle``. A mutant that survives every run fails its test. Scenarios and cases that
fail on the real declarations (a core bug, reported by ``test_bank`` and
``test_tool_call_declaration``) are left out, so that no mutant is "killed" by a bug it did not
cause.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import pytest
from prop_bank import BANK
from prop_lifecycle import lifecycle_runs
from prop_limits import LIMIT_RUNS
from prop_models import MODEL_BANK
from prop_models import run_stepped as run_models_stepped
from prop_models import verify as verify_models
from prop_output import STEPPED_BANK
from prop_output import run_stepped as run_output_case
from prop_output import verify as verify_output
from prop_policy_tools import POLICY_RUNS
from prop_scenarios import verify
from prop_suspension import SUSPENSION_RUNS
from prop_sync_driver import SyncDriver, run_sync
from prop_tool_calls import CALL_BANK, Runaway, run_case, use_call_declaration, watch_calls

from agentcore_fsm.core.declaration import Declaration, load_declaration, parse_declaration

REAL = load_declaration("agent_loop")
CALL_REAL = load_declaration("tool_call")
LIFECYCLE_REAL = load_declaration("agent")


def _with(decl: Declaration, index: int, **changes: object) -> Declaration:
    transitions = tuple(
        dataclasses.replace(t, **changes) if t.index == index else t  # type: ignore[arg-type]
        for t in decl.transitions
    )
    return dataclasses.replace(decl, transitions=transitions, source_text="")


def mutants(real: Declaration = REAL) -> dict[str, Declaration]:
    out: dict[str, Declaration] = {}
    for t in real.transitions:
        where = f"#{t.index}:{t.trigger}:{'|'.join(t.source)}"
        for j, action in enumerate(t.emits):
            emits = t.emits[:j] + t.emits[j + 1 :]
            out[f"drop {action} {where}"] = _with(real, t.index, emits=emits)
        for j in range(len(t.emits) - 1):
            emits = list(t.emits)
            emits[j], emits[j + 1] = emits[j + 1], emits[j]
            out[f"swap {t.emits[j]}/{t.emits[j + 1]} {where}"] = _with(
                real, t.index, emits=tuple(emits)
            )
        for dest in real.states:
            if dest != t.dest:
                out[f"retarget {where} -> {dest}"] = _with(real, t.index, dest=dest)
        for guard in t.guards:
            guards = tuple(g for g in t.guards if g != guard)
            out[f"invert {guard} {where}"] = _with(
                real, t.index, guards=guards, unless=(*t.unless, guard)
            )
        for guard in t.unless:
            unless = tuple(g for g in t.unless if g != guard)
            out[f"invert not {guard} {where}"] = _with(
                real, t.index, unless=unless, guards=(*t.guards, guard)
            )
    for var in real.variables.values():
        for setter in var.set_by:
            left = tuple(s for s in var.set_by if s != setter)
            variables = {**real.variables, var.name: dataclasses.replace(var, set_by=left)}
            out[f"unset {var.name} by {setter}"] = dataclasses.replace(
                real, variables=variables, source_text=""
            )
    return out


MUTANTS = mutants(REAL)
CALL_MUTANTS = mutants(CALL_REAL)
LIFECYCLE_MUTANTS = mutants(LIFECYCLE_REAL)


# Mutants that cannot be told apart by any run, because they change nothing observable; each
# with the reason. The engine makes them equivalent: entering `executing` offers its automatic
# `tools_settled`, which sends a batch whose calls have not begun back to `preparing_tools`;
# entering `closing_turn` asks for `proceed`, one more round trip that leads where the
# original went when should_stop_after_turn is not configured.
def _where(trigger: str, source: str, dest: str, *, emits: str | tuple[str, ...] = ()) -> str:
    """The mutant name's ``#N:trigger:source`` of the one declared transition that matches
    (indices move whenever a transition is inserted: the policies insert several)."""
    found = [
        t
        for t in REAL.transitions
        if t.trigger == trigger
        and source in t.source
        and t.dest == dest
        and all(e in t.emits for e in ((emits,) if isinstance(emits, str) else emits))
    ]
    assert len(found) == 1, (trigger, source, dest, emits, found)
    t = found[0]
    return f"#{t.index}:{t.trigger}:{'|'.join(t.source)}"


_TOOLS = _where("model_finished", "streaming", "preparing_tools", emits="begin_calls")
_STOP = _where("stop_decided", "deciding_stop", "awaiting_steering")
_SETTLED = _where("tools_settled", "executing", "preparing_tools")
_APPROVED = _where("approvals_settled", "awaiting_approval", "preparing_tools")
_OVERFLOW = _where("model_finished", "streaming", "compacting", emits="compact_for_overflow")
_FALLBACK = _where("model_finished", "streaming", "falling_back", emits="fall_back")

_DEADLINE_POLLED = _where(
    "abort", "preparing_next_turn", "stopped", emits=("limit_deadline", "injected_messages")
)
_DEADLINE_CALLS = _where("abort", "executing", "stopped", emits=("limit_deadline", "abort_calls"))
_DEADLINE_OUTPUT = _where("abort", "validating_output", "stopped", emits="limit_deadline")

EQUIVALENT = {
    # The deadline's abort transitions (usage limits): `limit_deadline` only records the limit
    # (limit_reached), which only `deadline_message` and `agent_end` read, and
    # `deadline_message` only prepares the closing message, which `assistant_end` emits; so
    # their place relative to an action that reads neither cannot be seen.
    f"swap limit_deadline/turn_start {_DEADLINE_POLLED}": "turn_start neither reads "
    "limit_reached nor writes what limit_deadline reads (the run's start time and the clock)",
    f"swap injected_messages/deadline_message {_DEADLINE_POLLED}": "deadline_message emits "
    "nothing and reads neither the context nor the polled messages; assistant_end, after both, "
    "emits the message it prepared",
    f"swap limit_deadline/abort_calls {_DEADLINE_CALLS}": "abort_calls answers the calls "
    "'Operation aborted' without reading limit_reached",
    f"swap limit_deadline/answer_output_calls {_DEADLINE_OUTPUT}": "answer_output_calls "
    "answers the answer's calls as aborted without reading limit_reached",
    f"retarget {_TOOLS} -> executing": "tools_settled [calls_remain] "
    "returns to preparing_tools at once and the calls begin there",
    f"retarget {_STOP} -> closing_turn": "closing_turn only adds a "
    "proceed before awaiting_steering, where the original goes directly",
    # Calls begin only in preparing_tools (may_begin), so `begin_calls` emitted elsewhere
    # begins none; entering awaiting_approval offers its automatic `approvals_settled`, whose
    # [calls_remain, not approvals_pending] transition sends a batch with calls still to
    # begin (and none running, ready or waiting) back to preparing_tools, where they begin.
    f"retarget {_TOOLS} -> awaiting_approval": "approvals_settled "
    "[calls_remain] returns to preparing_tools at once (no call has begun: none is ready, "
    "answered or waiting) and the calls begin there",
    f"retarget {_SETTLED} -> awaiting_approval": "the same: [calls_remain] "
    "holds only in a sequential batch between two calls (none ready or waiting), so "
    "approvals_settled returns to preparing_tools at once and the next call begins there",
    f"retarget {_APPROVED} -> executing": "the mirror image: "
    "tools_settled [calls_remain] returns to preparing_tools at once and the next call begins "
    "there",
    # Fallback and compaction (prop_models): `compact_for_overflow` and `fall_back` emit no
    # event; they write variables (and the model) that only the next state's effect reads, so
    # their place among the transition's emit actions cannot be seen.
    f"swap turn_end/compact_for_overflow {_OVERFLOW}": "compact_for_overflow "
    "only writes compaction_reason, which the compacting effect reads; turn_end reads nothing "
    "of it",
    f"swap turn_end/fall_back {_FALLBACK}": "fall_back writes model_index, "
    "model_errors and the model, which only the next request reads; turn_end carries the "
    "failed message, which fall_back does not change",
}
# None for the tool call and the lifecycle: every one of their mutants is killed.
CALL_EQUIVALENT: dict[str, str] = {}
LIFECYCLE_EQUIVALENT: dict[str, str] = {}


@contextmanager
def _quiet() -> Iterator[None]:
    logger = logging.getLogger("agentcore_fsm")
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = False


# How often each run killed a mutant so far in this process, and which run killed the last
# mutant of each transition: the runs are tried in that order (the last killer of the mutant's
# transition first, then the runs that killed most), so that most mutants cost one run instead
# of every run declared before their killer. Only the order changes: a mutant is killed exactly
# when some run fails on it, as before, and one that survives still goes through every run.
_KILLS: Counter[str] = Counter()
_LAST_KILLER: dict[str, str] = {}


def _transition_of(mutant: str) -> str:
    """The ``#N:trigger:source`` a mutant's name points at (the whole name for the others),
    prefixed with ``call`` for the tool-call declaration's."""
    where = next((part for part in mutant.split() if part.startswith("#")), mutant)
    return f"call {where}" if mutant.startswith("call ") else where


def _first_failure(runs: dict[str, Callable[[], Any]], mutant: str = "") -> str | None:
    """Name and rule (or exception type) of the first run that fails; None if all pass."""
    hint = _LAST_KILLER.get(_transition_of(mutant))
    order = sorted(runs, key=lambda name: (name != hint, -_KILLS[name]))
    with _quiet():
        for name in order:
            try:
                runs[name]()
            except (Exception, Runaway) as exc:
                _KILLS[name] += 1
                _LAST_KILLER[_transition_of(mutant)] = name
                rule = getattr(exc, "rule", None)
                return f"{name}: {rule or type(exc).__name__}"
    return None


@cache
def healthy_scenarios() -> tuple[str, ...]:
    """The bank scenarios that pass on the real declaration."""
    names = []
    for name, sc in BANK.items():
        try:
            harness, messages = run_sync(sc, REAL)
            verify(sc, harness, messages)
        except Exception:
            continue
        names.append(name)
    return tuple(names)


@cache
def healthy_call_cases() -> tuple[str, ...]:
    """The tool-call bank cases that pass on the real declaration."""
    names = []
    for name, case in CALL_BANK.items():
        try:
            run_case(case)
        except Exception:
            continue
        names.append(name)
    return tuple(names)


def kill(decl: Declaration, mutant: str = "") -> str | None:
    """Run the bank on the loop declaration ``decl``; the first failure, or None if the mutant
    survived."""

    def scenario(name: str) -> Callable[[], None]:
        def run() -> None:
            sc = BANK[name]
            harness, messages = run_sync(sc, decl)
            verify(sc, harness, messages)

        return run

    def output_case(name: str) -> Callable[[], None]:  # structured output (prop_output)
        def run() -> None:
            case = STEPPED_BANK[name]
            events, messages = run_output_case(case, decl)
            verify_output(case, events, messages)

        return run

    # usage limits (prop_limits) first: quick, and the only runs that reach their transitions
    runs: dict[str, Callable[[], Any]] = {
        f"limits: {name}": (lambda run=run: run(decl, None)) for name, run in LIMIT_RUNS.items()
    }
    runs |= {name: scenario(name) for name in healthy_scenarios()}
    runs |= {
        f"suspension: {name}": (lambda run=run: run(decl, None))
        for name, run in SUSPENSION_RUNS.items()
    }
    runs |= {f"output {name}": output_case(name) for name in STEPPED_BANK}
    # the tool policies (prop_policy_tools)
    runs |= {
        f"policy: {name}": (lambda run=run: run(decl, None)) for name, run in POLICY_RUNS.items()
    }

    def model_case(name: str) -> Callable[[], None]:  # fallback and compaction (prop_models)
        def run() -> None:
            case = MODEL_BANK[name]
            events, messages, _ = run_models_stepped(case, decl)
            verify_models(case, events, messages)

        return run

    runs |= {f"models {name}": model_case(name) for name in MODEL_BANK}
    return _first_failure(runs, mutant)


def _sync_with_calls_on(name: str, decl: Declaration) -> Callable[[], None]:
    def run() -> None:
        sc = BANK[name]
        driver = SyncDriver(sc, None, record=False)
        use_call_declaration(driver.m, decl)
        watch_calls(driver.m)
        messages = driver.run()
        verify(sc, driver.h, messages)

    return run


def kill_call(decl: Declaration, mutant: str = "") -> str | None:
    """Run the tool-call bank, then the scenario bank, with every tool call on the tool-call
    declaration ``decl``; the first failure, or None if the mutant survived."""
    runs: dict[str, Callable[[], Any]] = {
        f"case {name}": (lambda case=CALL_BANK[name]: run_case(case, decl))
        for name in healthy_call_cases()
    }
    # the tool policies (prop_policy_tools): first, the bank below never takes their paths
    runs = {
        f"policy: {name}": (lambda run=run: run(None, decl)) for name, run in POLICY_RUNS.items()
    } | runs
    runs |= {name: _sync_with_calls_on(name, decl) for name in healthy_scenarios()}
    return _first_failure(runs, "call " + mutant)


def kill_lifecycle(decl: Declaration) -> str | None:
    """Run the Agent lifecycle runs on the lifecycle declaration ``decl``."""
    return _first_failure({"lifecycle runs": lambda: lifecycle_runs(decl)})


def test_there_are_mutants_of_every_kind() -> None:
    for found in (MUTANTS, CALL_MUTANTS):
        assert {name.split()[0] for name in found} == {
            "drop",
            "swap",
            "retarget",
            "invert",
            "unset",
        }
        # one unset mutant per declared (variable, setter) pair
        real = REAL if found is MUTANTS else CALL_REAL
        unset = [name for name in found if name.startswith("unset ")]
        assert len(unset) == sum(len(v.set_by) for v in real.variables.values()) > 0
    # the lifecycle declares no guards and no emit actions: only its targets can change
    assert {name.split()[0] for name in LIFECYCLE_MUTANTS} == {"retarget"}
    assert len(LIFECYCLE_MUTANTS) == len(LIFECYCLE_REAL.transitions) * (
        len(LIFECYCLE_REAL.states) - 1
    )
    assert len(healthy_scenarios()) >= len(BANK) - 5
    assert healthy_call_cases() == tuple(CALL_BANK)


@pytest.mark.parametrize("name", [n for n in MUTANTS if n not in EQUIVALENT])
def test_mutant_is_killed(name: str) -> None:
    assert kill(MUTANTS[name], name) is not None, f"mutant survived every scenario: {name}"


@pytest.mark.parametrize("name", [n for n in CALL_MUTANTS if n not in CALL_EQUIVALENT])
def test_tool_call_mutant_is_killed(name: str) -> None:
    assert kill_call(CALL_MUTANTS[name], name) is not None, f"tool-call mutant survived: {name}"


@pytest.mark.parametrize("name", [n for n in LIFECYCLE_MUTANTS if n not in LIFECYCLE_EQUIVALENT])
def test_lifecycle_mutant_is_killed(name: str) -> None:
    assert kill_lifecycle(LIFECYCLE_MUTANTS[name]) is not None, f"lifecycle mutant survived: {name}"


def test_the_equivalent_mutants_exist_and_survive() -> None:
    """The lists above stay true: each names a mutant that exists and that no run tells apart
    (if the suite starts killing one, it is not equivalent: take it off the list)."""
    lists: list[tuple[dict[str, str], dict[str, Declaration], Callable[..., str | None]]] = [
        (EQUIVALENT, MUTANTS, kill),
        (CALL_EQUIVALENT, CALL_MUTANTS, kill_call),
        (LIFECYCLE_EQUIVALENT, LIFECYCLE_MUTANTS, kill_lifecycle),
    ]
    for equivalent, found, killer in lists:
        for name in equivalent:
            assert name in found, name
            assert killer(found[name]) is None, name


def test_a_mutant_written_as_toml_text_is_killed_too() -> None:
    """The same mechanism from edited declaration text: drop ``turn_end`` from the transition
    that ends a turn without tool calls."""
    text = REAL.source_text
    marker = 'dest = "turn_end"\nemits = ["assistant_end", "turn_end"]'
    assert marker in text
    mutant = parse_declaration(text.replace(marker, 'dest = "turn_end"\nemits = ["assistant_end"]'))
    assert kill(mutant) is not None


def test_a_tool_call_mutant_written_as_toml_text_is_killed_too() -> None:
    """From edited tool-call text: answer a call without asking ``may_answer`` (the parallel
    policy's "results after every end, in source order")."""
    text = CALL_REAL.source_text
    marker = 'dest = "answered"\nguards = ["may_answer"]\n'
    assert marker in text
    mutant = parse_declaration(text.replace(marker, 'dest = "answered"\n'))
    assert kill_call(mutant) is not None
