"""Helpers of the usage-limit tests (tests/core/test_limits*.py, tests/runtime/test_limits*.py,
tests/property/test_policy_limits.py): a scripted model whose every response reports usage and
may call tools, a tool that counts its runs, and the check that a run stayed within its limits
by no more than docs/policies.md#how-far-a-run-may-go-over allows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from agentcore_fsm import (
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    Model,
    TextContent,
    ToolCall,
    UsageLimits,
)
from agentcore_fsm.core.config import LlmContext, StreamOptions
from agentcore_fsm.core.events import StreamDone, StreamStart
from agentcore_fsm.core.limits import LIMIT_NAMES
from agentcore_fsm.core.messages import Cost, ModelCost, Usage

PRICED = Model(
    id="priced-1",
    provider="faux",
    api="faux-api",
    cost=ModelCost(input=1.0, output=2.0),  # dollars per million tokens
)


@dataclass(frozen=True)
class Reply:
    """One scripted response: ``calls`` tool calls of the tool "count", and its usage."""

    calls: int = 0
    input_tokens: int = 100
    output_tokens: int = 20
    text: str = "ok"


def usage_of(model: Model, input_tokens: int, output_tokens: int) -> Usage:
    price = model.cost
    cost = Cost(
        input=input_tokens * price.input / 1_000_000,
        output=output_tokens * price.output / 1_000_000,
    )
    cost.total = cost.input + cost.output
    return Usage(
        input=input_tokens,
        output=output_tokens,
        total_tokens=input_tokens + output_tokens,
        cost=cost,
    )


@dataclass
class ScriptedModel:
    """A stream function answering with ``replies`` in order (the last one again once they run
    out); records the context of each request."""

    replies: list[Reply]
    requests: list[LlmContext] = field(default_factory=list)

    def __call__(self, model: Model, context: LlmContext, options: StreamOptions) -> Any:
        n = len(self.requests)
        self.requests.append(context)
        reply = self.replies[min(n, len(self.replies) - 1)]
        return self._play(model, reply, n)

    async def _play(self, model: Model, reply: Reply, n: int) -> AsyncIterator[Any]:
        content: list[Any] = [TextContent(text=reply.text)]
        content += [
            ToolCall(id=f"r{n}c{i}", name="count", arguments={"i": i}) for i in range(reply.calls)
        ]
        message = AssistantMessage(
            content=content,
            api=model.api,
            provider=model.provider,
            model=model.id,
            usage=usage_of(model, reply.input_tokens, reply.output_tokens),
            stop_reason="toolUse" if reply.calls else "stop",
        )
        yield StreamStart(partial=message)
        yield StreamDone(reason=message.stop_reason, message=message)  # type: ignore[arg-type]


@dataclass
class CountingTool:
    """The tool "count": counts its runs."""

    runs: int = 0

    def tool(self) -> AgentTool:
        async def execute(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
            self.runs += 1
            return AgentToolResult(content=[TextContent(text=f"ran {self.runs}")])

        return AgentTool(
            name="count",
            description="counts",
            parameters={"type": "object"},
            execute=execute,
        )


def figures(end: Any) -> dict[str, float]:
    """What a run's ``agent_end`` says it used, per limit name (seconds: 0)."""
    assert end.usage is not None
    return dict(end.usage.figures())


def bound(limits: UsageLimits, model: Model, largest: Reply) -> dict[str, float]:
    """How far over each limit a run may end (docs/policies.md#how-far-a-run-may-go-over):
    requests, turns and tool calls never; input tokens by the error of one request's estimate
    (here: the whole largest input, since the scripted usage is not related to the text);
    output tokens by one response; total tokens and cost by one request and its response."""
    one_in, one_out = largest.input_tokens, largest.output_tokens
    price = model.cost
    return {
        "requests": 0,
        "turns": 0,
        "tool_calls": 0,
        "input_tokens": one_in,
        "output_tokens": one_out,
        "total_tokens": one_in + one_out,
        "cost_usd": (one_in * price.input + one_out * price.output) / 1_000_000,
        "seconds": 0,
    }


def assert_within(limits: UsageLimits, end: Any, model: Model, largest: Reply) -> None:
    """The run's usage is within each limit plus its documented bound."""
    used = figures(end)
    slack = bound(limits, model, largest)
    for name in LIMIT_NAMES:
        limit = getattr(limits, name)
        if limit is None or name == "seconds":
            continue
        assert used[name] <= limit + slack[name] + 1e-12, (name, used[name], limit, slack[name])
