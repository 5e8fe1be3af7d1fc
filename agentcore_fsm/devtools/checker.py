"""The grammar checker: a run's events checked one at a time against the event grammar's rules
(:data:`~agentcore_fsm.devtools.grammar.RULES`), then the end of the run; and the checks of a
whole run (:func:`check_events`, :func:`check_run`, :func:`check_resumed_run`). Importable from
:mod:`agentcore_fsm.devtools.testing` too, where its documentation is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentcore_fsm.core.config import LlmContext
from agentcore_fsm.core.describe import message_label, role_of
from agentcore_fsm.core.messages import AgentMessage, AssistantMessage, ToolCall
from agentcore_fsm.core.tools import AgentTool, ToolExecutionMode
from agentcore_fsm.devtools.grammar import (
    ANSWERABLE,
    FINAL_STOP_REASONS,
    GrammarViolation,
    RunSummary,
    as_event,
    check_model_contexts,
    event_line,
    event_window,
    is_message,
)

__all__ = [
    "GrammarChecker",
    "check_events",
    "check_resumed_run",
    "check_run",
    "sequential_tool_names",
]


def _label(message: Any) -> str:
    return message_label(message, ids=True)


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
        return GrammarViolation(rule, at, detail, event_window(self.events, at, event_line))

    @property
    def finished(self) -> bool:
        """Whether ``agent_end`` has been seen."""
        return self._ended

    # --- feeding ----------------------------------------------------------------------------

    def feed(self, event: Any) -> None:
        """Check one more event."""
        event = as_event(event)
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
        if self._open is not None and kind not in (
            "message_update",
            "message_end",
            "output_partial",
        ):
            opened = f"{event_line(self.events[self._open[0]])} (#{self._open[0]})"
            if kind == "message_start":
                raise self._fail("R3.nested_message", f"message_start while {opened} is open")
            if kind in ("turn_end", "agent_end"):
                raise self._fail("R3.unclosed_message", f"{kind} while {opened} is open")
            raise self._fail("R3.interleaved", f"{kind} while {opened} is open")
        handler = self._HANDLERS.get(str(kind))
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
        if self._open is not None and role_of(self._open[1]) == "assistant":
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
                "R1.last", end, "there is no agent_end", event_window(self.events, end, event_line)
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
        if stop == "aborted" and reason not in ("aborted", "limit"):  # limit: policies.md
            raise self._fail(
                "T.end_reason", f"the last message stopped with aborted; reason={reason}"
            )
        if reason == "error" and stop != "error":
            raise self._fail("T.end_reason", f"reason=error but the last message stopped {stop}")
        if reason not in ("completed", "stopped", "aborted", "error", "limit"):
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
                f"turn_end.message is {message_label(event.message, ids=True)}, "
                f"the turn's assistant message is {message_label(turn.assistant, ids=True)}",
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
        if not is_message(message):
            raise self._fail("R3.not_a_message", f"{kind} carries {_label(message)}")
        if role_of(message) == "assistant" and not isinstance(message, AssistantMessage):
            raise self._fail(
                "R3.not_a_message",
                f"{kind} carries a {type(message).__name__} with the role 'assistant', "
                "not an AssistantMessage",
            )

    def _on_message_start(self, event: Any) -> None:
        turn = self._need_turn("message_start")
        message = event.message
        self._check_is_message("message_start", message)
        role = role_of(message)
        if role == "assistant":
            turn.assistant_count += 1
            if turn.assistant_count > 1:
                raise self._fail("R2.one_assistant", "a second assistant message in the turn")
        elif turn.assistant_ended:
            self._check_result_start(turn, message)
        self._open = (len(self.events) - 1, message)

    def _check_result_start(self, turn: _Turn, message: Any) -> None:
        call_id = getattr(message, "tool_call_id", None)
        if role_of(message) != "toolResult" or call_id not in turn.calls:
            raise self._fail(
                "R4.orphan_result",
                f"{_label(message)} after the assistant message answers none of its calls",
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
        if self._open is None or role_of(self._open[1]) != "assistant":
            raise self._fail("R3.update_outside", "message_update outside an assistant message")

    def _on_output_partial(self, event: Any) -> None:
        self._need_turn("output_partial")
        if self._open is None or role_of(self._open[1]) != "assistant":
            raise self._fail("R3.partial_outside", "output_partial outside an assistant message")

    def _on_context_compacted(self, event: Any) -> None:
        turn = self._need_turn("context_compacted")
        if turn.assistant_count:
            raise self._fail(
                "K.compacted_outside", "context_compacted after the turn's assistant message"
            )
        indices = list(getattr(event, "indices", None) or [])
        dropped = list(getattr(event, "dropped", None) or [])
        if len(indices) != len(dropped) or indices != sorted(set(indices)):
            raise self._fail(
                "K.compacted_data",
                f"context_compacted has indices {indices[:8]} for {len(dropped)} dropped messages",
            )

    def _on_message_end(self, event: Any) -> None:
        turn = self._need_turn("message_end")
        message = event.message
        self._check_is_message("message_end", message)
        if self._open is None:
            raise self._fail("R3.end_unopened", "message_end without a message_start")
        started = self._open[1]
        role = role_of(message)
        if role != role_of(started) or (role != "assistant" and message != started):
            raise self._fail(
                "R3.end_unopened",
                f"message_end({_label(message)}) does not close "
                f"message_start({message_label(started, ids=True)}) at #{self._open[0]}",
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

    # the handler of each event type (feed's dispatch table)
    _HANDLERS: ClassVar[dict[str, Callable[[GrammarChecker, Any], None]]] = {
        "agent_end": _on_agent_end,
        "turn_start": _on_turn_start,
        "turn_end": _on_turn_end,
        "message_start": _on_message_start,
        "message_update": _on_message_update,
        "output_partial": _on_output_partial,
        "context_compacted": _on_context_compacted,
        "message_end": _on_message_end,
        "tool_execution_start": _on_tool_start,
        "tool_execution_update": _on_tool_update,
        "tool_execution_end": _on_tool_end,
        "approval_requested": _on_approval_requested,
        "approval_decided": _on_approval_decided,
    }


def _list_difference(got: list[Any], want: list[Any], got_name: str, want_name: str) -> str:
    for i, (a, b) in enumerate(zip(got, want, strict=False)):
        if a != b:
            return f"{got_name}[{i}] is {_label(a)}, {want_name}[{i}] is {_label(b)}"
    return f"{got_name} has {len(got)} messages, {want_name} has {len(want)}"


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
        window = event_window([as_event(e) for e in events], exc.index, event_line)
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
        events = [as_event(e) for e in first + rest]
        if len(events) <= len(checker.events):
            raise
        window = event_window(events, exc.index, event_line)
        raise GrammarViolation(exc.rule, exc.index, exc.detail, window) from None


def sequential_tool_names(tools: Iterable[AgentTool]) -> frozenset[str]:
    """The names that call a sequential tool: those whose first tool of that name (the one a
    call runs) has ``execution_mode="sequential"``. Pass them as ``sequential_tools``."""
    modes: dict[str, ToolExecutionMode | None] = {}
    for tool in tools:
        modes.setdefault(tool.name, tool.execution_mode)
    return frozenset(name for name, mode in modes.items() if mode == "sequential")
