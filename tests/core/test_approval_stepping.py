"""Approval of tool calls, stepping the sans-IO machine by hand: no event loop in this file.

Each test builds a :class:`LoopMachine`, brings it to a turn whose assistant message has tool
calls, and feeds the approval inputs one at a time (``ApprovalChecked`` for a tool whose
``requires_approval`` is a callable, ``ApprovalDecided`` for a call that waits), checking after
every step the loop's state, the events (types, ids and the fields that matter) and the effects
(docs/reference.md#approval-of-tool-calls). Every event also goes through the grammar checker.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import MODEL, make_tool, text_of, text_result, user

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    ApprovalRequest,
    AssistantMessage,
    BeforeToolCallResult,
    LoopMachine,
    TextContent,
    ToolCall,
)
from agentcore_fsm.core.declared import MachineInputError
from agentcore_fsm.core.events import StreamDone
from agentcore_fsm.core.protocol import (
    ApprovalChecked,
    ApprovalDecided,
    ArgumentsPrepared,
    AwaitApproval,
    CallHook,
    CheckApproval,
    ExecuteTool,
    PrepareArguments,
    Proceed,
    Proceeded,
    Step,
)
from agentcore_fsm.devtools.testing import GrammarChecker

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"x": {"type": "integer"}},
    "required": ["x"],
}
ABORTED = "Operation aborted"


def _never(*args: Any) -> Any:  # pragma: no cover - the machine never calls user code
    raise AssertionError("the sans-IO machine must not call user code itself")


ASK = make_tool("ask", parameters=SCHEMA, requires_approval=True)
CHECK = make_tool("check", parameters=SCHEMA, requires_approval=_never)
PLAIN = make_tool("plain", parameters=SCHEMA)
PREP = make_tool("prep", parameters=SCHEMA, prepare_arguments=_never)
SEQ_ASK = make_tool(
    "seq_ask", parameters=SCHEMA, requires_approval=True, execution_mode="sequential"
)
TOOLS = [ASK, CHECK, PLAIN, PREP, SEQ_ASK]


def describe(event: Any) -> str:
    """An event as ``type:call id`` and what matters: ``:error`` for an error end,
    ``:approved``/``:denied`` for a decision, the role (and call id) of a message."""
    kind: str = event.type
    if kind in ("message_start", "message_end"):
        message = event.message
        text = f"{kind}:{message.role}"
        if message.role == "toolResult":
            text += f":{message.tool_call_id}"
        return text
    if kind.startswith("tool_execution_"):
        text = f"{kind}:{event.tool_call_id}"
        if kind == "tool_execution_end" and event.is_error:
            text += ":error"
        return text
    if kind == "approval_requested":
        return f"{kind}:{event.tool_call_id}"
    if kind == "approval_decided":
        return f"{kind}:{event.tool_call_id}:{'approved' if event.approved else 'denied'}"
    if kind == "agent_end":
        return f"agent_end:{event.reason}"
    return kind


def names(step: Step) -> list[str]:
    return [describe(e) for e in step.events]


class Stepper:
    """One machine stepped by hand; every event also goes through the grammar checker."""

    def __init__(self, mode: str = "parallel", *, before: bool = False) -> None:
        config = AgentLoopConfig(
            model=MODEL,
            tool_execution=mode,  # type: ignore[arg-type]
            before_tool_call=_never if before else None,
        )
        self.m = LoopMachine([user("go")], AgentContext("sys", [], list(TOOLS)), config)
        self.checker = GrammarChecker(
            tool_execution=mode,  # type: ignore[arg-type]
            sequential_tools={SEQ_ASK.name},
        )
        self.message: AssistantMessage | None = None

    def feed(self, input: Any) -> Step:
        """Feed an input of the machine (a stream event goes through ``stream_event``)."""
        if isinstance(input, StreamDone):
            step = self.m.stream_event(input)
        else:
            step = self.m.feed(input)
        self.checker.feed_all(step.events)
        return step

    def feed_hook(self, value: Any, index: int = 0) -> Step:
        """before_tool_call of call ``index`` returned ``value``."""
        step = self.m.hook_returned(value, index)
        self.checker.feed_all(step.events)
        return step

    def to_tools(self, *calls: tuple[str, str, dict[str, Any]]) -> Step:
        """Start the run and let the model answer with ``calls`` (id, tool name, arguments);
        the step of that answer."""
        step = self.m.start()
        self.checker.feed_all(step.events)
        assert self.m.state == "streaming"
        self.message = assistant(
            *(ToolCall(id=cid, name=name, arguments=args) for cid, name, args in calls),
            stop_reason="toolUse",
        )
        return self.feed(StreamDone(reason="toolUse", message=self.message))

    def finish(self, step: Step) -> None:
        """From a step that asks for ``Proceed`` (the turn ended): proceed, let the model
        answer with text, proceed again; the run completes and its grammar closes."""
        m = self.m
        assert step.effects == [Proceed()] and m.state == "closing_turn", (m.state, step)
        step = self.feed(Proceeded())
        assert m.state == "streaming"
        done = assistant(TextContent(text="done"))
        step = self.feed(StreamDone(reason="stop", message=done))
        assert names(step) == ["message_start:assistant", "message_end:assistant", "turn_end"]
        step = self.feed(Proceeded())
        assert names(step) == ["agent_end:completed"] and m.finished
        assert m.pending_approvals == []
        self.close()

    def close(self) -> None:
        summary = self.checker.close(self.m.new_messages)
        assert summary.reason == self.m.end_reason


def assistant(*content: Any, stop_reason: Any = "stop") -> AssistantMessage:
    return AssistantMessage(
        content=list(content),
        api=MODEL.api,
        provider=MODEL.provider,
        model=MODEL.id,
        stop_reason=stop_reason,
    )


def results(m: LoopMachine) -> dict[str, tuple[str, bool]]:
    """Each tool result message of the run: call id -> (text, is_error)."""
    return {
        msg.tool_call_id: (text_of(msg), msg.is_error)
        for msg in m.new_messages
        if getattr(msg, "role", None) == "toolResult"
    }


def request(cid: str, tool: str, args: Any, reason: str | None = None) -> ApprovalRequest:
    return ApprovalRequest(
        tool_call_id=cid,
        tool_name=tool,
        args=args,
        reason=reason or f'Tool "{tool}" requires approval',
    )


def decided(step: Step, index: int = 0) -> tuple[Any, ...]:
    event = step.events[index]
    assert event.type == "approval_decided"
    return (event.tool_call_id, event.approved, event.reason, event.decided_by, event.args)


def executed(step: Step) -> list[tuple[int, str, Any]]:
    """The ExecuteTool effects of ``step`` (all its effects must be): (index, call id, args)."""
    assert all(isinstance(e, ExecuteTool) for e in step.effects), step.effects
    return [(e.index, e.tool_call.id, e.args) for e in step.effects]


def run_all(s: Stepper, step: Step) -> Step:
    """Finish every ExecuteTool effect of ``step`` (in source order) with ``<id> ran <args>``;
    the last step."""
    for index, cid, args in executed(step):
        step = s.m.tool_finished(index, result=text_result(f"{cid} ran {args}"))
        s.checker.feed_all(step.events)
    return step


def assert_unchanged(m: LoopMachine, before: tuple[Any, ...]) -> None:
    assert snapshot(m) == before


def snapshot(m: LoopMachine) -> tuple[Any, ...]:
    return (
        m.state,
        list(m.history),
        [(c.state, list(c.history), c.args) for c in m.tool_calls],
        list(m.pending_approvals),
        len(m.new_messages),
    )


# --- requires_approval=True --------------------------------------------------------------------


def test_a_tool_that_requires_approval_waits_then_runs_once_approved() -> None:
    s = Stepper()
    m = s.m
    step = s.to_tools(("c1", "ask", {"x": 1}), ("c2", "plain", {"x": 2}))
    assert names(step) == [
        "message_start:assistant",
        "message_end:assistant",
        "tool_execution_start:c1",
        "approval_requested:c1",
        "tool_execution_start:c2",  # parallel: the next call begins and waits, ready
    ]
    asked = step.events[3]
    assert (asked.tool_call_id, asked.tool_name, asked.args, asked.reason) == (
        "c1",
        "ask",
        {"x": 1},
        'Tool "ask" requires approval',
    )
    want = request("c1", "ask", {"x": 1})
    assert step.effects == [AwaitApproval(0, want)]
    assert m.state == "awaiting_approval"
    assert m.accepted_inputs() == ["approval_decided", "approval_deferred", "abort", "fail"]
    assert [c.state for c in m.tool_calls] == ["awaiting_approval", "ready"]
    assert m.pending_approvals == [want]
    assert m.pending_tool_calls == ["c1", "c2"]

    step = s.feed(ApprovalDecided(0, True, "looks fine", "alice"))
    assert names(step) == ["approval_decided:c1:approved"]
    assert decided(step) == ("c1", True, "looks fine", "alice", None)
    assert m.state == "executing" and m.pending_approvals == []
    assert executed(step) == [(0, "c1", {"x": 1}), (1, "c2", {"x": 2})]

    step = m.tool_finished(0, result=text_result("c1 ran"))
    s.checker.feed_all(step.events)
    assert names(step) == ["tool_execution_end:c1"] and step.effects == []
    step = m.tool_finished(1, result=text_result("c2 ran"))
    s.checker.feed_all(step.events)
    assert names(step) == [
        "tool_execution_end:c2",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
    ]
    assert results(m) == {"c1": ("c1 ran", False), "c2": ("c2 ran", False)}
    assert [(r.trigger, r.source, r.dest) for r in m.history][2:] == [
        ("model_finished", "streaming", "preparing_tools"),
        ("tools_prepared", "preparing_tools", "awaiting_approval"),
        ("approvals_settled", "awaiting_approval", "executing"),
        ("tools_settled", "executing", "turn_end"),
        ("after_turn", "turn_end", "closing_turn"),
    ]
    s.finish(step)


def test_approved_with_changed_arguments_the_call_runs_on_them() -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "ask", {"x": 1}))
    step = s.feed(ApprovalDecided(0, True, None, "bob", {"x": 42}))
    assert names(step) == ["approval_decided:c1:approved"]
    assert decided(step) == ("c1", True, None, "bob", {"x": 42})
    assert executed(step) == [(0, "c1", {"x": 42})]
    step = run_all(s, step)
    assert results(m) == {"c1": ("c1 ran {'x': 42}", False)}
    # the transcript's tool call keeps what the model sent
    assert s.message is not None and s.message.tool_calls()[0].arguments == {"x": 1}
    s.finish(step)


def test_approved_with_invalid_arguments_the_call_ends_with_the_validation_error() -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "ask", {"x": 1}), ("c2", "plain", {"x": 2}))
    step = s.feed(ApprovalDecided(0, True, "edited", "bob", {"x": "seven"}))
    assert names(step) == ["approval_decided:c1:approved", "tool_execution_end:c1:error"]
    assert decided(step) == ("c1", True, "edited", "bob", {"x": "seven"})
    end = step.events[1]
    assert text_of(end.result).startswith('Validation failed for tool "ask":\n  - x: ')
    assert m.state == "executing"
    assert executed(step) == [(1, "c2", {"x": 2})]  # the rest of the batch runs
    step = run_all(s, step)
    assert names(step) == [
        "tool_execution_end:c2",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
    ]
    text, is_error = results(m)["c1"]
    assert is_error and text.startswith('Validation failed for tool "ask"')
    s.finish(step)


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        ("too risky", 'Tool call "ask" was denied: too risky'),
        (None, 'Tool call "ask" was denied: no reason given'),
    ],
)
def test_a_denied_call_ends_with_the_denial_and_never_runs(reason: str | None, text: str) -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "ask", {"x": 1}))
    step = s.feed(ApprovalDecided(0, False, reason, "carol"))
    assert names(step) == [
        "approval_decided:c1:denied",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
    ]
    assert decided(step) == ("c1", False, reason, "carol", None)
    assert text_of(step.events[1].result) == text
    assert m.state == "closing_turn" and step.effects == [Proceed()]
    assert [(r.trigger, r.dest) for r in m.history][3:5] == [
        ("tools_prepared", "awaiting_approval"),
        ("approvals_settled", "turn_end"),
    ]
    assert results(m) == {"c1": (text, True)}
    s.finish(step)


def test_the_args_of_a_denial_are_not_told() -> None:
    s = Stepper()
    s.to_tools(("c1", "ask", {"x": 1}))
    step = s.feed(ApprovalDecided(0, False, "no", "carol", {"x": 2}))
    assert decided(step) == ("c1", False, "no", "carol", None)
    assert text_of(step.events[1].result) == 'Tool call "ask" was denied: no'


def test_no_call_of_a_parallel_batch_runs_before_every_decision_is_in() -> None:
    s = Stepper()
    m = s.m
    step = s.to_tools(("c1", "ask", {"x": 1}), ("c2", "plain", {"x": 2}), ("c3", "ask", {"x": 3}))
    assert names(step)[2:] == [
        "tool_execution_start:c1",
        "approval_requested:c1",
        "tool_execution_start:c2",
        "tool_execution_start:c3",
        "approval_requested:c3",
    ]
    r1, r3 = request("c1", "ask", {"x": 1}), request("c3", "ask", {"x": 3})
    assert step.effects == [AwaitApproval(0, r1), AwaitApproval(2, r3)]
    assert m.pending_approvals == [r1, r3]

    step = s.feed(ApprovalDecided(2, True))  # the later call first
    assert names(step) == ["approval_decided:c3:approved"] and step.effects == []
    assert m.state == "awaiting_approval" and m.pending_approvals == [r1]
    assert [c.state for c in m.tool_calls] == ["awaiting_approval", "ready", "ready"]

    step = s.feed(ApprovalDecided(0, False, "no"))
    assert names(step) == ["approval_decided:c1:denied", "tool_execution_end:c1:error"]
    assert m.state == "executing" and m.pending_approvals == []
    assert executed(step) == [(1, "c2", {"x": 2}), (2, "c3", {"x": 3})]
    step = run_all(s, step)
    assert results(m) == {
        "c1": ('Tool call "ask" was denied: no', True),
        "c2": ("c2 ran {'x': 2}", False),
        "c3": ("c3 ran {'x': 3}", False),
    }
    s.finish(step)


def test_in_a_parallel_batch_later_calls_are_prepared_while_one_waits() -> None:
    s = Stepper()
    m = s.m
    step = s.to_tools(("c1", "ask", {"x": 1}), ("c2", "prep", {"x": 2}))
    assert names(step)[2:] == [
        "tool_execution_start:c1",
        "approval_requested:c1",
        "tool_execution_start:c2",
    ]
    r1 = request("c1", "ask", {"x": 1})
    assert step.effects[0] == AwaitApproval(0, r1)
    assert isinstance(step.effects[1], PrepareArguments) and step.effects[1].index == 1
    assert len(step.effects) == 2
    # the loop still prepares: a decision is not accepted yet
    assert m.state == "preparing_tools" and m.pending_approvals == [r1]
    assert "approval_decided" not in m.accepted_inputs()
    step = s.feed(ArgumentsPrepared(1, {"x": 5}))
    assert names(step) == [] and step.effects == []
    assert m.state == "awaiting_approval"
    step = s.feed(ApprovalDecided(0, True))
    assert executed(step) == [(0, "c1", {"x": 1}), (1, "c2", {"x": 5})]


def test_every_call_denied_ends_the_turn_without_running_any() -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "ask", {"x": 1}), ("c2", "ask", {"x": 2}))
    step = s.feed(ApprovalDecided(1, False, "b"))
    assert names(step) == ["approval_decided:c2:denied", "tool_execution_end:c2:error"]
    assert m.state == "awaiting_approval"
    step = s.feed(ApprovalDecided(0, False, "a"))
    assert names(step) == [
        "approval_decided:c1:denied",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
    ]
    assert results(m) == {
        "c1": ('Tool call "ask" was denied: a', True),
        "c2": ('Tool call "ask" was denied: b', True),
    }
    s.finish(step)


def test_a_sequential_batch_asks_one_call_at_a_time() -> None:
    s = Stepper("sequential")
    m = s.m
    step = s.to_tools(("c1", "ask", {"x": 1}), ("c2", "ask", {"x": 2}), ("c3", "plain", {"x": 3}))
    assert names(step)[2:] == ["tool_execution_start:c1", "approval_requested:c1"]
    assert step.effects == [AwaitApproval(0, request("c1", "ask", {"x": 1}))]
    assert m.state == "awaiting_approval"
    assert [c.state for c in m.tool_calls] == ["awaiting_approval", "new", "new"]

    step = s.feed(ApprovalDecided(0, True))
    assert names(step) == ["approval_decided:c1:approved"]
    assert m.state == "executing" and executed(step) == [(0, "c1", {"x": 1})]
    step = run_all(s, step)
    assert names(step) == [
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "tool_execution_start:c2",
        "approval_requested:c2",
    ]
    assert step.effects == [AwaitApproval(1, request("c2", "ask", {"x": 2}))]
    assert m.state == "awaiting_approval"

    step = s.feed(ApprovalDecided(1, False, "later"))
    assert names(step) == [
        "approval_decided:c2:denied",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "tool_execution_start:c3",
    ]
    assert m.state == "executing" and executed(step) == [(2, "c3", {"x": 3})]
    assert [(r.trigger, r.source, r.dest) for r in m.history][-3:] == [
        ("tools_prepared", "preparing_tools", "awaiting_approval"),
        ("approvals_settled", "awaiting_approval", "preparing_tools"),
        ("tools_prepared", "preparing_tools", "executing"),
    ]
    step = run_all(s, step)
    assert results(m) == {
        "c1": ("c1 ran {'x': 1}", False),
        "c2": ('Tool call "ask" was denied: later', True),
        "c3": ("c3 ran {'x': 3}", False),
    }
    s.finish(step)


def test_a_sequential_tool_that_needs_approval_makes_the_batch_sequential() -> None:
    s = Stepper()
    m = s.m
    step = s.to_tools(("c1", "seq_ask", {"x": 1}), ("c2", "plain", {"x": 2}))
    assert names(step)[2:] == ["tool_execution_start:c1", "approval_requested:c1"]
    assert [c.state for c in m.tool_calls] == ["awaiting_approval", "new"]


# --- a callable requires_approval ----------------------------------------------------------------


def test_a_callable_is_asked_through_the_check_approval_effect() -> None:
    s = Stepper()
    m = s.m
    step = s.to_tools(("c1", "check", {"x": 1}), ("c2", "plain", {"x": 2}))
    assert names(step)[2:] == ["tool_execution_start:c1"]
    (effect,) = step.effects
    assert isinstance(effect, CheckApproval)
    assert (effect.index, effect.tool, effect.args) == (0, CHECK, {"x": 1})
    assert m.state == "preparing_tools" and m.pending_approvals == []
    assert m.accepted_inputs() == [
        "arguments_prepared",
        "hook_returned",
        "hook_failed",
        "approval_checked",
        "abort",
        "fail",
    ]
    assert [c.state for c in m.tool_calls] == ["approving", "new"]  # c2 waits for c1's check

    step = s.feed(ApprovalChecked(0, True))
    assert names(step) == ["approval_requested:c1", "tool_execution_start:c2"]
    want = request("c1", "check", {"x": 1})
    assert step.effects == [AwaitApproval(0, want)]
    assert m.state == "awaiting_approval" and m.pending_approvals == [want]


def test_a_callable_that_says_no_lets_the_call_run_without_asking() -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "check", {"x": 1}))
    step = s.feed(ApprovalChecked(0, False))
    assert names(step) == []
    assert m.state == "executing" and executed(step) == [(0, "c1", {"x": 1})]
    assert m.pending_approvals == []
    s.finish(run_all(s, step))


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        (
            ApprovalChecked(0, error=ValueError("no idea")),
            'requires_approval of tool "check" raised: no idea',
        ),
        (
            ApprovalChecked(0, "maybe"),
            "requires_approval of tool \"check\" returned str 'maybe'; expected a bool",
        ),
        (
            ApprovalChecked(0, None),
            'requires_approval of tool "check" returned None; expected a bool',
        ),
        (
            ApprovalChecked(0, 1),
            'requires_approval of tool "check" returned int 1; expected a bool',
        ),
    ],
)
def test_a_callable_that_raises_or_returns_junk_gives_the_call_an_error_result(
    answer: ApprovalChecked, text: str
) -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "check", {"x": 1}), ("c2", "plain", {"x": 2}))
    step = s.feed(answer)
    assert names(step) == ["tool_execution_end:c1:error", "tool_execution_start:c2"]
    assert text_of(step.events[0].result) == text
    assert m.state == "executing" and executed(step) == [(1, "c2", {"x": 2})]
    step = run_all(s, step)
    assert results(m) == {"c1": (text, True), "c2": ("c2 ran {'x': 2}", False)}
    s.finish(step)


# --- before_tool_call asks ---------------------------------------------------------------------


def test_before_tool_call_asks_for_approval_with_its_reason() -> None:
    s = Stepper(before=True)
    m = s.m
    step = s.to_tools(("c1", "plain", {"x": 1}))
    (hook,) = step.effects
    assert isinstance(hook, CallHook) and hook.name == "before_tool_call"
    step = s.feed_hook(BeforeToolCallResult(require_approval=True, reason="it spends money"))
    assert names(step) == ["approval_requested:c1"]
    want = request("c1", "plain", {"x": 1}, "it spends money")
    assert step.events[0].reason == "it spends money"
    assert step.effects == [AwaitApproval(0, want)] and m.pending_approvals == [want]
    step = s.feed(ApprovalDecided(0, True))
    assert executed(step) == [(0, "c1", {"x": 1})]


def test_before_tool_call_asking_without_a_reason_gets_a_default_one() -> None:
    s = Stepper(before=True)
    s.to_tools(("c1", "plain", {"x": 1}))
    step = s.feed_hook({"require_approval": True})
    assert names(step) == ["approval_requested:c1"]
    assert step.events[0].reason == 'before_tool_call asked for approval of tool "plain"'


@pytest.mark.parametrize("page", ["approval.md", "reference.md"])
def test_the_docs_quote_every_reason_an_approver_can_be_shown(page: str) -> None:
    """The texts of ``approval_requested.reason`` that the machine makes (with the tool's name
    as ``NAME``) are each quoted in the docs."""
    from pathlib import Path

    text = " ".join((Path(__file__).parents[2] / "docs" / page).read_text().split())
    hook = Stepper(before=True)
    hook.to_tools(("c1", "plain", {"x": 1}))
    by_hook = hook.feed_hook({"require_approval": True}).events[0].reason
    by_tool = Stepper().to_tools(("c1", "ask", {"x": 1})).events[-1].reason
    assert (by_hook, by_tool) == (
        'before_tool_call asked for approval of tool "plain"',
        'Tool "ask" requires approval',
    )
    for reason in (by_hook.replace('"plain"', '"NAME"'), by_tool.replace('"ask"', '"NAME"')):
        assert f"`{reason}`" in text, (page, reason)


def test_when_before_tool_call_asks_the_tools_callable_is_not_asked() -> None:
    s = Stepper(before=True)
    m = s.m
    s.to_tools(("c1", "check", {"x": 1}))
    step = s.feed_hook(BeforeToolCallResult(require_approval=True, reason="hook"))
    assert names(step) == ["approval_requested:c1"]
    assert step.effects == [AwaitApproval(0, request("c1", "check", {"x": 1}, "hook"))]
    assert [c.state for c in m.tool_calls] == ["awaiting_approval"]


def test_after_before_tool_call_passes_the_tools_callable_is_asked() -> None:
    s = Stepper(before=True)
    m = s.m
    s.to_tools(("c1", "check", {"x": 1}))
    step = s.feed_hook(None)
    assert names(step) == []
    (effect,) = step.effects
    assert isinstance(effect, CheckApproval) and effect.index == 0
    assert [c.state for c in m.tool_calls] == ["approving"]


def test_a_block_wins_over_asking_for_approval() -> None:
    s = Stepper(before=True)
    m = s.m
    s.to_tools(("c1", "ask", {"x": 1}))
    step = s.feed_hook(BeforeToolCallResult(block=True, require_approval=True, reason="stop"))
    assert names(step)[:1] == ["tool_execution_end:c1:error"]
    assert "approval_requested:c1" not in names(step)
    assert results(m) == {"c1": ("stop", True)}


# --- abort and failure while calls wait --------------------------------------------------------


def test_abort_while_calls_wait_in_a_parallel_batch() -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "ask", {"x": 1}), ("c2", "plain", {"x": 2}), ("c3", "ask", {"x": 3}))
    step = s.feed(ApprovalDecided(0, True))  # c1 approved, c3 still waits
    assert m.state == "awaiting_approval" and step.effects == []
    step = s.m.abort()
    s.checker.feed_all(step.events)
    assert names(step) == [
        "tool_execution_end:c1:error",
        "tool_execution_end:c2:error",
        "approval_decided:c3:denied",
        "tool_execution_end:c3:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "message_start:toolResult:c3",
        "message_end:toolResult:c3",
        "turn_end",
        "agent_end:aborted",
    ]
    assert decided(step, 2) == ("c3", False, ABORTED, "abort", None)
    assert step.effects == [] and m.finished and m.pending_approvals == []
    assert results(m) == {c: (ABORTED, True) for c in ("c1", "c2", "c3")}
    s.close()


def test_abort_while_a_call_waits_in_a_sequential_batch() -> None:
    s = Stepper("sequential")
    m = s.m
    s.to_tools(("c1", "ask", {"x": 1}), ("c2", "plain", {"x": 2}))
    step = s.m.abort()
    s.checker.feed_all(step.events)
    assert names(step) == [
        "approval_decided:c1:denied",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        "agent_end:aborted",
    ]
    assert decided(step) == ("c1", False, ABORTED, "abort", None)
    assert m.end_reason == "aborted" and m.pending_approvals == []
    assert results(m) == {"c1": (ABORTED, True), "c2": (ABORTED, True)}
    s.close()


def test_abort_while_the_callable_is_asked() -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "check", {"x": 1}))
    assert [c.state for c in m.tool_calls] == ["approving"]
    step = s.m.abort()
    s.checker.feed_all(step.events)
    assert names(step) == [
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        "agent_end:aborted",
    ]  # it was never asked for approval: no decision to tell
    s.close()


def test_a_failure_while_calls_wait_answers_them_then_the_failure_turn() -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "ask", {"x": 1}))
    step = s.m.fail(RuntimeError("emit broke"))
    s.checker.feed_all(step.events)
    assert names(step) == [
        "approval_decided:c1:denied",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        "turn_start",
        "message_start:assistant",
        "message_end:assistant",
        "turn_end",
        "agent_end:error",
    ]
    assert decided(step) == ("c1", False, ABORTED, "abort", None)
    assert m.new_messages[-1].error_message == "emit broke"
    s.close()


# --- wrong inputs: MachineInputError, nothing changes ------------------------------------------


def test_a_decision_for_a_call_that_does_not_wait_is_refused() -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "ask", {"x": 1}), ("c2", "plain", {"x": 2}))
    before = snapshot(m)
    with pytest.raises(MachineInputError) as info:
        m.feed(ApprovalDecided(1, True))
    assert info.value.input_name == "approval_decided" and info.value.state == "awaiting_approval"
    assert str(info.value) == (
        "approval_decided: tool call #1 (plain) is not waiting for a decision (it is 'ready')"
    )
    assert_unchanged(m, before)
    for index in (2, -1, True, "0", None):
        with pytest.raises(MachineInputError, match="names no tool call"):
            m.feed(ApprovalDecided(index, True))  # type: ignore[arg-type]
        assert_unchanged(m, before)
    # decided once: a second decision is refused too
    s.feed(ApprovalDecided(0, False, "no"))
    after = snapshot(m)
    with pytest.raises(MachineInputError):
        m.feed(ApprovalDecided(0, True))
    assert_unchanged(m, after)


@pytest.mark.parametrize(
    ("decision", "problem"),
    [
        (ApprovalDecided(0, "yes"), "approved must be a bool, not str 'yes'"),  # type: ignore[arg-type]
        (ApprovalDecided(0, 1), "approved must be a bool, not int 1"),  # type: ignore[arg-type]
        (ApprovalDecided(0, True, 7), "reason must be a str or None, not int 7"),  # type: ignore[arg-type]
        (
            ApprovalDecided(0, True, None, None),  # type: ignore[arg-type]
            "decided_by must be a str, not None",
        ),
        (ApprovalDecided(0, True, None, "me", [1]), "args must be a dict or None, not list [1]"),
    ],
)
def test_a_decision_with_junk_fields_is_refused(decision: ApprovalDecided, problem: str) -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "ask", {"x": 1}))
    before = snapshot(m)
    with pytest.raises(MachineInputError) as info:
        m.feed(decision)
    assert str(info.value) == f"approval_decided: tool call #0: {problem}"
    assert info.value.accepted == ["approval_decided", "approval_deferred", "abort", "fail"]
    assert_unchanged(m, before)
    step = s.feed(ApprovalDecided(0, True))  # the machine goes on as if nothing happened
    assert executed(step) == [(0, "c1", {"x": 1})]


def test_approval_inputs_are_refused_where_the_state_does_not_accept_them() -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "ask", {"x": 1}))
    s.feed(ApprovalDecided(0, True))
    assert m.state == "executing"
    before = snapshot(m)
    for bad in (ApprovalDecided(0, True), ApprovalChecked(0, True)):
        with pytest.raises(MachineInputError) as info:
            m.feed(bad)
        assert info.value.state == "executing" and "not accepted in state 'executing'" in str(
            info.value
        )
        assert_unchanged(m, before)
    fresh = LoopMachine(
        [user("go")], AgentContext("", [], list(TOOLS)), AgentLoopConfig(model=MODEL)
    )
    with pytest.raises(MachineInputError, match="not accepted in state 'idle'"):
        fresh.feed(ApprovalDecided(0, True))
    assert fresh.state == "idle" and fresh.history == []


def test_a_check_answer_for_a_call_that_is_not_asked_is_refused() -> None:
    s = Stepper()
    m = s.m
    s.to_tools(("c1", "check", {"x": 1}), ("c2", "check", {"x": 2}))
    before = snapshot(m)
    with pytest.raises(MachineInputError) as info:
        m.feed(ApprovalChecked(1, True))
    assert str(info.value) == (
        "approval_checked: tool call #1 (check) is not waiting for requires_approval (it is 'new')"
    )
    assert_unchanged(m, before)
    with pytest.raises(MachineInputError) as info:
        m.feed(ApprovalChecked(0, error="boom"))  # type: ignore[arg-type]
    assert str(info.value) == "approval_checked: error must be an exception, not str 'boom'"
    assert_unchanged(m, before)
    with pytest.raises(MachineInputError, match="not accepted in state 'preparing_tools'"):
        m.feed(ApprovalDecided(0, True))
    assert_unchanged(m, before)


# --- pending_approvals -------------------------------------------------------------------------


def test_pending_approvals_lists_the_waiting_requests_in_source_order() -> None:
    s = Stepper(before=True)
    m = s.m
    assert m.pending_approvals == []
    s.to_tools(("c1", "plain", {"x": 1}), ("c2", "ask", {"x": 2}), ("c3", "check", {"x": 3}))
    assert m.pending_approvals == []
    s.feed_hook(BeforeToolCallResult(require_approval=True, reason="first"), 0)
    r1 = request("c1", "plain", {"x": 1}, "first")
    assert m.pending_approvals == [r1]
    s.feed_hook(None, 1)
    r2 = request("c2", "ask", {"x": 2})
    assert m.pending_approvals == [r1, r2]
    step = s.feed_hook(None, 2)
    assert isinstance(step.effects[0], CheckApproval)
    step = s.feed(ApprovalChecked(2, True))
    r3 = request("c3", "check", {"x": 3})
    assert m.pending_approvals == [r1, r2, r3] and m.state == "awaiting_approval"
    s.feed(ApprovalDecided(1, True))
    assert m.pending_approvals == [r1, r3]
    pending = m.pending_approvals
    pending.clear()  # a copy
    assert m.pending_approvals == [r1, r3]
    s.feed(ApprovalDecided(2, False))
    assert m.pending_approvals == [r1]
    step = s.feed(ApprovalDecided(0, True))
    assert m.pending_approvals == [] and m.state == "executing"
    assert executed(step) == [(0, "c1", {"x": 1}), (1, "c2", {"x": 2})]
