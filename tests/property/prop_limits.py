"""Usage-limit runs stepped by hand, with a clock the runs control: the runs that take every
transition of the "usage limits" block of ``states/agent_loop.toml`` (the checks before a request
and before a tool batch, and the deadline's abort from every state an abort can come in), for
the coverage test and the mutant test (``LIMIT_RUNS``: name -> ``run(declaration, observer)``).

Each run steps a :class:`LoopMachine` through a small synchronous performer of its effects (the
model answers from a script, polls return what the run says, hooks return nothing, tools
succeed, approvals are granted); a deadline run feeds ``Abort`` at the deadline's time right
before the n-th effect would be answered, for every n. Every run is checked: the event grammar
and transcript invariants, and the end it must have (``reason="limit"`` naming the limit).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from limit_helpers import PRICED, usage_of

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    LoopMachine,
    TextContent,
    ToolCall,
    UsageLimits,
    UserMessage,
)
from agentcore_fsm.core.declaration import Declaration
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.events import StreamDone, StreamStart
from agentcore_fsm.core.limits import RunUsage
from agentcore_fsm.core.output import output_spec
from agentcore_fsm.core.protocol import (
    Abort,
    ApprovalChecked,
    ApprovalDecided,
    AwaitApproval,
    CallHook,
    CallModel,
    CheckApproval,
    ExecuteTool,
    FollowUpPolled,
    HookReturned,
    OutputChecked,
    PollFollowUp,
    PollSteering,
    Proceed,
    Proceeded,
    Start,
    SteeringPolled,
    StreamEvent,
    ToolFinished,
    ValidateOutput,
)
from agentcore_fsm.devtools.testing import check_run

Observer = Callable[[TransitionRecord], None] | None


async def _never(*args: Any) -> AgentToolResult:  # pragma: no cover - never run (stepped)
    return AgentToolResult(content=[TextContent(text="x")])


def _reply(n: int, calls: int) -> AssistantMessage:
    content: list[Any] = [TextContent(text="ok" if not calls else "calling")]
    content += [ToolCall(id=f"t{n}c{i}", name="count", arguments={}) for i in range(calls)]
    return AssistantMessage(
        content=content,
        api=PRICED.api,
        provider=PRICED.provider,
        model=PRICED.id,
        usage=usage_of(PRICED, 100, 20),
        stop_reason="toolUse" if calls else "stop",
    )


MAX_EFFECTS = 500
"""More effects than any run of this module asks for (the longest asks for a few dozen)."""


def step_run(
    decl: Declaration | None,
    observer: Observer,
    *,
    limits: UsageLimits,
    calls: list[int],
    abort_at: int | None = None,
    steering: list[list[str]] | None = None,
    follow_ups: list[list[str]] | None = None,
    hooks: bool = False,
    approval: bool = False,
    output: bool = False,
    output_tool: bool = False,
    trail: list[str] | None = None,
    nested_usage: RunUsage | None = None,
) -> tuple[list[Any], list[Any], LoopMachine]:
    """Step one run; ``calls``: the tool calls of each response (the last repeats); ``abort_at``:
    feed ``Abort`` at the deadline instead of answering the effect with that number."""
    tool = AgentTool(
        name="count", description="c", parameters={}, execute=_never, requires_approval=approval
    )
    steer = deque(steering or [])
    follow = deque(follow_ups or [])
    config = AgentLoopConfig(
        model=PRICED,
        limits=limits,
        get_steering_messages=(lambda: []) if steering is not None else None,
        get_follow_up_messages=(lambda: []) if follow_ups is not None else None,
        prepare_next_turn=(lambda ctx: None) if hooks else None,
        should_stop_after_turn=(lambda ctx: False) if hooks else None,
        before_tool_call=(lambda ctx: None) if hooks else None,
        after_tool_call=(lambda ctx: None) if hooks else None,
        output=output_spec(int, mode="tool" if output_tool else "native") if output else None,
    )
    m = LoopMachine(
        [UserMessage(content="go")], AgentContext(tools=[tool]), config, declaration=decl
    )
    clock = [1000]
    deadline = 1000 + int((limits.seconds or 3600) * 1000)
    events: list[Any] = []
    pending: deque[Any] = deque()
    responses = [0]

    def feed(item: Any) -> None:
        step = m.feed(item)
        if observer is not None:
            for record in step.transitions:
                observer(record)
        events.extend(step.events)
        pending.extend(step.effects)

    feed(Start(timestamp=clock[0]))
    n = performed = 0
    while not m.finished and pending:
        effect = pending.popleft()
        performed += 1
        if performed > MAX_EFFECTS:  # a mutant that loops: no run here asks for this many
            raise AssertionError(f"runaway: {performed} effects, state {m.state}")
        n += 1
        if trail is not None:
            trail.append(type(effect).__name__)
        clock[0] += 1
        now = clock[0]
        if abort_at is not None and n == abort_at:
            clock[0] = max(now, deadline)
            feed(Abort(timestamp=clock[0]))
            continue
        if isinstance(effect, PollSteering):
            feed(SteeringPolled(steer.popleft() if steer else [], timestamp=now))
        elif isinstance(effect, PollFollowUp):
            feed(FollowUpPolled(follow.popleft() if follow else [], timestamp=now))
        elif isinstance(effect, CallModel):
            k = responses[0]
            responses[0] += 1
            if output and output_tool:  # the answer is a call of the final-answer tool
                message = _reply(k, 0)
                answer = ToolCall(id=f"t{k}f", name="final_result", arguments={"response": 42})
                message.content = [TextContent(text="here"), answer]
                message.stop_reason = "toolUse"
            elif output:
                message = _reply(k, 0)
                message.content = [TextContent(text="42")]
            else:
                message = _reply(k, calls[min(k, len(calls) - 1)])
            feed(StreamEvent(StreamStart(partial=message), timestamp=now))
            if not m.finished:
                feed(
                    StreamEvent(
                        StreamDone(reason=message.stop_reason, message=message), timestamp=now
                    )
                )  # type: ignore[arg-type]
        elif isinstance(effect, CallHook):
            value = False if effect.name == "should_stop_after_turn" else None
            feed(HookReturned(effect.name, value, effect.index, timestamp=now))
        elif isinstance(effect, CheckApproval):
            feed(ApprovalChecked(effect.index, True, timestamp=now))
        elif isinstance(effect, AwaitApproval):
            feed(ApprovalDecided(effect.index, True, timestamp=now))
        elif isinstance(effect, ExecuteTool):
            result = AgentToolResult(content=[TextContent(text="done")], run_usage=nested_usage)
            feed(ToolFinished(effect.index, result, timestamp=now))
        elif isinstance(effect, Proceed):
            feed(Proceeded(timestamp=now))
        elif isinstance(effect, ValidateOutput):
            feed(OutputChecked(42, timestamp=now))
        else:  # pragma: no cover - a new effect: this performer must learn it
            raise AssertionError(f"unexpected effect {effect!r}")
    assert m.finished, f"the run did not end (state {m.state})"
    messages = list(m.new_messages)
    check_run(events, messages)
    return events, messages, m


def _summary(events: list[Any], messages: list[Any]) -> tuple[Any, ...]:
    """What a person sees of a run: its event types and each message's role, stop reason,
    error text and text content."""
    texts = [
        (
            getattr(m, "role", None),
            getattr(m, "stop_reason", None),
            getattr(m, "error_message", None),
            tuple(getattr(b, "text", None) for b in getattr(m, "content", ()) or ()),
        )
        for m in messages
    ]
    return tuple(e.type for e in events), tuple(texts)


def _deadline_runs(decl: Declaration | None, observer: Observer, **kwargs: Any) -> None:
    """Abort at the deadline before each effect in turn: the run ends with the deadline. On
    another declaration than the real one (a mutant), each run must also look exactly like the
    real declaration's run of the same script cut at the same point (a differential check:
    the real machine's run is the documented behaviour, docs/policies.md, "How a run ends at a
    limit")."""
    limits = UsageLimits(seconds=5)
    _, _, whole = step_run(decl, observer, limits=limits, **kwargs)
    total = 40
    for n in range(1, total):
        took: list[str] = []
        events, messages, m = step_run(
            decl, observer, limits=limits, abort_at=n, trail=took, **kwargs
        )
        if decl is not None:
            real: list[str] = []
            real_events, real_messages, _ = step_run(
                None, None, limits=limits, abort_at=n, trail=real, **kwargs
            )
            # comparable only when both asked for the same effects up to the cut (a mutant
            # that adds a round trip, e.g. through closing_turn, moves every later cut)
            if took[:n] == real[:n]:
                assert _summary(events, messages) == _summary(real_events, real_messages), n
        if m.end_reason != "limit":
            # the run had ended before that effect: nothing to abort
            assert events[-1].reason == whole.end_reason, n
            continue
        end = events[-1]
        assert end.limit is not None and end.limit.limit == "seconds", n
        assert end.limit.where == "deadline" and end.limit.used >= 5, n


def _budget_runs(decl: Declaration | None, observer: Observer) -> None:
    # a batch over the tool-call limit: not run, every call answered, reason limit
    events, messages, m = step_run(decl, observer, limits=UsageLimits(tool_calls=3), calls=[2])
    end = events[-1]
    assert m.end_reason == "limit" and end.limit.limit == "tool_calls"
    assert end.limit.where == "before_tools" and end.usage.tool_calls == 2
    refused = [x for x in messages if getattr(x, "role", "") == "toolResult" and x.is_error]
    assert len(refused) == 2
    # a request over the input budget: the turn closes before it, reason limit
    events, messages, m = step_run(decl, observer, limits=UsageLimits(input_tokens=150), calls=[1])
    end = events[-1]
    assert m.end_reason == "limit" and end.limit.where == "before_request"
    assert messages[-1].stop_reason == "aborted" and end.usage.requests == 1


def _nested_usage_runs(decl: Declaration | None, observer: Observer) -> None:
    # a tool result's run_usage (a nested run's, docs/multi-agent.md) counts as the run's own
    nested = RunUsage(requests=2, turns=2, tool_calls=1, input_tokens=10)
    events, _, m = step_run(
        decl, observer, limits=UsageLimits(requests=5), calls=[1], nested_usage=nested
    )
    end = events[-1]
    assert m.end_reason == "limit" and end.limit.limit == "requests"
    # request 1, its tool's 2, request 2, its tool's 2: the third request would be the 7th
    assert end.usage.requests == 6 and end.usage.tool_calls == 4 and end.usage.turns == 6


LIMIT_RUNS: dict[str, Callable[[Declaration | None, Observer], None]] = {
    "budgets": _budget_runs,
    "nested usage": _nested_usage_runs,
    "deadline, plain": lambda d, o: _deadline_runs(d, o, calls=[1, 0]),
    "deadline, hooks and polls": lambda d, o: _deadline_runs(
        d, o, calls=[2, 0], hooks=True, steering=[[], ["steer"]], follow_ups=[["more"]]
    ),
    "deadline, hooks": lambda d, o: _deadline_runs(d, o, calls=[1, 0], hooks=True),
    "deadline, polls": lambda d, o: _deadline_runs(
        d, o, calls=[1, 0], steering=[[], [], []], follow_ups=[["more"]]
    ),
    "deadline, approval": lambda d, o: _deadline_runs(d, o, calls=[1, 0], approval=True),
    "deadline, output": lambda d, o: _deadline_runs(d, o, calls=[0], output=True),
    "deadline, output tool": lambda d, o: _deadline_runs(
        d, o, calls=[0], output=True, output_tool=True
    ),
}
