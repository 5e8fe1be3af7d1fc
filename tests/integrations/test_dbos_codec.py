"""One record of a run, whatever engine runs it: the same agent, run in memory, journaled in a
SQLite run store and as a DBOS workflow, gives the same events and the same transcript — also
when its hooks return values the machine rejects (``should_stop_after_turn`` returning a
non-bool) or accepts in a form other than the usual one (``prepare_next_turn`` returning a
dict), and when a tool's ``details`` is not JSON data or its text holds surrogates.

DBOS runs on asyncio only, so the three engines are compared there (the journal on its own is
compared on both backends in tests/persist/test_record_codec.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import dbos  # noqa: F401  (the dbos extra is part of the test install: fail, never skip)

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    run_agent_loop,
)
from agentcore_fsm.integrations import dbos as durable
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.store import SqliteRunStore

MODEL = Model(id="faux")
PAIR = "\ud83d\ude00"  # two code points, the halves of an emoji, not the emoji itself
LONE = "half \ud83d of it"


def _answers() -> list[Any]:
    return [
        faux_response("Looking.", tool_calls=[faux_tool_call("probe", {"q": 1}, id="p1")]),
        faux_response(f"Found {PAIR} and {LONE}."),
    ]


def _stream_fn() -> Any:
    answers = _answers()

    async def stream_fn(model: Any, context: Any, options: Any) -> Any:
        turn = sum(1 for m in context.messages if getattr(m, "role", None) == "assistant")
        async for event in FauxProvider([answers[turn]])(model, context, options):
            yield event

    return stream_fn


async def _probe(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
    return AgentToolResult(
        content=[TextContent(text=f"probed {PAIR} {LONE}")],
        details={"raw": b"\xff\xfe", "tags": {"a"}, "pair": PAIR},
    )


def _config(case: str) -> AgentLoopConfig:
    config = AgentLoopConfig(model=MODEL)
    if case == "stop_not_bool":
        config.should_stop_after_turn = lambda ctx, signal: "yes"
    elif case == "prepare_dict":
        config.prepare_next_turn = lambda ctx, signal: {"thinking_level": "low"}
    return config


def _tool() -> AgentTool:
    return AgentTool("probe", "probe something", {"type": "object"}, _probe)


CASES = ("stop_not_bool", "prepare_dict", "plain")


def _plain(events: list[Any]) -> list[Any]:
    """The events that do not come from a stream's deltas, as JSON, without timestamps (each
    engine reads its own clock)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "timestamp"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return [
        strip(e.model_dump(mode="python", by_alias=True))
        for e in events
        if e.type != "message_update"
    ]


def _transcript(messages: list[Any]) -> list[Any]:
    return [
        {k: v for k, v in m.model_dump(mode="python").items() if k != "timestamp"} for m in messages
    ]


def test_memory_journal_and_dbos_give_the_same_run(tmp_path: Path) -> None:
    async def main() -> dict[str, dict[str, tuple[list[Any], list[Any]]]]:
        out: dict[str, dict[str, tuple[list[Any], list[Any]]]] = {c: {} for c in CASES}
        store = SqliteRunStore(tmp_path / "runs.db")
        for case in CASES:
            for engine in ("memory", "journal"):
                events: list[Any] = []
                extra: dict[str, Any] = {}
                if engine == "journal":
                    extra = {"store": store, "run_id": f"{case}-j"}
                messages = await run_agent_loop(
                    ["probe it"],
                    AgentContext(tools=[_tool()]),
                    _config(case),
                    events.append,
                    stream_fn=_stream_fn(),
                    **extra,
                )
                out[case][engine] = (events, messages)
            if engine == "journal":  # read back from the store: the same transcript
                stored = store.load(f"{case}-j")
                assert stored.status == "finished"
        store.close()
        agents = [
            durable.DurableAgent(case, _stream_fn(), _config(case), [_tool()]) for case in CASES
        ]
        await durable.launch(f"sqlite:///{tmp_path / 'dbos.db'}", agents=agents)
        try:
            for case in CASES:
                events = []
                messages = await durable.run_durable(
                    case, ["probe it"], run_id=f"{case}-d", emit=events.append
                )
                out[case]["dbos"] = (events, messages)
        finally:
            durable.shutdown()
        return out

    runs = asyncio.run(main())
    for case, engines in runs.items():
        memory_events, memory_messages = engines["memory"]
        for engine in ("journal", "dbos"):
            events, messages = engines[engine]
            assert _plain(events) == _plain(memory_events), (case, engine)
            assert _transcript(messages) == _transcript(memory_messages), (case, engine)
    # what the memory run did is what the contract says
    stop_events = runs["stop_not_bool"]["memory"][0]
    assert stop_events[-1].reason == "error"
    assert "should_stop_after_turn returned an invalid value: str 'yes'" in (
        stop_events[-1].messages[-1].error_message
    )
    assert runs["prepare_dict"]["memory"][0][-1].reason == "completed"
    # the details rule: converted to JSON data, the same everywhere
    result = runs["plain"]["memory"][1][2]
    assert result.details == {"raw": "//4=", "tags": ["a"], "pair": PAIR}
    assert result.content[0].text == f"probed {PAIR} {LONE}"
    assert len(PAIR) == 2 and runs["plain"]["dbos"][1][-1].content[0].text.count(PAIR) == 1
