"""The declarations in states/: loading, consistency checks, and the shared machine."""

from __future__ import annotations

import re
import sys
import threading

import pytest

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    LoopMachine,
    Model,
    TextContent,
    UserMessage,
)
from agentcore_fsm.core.declaration import (
    DeclarationError,
    declaration_names,
    load_declaration,
    parse_declaration,
)
from agentcore_fsm.core.declared import MachineError, compile_declaration
from agentcore_fsm.core.events import StreamDone

LOOP_STATES = {
    "awaiting_steering",
    "streaming",
    "preparing_tools",
    "executing",
    "turn_end",
    "stopped",
}


def test_shipped_declarations_load() -> None:
    assert {"agent_loop", "agent"} <= set(declaration_names())
    loop = load_declaration("agent_loop")
    assert LOOP_STATES <= set(loop.states)
    assert loop.initial == "idle" and loop.final == "stopped"
    assert load_declaration("agent_loop") is loop  # loaded once


def test_unknown_declaration_names_the_known_ones() -> None:
    with pytest.raises(DeclarationError, match=r"no declaration named 'nope'; known: .*agent_loop"):
        load_declaration("nope")


def test_every_input_and_auto_trigger_is_accounted_for() -> None:
    loop = load_declaration("agent_loop")
    assert set(loop.auto_triggers) == {
        "model_finished",
        "tools_prepared",
        "approvals_settled",
        "tools_settled",
        "after_turn",
        "skip_steering_poll",
        "skip_follow_up_poll",
        "limit_reached",  # usage limits, before each model request (docs/policies.md)
        "compact_first",  # context compaction before a request (docs/policies-models.md)
    }
    # the ones the engine offers on entering a state are marked so; model_finished is fired
    # by the stream_event input when a terminal event arrives
    assert {t.trigger for t in loop.transitions if t.auto} == set(loop.auto_triggers) - {
        "model_finished"
    }
    # every way into `stopped` says why the run ended
    assert all(t.reason for t in loop.transitions if t.dest == "stopped")
    assert loop.accepted_inputs("streaming") == [
        "stream_event",
        "stream_exhausted",
        "abort",
        "fail",
    ]
    assert loop.accepted_inputs("stopped") == []


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('dest = "streaming"', 'dest = "nowhere"'), "unknown state 'nowhere'"),
        (
            ('guards = ["first_turn"]', 'guards = ["no_such_guard"]'),
            "undeclared guard 'no_such_guard'",
        ),
        (
            ('emits = ["agent_end"]', 'emits = ["no_such_emit"]'),
            "undeclared emit action 'no_such_emit'",
        ),
        (('initial = "idle"', 'initial = "limbo"'), "initial state 'limbo' is not declared"),
    ],
)
def test_inconsistent_declarations_are_rejected(edit: tuple[str, str], message: str) -> None:
    text = load_declaration("agent_loop").source_text
    assert edit[0] in text
    with pytest.raises(DeclarationError, match=message):
        parse_declaration(text.replace(edit[0], edit[1], 1))


def test_invalid_toml_is_rejected() -> None:
    with pytest.raises(DeclarationError, match="not valid TOML"):
        parse_declaration("name = ")


def test_the_declaration_owns_one_compiled_machine_per_class() -> None:
    decl = load_declaration("agent_loop")
    first = compile_declaration(decl, LoopMachine)
    assert compile_declaration(decl, LoopMachine) is first
    assert decl.compiled[LoopMachine] is first
    LoopMachine([], AgentContext(), AgentLoopConfig(model=Model(id="m"))).start()
    assert first.machine.models == []  # runs are stepped, never registered


def test_runs_on_several_threads_do_not_step_each_other() -> None:
    """Runs share one transitions.Machine; stepping runs from several threads at once must not
    mix their transitions (a queued Machine would: it keeps one queue for all models)."""
    errors: list[str] = []
    model = Model(id="m")

    def work() -> None:
        try:
            for _ in range(200):
                m = LoopMachine(
                    [UserMessage(content="hi")], AgentContext(), AgentLoopConfig(model=model)
                )
                m.start()
                assert m.state == "streaming"
                reply = AssistantMessage(content=[TextContent(text="ok")])
                m.stream_event(StreamDone(reason="stop", message=reply))
                assert m.state == "closing_turn"
                m.proceed()
                assert m.state == "stopped"
                assert [r.dest for r in m.history][-1] == "stopped"
        except Exception as exc:
            errors.append(repr(exc))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_a_declared_name_without_its_method_fails_at_load() -> None:
    from agentcore_fsm.core.declared import DeclaredMachine

    text = load_declaration("agent").source_text.replace(
        "[guards]\n", '[guards]\nready = "a guard no method answers"\n'
    )
    decl = parse_declaration(text)

    class Lifecycle(DeclaredMachine):
        declaration_name = "agent"

    with pytest.raises(DeclarationError, match="has no method _guard_ready"):
        Lifecycle(decl)


def test_a_method_no_declaration_names_fails_at_load() -> None:
    from agentcore_fsm.core.declared import DeclaredMachine

    class Lifecycle(DeclaredMachine):
        declaration_name = "agent"

        def _emit_surprise(self) -> None:  # named by nothing in states/agent.toml
            pass

    with pytest.raises(DeclarationError, match="_emit_surprise is named by no declaration"):
        Lifecycle(load_declaration("agent"))


def test_reasons_are_declared_on_every_way_to_the_final_state() -> None:
    text = load_declaration("agent_loop").source_text
    broken = text.replace('reason = "completed"\n', "", 1)
    with pytest.raises(DeclarationError, match="ends the run without a reason"):
        parse_declaration(broken)
    with pytest.raises(DeclarationError, match="unknown reason 'bored'"):
        parse_declaration(text.replace('reason = "completed"', 'reason = "bored"', 1))


# --- variables, hooks and stream events -------------------------------------------------------

LOOP_TEXT = load_declaration("agent_loop").source_text
MODEL = Model(id="m", provider="p", api="a")


def _loop_with(old: str, new: str) -> str:
    assert old in LOOP_TEXT, old
    return LOOP_TEXT.replace(old, new, 1)


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (
            'set_by = ["stop_decided"]',
            "set_by = []",
            "variable 'stop_requested' has no setter",
        ),
        (
            'set_by = ["stop_decided"]',
            'set_by = ["stop_decide"]',
            "variable 'stop_requested' is set by 'stop_decide', which is no emit action",
        ),
        (
            'reads = ["stop_requested"]',
            'reads = ["stop_wanted"]',
            "guard 'stop_requested' reads undeclared variable 'stop_wanted'",
        ),
        (
            'reads = ["message_started"]',
            'reads = ["started"]',
            "input 'stream_event' reads undeclared variable 'started'",
        ),
        (
            'type = "bool"\ninitial = false\ndoc = "should_stop_after_turn returned true."',
            'type = "bool"\ndoc = "should_stop_after_turn returned true."',
            "variable 'stop_requested' has no initial value and is not optional",
        ),
        ('text_delta = "update"', 'text_delta = "delta"', "unknown handling 'delta'"),
        (
            'suspend_when = "approvals_deferred"',
            'suspend_when = "nobody_decides"',
            "state 'awaiting_approval' suspends when undeclared guard 'nobody_decides'",
        ),
    ],
)
def test_the_loader_checks_variables_and_tables(old: str, new: str, problem: str) -> None:
    with pytest.raises(DeclarationError, match=re.escape(problem)):
        parse_declaration(_loop_with(old, new))


def test_the_variables_record_must_match_the_declaration() -> None:
    """A declared variable the record lacks, or a type that differs, fails when compiling."""
    extra = parse_declaration(
        _loop_with(
            "[variables.outcome]",
            '[variables.retries]\ntype = "int"\ninitial = 0\nset_by = ["turn_end"]\n\n'
            "[variables.outcome]",
        )
    )
    with pytest.raises(DeclarationError, match="LoopVars has no field for variable 'retries'"):
        LoopMachine([], AgentContext(), AgentLoopConfig(model=MODEL), declaration=extra)
    typed = parse_declaration(_loop_with('type = "list[int]"', 'type = "tuple[int, ...]"'))
    with pytest.raises(DeclarationError, match=r"LoopVars.deferred_calls is 'list\[int\]'"):
        LoopMachine([], AgentContext(), AgentLoopConfig(model=MODEL), declaration=typed)


def test_a_write_by_an_undeclared_setter_is_refused() -> None:
    m = LoopMachine([], AgentContext(), AgentLoopConfig(model=MODEL))
    with pytest.raises(MachineError, match="'proceeded' writes the variable 'stop_requested'"):
        m.set_var("proceeded", "stop_requested", True)
    with pytest.raises(MachineError, match="no such variable"):
        m.set_var("abort", "retries", 1)
    assert m.vars.stop_requested is False
    m.set_var("stop_decided", "stop_requested", True)  # the declared setter may
    assert m.vars.stop_requested is True


def test_initial_values_come_from_the_declaration_and_lists_are_fresh() -> None:
    decl = parse_declaration(
        _loop_with(
            'type = "bool"\ninitial = true\ndoc = "The first turn',
            'type = "bool"\ninitial = false\ndoc = "The first turn',
        )
    )
    config = AgentLoopConfig(model=MODEL)
    m = LoopMachine([], AgentContext(), config, declaration=decl)
    assert m.vars.first_turn is False
    a, b = LoopMachine([], AgentContext(), config), LoopMachine([], AgentContext(), config)
    assert a.vars.first_turn is True and a.vars.outcome is None
    assert a.vars.polled == [] and a.vars.polled is not b.vars.polled


def test_hooks_and_stream_events_are_read_from_the_declaration() -> None:
    loop, call = load_declaration("agent_loop"), load_declaration("tool_call")
    assert {s: loop.hook_of(s) for s in loop.states if loop.hook_of(s)} == {
        "preparing_tools": "before_tool_call",
        "executing": "after_tool_call",
        "deciding_stop": "should_stop_after_turn",
        "preparing_next_turn": "prepare_next_turn",
        "compacting": "compact",  # context compaction (docs/policies-models.md)
    }
    assert call.state_of_hook("before_tool_call") == "checking"
    assert call.state_of_hook("after_tool_call") == "reviewing"
    assert loop.stream_kinds("start") == {"start"}
    assert loop.stream_kinds("finish") == {"done", "error"}
    assert "text_delta" in loop.stream_kinds("update")
    assert len(loop.stream_kinds("update")) == 9


def test_transitions_say_which_variables_they_read_and_set() -> None:
    loop = load_declaration("agent_loop")
    by = {(t.trigger, t.source, t.dest, t.guards): t for t in loop.transitions}
    turn_end = next(t for t in loop.transitions if t.emits == ("assistant_end", "turn_end"))
    assert loop.sets(turn_end) == (
        "turn_open",
        "batch_had_calls",
        "batch_terminated",
        "message_started",
        "usage",  # assistant_end counts the response (usage limits, docs/policies.md)
        "requested",
        # assistant_end ends a request: fallback and compaction (core/model_policies.py)
        "model_errors",
        "compacted",
    )
    stop = by[("stop_decided", ("deciding_stop",), "stopped", ("stop_requested",))]
    assert loop.reads(stop) == ("stop_requested",)
    assert loop.sets(stop) == ("stop_requested", "outcome")


def test_the_record_fields_follow_the_declared_order() -> None:
    """A record is built positionally from the declared initial values: the declared order of
    the variables must be the record's field order."""
    first = '[variables.first_turn]\ntype = "bool"\ninitial = true\n'
    assert first in LOOP_TEXT
    start = LOOP_TEXT.index(first)
    end = LOOP_TEXT.index("[variables.turn_open]")
    block = LOOP_TEXT[start:end]
    moved = LOOP_TEXT[:start] + LOOP_TEXT[end:]
    moved = moved.replace("[variables.outcome]", block + "[variables.outcome]", 1)
    decl = parse_declaration(moved)
    with pytest.raises(DeclarationError, match="fields are not in the declared order"):
        LoopMachine([], AgentContext(), AgentLoopConfig(model=MODEL), declaration=decl)
