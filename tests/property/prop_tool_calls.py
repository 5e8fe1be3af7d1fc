"""Tool-call cases: one assistant message's tool calls, stepped through the sans-IO
:class:`LoopMachine` by hand, against an oracle of what each call yields.

The scenario bank of ``prop_bank`` runs tools through the property harness, whose tools have no
``prepare_arguments``; a :class:`CallCase` reaches every part of the per-call machine
(``states/tool_call.toml``): tools with and without ``prepare_arguments`` (which fixes, spoils or
raises), the before/after hooks (pass, block, override, raise, ask for approval), tools that need
approval (always, or as their ``requires_approval`` says: yes, no, raise, junk) and the decisions
(approve, approve with changed arguments, valid or not, deny), missing tools and invalid
arguments, parallel or sequential batches finished in any order, a truncated message, and an
abort or a failure of the run at any effect (optionally after the pending tools reported back
past the signal).

:func:`run_case` steps one case with a small synchronous stepper and checks, besides the event
grammar (``GrammarChecker``, in the batch's mode) and the run's end reason:

* each call's result message (text, ``is_error``) is the one :func:`expect` reads off the case,
  or ``Operation aborted`` when the run was cut before that call had all it needs;
* each call asks for exactly the effects :func:`expect` lists (prepare, before, the approval
  check, the wait for a decision, execute, after), in that order, with the arguments it should
  have by then (prepared, validated, changed by the approver);
* a call asked for approval emits ``approval_requested`` with the validated arguments and the
  reason, then ``approval_decided`` with the decision (the abort's when the run was cut while it
  waited); ``LoopMachine.pending_approvals`` is always the requests of the calls that wait, and
  no call of a batch runs while one waits;
* every effect is pending only in the loop state that performs it, at most one effect besides
  the running tools and their after hooks is pending at a time, and the run never gets stuck;
* every call's machine ends in its final state.

``decl`` runs the calls on another tool-call declaration (a mutant); every call's machine is
watched (:func:`watch_calls`), so that a machine that loops is stopped (:class:`Runaway`) and
its transitions can be recorded for the coverage test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from prop_coverage import record_call_transition, record_transition
from transition_watch import watch_transitions

from agentcore_fsm import (
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
from agentcore_fsm.core.declaration import Declaration
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.events import StreamDone
from agentcore_fsm.core.protocol import ApprovalChecked, ApprovalDecided, CallHook, Step
from agentcore_fsm.devtools.testing import GrammarChecker

MODEL = Model(id="m", provider="p", api="a")
SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
PLAIN, PREP, SEQ, MISSING = "calc", "calc_prep", "calc_seq", "missing"
ABORTED = "Operation aborted"
TRUNCATED = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its '
    "arguments may be truncated. Re-issue the tool call with complete arguments."
)
MAX_STEPS = 200
MAX_CALL_TRANSITIONS = 50  # a call's lifecycle takes at most 7


def _never(*args: Any) -> Any:  # pragma: no cover - the stepper answers every effect itself
    raise AssertionError("the sans-IO machine must not call tools or hooks itself")


# a tool's requires_approval: none (False), always (True) or check (a callable, asked by the
# CheckApproval effect); the name of a tool that needs approval says which
APPROVAL_SUFFIX = {"none": "", "always": "_ask", "check": "_check"}


def _tools() -> list[AgentTool]:
    tools = []
    for approval, suffix in APPROVAL_SUFFIX.items():
        requires: Any = {"none": False, "always": True, "check": _never}[approval]
        tools += [
            AgentTool(PLAIN + suffix, "calc", SCHEMA, _never, requires_approval=requires),
            AgentTool(
                PREP + suffix,
                "calc, arguments prepared",
                SCHEMA,
                _never,
                prepare_arguments=_never,
                requires_approval=requires,
            ),
            AgentTool(
                SEQ + suffix,
                "calc, sequential",
                SCHEMA,
                _never,
                execution_mode="sequential",
                requires_approval=requires,
            ),
        ]
    return tools


TOOLS = _tools()
SEQUENTIAL = {SEQ + suffix for suffix in APPROVAL_SUFFIX.values()}

# the loop states that perform each effect (the only states it may be pending in): a call waits
# for its decision from the moment it asks (in a parallel batch the other calls are prepared
# meanwhile) until the loop, waiting for every decision, feeds it
EFFECT_STATES = {
    "CallModel": {"streaming"},
    "PrepareArguments": {"preparing_tools"},
    "before_tool_call": {"preparing_tools"},
    "CheckApproval": {"preparing_tools"},
    "AwaitApproval": {"preparing_tools", "awaiting_approval"},
    "ExecuteTool": {"executing"},
    "after_tool_call": {"executing"},
    "Proceed": {"closing_turn"},
}
CONCURRENT = frozenset({"ExecuteTool", "after_tool_call", "AwaitApproval"})


# --- the data -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One tool call of the message and how everything around it behaves."""

    tool: str = PLAIN  # calc | calc_prep | calc_seq | missing
    # valid {"x": 1} | text {"x": "7"} (valid once prepare_arguments fixed it) | invalid
    args: str = "valid"
    prepare: str = "fix"  # fix (x made an int when it can be) | junk | raise
    # pass | block | raise | ask (asks for approval, with a reason) | ask_default (without one)
    before: str = "pass"
    outcome: str = "ok"  # ok | error (an is_error result) | raise
    after: str = "pass"  # pass | override | raise
    approval: str = "none"  # the tool's requires_approval: none | always | check
    check: str = "yes"  # what requires_approval answers: yes | no | raise | junk
    # the decision: approve | args (approved, x + 100) | bad_args (approved, invalid arguments)
    # | deny | deny_silent (denied without a reason)
    decision: str = "approve"

    @property
    def name(self) -> str:
        """The tool's name (the model's tool call names it)."""
        return self.tool if self.tool == MISSING else self.tool + APPROVAL_SUFFIX[self.approval]


@dataclass(frozen=True)
class CallCase:
    calls: tuple[Call, ...]
    mode: str = "parallel"
    before: bool = False  # before_tool_call configured
    after: bool = False  # after_tool_call configured
    stop: str = "toolUse"  # or "length"
    order: tuple[int, ...] = ()  # which concurrent effect is answered first (call indices)
    # (n, how): instead of answering the n-th effect (0-based, CallModel and Proceed counted;
    # n >= 1: the message with the calls has arrived):
    # abort | fail | late_abort (the pending tools report back after the signal, then abort)
    interrupt: tuple[int, str] | None = None


def call_id(index: int) -> str:
    return f"c{index}"


def raw_args(call: Call) -> dict[str, Any]:
    return {"valid": {"x": 1}, "text": {"x": "7"}, "invalid": {"x": "seven"}}[call.args]


def fixed(raw: Any) -> Any:
    """What prepare_arguments ``fix`` returns: ``x`` as an int when it reads as one."""
    if isinstance(raw, dict) and isinstance(raw.get("x"), str) and raw["x"].isdigit():
        return {**raw, "x": int(raw["x"])}
    return raw


def _valid(args: Any) -> bool:
    return isinstance(args, dict) and type(args.get("x")) is int


def changed(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments an approver who changes them ("args") gives."""
    return {**args, "x": args["x"] + 100}


BAD_ARGS = {"x": "changed"}


# --- the oracle ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    text: str
    is_error: bool
    prefix: bool = False  # text is a prefix (validation messages)

    def matches(self, text: str, is_error: bool) -> bool:
        ok = text.startswith(self.text) if self.prefix else text == self.text
        return ok and is_error == self.is_error


@dataclass(frozen=True)
class CallPath:
    """What one call needs and yields in an undisturbed run."""

    needs: tuple[str, ...]  # the effects it asks for, in order
    result: Expected
    args: Any = None  # what before_tool_call, requires_approval and the approval request get
    executed: Expected | None = None  # the tool's result, before after_tool_call
    reason: str | None = None  # the approval request's reason (None: no approval asked)
    # the decision's (approved, reason, changed arguments), as approval_decided tells it
    decision: tuple[bool, str | None, Any] | None = None
    run_args: Any = None  # what the tool receives (the approver may change the arguments)


def expect(case: CallCase, index: int) -> CallPath:
    """A direct reading of how one tool call goes (independent of the machine)."""
    call = case.calls[index]
    cid = call_id(index)
    name = call.name
    if case.stop == "length":
        return CallPath((), Expected(TRUNCATED.format(name=name), True))
    if call.tool == MISSING:
        return CallPath((), Expected(f"Tool {MISSING} not found", True))
    needs: list[str] = []
    args: Any = raw_args(call)
    invalid = Expected(f'Validation failed for tool "{name}":', True, prefix=True)
    if call.tool == PREP:
        needs.append("PrepareArguments")
        if call.prepare == "raise":
            return CallPath(tuple(needs), Expected(f"{cid} prepare failed", True))
        args = "not arguments" if call.prepare == "junk" else fixed(args)
    if not _valid(args):
        return CallPath(tuple(needs), invalid)
    reason = None
    if case.before:
        needs.append("before_tool_call")
        if call.before == "block":
            return CallPath(tuple(needs), Expected(f"{cid} blocked", True), args)
        if call.before == "raise":
            return CallPath(tuple(needs), Expected(f"{cid} before failed", True), args)
        if call.before == "ask":
            reason = f"{cid} asks"
        elif call.before == "ask_default":
            reason = f'before_tool_call asked for approval of tool "{name}"'
    # approval: asked by the hook (then the tool's callable is not asked), or the tool's own
    if reason is None and call.approval == "check":
        needs.append("CheckApproval")
        if call.check == "raise":
            text = f'requires_approval of tool "{name}" raised: {cid} check failed'
            return CallPath(tuple(needs), Expected(text, True), args)
        if call.check == "junk":
            text = f"requires_approval of tool \"{name}\" returned str 'maybe'; expected a bool"
            return CallPath(tuple(needs), Expected(text, True), args)
    if reason is None and (
        call.approval == "always" or (call.approval == "check" and call.check == "yes")
    ):
        reason = f'Tool "{name}" requires approval'
    decision = None
    run_args = args
    if reason is not None:
        needs.append("AwaitApproval")
        if call.decision in ("deny", "deny_silent"):
            why = f"{cid} denied" if call.decision == "deny" else None
            text = f'Tool call "{name}" was denied: {why or "no reason given"}'
            return CallPath(
                tuple(needs), Expected(text, True), args, None, reason, (False, why, None)
            )
        new = {"args": changed(args), "bad_args": BAD_ARGS}.get(call.decision)
        decision = (True, f"{cid} approved", new)
        if new is not None:
            run_args = new
            if not _valid(new):
                return CallPath(tuple(needs), invalid, args, None, reason, decision)
    needs.append("ExecuteTool")
    if call.outcome == "raise":
        executed = Expected(f"{cid} failed", True)
    else:
        executed = Expected(f"{cid} x={run_args['x']}", call.outcome == "error")
    result = executed
    if case.after:
        needs.append("after_tool_call")
        if call.after == "override":
            result = Expected(f"{cid} overridden", executed.is_error)
        elif call.after == "raise":
            result = Expected(f"{cid} after failed", True)
    return CallPath(tuple(needs), result, args, executed, reason, decision, run_args)


# --- watching the calls' machines -------------------------------------------------------------


class Runaway(BaseException):
    """A tool call's machine keeps taking transitions (a declaration that loops). Not an
    ``Exception``: nothing on the way (the engine's observer guard, a driver) swallows it."""


def watch_calls(
    m: LoopMachine, observer: Callable[[TransitionRecord], None] | None = None
) -> list[Any]:
    """Watch every tool call's machine ``m`` makes: their list (it grows as turns make calls).
    Each one's transitions go to ``observer``; one that takes too many raises :class:`Runaway`."""
    made: list[Any] = []
    make_calls = m._make_calls  # the one place the loop makes its calls' machines

    def watched(parallel: bool) -> None:
        make_calls(parallel)
        for c in m._calls:
            made.append(c)
            watch_transitions(c, _guard(c, observer))

    m._make_calls = watched  # type: ignore[method-assign]
    return made


def _guard(
    c: Any, observer: Callable[[TransitionRecord], None] | None
) -> Callable[[TransitionRecord], None]:
    def on_transition(record: TransitionRecord) -> None:
        if len(c.history) > MAX_CALL_TRANSITIONS:
            raise Runaway(f"tool call {c.call.id} took {len(c.history)} transitions")
        if observer is not None:
            observer(record)

    return on_transition


def use_call_declaration(m: LoopMachine, decl: Declaration | None) -> None:
    """Run ``m``'s tool calls on ``decl`` (None: the real declaration)."""
    if decl is not None:
        assert hasattr(m, "_call_decl"), "LoopMachine no longer keeps its calls' declaration"
        m._call_decl = decl


# --- the stepper ------------------------------------------------------------------------------


def effect_kind(effect: Any) -> str:
    return effect.name if isinstance(effect, CallHook) else type(effect).__name__


@dataclass
class CaseRun:
    """One case stepped through the machine, and what happened."""

    case: CallCase
    decl: Declaration | None = None
    record: bool = False
    m: LoopMachine = field(init=False)
    served: dict[int, list[str]] = field(default_factory=dict)
    late: set[int] = field(default_factory=set)  # calls whose tool reported after the signal
    started: set[str] = field(default_factory=set)  # calls started before the abort or failure
    interrupted: str | None = None
    cut: bool = False  # the abort or failure was fed
    waiting_at_cut: set[int] = field(default_factory=set)  # calls waiting for a decision then
    events: list[Any] = field(default_factory=list)
    count: int = 0  # effects answered (or interrupted)
    model_calls: int = 0

    def __post_init__(self) -> None:
        case = self.case
        config = AgentLoopConfig(
            model=MODEL,
            tool_execution=case.mode,  # type: ignore[arg-type]
            before_tool_call=_never if case.before else None,
            after_tool_call=_never if case.after else None,
        )
        self.m = LoopMachine(
            [UserMessage(content="go")],
            AgentContext("", [], list(TOOLS)),
            config,
        )
        watch_transitions(self.m, record_transition if self.record else None)
        use_call_declaration(self.m, self.decl)
        self.machines = watch_calls(self.m, record_call_transition if self.record else None)
        self.checker = GrammarChecker(tool_execution=case.mode, sequential_tools=SEQUENTIAL)  # type: ignore[arg-type]
        self.pending: list[Any] = []
        self.paths = [expect(case, i) for i in range(len(case.calls))]
        self.message = AssistantMessage(
            content=[
                TextContent(text="tools"),
                *(
                    ToolCall(id=call_id(i), name=c.name, arguments=raw_args(c))
                    for i, c in enumerate(case.calls)
                ),
            ],
            api=MODEL.api,
            provider=MODEL.provider,
            model=MODEL.id,
            stop_reason=case.stop,  # type: ignore[arg-type]
        )

    # --- stepping ---------------------------------------------------------------------------

    def run(self) -> CaseRun:
        self.take(self.m.start())
        for _ in range(MAX_STEPS):
            if self.m.finished:
                return self
            effect = self.next_effect()
            if self.case.interrupt is not None and self.interrupted is None:
                at, how = self.case.interrupt
                if self.count == at:
                    self.interrupt(how)
                    continue
            self.count += 1
            self.pending.remove(effect)
            self.take(self.answer(effect))
        raise AssertionError(f"the run did not end in {MAX_STEPS} steps (in {self.m.state})")

    def take(self, step: Step) -> None:
        for event in step.events:
            self.checker.feed(event)
            self.events.append(event)
            if not self.cut and event.type == "tool_execution_start":
                self.started.add(event.tool_call_id)
        m = self.m
        if m.finished:
            self.pending = []
            assert m.pending_approvals == []
            return
        self.pending.extend(step.effects)
        for effect in self.pending:
            kind = effect_kind(effect)
            assert m.state in EFFECT_STATES.get(kind, ()), f"{kind} pending in state {m.state}"
        mains = [e for e in self.pending if effect_kind(e) not in CONCURRENT]
        assert len(mains) <= 1, f"several effects at once in {m.state}: {mains}"
        assert self.pending, f"stuck in state {m.state}: no effect pending"
        waits = sorted(
            (e for e in self.pending if effect_kind(e) == "AwaitApproval"), key=lambda e: e.index
        )
        # the requests of the calls that wait, in source order; none of the batch runs then
        assert m.pending_approvals == [e.request for e in waits], (m.pending_approvals, waits)
        if waits:
            running = [
                e for e in self.pending if effect_kind(e) in ("ExecuteTool", "after_tool_call")
            ]
            assert not running, f"{running} while a call waits for approval"
            assert mains or m.state == "awaiting_approval", f"waiting for approvals in {m.state}"

    def next_effect(self) -> Any:
        """The main effect if there is one, else the concurrent effect that comes first in the
        case's order."""
        for effect in self.pending:
            if effect_kind(effect) not in CONCURRENT:
                return effect
        order = list(self.case.order) or list(range(len(self.case.calls)))
        return min(self.pending, key=lambda e: order.index(e.index))

    def interrupt(self, how: str) -> None:
        m = self.m
        self.interrupted = how
        self.waiting_at_cut = {e.index for e in self.pending if effect_kind(e) == "AwaitApproval"}
        if how == "late_abort":  # the tools under way report back past the signal
            for effect in [e for e in self.pending if effect_kind(e) == "ExecuteTool"]:
                self.pending.remove(effect)
                self.late.add(effect.index)
                self.take(self.answer(effect, after_signal=True))
                if m.finished:
                    return
        self.pending = []
        self.cut = True
        self.take(m.fail(RuntimeError("emit failed")) if how == "fail" else m.abort())

    # --- answering one effect ---------------------------------------------------------------

    def answer(self, effect: Any, after_signal: bool = False) -> Step:
        m = self.m
        kind = effect_kind(effect)
        if kind == "CallModel":
            self.model_calls += 1
            assert self.model_calls <= 2, "a third model call"
            if self.model_calls == 1:
                return m.stream_event(StreamDone(reason=self.case.stop, message=self.message))  # type: ignore[arg-type]
            done = AssistantMessage(
                content=[TextContent(text="done")],
                api=MODEL.api,
                provider=MODEL.provider,
                model=MODEL.id,
                stop_reason="stop",
            )
            return m.stream_event(StreamDone(reason="stop", message=done))
        if kind == "Proceed":
            return m.proceed()
        i = effect.index
        call, path, cid = self.case.calls[i], self.paths[i], call_id(i)
        served = self.served.setdefault(i, [])
        served.append(kind)
        assert tuple(served) == path.needs[: len(served)], f"{cid} asked for {served}"
        if kind == "PrepareArguments":
            assert effect.raw == raw_args(call), f"{cid}: prepare_arguments got {effect.raw!r}"
            if call.prepare == "raise":
                return m.arguments_prepared(i, error=RuntimeError(f"{cid} prepare failed"))
            value = "not arguments" if call.prepare == "junk" else fixed(effect.raw)
            return m.arguments_prepared(i, value)
        if kind == "before_tool_call":
            ctx = effect.ctx
            assert ctx.tool_call.id == cid and ctx.args == path.args, f"{cid}: before {ctx.args}"
            if call.before == "raise":
                return m.hook_failed(RuntimeError(f"{cid} before failed"), i)
            answers = {
                "block": BeforeToolCallResult(block=True, reason=f"{cid} blocked"),
                "ask": BeforeToolCallResult(require_approval=True, reason=f"{cid} asks"),
                "ask_default": {"require_approval": True},
            }
            return m.hook_returned(answers.get(call.before), i)
        if kind == "CheckApproval":
            assert effect.tool.name == call.name, cid
            assert effect.args == path.args, f"{cid}: requires_approval got {effect.args!r}"
            if call.check == "raise":
                return m.feed(ApprovalChecked(i, error=RuntimeError(f"{cid} check failed")))
            needed = {"yes": True, "no": False, "junk": "maybe"}[call.check]
            return m.feed(ApprovalChecked(i, needed))
        if kind == "AwaitApproval":
            request = effect.request
            assert m.state == "awaiting_approval", f"{cid} decided in {m.state}"
            assert (request.tool_call_id, request.tool_name) == (cid, call.name), request
            assert (request.args, request.reason) == (path.args, path.reason), request
            assert path.decision is not None
            approved, reason, new = path.decision
            return m.feed(ApprovalDecided(i, approved, reason, "tester", new))
        if kind == "ExecuteTool":
            assert effect.tool_call.id == cid and effect.tool.name == call.name, cid
            assert effect.args == path.run_args, f"{cid}: the tool got {effect.args!r}"
            if call.outcome == "raise":
                return m.tool_finished(i, error=RuntimeError(f"{cid} failed"), aborted=after_signal)
            result = AgentToolResult(
                content=[TextContent(text=f"{cid} x={effect.args['x']}")],
                is_error=True if call.outcome == "error" else None,
            )
            return m.tool_finished(i, result=result, aborted=after_signal)
        if kind == "after_tool_call":
            ctx = effect.ctx
            executed = path.executed
            assert executed is not None and ctx.tool_call.id == cid
            got = "".join(getattr(b, "text", "") for b in ctx.result.content)
            assert executed.matches(got, ctx.is_error), f"{cid}: after got {got!r}"
            if call.after == "raise":
                return m.hook_failed(RuntimeError(f"{cid} after failed"), i)
            override = AfterToolCallResult(content=[TextContent(text=f"{cid} overridden")])
            return m.hook_returned(override if call.after == "override" else None, i)
        raise AssertionError(f"unexpected effect {effect!r}")

    # --- what must hold afterwards ----------------------------------------------------------

    def verify(self) -> None:
        case, m = self.case, self.m
        summary = self.checker.close(m.new_messages)
        want = {None: "completed", "fail": "error"}.get(self.interrupted, "aborted")
        assert summary.reason == want, f"ended {summary.reason}, expected {want}"
        results = {
            msg.tool_call_id: msg
            for msg in m.new_messages
            if getattr(msg, "role", "") == "toolResult"
        }
        for i, path in enumerate(self.paths):
            cid = call_id(i)
            served = tuple(self.served.get(i, ()))
            if self.interrupted is None:
                assert served == path.needs, f"{cid} asked for {served}, expected {path.needs}"
                want_result = path.result
            else:
                assert served == path.needs[: len(served)], f"{cid} asked for {served}"
                if i in self.late:  # its tool reported after the signal: no after_tool_call
                    assert path.executed is not None
                    want_result = path.executed
                elif cid in self.started and served == path.needs:
                    want_result = path.result
                else:
                    want_result = Expected(ABORTED, True)
            msg = results.get(cid)
            assert msg is not None, f"{cid} has no result message"
            text = "".join(getattr(b, "text", "") for b in msg.content)
            assert want_result.matches(text, msg.is_error), (
                f"{cid}: {text!r} (is_error={msg.is_error}), expected {want_result}"
            )
        assert len(results) == len(case.calls)
        assert self.message.tool_calls() == [
            ToolCall(id=call_id(i), name=c.name, arguments=raw_args(c))
            for i, c in enumerate(case.calls)
        ], "the assistant message's tool calls changed"
        self.verify_approvals()
        assert len(self.machines) == len(case.calls)
        for c in self.machines:
            assert c.finished, f"tool call {c.call.id} ended in {c.state}"

    def verify_approvals(self) -> None:
        """Each call asked for approval is asked once, with the validated arguments and the
        reason, and decided once: as the approver said, or denied by the abort when the run was
        cut while it waited; no other call is asked."""
        requested: dict[str, Any] = {}
        decided: dict[str, Any] = {}
        for event in self.events:
            if event.type == "approval_requested":
                assert event.tool_call_id not in requested, event
                requested[event.tool_call_id] = event
            elif event.type == "approval_decided":
                assert event.tool_call_id not in decided, event
                decided[event.tool_call_id] = event
        assert set(decided) == set(requested), (sorted(requested), sorted(decided))
        for i, path in enumerate(self.paths):
            cid, call = call_id(i), self.case.calls[i]
            asked = "AwaitApproval" in path.needs
            served = self.served.get(i, [])
            # (an undisturbed run asks every call that needs it; a cut one those that got there)
            reached = (
                self.interrupted is None or i in self.waiting_at_cut or "AwaitApproval" in served
            )
            if cid not in requested:
                assert not (asked and reached), f"{cid} was not asked for approval"
                continue
            assert asked, f"{cid} was asked for approval: it needs none"
            event = requested[cid]
            assert (event.tool_name, event.args, event.reason) == (
                call.name,
                path.args,
                path.reason,
            ), event
            got = decided[cid]
            if i in self.waiting_at_cut:
                want: tuple[Any, ...] = (False, ABORTED, "abort", None)
            else:
                assert path.decision is not None
                approved, reason, new = path.decision
                want = (approved, reason, "tester", new if approved else None)
            assert (got.approved, got.reason, got.decided_by, got.args) == want, (got, want)


def run_case(case: CallCase, decl: Declaration | None = None, *, record: bool = False) -> None:
    """Step ``case`` (on the tool-call declaration ``decl``) and check it; AssertionError (or
    another exception, or :class:`Runaway`) if anything is wrong."""
    CaseRun(case, decl, record).run().verify()


# --- the fixed bank ---------------------------------------------------------------------------

APPROVAL_KINDS = (
    Call(approval="always"),
    Call(approval="check", check="no"),
    Call(tool=PREP, args="text", approval="check", decision="args"),
    Call(approval="always", decision="deny"),
    Call(approval="check", check="raise"),
    Call(approval="check", check="junk"),
    Call(tool=PREP, approval="always", decision="bad_args"),
    Call(before="ask", decision="deny_silent"),
    Call(approval="check", before="ask_default", outcome="error", after="override"),
    Call(approval="always", before="block"),
    Call(tool=PREP, approval="check", decision="approve"),
    Call(approval="always", args="invalid"),
)
WAITING = (Call(approval="always"), Call(tool=PREP, args="text"), Call(approval="check"))

EVERY_KIND = (
    Call(),
    Call(tool=MISSING),
    Call(args="invalid"),
    Call(tool=PREP, args="text"),
    Call(tool=PREP, prepare="raise"),
    Call(tool=PREP, prepare="junk"),
    Call(tool=PREP, args="invalid"),
    Call(before="block"),
    Call(tool=PREP, args="text", before="raise"),
    Call(outcome="error", after="override"),
    Call(outcome="raise", after="raise"),
    Call(tool=PREP),
)
TWO = (Call(), Call(tool=PREP, args="text"))

CALL_BANK: dict[str, CallCase] = {
    "every_kind_parallel": CallCase(EVERY_KIND, order=tuple(reversed(range(len(EVERY_KIND))))),
    "every_kind_sequential": CallCase(EVERY_KIND, mode="sequential"),
    "every_kind_with_hooks_parallel": CallCase(
        EVERY_KIND, before=True, after=True, order=tuple(reversed(range(len(EVERY_KIND))))
    ),
    "every_kind_with_hooks_sequential": CallCase(
        EVERY_KIND, mode="sequential", before=True, after=True
    ),
    "before_hook_only": CallCase(EVERY_KIND, before=True),
    "after_hook_only": CallCase(EVERY_KIND, mode="sequential", after=True),
    "a_sequential_tool_in_a_parallel_batch": CallCase(
        (Call(tool=PREP, args="text"), Call(tool=SEQ), Call()), before=True, after=True
    ),
    "truncated": CallCase(EVERY_KIND, stop="length", before=True, after=True),
    # the run is cut short while a call is in each of its states
    "abort_while_preparing": CallCase((Call(tool=PREP), Call()), interrupt=(1, "abort")),
    "abort_while_checking": CallCase(TWO[::-1], before=True, interrupt=(2, "abort")),
    "abort_with_a_ready_call": CallCase(TWO, before=True, interrupt=(2, "abort")),
    "abort_while_running": CallCase(TWO, mode="sequential", interrupt=(1, "abort")),
    "abort_while_reviewing": CallCase(TWO, after=True, interrupt=(3, "abort")),
    "abort_after_an_answer": CallCase(TWO, mode="sequential", interrupt=(2, "abort")),
    "abort_at_turn_end": CallCase(TWO, interrupt=(4, "abort")),
    "tools_report_after_the_signal": CallCase(
        (*TWO, Call(tool=MISSING)), after=True, interrupt=(3, "late_abort")
    ),
    "fail_while_preparing": CallCase(TWO, before=True, interrupt=(2, "fail")),
    "fail_while_running": CallCase(TWO, mode="sequential", after=True, interrupt=(2, "fail")),
    # approval of tool calls
    "approvals_parallel": CallCase(APPROVAL_KINDS, order=tuple(reversed(range(12)))),
    "approvals_sequential": CallCase(APPROVAL_KINDS, mode="sequential"),
    "approvals_with_hooks_parallel": CallCase(
        APPROVAL_KINDS, before=True, after=True, order=tuple(reversed(range(12)))
    ),
    "approvals_with_hooks_sequential": CallCase(
        APPROVAL_KINDS, mode="sequential", before=True, after=True
    ),
    "a_sequential_tool_that_needs_approval": CallCase(
        (Call(approval="check"), Call(tool=SEQ, approval="always", decision="args"), Call()),
        before=True,
    ),
    "abort_while_checking_for_approval": CallCase(WAITING, interrupt=(2, "abort")),
    "abort_while_waiting_for_approval": CallCase(WAITING, interrupt=(4, "abort")),
    "abort_while_waiting_for_approval_sequential": CallCase(
        WAITING, mode="sequential", interrupt=(1, "abort")
    ),
    "fail_while_waiting_for_approval": CallCase(WAITING, before=True, interrupt=(6, "fail")),
    "late_abort_while_waiting_for_approval": CallCase(WAITING[::-1], interrupt=(4, "late_abort")),
}


# --- generated cases --------------------------------------------------------------------------

calls = st.builds(
    Call,
    tool=st.sampled_from([PLAIN, PLAIN, PREP, PREP, SEQ, MISSING]),
    args=st.sampled_from(["valid", "valid", "text", "invalid"]),
    prepare=st.sampled_from(["fix", "fix", "junk", "raise"]),
    before=st.sampled_from(["pass", "pass", "block", "raise", "ask", "ask_default"]),
    outcome=st.sampled_from(["ok", "ok", "error", "raise"]),
    after=st.sampled_from(["pass", "pass", "override", "raise"]),
    approval=st.sampled_from(["none", "none", "always", "check"]),
    check=st.sampled_from(["yes", "yes", "no", "raise", "junk"]),
    decision=st.sampled_from(["approve", "approve", "args", "bad_args", "deny", "deny_silent"]),
)


@st.composite
def call_cases(draw: st.DrawFn) -> CallCase:
    batch = tuple(draw(st.lists(calls, min_size=1, max_size=4)))
    interrupt = None
    if draw(st.booleans()):
        interrupt = (
            draw(st.integers(1, 12)),
            draw(st.sampled_from(["abort", "abort", "fail", "late_abort"])),
        )
    return CallCase(
        batch,
        mode=draw(st.sampled_from(["parallel", "parallel", "sequential"])),
        before=draw(st.booleans()),
        after=draw(st.booleans()),
        stop=draw(st.sampled_from(["toolUse"] * 5 + ["length"])),
        order=tuple(draw(st.permutations(range(len(batch))))),
        interrupt=interrupt,
    )
