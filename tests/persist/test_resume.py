"""Resuming a journaled run (docs/reference.md#runs-that-survive), in one process.

A complete journaled run is cut after each of its journal entries, as a crash would have left
it, and resumed from there with fresh tools that count their executions: the resumed run ends
with every call answered once, a tool whose result was journaled never runs again, a tool that
had started runs again only when it is idempotent (else it is answered as interrupted), and the
journaled steps' events followed by the resumed events are one well-formed run. The crash tests
with killed processes are in tests/test_crash.py.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest
from helpers import MODEL, text_of

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.devtools.testing import EventRecorder, check_resumed_run, check_run
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.journal import JournalError
from agentcore_fsm.persist.store import (
    MemoryRunStore,
    RunFinishedError,
    RunOwnedError,
    UnknownRunError,
    default_owner,
)
from agentcore_fsm.runtime.resume import INTERRUPTED_TEXT, load_run_state, resume_run

pytestmark = pytest.mark.anyio

RESPONSES = [
    faux_response(
        "two at once",
        tool_calls=[
            faux_tool_call("write", {"n": 1}, id="c1"),
            faux_tool_call("read", {"n": 2}, id="c2"),
        ],
    ),
    faux_response("one more", tool_calls=[faux_tool_call("write", {"n": 3}, id="c3")]),
    faux_response("all done"),
]
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}


class Tools:
    """A non-idempotent ``write`` and an idempotent ``read``, counting their executions."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()

    def tools(self) -> list[AgentTool]:
        async def write(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
            self.runs[call_id] += 1
            await anyio.lowlevel.checkpoint()
            return AgentToolResult(content=[TextContent(text=f"wrote {args['n']}")])

        async def read(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
            self.runs[call_id] += 1
            await anyio.lowlevel.checkpoint()
            return AgentToolResult(content=[TextContent(text=f"read {args['n']}")])

        return [
            AgentTool("write", "writes", SCHEMA, write),
            AgentTool("read", "reads", SCHEMA, read, idempotent=True),
        ]


def config(polls: list[int]) -> AgentLoopConfig:
    """Steering: the second poll of the run returns a message (``polls`` counts them)."""

    def steering() -> list[Any]:
        polls[0] += 1
        return ["also this"] if polls[0] == 2 else []

    return AgentLoopConfig(model=MODEL, get_steering_messages=steering)


async def _original() -> tuple[MemoryRunStore, list[Any], list[Any]]:
    store = MemoryRunStore()
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(tools=Tools().tools()),
        config([0]),
        recorder,
        stream_fn=FauxProvider(RESPONSES),
        store=store,
        run_id="orig",
    )
    check_run(recorder.events, messages)
    return store, recorder.events, messages


def _cut(store: MemoryRunStore, k: int) -> MemoryRunStore:
    """A store holding the original run as a crash after ``k`` journal entries left it: status
    running, leased by a process of another host whose lease has expired."""
    stored = store.load("orig")
    cut = MemoryRunStore()
    owner = "elsewhere:1:dead"
    cut.create_run("r", stored.header, session_id="s", owner=owner, lease_s=-1.0)
    for seq, entry in enumerate(stored.entries[:k]):
        cut.append("r", seq, entry, owner=owner, lease_s=-1.0)
    return cut


async def test_a_finished_journaled_run_is_marked_finished() -> None:
    store, _, messages = await _original()
    stored = store.load("orig")
    assert stored.status == "finished" and stored.end_reason == "completed"
    machine, _ = load_run_state(store, "orig", config([0]), tools=Tools().tools())
    assert machine.new_messages == messages


@pytest.mark.parametrize("history", [False, True])
async def test_a_run_cut_after_any_journal_entry_resumes_to_a_valid_end(history: bool) -> None:
    store, original_events, original_messages = await _original()
    entries = store.load("orig").entries
    assert len(entries) > 10
    for k in range(len(entries)):
        cut = _cut(store, k)
        journaled = entries[:k]
        tools = Tools()
        # the polls and model calls already journaled are not made again
        polls = [sum(e["input"] == "steering_polled" for e in journaled)]
        answered = sum(e["input"] in ("stream_done", "stream_error") for e in journaled)
        before, _ = load_run_state(cut, "r", config([0]), tools=tools.tools())
        history_events = (
            [] if k == 0 else load_run_state(cut, "r", config([0]), tools=tools.tools())[1]
        )
        history_events = [e for s in history_events for e in s.events]
        started = {c.call.id for c in before._calls if c.state != "new"}
        # the calls whose results were journaled: their result messages are in the transcript
        # rebuilt from the journal (earlier turns' calls), or the current batch's calls that
        # have their result already
        finished = {m.tool_call_id for m in before.new_messages if m.role == "toolResult"}
        finished |= {c.call.id for c in before._calls if c.result is not None}
        recorder = EventRecorder()
        messages = await resume_run(
            "r",
            cut,
            config(polls),
            recorder,
            tools=tools.tools(),
            stream_fn=FauxProvider(RESPONSES[answered:]),
            history=history,
        )
        where = f"cut after {k} entries"
        if history:
            summary = check_run(recorder.events, messages)
        else:
            summary = check_resumed_run(history_events, recorder.events, messages)
        assert summary.reason == "completed", where
        assert cut.load("r").status == "finished", where
        # nothing journaled was rewritten
        assert cut.load("r").entries[:k] == journaled, where
        # every call answered exactly once, in the original's order
        assert [getattr(m, "tool_call_id", None) for m in messages] == [
            getattr(m, "tool_call_id", None) for m in original_messages
        ], where
        for call_id, runs in tools.runs.items():
            assert runs == 1, (where, call_id)
            assert call_id not in finished, (where, call_id)
        results = {m.tool_call_id: m for m in messages if m.role == "toolResult"}
        for call_id in ("c1", "c2", "c3"):
            result = results[call_id]
            if call_id in finished:
                assert text_of(result) == text_of(
                    next(m for m in original_messages if getattr(m, "tool_call_id", "") == call_id)
                ), where
            elif call_id in started and result.tool_name == "write" and call_id not in tools.runs:
                assert result.is_error, where
                assert text_of(result) == INTERRUPTED_TEXT.format(name="write"), where
            else:
                assert tools.runs[call_id] == 1, (where, call_id)
        # the interrupted ones are exactly the non-idempotent calls in flight
        interrupted = {
            cid
            for cid, m in results.items()
            if text_of(m).endswith("(AgentTool(idempotent=True)).")
        }
        assert interrupted == {
            cid for cid in started - finished if results[cid].tool_name == "write"
        }, where
    assert original_events  # the original run itself was checked in _original


async def test_a_run_resumed_mid_stream_makes_the_model_call_again() -> None:
    store, _, _ = await _original()
    entries = store.load("orig").entries
    # the first entry after the first tool call finished is the next model call's answer
    k = next(i for i, e in enumerate(entries) if e["input"] == "stream_done" and i > 2)
    cut = _cut(store, k)
    faux = FauxProvider(RESPONSES[1:])
    recorder = EventRecorder()
    await resume_run("r", cut, config([2]), recorder, tools=Tools().tools(), stream_fn=faux)
    assert len(faux.calls) == 2
    assert recorder.types()[0] == "message_start"


async def test_resuming_a_finished_run_is_an_error_naming_it() -> None:
    store, _, _ = await _original()
    with pytest.raises(RunFinishedError, match="'orig'"):
        await resume_run("orig", store, config([0]), tools=Tools().tools())


async def test_resuming_an_unknown_run_is_an_error_naming_it() -> None:
    with pytest.raises(UnknownRunError, match="'nope'"):
        await resume_run("nope", MemoryRunStore(), config([0]))


async def test_a_run_held_by_a_live_process_is_not_resumed() -> None:
    store, _, _ = await _original()
    stored = store.load("orig")
    held = MemoryRunStore()
    held.create_run("r", stored.header, session_id=None, owner=default_owner(), lease_s=60)
    with pytest.raises(RunOwnedError, match="'r'"):
        await resume_run("r", held, config([0]), tools=Tools().tools())


async def test_a_journal_of_another_declaration_is_refused() -> None:
    store, _, _ = await _original()
    stored = store.load("orig")
    header = dict(stored.header, declaration_hash="0" * 16)
    other = MemoryRunStore()
    other.create_run("r", header, session_id=None, owner="x:1:y", lease_s=-1)
    with pytest.raises(JournalError, match=r"run 'r'.*declaration"):
        await resume_run("r", other, config([0]), tools=Tools().tools())
    assert other.load("r").entries == []  # nothing written


async def test_a_journal_needs_its_tools_and_hooks_again() -> None:
    store, _, _ = await _original()
    cut = _cut(store, 4)
    with pytest.raises(JournalError, match=r"run 'r'.*write"):
        await resume_run("r", cut, config([0]), tools=Tools().tools()[1:])
    with pytest.raises(JournalError, match=r"run 'r'.*hooks"):
        await resume_run("r", cut, AgentLoopConfig(model=MODEL), tools=Tools().tools())
    # the run is still there, unchanged, and resumable
    assert cut.load("r").entries == store.load("orig").entries[:4]
    await resume_run(
        "r", cut, config([1]), tools=Tools().tools(), stream_fn=FauxProvider(RESPONSES)
    )
    assert cut.load("r").status == "finished"


async def test_a_store_that_fails_ends_the_run_with_its_error() -> None:
    class Failing(MemoryRunStore):
        def append(self, run_id: str, seq: int, entry: Any, **kwargs: Any) -> None:
            if seq == 3:
                raise OSError("disk full")
            super().append(run_id, seq, entry, **kwargs)

    recorder = EventRecorder()
    store = Failing()
    messages = await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(tools=Tools().tools()),
        config([0]),
        recorder,
        stream_fn=FauxProvider(RESPONSES),
        store=store,
        run_id="f",
    )
    summary = check_run(recorder.events, messages)
    assert summary.reason == "error"
    assert "disk full" in (messages[-1].error_message or "")


async def test_a_journaled_run_needs_a_run_id() -> None:
    with pytest.raises(ValueError, match="run_id"):
        await run_agent_loop(
            [UserMessage(content="go")],
            AgentContext(),
            config([0]),
            store=MemoryRunStore(),
            stream_fn=FauxProvider(RESPONSES),
        )
