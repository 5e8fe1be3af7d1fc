"""Generated trees of agents calling agents (docs/multi-agent.md), on trio and asyncio.

A tree is drawn node by node (depth up to 3 below the outermost run): each node is an agent
whose first response calls, in one batch, its children (agents as tools) and, as drawn, a tool
that needs approval, a tool that raises and a tool that blocks until the run is aborted; its
second response is a text or a model failure. The outer approver decides each approval as
drawn; a tree may be aborted (from outside, once the blocking tool runs) or run under a request
limit (then every agent runs its calls one at a time, so the budget left is exact).

Checked for every tree: the grammar of every run of the tree on its own and the enclosure of
each inner run in its call (``check_nested_run``), every tool call of every finished run
answered exactly once, the path of every approval request, approved tools run and denied ones
not, an abort reaching every run on the way to the blocked tool, and the request limit covering
the nested runs' requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore_fsm import (
    Agent,
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
from agentcore_fsm.core.abort import AbortController
from agentcore_fsm.core.approval import ApprovalDecision
from agentcore_fsm.core.nesting import NestedApprovalRequest, levels
from agentcore_fsm.devtools.testing import (
    FauxProvider,
    check_nested_run,
    faux_response,
    faux_tool_call,
)

BACKENDS = ["trio", "asyncio"]
MAX_DEPTH = 3


@dataclass
class Node:
    children: list[Node]
    pay: bool
    approve: bool
    fail: bool
    model_error: bool
    id: int = 0
    depth: int = 0
    path: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    provider: FauxProvider | None = None
    all: list[Node] = field(default_factory=list)


@st.composite
def nodes(draw: st.DrawFn, depth: int = 0) -> Node:
    width = draw(st.integers(0, 2)) if depth < MAX_DEPTH else 0
    children = [draw(nodes(depth + 1)) for _ in range(width)]
    return Node(
        children,
        pay=draw(st.booleans()),
        approve=draw(st.booleans()),
        fail=draw(st.booleans()),
        model_error=draw(st.booleans()),
    )


@dataclass
class Tree:
    root: Node
    nodes: list[Node]
    abort_at: int | None
    limit: int | None


@st.composite
def trees(draw: st.DrawFn) -> Tree:
    root = draw(nodes())
    order: list[Node] = []

    def number(node: Node, depth: int, path: tuple[str, ...], agents: tuple[str, ...]) -> None:
        node.id, node.depth, node.path, node.agents = len(order), depth, path, agents
        order.append(node)
        for child in node.children:
            number(child, depth + 1, (*path, f"c{len(order)}"), (*agents, f"a{len(order)}"))

    number(root, 0, (), ())
    abort = draw(st.booleans())
    abort_at = draw(st.sampled_from([n.id for n in order])) if abort else None
    limit = None if abort else draw(st.none() | st.integers(1, 12))
    return Tree(root, order, abort_at, limit)


class World:
    """The tools' side of a tree: which tools ran, the approval requests, the blocking tool."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.paid: set[int] = set()
        self.requests: list[Any] = []
        self.blocked = anyio.Event()

    def decide(self, request: Any, signal: Any) -> ApprovalDecision:
        self.requests.append(request)
        node = self.tree.nodes[int(request.tool_call_id[1:])]
        return ApprovalDecision(approved=node.approve, reason=None if node.approve else "no")

    def agent(self, node: Node, sequential: bool) -> tuple[list[AgentTool], FauxProvider]:
        """The tools and the model of ``node``'s agent."""
        tools: list[AgentTool] = []
        calls = []
        for child in node.children:
            child_tools, child_model = self.agent(child, sequential)
            agent = Agent(
                tools=child_tools,
                stream_fn=child_model,
                tool_execution="sequential" if sequential else "parallel",
            )
            name = f"a{child.id}"
            tools.append(agent.as_tool(name, f"Agent {child.id}."))
            calls.append(faux_tool_call(name, {"prompt": f"go {child.id}"}, id=f"c{child.id}"))
        if node.pay:

            async def pay(call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
                self.paid.add(node.id)
                return AgentToolResult(content=[TextContent(text="paid")])

            tools.append(AgentTool("pay", "Pay.", {"type": "object"}, pay, requires_approval=True))
            calls.append(faux_tool_call("pay", {}, id=f"p{node.id}"))
        if node.fail:

            async def fail(call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
                raise RuntimeError(f"tool of {node.id} failed")

            tools.append(AgentTool("fail", "Fails.", {"type": "object"}, fail))
            calls.append(faux_tool_call("fail", {}, id=f"f{node.id}"))
        if self.tree.abort_at == node.id:

            async def block(call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
                self.blocked.set()
                await anyio.sleep_forever()

            tools.append(AgentTool("block", "Blocks.", {"type": "object"}, block))
            calls.append(faux_tool_call("block", {}, id=f"b{node.id}"))
        last = (
            faux_response(stop_reason="error", error_message=f"model of {node.id} failed")
            if node.model_error
            else faux_response(f"done {node.id}")
        )
        script = [faux_response(tool_calls=calls), last] if calls else [last]
        node.provider = FauxProvider(script)
        return tools, node.provider


async def run_tree(tree: Tree) -> tuple[World, list[Any], list[Any]]:
    world = World(tree)
    sequential = tree.limit is not None
    tools, model = world.agent(tree.root, sequential)
    controller = AbortController()
    events: list[Any] = []
    out: list[Any] = []
    config = AgentLoopConfig(
        model=Model(id="m"),
        decide_approval=world.decide,
        limits=UsageLimits(requests=tree.limit) if tree.limit is not None else None,
        tool_execution="sequential" if sequential else "parallel",
    )

    async def outer() -> None:
        out.append(
            await run_agent_loop(
                [UserMessage(content="start")],
                AgentContext(tools=tools),
                config,
                events.append,
                signal=controller.signal,
                stream_fn=model,
            )
        )

    with anyio.fail_after(30):  # a guard against a hang, never reached by a passing run
        async with anyio.create_task_group() as group:
            group.start_soon(outer)
            if tree.abort_at is not None:
                await world.blocked.wait()
                controller.abort("stop")
    return world, events, out[0]


def check_tree(tree: Tree, world: World, events: list[Any], messages: list[Any]) -> None:
    summaries = check_nested_run(events, messages)
    split = levels(events)
    by_path = {node.path: node for node in tree.nodes}
    assert set(split) <= set(by_path)
    # every finished run answered each of its tool calls exactly once
    for path, summary in summaries.items():
        if summary is None:
            continue
        calls = [c.id for m in summary.created if m.role == "assistant" for c in m.tool_calls()]
        answers = [m.tool_call_id for m in summary.created if m.role == "toolResult"]
        assert sorted(calls) == sorted(answers), path
    # approvals: asked of the outer approver with the path of the run whose call waits
    for request in world.requests:
        node = tree.nodes[int(request.tool_call_id[1:])]
        # the outermost run's own requests are plain; a nested run's carry its path
        assert isinstance(request, NestedApprovalRequest) == (node.depth > 0)
        assert getattr(request, "path", ()) == node.path
        assert getattr(request, "agents", ()) == node.agents
        assert request.tool_name == "pay"
    assert all(tree.nodes[i].approve for i in world.paid)  # a denied tool never runs
    if tree.abort_at is None and tree.limit is None:
        assert world.paid == {n.id for n in tree.nodes if n.pay and n.approve}
        assert {int(r.tool_call_id[1:]) for r in world.requests} == {
            n.id for n in tree.nodes if n.pay
        }
        assert set(split) == set(by_path)  # every agent ran
    # abort: every run from the outermost down to the blocked tool's was aborted (or cut)
    if tree.abort_at is not None:
        blocked = tree.nodes[tree.abort_at].path
        assert summaries[()] is not None and summaries[()].reason == "aborted"
        for depth in range(1, len(blocked) + 1):
            # cut, or not seen at all (its events were still on their way up at the abort)
            summary = summaries.get(blocked[:depth])
            assert summary is None or summary.reason == "aborted", blocked[:depth]
    # one budget: the outer run's first request and every nested request fit in the limit
    if tree.limit is not None:
        nested = sum(len(n.provider.calls) for n in tree.nodes[1:] if n.provider is not None)
        assert nested + 1 <= tree.limit
        root_calls = len(tree.nodes[0].provider.calls) if tree.nodes[0].provider else 0
        assert root_calls <= tree.limit


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=25)
@given(tree=trees())
def test_trees_of_agents_keep_every_rule_at_every_level(backend: str, tree: Tree) -> None:
    world, events, messages = anyio.run(run_tree, tree, backend=backend)
    check_tree(tree, world, events, messages)
