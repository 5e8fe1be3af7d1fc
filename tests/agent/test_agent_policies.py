"""An Agent takes the run policies as AgentLoopConfig does (docs/policies.md): ``tool_policy``,
``fallback`` and ``compaction`` are keywords and attributes, checked when set, and applied from
the next run (``limits`` are combined per session and prompt: test_limits_runs)."""

from __future__ import annotations

from typing import Any

import pytest

from agentcore_fsm import Agent, AgentTool, AgentToolResult, Model, TextContent
from agentcore_fsm.core.compaction import Compaction
from agentcore_fsm.core.fallback import ModelFallback
from agentcore_fsm.core.tool_policy import ToolPolicy
from agentcore_fsm.integrations.providers.faux import (
    FauxError,
    FauxProvider,
    faux_response,
    faux_tool_call,
)

MAIN = Model(id="main", provider="p0")
SPARE = Model(id="spare", provider="p1")


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("tool_policy", 2, "tool_policy must be a ToolPolicy or None, not int"),
        ("fallback", [SPARE], "fallback must be a ModelFallback or None, not list"),
        ("compaction", "drop", "compaction must be a Compaction or None, not str"),
    ],
)
def test_wrong_policies_are_refused_when_set(name: str, value: Any, text: str) -> None:
    with pytest.raises(TypeError) as info:
        Agent(**{name: value})
    assert text in str(info.value)
    agent = Agent()
    with pytest.raises(TypeError) as info:
        setattr(agent, name, value)
    assert text in str(info.value)
    assert getattr(agent, name) is None


def test_a_fallback_moves_a_failed_request_to_the_next_model() -> None:
    provider = FauxProvider([FauxError("busy", kind="overloaded"), faux_response("from spare")])
    agent = Agent(model=MAIN, stream_fn=provider, fallback=ModelFallback(models=(SPARE,)))
    agent.prompt_sync("hi")
    last = agent.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "stop"
    assert (last.provider, last.model) == ("p1", "spare")
    # without it (from the next run on), the same failure ends the run
    agent.fallback = None
    provider.queue(FauxError("busy", kind="overloaded"))
    agent.prompt_sync("again")
    assert agent.messages[-1].stop_reason == "error"


def test_a_tool_policy_refuses_repeated_calls() -> None:
    runs: list[str] = []

    async def execute(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        runs.append(call_id)
        return AgentToolResult(content=[TextContent(text="same")])

    tool = AgentTool(name="look", description="d", parameters={"type": "object"}, execute=execute)
    same = [faux_response(tool_calls=[faux_tool_call("look", {"x": 1})]) for _ in range(3)]
    provider = FauxProvider([*same, faux_response("done")])
    agent = Agent(
        model=MAIN, stream_fn=provider, tools=[tool], tool_policy=ToolPolicy(repeat_limit=2)
    )
    agent.prompt_sync("look")
    results = [m for m in agent.messages if m.role == "toolResult"]
    # the second identical call in a row, and the third, are refused without running
    assert len(results) == 3 and runs == ["call_1"]
    assert [r.is_error for r in results] == [False, True, True]


def test_a_compaction_setting_reaches_the_run() -> None:
    seen: list[Any] = []

    def compact(messages: list[Any], info: Any) -> list[Any]:
        seen.append(info.reason)
        return messages[-1:]

    provider = FauxProvider(
        [FauxError("prompt is too long", kind="context_overflow"), faux_response("short now")]
    )
    agent = Agent(model=MAIN, stream_fn=provider, compaction=Compaction(compact=compact))
    agent.prompt_sync("a long story")
    assert seen == ["overflow"]
    assert agent.messages[-1].stop_reason == "stop"
