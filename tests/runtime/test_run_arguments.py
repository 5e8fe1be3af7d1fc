"""The public run functions check their arguments' types before anything runs, and name the
function, the argument and what it expected (a wrong context used to fail with a raw
``AttributeError`` from inside the run)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import MODEL

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    agent_loop,
    agent_loop_continue,
    run_agent_loop,
    run_agent_loop_continue,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response

pytestmark = pytest.mark.anyio

CONFIG = AgentLoopConfig(model=MODEL)
BAD: list[tuple[str, dict[str, Any], str]] = [
    ("context", {"context": "a string"}, "context must be an AgentContext, not str ('a string')"),
    ("context", {"context": None}, "context must be an AgentContext, not None"),
    ("config", {"config": {"model": MODEL}}, "config must be an AgentLoopConfig, not dict"),
    ("signal", {"signal": "stop"}, "signal must be an AbortSignal"),
    ("signal", {"signal": AbortController()}, "signal must be an AbortSignal"),
    ("stream_fn", {"stream_fn": "openai"}, "stream_fn must be a callable or None, not str"),
    ("on_transition", {"on_transition": 3}, "on_transition must be a callable or None, not int"),
]


def _arguments(change: dict[str, Any]) -> dict[str, Any]:
    given: dict[str, Any] = {
        "context": AgentContext(),
        "config": CONFIG,
        "stream_fn": FauxProvider([faux_response("hi")]),
    }
    given.update(change)
    return given


@pytest.mark.parametrize(("name", "change", "text"), BAD, ids=[b[0] for b in BAD])
async def test_run_agent_loop_names_the_wrong_argument(
    name: str, change: dict[str, Any], text: str
) -> None:
    given = _arguments(change)
    with pytest.raises(TypeError) as info:
        await run_agent_loop(["hi"], given.pop("context"), given.pop("config"), **given)
    assert str(info.value).startswith(f"run_agent_loop: {text}")


@pytest.mark.parametrize(("name", "change", "text"), BAD, ids=[b[0] for b in BAD])
async def test_run_agent_loop_continue_names_the_wrong_argument(
    name: str, change: dict[str, Any], text: str
) -> None:
    given = _arguments(change)
    with pytest.raises(TypeError) as info:
        await run_agent_loop_continue(given.pop("context"), given.pop("config"), **given)
    assert str(info.value).startswith(f"run_agent_loop_continue: {text}")


@pytest.mark.parametrize(("name", "change", "text"), BAD, ids=[b[0] for b in BAD])
def test_agent_loop_forms_name_the_wrong_argument(
    name: str, change: dict[str, Any], text: str
) -> None:
    given = _arguments(change)
    context, config = given.pop("context"), given.pop("config")
    with pytest.raises(TypeError) as info:
        agent_loop(["hi"], context, config, **given)
    assert str(info.value).startswith(f"agent_loop: {text}")
    with pytest.raises(TypeError) as info:
        agent_loop_continue(context, config, **given)
    assert str(info.value).startswith(f"agent_loop_continue: {text}")


async def test_emit_that_is_not_callable_is_refused_before_the_run() -> None:
    seen: list[Any] = []
    provider = FauxProvider([faux_response("hi")])

    with pytest.raises(
        TypeError, match=r"^run_agent_loop: emit must be a callable or None, not int"
    ):
        await run_agent_loop(["hi"], AgentContext(), CONFIG, 5, stream_fn=provider)  # type: ignore[arg-type]
    # nothing ran: the model was never called
    assert provider.calls == seen == []


async def test_right_arguments_still_run() -> None:
    messages = await run_agent_loop(
        ["hi"], AgentContext(), CONFIG, stream_fn=FauxProvider([faux_response("hello")])
    )
    assert [m.role for m in messages] == ["user", "assistant"]
