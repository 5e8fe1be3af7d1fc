"""The agents of the Temporal tests (tests/integrations/temporal/), importable by the test
process and by its worker processes (tests/temporal_worker.py).

``shop``: a first turn calls ``lookup`` (a, idempotent), a second ``charge`` (b, not
idempotent, needs approval when the agent is made with ``approve=True``), then a final answer.
The answer follows from the transcript (the count of assistant messages), so any process answers
the same. Each tool execution appends ``<name> <call id>`` to the file named by
``$AGENTCORE_TEMPORAL_EFFECTS`` (when set); ``$AGENTCORE_TEMPORAL_DIE`` = ``charge`` makes charge
kill its process (SIGKILL) after writing its effect, ``lookup`` the same in the idempotent
lookup, ``stream`` the second model call mid-stream.

``desk``: calls its agent tool ``worker`` (w1), whose nested run calls ``step`` (s1), then
``die`` (d1, idempotent: with ``$AGENTCORE_TEMPORAL_DIE`` = ``nested`` it kills its process the
first time), then answers; then the desk answers. Its model calls append ``desk N`` and
``inner N``, step ``step s1``.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from agentcore_fsm import Agent, AgentLoopConfig, AgentTool, AgentToolResult, Model, TextContent
from agentcore_fsm.integrations.durable_api import DurableAgent
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

ANSWERS = [
    faux_response("Looking it up.", tool_calls=[faux_tool_call("lookup", {"order": 7}, id="a")]),
    faux_response("Charging.", tool_calls=[faux_tool_call("charge", {"eur": 30}, id="b")]),
    faux_response("Done: order 7 is paid."),
]


def _effect(line: str) -> None:
    path = os.environ.get("AGENTCORE_TEMPORAL_EFFECTS")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


async def stream_fn(model: Any, context: Any, options: Any) -> Any:
    turn = sum(1 for m in context.messages if m.role == "assistant")
    _effect(f"model {turn}")
    count = 0
    async for event in FauxProvider([ANSWERS[turn]])(model, context, options):
        count += 1
        if turn == 1 and count == 3 and os.environ.get("AGENTCORE_TEMPORAL_DIE") == "stream":
            os.kill(os.getpid(), signal.SIGKILL)
        yield event


def lookup(call_id: str, args: Any, signal_: Any, on_update: Any) -> AgentToolResult:
    _effect(f"lookup {call_id}")
    if os.environ.get("AGENTCORE_TEMPORAL_DIE") == "lookup":
        os.kill(os.getpid(), signal.SIGKILL)
    return AgentToolResult(content=[TextContent(text="order 7: 2 books, 30 EUR")])


def charge(call_id: str, args: Any, signal_: Any, on_update: Any) -> AgentToolResult:
    _effect(f"charge {call_id}")
    if os.environ.get("AGENTCORE_TEMPORAL_DIE") == "charge":
        os.kill(os.getpid(), signal.SIGKILL)
    return AgentToolResult(content=[TextContent(text=f"charged {args['eur']} EUR")])


def make(name: str = "shop", *, approve: bool = False) -> DurableAgent:
    tools = [
        AgentTool("lookup", "find an order", {"type": "object"}, lookup, idempotent=True),
        AgentTool("charge", "charge a card", {"type": "object"}, charge, requires_approval=approve),
    ]
    return DurableAgent(name, stream_fn, AgentLoopConfig(model=Model(id="m")), tools)


def _scripted(name: str, script: list[Any]) -> Any:
    async def answer(model: Any, context: Any, options: Any) -> Any:
        turn = sum(1 for m in context.messages if m.role == "assistant")
        _effect(f"{name} {turn}")
        async for event in FauxProvider([script[turn]])(model, context, options):
            yield event

    return answer


def step(call_id: str, args: Any, signal_: Any, on_update: Any) -> AgentToolResult:
    _effect(f"step {call_id}")
    return AgentToolResult(content=[TextContent(text="stepped")])


def die(call_id: str, args: Any, signal_: Any, on_update: Any) -> AgentToolResult:
    marker = os.environ.get("AGENTCORE_TEMPORAL_EFFECTS", "") + ".died"
    if os.environ.get("AGENTCORE_TEMPORAL_DIE") == "nested" and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return AgentToolResult(content=[TextContent(text="alive")])


def desk() -> DurableAgent:
    inner = Agent(
        tools=[
            AgentTool("step", "a step", {"type": "object"}, step),
            AgentTool("die", "dies once", {"type": "object"}, die, idempotent=True),
        ],
        stream_fn=_scripted(
            "inner",
            [
                faux_response(tool_calls=[faux_tool_call("step", {}, id="s1")]),
                faux_response(tool_calls=[faux_tool_call("die", {}, id="d1")]),
                faux_response("inner done"),
            ],
        ),
    )
    script = [
        faux_response(tool_calls=[faux_tool_call("worker", {"prompt": "work"}, id="w1")]),
        faux_response("all done"),
    ]
    tools = [inner.as_tool("worker", "The worker.")]
    return DurableAgent(
        "desk", _scripted("desk", script), AgentLoopConfig(model=Model(id="m")), tools
    )


def agents() -> list[DurableAgent]:
    """The agents a worker serves (``agentcore-fsm worker --app temporal_app:agents``)."""
    return [make("shop"), make("shop-approve", approve=True), desk()]
