"""Usage limits over generated runs, on both backends (docs/policies.md#usage-limits).

Each example draws a script of model responses (how many tool calls each asks for, the tokens
each reports), follow-up messages that start more turns, the batches' mode, and random limits
(any of requests, turns, tool calls, input/output/total tokens and cost, with or without the
graceful last turn). Whatever the draw, the run must

* keep the event grammar and the transcript invariants (every call answered, every context
  handed to the model valid);
* count exactly what happened: the requests the model got, the tool calls that ran;
* stay within every limit by no more than docs/policies.md#how-far-a-run-may-go-over says;
* end with ``reason="limit"`` naming a limit that is set and whose figures show it reached, or
  complete normally;
* make a request without tools only as the last request the limits allow.

(The deadline is time, not data: tests/runtime/test_limits_runs.py and
tests/core/test_limits_checks.py test it.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from limit_helpers import PRICED, CountingTool, Reply, ScriptedModel, assert_within

from agentcore_fsm import AgentContext, AgentLoopConfig, UsageLimits, UserMessage, run_agent_loop
from agentcore_fsm.devtools.testing import EventRecorder, check_run

BACKENDS = ["trio", "asyncio"]
EXAMPLES = 60


@dataclass(frozen=True)
class Draw:
    replies: tuple[Reply, ...]
    follow_ups: int
    sequential: bool
    limits: UsageLimits


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


replies = st.builds(
    Reply,
    calls=st.integers(0, 3),
    input_tokens=st.integers(1, 300),
    output_tokens=st.integers(1, 100),
)

limits = st.builds(
    UsageLimits,
    requests=maybe(st.integers(1, 6)),
    turns=maybe(st.integers(1, 6)),
    tool_calls=maybe(st.integers(0, 8)),
    input_tokens=maybe(st.integers(1, 3000)),
    output_tokens=maybe(st.integers(1, 400)),
    total_tokens=maybe(st.integers(1, 4000)),
    cost_usd=maybe(st.floats(1e-5, 2e-3)),
    last_turn_without_tools=st.booleans(),
)

draws = st.builds(
    Draw,
    replies=st.lists(replies, min_size=1, max_size=6).map(tuple),
    follow_ups=st.integers(0, 2),
    sequential=st.booleans(),
    limits=limits,
)


def run_draw(draw: Draw, backend: str) -> tuple[list[Any], list[Any], ScriptedModel, int]:
    tool = CountingTool()
    # the script ends with an answer, so that a run with no limit in its way completes
    model = ScriptedModel([*draw.replies, Reply()])
    left = [draw.follow_ups]

    def follow_up() -> list[str]:
        if left[0] == 0:
            return []
        left[0] -= 1
        return ["and one more thing"]

    config = AgentLoopConfig(
        model=PRICED,
        limits=draw.limits,
        get_follow_up_messages=follow_up,
        tool_execution="sequential" if draw.sequential else "parallel",
    )
    recorder = EventRecorder()

    async def main() -> list[Any]:
        return await run_agent_loop(
            [UserMessage(content="go")],
            AgentContext("sys", tools=[tool.tool()]),
            config,
            recorder,
            stream_fn=model,
        )

    messages = anyio.run(main, backend=backend)
    return recorder.events, messages, model, tool.runs


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=EXAMPLES)
@given(draw=draws)
def test_random_limits_hold_within_their_bound(backend: str, draw: Draw) -> None:
    events, messages, model, runs = run_draw(draw, backend)
    check_run(
        events,
        messages,
        model_contexts=model.requests,
        tool_execution="sequential" if draw.sequential else "parallel",
    )
    end = events[-1]
    limits = draw.limits
    usage = end.usage
    event(f"reason={end.reason}" + (f":{end.limit.limit}" if end.limit else ""))
    # the counters are what happened
    assert usage.requests == len(model.requests)
    assert usage.tool_calls == runs
    assert usage.turns == sum(e.type == "turn_start" for e in events) - (
        1 if end.limit is not None and end.limit.where == "before_request" else 0
    )
    largest = Reply(
        input_tokens=max(r.input_tokens for r in [*draw.replies, Reply()]),
        output_tokens=max(r.output_tokens for r in [*draw.replies, Reply()]),
    )
    assert_within(limits, end, PRICED, largest)
    if end.reason == "limit":
        reached = end.limit
        maximum = getattr(limits, reached.limit)
        assert maximum is not None and reached.maximum == maximum
        if reached.needed is not None:
            assert reached.needed > maximum
        else:
            assert reached.used >= maximum
    else:
        assert end.reason == "completed" and end.limit is None
        assert not messages[-1].tool_calls()
    # a request without tools is the last one the request or turn limit allows
    for i, context in enumerate(model.requests):
        if not context.tools:
            assert limits.last_turn_without_tools
            assert i == len(model.requests) - 1
            assert context.system_prompt.endswith(limits.last_turn_instruction)
