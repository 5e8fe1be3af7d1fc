"""Function tools in real runs, on trio and asyncio: a decorated tool and the equivalent
hand-written ``AgentTool`` give the same events and results; the run's ``deps`` and usage so far
reach tools (async, and plain ones in their worker thread) and hooks from every entry point
(``run_agent_loop``, ``run_agent_loop_continue``, ``agent_loop``, an ``Agent``), each run its
own; approval and resuming a journaled run work for function tools as for any tool."""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any

import anyio
import pytest
from helpers import MODEL, text_of
from pydantic import BaseModel, ConfigDict, Field

from agentcore_fsm import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    ApprovalRequest,
    RunContext,
    TextContent,
    ToolResultMessage,
    UserMessage,
    agent_loop,
    run_agent_loop,
    run_agent_loop_continue,
    tool,
)
from agentcore_fsm.core.messages import Usage
from agentcore_fsm.core.run_context import current_run
from agentcore_fsm.devtools.testing import EventRecorder, check_run
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.store import MemoryRunStore
from agentcore_fsm.runtime.resume import INTERRUPTED_TEXT, resume_run

pytestmark = pytest.mark.anyio


@dataclasses.dataclass
class Shop:
    name: str
    stock: dict[str, int]


class Order(BaseModel):
    item: str
    qty: int = Field(1, ge=1)


class Receipt(BaseModel):
    shop: str
    item: str
    qty: int
    express: bool


def results(messages: list[Any]) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}


# --- the same events and results as a hand-written tool -----------------------------------------


@tool
async def place_order(ctx: RunContext[Shop], order: Order, express: bool = False) -> Receipt:
    """Place an order.

    Args:
        order: What to order.
        express: Ship it fast.
    """
    ctx.report(f"ordering {order.qty} {order.item}")
    if ctx.deps.stock.get(order.item, 0) < order.qty:
        raise ValueError(f"out of {order.item}")
    return Receipt(shop=ctx.deps.name, item=order.item, qty=order.qty, express=express)


@tool
def stock(ctx: RunContext[Shop], item: str) -> str:
    """How many of an item are in stock."""
    assert threading.current_thread() is not threading.main_thread()  # a worker thread
    return f"{ctx.deps.stock.get(item, 0)} {item}"


class PlaceOrderArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order: Order = Field(description="What to order.")
    express: bool = Field(False, description="Ship it fast.")


async def place_order_by_hand(
    tool_call_id: str, params: PlaceOrderArgs, signal: Any, on_update: Any
) -> AgentToolResult:
    shop: Shop = current_run().deps
    order = params.order
    on_update(AgentToolResult(content=[TextContent(text=f"ordering {order.qty} {order.item}")]))
    if shop.stock.get(order.item, 0) < order.qty:
        raise ValueError(f"out of {order.item}")
    receipt = Receipt(shop=shop.name, item=order.item, qty=order.qty, express=params.express)
    data = receipt.model_dump(mode="json")
    return AgentToolResult(content=[TextContent(text=json.dumps(data))], details=data)


class StockArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item: str


def stock_by_hand(tool_call_id: str, params: StockArgs, signal: Any, on_update: Any) -> Any:
    shop: Shop = current_run().deps
    return AgentToolResult(
        content=[TextContent(text=f"{shop.stock.get(params.item, 0)} {params.item}")]
    )


HAND_WRITTEN = [
    AgentTool("place_order", "Place an order.", PlaceOrderArgs, place_order_by_hand),
    AgentTool("stock", "How many of an item are in stock.", StockArgs, stock_by_hand),
]


def shop_script() -> FauxProvider:
    calls = [
        faux_tool_call("stock", {"item": "apple"}, id="c1"),
        faux_tool_call("place_order", {"order": {"item": "apple", "qty": 2}}, id="c2"),
        faux_tool_call("place_order", {"order": {"item": "pear"}, "express": True}, id="c3"),
        faux_tool_call("place_order", {"order": {"qty": 0}, "rush": True}, id="c4"),
        faux_tool_call("stock", {}, id="c5"),
    ]
    return FauxProvider([faux_response("Let me see.", tool_calls=calls), faux_response("Done.")])


def comparable(events: list[Any]) -> list[Any]:
    """The events as JSON, without the timestamps (two runs never share them)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "timestamp"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return [strip(event.model_dump(mode="json")) for event in events]


async def test_a_decorated_tool_runs_like_the_equivalent_hand_written_one() -> None:
    runs = []
    for tools in ([stock, place_order], HAND_WRITTEN):
        recorder = EventRecorder()
        messages = await run_agent_loop(
            [UserMessage(content="Two apples and a pear, please.")],
            AgentContext(tools=tools),
            AgentLoopConfig(model=MODEL, tool_execution="sequential"),
            recorder,
            stream_fn=shop_script(),
            deps=Shop("Corner", {"apple": 5}),
        )
        check_run(recorder.events, messages, tool_execution="sequential")
        runs.append((comparable(recorder.events), results(messages)))
    (decorated, by_tool), (hand_written, _) = runs
    assert decorated == hand_written
    assert text_of(by_tool["c1"]) == "5 apple"
    assert by_tool["c2"].details == {"shop": "Corner", "item": "apple", "qty": 2, "express": False}
    assert by_tool["c3"].is_error and text_of(by_tool["c3"]) == "out of pear"
    assert text_of(by_tool["c4"]).startswith(
        'Validation failed for tool "place_order":\n'
        "  - order.item: Field required\n"
        "  - order.qty: Input should be greater than or equal to 1\n"
        "  - rush: Extra inputs are not permitted\n\nReceived arguments:\n"
    )
    assert text_of(by_tool["c5"]).startswith(
        'Validation failed for tool "stock":\n  - item: Field required\n'
    )


# --- deps and usage reach tools and hooks ----------------------------------------------------


class Seen:
    """What tools and hooks saw of the run, by where they looked."""

    def __init__(self) -> None:
        self.deps: list[tuple[str, Any]] = []
        self.usage: list[int] = []

    def tools(self) -> list[AgentTool]:
        @tool
        async def ask(ctx: RunContext[str], question: str) -> str:
            self.deps.append(("async tool", ctx.deps))
            self.deps.append(("async tool, current_run", current_run().deps))
            self.usage.append(ctx.usage.total_tokens)
            return "yes"

        @tool
        def look(ctx: RunContext[str]) -> str:
            self.deps.append(("thread tool", ctx.deps))
            self.usage.append(ctx.usage.total_tokens)
            return "seen"

        return [ask, look]

    def config(self) -> AgentLoopConfig:
        def before(ctx: Any, signal: Any) -> None:
            self.deps.append(("before_tool_call", current_run().deps))

        async def after(ctx: Any, signal: Any) -> None:
            self.deps.append(("after_tool_call", current_run().deps))

        return AgentLoopConfig(
            model=MODEL, before_tool_call=before, after_tool_call=after, tool_execution="sequential"
        )


def usage(total: int) -> Usage:
    return Usage(input=total - 1, output=1, total_tokens=total)


def two_turns() -> FauxProvider:
    return FauxProvider(
        [
            faux_response(
                tool_calls=[faux_tool_call("ask", {"question": "?"}, id="a")], usage=usage(10)
            ),
            faux_response(tool_calls=[faux_tool_call("look", {}, id="b")], usage=usage(5)),
            faux_response("done", usage=usage(7)),
        ]
    )


EXPECTED_DEPS = [
    "before_tool_call",
    "async tool",
    "async tool, current_run",
    "after_tool_call",
    "before_tool_call",
    "thread tool",
    "after_tool_call",
]


async def test_deps_and_usage_so_far_reach_tools_and_hooks_of_run_agent_loop() -> None:
    seen = Seen()
    await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(tools=seen.tools()),
        seen.config(),
        stream_fn=two_turns(),  # no listener: the usage is counted all the same
        deps="the deps",
    )
    assert seen.deps == [(where, "the deps") for where in EXPECTED_DEPS]
    # the response that called the tool is counted: 10, then 10 + 5
    assert seen.usage == [10, 15]
    with pytest.raises(RuntimeError):
        current_run()  # the run's binding ended with it


async def test_without_deps_a_tool_taking_the_run_context_still_sees_the_usage() -> None:
    seen = Seen()
    await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(tools=seen.tools()),
        seen.config(),
        stream_fn=two_turns(),
    )
    assert seen.deps == [(where, None) for where in EXPECTED_DEPS]
    assert seen.usage == [10, 15]


async def test_a_run_without_deps_or_context_tools_counts_no_usage() -> None:
    usages: list[Any] = []

    def hook(ctx: Any, signal: Any) -> None:
        usages.append((current_run().deps, current_run().usage))

    @tool
    def plain() -> str:
        return "ok"

    script = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("plain", {})], usage=usage(4)), faux_response("")]
    )
    await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(tools=[plain]),
        AgentLoopConfig(model=MODEL, before_tool_call=hook),
        stream_fn=script,
    )
    assert usages == [(None, None)]


async def test_deps_of_run_agent_loop_continue_and_agent_loop() -> None:
    seen = Seen()
    context = AgentContext(tools=seen.tools(), messages=[UserMessage(content="go")])
    await run_agent_loop_continue(context, seen.config(), stream_fn=two_turns(), deps=1)
    async with agent_loop(
        [UserMessage(content="go")],
        AgentContext(tools=seen.tools()),
        seen.config(),
        stream_fn=two_turns(),
        deps=2,
    ) as events:
        async for _ in events:
            pass
        await events.result()
    assert seen.deps == [(where, 1) for where in EXPECTED_DEPS] + [
        (where, 2) for where in EXPECTED_DEPS
    ]
    assert seen.usage == [10, 15, 10, 15]


async def test_an_agents_deps_reach_every_run() -> None:
    seen = Seen()
    config = seen.config()
    agent = Agent(
        model=MODEL,
        tools=seen.tools(),
        stream_fn=two_turns(),
        before_tool_call=config.before_tool_call,
        after_tool_call=config.after_tool_call,
        tool_execution="sequential",
        deps={"user": "ann"},
    )
    await agent.prompt("go")
    assert seen.deps == [(where, {"user": "ann"}) for where in EXPECTED_DEPS]
    agent.deps = "changed"
    agent.stream_fn = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("look", {}, id="c")]), faux_response("ok")]
    )
    await agent.prompt("again")
    assert seen.deps[-2:] == [("thread tool", "changed"), ("after_tool_call", "changed")]


async def test_runs_at_the_same_time_each_see_their_own_deps() -> None:
    seen: dict[str, list[Any]] = {"one": [], "two": []}
    both_running = anyio.Event()
    started = 0

    @tool
    async def wait(ctx: RunContext[str]) -> str:
        nonlocal started
        started += 1
        if started == 2:
            both_running.set()
        await both_running.wait()  # both runs are inside their tool at once
        seen[ctx.deps].append(current_run().deps)
        return ctx.deps

    async def run(name: str) -> None:
        script = FauxProvider(
            [faux_response(tool_calls=[faux_tool_call("wait", {})]), faux_response("ok")]
        )
        await run_agent_loop(
            [UserMessage(content=name)],
            AgentContext(tools=[wait]),
            AgentLoopConfig(model=MODEL),
            stream_fn=script,
            deps=name,
        )

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "one")
            tg.start_soon(run, "two")
    assert seen == {"one": ["one"], "two": ["two"]}


async def test_a_run_inside_a_tool_has_its_own_deps_and_usage() -> None:
    inner_seen: list[Any] = []

    @tool
    def inner_tool(ctx: RunContext[str]) -> str:
        inner_seen.append((ctx.deps, ctx.usage.total_tokens))
        return "inner"

    @tool
    async def delegate(ctx: RunContext[str]) -> str:
        script = FauxProvider(
            [
                faux_response(tool_calls=[faux_tool_call("inner_tool", {})], usage=usage(3)),
                faux_response("inner done"),
            ]
        )
        messages = await run_agent_loop(
            [UserMessage(content="sub")],
            AgentContext(tools=[inner_tool]),
            AgentLoopConfig(model=MODEL),
            stream_fn=script,
            deps="inner",
        )
        return f"{ctx.deps} {current_run().deps} {ctx.usage.total_tokens} {text_of(messages[-1])}"

    script = FauxProvider(
        [
            faux_response(tool_calls=[faux_tool_call("delegate", {}, id="d")], usage=usage(20)),
            faux_response("done"),
        ]
    )
    messages = await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(tools=[delegate]),
        AgentLoopConfig(model=MODEL),
        stream_fn=script,
        deps="outer",
    )
    assert inner_seen == [("inner", 3)]
    assert text_of(results(messages)["d"]) == "outer outer 20 inner done"


# --- approval and resume -----------------------------------------------------------------------


async def test_approval_of_a_function_tool_sees_its_validated_arguments() -> None:
    paid: list[int] = []
    asked: list[Any] = []

    def over_100(args: Any) -> bool:
        asked.append(args)
        return bool(args.eur > 100)

    @tool(requires_approval=over_100)
    def pay(eur: int) -> str:
        """Pay an amount."""
        paid.append(eur)
        return f"paid {eur}"

    requests: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest, signal: Any) -> bool:
        requests.append(request)
        return False

    script = FauxProvider(
        [
            faux_response(
                tool_calls=[
                    faux_tool_call("pay", {"eur": 30}, id="small"),
                    faux_tool_call("pay", {"eur": "500"}, id="big"),
                ]
            ),
            faux_response("ok"),
        ]
    )
    messages = await run_agent_loop(
        [UserMessage(content="pay")],
        AgentContext(tools=[pay]),
        AgentLoopConfig(model=MODEL, decide_approval=decide),
        stream_fn=script,
    )
    assert [type(args) for args in asked] == [pay.args_model, pay.args_model]
    assert [r.tool_call_id for r in requests] == ["big"]
    assert requests[0].args == pay.args_model(eur=500)
    assert paid == [30]
    assert results(messages)["big"].is_error


async def test_a_resumed_run_runs_an_idempotent_function_tool_again_and_no_other() -> None:
    ran: list[str] = []

    def tools() -> list[AgentTool]:
        @tool(idempotent=True)
        async def read(ctx: RunContext[None], n: int) -> str:
            ran.append(f"read {ctx.tool_call_id}")
            await anyio.lowlevel.checkpoint()
            return f"read {n}"

        @tool
        async def write(ctx: RunContext[None], n: int) -> str:
            ran.append(f"write {ctx.tool_call_id}")
            await anyio.lowlevel.checkpoint()
            return f"wrote {n}"

        return [read, write]

    responses = [
        faux_response(
            tool_calls=[
                faux_tool_call("write", {"n": 1}, id="w"),
                faux_tool_call("read", {"n": 2}, id="r"),
            ]
        ),
        faux_response("done"),
    ]
    store = MemoryRunStore()
    config = AgentLoopConfig(model=MODEL)
    await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(tools=tools()),
        config,
        stream_fn=FauxProvider(responses),
        store=store,
        run_id="orig",
    )
    # the crash: both calls had started, neither result was journaled
    stored = store.load("orig")
    cut_at = next(i for i, e in enumerate(stored.entries) if e["input"] == "tool_finished")
    cut = MemoryRunStore()
    owner = "elsewhere:1:dead"
    cut.create_run("r", stored.header, session_id="s", owner=owner, lease_s=-1.0)
    for seq, entry in enumerate(stored.entries[:cut_at]):
        cut.append("r", seq, entry, owner=owner, lease_s=-1.0)
    ran.clear()
    messages = await resume_run(
        "r", cut, config, tools=tools(), stream_fn=FauxProvider(responses[1:])
    )
    assert ran == ["read r"]
    by_call = results(messages)
    assert text_of(by_call["r"]) == "read 2"
    assert text_of(by_call["w"]) == INTERRUPTED_TEXT.format(name="write")
