"""No hidden flags: what decides the machines' paths besides their states is declared.

The rule (agentcore_fsm/core/declared.py, "Variables"): a machine keeps the declared variables in
one record (``machine.vars``); every other attribute is write-once (configuration, the
declaration, handles) or data the class lists in ``data_attributes`` (messages, results, the
step being built). Here every scenario of the bank runs on the synchronous driver, watching the
loop machine's attributes from construction to the end, and each tool call's machine's from
its construction: an attribute that changed (rebound, or a list/dict changed in place) and is
not data fails the test. So a new flag that decides control flow (``self._retrying = True``)
cannot be added to ``LoopMachine`` or ``ToolCallMachine`` without declaring it (or calling it
data, in plain sight). The record itself is never rebound, and its fields are exactly the
declared variables.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from prop_bank import BANK
from prop_sync_driver import SyncDriver

from agentcore_fsm.core.declaration import load_declaration
from agentcore_fsm.core.loop_actions import LoopVars
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.tool_call import CallVars, ToolCallMachine

_CONTAINERS = (list, dict, set)


def _seen(value: Any) -> tuple[Any, Any]:
    return value, (value.copy() if isinstance(value, _CONTAINERS) else None)


def _differs(seen: tuple[Any, Any], value: Any) -> bool:
    before, contents = seen
    if before is not value:
        return True
    return isinstance(value, _CONTAINERS) and contents != value


class Watch:
    """The attributes of ``obj`` as they were when watching began, and which changed since."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.before = {name: _seen(value) for name, value in vars(obj).items()}
        self.changed: set[str] = set()

    def look(self) -> None:
        now = vars(self.obj)
        for name in now.keys() | self.before.keys():
            if name not in self.before or name not in now or _differs(self.before[name], now[name]):
                self.changed.add(name)


def watched_run(driver: SyncDriver) -> tuple[set[str], set[str]]:
    """Run ``driver``'s scenario, watching its loop machine and every tool call's machine; the
    attributes that changed (the loop's, the calls')."""
    m = driver.m
    calls: list[Watch] = []
    make_calls = m._make_calls

    def watched_make_calls(parallel: bool) -> None:
        make_calls(parallel)
        calls.extend(Watch(c) for c in m._calls)

    m._make_calls = watched_make_calls  # type: ignore[method-assign]
    feed = m.feed

    def watched_feed(item: Any) -> Any:
        step = feed(item)
        loop.look()
        for call in calls:
            call.look()
        return step

    m.feed = watched_feed  # type: ignore[method-assign]
    loop = Watch(m)  # after the two wrappers: they are the test's, not the machine's
    driver.run()
    loop.look()
    changed_calls: set[str] = set()
    for call in calls:
        call.look()
        changed_calls |= call.changed
    return loop.changed, changed_calls


def _bank_changes() -> tuple[set[str], set[str]]:
    loop_changed: set[str] = set()
    call_changed: set[str] = set()
    for sc in BANK.values():
        changed = watched_run(SyncDriver(sc, None, record=False))
        loop_changed |= changed[0]
        call_changed |= changed[1]
    return loop_changed, call_changed


class AgentContextCopy:
    @staticmethod
    def of(m: LoopMachine) -> Any:
        """The context ``m`` was built with, without the prompts it appended."""
        ctx = m.context
        kept = ctx.messages[: len(ctx.messages) - len(m.prompts)]
        return type(ctx)(ctx.system_prompt, kept, list(ctx.tools))


@pytest.fixture(scope="module")
def bank_changes() -> tuple[set[str], set[str]]:
    return _bank_changes()


def test_only_data_and_the_variables_record_change_during_a_run(
    bank_changes: tuple[set[str], set[str]],
) -> None:
    loop_changed, call_changed = bank_changes
    assert loop_changed - LoopMachine.data_attributes == set(), (
        "LoopMachine attributes that changed during a run and are neither declared variables "
        "(in m.vars) nor listed data"
    )
    assert call_changed - ToolCallMachine.data_attributes == set(), (
        "ToolCallMachine attributes that changed during a run and are neither declared "
        "variables (in c.vars) nor listed data"
    )
    # the record is one object for the whole run; the runs did change things (the watch sees)
    assert "vars" not in loop_changed and "vars" not in call_changed
    assert {"state", "history", "new_messages"} <= loop_changed
    assert {"state", "result", "message"} <= call_changed


def test_the_records_are_the_declared_variables() -> None:
    for record, name in ((LoopVars, "agent_loop"), (CallVars, "tool_call")):
        decl = load_declaration(name)
        fields = {f.name: f.type for f in dataclasses.fields(record)}
        assert fields == {v.name: v.type for v in decl.variables.values()}
        assert record.__slots__ == tuple(fields)  # slots: no attribute outside the fields


class HiddenFlag(LoopMachine):
    """A machine that counts its turns in an undeclared attribute (what the rule forbids)."""

    def _emit_turn_end(self) -> None:
        super()._emit_turn_end()
        self.turns_ended = getattr(self, "turns_ended", 0) + 1


def test_an_undeclared_flag_is_caught() -> None:
    """The check above can fail: a subclass with a hidden counter is reported."""
    sc = next(iter(BANK.values()))
    driver = SyncDriver(sc, None, record=False)
    old = driver.m
    driver.m = HiddenFlag(old.prompts, AgentContextCopy.of(old), old.config)
    loop_changed, _ = watched_run(driver)
    assert loop_changed - LoopMachine.data_attributes == {"turns_ended"}
