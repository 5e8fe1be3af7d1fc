"""The declarations in states/: loading, consistency checks, and the shared machine."""

from __future__ import annotations

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
from agentcore_fsm.core.declared import compile_declaration
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
