"""The minimal hand-written loop the bench measures ours against (``agentcore-fsm bench``): what a
careful person would write by hand for exactly the bench's workloads and no more — plain dicts,
an async-generator fake model, the same events in the same order, tool calls run concurrently in
the backend's own task group (:data:`RUN_ALL`), result messages in source order; no validation
library, no hooks, no abort, no failure handling. The floor, not a rival. See
:mod:`agentcore_fsm.cli.bench`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
import trio

from agentcore_fsm.cli.bench_workloads import PROMPT, BenchError, Workload, expected_event_count
from agentcore_fsm.core.messages import (
    now_ms,
)

__all__ = [
    "MINIMAL_TOOLS",
    "RUN_ALL",
    "MinimalRun",
    "MinimalSink",
    "RunAll",
    "minimal_loop",
    "minimal_model",
]

# --- the minimal hand-written loop ------------------------------------------------------------

LLM_ROLES = frozenset({"user", "assistant", "toolResult"})
Emit = Callable[[dict[str, Any]], None]


def minimal_model(w: Workload) -> Callable[[list[dict[str, Any]]], AsyncIterator[dict[str, Any]]]:
    """The minimal loop's fake model: an async generator of dict events, one per delta, with a
    partial message dict kept up to date and tool arguments parsed from JSON at the end."""
    turns = iter(w.turns)

    async def model(messages: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        turn = next(turns)
        content: list[dict[str, Any]] = []
        partial: dict[str, Any] = {
            "role": "assistant",
            "content": content,
            "model": "bench-model",
            "usage": {"input": 0, "output": 0},
            "stop_reason": "pending",
            "timestamp": now_ms(),
        }
        yield {"type": "start", "partial": partial}
        if turn.deltas:
            block = {"type": "text", "text": ""}
            content.append(block)
            yield {"type": "text_start", "content_index": 0, "partial": partial}
            for delta in turn.deltas:
                block["text"] += delta
                yield {"type": "text_delta", "content_index": 0, "delta": delta, "partial": partial}
            yield {
                "type": "text_end",
                "content_index": 0,
                "content": block["text"],
                "partial": partial,
            }
        for call_id, args in turn.calls:
            index = len(content)
            call: dict[str, Any] = {
                "type": "toolCall",
                "id": call_id,
                "name": "echo",
                "arguments": {},
            }
            content.append(call)
            yield {"type": "toolcall_start", "content_index": index, "partial": partial}
            yield {
                "type": "toolcall_delta",
                "content_index": index,
                "delta": args,
                "partial": partial,
            }
            call["arguments"] = json.loads(args)
            yield {
                "type": "toolcall_end",
                "content_index": index,
                "tool_call": call,
                "partial": partial,
            }
        reason = "toolUse" if turn.calls else "stop"
        partial["stop_reason"] = reason
        yield {"type": "done", "reason": reason, "message": partial}

    return model


async def minimal_echo(x: int) -> dict[str, Any]:
    """The minimal loop's ``echo`` tool: a result whose text is ``x``."""
    return {"content": [{"type": "text", "text": str(x)}]}


MINIMAL_TOOLS: dict[str, tuple[Callable[..., Awaitable[dict[str, Any]]], dict[str, type]]] = {
    "echo": (minimal_echo, {"x": int}),
}


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "is_error": True}


async def _minimal_run_tool(
    emit: Emit,
    call: dict[str, Any],
    fn: Callable[..., Awaitable[dict[str, Any]]],
    args: dict[str, Any],
    results: list[dict[str, Any] | None],
    i: int,
) -> None:
    try:
        result = await fn(**args)
    except Exception as exc:
        result = _error_result(str(exc))
    results[i] = result
    emit(
        {
            "type": "tool_execution_end",
            "tool_call_id": call["id"],
            "tool_name": call["name"],
            "result": result,
            "is_error": bool(result.get("is_error")),
        }
    )


ToolJob = tuple[
    Emit,
    dict[str, Any],
    Callable[..., Awaitable[dict[str, Any]]],
    dict[str, Any],
    list[dict[str, Any] | None],
    int,
]
RunAll = Callable[[list[ToolJob]], Awaitable[None]]


async def _run_all_trio(jobs: list[ToolJob]) -> None:
    async with trio.open_nursery() as nursery:
        for job in jobs:
            nursery.start_soon(_minimal_run_tool, *job)


async def _run_all_asyncio(jobs: list[ToolJob]) -> None:
    async with asyncio.TaskGroup() as tg:
        for job in jobs:
            tg.create_task(_minimal_run_tool(*job))


async def _run_all_anyio(jobs: list[ToolJob]) -> None:
    async with anyio.create_task_group() as tg:
        for job in jobs:
            tg.start_soon(_minimal_run_tool, *job)


RUN_ALL: dict[str, RunAll] = {
    "trio": _run_all_trio,
    "asyncio": _run_all_asyncio,
    "anyio": _run_all_anyio,
}
"""How the minimal loop runs a batch of tool calls concurrently. By default it uses the
backend's own task group (a trio nursery, an ``asyncio.TaskGroup``): a hand-written loop for one
backend would, and anyio's portable task group costs about three times as much per task
(measured here: ~20 µs against ~8 µs per ``start_soon`` on trio), which would flatter our ratio.
``--minimal-taskgroup anyio`` measures against the anyio form instead."""


async def minimal_loop(
    prompt: dict[str, Any],
    model: Callable[[list[dict[str, Any]]], AsyncIterator[dict[str, Any]]],
    tools: dict[str, tuple[Callable[..., Awaitable[dict[str, Any]]], dict[str, type]]],
    emit: Emit,
    run_all: RunAll,
) -> list[dict[str, Any]]:
    """A hand-written agent loop: the floor the bench measures our loop against. ``run_all``
    runs the tool calls concurrently in a task group of the backend (see :data:`RUN_ALL`)."""
    messages = [prompt]
    new = [prompt]
    emit({"type": "agent_start"})
    emit({"type": "turn_start"})
    emit({"type": "message_start", "message": prompt})
    emit({"type": "message_end", "message": prompt})
    first = True
    while True:
        if not first:
            emit({"type": "turn_start"})
        first = False
        final: dict[str, Any] | None = None
        async for event in model([m for m in messages if m["role"] in LLM_ROLES]):
            kind = event["type"]
            if kind == "start":
                emit({"type": "message_start", "message": event["partial"]})
            elif kind == "done":
                final = event["message"]
            elif kind == "error":
                final = event["error"]
            else:
                emit(
                    {
                        "type": "message_update",
                        "message": event["partial"],
                        "assistant_message_event": event,
                    }
                )
        assert final is not None
        emit({"type": "message_end", "message": final})
        messages.append(final)
        new.append(final)
        calls = [b for b in final["content"] if b["type"] == "toolCall"]
        if final["stop_reason"] in ("error", "aborted") or not calls:
            emit({"type": "turn_end", "message": final, "tool_results": []})
            break
        results: list[dict[str, Any] | None] = [None] * len(calls)
        prepared: list[tuple[int, Callable[..., Awaitable[dict[str, Any]]], dict[str, Any]]] = []
        for i, call in enumerate(calls):
            args = call["arguments"]
            emit(
                {
                    "type": "tool_execution_start",
                    "tool_call_id": call["id"],
                    "tool_name": call["name"],
                    "args": args,
                }
            )
            spec = tools.get(call["name"])
            bad = None
            if spec is None:
                bad = f"Tool {call['name']} not found"
            else:
                for key, typ in spec[1].items():
                    if type(args.get(key)) is not typ:
                        bad = f"{key}: expected {typ.__name__}"
            if bad is not None:
                results[i] = _error_result(bad)
                emit(
                    {
                        "type": "tool_execution_end",
                        "tool_call_id": call["id"],
                        "tool_name": call["name"],
                        "result": results[i],
                        "is_error": True,
                    }
                )
            else:
                assert spec is not None
                prepared.append((i, spec[0], args))

        await run_all([(emit, calls[i], fn, args, results, i) for i, fn, args in prepared])
        tool_results = []
        for call, result in zip(calls, results, strict=True):
            assert result is not None
            message = {
                "role": "toolResult",
                "tool_call_id": call["id"],
                "tool_name": call["name"],
                "content": result["content"],
                "is_error": bool(result.get("is_error")),
                "timestamp": now_ms(),
            }
            emit({"type": "message_start", "message": message})
            emit({"type": "message_end", "message": message})
            messages.append(message)
            new.append(message)
            tool_results.append(message)
        emit({"type": "turn_end", "message": final, "tool_results": tool_results})
    emit({"type": "agent_end", "messages": new})
    return new


class MinimalSink:
    """The minimal loop's emit callback: the same work as :class:`OurSink`, on dicts."""

    # Written again on purpose (it repeats OurSink's counting, on dicts): the minimal loop is
    # hand-written and shares no code with our side, so that the bench compares two
    # independent programs doing the same work.

    __slots__ = ("events", "text", "tool_ends")

    def __init__(self) -> None:
        self.events = 0
        self.tool_ends = 0
        self.text: list[str] = []

    def __call__(self, event: dict[str, Any]) -> None:
        """Count ``event``; keep its text delta, count a tool end."""
        self.events += 1
        kind = event["type"]
        if kind == "message_update":
            inner = event["assistant_message_event"]
            if inner["type"] == "text_delta":
                self.text.append(inner["delta"])
        elif kind == "tool_execution_end":
            self.tool_ends += 1


class MinimalRun:
    """One run of the minimal loop: everything but the run itself is built in ``__init__``."""

    __slots__ = ("messages", "model", "prompt", "run_all", "sink")

    def __init__(self, w: Workload, run_all: RunAll) -> None:
        self.run_all = run_all
        self.sink = MinimalSink()
        self.prompt = {"role": "user", "content": PROMPT, "timestamp": now_ms()}
        self.model = minimal_model(w)
        self.messages: list[dict[str, Any]] = []

    async def __call__(self) -> None:
        """Run the minimal loop once (what is timed)."""
        self.messages = await minimal_loop(
            self.prompt, self.model, MINIMAL_TOOLS, self.sink, self.run_all
        )

    def check(self, w: Workload) -> None:
        """Raise :class:`BenchError` unless the run did ``w``'s work (text, events, results)."""
        sink = self.sink
        results = [m for m in self.messages if m["role"] == "toolResult"]
        texts = [r["content"][0]["text"] for r in results]
        problems = []
        if "".join(sink.text) != w.text:
            problems.append("streamed text differs")
        if sink.events != expected_event_count(w):
            problems.append(f"{sink.events} events, expected {expected_event_count(w)}")
        if sink.tool_ends != len(w.echo_values) or texts != w.echo_values:
            problems.append(f"tool results {texts}, expected {w.echo_values}")
        if any(r["is_error"] for r in results):
            problems.append("a tool result is an error")
        if self.messages[-1]["role"] != "assistant":
            problems.append("the run did not end with a final assistant message")
        if problems:
            raise BenchError(f"minimal loop, {w.name}: " + "; ".join(problems))
