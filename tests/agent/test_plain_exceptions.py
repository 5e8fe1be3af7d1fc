"""What escapes ``Agent.prompt`` (and the run functions) is the exception itself, never the
backend's exception group: ``except TypeError:`` or ``except MyInterrupt:`` catches it, on trio
and on asyncio, whether it came from the stream function, a tool running in the run's task
group, a hook, a listener or the arguments. (Ordinary exceptions of user code become data in the
transcript; these are the ones that end the call.)"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import MODEL

from agentcore_fsm import Agent, AgentContext, AgentLoopConfig, AgentTool, run_agent_loop
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

pytestmark = pytest.mark.anyio


class Interrupt(BaseException):
    """Not an Exception: the loop does not make it data, it ends the call."""


def _raise(*args: Any) -> Any:
    raise Interrupt("stop here")


async def _raise_async(*args: Any) -> Any:
    raise Interrupt("stop here")


TOOL = AgentTool(
    name="t", description="d", parameters={"type": "object", "properties": {}}, execute=_raise_async
)


def _script() -> FauxProvider:
    return FauxProvider([faux_response(tool_calls=[faux_tool_call("t", {})]), faux_response("x")])


def _agent(where: str) -> Agent:
    if where == "stream_fn":
        return Agent(model=MODEL, stream_fn=_raise)
    agent = Agent(model=MODEL, stream_fn=_script(), tools=[TOOL if where == "tool" else _ok_tool()])
    if where == "hook":
        agent.before_tool_call = _raise_async
    if where == "listener":
        agent.subscribe(_raise)
    return agent


def _ok_tool() -> AgentTool:
    async def fine(*args: Any) -> Any:
        return "ok"

    return AgentTool(
        name="t", description="d", parameters={"type": "object", "properties": {}}, execute=fine
    )


@pytest.mark.parametrize("where", ["stream_fn", "tool", "hook", "listener"])
async def test_agent_prompt_raises_the_exception_itself(where: str) -> None:
    agent = _agent(where)
    with pytest.raises(BaseException) as info:
        await agent.prompt("go")
    assert type(info.value) is Interrupt, repr(info.value)
    assert str(info.value) == "stop here"
    assert agent.lifecycle_state == "idle" and not agent.is_busy


@pytest.mark.parametrize("where", ["stream_fn", "tool"])
async def test_run_agent_loop_raises_the_exception_itself(where: str) -> None:
    stream = _raise if where == "stream_fn" else _script()
    with pytest.raises(BaseException) as info:
        await run_agent_loop(
            ["go"], AgentContext(tools=[TOOL]), AgentLoopConfig(model=MODEL), stream_fn=stream
        )
    assert type(info.value) is Interrupt, repr(info.value)


async def test_a_type_error_from_the_arguments_is_catchable_as_such() -> None:
    agent = Agent(model=MODEL, stream_fn=_script())
    try:
        await agent.prompt(3)  # type: ignore[arg-type]
    except TypeError as exc:
        assert "prompt()" in str(exc)
    else:
        raise AssertionError("prompt(3) did not raise TypeError")
