"""The record of a run keeps each input's timestamp (issue 26, item 4).

An entry holds its input's ``timestamp`` (left out when 0: an input stepped by hand), and reading
the record back feeds each input with it, so the messages the machine makes come back with the
same timestamps. An entry of an older record holds the clock readings the machine then took
(``clock``): it is read back with its first reading as its timestamp; an entry with neither is
read back with timestamp 0.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import MODEL, make_tool, text_result, user

from agentcore_fsm import AgentContext, AgentLoopConfig, ToolResultMessage
from agentcore_fsm.core.events import StreamDone, StreamStart
from agentcore_fsm.core.messages import AssistantMessage, ToolCall
from agentcore_fsm.core.protocol import Start, StreamEvent, ToolFinished
from agentcore_fsm.persist.codec import RecordError
from agentcore_fsm.persist.inputs import decode_entry
from agentcore_fsm.persist.journal import JournaledLoopMachine, RunSnapshot, derive_run

TOOL = make_tool("t")


def _run(finished_at: int) -> JournaledLoopMachine:
    m = JournaledLoopMachine([user("go")], AgentContext(tools=[TOOL]), AgentLoopConfig(model=MODEL))
    m.feed(Start(timestamp=100))
    answer = AssistantMessage(
        content=[ToolCall(id="c1", name="t", arguments={})],
        api=MODEL.api,
        provider=MODEL.provider,
        model=MODEL.id,
        stop_reason="toolUse",
    )
    m.feed(StreamEvent(StreamStart(partial=answer), timestamp=200))
    m.feed(StreamEvent(StreamDone(reason="toolUse", message=answer), timestamp=300))
    m.feed(ToolFinished(0, text_result("ok"), timestamp=finished_at))
    return m


def _result_timestamps(messages: list[Any]) -> list[int]:
    return [m.timestamp for m in messages if isinstance(m, ToolResultMessage)]


def test_an_entry_keeps_its_input_s_timestamp_and_reads_back_with_it() -> None:
    m = _run(finished_at=4242)
    assert _result_timestamps(m.new_messages) == [4242]
    finished = [e for e in m.entries if e["input"] == "tool_finished"]
    assert [e["timestamp"] for e in finished] == [4242]
    assert [e["timestamp"] for e in m.entries] == [100, 300, 4242]  # the start event: not kept
    restored, _ = JournaledLoopMachine.restore(
        m.snapshot(), AgentLoopConfig(model=MODEL), tools=[TOOL]
    )
    assert _result_timestamps(restored.new_messages) == [4242]
    assert restored.new_messages == m.new_messages and restored.entries == m.entries


def test_an_unstamped_input_s_entry_has_no_timestamp() -> None:
    m = _run(finished_at=0)
    assert "timestamp" not in next(e for e in m.entries if e["input"] == "tool_finished")
    assert _result_timestamps(derive_run(m.snapshot()).machine.new_messages) == [0]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"clock": [5150, 5151]}, 5150),  # an older record: its first clock reading
        ({"clock": []}, 0),
        ({}, 0),  # neither
        ({"timestamp": 77, "clock": [1]}, 77),
    ],
)
def test_an_older_entry_reads_back_with_its_first_clock_reading(
    fields: dict[str, Any], expected: int
) -> None:
    snapshot = _run(finished_at=4242).snapshot()
    entries = [dict(e) for e in snapshot.entries]
    last = entries[-1]
    del last["timestamp"]
    last.update(fields)
    old = RunSnapshot(
        declaration=snapshot.declaration,
        declaration_hash=snapshot.declaration_hash,
        header=snapshot.header,
        entries=entries,
    )
    assert _result_timestamps(derive_run(old).machine.new_messages) == [expected]
    decoded = decode_entry(last, 1, lambda name: TOOL)
    assert decoded.timestamp == expected
    assert {item.timestamp for item in decoded.inputs} == {expected}


@pytest.mark.parametrize("bad", ["5", 1.5, True, None])
def test_a_timestamp_that_is_not_an_int_is_refused(bad: Any) -> None:
    entry = {"input": "proceeded", "timestamp": bad}
    with pytest.raises(RecordError, match="timestamp must be an int"):
        decode_entry(entry, 0, lambda name: TOOL)
