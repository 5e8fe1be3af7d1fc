"""Model fallback (``AgentLoopConfig.fallback``; docs/policies-models.md): the settings refused at
construction, the machine's steps, the run's messages and a journaled run's model restored."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentcore_fsm import AgentContext, AgentLoopConfig, Model, UserMessage
from agentcore_fsm.core.events import StreamDone, StreamError
from agentcore_fsm.core.fallback import DEFAULT_FALLBACK_KINDS, ModelFallback, failures_text
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import AssistantMessage, TextContent
from agentcore_fsm.core.protocol import CallModel, Proceed
from agentcore_fsm.devtools.testing import run_checked
from agentcore_fsm.integrations.providers.faux import FauxError, FauxProvider, faux_response
from agentcore_fsm.persist.journal import JournaledLoopMachine, JournalError, derive_run

A = Model(id="a", provider="p")
B = Model(id="b", provider="q")
C = Model(id="c")


def failed(model: Model, kind: Any, text: str = "boom") -> StreamError:
    message = AssistantMessage(
        model=model.id,
        provider=model.provider,
        stop_reason="error",
        error_message=text,
        error_kind=kind,
    )
    return StreamError(reason="error", error=message)


def answered(model: Model) -> StreamDone:
    message = AssistantMessage(content=[TextContent(text="ok")], model=model.id)
    return StreamDone(reason="stop", message=message)


# --- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("models", "on", "error", "text"),
    [
        ([], DEFAULT_FALLBACK_KINDS, ValueError, "models must name at least one Model"),
        ([B, "c"], DEFAULT_FALLBACK_KINDS, TypeError, r"models\[1\] must be a Model, not str"),
        (B, DEFAULT_FALLBACK_KINDS, TypeError, "models must be a list of Model, not Model"),
        ([B], (), ValueError, "on must name at least one error kind"),
        ([B], ("rate_limit", "slow"), ValueError, "on holds 'slow', which is not an error kind"),
        ([B], "rate_limit", TypeError, "on must be a list of error kinds, not str"),
    ],
)
def test_bad_settings_are_refused(models: Any, on: Any, error: type, text: str) -> None:
    with pytest.raises(error, match=f"ModelFallback: .*{text}"):
        ModelFallback(models, on=on)


def test_the_config_takes_only_a_model_fallback() -> None:
    with pytest.raises(
        TypeError, match="AgentLoopConfig: fallback must be a ModelFallback or None"
    ):
        AgentLoopConfig(model=A, fallback=[B])  # type: ignore[arg-type]
    config = AgentLoopConfig(model=A, fallback=ModelFallback(m for m in (B, C)))
    assert config.fallback is not None and config.fallback.models == (B, C)
    assert config.fallback.moves_on("overloaded") and not config.fallback.moves_on("auth")
    assert not config.fallback.moves_on(None)


# --- the machine ----------------------------------------------------------------------------


def test_a_retryable_failure_moves_to_the_next_model_in_a_new_turn() -> None:
    config = AgentLoopConfig(model=A, fallback=ModelFallback([B, C]))
    m = LoopMachine([UserMessage(content="hi")], AgentContext(), config)
    step = m.start()
    assert [type(e) for e in step.effects] == [CallModel] and step.effects[0].model is A
    step = m.stream_event(failed(A, "rate_limit", "HTTP 429"))
    assert m.state == "falling_back" and step.effects == [Proceed()]
    assert [e.type for e in step.events] == ["message_start", "message_end", "turn_end"]
    assert m.vars.model_index == 1 and m.vars.model_errors == ["p/a: HTTP 429"]
    step = m.proceed()
    assert [e.type for e in step.events] == ["turn_start"]
    (effect,) = step.effects
    assert isinstance(effect, CallModel) and effect.model is B and m.model is B
    step = m.stream_event(answered(B))
    assert m.vars.model_errors == []  # forgotten once a request succeeded
    assert m.vars.model_index == 1  # the run keeps the model it reached
    m.proceed()
    assert m.end_reason == "completed" and m.model is B


def test_a_kind_the_fallback_does_not_move_on_for_ends_the_run() -> None:
    config = AgentLoopConfig(model=A, fallback=ModelFallback([B], on=["overloaded"]))
    m = LoopMachine([UserMessage(content="hi")], AgentContext(), config)
    m.start()
    step = m.stream_event(failed(A, "rate_limit", "HTTP 429"))
    assert m.end_reason == "error" and step.events[-1].reason == "error"
    assert m.new_messages[-1].error_message == "HTTP 429"  # its own text: nothing fell back


def test_every_model_failed_names_each_error_in_order() -> None:
    config = AgentLoopConfig(model=A, fallback=ModelFallback([B, C]))
    m = LoopMachine([UserMessage(content="hi")], AgentContext(), config)
    m.start()
    for model, kind, text in ((A, "rate_limit", "e1"), (B, "server_error", "e2")):
        m.stream_event(failed(model, kind, text))
        m.proceed()
    step = m.stream_event(failed(C, "timeout", "e3"))
    assert m.end_reason == "error"
    last = m.new_messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.error_message == failures_text(["p/a: e1", "q/b: e2", "c: e3"])
    assert last.error_message == "Every model failed: p/a: e1; q/b: e2; c: e3"
    assert last.error_kind == "timeout"
    assert step.events[-1].messages[-1] == last


def test_without_a_fallback_nothing_changes() -> None:
    m = LoopMachine([UserMessage(content="hi")], AgentContext(), AgentLoopConfig(model=A))
    m.start()
    m.stream_event(failed(A, "rate_limit", "HTTP 429"))
    assert m.end_reason == "error" and m.vars.model_index == 0 and m.vars.model_errors == []


def test_a_restored_journal_continues_with_the_model_it_reached() -> None:
    config = AgentLoopConfig(model=A, fallback=ModelFallback([B, C]))
    m = JournaledLoopMachine([UserMessage(content="hi", timestamp=1)], AgentContext(), config)
    m.start()
    m.stream_event(failed(A, "overloaded"))
    m.proceed()
    m.stream_event(failed(B, "overloaded"))
    m.proceed()
    restored, steps = JournaledLoopMachine.restore(m.snapshot(), config)
    assert restored.state == "streaming" and restored.model == C
    assert restored.vars.model_index == 2
    (effect,) = restored.pending_effects()
    assert isinstance(effect, CallModel) and effect.model == C
    # the header keeps the settings: a reader without the live config derives the same run
    assert m.header["policies"]["fallback"]["on"] == list(DEFAULT_FALLBACK_KINDS)
    derived = derive_run(m.snapshot())
    assert derived.machine.state == "streaming" and derived.machine.model == C
    assert [e.type for e in derived.events] == [e.type for s in steps for e in s.events]


def test_a_resume_with_other_settings_is_refused() -> None:
    config = AgentLoopConfig(model=A, fallback=ModelFallback([B, C]))
    m = JournaledLoopMachine([UserMessage(content="hi", timestamp=1)], AgentContext(), config)
    m.start()
    other = AgentLoopConfig(model=A, fallback=ModelFallback([C]))
    with pytest.raises(JournalError, match="fallback and compaction settings"):
        JournaledLoopMachine.restore(m.snapshot(), other)
    with pytest.raises(JournalError, match="the config given has none"):
        JournaledLoopMachine.restore(m.snapshot(), AgentLoopConfig(model=A))


def test_a_run_without_policies_keeps_its_header() -> None:
    m = JournaledLoopMachine([UserMessage(content="hi")], AgentContext(), AgentLoopConfig(model=A))
    assert "policies" not in m.header


# --- a run ----------------------------------------------------------------------------------


def test_a_run_through_the_driver_on_both_backends() -> None:
    for backend in ("trio", "asyncio"):
        faux = FauxProvider([FauxError("HTTP 503", kind="overloaded"), faux_response("from b")])
        config = AgentLoopConfig(model=A, fallback=ModelFallback([B]))

        async def main(faux: FauxProvider = faux, config: AgentLoopConfig = config) -> Any:
            return await run_checked(
                [UserMessage(content="hi")], AgentContext(), config, stream_fn=faux
            )

        run = anyio.run(main, backend=backend)
        assert run.summary.reason == "completed" and run.summary.turns == 2
        assert [(m.model, m.stop_reason) for m in run.messages[1:]] == [
            ("a", "error"),
            ("b", "stop"),
        ]
