"""Test helpers: check that a run kept the documented event grammar
(docs/reference.md#event-grammar).

Use this module in your own tests to check an agent built on this library::

    from agentcore_fsm.devtools.testing import FauxProvider, faux_response, run_checked

    faux = FauxProvider([faux_response("Hello!")])
    run = await run_checked([UserMessage(content="hi")], context, config, stream_fn=faux)
    run.messages        # what run_agent_loop returned; the grammar has been checked

or record events yourself and check them afterwards::

    recorder = EventRecorder()
    messages = await run_agent_loop(prompts, context, config, recorder, stream_fn=faux)
    recorder.check(messages, model_contexts=faux.calls)

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

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, LlmContext, StreamFn
from agentcore_fsm.core.events import AGENT_EVENT_ADAPTER
from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.core.messages import (
    TEXT_LIMIT,
    AgentMessage,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    clip,
)
from agentcore_fsm.core.tools import AgentTool, ToolExecutionMode
from agentcore_fsm.integrations.providers.faux import (
    FauxError,
    FauxProvider,
    faux_response,
    faux_tool_call,
)
from agentcore_fsm.runtime.driver import run_agent_loop, run_agent_loop_continue

__all__ = [
    "RULES",
    "CheckedRun",
    "EventRecorder",
    "FauxError",
    "FauxProvider",
    "GrammarChecker",
    "GrammarViolation",
    "RunSummary",
    "check_events",
    "check_model_context",
    "check_model_contexts",
    "check_resumed_run",
    "check_run",
    "describe_event",
    "describe_message",
    "faux_response",
    "faux_tool_call",
    "run_checked",
    "sequential_tool_names",
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
    "R3.interleaved": "only message_update may come between a message_start and its message_end",
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
    # model contexts
    "C.unanswered_call": "a model context answers every call of an answerable assistant message",
    "C.orphan_result": "a tool result in a model context directly follows the call it answers",
    "C.duplicate_result": "a tool call is answered once in a model context",
}

ANSWERABLE = frozenset({"toolUse", "stop", "length"})
FINAL_STOP_REASONS = frozenset({"stop", "length", "toolUse", "error", "aborted"})
_LIBRARY_MESSAGES = (UserMessage, AssistantMessage, ToolResultMessage)
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


def _role(message: Any) -> Any:
    if isinstance(message, dict):
        return message.get("role")
    return getattr(message, "role", None)


def _is_message(message: Any) -> bool:
    """A message of this library, or a custom one: an object with a string ``role`` (a dict
    with a string ``"role"`` in the JSON form of a recording)."""
    if isinstance(message, _LIBRARY_MESSAGES):
        return True
    return isinstance(_role(message), str)


def _message_label(message: Any) -> str:
    role = _role(message)
    if not isinstance(role, str):
        text = repr(message)
        text = text if len(text) <= 40 else text[:37] + "..."
        return f"not a message: {type(message).__name__} {text}"
    if role == "toolResult":
        return f"toolResult {getattr(message, 'tool_call_id', '?')}"
    if role == "assistant" and isinstance(message, AssistantMessage):
        calls = ",".join(c.id for c in message.tool_calls())
        extra = f" calls={calls}" if calls else ""
        return f"assistant {message.stop_reason}{extra}"
    return str(role)


def describe_message(message: Any) -> str:
    """One short line for a message of a transcript: ``str(message)`` for the library's messages
    (``assistant: "Hi" [toolUse: read(path='a.txt')]``); for a custom message its role and its
    ``repr()``, cut to 60 characters; for anything else, what it is."""
    if isinstance(message, _LIBRARY_MESSAGES):
        return str(message)
    role = _role(message)
    text = clip(repr(message), TEXT_LIMIT)
    if isinstance(role, str):
        return f"{role}: {text}"
    return f"not a message: {type(message).__name__} {text}"


def describe_event(event: Any) -> str:
    """A one-line summary of an agent event (used in violation messages)."""
    kind = getattr(event, "type", None)
    if kind in ("message_start", "message_end"):
        return f"{kind}({_message_label(event.message)})"
    if kind == "message_update":
        return f"message_update({event.assistant_message_event.type})"
    if kind in ("tool_execution_start", "tool_execution_update"):
        return f"{kind}({event.tool_call_id} {event.tool_name})"
    if kind == "tool_execution_end":
        return f"{kind}({event.tool_call_id} {event.tool_name} is_error={event.is_error})"
    if kind == "turn_end":
        ids = ",".join(getattr(r, "tool_call_id", "?") for r in event.tool_results)
        return f"turn_end({_message_label(event.message)}; results=[{ids}])"
    if kind == "agent_end":
        return f"agent_end(reason={event.reason}, {len(event.messages)} messages)"
    return str(kind)


def _window(items: Sequence[Any], index: int, describe: Callable[[Any], str]) -> list[str]:
    lo, hi = max(0, index - _WINDOW), min(len(items), index + _WINDOW + 1)
    lines = []
    for i in range(lo, hi):
        mark = ">>" if i == index else "  "
        lines.append(f"{mark} #{i} {describe(items[i])}")
    if index >= len(items):
        lines.append(f">> #{index} (end of events)")
    return lines


def _as_event(event: Any) -> Any:
    if isinstance(event, dict):
        return AGENT_EVENT_ADAPTER.validate_python(event)
    return event


# --- the incremental checker --------------------------------------------------------------


@dataclass
class _CallState:
    index: int
    call: ToolCall
    started: bool = False
    ended: bool = False
    end_result: Any = None
    end_is_error: bool = False
    result: Any = None
    requested: bool = False
    decided: bool = False


@dataclass
class _Turn:
    start: int
    assistant_count: int = 0
    assistant: Any = None
    assistant_ended: bool = False
    calls: dict[str, _CallState] = field(default_factory=dict)
    last_started: int = -1
    last_result: int = -1
    results: list[Any] = field(default_factory=list)
    mode: ToolExecutionMode | None = None  # the batch's checked execution mode


_SUMMARY_MESSAGES = 20


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


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
        lines = [f"run: {_count(self.events, 'event')}, {_count(self.turns, 'turn')}, {ended}"]
        created = self.created
        half = _SUMMARY_MESSAGES // 2
        if len(created) > _SUMMARY_MESSAGES:
            hidden = _count(len(created) - 2 * half, "more message")
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
            f"created=<{_count(len(self.created), 'message')}>, last_message={last})"
        )


class GrammarChecker:
    """Checks events one at a time (``feed``), then the end of the run (``close``).

    ``feed`` raises :class:`GrammarViolation` at the first broken rule, so the grammar of a run
    can be checked as it goes (``close`` checks what only the end can tell). Once a violation has
    been raised the checker is spent.

    ``tool_execution`` (the run's ``AgentLoopConfig.tool_execution``) and ``sequential_tools``
    (the names of the tools with ``execution_mode="sequential"``) give each tool batch its mode,
    checked by ``R4.sequential_order`` and ``R4.parallel_results_after_ends``;
    ``tool_execution=None`` leaves every batch without a sequential tool unchecked.
    """

    def __init__(
        self,
        *,
        tool_execution: ToolExecutionMode | None = None,
        sequential_tools: Iterable[str] = (),
    ) -> None:
        if tool_execution not in (None, "parallel", "sequential"):
            raise ValueError(
                f"tool_execution must be 'parallel', 'sequential' or None, not {tool_execution!r}"
            )
        if isinstance(sequential_tools, str):
            raise TypeError("sequential_tools is a collection of tool names, not one string")
        self.tool_execution: ToolExecutionMode | None = tool_execution
        self.sequential_tools: frozenset[str] = frozenset(sequential_tools)
        self.events: list[Any] = []
        self.turns = 0
        self.created: list[AgentMessage] = []
        self.reason: str | None = None
        self._started = False
        self._ended = False
        self._end_messages: list[AgentMessage] | None = None
        self._turn: _Turn | None = None
        self._open: tuple[int, Any] | None = None  # (index, message) of the open message
        self._last_turn_message: Any = None

    # --- helpers ----------------------------------------------------------------------------

    def _fail(self, rule: str, detail: str, index: int | None = None) -> GrammarViolation:
        at = len(self.events) - 1 if index is None else index
        return GrammarViolation(rule, at, detail, _window(self.events, at, describe_event))

    @property
    def finished(self) -> bool:
        """Whether ``agent_end`` has been seen."""
        return self._ended

    # --- feeding ----------------------------------------------------------------------------

    def feed(self, event: Any) -> None:
        """Check one more event."""
        event = _as_event(event)
        self.events.append(event)
        i = len(self.events) - 1
        kind = getattr(event, "type", None)
        if self._ended:
            raise self._fail("R1.last", f"{kind} came after agent_end")
        if i == 0 and kind != "agent_start":
            raise self._fail("R1.first", f"the first event is {kind}, not agent_start")
        if kind == "agent_start":
            if i != 0:
                raise self._fail("R1.start_once", "a second agent_start")
            self._started = True
            return
        if i == 1 and kind != "turn_start":
            raise self._fail("R1.turn_start_second", f"the second event is {kind}")
        if self._open is not None and kind not in ("message_update", "message_end"):
            opened = f"{describe_event(self.events[self._open[0]])} (#{self._open[0]})"
            if kind == "message_start":
                raise self._fail("R3.nested_message", f"message_start while {opened} is open")
            if kind in ("turn_end", "agent_end"):
                raise self._fail("R3.unclosed_message", f"{kind} while {opened} is open")
            raise self._fail("R3.interleaved", f"{kind} while {opened} is open")
        handler = _HANDLERS.get(str(kind))
        if handler is None:
            raise self._fail("R2.outside_turn", f"unknown event type {kind!r}")
        handler(self, event)

    def feed_all(self, events: Iterable[Any]) -> None:
        """Check each of ``events`` in turn (see :meth:`feed`)."""
        for event in events:
            self.feed(event)

    def resume(self) -> None:
        """The run goes on in another process, resumed from its journal (see
        docs/reference.md#runs-that-survive): the events fed so far are those of the first
        process, the events fed next the resumed run's. An assistant message that was streaming
        when the first process stopped is superseded (the resumed run makes that model call
        again): it is forgotten, its events stay in :attr:`events`."""
        if self._open is not None and _role(self._open[1]) == "assistant":
            self._open = None
            if self._turn is not None:
                self._turn.assistant_count -= 1

    def close(self, messages: Sequence[AgentMessage] | None = None) -> RunSummary:
        """Check the end of the run; ``messages`` (the run's return value) must equal
        ``agent_end.messages`` when given."""
        end = len(self.events)
        if not self.events:
            raise GrammarViolation("R1.first", 0, "no events at all")
        if not self._ended:
            if self._open is not None:
                raise self._fail(
                    "R3.unclosed_message", "the events end with a message open", self._open[0]
                )
            if self._turn is not None:
                raise self._fail(
                    "R2.unclosed_turn", "the events end inside a turn", self._turn.start
                )
            raise GrammarViolation(
                "R1.last", end, "there is no agent_end", _window(self.events, end, describe_event)
            )
        if messages is not None:
            assert self._end_messages is not None
            returned = list(messages)
            if returned != self._end_messages:
                detail = _list_difference(returned, self._end_messages, "returned", "agent_end")
                raise self._fail("R5.returned", detail, end - 1)
        return RunSummary(
            events=end,
            turns=self.turns,
            created=list(self.created),
            reason=self.reason,
            last_message=self._last_turn_message,
        )

    # --- per event type ---------------------------------------------------------------------

    def _on_agent_end(self, event: Any) -> None:
        if self._turn is not None:
            raise self._fail(
                "R2.unclosed_turn", f"agent_end while the turn from #{self._turn.start} is open"
            )
        self._ended = True
        self.reason = event.reason
        got = list(event.messages)
        if got != self.created:
            detail = _list_difference(got, self.created, "agent_end", "created")
            raise self._fail("R5.agent_end_messages", detail)
        self._end_messages = got
        last = self._last_turn_message
        stop = getattr(last, "stop_reason", None)
        reason = event.reason
        if stop == "error" and reason != "error":
            raise self._fail(
                "T.end_reason", f"the last message stopped with error; reason={reason}"
            )
        if stop == "aborted" and reason != "aborted":
            raise self._fail(
                "T.end_reason", f"the last message stopped with aborted; reason={reason}"
            )
        if reason == "error" and stop != "error":
            raise self._fail("T.end_reason", f"reason=error but the last message stopped {stop}")
        if reason not in ("completed", "stopped", "aborted", "error"):
            raise self._fail("T.end_reason", f"unknown reason {reason!r}")

    def _on_turn_start(self, event: Any) -> None:
        if self._turn is not None:
            raise self._fail(
                "R2.nested_turn", f"turn_start while the turn from #{self._turn.start} is open"
            )
        self._turn = _Turn(start=len(self.events) - 1)
        self.turns += 1

    def _on_turn_end(self, event: Any) -> None:
        turn = self._turn
        if turn is None:
            raise self._fail("R2.turn_end_unopened", "turn_end without an open turn")
        if turn.assistant_count != 1 or not turn.assistant_ended:
            raise self._fail(
                "R2.one_assistant", f"the turn from #{turn.start} has no ended assistant message"
            )
        if event.message != turn.assistant:
            raise self._fail(
                "R2.turn_end_message",
                f"turn_end.message is {_message_label(event.message)}, "
                f"the turn's assistant message is {_message_label(turn.assistant)}",
            )
        for state in turn.calls.values():
            if state.started and (not state.ended or state.result is None):
                missing = "tool_execution_end" if not state.ended else "result message"
                raise self._fail("R4.unfinished", f"call {state.call.id} has no {missing}")
        if turn.assistant.stop_reason in ANSWERABLE:
            for state in turn.calls.values():
                if state.result is None:
                    raise self._fail(
                        "R5.unanswered",
                        f"call {state.call.id} ({state.call.name}) of a "
                        f"{turn.assistant.stop_reason} message has no result in its turn",
                    )
        results = list(event.tool_results)
        if results != turn.results:
            detail = _list_difference(results, turn.results, "turn_end.tool_results", "results")
            raise self._fail("T.turn_end_results", detail)
        self._last_turn_message = turn.assistant
        self._turn = None

    def _need_turn(self, kind: str) -> _Turn:
        if self._turn is None:
            raise self._fail("R2.outside_turn", f"{kind} outside a turn")
        return self._turn

    def _check_is_message(self, kind: str, message: Any) -> None:
        if not _is_message(message):
            raise self._fail("R3.not_a_message", f"{kind} carries {_message_label(message)}")
        if _role(message) == "assistant" and not isinstance(message, AssistantMessage):
            raise self._fail(
                "R3.not_a_message",
                f"{kind} carries a {type(message).__name__} with the role 'assistant', "
                "not an AssistantMessage",
            )

    def _on_message_start(self, event: Any) -> None:
        turn = self._need_turn("message_start")
        message = event.message
        self._check_is_message("message_start", message)
        role = _role(message)
        if role == "assistant":
            turn.assistant_count += 1
            if turn.assistant_count > 1:
                raise self._fail("R2.one_assistant", "a second assistant message in the turn")
        elif turn.assistant_ended:
            self._check_result_start(turn, message)
        self._open = (len(self.events) - 1, message)

    def _check_result_start(self, turn: _Turn, message: Any) -> None:
        call_id = getattr(message, "tool_call_id", None)
        if _role(message) != "toolResult" or call_id not in turn.calls:
            raise self._fail(
                "R4.orphan_result",
                f"{_message_label(message)} after the assistant message answers none of its calls",
            )
        state = turn.calls[call_id]
        if not state.ended:
            raise self._fail("R4.result_before_end", f"result of {call_id} before its end event")
        if state.result is not None:
            raise self._fail("R4.result_twice", f"a second result for {call_id}")
        if state.index < turn.last_result:
            raise self._fail("T.source_order", f"result of {call_id} after a later call's result")
        if getattr(message, "tool_name", None) != state.call.name:
            raise self._fail(
                "R4.call_mismatch", f"result names {message.tool_name}, call is {state.call.name}"
            )
        if (
            list(getattr(message, "content", [])) != list(state.end_result.content)
            or bool(getattr(message, "is_error", False)) != state.end_is_error
        ):
            raise self._fail(
                "T.result_mismatch", f"result of {call_id} differs from its tool_execution_end"
            )
        if turn.mode == "parallel":
            running = [s.call.id for s in turn.calls.values() if s.started and not s.ended]
            if running:
                raise self._fail(
                    "R4.parallel_results_after_ends",
                    f"result of {call_id} while {', '.join(running)} has no tool_execution_end",
                )

    def _on_message_update(self, event: Any) -> None:
        self._need_turn("message_update")
        if self._open is None or _role(self._open[1]) != "assistant":
            raise self._fail("R3.update_outside", "message_update outside an assistant message")

    def _on_message_end(self, event: Any) -> None:
        turn = self._need_turn("message_end")
        message = event.message
        self._check_is_message("message_end", message)
        if self._open is None:
            raise self._fail("R3.end_unopened", "message_end without a message_start")
        started = self._open[1]
        role = _role(message)
        if role != _role(started) or (role != "assistant" and message != started):
            raise self._fail(
                "R3.end_unopened",
                f"message_end({_message_label(message)}) does not close "
                f"message_start({_message_label(started)}) at #{self._open[0]}",
            )
        self._open = None
        self.created.append(message)
        if role == "assistant":
            if message.stop_reason not in FINAL_STOP_REASONS:
                raise self._fail(
                    "T.final_stop_reason", f"the assistant message ended {message.stop_reason!r}"
                )
            turn.assistant = message
            turn.assistant_ended = True
            calls = message.tool_calls()
            turn.calls = {c.id: _CallState(i, c) for i, c in enumerate(calls)}
            turn.mode = self._batch_mode(message, calls)
        elif turn.assistant_ended:
            state = turn.calls[message.tool_call_id]
            state.result = message
            turn.last_result = state.index
            turn.results.append(message)

    def _batch_mode(
        self, message: AssistantMessage, calls: list[ToolCall]
    ) -> ToolExecutionMode | None:
        if self.tool_execution == "sequential" or any(
            c.name in self.sequential_tools for c in calls
        ):
            return "sequential"
        if self.tool_execution == "parallel" and message.stop_reason != "length":
            return "parallel"
        return None

    def _call_for(self, event: Any, kind: str) -> tuple[_Turn, _CallState | None]:
        turn = self._need_turn(kind)
        state = turn.calls.get(event.tool_call_id) if turn.assistant_ended else None
        if state is not None and event.tool_name != state.call.name:
            raise self._fail(
                "R4.call_mismatch", f"{kind} names {event.tool_name}, call is {state.call.name}"
            )
        return turn, state

    def _on_tool_start(self, event: Any) -> None:
        turn, state = self._call_for(event, "tool_execution_start")
        if state is None:
            where = "no ended assistant message" if not turn.assistant_ended else "no such call"
            raise self._fail("R4.unknown_call", f"{event.tool_call_id}: {where} in this turn")
        if turn.assistant.stop_reason not in ANSWERABLE:
            raise self._fail(
                "R5.answered_failed",
                f"{event.tool_call_id} of a {turn.assistant.stop_reason} message was started",
            )
        if state.started:
            raise self._fail("R4.start_twice", f"a second start for {event.tool_call_id}")
        if event.args != state.call.arguments:
            raise self._fail(
                "R4.call_mismatch", f"start args {event.args!r} != {state.call.arguments!r}"
            )
        if state.index < turn.last_started:
            raise self._fail("T.source_order", f"{event.tool_call_id} started after a later call")
        if turn.mode == "sequential":
            for other in turn.calls.values():
                if other.started and other.result is None:
                    missing = "result message" if other.ended else "tool_execution_end"
                    raise self._fail(
                        "R4.sequential_order",
                        f"{event.tool_call_id} started before {other.call.id} had its {missing}",
                    )
        elif turn.mode == "parallel" and turn.results:
            raise self._fail(
                "R4.parallel_results_after_ends",
                f"{event.tool_call_id} started after the batch's first result message",
            )
        state.started = True
        turn.last_started = state.index

    def _on_tool_update(self, event: Any) -> None:
        _, state = self._call_for(event, "tool_execution_update")
        if state is None or not state.started or state.ended:
            raise self._fail(
                "R4.update_outside", f"update of {event.tool_call_id} outside its start..end"
            )
        if state.requested and not state.decided:
            raise self._fail(
                "A.ran_undecided", f"update of {event.tool_call_id} before its approval decision"
            )

    def _on_approval_requested(self, event: Any) -> None:
        _, state = self._call_for(event, "approval_requested")
        if state is None or not state.started or state.ended:
            raise self._fail(
                "A.request_outside",
                f"approval of {event.tool_call_id} requested outside its start..end",
            )
        if state.requested:
            raise self._fail("A.request_twice", f"a second request for {event.tool_call_id}")
        state.requested = True

    def _on_approval_decided(self, event: Any) -> None:
        _, state = self._call_for(event, "approval_decided")
        if state is None or not state.requested:
            raise self._fail(
                "A.decided_unrequested", f"{event.tool_call_id} decided without a request"
            )
        if state.decided:
            raise self._fail("A.decided_twice", f"a second decision for {event.tool_call_id}")
        state.decided = True

    def _on_tool_end(self, event: Any) -> None:
        _, state = self._call_for(event, "tool_execution_end")
        if state is None or not state.started:
            raise self._fail("R4.end_without_start", f"end of {event.tool_call_id} before a start")
        if state.ended:
            raise self._fail("R4.end_twice", f"a second end for {event.tool_call_id}")
        if state.requested and not state.decided:
            raise self._fail(
                "A.undecided", f"{event.tool_call_id} ended before its approval decision"
            )
        state.ended = True
        state.end_result = event.result
        state.end_is_error = bool(event.is_error)


_HANDLERS: dict[str, Callable[[GrammarChecker, Any], None]] = {
    "agent_end": GrammarChecker._on_agent_end,
    "turn_start": GrammarChecker._on_turn_start,
    "turn_end": GrammarChecker._on_turn_end,
    "message_start": GrammarChecker._on_message_start,
    "message_update": GrammarChecker._on_message_update,
    "message_end": GrammarChecker._on_message_end,
    "tool_execution_start": GrammarChecker._on_tool_start,
    "tool_execution_update": GrammarChecker._on_tool_update,
    "tool_execution_end": GrammarChecker._on_tool_end,
    "approval_requested": GrammarChecker._on_approval_requested,
    "approval_decided": GrammarChecker._on_approval_decided,
}


def _list_difference(got: list[Any], want: list[Any], got_name: str, want_name: str) -> str:
    for i, (a, b) in enumerate(zip(got, want, strict=False)):
        if a != b:
            return (
                f"{got_name}[{i}] is {_message_label(a)}, {want_name}[{i}] is {_message_label(b)}"
            )
    return f"{got_name} has {len(got)} messages, {want_name} has {len(want)}"


# --- model contexts -----------------------------------------------------------------------


def check_model_context(context: LlmContext | Sequence[Any], *, call: int | None = None) -> None:
    """Check one context handed to the model (the ``C.*`` rules). ``call`` numbers it in the
    message of a violation."""
    messages = list(context.messages if isinstance(context, LlmContext) else context)
    where = f"model call {call}: " if call is not None else ""

    def fail(rule: str, index: int, detail: str) -> GrammarViolation:
        return GrammarViolation(rule, index, where + detail, _window(messages, index, _msg_line))

    pending: dict[str, ToolCall] = {}  # calls still to answer, in source order
    answered: set[str] = set()
    owner = -1
    for i, message in enumerate(messages):
        role = _role(message)
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


def _msg_line(message: Any) -> str:
    return _message_label(message)


def check_model_contexts(contexts: Iterable[LlmContext | Sequence[Any]]) -> None:
    """Check every context of ``contexts`` (for instance ``FauxProvider.calls``)."""
    for n, context in enumerate(contexts):
        check_model_context(context, call=n)


# --- whole runs ---------------------------------------------------------------------------


def _check_all(
    events: list[Any],
    messages: Sequence[AgentMessage] | None,
    tool_execution: ToolExecutionMode | None,
    sequential_tools: Iterable[str],
) -> RunSummary:
    checker = GrammarChecker(tool_execution=tool_execution, sequential_tools=sequential_tools)
    try:
        checker.feed_all(events)
        return checker.close(messages)
    except GrammarViolation as exc:
        if len(events) <= len(checker.events):
            raise
        # show the events after the offending one too, not only those fed so far
        window = _window([_as_event(e) for e in events], exc.index, describe_event)
        raise GrammarViolation(exc.rule, exc.index, exc.detail, window) from None


def check_events(
    events: Iterable[Any],
    *,
    tool_execution: ToolExecutionMode | None = None,
    sequential_tools: Iterable[str] = (),
) -> RunSummary:
    """Check a complete run's events (every ``R*``/``T*`` rule). ``tool_execution`` and
    ``sequential_tools`` give the tool batches their mode (see :class:`GrammarChecker`)."""
    return _check_all(list(events), None, tool_execution, sequential_tools)


def check_run(
    events: Iterable[Any],
    messages: Sequence[AgentMessage] | None = None,
    *,
    model_contexts: Iterable[LlmContext | Sequence[Any]] | None = None,
    tool_execution: ToolExecutionMode | None = None,
    sequential_tools: Iterable[str] = (),
) -> RunSummary:
    """Check a run: its events, the messages it returned (equal to ``agent_end.messages``) and,
    when given, the contexts handed to the model. ``tool_execution`` (the config's) and
    ``sequential_tools`` (the names of the tools with ``execution_mode="sequential"``) give the
    tool batches their mode; with neither, the order rules of the modes are not checked."""
    summary = _check_all(list(events), messages, tool_execution, sequential_tools)
    if model_contexts is not None:
        check_model_contexts(model_contexts)
    return summary


def check_resumed_run(
    before: Iterable[Any],
    after: Iterable[Any],
    messages: Sequence[AgentMessage] | None = None,
    *,
    tool_execution: ToolExecutionMode | None = None,
    sequential_tools: Iterable[str] = (),
) -> RunSummary:
    """Check a run that was resumed (see docs/reference.md#runs-that-survive): ``before`` are
    the events of the first process up to its last journaled step (``resume_run(...,
    history=True)`` regenerates exactly those), ``after`` the resumed run's; ``messages`` the
    resumed run's return value. Together they must be one well-formed run; an assistant message
    that was streaming at the end of ``before`` is superseded (see
    :meth:`GrammarChecker.resume`). The other arguments are as for :func:`check_run`."""
    first, rest = list(before), list(after)
    checker = GrammarChecker(tool_execution=tool_execution, sequential_tools=sequential_tools)
    try:
        checker.feed_all(first)
        checker.resume()
        checker.feed_all(rest)
        return checker.close(messages)
    except GrammarViolation as exc:
        events = [_as_event(e) for e in first + rest]
        if len(events) <= len(checker.events):
            raise
        window = _window(events, exc.index, describe_event)
        raise GrammarViolation(exc.rule, exc.index, exc.detail, window) from None


class EventRecorder:
    """Records a run's events: pass it as ``emit`` to ``run_agent_loop``, or subscribe it to an
    ``Agent`` (it accepts the listener's ``signal`` argument too); its :meth:`on_transition`
    records the machine's transitions. It never raises into the run: check afterwards with
    :meth:`check`, and :meth:`clear` it between runs."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.transitions: list[TransitionRecord] = []

    def __call__(self, event: Any, signal: AbortSignal | None = None) -> None:
        """Record ``event`` (the ``signal`` an ``Agent`` passes is ignored)."""
        self.events.append(event)

    def clear(self) -> None:
        """Forget the recorded events and transitions (before the next run)."""
        self.events.clear()
        self.transitions.clear()

    def on_transition(self, record: TransitionRecord) -> None:
        """Record one of the machine's transitions: pass it as ``on_transition``."""
        self.transitions.append(record)

    def types(self) -> list[str]:
        """The recorded events' types, in order."""
        return [e.type for e in self.events]

    def check(
        self,
        messages: Sequence[AgentMessage] | None = None,
        *,
        model_contexts: Iterable[LlmContext | Sequence[Any]] | None = None,
        tool_execution: ToolExecutionMode | None = None,
        sequential_tools: Iterable[str] = (),
    ) -> RunSummary:
        """Check the recorded events with :func:`check_run`."""
        return check_run(
            self.events,
            messages,
            model_contexts=model_contexts,
            tool_execution=tool_execution,
            sequential_tools=sequential_tools,
        )


def sequential_tool_names(tools: Iterable[AgentTool]) -> frozenset[str]:
    """The names that call a sequential tool: those whose first tool of that name (the one a
    call runs) has ``execution_mode="sequential"``. Pass them as ``sequential_tools``."""
    modes: dict[str, ToolExecutionMode | None] = {}
    for tool in tools:
        modes.setdefault(tool.name, tool.execution_mode)
    return frozenset(name for name, mode in modes.items() if mode == "sequential")


@dataclass(repr=False)
class CheckedRun:
    """A run that passed :func:`check_run`: the ``messages`` it returned, every event and
    machine transition it went through, and its :class:`RunSummary`. ``print(run)`` prints the
    summary; ``repr()`` is one bounded line."""

    messages: list[AgentMessage]
    events: list[Any]
    transitions: list[TransitionRecord]
    summary: RunSummary

    def __str__(self) -> str:
        return str(self.summary)

    def __repr__(self) -> str:
        return (
            f"CheckedRun(messages=<{_count(len(self.messages), 'message')}>, "
            f"events=<{_count(len(self.events), 'event')}>, "
            f"transitions=<{_count(len(self.transitions), 'transition')}>, "
            f"summary={self.summary!r})"
        )


async def run_checked(
    prompts: Iterable[AgentMessage] | None,
    context: AgentContext,
    config: AgentLoopConfig,
    *,
    stream_fn: StreamFn | None = None,
    signal: AbortSignal | None = None,
    emit: Callable[[Any], Any] | None = None,
    check_tool_order: bool = True,
) -> CheckedRun:
    """Run the loop (``prompts=None`` continues from ``context``), record everything and check
    the run. ``emit``, when given, also receives every event (after it was recorded). When
    ``stream_fn`` has a ``calls`` list (a :class:`FauxProvider`), the contexts the model was
    given during this run are checked too.

    The tool batches are checked in their execution mode, taken from ``config.tool_execution``
    and the ``execution_mode`` of ``context.tools``. A ``prepare_next_turn`` that swaps in other
    tools is not followed: pass ``check_tool_order=False`` then and check the recorded
    :attr:`CheckedRun.events` yourself with :func:`check_run` if needed."""
    if check_tool_order:
        tool_execution: ToolExecutionMode | None = config.tool_execution
        sequential_tools = sequential_tool_names(context.tools)
    else:
        tool_execution, sequential_tools = None, frozenset()
    recorder = EventRecorder()

    async def forward(event: Any) -> None:
        recorder(event)
        if emit is not None:
            result = emit(event)
            if inspect.isawaitable(result):
                await result

    calls = getattr(stream_fn, "calls", None)
    first_call = len(calls) if isinstance(calls, list) else 0
    if prompts is None:
        messages = await run_agent_loop_continue(
            context,
            config,
            forward,
            signal=signal,
            stream_fn=stream_fn,
            on_transition=recorder.on_transition,
        )
    else:
        messages = await run_agent_loop(
            prompts,
            context,
            config,
            forward,
            signal=signal,
            stream_fn=stream_fn,
            on_transition=recorder.on_transition,
        )
    contexts = calls[first_call:] if isinstance(calls, list) else None
    summary = recorder.check(
        messages,
        model_contexts=contexts,
        tool_execution=tool_execution,
        sequential_tools=sequential_tools,
    )
    return CheckedRun(messages, recorder.events, recorder.transitions, summary)
