"""Fixed runs of the tool policies (docs/policies-tools.md), stepped by hand: a retried
attempt (raised or timed out), the last attempt with and without ``after_tool_call``, the
wait's end, an abort while backing off, a call refused as a repeat and the run that stops for
it. Each checks the event grammar and the exact events it must emit.

They cover what the policies added to the declarations (``test_declaration_coverage``) and kill
the mutants of those parts (``test_mutants``: a run takes the loop's and the calls'
declarations to use). The behaviour is checked more widely by ``test_policy_tools`` and
``tests/core/test_tool_policy_machine.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import prop_coverage
from helpers import MODEL, check_grammar, make_tool, summarize, text_result, user
from prop_tool_calls import use_call_declaration, watch_calls

from agentcore_fsm import AgentContext, AgentLoopConfig, AssistantMessage, LoopMachine, ToolCall
from agentcore_fsm.core.declaration import Declaration
from agentcore_fsm.core.events import StreamDone, StreamStart
from agentcore_fsm.core.protocol import Input, RetryDue, Step, ToolAttemptFailed, ToolTimedOut
from agentcore_fsm.core.retry import RetryPolicy
from agentcore_fsm.core.tool_policy import ToolPolicy

RETRY = RetryPolicy(max_attempts=2, backoff_base_s=0, backoff_max_s=0)


class Stepper:
    """A loop machine stepped by hand, its events kept, every transition of it and of its
    calls reported to the coverage."""

    def __init__(
        self,
        decl: Declaration | None,
        call_decl: Declaration | None,
        *,
        after_hook: bool = False,
        **config: Any,
    ) -> None:
        tools = [make_tool("t", idempotent=True, retry=RETRY, timeout_s=1)]
        hook = (lambda ctx, signal: None) if after_hook else None
        extra = {} if decl is None else {"declaration": decl}
        self.m = LoopMachine(
            [user("go")],
            AgentContext(tools=tools),
            AgentLoopConfig(model=MODEL, after_tool_call=hook, **config),
            **extra,
        )
        use_call_declaration(self.m, call_decl)
        watch_calls(self.m, prop_coverage.record_call_transition)
        self.events: list[Any] = []
        self.report(self.m.start())

    def report(self, step: Step) -> Step:
        self.events += step.events
        for record in step.transitions:
            prop_coverage.record_transition(record)
        return step

    def feed(self, item: Input) -> Step:
        return self.report(self.m.feed(item))

    def answer(self, *args: dict[str, Any]) -> None:
        calls = [ToolCall(id=f"c{i}", name="t", arguments=a) for i, a in enumerate(args)]
        message = AssistantMessage(
            content=list(calls),
            api=MODEL.api,
            provider=MODEL.provider,
            model=MODEL.id,
            stop_reason="toolUse",
        )
        self.report(self.m.stream_event(StreamStart(partial=message)))
        self.report(self.m.stream_event(StreamDone(reason="toolUse", message=message)))

    def finish(self) -> list[str]:
        """Answer the next model call with text (when the run goes on); check the grammar;
        the run's events, summarized."""
        if not self.m.finished:
            self.report(self.m.proceed())
            message = AssistantMessage(
                api=MODEL.api, provider=MODEL.provider, model=MODEL.id, stop_reason="stop"
            )
            self.report(self.m.stream_event(StreamStart(partial=message)))
            self.report(self.m.stream_event(StreamDone(reason="stop", message=message)))
            self.report(self.m.proceed())
        check_grammar(self.events)
        return summarize(self.events, updates=True)


HEAD = [
    "agent_start",
    "turn_start",
    "message_start:user",
    "message_end:user",
    "message_start:assistant",
    "message_end:assistant:toolUse",
]
TAIL = [
    "turn_start",
    "message_start:assistant",
    "message_end:assistant:stop",
    "turn_end",
    "agent_end:completed",
]
RETRIED = [
    *HEAD,
    "tool_execution_start:c0",
    "tool_execution_update:c0",
    "tool_execution_end:c0:error",
    "message_start:toolResult:c0",
    "message_end:toolResult:c0",
    "turn_end",
    *TAIL,
]


def _retried(fail: Callable[[], Input], after_hook: bool) -> Callable[..., None]:
    def run(decl: Declaration | None, call_decl: Declaration | None) -> None:
        s = Stepper(decl, call_decl, after_hook=after_hook)
        s.answer({})
        s.feed(fail())
        assert s.m.tool_calls[0].state == "backing_off"
        s.feed(RetryDue(0))
        s.feed(fail())
        if after_hook:
            s.report(s.m.hook_returned(None, 0))
        assert s.finish() == RETRIED

    return run


def _aborted_while_backing_off(decl: Declaration | None, call_decl: Declaration | None) -> None:
    s = Stepper(decl, call_decl)
    s.answer({})
    s.feed(ToolAttemptFailed(0, RuntimeError("once")))
    s.report(s.m.abort())
    assert s.finish() == [
        *HEAD,
        "tool_execution_start:c0",
        "tool_execution_update:c0",
        "tool_execution_end:c0:error",
        "message_start:toolResult:c0",
        "message_end:toolResult:c0",
        "turn_end",
        "agent_end:aborted",
    ]


def _repeat_stops(decl: Declaration | None, call_decl: Declaration | None) -> None:
    s = Stepper(decl, call_decl, tool_policy=ToolPolicy(repeat_limit=2, on_repeat="stop"))
    s.answer({"x": 1}, {"x": 1})
    s.report(s.m.tool_finished(0, result=text_result("ok")))
    assert s.m.end_reason == "stopped"
    assert s.finish() == [
        *HEAD,
        "tool_execution_start:c0",
        "tool_execution_start:c1",
        "tool_execution_end:c1:error",
        "tool_execution_end:c0",
        "message_start:toolResult:c0",
        "message_end:toolResult:c0",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        "agent_end:stopped",
    ]


POLICY_RUNS: dict[str, Callable[[Declaration | None, Declaration | None], None]] = {
    "retried, raised": _retried(lambda: ToolAttemptFailed(0, RuntimeError("x")), False),
    "retried, raised, reviewed": _retried(lambda: ToolAttemptFailed(0, RuntimeError("x")), True),
    "retried, timed out": _retried(lambda: ToolTimedOut(0), False),
    "retried, timed out, reviewed": _retried(lambda: ToolTimedOut(0), True),
    "aborted while backing off": _aborted_while_backing_off,
    "a repeat stops the run": _repeat_stops,
}
"""Each run takes the loop's and the tool call's declarations (None: the real ones)."""


def policy_runs() -> None:
    """Every run on the real declarations."""
    for run in POLICY_RUNS.values():
        run(None, None)
