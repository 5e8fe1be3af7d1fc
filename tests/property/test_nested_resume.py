"""Generated trees of agents calling agents, journaled in a run store and stopped at a drawn
point inside the tree, then resumed (docs/multi-agent.md#runs-that-survive), on trio and asyncio.

A tree is drawn as in test_nested_trees.py (depth up to 3 below the outermost run, up to two
children per agent): each agent's first response calls, in one batch, its children (agents as
tools) and its tool ``step``; its second is a text or a model failure. Every run executes its
calls one at a time, so that at the stop only the calls on the path to the stopping tool are in
flight. The stop: the ``step`` of a drawn agent copies the store as a process dying at that
moment leaves it (leases held by a process that has exited) and ends the run there. The copy is
then resumed with new models and tools that answer by how far each run is.

Checked for every tree: every run of the tree (one record each) finishes; each run's record
regenerates a well-formed run whose tool calls are each answered once; no model answer that
was journaled is asked for again, and no journaled ``step`` runs again (each agent's model calls
and steps over both processes are those of a run that was never stopped, the stopped ``step``
aside, which is answered as interrupted); the outermost run's answer is the one a run never
stopped gives.
"""

from __future__ import annotations

import socket
import subprocess
from dataclasses import dataclass
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
    MemoryRunStore,
    Model,
    TextContent,
    UserMessage,
    resume_run,
    run_agent_loop,
)
from agentcore_fsm.devtools.testing import FauxProvider, check_run, faux_response, faux_tool_call
from agentcore_fsm.persist.journal import RunSnapshot, derive_run
from agentcore_fsm.runtime.resume import INTERRUPTED_TEXT

BACKENDS = ["trio", "asyncio"]
MAX_DEPTH = 3
MODEL = Model(id="m")


@dataclass
class Node:
    children: list[Node]
    model_error: bool
    id: int = 0


@st.composite
def nodes(draw: st.DrawFn, depth: int = 0) -> Node:
    width = draw(st.integers(0, 2)) if depth < MAX_DEPTH else 0
    return Node([draw(nodes(depth + 1)) for _ in range(width)], model_error=draw(st.booleans()))


@dataclass
class Tree:
    root: Node
    nodes: list[Node]
    stop_at: int


@st.composite
def trees(draw: st.DrawFn) -> Tree:
    root = draw(nodes())
    order: list[Node] = []

    def number(node: Node) -> None:
        node.id = len(order)
        order.append(node)
        for child in node.children:
            number(child)

    number(root)
    return Tree(root, order, draw(st.sampled_from([n.id for n in order])))


def ghost() -> str:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}:00000000"


class World:
    """One process's side of a tree: its models and tools, what they were asked to do, and (in
    the first process) the stop."""

    def __init__(self, tree: Tree, store: Any, copy: Any | None) -> None:
        self.tree = tree
        self.store, self.copy = store, copy
        self.scope = anyio.CancelScope()
        self.model_calls: list[tuple[int, int]] = []  # (agent, assistant messages before it)
        self.steps: list[int] = []

    def stop(self) -> None:
        """Copy the store as a process dying now leaves it, and end the run here."""
        assert self.copy is not None
        owner = ghost()
        for info in self.store.runs():
            run = self.store.load(info.run_id)
            self.copy.create_run(run.run_id, run.header, session_id=None, owner=owner, lease_s=60)
            for seq, entry in enumerate(run.entries):
                self.copy.append(run.run_id, seq, entry, owner=owner, lease_s=60)
            if run.status == "finished":
                self.copy.finish(run.run_id, run.end_reason, owner=owner)
        self.scope.cancel()

    def model(self, node: Node) -> FauxProvider:
        calls = [faux_tool_call(f"a{c.id}", {"prompt": "go"}, id=f"c{c.id}") for c in node.children]
        calls.append(faux_tool_call("step", {}, id=f"s{node.id}"))
        last = (
            faux_response(stop_reason="error", error_message=f"model of {node.id} failed")
            if node.model_error
            else faux_response(f"done {node.id}")
        )

        def answer(context: Any) -> Any:
            done = sum(1 for m in context.messages if getattr(m, "role", None) == "assistant")
            self.model_calls.append((node.id, done))
            return faux_response(tool_calls=calls) if done == 0 else last

        return FauxProvider([answer] * 3)

    def tools(self, node: Node) -> list[AgentTool]:
        tools = []
        for child in node.children:
            agent = Agent(
                tools=self.tools(child),
                stream_fn=self.model(child),
                tool_execution="sequential",
            )
            tools.append(agent.as_tool(f"a{child.id}", f"Agent {child.id}."))

        async def step(call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
            self.steps.append(node.id)
            if self.copy is not None and node.id == self.tree.stop_at:
                self.stop()
                await anyio.sleep_forever()
            return AgentToolResult(content=[TextContent(text=f"stepped {node.id}")])

        tools.append(AgentTool("step", "A step.", {"type": "object"}, step))
        return tools


def config() -> AgentLoopConfig:
    return AgentLoopConfig(model=MODEL, tool_execution="sequential")


async def run_whole(tree: Tree) -> tuple[World, list[Any]]:
    world = World(tree, MemoryRunStore(), None)
    messages = await run_agent_loop(
        [UserMessage(content="start")],
        AgentContext(tools=world.tools(tree.root)),
        config(),
        stream_fn=world.model(tree.root),
        store=world.store,
        run_id="r",
    )
    return world, messages


async def run_stopped(tree: Tree) -> tuple[World, World, list[Any], Any]:
    first = World(tree, MemoryRunStore(), MemoryRunStore())
    with first.scope:
        await run_agent_loop(
            [UserMessage(content="start")],
            AgentContext(tools=first.tools(tree.root)),
            config(),
            stream_fn=first.model(tree.root),
            store=first.store,
            run_id="r",
        )
    assert first.scope.cancelled_caught
    store = first.copy
    second = World(tree, store, None)
    with anyio.fail_after(30):  # a guard against a hang, never reached by a passing run
        messages = await resume_run(
            "r",
            store,
            config(),
            tools=second.tools(tree.root),
            stream_fn=second.model(tree.root),
        )
    return first, second, messages, store


def snapshot(store: Any, run_id: str) -> RunSnapshot:
    stored = store.load(run_id)
    return RunSnapshot.of(stored.header, stored.entries)


def check(
    tree: Tree,
    whole: tuple[World, list[Any]],
    first: World,
    second: World,
    messages: Any,
    store: Any,
) -> None:
    world, whole_messages = whole
    # every run of the tree finished, and each record is a well-formed run
    infos = store.runs()
    assert infos and all(info.status == "finished" for info in infos)
    for info in infos:
        derived = derive_run(snapshot(store, info.run_id), run_id=info.run_id)
        check_run(derived.events, messages=derived.machine.new_messages)
        created = derived.machine.new_messages
        calls = [c.id for m in created if m.role == "assistant" for c in m.tool_calls()]
        answers = [m.tool_call_id for m in created if m.role == "toolResult"]
        assert sorted(calls) == sorted(answers), info.run_id
    # nothing journaled is done again: the model calls and steps of both processes are a
    # never-stopped run's, each once (the stopped step ran once, and was not run again)
    assert sorted(first.model_calls + second.model_calls) == sorted(world.model_calls)
    assert sorted(first.steps + second.steps) == sorted(world.steps)
    assert first.steps[-1] == tree.stop_at
    # the stopped step is answered as interrupted, in the record of its agent's run
    texts = [
        m.content[0].text
        for info in infos
        for m in derive_run(snapshot(store, info.run_id)).machine.new_messages
        if m.role == "toolResult" and m.tool_call_id == f"s{tree.stop_at}"
    ]
    assert texts == [INTERRUPTED_TEXT.format(name="step")]
    # the outermost run ends as a never-stopped one does
    last, whole_last = messages[-1], whole_messages[-1]
    assert (last.content, last.error_message) == (whole_last.content, whole_last.error_message)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=15, deadline=None)
@given(tree=trees())
def test_a_tree_stopped_anywhere_resumes_without_doing_anything_twice(
    backend: str, tree: Tree
) -> None:
    whole = anyio.run(run_whole, tree, backend=backend)
    first, second, messages, store = anyio.run(run_stopped, tree, backend=backend)
    check(tree, whole, first, second, messages, store)
