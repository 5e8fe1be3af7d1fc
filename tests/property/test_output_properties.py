"""Structured-output runs (docs/output.md) as properties: the fixed bank and generated cases,
stepped by hand and driven on both backends, each checked by the event grammar and the oracle
of prop_output (messages, end reason, output); partial outputs that grow with the answer."""

from __future__ import annotations

import itertools
import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from prop_output import (
    MODEL,
    OUTPUT_BANK,
    STEPPED_BANK,
    OutputCase,
    cases,
    run_on,
    run_stepped,
    verify,
)
from pydantic import BaseModel

from agentcore_fsm import AgentContext, AgentLoopConfig, run_agent_loop
from agentcore_fsm.devtools.testing import GrammarChecker
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response


@pytest.mark.parametrize("name", list(STEPPED_BANK))
def test_the_output_bank_stepped(name: str) -> None:
    case = STEPPED_BANK[name]
    verify(case, *run_stepped(case))


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize("name", list(OUTPUT_BANK))
def test_the_output_bank_driven(name: str, backend: str) -> None:
    case = OUTPUT_BANK[name]
    verify(case, *run_on(case, backend))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_generated_output_runs_stepped(case: OutputCase) -> None:
    verify(case, *run_stepped(case))


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(max_answers=3))
def test_generated_output_runs_driven(case: OutputCase, backend: str) -> None:
    verify(case, *run_on(case, backend))


class Story(BaseModel):
    title: str = ""
    lines: list[str] = []


def _grows(before: Any, after: Any) -> bool:
    """``after`` holds everything ``before`` held: strings extended, lists and dicts grown."""
    if isinstance(before, str):
        return isinstance(after, str) and after.startswith(before)
    if isinstance(before, list):
        return (
            isinstance(after, list)
            and len(after) >= len(before)
            and all(_grows(b, a) for b, a in zip(before[:-1], after, strict=False))
            and (not before or _grows(before[-1], after[len(before) - 1]))
        )
    if isinstance(before, dict):
        return isinstance(after, dict) and all(
            k in after and _grows(v, after[k]) for k, v in before.items()
        )
    return before == after


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize("mode", ["native", "tool"])
def test_partial_outputs_grow_and_end_with_the_output(backend: str, mode: str) -> None:
    story = {"title": "The long road home", "lines": ["It rained.", "Then it stopped raining."]}
    if mode == "native":
        answer = faux_response(json.dumps(story))
    else:
        from agentcore_fsm.integrations.providers.faux import faux_tool_call

        answer = faux_response(tool_calls=[faux_tool_call("final_result", story, id="f1")])
    events: list[Any] = []

    async def main() -> Any:
        return await run_agent_loop(
            ["tell"],
            AgentContext(),
            AgentLoopConfig(model=MODEL),
            events.append,
            stream_fn=FauxProvider([answer], chunk_size=3),
            output_type=Story,
            output_mode=mode,  # type: ignore[arg-type]
        )

    result = anyio.run(main, backend=backend)
    assert result.output == Story(**story)
    partials = [e.output for e in events if e.type == "output_partial"]
    assert partials and partials[-1] == story == events[-1].output
    if mode == "native":  # the text streams in chunks: the answer grows, partial by partial
        assert len(partials) > 5
    for before, after in itertools.pairwise(partials):
        assert before != after and _grows(before, after), (before, after)
    GrammarChecker().feed_all(events)


def test_no_partial_events_without_an_output_type() -> None:
    events: list[Any] = []

    async def main() -> Any:
        return await run_agent_loop(
            ["tell"],
            AgentContext(),
            AgentLoopConfig(model=MODEL),
            events.append,
            stream_fn=FauxProvider([faux_response('{"title": "x"}')], chunk_size=3),
        )

    result = anyio.run(main, backend="trio")
    assert type(result) is list
    assert [e for e in events if e.type == "output_partial"] == []
    assert "output" not in events[-1].model_dump()
