"""The run policies together, over generated runs on both backends (docs/policies.md).

Each example draws a script of model requests (each one fails with an error kind, or answers
with some tool calls), fallback models, a tool that fails its first attempts, whether it is
idempotent and its retry policy, usage limits and the batches' mode. The policies were each
tested on their own (test_policy_limits, test_policy_tools, test_policy_models); here they
meet in one run, and whatever the draw the run must

* keep the event grammar and the transcript invariants (every tool call answered once);
* never run a call of the non-idempotent tool twice, nor an idempotent one more often than its
  retry policy allows;
* stay within its request and tool-call limits (both are checked before the step that would
  go over: docs/policies.md#how-far-a-run-may-go-over);
* end with a reason that names what ended it: ``limit`` with a limit that is set and reached,
  ``error`` only when a request failed with no model left to fall back to (naming every
  model's error when it fell back), ``completed`` with the model's last answer.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UsageLimits,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.fallback import ModelFallback
from agentcore_fsm.core.retry import RetryPolicy
from agentcore_fsm.devtools.testing import EventRecorder, check_run
from agentcore_fsm.integrations.providers.faux import (
    FauxError,
    FauxProvider,
    faux_response,
    faux_tool_call,
)

BACKENDS = ["trio", "asyncio"]
EXAMPLES = 40
RETRYABLE = ("rate_limit", "overloaded", "server_error", "timeout")


@dataclass(frozen=True)
class Fail:
    kind: str


@dataclass(frozen=True)
class Answer:
    calls: int


@dataclass(frozen=True)
class Draw:
    script: tuple[Fail | Answer, ...]
    fallbacks: int
    failures_per_call: int
    idempotent: bool
    attempts: int
    limits: UsageLimits | None
    sequential: bool


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


steps = st.one_of(
    st.builds(Fail, kind=st.sampled_from([*RETRYABLE, "invalid_request"])),
    st.builds(Answer, calls=st.integers(0, 2)),
)
limits = st.builds(
    UsageLimits,
    requests=maybe(st.integers(1, 6)),
    turns=maybe(st.integers(1, 6)),
    tool_calls=maybe(st.integers(0, 5)),
)
draws = st.builds(
    Draw,
    script=st.lists(steps, min_size=1, max_size=6).map(tuple),
    fallbacks=st.integers(0, 2),
    failures_per_call=st.integers(0, 2),
    idempotent=st.booleans(),
    attempts=st.integers(1, 3),
    limits=maybe(limits),
    sequential=st.booleans(),
)

MAIN = Model(id="main", provider="p0")


class FlakyTool:
    """The tool "work": each call fails its first ``failures`` attempts, then answers."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: Counter[str] = Counter()

    def tool(self, idempotent: bool, attempts: int) -> AgentTool:
        async def execute(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
            self.attempts[call_id] += 1
            if self.attempts[call_id] <= self.failures:
                raise RuntimeError(f"flaky attempt {self.attempts[call_id]}")
            return AgentToolResult(content=[TextContent(text="done")])

        return AgentTool(
            name="work",
            description="does work",
            parameters={"type": "object"},
            execute=execute,
            idempotent=idempotent,
            retry=RetryPolicy(
                max_attempts=attempts, backoff_base_s=0.001, backoff_max_s=0.002, jitter=0.0
            ),
        )


def script_items(draw: Draw) -> list[Any]:
    items: list[Any] = []
    for step in draw.script:
        if isinstance(step, Fail):
            items.append(FauxError(f"{step.kind} happened", kind=step.kind))  # type: ignore[arg-type]
        else:
            calls = [faux_tool_call("work", {}) for _ in range(step.calls)]
            items.append(faux_response("working", tool_calls=calls))
    items.append(faux_response("all done"))  # a run nothing stops ends with an answer
    return items


def run_draw(draw: Draw, backend: str) -> tuple[list[Any], list[Any], FauxProvider, FlakyTool]:
    provider = FauxProvider(script_items(draw))
    tool = FlakyTool(draw.failures_per_call)
    fallback = None
    if draw.fallbacks:
        models = tuple(Model(id=f"m{i}", provider=f"p{i}") for i in range(1, draw.fallbacks + 1))
        fallback = ModelFallback(models=models)
    config = AgentLoopConfig(
        model=MAIN,
        limits=draw.limits,
        fallback=fallback,
        tool_execution="sequential" if draw.sequential else "parallel",
    )
    recorder = EventRecorder()

    async def main() -> list[Any]:
        return await run_agent_loop(
            [UserMessage(content="go")],
            AgentContext("sys", tools=[tool.tool(draw.idempotent, draw.attempts)]),
            config,
            recorder,
            stream_fn=provider,
        )

    messages = anyio.run(main, backend=backend)
    return recorder.events, messages, provider, tool


def models_of_last_request(draw: Draw, requests: int) -> int:
    """How many models the run's last request was made with: a request that fails with a
    retryable kind moves on to the next model while one is left (the run keeps the model it
    reached: the list is walked once per run, docs/policies-models.md)."""
    at, tried = 0, 1
    for step in draw.script[:requests]:
        if isinstance(step, Answer):
            tried = 1  # answered: the next request starts with the model reached
        elif step.kind in RETRYABLE and at < draw.fallbacks:
            at, tried = at + 1, tried + 1  # the same request, on the next model
        else:
            break  # the request failed for good: the run ends here
    return tried


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=EXAMPLES, deadline=None)
@given(draw=draws)
def test_the_policies_together_keep_every_promise(backend: str, draw: Draw) -> None:
    events, messages, provider, tool = run_draw(draw, backend)
    check_run(
        events,
        messages,
        model_contexts=provider.calls,
        tool_execution="sequential" if draw.sequential else "parallel",
    )
    end = events[-1]
    assert end.type == "agent_end"
    event(f"reason={end.reason}")

    # every call answered exactly once, and run no more often than its policy allows
    called = [b.id for m in messages if m.role == "assistant" for b in m.tool_calls()]
    answered = Counter(m.tool_call_id for m in messages if m.role == "toolResult")
    assert answered == Counter(called)
    allowed = draw.attempts if draw.idempotent else 1
    assert all(n <= allowed for n in tool.attempts.values()), (tool.attempts, allowed)

    # the request and tool-call limits are checked before the step that would go over
    limits = draw.limits
    if limits is not None and limits.requests is not None:
        assert len(provider.calls) <= limits.requests
    if limits is not None and limits.tool_calls is not None:
        assert len(tool.attempts) <= limits.tool_calls

    # the reason names what ended the run
    last = messages[-1]
    if end.reason == "limit":
        assert limits is not None and end.limit is not None
        assert getattr(limits, end.limit.limit) == end.limit.maximum
    elif end.reason == "error":
        assert last.role == "assistant" and last.stop_reason == "error"
        assert last.error_kind is not None  # a request failed: the run has no other failure
        tried = models_of_last_request(draw, len(provider.calls))
        if tried > 1:  # this request fell back: every model it was made with is named
            assert last.error_message.startswith("Every model failed")
            for i in range(draw.fallbacks + 1 - tried, draw.fallbacks + 1):
                assert f"p{i}/" in last.error_message, (i, last.error_message)
        else:
            assert not last.error_message.startswith("Every model failed")
    else:
        assert end.reason == "completed", end.reason
        assert last.role == "assistant" and last.stop_reason == "stop"
