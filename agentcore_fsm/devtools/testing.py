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

Every name of :mod:`agentcore_fsm.devtools.grammar` and :mod:`agentcore_fsm.devtools.checker`
that a test needs is importable from here.

What is checked: every rule of the event grammar, the transcript invariants and the checks of
the contexts handed to the model, each with a stable id — see :mod:`agentcore_fsm.devtools.grammar`
(the rules, :data:`RULES`, and the decisions the checker makes) and
:mod:`agentcore_fsm.devtools.checker` (:class:`GrammarChecker`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, LlmContext, StreamFn
from agentcore_fsm.core.describe import describe_event, describe_message
from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.core.messages import AgentMessage
from agentcore_fsm.core.tools import ToolExecutionMode
from agentcore_fsm.devtools.checker import (
    GrammarChecker,
    check_events,
    check_resumed_run,
    check_run,
    sequential_tool_names,
)
from agentcore_fsm.devtools.grammar import (
    RULES,
    GrammarViolation,
    RunSummary,
    check_model_context,
    check_model_contexts,
    count_noun,
)
from agentcore_fsm.devtools.nested_checks import NestedRunViolation, check_nested_run
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
    "NestedRunViolation",
    "RunSummary",
    "check_events",
    "check_model_context",
    "check_model_contexts",
    "check_nested_run",
    "check_resumed_run",
    "check_run",
    "describe_event",
    "describe_message",
    "faux_response",
    "faux_tool_call",
    "run_checked",
    "sequential_tool_names",
]


def _event_type(event: Any) -> Any:
    return event.get("type") if isinstance(event, dict) else getattr(event, "type", None)


class EventRecorder:
    """Records a run's events: pass it as ``emit`` to ``run_agent_loop``, or subscribe it to an
    ``Agent`` (it accepts the listener's ``signal`` argument too); its :meth:`on_transition`
    records the machine's transitions. It never raises into the run: check afterwards with
    :meth:`check`.

    It keeps what it recorded until :meth:`clear`: subscribed to an ``Agent``, it holds every
    prompt's run one after the other. :meth:`runs` splits them (at each ``agent_start``), and
    :meth:`check` of a recorder holding more than one run says so instead of reporting a broken
    grammar (check each of ``runs()`` with :func:`check_run`, or ``clear()`` between prompts)."""

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

    def runs(self) -> list[list[Any]]:
        """The recorded events split into runs, one list per ``agent_start`` (events recorded
        before the first ``agent_start``, if any, make a list of their own)."""
        out: list[list[Any]] = []
        for event in self.events:
            if not out or _event_type(event) == "agent_start":
                out.append([])
            out[-1].append(event)
        return out

    def check(
        self,
        messages: Sequence[AgentMessage] | None = None,
        *,
        model_contexts: Iterable[LlmContext | Sequence[Any]] | None = None,
        tool_execution: ToolExecutionMode | None = None,
        sequential_tools: Iterable[str] = (),
    ) -> RunSummary:
        """Check the recorded events with :func:`check_run`. Raises ``ValueError`` when the
        recorder holds more than one run (see the class docstring)."""
        starts = sum(1 for e in self.events if _event_type(e) == "agent_start")
        if starts > 1:
            raise ValueError(
                f"this EventRecorder holds {starts} runs (it keeps events until clear()): check "
                f"each of recorder.runs() with check_run, or clear() it between runs"
            )
        return check_run(
            self.events,
            messages,
            model_contexts=model_contexts,
            tool_execution=tool_execution,
            sequential_tools=sequential_tools,
        )


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
            f"CheckedRun(messages=<{count_noun(len(self.messages), 'message')}>, "
            f"events=<{count_noun(len(self.events), 'event')}>, "
            f"transitions=<{count_noun(len(self.transitions), 'transition')}>, "
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
    run = run_agent_loop_continue if prompts is None else functools.partial(run_agent_loop, prompts)
    messages = await run(
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
