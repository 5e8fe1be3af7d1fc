"""A hypothesis rule-based state machine that steps the sans-IO ``LoopMachine`` directly.

No event loop: each rule feeds one input. Rules only fire inputs the machine is waiting for (an
effect it asked for, a stream event while it streams, an abort or failure where the declaration
accepts one), so random walks reach every phase; one rule feeds deliberately invalid inputs (those
the declaration says the current state does not accept), which must raise ``MachineInputError``
naming the state and what it accepts, and change nothing. After every step: the event grammar so
far holds (``GrammarChecker``), the state and the pending effects agree with the declaration, the
machine is never stuck, and a finished run closes the grammar with ``agent_end``.

Approval of tool calls: tools that need approval (always, or as their ``requires_approval``
callable says) and a before hook that asks for it; the rules ``check_approval`` and ``decide``
feed ``ApprovalChecked`` / ``ApprovalDecided`` only where they are accepted (approve, with changed
arguments valid or not, deny), ``bad_approval_input`` feeds them wrong ones (junk fields, a call
that does not wait), which must raise ``MachineInputError`` and change nothing; after every step
``pending_approvals`` is the requests of the calls that wait, and no call runs meanwhile.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from prop_coverage import record_transition
from transition_watch import watch_transitions

from agentcore_fsm import (
    AbortController,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    BeforeToolCallResult,
    LoopMachine,
    Model,
    TextContent,
    ToolCall,
    UserMessage,
)
from agentcore_fsm.core.config import AgentLoopTurnUpdate
from agentcore_fsm.core.declaration import load_declaration
from agentcore_fsm.core.declared import MachineInputError
from agentcore_fsm.core.events import (
    StreamDone,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCallEnd,
    ToolCallStart,
)
from agentcore_fsm.core.protocol import (
    ApprovalChecked,
    ApprovalDecided,
    ApprovalDeferred,
    CallHook,
    CallModel,
    ExecuteTool,
    HookFailed,
    HookReturned,
    OutputChecked,
    RetryDue,
    Step,
    ToolAttemptFailed,
    ToolTimedOut,
)
from agentcore_fsm.devtools.testing import GrammarChecker, sequential_tool_names

AFTER_SIGNAL = frozenset(
    {"PollSteering", "PollFollowUp", "ExecuteTool", "after_tool_call", "AwaitApproval"}
)
DECL = load_declaration("agent_loop")
MODEL = Model(id="m", provider="p")
SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def _never(*args: Any) -> Any:  # pragma: no cover - the machine never calls what it is given
    raise AssertionError("the sans-IO machine must not call hooks or tools itself")


TOOLS = [
    AgentTool("calc", "calc", SCHEMA, _never),
    AgentTool("calc_seq", "calc", SCHEMA, _never, execution_mode="sequential"),
    AgentTool("calc_prep", "calc", SCHEMA, _never, prepare_arguments=_never),
    AgentTool("calc_ask", "calc", SCHEMA, _never, requires_approval=True),
    AgentTool("calc_check", "calc", SCHEMA, _never, requires_approval=_never),
    AgentTool(
        "calc_prep_ask", "calc", SCHEMA, _never, prepare_arguments=_never, requires_approval=True
    ),
]

# what each effect may only be pending in (a call waits for its decision from the moment it
# asks; in a parallel batch the later calls are prepared meanwhile)
EFFECT_STATES = {
    "PollSteering": {"awaiting_steering", "awaiting_steering_again"},
    "PollFollowUp": {"awaiting_follow_up"},
    "CallModel": {"streaming"},
    "before_tool_call": {"preparing_tools"},
    "PrepareArguments": {"preparing_tools"},
    "CheckApproval": {"preparing_tools"},
    "AwaitApproval": {"preparing_tools", "awaiting_approval"},
    "after_tool_call": {"executing"},
    "ExecuteTool": {"executing"},
    "prepare_next_turn": {"preparing_next_turn"},
    "should_stop_after_turn": {"deciding_stop"},
    "Proceed": {"closing_turn"},
}
CONCURRENT = frozenset({"ExecuteTool", "after_tool_call", "AwaitApproval"})
# answered by their own rules (check_approval, decide), not by serve
APPROVAL_EFFECTS = frozenset({"CheckApproval", "AwaitApproval"})


# the input that answers each effect
ANSWERED_BY = {
    "PollSteering": "steering_polled",
    "PollFollowUp": "follow_up_polled",
    "CallModel": "stream_event",
    "before_tool_call": "hook_returned",
    "PrepareArguments": "arguments_prepared",
    "after_tool_call": "hook_returned",
    "ExecuteTool": "tool_finished",
    "CheckApproval": "approval_checked",
    "AwaitApproval": "approval_decided",
    "prepare_next_turn": "next_turn_prepared",
    "should_stop_after_turn": "stop_decided",
    "Proceed": "proceeded",
}


def effect_kind(effect: Any) -> str:
    if isinstance(effect, CallHook):
        return effect.name
    return type(effect).__name__


INVALID_CALLS: dict[str, Any] = {
    "start": lambda m: m.start(),
    "steering_polled": lambda m: m.steering_polled([]),
    "follow_up_polled": lambda m: m.follow_up_polled([]),
    "stream_event": lambda m: m.stream_event(StreamStart(partial=AssistantMessage())),
    "stream_exhausted": lambda m: m.stream_exhausted(),
    "hook_returned": lambda m: m.feed(HookReturned("before_tool_call", None, 0)),
    "hook_failed": lambda m: m.feed(HookFailed("before_tool_call", RuntimeError("x"), 0)),
    "next_turn_prepared": lambda m: m.feed(HookReturned("prepare_next_turn", None)),
    "stop_decided": lambda m: m.feed(HookReturned("should_stop_after_turn", False)),
    "arguments_prepared": lambda m: m.arguments_prepared(0, {"x": 1}),
    "approval_checked": lambda m: m.feed(ApprovalChecked(0, True)),
    "approval_decided": lambda m: m.feed(ApprovalDecided(0, True)),
    "approval_deferred": lambda m: m.feed(ApprovalDeferred(0)),
    "tool_update": lambda m: m.tool_update(0, AgentToolResult()),
    "tool_finished": lambda m: m.tool_finished(0, result=AgentToolResult()),
    "proceeded": lambda m: m.proceed(),
    "abort": lambda m: m.abort(),
    "fail": lambda m: m.fail(RuntimeError("x")),
    "output_checked": lambda m: m.feed(OutputChecked(value=1)),
    "tool_attempt_failed": lambda m: m.feed(ToolAttemptFailed(0, RuntimeError("x"))),
    "tool_timed_out": lambda m: m.feed(ToolTimedOut(0)),
    "retry_due": lambda m: m.feed(RetryDue(0)),
    "context_compacted": lambda m: m.feed(HookReturned("compact", [])),
}


class LoopWalk(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.m: LoopMachine | None = None

    # --- building ---------------------------------------------------------------------------

    @initialize(
        steering=st.booleans(),
        follow_up=st.booleans(),
        before=st.booleans(),
        after=st.booleans(),
        prepare=st.booleans(),
        should_stop=st.booleans(),
        sequential=st.booleans(),
        prompts=st.integers(0, 2),
        # steps without abort, signal or failure; shrinks towards long calm walks
        calm=st.integers(0, 30).map(lambda n: 30 - n),
        started=st.sampled_from([True, True, True, False]),
    )
    def build(
        self,
        steering: bool,
        follow_up: bool,
        before: bool,
        after: bool,
        prepare: bool,
        should_stop: bool,
        sequential: bool,
        prompts: int,
        calm: int,
        started: bool,
    ) -> None:
        config = AgentLoopConfig(
            model=MODEL,
            tool_execution="sequential" if sequential else "parallel",
            get_steering_messages=_never if steering else None,
            get_follow_up_messages=_never if follow_up else None,
            before_tool_call=_never if before else None,
            after_tool_call=_never if after else None,
            prepare_next_turn=_never if prepare else None,
            should_stop_after_turn=_never if should_stop else None,
        )
        history = [UserMessage(content="before")] if prompts == 0 else []
        self.controller = AbortController()
        self.m = LoopMachine(
            [UserMessage(content=f"p{i}") for i in range(prompts)],
            AgentContext("", history, list(TOOLS)),
            config,
        )
        watch_transitions(self.m, record_transition)
        self.checker = GrammarChecker(
            tool_execution="sequential" if sequential else "parallel",
            sequential_tools=sequential_tool_names(TOOLS),
        )
        self.pending: list[Any] = []
        self.at_signal: set[int] = set()  # ids of the effects pending when the signal fired
        self.partial: AssistantMessage | None = None
        self.closed = False
        self.calls = 0
        self.steps = 0
        self.calm = calm  # no abort, signal or failure in the first `calm` steps
        if started:  # most walks start at once (the `start` rule covers the others)
            self.take(self.m.start())

    # --- helpers ----------------------------------------------------------------------------

    @property
    def machine(self) -> LoopMachine:
        assert self.m is not None
        return self.m

    def take(self, step: Step, consumed: Any = None) -> None:
        self.steps += 1
        if consumed is not None:
            self.pending = [e for e in self.pending if e is not consumed]
        for event in step.events:
            self.checker.feed(event)
        if self.machine.finished:
            self.pending = []
        else:
            self.pending.extend(step.effects)

    def signalled(self) -> bool:
        return self.controller.signal.aborted

    def pending_of(self, kind: str) -> list[Any]:
        live = [e for e in self.pending if effect_kind(e) == kind]
        if self.signalled():  # after the signal only what was already under way may report
            live = [e for e in live if id(e) in self.at_signal and kind != "CallModel"]
        return live

    def has(self, kind: str) -> bool:
        return self.m is not None and bool(self.pending_of(kind))

    # --- progress: answer what the machine asked for -----------------------------------------

    @precondition(lambda self: self.m is not None and self.m.state == "idle")
    @rule()
    def start(self) -> None:
        self.take(self.machine.start())

    @precondition(lambda self: self.m is not None and bool(self.servable()))
    @rule(data=st.data())
    def serve(self, data: st.DataObject) -> None:
        """Answer one pending effect (any of them: tools finish in any order)."""
        effect = data.draw(st.sampled_from(self.servable()), label="effect")
        kind = effect_kind(effect)
        m = self.machine
        assert ANSWERED_BY[kind] in m.accepted_inputs(), (kind, m.state)
        if kind in ("PollSteering", "PollFollowUp"):
            n = data.draw(st.sampled_from([0, 0, 1, 2]), label="messages")
            polled = [UserMessage(content=f"{kind} {i}") for i in range(n)]
            feed = m.steering_polled if kind == "PollSteering" else m.follow_up_polled
            # a poll that comes back after the signal fired says so (its messages are kept)
            self.take(feed(polled, aborted=self.signalled()), effect)
        elif kind == "CallModel":
            self.stream(data, effect)
        elif kind == "before_tool_call":
            outcome = data.draw(st.sampled_from(["pass", "pass", "block", "raise", "ask"]))
            if outcome == "raise":
                step = m.hook_failed(RuntimeError("before failed"), effect.index)
            else:
                value = {
                    "block": BeforeToolCallResult(block=True),
                    "ask": BeforeToolCallResult(require_approval=True, reason="hook asks"),
                }.get(outcome)
                step = m.hook_returned(value, effect.index)
            self.take(step, effect)
        elif kind == "PrepareArguments":
            outcome = data.draw(st.sampled_from(["same", "same", "junk", "raise"]))
            if outcome == "raise":
                step = m.arguments_prepared(effect.index, error=RuntimeError("prepare failed"))
            else:
                value = effect.raw if outcome == "same" else "not arguments"
                step = m.arguments_prepared(effect.index, value)
            self.take(step, effect)
        elif kind == "after_tool_call":
            outcome = data.draw(st.sampled_from(["pass", "pass", "override", "raise"]))
            if outcome == "raise":
                step = m.hook_failed(RuntimeError("after failed"), effect.index)
            else:
                value = AfterToolCallResult(is_error=True) if outcome == "override" else None
                step = m.hook_returned(value, effect.index)
            self.take(step, effect)
        elif kind == "ExecuteTool":
            self.run_tool(data, effect)
        elif kind == "prepare_next_turn":
            change = data.draw(st.sampled_from([None, None, "high", "off"]))
            value = AgentLoopTurnUpdate(thinking_level=change) if change else None  # type: ignore[arg-type]
            self.take(m.hook_returned(value), effect)
        elif kind == "should_stop_after_turn":
            self.take(m.hook_returned(data.draw(st.sampled_from([False, False, True]))), effect)
        elif kind == "Proceed":
            self.take(m.proceed(), effect)  # type: ignore[attr-defined]
        else:  # pragma: no cover - a new effect: teach this test about it
            raise AssertionError(f"unknown effect {effect!r}")

    def servable(self) -> list[Any]:
        if self.m is None or self.m.finished:
            return []
        if self.signalled():
            # only what was under way when the signal fired may report, and only what the
            # driver still feeds then: poll results and tool outcomes (a hook's answer or the
            # model's events after the signal are dropped for the abort)
            return [
                e
                for e in self.pending
                if id(e) in self.at_signal
                and effect_kind(e) in AFTER_SIGNAL
                and effect_kind(e) not in APPROVAL_EFFECTS
            ]
        return [e for e in self.pending if effect_kind(e) not in APPROVAL_EFFECTS]

    # --- approval: fed only where accepted ---------------------------------------------------

    def call_of(self, index: int) -> Any:
        return self.machine.tool_calls[index]

    @precondition(
        lambda self: (
            # (the driver drops what requires_approval answers once the signal fired)
            not self.signalled()
            and self.has("CheckApproval")
            and "approval_checked" in self.machine.accepted_inputs()
        )
    )
    @rule(data=st.data())
    def check_approval(self, data: st.DataObject) -> None:
        """The tool's requires_approval returned (a bool, or junk) or raised."""
        effect = data.draw(st.sampled_from(self.pending_of("CheckApproval")), label="check")
        m = self.machine
        c = self.call_of(effect.index)
        assert c.state == "approving" and effect.tool is c.tool and effect.args == c.args
        outcome = data.draw(st.sampled_from(["yes", "yes", "no", "raise", "junk"]))
        if outcome == "raise":
            step = m.feed(ApprovalChecked(effect.index, error=RuntimeError("check failed")))
        else:
            needed = {"yes": True, "no": False, "junk": 1}[outcome]
            step = m.feed(ApprovalChecked(effect.index, needed))
        self.take(step, effect)
        first = step.events[0] if step.events else None
        cid = c.call.id
        if outcome == "yes":
            assert c.state == "awaiting_approval" and first is not None
            assert (first.type, first.tool_call_id, first.args) == (
                "approval_requested",
                cid,
                c.args,
            )
            assert first.reason == f'Tool "{c.call.name}" requires approval'
        elif outcome == "no":
            assert c.state in ("ready", "running"), c.state
        else:
            assert c.state in ("ended", "answered") and first is not None
            assert (first.type, first.tool_call_id, first.is_error) == (
                "tool_execution_end",
                cid,
                True,
            )
            text = first.result.content[0].text
            what = "raised: check failed" if outcome == "raise" else "returned int 1"
            assert text.startswith(f'requires_approval of tool "{c.call.name}" {what}'), text

    @precondition(
        lambda self: (
            self.has("AwaitApproval") and "approval_decided" in self.machine.accepted_inputs()
        )
    )
    @rule(data=st.data())
    def decide(self, data: st.DataObject) -> None:
        """A decision about a call that waits: approve (maybe with changed arguments, valid or
        not) or deny."""
        effect = data.draw(st.sampled_from(self.pending_of("AwaitApproval")), label="waiting")
        m = self.machine
        c = self.call_of(effect.index)
        request = effect.request
        assert c.state == "awaiting_approval" and request in m.pending_approvals
        assert (request.tool_call_id, request.args) == (c.call.id, c.args)
        kind = data.draw(st.sampled_from(["approve", "approve", "args", "bad_args", "deny"]))
        args = {"args": {"x": 41}, "bad_args": {"x": "?"}}.get(kind)
        reason = "no" if kind == "deny" else None
        step = m.feed(ApprovalDecided(effect.index, kind != "deny", reason, "walker", args))
        self.take(step, effect)
        decided = step.events[0]
        assert decided.type == "approval_decided" and decided.tool_call_id == c.call.id
        assert (decided.approved, decided.reason, decided.decided_by, decided.args) == (
            kind != "deny",
            reason,
            "walker",
            args,
        )
        assert request not in m.pending_approvals
        if kind in ("deny", "bad_args"):
            end = step.events[1]
            assert end.type == "tool_execution_end" and end.is_error
            text = end.result.content[0].text
            if kind == "deny":
                assert text == f'Tool call "{c.call.name}" was denied: no'
            else:
                assert text.startswith(f'Validation failed for tool "{c.call.name}"'), text
        else:
            assert c.args == (args or request.args)

    @precondition(
        lambda self: (
            self.m is not None
            and not self.m.finished
            and any(n in self.m.accepted_inputs() for n in ("approval_checked", "approval_decided"))
        )
    )
    @rule(data=st.data())
    def bad_approval_input(self, data: st.DataObject) -> None:
        """Approval inputs with wrong data: a call that does not wait for it, an index that
        names no call, junk fields. Each raises MachineInputError and changes nothing."""
        m = self.machine
        calls = m.tool_calls
        waiting = [c.index for c in calls if c.state == "awaiting_approval"]
        approving = [c.index for c in calls if c.state == "approving"]
        others = [c.index for c in calls if c.state not in ("awaiting_approval", "approving")]
        choices: list[Any] = [
            ApprovalDecided(len(calls), True),
            ApprovalDecided(True, True),  # type: ignore[arg-type]
            ApprovalChecked(-1, True),
        ]
        for i in others:
            choices += [ApprovalDecided(i, True), ApprovalChecked(i, True)]
        for i in waiting:
            choices += [
                ApprovalDecided(i, "yes"),  # type: ignore[arg-type]
                ApprovalDecided(i, True, reason=3),  # type: ignore[arg-type]
                ApprovalDecided(i, False, decided_by=None),  # type: ignore[arg-type]
                ApprovalDecided(i, True, args=[1]),
                ApprovalChecked(i, True),
            ]
        for i in approving:
            choices += [
                ApprovalChecked(i, error="not an exception"),  # type: ignore[arg-type]
                ApprovalDecided(i, True),
            ]
        bad = data.draw(st.sampled_from(choices), label="bad input")
        state, history, pending = m.state, list(m.history), list(self.pending)
        call_states = [(c.state, list(c.history)) for c in calls]
        requests = list(m.pending_approvals)
        try:
            m.feed(bad)
        except MachineInputError as exc:
            name = "approval_decided" if isinstance(bad, ApprovalDecided) else "approval_checked"
            assert exc.input_name == name and exc.state == state, exc
        else:
            raise AssertionError(f"{bad!r} was accepted in state {state!r}")
        assert m.state == state and m.history == history and self.pending == pending
        assert [(c.state, list(c.history)) for c in m.tool_calls] == call_states
        assert m.pending_approvals == requests

    def run_tool(self, data: st.DataObject, effect: ExecuteTool) -> None:
        m = self.machine
        for _ in range(data.draw(st.integers(0, 2), label="updates")):
            self.take(m.tool_update(effect.index, AgentToolResult(content=[TextContent(text="…")])))
        outcome = data.draw(
            st.sampled_from(["ok", "ok", "error_flag", "terminate", "raise", "bad"])
        )
        if outcome == "raise":
            step = m.tool_finished(
                effect.index, error=RuntimeError("tool failed"), aborted=self.signalled()
            )
        elif outcome == "bad":
            step = m.tool_finished(effect.index, result="not a result", aborted=self.signalled())
        else:
            result = AgentToolResult(
                content=[TextContent(text="done")],
                is_error=True if outcome == "error_flag" else None,
                terminate=True if outcome == "terminate" else None,
            )
            step = m.tool_finished(effect.index, result=result, aborted=self.signalled())
        self.take(step, effect)
        # an update after the call settled is ignored
        if not m.finished and "tool_update" in m.accepted_inputs():
            late = m.tool_update(effect.index, AgentToolResult(content=[TextContent(text="late")]))
            assert not late.events and not late.effects
            self.take(late)

    def stream(self, data: st.DataObject, effect: CallModel) -> None:
        """One model call: a stream of events, maybe cut short by an abort, a failure or a
        stream that just stops."""
        m = self.machine
        partial = AssistantMessage(stop_reason="pending")
        events: list[Any] = []
        if data.draw(st.sampled_from([True, True, True, False]), label="start first"):
            events.append(StreamStart(partial=partial))
        for n in range(data.draw(st.integers(0, 3), label="blocks")):
            index = len(partial.content)
            if data.draw(st.booleans(), label="tool call"):
                self.calls += 1
                name = data.draw(
                    st.sampled_from(
                        [
                            "calc",
                            "calc",
                            "calc_seq",
                            "calc_prep",
                            "missing",
                            "calc_ask",
                            "calc_ask",
                            "calc_check",
                            "calc_check",
                            "calc_prep_ask",
                        ]
                    )
                )
                valid = data.draw(st.sampled_from([True, True, False]))
                call = ToolCall(
                    id=f"c{self.calls}", name=name, arguments={"x": 1 if valid else "?"}
                )
                partial.content.append(call)
                events += [
                    ToolCallStart(content_index=index, partial=partial),
                    ToolCallEnd(content_index=index, tool_call=call, partial=partial),
                ]
            else:
                block = TextContent(text=f"text {n}")
                partial.content.append(block)
                events += [
                    TextStart(content_index=index, partial=partial),
                    TextDelta(content_index=index, delta=block.text, partial=partial),
                    TextEnd(content_index=index, content=block.text, partial=partial),
                ]
            if not events or events[0].type != "start":
                if data.draw(st.integers(0, 3), label="late start") == 0:
                    events.append(StreamStart(partial=partial))
        stop = data.draw(
            st.sampled_from(
                ["auto", "auto", "auto", "stop", "toolUse", "length", "error", "aborted"]
            )
        )
        final = partial.model_copy(deep=True)
        if stop == "auto":
            stop = "toolUse" if final.tool_calls() else "stop"
        final.stop_reason = stop  # type: ignore[assignment]
        if stop in ("error", "aborted"):
            final.error_message = "model failed"
            events.append(StreamError(reason=stop, error=final))  # type: ignore[arg-type]
        else:
            events.append(StreamDone(reason=stop, message=final))  # type: ignore[arg-type]
        cut = len(events)
        if self.restless():
            cut = data.draw(st.integers(0, len(events) * 3), label="cut")
        for i, event in enumerate(events):
            if i == cut:
                how = data.draw(st.sampled_from(["abort", "fail", "exhausted"]), label="cut by")
                if how == "abort":
                    self.controller.abort("walk")
                    self.take(m.abort(), effect)
                elif how == "fail":
                    self.take(m.fail(RuntimeError("stream raised")), effect)
                else:
                    self.take(m.stream_exhausted(), effect)
                return
            step = m.stream_event(event)
            done = m.state != "streaming"
            self.take(step, effect if done else None)
            if done:
                return
        raise AssertionError("the terminal stream event did not end the model call")

    # --- abort and failure ------------------------------------------------------------------

    def restless(self) -> bool:
        return self.m is not None and self.steps >= self.calm and not self.m.finished

    @precondition(lambda self: self.restless() and not self.signalled())
    @rule()
    def signal_fires(self) -> None:
        """The signal fires; what is under way may still report before ``abort`` is fed."""
        self.at_signal = {id(e) for e in self.pending}
        self.controller.abort("walk")

    @precondition(
        lambda self: (
            self.restless()
            and self.machine.state != "idle"
            and "abort" in self.machine.accepted_inputs()
        )
    )
    @rule()
    def abort(self) -> None:
        if not self.signalled():
            self.controller.abort("walk")
        self.take(self.machine.abort())

    @precondition(
        lambda self: (
            self.restless()
            and self.machine.state != "idle"
            and "fail" in self.machine.accepted_inputs()
        )
    )
    @rule()
    def fail(self) -> None:
        self.take(self.machine.fail(RuntimeError("emit failed")))

    # --- invalid inputs ---------------------------------------------------------------------

    @precondition(
        lambda self: (
            self.m is not None and any(name not in self.m.accepted_inputs() for name in DECL.inputs)
        )
    )
    @rule(data=st.data())
    def invalid_input(self, data: st.DataObject) -> None:
        m = self.machine
        accepted = m.accepted_inputs()
        name = data.draw(st.sampled_from([n for n in DECL.inputs if n not in accepted]))
        state, history, pending = m.state, list(m.history), list(self.pending)
        try:
            INVALID_CALLS[name](m)
        except MachineInputError as exc:
            assert exc.input_name == name and exc.state == state
            assert exc.accepted == accepted
            assert repr(state) in str(exc) and name in str(exc)
        else:
            raise AssertionError(f"{name} was accepted in state {state!r}")
        assert m.state == state and m.history == history and self.pending == pending

    # --- invariants -------------------------------------------------------------------------

    @invariant()
    def state_and_effects_agree_with_the_declaration(self) -> None:
        if self.m is None:
            return
        m = self.m
        assert m.state in DECL.states
        assert m.accepted_inputs() == DECL.accepted_inputs(m.state)
        for effect in self.pending:
            kind = effect_kind(effect)
            assert m.state in EFFECT_STATES[kind], f"{kind} pending in {m.state}"
        mains = [e for e in self.pending if effect_kind(e) not in CONCURRENT]
        assert len(mains) <= 1, mains
        # the requests of the calls that wait for a decision, in source order; none runs then
        waits = sorted(
            (e for e in self.pending if effect_kind(e) == "AwaitApproval"), key=lambda e: e.index
        )
        assert m.pending_approvals == [e.request for e in waits]
        if waits:
            kinds = {effect_kind(e) for e in self.pending}
            assert not kinds & {"ExecuteTool", "after_tool_call"}, kinds
            assert mains or m.state == "awaiting_approval" or self.signalled(), m.state
        if m.state in ("idle", DECL.final):
            return
        # never stuck: the machine waits for something the outside world will answer
        assert self.pending or self.signalled(), f"stuck in {m.state} with nothing pending"

    @invariant()
    def history_follows_the_declaration(self) -> None:
        if self.m is None:
            return
        state = DECL.initial
        for record in self.m.history:
            spec = DECL.transitions[record.index]
            assert record.source == state and record.source in spec.source
            assert record.trigger == spec.trigger and record.dest == spec.dest
            state = record.dest
        assert state == self.m.state

    @invariant()
    def a_finished_run_closes_the_grammar(self) -> None:
        if self.m is None or not self.m.finished or self.closed:
            return
        summary = self.checker.close(self.m.new_messages)
        assert summary.reason == self.m.end_reason
        if self.signalled() and self.m.history[-1].trigger == "abort":
            assert summary.reason == "aborted"
        self.closed = True

    @invariant()
    def pending_tool_calls_are_started_and_not_ended(self) -> None:
        if self.m is None:
            return
        message = self.m.turn_message
        ids = {c.id for c in message.tool_calls()} if message is not None else set()
        assert set(self.m.pending_tool_calls) <= ids


LoopWalk.TestCase.settings = settings(
    settings.default,
    max_examples=settings.default.max_examples * 2,
    stateful_step_count=80,
)
TestLoopWalk = LoopWalk.TestCase
