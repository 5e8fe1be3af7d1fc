"""The journaled path's cost cuts keep what they replace: the fast dump of a message is the
checked dump, the declaration hash cached per pair of declarations is the pair's hash, a
``RecordData``'s text is its value, and only a journal whose writes cannot suspend is written
without a shielded cancel scope (docs/record.md#encoding-once, docs/ports.md)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from agentcore_fsm import AgentContext, AgentLoopConfig, SqliteRunStore
from agentcore_fsm.core.boundary import json_data
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import (
    AssistantMessage,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)
from agentcore_fsm.core.tools import AgentToolResult
from agentcore_fsm.persist.codec import RecordData, dump, encode_message, record_text
from agentcore_fsm.persist.journal import (
    JournaledLoopMachine,
    declaration_hash,
    declarations_hash,
)
from agentcore_fsm.persist.run_journal import StoreJournal
from agentcore_fsm.runtime.recording import Recorder


def _checked(message: Any) -> Any:
    return json_data(message.model_dump(mode="python"))


@pytest.mark.parametrize(
    "arguments",
    [{"x": 1, "y": [1.5, "a", None, True]}, {"x": (1, 2)}, {"x": math.inf}, {"x": {1: "k"}}],
)
def test_a_message_dumps_as_its_checked_dump(arguments: dict[str, Any]) -> None:
    message = AssistantMessage(
        content=[
            ThinkingContent(thinking="hm"),
            TextContent(text="calling"),
            ToolCall(id="c1", name="echo", arguments=arguments),
        ],
        stop_reason="toolUse",
    )
    assert encode_message(message) == {"message": _checked(message)}
    result = ToolResultMessage(
        tool_call_id="c1", tool_name="echo", content=[TextContent(text="1")], details=arguments
    )
    assert encode_message(result) == {"message": _checked(result)}


def test_a_tool_result_entry_holds_its_checked_dump() -> None:
    result = AgentToolResult(content=[TextContent(text="1")], details={"k": (1, 2)})
    assert dump(result) == _checked(result)
    assert dump(result)["details"] == {"k": [1, 2]}


@dataclasses.dataclass
class _Pair:
    declaration: Any
    call_declaration: Any


def test_the_cached_hash_is_the_one_of_the_pair() -> None:
    machine = JournaledLoopMachine([], AgentContext(), AgentLoopConfig(model=Model(id="faux")))
    loop, call = machine.declaration, machine.call_declaration
    moved = dataclasses.replace(
        call, transitions=(dataclasses.replace(call.transitions[0], dest="x"),)
    )
    first = declaration_hash(cast(LoopMachine, _Pair(loop, call)))
    other = declaration_hash(cast(LoopMachine, _Pair(loop, moved)))
    assert first == declarations_hash(loop, call) == machine.header["declaration_hash"]
    assert other == declarations_hash(loop, moved) != first
    assert declaration_hash(cast(LoopMachine, _Pair(loop, call))) == first


def test_record_text_is_the_value() -> None:
    value = RecordData({"a": [1, 2.5, {"b": "é\n"}], "n": math.nan, "s": None})
    text = record_text(value)
    assert text is not None
    back = json.loads(text)
    assert back["a"] == [1, 2.5, {"b": "é\n"}] and back["s"] is None and math.isnan(back["n"])
    assert record_text({"a": 1}) is None  # only the codec's records are trusted


def test_only_a_journal_on_the_loop_is_written_unshielded(tmp_path: Path) -> None:
    store = SqliteRunStore(tmp_path / "s.db")
    machine = JournaledLoopMachine([], AgentContext(), AgentLoopConfig(model=Model(id="faux")))

    class Slow(StoreJournal):
        async def append(self, seq: int, entries: Sequence[dict[str, Any]]) -> None:
            await anyio.sleep(0)
            await super().append(seq, entries)

    class Bare:
        async def open(self, header: dict[str, Any]) -> int:
            return 0

        async def append(self, seq: int, entries: Sequence[dict[str, Any]]) -> None:
            return None

        async def close(self, seq: int, entries: Sequence[dict[str, Any]], end: Any) -> None:
            return None

    on_loop = StoreJournal(store, "r")
    assert on_loop.writes_synchronously is True
    assert Recorder(on_loop, machine, 0).shield is False
    for journal in (StoreJournal(store, "r", threaded=True), Slow(store, "r"), Bare()):
        assert getattr(journal, "writes_synchronously", False) is False
        assert Recorder(cast(Any, journal), machine, 0).shield is True
    store.close()


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_run_cancelled_from_outside_is_closed_on_the_loop(tmp_path: Path, backend: str) -> None:
    """Unshielded writes on the loop: a cancel from outside while the model streams still
    closes the run and its record (the abort written, the run finished, its lease given back),
    as a shielded close does."""
    from agentcore_fsm import run_agent_loop
    from agentcore_fsm.core.messages import UserMessage

    scopes: list[anyio.CancelScope] = []

    async def stream(model: Any, context: Any, options: Any) -> Any:
        scopes[0].cancel()  # cancelled from outside while the model call is in flight
        await anyio.sleep_forever()
        yield None  # pragma: no cover - never reached

    async def main() -> None:
        with SqliteRunStore(tmp_path / "c.db") as store:
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                await run_agent_loop(
                    [UserMessage(content="hi")],
                    AgentContext(),
                    AgentLoopConfig(model=Model(id="faux")),
                    stream_fn=stream,
                    store=store,
                    run_id="c",
                )
            assert scope.cancelled_caught
            run = store.load("c")
            assert (run.status, run.end_reason, run.owner) == ("finished", "aborted", None)
            assert [e["input"] for e in run.entries] == ["start", "abort"]

    anyio.run(main, backend=backend)
