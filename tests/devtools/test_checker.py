"""The grammar checker of ``agentcore_fsm.devtools.testing``: every rule, fed a hand-made bad
sequence.

Each case starts from one well-formed run (``good_events``), breaks it in one place, and expects
the violation of exactly that rule, at the event that broke it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.config import LlmContext
from agentcore_fsm.core.events import (
    AgentEndEvent,
    AgentStartEvent,
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    ContextCompactedEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    OutputPartialEvent,
    TextDelta,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from agentcore_fsm.devtools import testing
from agentcore_fsm.devtools.testing import (
    RULES,
    EventRecorder,
    FauxProvider,
    GrammarChecker,
    GrammarViolation,
    check_events,
    check_model_context,
    check_model_contexts,
    check_run,
    faux_response,
    faux_tool_call,
    run_checked,
    sequential_tool_names,
)
from tests.readme_sections import section

# --- a well-formed run --------------------------------------------------------------------

U = UserMessage(content="hi", timestamp=1)
U2 = UserMessage(content="more", timestamp=2)
C1 = ToolCall(id="c1", name="add", arguments={"a": 1})
C2 = ToolCall(id="c2", name="add", arguments={"a": 2})


def assistant(*calls: ToolCall, stop: Any = None, text: str = "x") -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text=text), *calls],
        stop_reason=stop or ("toolUse" if calls else "stop"),
        timestamp=3,
    )


A1 = assistant(C1, C2)
A2 = assistant(text="done")


def result(call: ToolCall, text: str = "ok", is_error: bool = False) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=f"{call.id}:{text}")], is_error=is_error)


def result_message(call: ToolCall, text: str = "ok") -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=result(call, text).content,
        timestamp=4,
    )


R1 = result_message(C1)
R2 = result_message(C2)


def pair(message: Any) -> list[Any]:
    return [MessageStartEvent(message=message), MessageEndEvent(message=message)]


def update(message: AssistantMessage) -> MessageUpdateEvent:
    delta = TextDelta(content_index=0, delta="x", partial=message)
    return MessageUpdateEvent(message=message, assistant_message_event=delta)


def streamed(message: AssistantMessage) -> list[Any]:
    return [MessageStartEvent(message=message), update(message), MessageEndEvent(message=message)]


def start(call: ToolCall, name: str | None = None) -> ToolExecutionStartEvent:
    return ToolExecutionStartEvent(
        tool_call_id=call.id, tool_name=name or call.name, args=call.arguments
    )


def tool_update(call: ToolCall) -> ToolExecutionUpdateEvent:
    return ToolExecutionUpdateEvent(
        tool_call_id=call.id, tool_name=call.name, args=call.arguments, partial_result=result(call)
    )


def end(call: ToolCall) -> ToolExecutionEndEvent:
    return ToolExecutionEndEvent(
        tool_call_id=call.id, tool_name=call.name, result=result(call), is_error=False
    )


def good_events(a1: AssistantMessage = A1, a2: AssistantMessage = A2) -> list[Any]:
    """0 agent_start, 1 turn_start, 2-3 prompt, 4-6 a1, 7-8 starts, 9 update c1, 10-11 ends,
    12-15 results, 16 turn_end, 17 turn_start, 18-20 a2, 21 turn_end, 22 agent_end."""
    return [
        AgentStartEvent(),
        TurnStartEvent(),
        *pair(U),
        *streamed(a1),
        start(C1),
        start(C2),
        tool_update(C1),
        end(C1),
        end(C2),
        *pair(R1),
        *pair(R2),
        TurnEndEvent(message=a1, tool_results=[R1, R2]),
        TurnStartEvent(),
        *streamed(a2),
        TurnEndEvent(message=a2, tool_results=[]),
        AgentEndEvent(messages=[U, a1, R1, R2, a2], reason="completed"),
    ]


GOOD_MESSAGES = [U, A1, R1, R2, A2]


def test_the_good_run_passes() -> None:
    summary = check_run(good_events(), GOOD_MESSAGES, model_contexts=[[U], [U, A1, R1, R2]])
    assert summary.turns == 2
    assert summary.reason == "completed"
    assert summary.created == GOOD_MESSAGES
    assert summary.last_message == A2


# --- breaking it, one rule at a time --------------------------------------------------------

Case = Callable[[], tuple[list[Any], Any, list[Any] | None]]
"""Builds (events, the offending event or the index it is expected at, returned messages)."""


def insert(events: list[Any], at: int, *new: Any) -> list[Any]:
    return [*events[:at], *new, *events[at:]]


def drop(events: list[Any], *indices: int) -> list[Any]:
    return [e for i, e in enumerate(events) if i not in indices]


def replace(events: list[Any], at: int, new: Any) -> list[Any]:
    return [*events[:at], new, *events[at + 1 :]]


def case_first() -> tuple[list[Any], Any, None]:
    events = drop(good_events(), 0)
    return events, events[0], None


def case_start_once() -> tuple[list[Any], Any, None]:
    extra = AgentStartEvent()
    return insert(good_events(), 4, extra), extra, None


def case_turn_start_second() -> tuple[list[Any], Any, None]:
    events = drop(good_events(), 1)
    return events, events[1], None


def case_last_event_after_end() -> tuple[list[Any], Any, None]:
    extra = TurnStartEvent()
    return [*good_events(), extra], extra, None


def case_last_missing() -> tuple[list[Any], Any, None]:
    events = good_events()[:-1]
    return events, len(events), None


def case_last_twice() -> tuple[list[Any], Any, None]:
    events = good_events()
    extra = AgentEndEvent(messages=GOOD_MESSAGES)
    return [*events, extra], extra, None


def case_nested_turn() -> tuple[list[Any], Any, None]:
    events = drop(good_events(), 16)  # the first turn_end
    return events, events[16], None


def case_turn_end_unopened() -> tuple[list[Any], Any, None]:
    extra = TurnEndEvent(message=A1, tool_results=[R1, R2])
    return insert(good_events(), 17, extra), extra, None


def case_unclosed_turn() -> tuple[list[Any], Any, None]:
    events = drop(good_events(), 21)
    return events, events[21], None


def case_unclosed_turn_at_the_end() -> tuple[list[Any], Any, None]:
    events = good_events()[:21]  # stops inside the second turn
    return events, 17, None


def case_outside_turn() -> tuple[list[Any], Any, None]:
    extra = pair(U2)
    return insert(good_events(), 17, *extra), extra[0], None


def case_tool_event_outside_turn() -> tuple[list[Any], Any, None]:
    extra = start(C1)
    return insert(good_events(), 17, extra), extra, None


def case_no_assistant() -> tuple[list[Any], Any, None]:
    events = drop(good_events(), 18, 19, 20)
    return events, events[18], None


def case_two_assistants() -> tuple[list[Any], Any, None]:
    extra = streamed(assistant(text="again"))
    return insert(good_events(), 21, *extra), extra[0], None


def case_turn_end_message() -> tuple[list[Any], Any, None]:
    wrong = TurnEndEvent(message=A1, tool_results=[])
    return replace(good_events(), 21, wrong), wrong, None


def case_nested_message() -> tuple[list[Any], Any, None]:
    extra = MessageStartEvent(message=U2)
    return insert(good_events(), 3, extra), extra, None


def case_end_unopened() -> tuple[list[Any], Any, None]:
    extra = MessageEndEvent(message=U)
    return insert(good_events(), 4, extra), extra, None


def case_end_other_message() -> tuple[list[Any], Any, None]:
    wrong = MessageEndEvent(message=U2)
    return replace(good_events(), 3, wrong), wrong, None


def case_end_other_role() -> tuple[list[Any], Any, None]:
    wrong = MessageEndEvent(message=U)
    return replace(good_events(), 20, wrong), wrong, None


def case_interleaved() -> tuple[list[Any], Any, None]:
    extra = TurnStartEvent()
    return insert(good_events(), 5, extra), extra, None


def case_update_outside() -> tuple[list[Any], Any, None]:
    extra = update(A1)
    return insert(good_events(), 7, extra), extra, None


def case_update_in_user_message() -> tuple[list[Any], Any, None]:
    extra = update(A1)
    return insert(good_events(), 3, extra), extra, None


def case_partial_outside() -> tuple[list[Any], Any, None]:
    extra = OutputPartialEvent(output={"x": 1})
    return insert(good_events(), 7, extra), extra, None


def case_partial_in_user_message() -> tuple[list[Any], Any, None]:
    extra = OutputPartialEvent(output={"x": 1})
    return insert(good_events(), 3, extra), extra, None


def case_compacted_after_the_assistant_message() -> tuple[list[Any], Any, None]:
    extra = ContextCompactedEvent(reason="budget")
    return insert(good_events(), 7, extra), extra, None


def case_compacted_with_fewer_indices() -> tuple[list[Any], Any, None]:
    extra = ContextCompactedEvent(dropped=[U], indices=[], kept=1)
    return insert(good_events(), 4, extra), extra, None


def case_compacted_with_unordered_indices() -> tuple[list[Any], Any, None]:
    extra = ContextCompactedEvent(dropped=[U, U], indices=[3, 1], kept=1)
    return insert(good_events(), 4, extra), extra, None


def test_a_compaction_before_the_assistant_message_is_good() -> None:
    event = ContextCompactedEvent(dropped=[U, U], indices=[0, 2], kept=3)
    summary = check_run(insert(good_events(), 4, event), GOOD_MESSAGES)
    assert summary.reason == "completed" and summary.events == len(good_events()) + 1


def case_unclosed_message() -> tuple[list[Any], Any, None]:
    events = drop(good_events(), 20)
    return events, events[20], None


def case_unclosed_message_at_the_end() -> tuple[list[Any], Any, None]:
    return good_events()[:20], 18, None


def case_unknown_call() -> tuple[list[Any], Any, None]:
    stray = ToolCall(id="c9", name="add", arguments={})
    extra = start(stray)
    return insert(good_events(), 11, extra), extra, None


def case_call_from_another_turn() -> tuple[list[Any], Any, None]:
    extra = start(C1)
    return insert(good_events(), 21, extra), extra, None


def case_call_mismatch_name() -> tuple[list[Any], Any, None]:
    wrong = start(C1, name="sub")
    return replace(good_events(), 7, wrong), wrong, None


def case_call_mismatch_args() -> tuple[list[Any], Any, None]:
    wrong = ToolExecutionStartEvent(tool_call_id="c1", tool_name="add", args={"a": 99})
    return replace(good_events(), 7, wrong), wrong, None


def case_start_twice() -> tuple[list[Any], Any, None]:
    extra = start(C2)
    return insert(good_events(), 9, extra), extra, None


def case_end_without_start() -> tuple[list[Any], Any, None]:
    events = drop(good_events(), 7, 9)  # c1's start and update
    return events, events[8], None


def case_end_twice() -> tuple[list[Any], Any, None]:
    extra = end(C1)
    return insert(good_events(), 11, extra), extra, None


def case_tool_update_outside() -> tuple[list[Any], Any, None]:
    extra = tool_update(C2)
    return insert(good_events(), 12, extra), extra, None


def requested(call: ToolCall) -> ApprovalRequestedEvent:
    return ApprovalRequestedEvent(
        tool_call_id=call.id, tool_name=call.name, args=call.arguments, reason="why"
    )


def decided(call: ToolCall) -> ApprovalDecidedEvent:
    return ApprovalDecidedEvent(tool_call_id=call.id, tool_name=call.name, approved=True)


def approved_events() -> list[Any]:
    """good_events with C1 asked for approval and approved: 9 requested, 10 decided (after
    both starts), 11 the update of C1, 12-13 ends."""
    return insert(good_events(), 9, requested(C1), decided(C1))


def test_a_run_with_an_approval_passes() -> None:
    summary = check_run(approved_events(), GOOD_MESSAGES)
    assert summary.turns == 2 and summary.reason == "completed"


def case_request_before_start() -> tuple[list[Any], Any, None]:
    extra = requested(C1)
    return insert(good_events(), 7, extra), extra, None


def case_request_after_end() -> tuple[list[Any], Any, None]:
    extra = requested(C2)
    return insert(good_events(), 12, extra), extra, None


def case_request_twice() -> tuple[list[Any], Any, None]:
    extra = requested(C1)
    return insert(approved_events(), 11, extra), extra, None


def case_decided_unrequested() -> tuple[list[Any], Any, None]:
    extra = decided(C2)
    return insert(good_events(), 9, extra), extra, None


def case_decided_twice() -> tuple[list[Any], Any, None]:
    extra = decided(C1)
    return insert(approved_events(), 11, extra), extra, None


def case_ended_undecided() -> tuple[list[Any], Any, None]:
    # C2 asked after both starts, never decided: its end (then at #12) breaks the rule
    return insert(good_events(), 9, requested(C2)), 12, None


def case_update_before_decision() -> tuple[list[Any], Any, None]:
    # C1 asked, and its update (then at #10) comes before any decision
    return insert(good_events(), 9, requested(C1)), 10, None


def case_result_before_end() -> tuple[list[Any], Any, None]:
    events = good_events()
    moved = events[11]  # c2's end, moved after its result message
    events = drop(events, 11)
    events = insert(events, 15, moved)
    return events, events[13], None


def case_result_twice() -> tuple[list[Any], Any, None]:
    extra = pair(R2)
    return insert(good_events(), 16, *extra), extra[0], None


def case_orphan_result() -> tuple[list[Any], Any, None]:
    extra = pair(U2)
    return insert(good_events(), 16, *extra), extra[0], None


def case_result_of_no_call() -> tuple[list[Any], Any, None]:
    stray = result_message(ToolCall(id="c9", name="add"))
    extra = pair(stray)
    return insert(good_events(), 16, *extra), extra[0], None


def case_unfinished() -> tuple[list[Any], Any, None]:
    events = drop(good_events(), 11, 14, 15)  # c2 has a start but no end and no result
    events = replace(events, 13, TurnEndEvent(message=A1, tool_results=[R1]))
    return events, events[13], None


def case_unfinished_without_result() -> tuple[list[Any], Any, None]:
    events = drop(good_events(), 14, 15)  # c2 ended but has no result message
    events = replace(events, 14, TurnEndEvent(message=A1, tool_results=[R1]))
    return events, events[14], None


def case_agent_end_messages() -> tuple[list[Any], Any, None]:
    wrong = AgentEndEvent(messages=[U, A1, R1, A2], reason="completed")
    return replace(good_events(), 22, wrong), wrong, None


def case_agent_end_messages_order() -> tuple[list[Any], Any, None]:
    wrong = AgentEndEvent(messages=[U, A1, R2, R1, A2], reason="completed")
    return replace(good_events(), 22, wrong), wrong, None


def case_returned() -> tuple[list[Any], Any, list[Any]]:
    events = good_events()
    return events, events[22], [U, A1, R1, R2]


def case_unanswered() -> tuple[list[Any], Any, None]:
    events = drop(good_events(), 8, 11, 14, 15)  # c2 never started nor answered
    events = replace(events, 12, TurnEndEvent(message=A1, tool_results=[R1]))
    return events, events[12], None


def case_unanswered_length() -> tuple[list[Any], Any, None]:
    a1 = assistant(C1, C2, stop="length")
    events = drop(good_events(a1), 8, 11, 14, 15)
    events = replace(events, 12, TurnEndEvent(message=a1, tool_results=[R1]))
    events = replace(events, 18, AgentEndEvent(messages=[U, a1, R1, A2]))
    return events, events[12], None


def case_answered_failed() -> tuple[list[Any], Any, None]:
    a1 = assistant(C1, C2, stop="error")
    events = good_events(a1)
    return events, events[7], None


def case_source_order_starts() -> tuple[list[Any], Any, None]:
    events = good_events()
    events[7], events[8] = events[8], events[7]
    return events, events[8], None


def case_source_order_results() -> tuple[list[Any], Any, None]:
    events = good_events()
    events[12:16] = [*pair(R2), *pair(R1)]
    return events, events[14], None


def case_result_mismatch() -> tuple[list[Any], Any, None]:
    other = result_message(C1, text="something else")
    events = good_events()
    events[12:14] = pair(other)
    return events, events[12], None


def case_result_mismatch_is_error() -> tuple[list[Any], Any, None]:
    other = R1.model_copy(update={"is_error": True})
    events = good_events()
    events[12:14] = pair(other)
    return events, events[12], None


def case_turn_end_results() -> tuple[list[Any], Any, None]:
    wrong = TurnEndEvent(message=A1, tool_results=[R2, R1])
    return replace(good_events(), 16, wrong), wrong, None


def case_final_stop_reason() -> tuple[list[Any], Any, None]:
    a2 = assistant(text="done", stop="pending")
    events = good_events(a2=a2)
    return events, events[20], None


def case_end_reason_error() -> tuple[list[Any], Any, None]:
    wrong = AgentEndEvent(messages=GOOD_MESSAGES, reason="error")
    return replace(good_events(), 22, wrong), wrong, None


def case_end_reason_after_failure() -> tuple[list[Any], Any, None]:
    a2 = assistant(text="", stop="error")
    events = good_events(a2=a2)
    wrong = AgentEndEvent(messages=[U, A1, R1, R2, a2], reason="completed")
    return replace(events, 22, wrong), wrong, None


def case_end_reason_after_abort() -> tuple[list[Any], Any, None]:
    a2 = assistant(text="", stop="aborted")
    events = good_events(a2=a2)
    wrong = AgentEndEvent(messages=[U, A1, R1, R2, a2], reason="error")
    return replace(events, 22, wrong), wrong, None


@dataclass
class Note:
    """A custom message: any object with a string role."""

    role: Any = "note"
    text: str = ""


@dataclass
class FakeAssistant:
    role: str = "assistant"
    stop_reason: str = "stop"


def case_string_message() -> tuple[list[Any], Any, None]:
    # a steering poll returned "hello": the loop injected its letters as messages
    extra = [e for letter in "hello" for e in pair(letter)]
    return insert(good_events(), 4, *extra), extra[0], None


def case_none_message() -> tuple[list[Any], Any, None]:
    wrong = MessageEndEvent(message=None)
    return replace(good_events(), 3, wrong), wrong, None


def case_number_message() -> tuple[list[Any], Any, None]:
    extra = pair(42)
    return insert(good_events(), 4, *extra), extra[0], None


def case_dict_without_role() -> tuple[list[Any], Any, None]:
    extra = pair({"content": "hi"})
    return insert(good_events(), 4, *extra), extra[0], None


def case_role_not_a_string() -> tuple[list[Any], Any, None]:
    extra = pair(Note(role=None))
    return insert(good_events(), 4, *extra), extra[0], None


def case_custom_assistant() -> tuple[list[Any], Any, None]:
    events = good_events()
    events[18:21] = pair(FakeAssistant())
    return events, events[18], None


def case_assistant_ends_as_custom() -> tuple[list[Any], Any, None]:
    wrong = MessageEndEvent(message=FakeAssistant())
    return replace(good_events(), 20, wrong), wrong, None


def case_unknown_stop_reason() -> tuple[list[Any], Any, None]:
    a2 = A2.model_copy(update={"stop_reason": "finished"})  # not validated: any string fits
    events = good_events(a2=a2)
    return events, events[20], None


EVENT_CASES: dict[str, list[Case]] = {
    "R1.first": [case_first],
    "R1.start_once": [case_start_once],
    "R1.turn_start_second": [case_turn_start_second],
    "R1.last": [case_last_event_after_end, case_last_missing, case_last_twice],
    "R2.nested_turn": [case_nested_turn],
    "R2.turn_end_unopened": [case_turn_end_unopened],
    "R2.unclosed_turn": [case_unclosed_turn, case_unclosed_turn_at_the_end],
    "R2.outside_turn": [case_outside_turn, case_tool_event_outside_turn],
    "R2.one_assistant": [case_no_assistant, case_two_assistants],
    "R2.turn_end_message": [case_turn_end_message],
    "R3.nested_message": [case_nested_message],
    "R3.end_unopened": [case_end_unopened, case_end_other_message, case_end_other_role],
    "R3.interleaved": [case_interleaved],
    "R3.update_outside": [case_update_outside, case_update_in_user_message],
    "R3.partial_outside": [case_partial_outside, case_partial_in_user_message],
    "K.compacted_outside": [case_compacted_after_the_assistant_message],
    "K.compacted_data": [case_compacted_with_fewer_indices, case_compacted_with_unordered_indices],
    "R3.unclosed_message": [case_unclosed_message, case_unclosed_message_at_the_end],
    "R3.not_a_message": [
        case_string_message,
        case_none_message,
        case_number_message,
        case_dict_without_role,
        case_role_not_a_string,
        case_custom_assistant,
        case_assistant_ends_as_custom,
    ],
    "R4.unknown_call": [case_unknown_call, case_call_from_another_turn],
    "R4.call_mismatch": [case_call_mismatch_name, case_call_mismatch_args],
    "R4.start_twice": [case_start_twice],
    "R4.end_without_start": [case_end_without_start],
    "R4.end_twice": [case_end_twice],
    "R4.update_outside": [case_tool_update_outside],
    "R4.result_before_end": [case_result_before_end],
    "R4.result_twice": [case_result_twice],
    "R4.orphan_result": [case_orphan_result, case_result_of_no_call],
    "R4.unfinished": [case_unfinished, case_unfinished_without_result],
    "R5.agent_end_messages": [case_agent_end_messages, case_agent_end_messages_order],
    "R5.returned": [case_returned],
    "R5.unanswered": [case_unanswered, case_unanswered_length],
    "R5.answered_failed": [case_answered_failed],
    "T.source_order": [case_source_order_starts, case_source_order_results],
    "A.request_outside": [case_request_before_start, case_request_after_end],
    "A.request_twice": [case_request_twice],
    "A.decided_unrequested": [case_decided_unrequested],
    "A.decided_twice": [case_decided_twice],
    "A.undecided": [case_ended_undecided],
    "A.ran_undecided": [case_update_before_decision],
    "T.result_mismatch": [case_result_mismatch, case_result_mismatch_is_error],
    "T.turn_end_results": [case_turn_end_results],
    "T.final_stop_reason": [case_final_stop_reason, case_unknown_stop_reason],
    "T.end_reason": [
        case_end_reason_error,
        case_end_reason_after_failure,
        case_end_reason_after_abort,
    ],
}

EVENT_PARAMS = [
    pytest.param(rule, case, id=f"{rule}-{case.__name__}")
    for rule, cases in EVENT_CASES.items()
    for case in cases
]


@pytest.mark.parametrize(("rule", "case"), EVENT_PARAMS)
def test_each_rule_catches_its_violation(rule: str, case: Case) -> None:
    events, culprit, returned = case()
    with pytest.raises(GrammarViolation) as info:
        check_run(events, returned)
    violation = info.value
    assert violation.rule == rule, str(violation)
    expected = culprit if isinstance(culprit, int) else _position(events, culprit)
    assert violation.index == expected, str(violation)
    assert rule in str(violation) and RULES[rule] in str(violation)
    assert f">> #{expected}" in str(violation)


def _position(events: list[Any], culprit: Any) -> int:
    positions = [i for i, e in enumerate(events) if e is culprit]
    assert len(positions) == 1
    return positions[0]


# --- messages that are messages ------------------------------------------------------------


def test_custom_messages_pass_in_both_forms() -> None:
    note = Note(text="a custom message")
    events = insert(good_events(), 4, *pair(note))
    events[-1] = AgentEndEvent(messages=[U, note, A1, R1, R2, A2], reason="completed")
    summary = check_run(events, [U, note, A1, R1, R2, A2])
    assert summary.created[1] is note
    # recorded (JSON) form: the custom message is a dict with a string "role"
    dumped = [json.loads(e.model_dump_json(by_alias=True)) for e in events]
    assert dumped[4]["message"] == {"role": "note", "text": "a custom message"}
    assert check_events(dumped).created[1] == {"role": "note", "text": "a custom message"}


def test_non_messages_are_rejected_in_json_form_too() -> None:
    events, _, _ = case_string_message()
    dumped = [json.loads(e.model_dump_json(by_alias=True)) for e in events]
    assert dumped[4]["message"] == "h"
    with pytest.raises(GrammarViolation) as info:
        check_events(dumped)
    assert info.value.rule == "R3.not_a_message"
    assert info.value.index == 4
    assert ">> #4 message_start(not a message: str 'h')" in str(info.value)


# --- tool order in sequential and parallel mode ---------------------------------------------

SEQUENTIAL_ORDER = [start(C1), end(C1), *pair(R1), start(C2), end(C2), *pair(R2)]
# what an abort answering c2 looked like: c1's result pair waits until c2 has ended
RESULTS_AFTER_ENDS = [start(C1), end(C1), start(C2), end(C2), *pair(R1), *pair(R2)]


def batch_events(tools: list[Any], a1: AssistantMessage = A1) -> list[Any]:
    """good_events with the first turn's tool events (indices 7 on) replaced by ``tools``."""
    return [
        AgentStartEvent(),
        TurnStartEvent(),
        *pair(U),
        *streamed(a1),
        *tools,
        TurnEndEvent(message=a1, tool_results=[R1, R2]),
        TurnStartEvent(),
        *streamed(A2),
        TurnEndEvent(message=A2, tool_results=[]),
        AgentEndEvent(messages=[U, a1, R1, R2, A2], reason="completed"),
    ]


ModeCase = Callable[[], tuple[list[Any], Any, dict[str, Any]]]
"""Builds (events, the offending event, the mode keywords)."""


def case_sequential_abort_order() -> tuple[list[Any], Any, dict[str, Any]]:
    events = batch_events(RESULTS_AFTER_ENDS)
    return events, events[9], {"tool_execution": "sequential"}


def case_sequential_overlap() -> tuple[list[Any], Any, dict[str, Any]]:
    events = good_events()  # c2 starts while c1 runs: parallel, not sequential
    return events, events[8], {"tool_execution": "sequential"}


def case_sequential_tool_in_parallel_config() -> tuple[list[Any], Any, dict[str, Any]]:
    events = batch_events(RESULTS_AFTER_ENDS)
    return events, events[9], {"tool_execution": "parallel", "sequential_tools": {"add"}}


def case_sequential_tool_without_config() -> tuple[list[Any], Any, dict[str, Any]]:
    events = batch_events(RESULTS_AFTER_ENDS)
    return events, events[9], {"sequential_tools": ["add"]}


def case_sequential_length() -> tuple[list[Any], Any, dict[str, Any]]:
    events = batch_events(RESULTS_AFTER_ENDS, a1=assistant(C1, C2, stop="length"))
    return events, events[9], {"tool_execution": "sequential"}


def case_parallel_start_after_result() -> tuple[list[Any], Any, dict[str, Any]]:
    events = batch_events(SEQUENTIAL_ORDER)
    return events, events[11], {"tool_execution": "parallel"}


def case_parallel_result_before_last_end() -> tuple[list[Any], Any, dict[str, Any]]:
    tools = [start(C1), start(C2), end(C1), *pair(R1), end(C2), *pair(R2)]
    events = batch_events(tools)
    return events, events[10], {"tool_execution": "parallel"}


MODE_CASES: dict[str, list[ModeCase]] = {
    "R4.sequential_order": [
        case_sequential_abort_order,
        case_sequential_overlap,
        case_sequential_tool_in_parallel_config,
        case_sequential_tool_without_config,
        case_sequential_length,
    ],
    "R4.parallel_results_after_ends": [
        case_parallel_start_after_result,
        case_parallel_result_before_last_end,
    ],
}

MODE_PARAMS = [
    pytest.param(rule, case, id=f"{rule}-{case.__name__}")
    for rule, cases in MODE_CASES.items()
    for case in cases
]


@pytest.mark.parametrize(("rule", "case"), MODE_PARAMS)
def test_each_mode_rule_catches_its_violation(rule: str, case: ModeCase) -> None:
    events, culprit, keywords = case()
    check_run(events)  # without the mode the order is not checked
    with pytest.raises(GrammarViolation) as info:
        check_run(events, **keywords)
    violation = info.value
    assert violation.rule == rule, str(violation)
    expected = _position(events, culprit)
    assert violation.index == expected, str(violation)
    assert RULES[rule] in str(violation) and f">> #{expected}" in str(violation)


@pytest.mark.parametrize(
    ("tools", "keywords"),
    [
        (SEQUENTIAL_ORDER, {"tool_execution": "sequential"}),
        (SEQUENTIAL_ORDER, {"tool_execution": "parallel", "sequential_tools": {"add"}}),
        (SEQUENTIAL_ORDER, {"sequential_tools": {"add"}}),
        (RESULTS_AFTER_ENDS, {"tool_execution": "parallel"}),
        (RESULTS_AFTER_ENDS, {"tool_execution": "parallel", "sequential_tools": {"other"}}),
        (RESULTS_AFTER_ENDS, {"sequential_tools": {"other"}}),  # parallel, but not checked
        (SEQUENTIAL_ORDER, {"sequential_tools": {"other"}}),
        (SEQUENTIAL_ORDER, {}),
        (RESULTS_AFTER_ENDS, {}),
    ],
)
def test_each_mode_passes_its_own_order(tools: list[Any], keywords: dict[str, Any]) -> None:
    assert check_run(batch_events(tools), **keywords).turns == 2


def test_the_good_run_is_a_parallel_run() -> None:
    check_run(good_events(), GOOD_MESSAGES, tool_execution="parallel")


def test_a_length_message_keeps_the_per_call_order_in_parallel_mode() -> None:
    # the calls of a "length" message never execute: start, end and result call by call
    a1 = assistant(C1, C2, stop="length")
    check_run(batch_events(SEQUENTIAL_ORDER, a1=a1), tool_execution="parallel")
    check_run(batch_events(SEQUENTIAL_ORDER, a1=a1), tool_execution="sequential")


def _broken_rule(check: Callable[[], Any]) -> str:
    with pytest.raises(GrammarViolation) as info:
        check()
    return info.value.rule


def test_mode_keywords_reach_every_entry_point() -> None:
    events = batch_events(RESULTS_AFTER_ENDS)
    dumped = [json.loads(e.model_dump_json(by_alias=True)) for e in events]
    rule = "R4.sequential_order"
    assert _broken_rule(lambda: check_events(dumped, tool_execution="sequential")) == rule
    assert _broken_rule(lambda: check_events(events, sequential_tools=("add",))) == rule
    recorder = EventRecorder()
    for event in events:
        recorder(event)
    recorder.check()
    assert _broken_rule(lambda: recorder.check(tool_execution="sequential")) == rule
    checker = GrammarChecker(tool_execution="sequential")
    checker.feed_all(events[:9])
    with pytest.raises(GrammarViolation) as info:
        checker.feed(events[9])
    assert info.value.rule == rule and info.value.index == 9


def test_mode_keywords_are_checked() -> None:
    with pytest.raises(ValueError, match="tool_execution"):
        GrammarChecker(tool_execution="serial")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequential_tools"):
        GrammarChecker(sequential_tools="add")


def _tool(name: str, mode: Any = None) -> AgentTool:
    return AgentTool(name, name, {"type": "object"}, _add, execution_mode=mode)


def test_sequential_tool_names() -> None:
    tools = [
        _tool("a", "sequential"),
        _tool("b", "parallel"),
        _tool("c"),
        _tool("b", "sequential"),  # a call of "b" runs the first "b": parallel
        _tool("d", "sequential"),
    ]
    assert sequential_tool_names(tools) == frozenset({"a", "d"})
    assert sequential_tool_names([]) == frozenset()


# --- model contexts ----------------------------------------------------------------------


CONTEXT_CASES: list[tuple[str, list[Any], int]] = [
    ("C.unanswered_call", [U, A1, R1], 3),
    ("C.unanswered_call", [U, A1, R1, U2, R2], 3),
    ("C.unanswered_call", [U, assistant(C1, stop="length"), U2], 2),
    ("C.orphan_result", [U, R1], 1),
    ("C.orphan_result", [U, A2, R1], 2),
    ("C.orphan_result", [U, assistant(C1, stop="error"), R1], 2),
    ("C.orphan_result", [U, A1, R1, R2, U2, R1], 5),
    ("C.duplicate_result", [U, A1, R1, R1, R2], 3),
]


@pytest.mark.parametrize(("rule", "messages", "index"), CONTEXT_CASES)
def test_each_context_rule_catches_its_violation(
    rule: str, messages: list[Any], index: int
) -> None:
    with pytest.raises(GrammarViolation) as info:
        check_model_contexts([LlmContext("", messages, [])])
    assert info.value.rule == rule, str(info.value)
    assert info.value.index == index
    assert "model call 0" in str(info.value)


@pytest.mark.parametrize(
    "messages",
    [
        [U],
        [U, A1, R1, R2],
        [U, A1, R2, R1],  # answered, in any order, before anything else
        [U, assistant(C1, stop="error"), U2],  # calls of a failed message are never answered
        [U, assistant(C1, stop="aborted")],
        [U, A1, R1, R2, A2, U2],
    ],
)
def test_valid_contexts_pass(messages: list[Any]) -> None:
    check_model_context(messages)


def test_every_rule_has_a_test() -> None:
    covered = set(EVENT_CASES) | set(MODE_CASES) | {rule for rule, _, _ in CONTEXT_CASES}
    assert covered == set(RULES)


# --- the API ------------------------------------------------------------------------------


def test_incremental_checker_stops_at_the_first_violation() -> None:
    checker = GrammarChecker()
    events = good_events()
    checker.feed_all(events[:5])
    assert not checker.finished
    with pytest.raises(GrammarViolation) as info:
        checker.feed(TurnEndEvent(message=A1))
    assert info.value.rule == "R3.unclosed_message"
    assert info.value.index == 5


def test_events_as_json_dicts_are_accepted() -> None:
    dumped = [json.loads(e.model_dump_json(by_alias=True)) for e in good_events()]
    summary = check_events(dumped)
    assert summary.turns == 2
    dumped[16]["toolResults"] = dumped[16]["toolResults"][::-1]
    with pytest.raises(GrammarViolation) as info:
        check_events(dumped)
    assert info.value.rule == "T.turn_end_results"


def test_no_events_at_all() -> None:
    with pytest.raises(GrammarViolation) as info:
        check_events([])
    assert info.value.rule == "R1.first"


def test_violation_message_shows_the_surrounding_events() -> None:
    events, _, _ = case_turn_end_results()
    with pytest.raises(GrammarViolation) as info:
        check_events(events)
    text = str(info.value)
    assert ">> #16 turn_end(assistant toolUse calls=c1,c2; results=[c2,c1])" in text
    assert "   #15 message_end(toolResult c2)" in text
    assert "   #17 turn_start" in text
    assert isinstance(info.value, AssertionError)


ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


async def _add(call_id: str, args: dict[str, int], signal: Any, on_update: Any) -> AgentToolResult:
    on_update(AgentToolResult(content=[TextContent(text="adding")]))
    return AgentToolResult(content=[TextContent(text=str(args["a"] + args["b"]))])


ADD = AgentTool("add", "Add two integers", ADD_SCHEMA, _add)


@pytest.mark.anyio
async def test_run_checked_with_the_faux_provider() -> None:
    faux = FauxProvider(
        [
            faux_response(
                tool_calls=[
                    faux_tool_call("add", {"a": 1, "b": 2}),
                    faux_tool_call("add", {"a": 1}),
                    faux_tool_call("missing"),
                ]
            ),
            faux_response("The sum is 3."),
        ]
    )
    context = AgentContext(tools=[ADD])
    run = await run_checked(
        [UserMessage(content="add")], context, AgentLoopConfig(model=Model(id="m")), stream_fn=faux
    )
    assert run.summary.reason == "completed"
    assert run.summary.turns == 2
    assert [getattr(m, "role", None) for m in run.messages] == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "toolResult",
        "assistant",
    ]
    assert run.transitions[0].trigger == "start"
    assert len(faux.calls) == 2


SEQ_ADD = AgentTool(
    "seq_add", "Add, one call at a time", ADD_SCHEMA, _add, execution_mode="sequential"
)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("mode", "tools", "check_tool_order", "expected"),
    [
        ("parallel", [ADD], True, ("parallel", frozenset())),
        ("sequential", [ADD], True, ("sequential", frozenset())),
        ("parallel", [ADD, SEQ_ADD], True, ("parallel", frozenset({"seq_add"}))),
        ("sequential", [SEQ_ADD], False, (None, frozenset())),
    ],
)
async def test_run_checked_checks_the_tool_order_of_its_config(
    monkeypatch: pytest.MonkeyPatch,
    mode: Any,
    tools: list[AgentTool],
    check_tool_order: bool,
    expected: tuple[Any, frozenset[str]],
) -> None:
    seen: list[tuple[Any, frozenset[str]]] = []

    def spy(events: Any, messages: Any = None, **keywords: Any) -> Any:
        seen.append((keywords["tool_execution"], frozenset(keywords["sequential_tools"])))
        return check_run(events, messages, **keywords)

    monkeypatch.setattr(testing, "check_run", spy)
    faux = FauxProvider(
        [
            faux_response(
                tool_calls=[
                    faux_tool_call(tools[-1].name, {"a": 1, "b": 2}),
                    faux_tool_call(tools[-1].name, {"a": 3, "b": 4}),
                ]
            ),
            faux_response("7"),
        ]
    )
    run = await run_checked(
        [UserMessage(content="add")],
        AgentContext(tools=tools),
        AgentLoopConfig(model=Model(id="m"), tool_execution=mode),
        stream_fn=faux,
        check_tool_order=check_tool_order,
    )
    assert seen == [expected]
    assert run.summary.reason == "completed"


@pytest.mark.anyio
async def test_recorder_catches_a_broken_run() -> None:
    faux = FauxProvider([faux_response("hello")])
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [UserMessage(content="hi")],
        AgentContext(),
        AgentLoopConfig(model=Model(id="m")),
        recorder,
        stream_fn=faux,
    )
    recorder.check(messages, model_contexts=faux.calls)
    assert recorder.types()[0] == "agent_start" and recorder.types()[-1] == "agent_end"
    with pytest.raises(GrammarViolation) as info:
        recorder.check(messages[:-1])
    assert info.value.rule == "R5.returned"


def test_a_recorder_on_an_agent_holds_one_run_per_prompt() -> None:
    """Subscribed to an Agent, a recorder keeps every prompt's run: ``runs()`` splits them, each
    checks on its own, and ``check()`` of the whole says it holds several runs."""
    from agentcore_fsm import Agent

    faux = FauxProvider([faux_response("one"), faux_response("two")])
    agent = Agent(model=Model(id="m"), stream_fn=faux)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    agent.prompt_sync("first")
    first = list(agent.messages)
    agent.prompt_sync("second")
    runs = recorder.runs()
    assert [len(run) for run in runs] == [len(recorder.events) // 2] * 2
    assert [e for run in runs for e in run] == recorder.events
    check_run(runs[0], first)
    check_run(runs[1], agent.messages[len(first) :])
    with pytest.raises(ValueError) as info:
        recorder.check(agent.messages)
    assert str(info.value) == (
        "this EventRecorder holds 2 runs (it keeps events until clear()): check each of "
        "recorder.runs() with check_run, or clear() it between runs"
    )
    recorder.clear()
    assert recorder.runs() == []


# --- the testing guide (docs/testing.md) ----------------------------------------------------

DOC_TEXT = section("Testing your agent")
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
TEXT_BLOCK = re.compile(r"^```text\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCK.findall(DOC_TEXT))))
def test_testing_docs_examples_run(index: int, tmp_path: Path) -> None:
    text = DOC_TEXT
    code = PYTHON_BLOCK.findall(text)[index]
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    if "print(violation)" in code:  # the violation shown in the docs is the one printed
        assert proc.stdout.strip() == TEXT_BLOCK.findall(text)[0].strip()
