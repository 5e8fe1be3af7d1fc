"""Generated runs for the fork and diff tests: a few turns of tool calls (``add``, and ``pay``,
which waits for an approver who pays up to 100 EUR), in parallel or in sequence, with a tool-call
limit or none, and a steering message once. Everything is deterministic (asyncio's scheduler,
tools that never wait), so a run made again from the same plan takes the same steps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from hypothesis import strategies as st

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    ApprovalDecision,
    MemoryRunStore,
    Model,
    TextContent,
    run_agent_loop,
)
from agentcore_fsm.core.limits import UsageLimits
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

MODEL = Model(id="faux-fork", provider="faux", api="faux")
SCHEMA: dict[str, Any] = {"type": "object"}


async def _add(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=str(params["a"] + params["b"]))])


async def _pay(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=f"paid {params['eur']} EUR")])


TOOLS = [
    AgentTool("add", "Add two numbers.", SCHEMA, _add),
    AgentTool("pay", "Pay an invoice.", SCHEMA, _pay, requires_approval=True),
]


def approver(request: Any, signal: Any) -> ApprovalDecision:
    """Pays up to 100 EUR."""
    if request.args["eur"] > 100:
        return ApprovalDecision(approved=False, reason="too much", decided_by="alice")
    return ApprovalDecision(approved=True, decided_by="alice")


@dataclass(frozen=True)
class Plan:
    """A generated run: per turn, its calls (``("add", a, b)`` or ``("pay", eur, 0)``)."""

    turns: tuple[tuple[tuple[str, int, int], ...], ...]
    mode: str
    limit: int | None
    steer_at: int | None  # the steering poll that returns a message (its number), or None


calls = st.tuples(st.sampled_from(["add", "pay"]), st.integers(0, 200), st.integers(0, 9))
plans = st.builds(
    Plan,
    turns=st.lists(st.lists(calls, max_size=3).map(tuple), min_size=1, max_size=3).map(tuple),
    mode=st.sampled_from(["parallel", "sequential"]),
    limit=st.sampled_from([None, None, 2, 4]),
    steer_at=st.sampled_from([None, 0, 1, 2]),
)


def responses(plan: Plan) -> list[Any]:
    """The model's answers: one per turn with its calls, then a last one."""
    out: list[Any] = []
    for t, turn in enumerate(plan.turns):
        made = []
        for i, (name, x, y) in enumerate(turn):
            args = {"a": x, "b": y} if name == "add" else {"eur": x}
            made.append(faux_tool_call(name, args, id=f"c{t}_{i}"))
        out.append(faux_response(f"turn {t}", tool_calls=made))
    out.append(faux_response("all done"))
    return out


def config_for(plan: Plan, polled: int = 0, steered: bool = False) -> AgentLoopConfig:
    """The plan's config; ``polled``: how many steering polls already happened (a fork's
    replayed steps), ``steered``: whether the message was already sent."""
    count = [polled]

    def steering() -> list[Any]:
        n = count[0]
        count[0] += 1
        if n == plan.steer_at and not steered:
            return ["and be quick"]
        return []

    return AgentLoopConfig(
        model=MODEL,
        tool_execution=plan.mode,  # type: ignore[arg-type]
        decide_approval=approver,
        get_steering_messages=steering,
        limits=UsageLimits(tool_calls=plan.limit) if plan.limit is not None else None,
    )


def record(plan: Plan, store: MemoryRunStore, run_id: str = "parent") -> None:
    """Run ``plan`` journaled into ``store`` as ``run_id``."""

    async def go() -> None:
        await run_agent_loop(
            ["pay and add"],
            AgentContext(tools=TOOLS),
            config_for(plan),
            stream_fn=FauxProvider(responses(plan)),
            store=store,
            run_id=run_id,
        )

    anyio.run(go, backend="asyncio")


def world_after(
    plan: Plan, entries: Sequence[dict[str, Any]]
) -> tuple[AgentLoopConfig, FauxProvider]:
    """The config and model a fork goes on with after ``entries`` (the steps it replays)."""
    answered = sum(e.get("input") in ("stream_done", "stream_error") for e in entries)
    polls = [e for e in entries if e.get("input") == "steering_polled"]
    steered = any(e["messages"] and e["messages"].get("items") for e in polls)
    config = config_for(plan, len(polls), steered)
    return config, FauxProvider(responses(plan)[answered:])


def plain(value: Any) -> Any:
    """``value`` with every ``timestamp`` left out."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


CLI_PLAN = Plan(
    turns=((("add", 1, 2), ("pay", 50, 0)),), mode="parallel", limit=None, steer_at=None
)
"""The run the command-line tests fork from a SQLite store."""
CLI_CONFIG = config_for(CLI_PLAN)
"""Its config, for ``agentcore-fsm fork --config tests.fork_runs:CLI_CONFIG``."""
