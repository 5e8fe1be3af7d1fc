"""The one record of a run and its codec (agentcore_fsm.persist.codec), against hostile records:

* a tool's ``details`` that JSON cannot hold (bytes, a set, an object) follows one rule in
  memory and journaled: converted to JSON data at the tool boundary (docs/record.md);
* every Python string, surrogate pairs and lone surrogates included, reads back from the
  stores and recordings as the same code points;
* a damaged record (an index that names no call, a null where a message belongs, a header
  without its context, a prompt naming a class that is not a registered message type) is
  refused with a :class:`~agentcore_fsm.persist.codec.RecordError` naming the run, the entry and
  what is wrong, and never makes the library import anything.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.codec import RecordError, register_message_type
from agentcore_fsm.persist.store import MemoryRunStore, SqliteRunStore
from agentcore_fsm.runtime.resume import load_run_state

pytestmark = pytest.mark.anyio

MODEL = Model(id="faux")
PAIR = "\ud83d\ude00"  # the two halves of an emoji as two code points
EMOJI = "\U0001f600"  # the emoji itself: one code point
LONE = "a \udc00 b \ud800"
ODD = f"{PAIR}|{EMOJI}|{LONE}"


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


def _tool(details: Any) -> AgentTool:
    async def execute(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text=f"ran {ODD}")], details=details)

    return AgentTool("probe", "probe", {"type": "object"}, execute)


def _script() -> list[Any]:
    return [
        faux_response(f"call {ODD}", tool_calls=[faux_tool_call("probe", {"q": ODD}, id="c1")]),
        faux_response(f"done {ODD}"),
    ]


async def _run(details: Any, store: Any = None, run_id: str | None = None) -> list[Any]:
    extra: dict[str, Any] = {} if store is None else {"store": store, "run_id": run_id}
    return await run_agent_loop(
        [UserMessage(content=f"hi {ODD}")],
        AgentContext(tools=[_tool(details)]),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider(_script()),
        **extra,
    )


def _plain(messages: list[Any]) -> list[Any]:
    return [
        {k: v for k, v in m.model_dump(mode="python").items() if k != "timestamp"} for m in messages
    ]


@pytest.mark.parametrize(
    ("details", "expected"),
    [
        (b"\xff\x00", "/wA="),
        ({"s": {3}, "t": (1, 2)}, {"s": [3], "t": [1, 2]}),
        ({"o": Opaque(), "nan": float("nan")}, {"o": "<Opaque>", "nan": None}),
        ({"ok": [1, "x", None, 2.5]}, {"ok": [1, "x", None, 2.5]}),
    ],
)
async def test_details_json_cannot_hold_follow_one_rule(
    details: Any, expected: Any, tmp_path: Path
) -> None:
    in_memory = await _run(details)
    assert in_memory[2].details == expected
    with SqliteRunStore(tmp_path / "runs.db") as store:
        journaled = await _run(details, store, "r1")
        assert store.load("r1").status == "finished"
        machine, _ = load_run_state(store, "r1", AgentLoopConfig(model=MODEL), tools=[_tool(None)])
    assert _plain(journaled) == _plain(in_memory)
    assert _plain(machine.new_messages) == _plain(in_memory)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_every_string_reads_back_as_the_same_code_points(kind: str, tmp_path: Path) -> None:
    assert len(PAIR) == 2 and len(EMOJI) == 1
    store: Any = MemoryRunStore() if kind == "memory" else SqliteRunStore(tmp_path / "s.db")
    with store:
        header = {"text": ODD, ODD: [PAIR, {"k": LONE}], "emoji": EMOJI}
        entry = {"pair": PAIR, "lone": LONE, "emoji": EMOJI}
        store.create_run("x", header, session_id=None, owner="me:1:x", lease_s=30)
        store.append("x", 0, entry, owner="me:1:x", lease_s=30)
        stored = store.load("x")
        assert stored.header == header and stored.entries == [entry]
        assert len(stored.entries[0]["pair"]) == 2 and len(stored.entries[0]["emoji"]) == 1
        messages = await _run(None, store, "r1")
        machine, _ = load_run_state(store, "r1", AgentLoopConfig(model=MODEL), tools=[_tool(None)])
    assert machine.new_messages == messages
    assert messages[0].content == f"hi {ODD}"
    assert messages[-1].content[0].text == f"done {ODD}"


# --- damaged records ---------------------------------------------------------------------------


async def _stored() -> MemoryRunStore:
    store = MemoryRunStore()
    await _run({"n": 1}, store, "orig")
    return store


def _damaged(store: MemoryRunStore, header: Any, entries: list[Any]) -> MemoryRunStore:
    out = MemoryRunStore()
    out.create_run("bad", header, session_id=None, owner="x:1:y", lease_s=30)
    for seq, entry in enumerate(entries):
        out.append("bad", seq, entry, owner="x:1:y", lease_s=30)
    return out


def _load(store: MemoryRunStore) -> Any:
    return load_run_state(store, "bad", AgentLoopConfig(model=MODEL), tools=[_tool(None)])


async def test_an_index_that_names_no_call_is_refused() -> None:
    store = await _stored()
    stored = store.load("orig")
    entries = copy.deepcopy(stored.entries)
    at = next(i for i, e in enumerate(entries) if e["input"] == "tool_finished")
    entries[at]["index"] = 7
    with pytest.raises(RecordError) as info:
        _load(_damaged(store, stored.header, entries))
    text = str(info.value)
    assert "run 'bad'" in text and f"entry #{at}" in text and "7" in text, text


async def test_a_null_where_a_message_belongs_is_refused() -> None:
    store = await _stored()
    stored = store.load("orig")
    entries = copy.deepcopy(stored.entries)
    at = next(i for i, e in enumerate(entries) if e["input"] == "stream_done")
    entries[at]["message"] = None
    with pytest.raises(RecordError, match=rf"run 'bad'.*entry #{at}.*message"):
        _load(_damaged(store, stored.header, entries))


async def test_a_header_without_its_context_is_refused() -> None:
    store = await _stored()
    stored = store.load("orig")
    header = dict(stored.header)
    del header["context"]
    with pytest.raises(RecordError, match=r"run 'bad'.*header.*context"):
        _load(_damaged(store, header, stored.entries))


async def test_a_prompt_naming_an_unregistered_class_is_refused_and_nothing_is_imported() -> None:
    store = await _stored()
    stored = store.load("orig")
    header = copy.deepcopy(stored.header)
    module = "agentcore_fsm_test_never_imported"
    header["prompts"][0] = {"custom": f"{module}:Boom", "message": {"role": "boom"}}
    with pytest.raises(RecordError, match=r"run 'bad'.*prompt.*not a registered message type"):
        _load(_damaged(store, header, stored.entries))
    header["prompts"][0] = {"custom": "os:system", "message": {"role": "x"}}
    with pytest.raises(RecordError, match="not a registered message type"):
        _load(_damaged(store, header, stored.entries))
    assert module not in sys.modules


class Note(BaseModel):
    """A custom message of the application's own role."""

    role: str = "note"
    text: str


async def test_a_registered_custom_message_round_trips() -> None:
    register_message_type(Note)
    store = MemoryRunStore()
    note = Note(text=f"remember {ODD}")
    config = AgentLoopConfig(
        model=MODEL, convert_to_llm=lambda ms: [m for m in ms if m.role != "note"]
    )
    messages = await run_agent_loop(
        [note, UserMessage(content="go")],
        AgentContext(),
        config,
        stream_fn=FauxProvider([faux_response("ok")]),
        store=store,
        run_id="n",
    )
    machine, _ = load_run_state(store, "n", config)
    assert machine.new_messages == messages and machine.new_messages[0] == note
