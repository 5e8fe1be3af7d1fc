"""The event grammar (docs/reference.md#event-grammar): its rules, the violation a broken one
raises, a checked run's summary, and the check of the contexts handed to the model.

The checker of a run's events is :class:`~agentcore_fsm.devtools.checker.GrammarChecker`; the
helpers a test uses (``run_checked``, ``EventRecorder``, ``check_run`` ...) are all importable from
:mod:`agentcore_fsm.devtools.testing`.

What is checked
---------------
Every rule has a stable id (the keys of :data:`RULES`). The first violation raises
:class:`GrammarViolation` (an ``AssertionError``) carrying ``rule``, ``index`` (the position of
the offending event, or of the offending message in a model context) and a message that shows the
events around it.

* ``R1.*`` to ``R5.*`` are the five rules of the event grammar, split into one id per way of
  breaking them (``R1.first`` "agent_start is the first event", ``R2.nested_turn`` "turns never
  nest", ...).
* ``R3.not_a_message``: a ``message_start``/``message_end`` carries a message: a
  :class:`~agentcore_fsm.UserMessage`, :class:`~agentcore_fsm.AssistantMessage` or
  :class:`~agentcore_fsm.ToolResultMessage`, or a custom message (an object with a string
  ``role`` attribute; in the JSON form of a recording, a dict with a string ``"role"``). A string,
  ``None``, a number or a dict without a role is not a message (a steering poll that returns
  ``"hello"`` instead of a list of messages would otherwise inject five one-letter "messages").
  A message with the role "assistant" must be an :class:`~agentcore_fsm.AssistantMessage`.
* ``R4.sequential_order`` and ``R4.parallel_results_after_ends`` check the order of a tool batch
  in its execution mode, which the events alone cannot tell: they are checked only when the mode
  is given (the ``tool_execution`` and ``sequential_tools`` keywords of :func:`check_run`,
  :func:`check_events`, :meth:`EventRecorder.check` and :class:`GrammarChecker`;
  :func:`run_checked` derives both from the run's config and tools). A batch is sequential when
  ``tool_execution="sequential"`` or one of its calls names a tool of ``sequential_tools`` (the
  tools with ``execution_mode="sequential"``); otherwise it is parallel when
  ``tool_execution="parallel"``, and unchecked when ``tool_execution`` is ``None``.

  - Sequential: calls run one after another, each finished through its result message pair
    before the next starts, also when an abort or a failure answers the remaining calls: no
    ``tool_execution_start`` while an earlier call of the batch has no result message yet.
  - Parallel: every call is started (and immediate errors ended) in source order, the prepared
    calls run concurrently, and the result messages follow in source order once all have ended:
    no result message while a started call has no ``tool_execution_end``, and no
    ``tool_execution_start`` after a result message. The calls of a "length" message are never
    executed (each gets its start, end and error result in turn), so this rule skips them.
* ``T.*`` are transcript invariants (docs/reference.md#t-transcript-invariants):
  ``turn_end.tool_results`` is the turn's results in source order, a result message carries the
  result of its ``tool_execution_end``, tool calls start and are answered in source order, an
  assistant message ends with a final stop reason ("stop", "length", "toolUse", "error" or
  "aborted"), and ``agent_end.reason`` agrees with the last assistant message.
* ``C.*`` check a context handed to the model (an :class:`~agentcore_fsm.LlmContext` or its
  message list): every tool call of an answerable assistant message (stop reason "toolUse",
  "stop" or "length") is answered by exactly one tool result, right after it and before any other
  message; no tool result answers anything else. Calls of an "error"/"aborted" message are never
  answered (docs/reference.md#error-and-aborted-messages).

Decisions this checker makes (documented here for users):

* Between a ``message_start`` and its ``message_end`` only ``message_update`` may occur (message
  pairs are adjacent except for streaming updates): anything else breaks R3.
* A turn's messages before its assistant message are injected messages (prompts, steering,
  follow-ups: any role). After the assistant message has ended the turn holds only tool events
  and the result messages of that message's calls (``R4.orphan_result`` otherwise).
* A ``message_end`` matches its ``message_start`` by role; for non-assistant messages it must be
  the same message (an assistant message may be a partial at its start and the final at its end).
* Messages are compared with ``==`` (pydantic compares fields; custom objects their own ``__eq__``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentcore_fsm.core.config import LlmContext
from agentcore_fsm.core.describe import (
    LIBRARY_MESSAGES,
    describe_event,
    describe_message,
    message_label,
    role_of,
)
from agentcore_fsm.core.events import AGENT_EVENT_ADAPTER
from agentcore_fsm.core.messages import AgentMessage, AssistantMessage, ToolCall

__all__ = [
    "ANSWERABLE",
    "FINAL_STOP_REASONS",
    "RULES",
    "GrammarViolation",
    "RunSummary",
    "as_event",
    "check_model_context",
    "check_model_contexts",
    "count_noun",
    "event_line",
    "event_window",
    "is_message",
]

RULES: dict[str, str] = {
    # rule 1: start and end
    "R1.first": "agent_start is the first event",
    "R1.start_once": "agent_start occurs exactly once",
    "R1.turn_start_second": "turn_start is the second event",
    "R1.last": "agent_end is the last event and occurs exactly once",
    # rule 2
    "R2.nested_turn": "turns never nest: no turn_start while a turn is open",
    "R2.turn_end_unopened": "every turn_end closes an open turn",
    "R2.unclosed_turn": "every turn_start has its turn_end (equal counts)",
    "R2.outside_turn": "message and tool events happen only inside a turn",
    "R2.one_assistant": "every turn has exactly one assistant message",
    "R2.turn_end_message": "turn_end.message is the turn's assistant message",
    # rule 3
    "R3.nested_message": "no message_start while another message is open",
    "R3.end_unopened": "every message_end closes the open message_start (same role/message)",
    "R3.interleaved": (
        "only message_update (and output_partial) may come between a message_start and its "
        "message_end"
    ),
    "R3.partial_outside": (
        "output_partial only while an assistant message streams (docs/output.md)"
    ),
    "R3.update_outside": "message_update only between an assistant message's start and end",
    "R3.unclosed_message": "every message_start is followed by its message_end",
    "R3.not_a_message": (
        "message_start/message_end carry a message (a library message, or a custom one with a "
        "string role); an assistant-role message is an AssistantMessage"
    ),
    # rule 4
    "R4.unknown_call": "tool_execution_start names a call of the turn's ended assistant message",
    "R4.call_mismatch": "tool events carry the call's tool name (and start its raw arguments)",
    "R4.start_twice": "a tool call gets one tool_execution_start",
    "R4.end_without_start": "tool_execution_end comes after the call's tool_execution_start",
    "R4.end_twice": "a tool call gets exactly one tool_execution_end",
    "R4.update_outside": "tool_execution_update only between the call's start and end",
    "R4.result_before_end": "a call's result message comes after its tool_execution_end",
    "R4.result_twice": "a call gets exactly one result message pair",
    "R4.orphan_result": "after the assistant message, a turn holds only results of its calls",
    "R4.unfinished": "a started tool call ends and gets its result message inside its turn",
    "R4.sequential_order": (
        "in sequential mode each call's tool_execution_end is followed by its result message "
        "pair before the next call's tool_execution_start"
    ),
    "R4.parallel_results_after_ends": (
        "in parallel mode the batch's result messages come after every call's "
        "tool_execution_start and tool_execution_end"
    ),
    # rule 5
    "R5.agent_end_messages": "agent_end.messages equals every message created by the run, in order",
    "R5.returned": "the messages returned by the run equal agent_end.messages",
    "R5.unanswered": "every call of a toolUse/stop/length message is answered in its turn",
    "R5.answered_failed": "calls of an error/aborted assistant message are never run or answered",
    # approval of tool calls
    "A.request_outside": (
        "approval_requested comes after its call's tool_execution_start and before its "
        "tool_execution_end"
    ),
    "A.request_twice": "a tool call is asked for approval at most once",
    "A.decided_unrequested": "approval_decided follows its call's approval_requested",
    "A.decided_twice": "every approval_requested gets exactly one approval_decided",
    "A.undecided": "a call asked for approval is decided before its tool_execution_end",
    "A.ran_undecided": "no tool_execution_update of a call asked for approval before its decision",
    # transcript invariants
    "T.source_order": "tool calls start, and their result messages follow, in source order",
    "T.result_mismatch": "a result message carries its tool_execution_end's result and is_error",
    "T.turn_end_results": "turn_end.tool_results is the turn's result messages in source order",
    "T.final_stop_reason": (
        "an assistant message ends with a final stop reason (stop, length, toolUse, error or "
        "aborted)"
    ),
    "T.end_reason": "agent_end.reason agrees with the last turn's assistant message",
    # context compaction (docs/policies-models.md)
    "K.compacted_outside": (
        "context_compacted comes inside a turn, before the turn's assistant message"
    ),
    "K.compacted_data": (
        "context_compacted names each dropped message once: as many ascending indices as "
        "dropped messages"
    ),
    # model contexts
    "C.unanswered_call": "a model context answers every call of an answerable assistant message",
    "C.orphan_result": "a tool result in a model context directly follows the call it answers",
    "C.duplicate_result": "a tool call is answered once in a model context",
}

ANSWERABLE = frozenset({"toolUse", "stop", "length"})
FINAL_STOP_REASONS = frozenset({"stop", "length", "toolUse", "error", "aborted"})
_WINDOW = 4


class GrammarViolation(AssertionError):
    """A rule of :data:`RULES` was broken.

    ``rule`` is the rule's id, ``index`` the position of the offending event (or message, for
    ``C.*`` rules), ``detail`` what was wrong, and ``context`` the summary lines of the events (or
    messages) around it, the offending one marked with ``>>``.
    """

    def __init__(self, rule: str, index: int, detail: str, context: Sequence[str] = ()) -> None:
        self.rule = rule
        self.index = index
        self.detail = detail
        self.context = list(context)
        text = f"{rule} ({RULES.get(rule, '?')}) broken at #{index}: {detail}"
        if self.context:
            text += "\n" + "\n".join(self.context)
        super().__init__(text)


# --- describing events --------------------------------------------------------------------


def is_message(message: Any) -> bool:
    """A message of this library, or a custom one: an object with a string ``role`` (a dict
    with a string ``"role"`` in the JSON form of a recording)."""
    if isinstance(message, LIBRARY_MESSAGES):
        return True
    return isinstance(role_of(message), str)


def event_line(event: Any) -> str:
    """An event as a violation's window shows it: :func:`describe_event` with the ids."""
    return describe_event(event, ids=True)


def event_window(items: Sequence[Any], index: int, describe: Callable[[Any], str]) -> list[str]:
    lo, hi = max(0, index - _WINDOW), min(len(items), index + _WINDOW + 1)
    lines = []
    for i in range(lo, hi):
        mark = ">>" if i == index else "  "
        lines.append(f"{mark} #{i} {describe(items[i])}")
    if index >= len(items):
        lines.append(f">> #{index} (end of events)")
    return lines


def as_event(event: Any) -> Any:
    if isinstance(event, dict):
        return AGENT_EVENT_ADAPTER.validate_python(event)
    return event


def count_noun(n: int, noun: str) -> str:
    """``1 event``, ``2 events``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


_SUMMARY_MESSAGES = 20


@dataclass(repr=False)
class RunSummary:
    """What a checked run looked like: the number of ``events`` and ``turns``, the messages it
    ``created`` (in order, equal to ``agent_end.messages``), how it ended (``reason``, the
    ``agent_end`` reason) and ``last_message`` (the assistant message of the last turn).

    ``print(summary)`` shows the run, one line per created message (the first and last 10 of a
    longer run)::

        run: 29 events, 2 turns, ended completed
          user: "Double 21."
          assistant: "Doubling." [toolUse: double(n=21)]
          toolResult call_1 double: "42"
          assistant: "The answer is 42."

    ``repr()`` is one bounded line: the counts, the reason and the last message.
    """

    events: int
    turns: int
    created: list[AgentMessage]
    reason: str | None
    last_message: Any

    def __str__(self) -> str:
        ended = f"ended {self.reason}" if self.reason is not None else "no end reason"
        lines = [
            f"run: {count_noun(self.events, 'event')}, {count_noun(self.turns, 'turn')}, {ended}"
        ]
        created = self.created
        half = _SUMMARY_MESSAGES // 2
        if len(created) > _SUMMARY_MESSAGES:
            hidden = count_noun(len(created) - 2 * half, "more message")
            shown = [*map(describe_message, created[:half]), f"… {hidden} …"]
            shown += map(describe_message, created[-half:])
        else:
            shown = [describe_message(m) for m in created]
        lines += [f"  {line}" for line in shown]
        return "\n".join(lines)

    def __repr__(self) -> str:
        last = "None" if self.last_message is None else f"<{describe_message(self.last_message)}>"
        return (
            f"RunSummary(events={self.events}, turns={self.turns}, reason={self.reason!r}, "
            f"created=<{count_noun(len(self.created), 'message')}>, last_message={last})"
        )


# --- model contexts -----------------------------------------------------------------------


def check_model_context(context: LlmContext | Sequence[Any], *, call: int | None = None) -> None:
    """Check one context handed to the model (the ``C.*`` rules). ``call`` numbers it in the
    message of a violation."""
    messages = list(context.messages if isinstance(context, LlmContext) else context)
    where = f"model call {call}: " if call is not None else ""

    def fail(rule: str, index: int, detail: str) -> GrammarViolation:
        return GrammarViolation(
            rule, index, where + detail, event_window(messages, index, message_line)
        )

    pending: dict[str, ToolCall] = {}  # calls still to answer, in source order
    answered: set[str] = set()
    owner = -1
    for i, message in enumerate(messages):
        role = role_of(message)
        if role == "toolResult":
            call_id = getattr(message, "tool_call_id", None)
            if call_id in answered:
                raise fail("C.duplicate_result", i, f"a second result for {call_id}")
            if call_id not in pending:
                raise fail("C.orphan_result", i, f"{call_id} is not a pending call of #{owner}")
            del pending[call_id]
            answered.add(call_id)
            continue
        if pending:
            first = next(iter(pending))
            raise fail("C.unanswered_call", i, f"call {first} of #{owner} is not answered")
        answered = set()
        if role == "assistant" and isinstance(message, AssistantMessage):
            owner = i
            if message.stop_reason in ANSWERABLE:
                pending = {c.id: c for c in message.tool_calls()}
        else:
            owner = -1
    if pending:
        first = next(iter(pending))
        raise fail("C.unanswered_call", len(messages), f"call {first} of #{owner} is not answered")


def message_line(message: Any) -> str:
    """A message of a model context as a violation's window shows it."""
    return message_label(message, ids=True)


def check_model_contexts(contexts: Iterable[LlmContext | Sequence[Any]]) -> None:
    """Check every context of ``contexts`` (for instance ``FauxProvider.calls``)."""
    for n, context in enumerate(contexts):
        check_model_context(context, call=n)
