"""The tool and turn hooks of a Temporal run as activity arguments and results
(:mod:`agentcore_fsm.integrations.temporal`).

A hook's context is made in the workflow and the hook runs in an activity, perhaps in another
process: the context goes over as JSON data (messages, tool calls, results and the agent's
context by the codec of the run record, :mod:`agentcore_fsm.persist.codec`), is rebuilt in the
activity with the agent's own tools, and the hook's value comes back as the codec records a
hook's value (as on DBOS). ``before_tool_call`` may edit ``args`` in place: the edited args
come back with its value and are put into the workflow's context. No SDK is imported here."""

from __future__ import annotations

import inspect
from typing import Any

from agentcore_fsm.core.abort import AbortController
from agentcore_fsm.core.boundary import exc_text, json_data
from agentcore_fsm.core.config import PrepareNextTurnContext
from agentcore_fsm.core.messages import ToolCall
from agentcore_fsm.core.tools import AfterToolCallContext, BeforeToolCallContext
from agentcore_fsm.integrations.durable_api import DurableAgent
from agentcore_fsm.persist.codec import (
    decode_context,
    decode_message,
    dump,
    encode_context,
    encode_hook_value,
    encode_message,
    tool_result,
    tools_by_name,
)

__all__ = ["HOOK_NAMES", "call_hook", "decode_hook_context", "encode_hook_context"]

HOOK_NAMES = ("before_tool_call", "after_tool_call", "prepare_next_turn", "should_stop_after_turn")
"""The config's hooks a Temporal run performs as activities."""


def encode_hook_context(name: str, ctx: Any) -> dict[str, Any]:
    """The context given to the hook ``name`` as JSON data."""
    if name in ("before_tool_call", "after_tool_call"):
        data: dict[str, Any] = {
            "assistant_message": encode_message(ctx.assistant_message),
            "tool_call": dump(ctx.tool_call),
            "args": json_data(ctx.args),
            "context": encode_context(ctx.context),
        }
        if name == "after_tool_call":
            data["result"] = dump(ctx.result)
            data["is_error"] = bool(ctx.is_error)
        return data
    return {
        "message": encode_message(ctx.message),
        "tool_results": [encode_message(m) for m in ctx.tool_results],
        "context": encode_context(ctx.context),
        "new_messages": [encode_message(m) for m in ctx.new_messages],
    }


def decode_hook_context(name: str, data: dict[str, Any], agent: DurableAgent) -> Any:
    """The context :func:`encode_hook_context` encoded, with ``agent``'s tools."""
    tools = tools_by_name({t.name: t for t in agent.tools}, "registered")
    context = decode_context(data["context"], tools)
    if name in ("before_tool_call", "after_tool_call"):
        common: dict[str, Any] = {
            "assistant_message": decode_message(data["assistant_message"]),
            "tool_call": ToolCall.model_validate(data["tool_call"]),
            "args": data["args"],
            "context": context,
        }
        if name == "before_tool_call":
            return BeforeToolCallContext(**common)
        return AfterToolCallContext(
            **common, result=tool_result(data["result"]), is_error=data["is_error"]
        )
    return PrepareNextTurnContext(
        decode_message(data["message"]),
        [decode_message(m) for m in data["tool_results"]],
        context,
        [decode_message(m) for m in data["new_messages"]],
    )


async def call_hook(agent: DurableAgent, name: str, data: dict[str, Any]) -> dict[str, Any]:
    """Run ``agent``'s hook ``name`` on the context ``data``; its value as the codec records
    it (``{"raise": TEXT}`` when it raised; with ``"args"``, as edited, for
    ``before_tool_call``)."""
    hook: Any = getattr(agent.config, name)
    ctx = decode_hook_context(name, data, agent)
    try:
        value = hook(ctx, AbortController().signal)
        if inspect.isawaitable(value):
            value = await value
        out = encode_hook_value(name, value)
    except Exception as exc:
        return {"raise": exc_text(exc)}
    if name == "before_tool_call":
        out["args"] = json_data(ctx.args)
    return out
