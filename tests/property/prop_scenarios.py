"""Scenarios for the property suite: what a run is made of, how to generate it, how to run it
through the real async driver, and what must hold afterwards.

A :class:`Scenario` is plain frozen data (so hypothesis can shrink and print it): the model's
responses (text, thinking, tool calls and how each call behaves, the stop reason and the shape of
the stream), the hooks' behaviour per call or per turn, steering and follow-up messages per poll,
and faults (a raise or an abort) injected at the n-th invocation of some callback.

:class:`Harness` runs a scenario through ``run_agent_loop`` / ``run_agent_loop_continue`` /
``agent_loop`` and records everything; :func:`verify` checks

* the event grammar and the transcript invariants (``agentcore_fsm.devtools.testing.check_run``),
and the
  validity of every context handed to the model;
* that each model context is exactly what the run had created so far (through ``convert``);
* that nothing starts after the signal fired or after a failure (models, polls, hooks), that no
  stream event is processed after an abort, and that the end reason follows
  (docs/reference.md#how-a-run-ends);
* that every tool result is the one its behaviour produces, or ``Operation aborted`` when the
  run was disturbed;
* for an undisturbed run (no abort, no failure), that the messages created, the end reason and
  the model, reasoning and api key of each model call are exactly those of :func:`expected_run`,
  a direct reading of docs/reference.md#control-flow-of-a-run and docs/reference.md#tool-calls
  written independently of the machine.

Tool completion order is controlled by explicit gates (:class:`Conductor`), never by sleeps.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from hypothesis import strategies as st
from prop_coverage import record_transition

from agentcore_fsm import (
    AbortController,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    ApprovalDecision,
    ApprovalRequest,
    AssistantMessage,
    BeforeToolCallResult,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    agent_loop,
    run_agent_loop,
    run_agent_loop_continue,
)
from agentcore_fsm.core.config import AgentLoopTurnUpdate, LlmContext, default_convert_to_llm
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.events import StreamStart
from agentcore_fsm.core.messages import ThinkingContent
from agentcore_fsm.devtools.testing import FauxProvider, check_run, sequential_tool_names

# --- the data ---------------------------------------------------------------------------

ASYNC_TOOL, SYNC_TOOL, SEQ_TOOL, MISSING_TOOL = "calc", "calc_sync", "calc_seq", "missing"
# tools that need approval: always (requires_approval=True), or as their callable says
ASK_TOOL, CHECK_TOOL = "calc_ask", "calc_check"
APPROVAL_TIMEOUT_S = 0.02
CHECK_BOOM = "check boom"  # what CHECK_TOOL's requires_approval raises with
NO_APPROVER = "it needs approval and no approver is configured (AgentLoopConfig.decide_approval)"
ABORTED = "Operation aborted"
EXHAUSTED = "No more faux responses queued"
TRUNCATED = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its '
    "arguments may be truncated. Re-issue the tool call with complete arguments."
)
MODEL = Model(id="faux-model", provider="faux", api="faux-api")
OTHER_MODEL = Model(id="other-model", provider="other", api="other-api")
SYSTEM = "You are a test."


@dataclass(frozen=True)
class ToolPlan:
    """How a tool's ``execute`` behaves for one call."""

    outcome: str = "return"  # return | dict_return | raise | bad_return | abort (async only)
    updates: int = 0
    late_update: bool = False  # keep on_update and call it after the call settled
    is_error: bool = False
    terminate: bool = False


@dataclass(frozen=True)
class CallPlan:
    """One tool call the model makes, and what the hooks do with it."""

    tool: str = ASYNC_TOOL
    valid: bool = True
    x: int = 1
    plan: ToolPlan = ToolPlan()
    # pass | dict_pass | mutate | block | block_empty | raise | abort | ask (asks for approval,
    # with a reason) | ask_dict (asks, without one)
    before: str = "pass"
    after: str = "pass"  # pass | override | error_flag | raise | terminate
    # what CHECK_TOOL's requires_approval says (it reads it from the arguments' "check"):
    # yes | no | raise | junk
    check: str = "yes"
    # how decide_approval answers a call that waits for approval: approve | approve_bool |
    # approve_dict | args (approved, arguments changed) | bad_args (approved, changed to invalid
    # ones) | deny | deny_bool | raise | junk | bad_dict | none (no decision: a denial without
    # a store) | timeout (never answers; approval_timeout_s denies it) | abort (fires the
    # signal while waiting)
    decision: str = "approve"


@dataclass(frozen=True)
class ResponsePlan:
    """One model call's answer and the shape of its stream."""

    text: str | None = "ok"
    thinking: str | None = None
    calls: tuple[CallPlan, ...] = ()
    stop: str | None = None  # None: "toolUse" with calls, else "stop"
    # faux | faux_nostart | deltas_before_start | double_start | raise_before | raise_mid |
    # exhausted | unknown_event | abort_mid | abort_mid_sync
    style: str = "faux"
    cut: int = 0  # where the odd styles do their odd thing (after `cut` events)
    order: tuple[int, ...] = ()  # completion order of the calls (indices); default source order
    chunk: int = 4

    @property
    def stop_reason(self) -> str:
        return self.stop or ("toolUse" if self.calls else "stop")


@dataclass(frozen=True)
class Fault:
    """At the ``nth`` invocation (0-based) of ``where``: raise, fire the abort signal (and go
    on), or both (``abort_raise``: fire, then raise). ``where``: transform, convert, api_key,
    stream_fn, steering, follow_up, prepare,
    should_stop, emit (``nth`` is then the event's index) or ``emit:<event type>`` (the nth
    event of that type)."""

    where: str
    nth: int
    kind: str = "raise"


@dataclass(frozen=True)
class Scenario:
    responses: tuple[ResponsePlan, ...] = (ResponsePlan(),)
    mode: str = "parallel"  # tool_execution
    entry: str = "run"  # run | continue | stream (agent_loop context manager)
    history: str = "none"  # none | chat | tool | note | chat_user
    prompts: int = 1
    steering: tuple[tuple[str, ...], ...] | None = None  # per poll: kinds "user" | "note"
    follow_up: tuple[tuple[str, ...], ...] | None = None
    prepare: tuple[str, ...] | None = None  # per turn: none | high | off | model | context
    should_stop: tuple[bool, ...] | None = None  # per turn
    faults: tuple[Fault, ...] = ()
    abort_before: bool = False
    with_before: bool = False
    with_after: bool = False
    async_hooks: bool = False
    async_emit: bool = False
    custom_convert: bool = False
    api_key_hook: bool = True
    approver: bool = True  # decide_approval configured (else a call that needs one is denied)
    approval_timeout: bool = False  # approval_timeout_s (also set when a decision is "timeout")


def approval_timeout_s(sc: Scenario) -> float | None:
    """The run's approval_timeout_s: set when asked for or when some call never gets an answer
    (decision "timeout": without a timeout that run would wait for ever)."""
    waits = any(c.decision == "timeout" for r in sc.responses for c in r.calls)
    return APPROVAL_TIMEOUT_S if sc.approval_timeout or (waits and sc.approver) else None


def call_id(response: int, index: int) -> str:
    return f"r{response}c{index}"


def parse_call_id(value: str) -> tuple[int, int]:
    response, index = value[1:].split("c")
    return int(response), int(index)


@dataclass(eq=True)
class Note:
    """A custom (non-LLM) message: the loop carries it, ``convert_to_llm`` drops it."""

    text: str
    role: str = "note"


# --- strategies -------------------------------------------------------------------------

TEXTS = st.sampled_from(["", "ok", "hello there", "a longer answer spread over several chunks"])

tool_plans = st.builds(
    ToolPlan,
    outcome=st.sampled_from(["return", "return", "return", "dict_return", "raise", "bad_return"]),
    updates=st.integers(0, 2),
    late_update=st.booleans(),
    is_error=st.sampled_from([False, False, True]),
    terminate=st.sampled_from([False, True]),
)

call_plans = st.builds(
    CallPlan,
    tool=st.sampled_from([ASYNC_TOOL, ASYNC_TOOL, ASYNC_TOOL, SYNC_TOOL, SEQ_TOOL, MISSING_TOOL]),
    valid=st.sampled_from([True, True, True, True, False]),
    x=st.integers(0, 9),
    plan=tool_plans,
    before=st.sampled_from(["pass", "pass", "pass", "dict_pass", "mutate", "block", "block_empty"]),
    after=st.sampled_from(["pass", "pass", "override", "error_flag", "raise", "terminate"]),
)

APPROVAL_DECISIONS = [
    "approve",
    "approve",
    "approve_bool",
    "approve_dict",
    "args",
    "args",
    "bad_args",
    "deny",
    "deny_bool",
    "raise",
    "junk",
    "bad_dict",
    "none",
    "timeout",
]


def _approval_call_plans(aborts: bool) -> st.SearchStrategy[CallPlan]:
    return st.builds(
        CallPlan,
        tool=st.sampled_from(
            [ASK_TOOL, ASK_TOOL, CHECK_TOOL, CHECK_TOOL, ASYNC_TOOL, SYNC_TOOL, SEQ_TOOL]
        ),
        valid=st.sampled_from([True, True, True, True, True, False]),
        x=st.integers(0, 9),
        plan=tool_plans,
        before=st.sampled_from(["pass", "pass", "pass", "ask", "ask_dict", "mutate", "block"]),
        after=st.sampled_from(["pass", "pass", "override", "raise"]),
        check=st.sampled_from(["yes", "yes", "yes", "no", "raise", "junk"]),
        decision=st.sampled_from(APPROVAL_DECISIONS + (["abort"] if aborts else [])),
    )


APPROVAL_CALL_PLANS = {aborts: _approval_call_plans(aborts) for aborts in (False, True)}
"""Calls of a batch where approval is asked for: tools that need it (always, or as their
callable says), a before hook that asks, and every kind of decision (with ``True``: the approver
may also fire the signal while the call waits)."""


NORMAL_STYLES = [
    "faux",
    "faux",
    "faux",
    "faux",
    "faux_nostart",
    "deltas_before_start",
    "double_start",
]
FAILING_STYLES = ["raise_before", "raise_mid", "exhausted", "unknown_event"]
ABORTING_STYLES = ["abort_mid", "abort_mid_sync"]


@st.composite
def response_plans(
    draw: st.DrawFn, *, odd_streams: bool = True, approvals: bool = False
) -> ResponsePlan:
    """``approvals``: the calls are those of ``APPROVAL_CALL_PLANS`` (an abort while a call
    waits only with ``odd_streams``)."""
    plans = APPROVAL_CALL_PLANS[odd_streams] if approvals else call_plans
    calls = draw(st.lists(plans, max_size=3))
    # a tool that aborts (async only) or a hook that raises / aborts: rarer
    if calls and draw(st.integers(0, 5)) == 0:
        i = draw(st.integers(0, len(calls) - 1))
        kind = draw(st.sampled_from(["tool_abort", "tool_raise", "before_raise", "before_abort"]))
        c = calls[i]
        if kind == "tool_abort":
            c = replace(c, tool=ASYNC_TOOL, valid=True, plan=ToolPlan(outcome="abort"))
            c = replace(c, before="pass")
        elif kind == "tool_raise":
            c = replace(c, plan=ToolPlan(outcome="raise"))
        else:
            c = replace(c, before=kind.split("_")[1])
        calls[i] = c
    stops = [None] * 8 + ["stop", "toolUse", "length", "length", "error", "aborted"]
    stop = draw(st.sampled_from(stops))
    styles = NORMAL_STYLES + (FAILING_STYLES + ABORTING_STYLES if odd_streams else [])
    style = draw(st.sampled_from(styles))
    if style in FAILING_STYLES + ABORTING_STYLES and draw(st.booleans()):
        style = "faux"  # odd streams stay rare
    return ResponsePlan(
        text=draw(st.one_of(st.none(), TEXTS)),
        thinking=draw(st.one_of(st.none(), st.none(), TEXTS)),
        calls=tuple(calls),
        stop=stop,
        style=style,
        cut=draw(st.integers(0, 8)),
        order=tuple(draw(st.permutations(range(len(calls))))),
        chunk=draw(st.integers(1, 12)),
    )


EMIT_TYPES = [
    "turn_start",
    "turn_end",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
    "agent_end",
]
APPROVAL_EMIT_TYPES = ["approval_requested", "approval_decided"]
FAULT_PLACES = [
    "transform",
    "convert",
    "api_key",
    "stream_fn",
    "steering",
    "follow_up",
    "prepare",
    "should_stop",
    "emit",
]


@st.composite
def faults(draw: st.DrawFn, *, emit: bool = True, approvals: bool = False) -> Fault:
    places = FAULT_PLACES if emit else FAULT_PLACES[:-1]
    where = draw(st.sampled_from(places))
    if where == "emit" and draw(st.booleans()):
        types = EMIT_TYPES + APPROVAL_EMIT_TYPES * 2 if approvals else EMIT_TYPES
        where = "emit:" + draw(st.sampled_from(types))
    nth = draw(st.integers(0, 90)) if where == "emit" else draw(st.integers(0, 3))
    return Fault(where, nth, draw(st.sampled_from(["raise", "abort", "abort_raise"])))


polls = st.lists(st.lists(st.sampled_from(["user", "user", "note"]), max_size=2).map(tuple))


@st.composite
def scenarios(draw: st.DrawFn, *, odd: bool = True, approvals: bool = False) -> Scenario:
    """Any scenario. ``odd=False`` leaves out faults and odd streams (undisturbed runs);
    ``approvals``: tool calls that need approval (see ``APPROVAL_CALL_PLANS``), with or
    without an approver and a timeout."""
    entry = draw(st.sampled_from(["run", "run", "run", "continue", "stream"]))
    if entry == "continue":
        history = draw(st.sampled_from(["tool", "note", "chat_user"]))
    else:
        history = draw(st.sampled_from(["none", "none", "chat", "tool", "note"]))
    n_faults = draw(st.sampled_from([0, 0, 0, 1, 1, 2])) if odd else 0
    emit_ok = entry != "stream"
    plans = response_plans(odd_streams=odd, approvals=approvals)
    responses = draw(st.lists(plans, min_size=1, max_size=4))
    if draw(st.sampled_from([True, True, False])):  # mostly, the script ends with an answer
        responses.append(ResponsePlan(text=draw(TEXTS), chunk=draw(st.integers(1, 12))))
    return Scenario(
        responses=tuple(responses),
        mode=draw(st.sampled_from(["parallel", "parallel", "sequential"])),
        entry=entry,
        history=history,
        prompts=draw(st.integers(1, 2)),
        steering=draw(st.one_of(st.none(), polls.map(tuple))),
        follow_up=draw(st.one_of(st.none(), polls.map(tuple))),
        prepare=draw(
            st.one_of(
                st.none(),
                st.lists(st.sampled_from(["none", "high", "off", "model", "context"])).map(tuple),
            )
        ),
        should_stop=draw(
            st.one_of(st.none(), st.lists(st.sampled_from([False, False, True])).map(tuple))
        ),
        faults=tuple(
            draw(
                st.lists(
                    faults(emit=emit_ok, approvals=approvals), min_size=n_faults, max_size=n_faults
                )
            )
        ),
        abort_before=odd and draw(st.integers(0, 30)) == 0,
        with_before=draw(st.booleans()),
        with_after=draw(st.booleans()),
        async_hooks=draw(st.booleans()),
        async_emit=emit_ok and draw(st.booleans()),
        custom_convert=draw(st.booleans()),
        api_key_hook=draw(st.booleans()),
        approver=draw(st.sampled_from([True, True, True, True, False])) if approvals else True,
        approval_timeout=approvals and draw(st.booleans()),
    )


# --- building messages ------------------------------------------------------------------


def arguments(call: CallPlan) -> dict[str, Any]:
    args: dict[str, Any] = {"x": call.x} if call.valid else {"x": f"not a number {call.x}"}
    if call.tool == CHECK_TOOL:  # what its requires_approval says (see Harness)
        args["check"] = call.check
    return args


def assistant_for(response: int, plan: ResponsePlan) -> AssistantMessage:
    """The message the model sends for ``plan`` (fresh objects every time)."""
    content: list[Any] = []
    if plan.thinking is not None:
        content.append(ThinkingContent(thinking=plan.thinking))
    if plan.text is not None:
        content.append(TextContent(text=plan.text))
    for i, call in enumerate(plan.calls):
        content.append(ToolCall(id=call_id(response, i), name=call.tool, arguments=arguments(call)))
    # a failed stream says why (docs/reference.md#what-a-stream-function-promises)
    failed = plan.stop_reason in ("error", "aborted")
    return AssistantMessage(
        content=content,
        stop_reason=plan.stop_reason,  # type: ignore[arg-type]
        error_message=f"model {plan.stop_reason}" if failed else None,
    )


def history_messages(kind: str) -> list[Any]:
    if kind == "none":
        return []
    old = [UserMessage(content="old question"), AssistantMessage(content=[TextContent(text="old")])]
    if kind == "chat":
        return old
    if kind == "chat_user":
        return [*old, UserMessage(content="again")]
    if kind == "note":
        return [*old, Note("old note")]
    hist_call = ToolCall(id="h0", name=ASYNC_TOOL, arguments={"x": 1})
    return [
        UserMessage(content="old question"),
        AssistantMessage(content=[hist_call], stop_reason="toolUse"),
        ToolResultMessage(
            tool_call_id="h0", tool_name=ASYNC_TOOL, content=[TextContent(text="h0 x=1")]
        ),
    ]


def prompts_for(sc: Scenario) -> list[Any]:
    return [UserMessage(content=f"prompt {i}") for i in range(sc.prompts)]


def polled_message(kind: str, label: str) -> Any:
    return UserMessage(content=label) if kind == "user" else Note(label)


SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


# --- what a call should produce ---------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    text: str
    is_error: bool
    terminate: bool = False
    prefix: bool = False  # text is a prefix (validation messages)

    def matches(self, text: str, is_error: bool) -> bool:
        ok = text.startswith(self.text) if self.prefix else text == self.text
        return ok and is_error == self.is_error


@dataclass(frozen=True)
class Approval:
    """What a call that waits for approval is asked (the request) and told (the decision)."""

    args: Any  # the request's arguments: the validated ones
    reason: str  # the request's reason
    approved: bool | None  # the decision; None: the approver fires the signal instead
    decision_reason: str | None = None
    decided_by: str = "user"
    changed: Any = None  # the arguments the approver gave (approval_decided.args)
    reason_prefix: bool = False  # decision_reason is a prefix (pydantic's text follows)

    def decided(self, event: Any) -> bool:
        """Whether ``event`` (an approval_decided) is this decision."""
        if self.approved is None:
            return False
        reason = event.reason
        if self.reason_prefix:
            ok = isinstance(reason, str) and reason.startswith(self.decision_reason or "")
        else:
            ok = reason == self.decision_reason
        return (
            ok
            and event.approved is self.approved
            and event.decided_by == self.decided_by
            and event.args == (self.changed if self.approved else None)
        )


@dataclass(frozen=True)
class Course:
    """How one call goes in a run that is not cut short (docs/reference.md#the-tool-pipeline,
    docs/reference.md#approval-of-tool-calls)."""

    result: Expected
    executes: bool = False  # the tool's execute is called
    args: Any = None  # what the tool receives
    checked: Any = None  # what requires_approval receives (None: it is not asked)
    approval: Approval | None = None


def denied(name: str, reason: str | None) -> Expected:
    return Expected(f'Tool call "{name}" was denied: {reason or "no reason given"}', True)


def decision_of(
    cid: str, call: CallPlan, args: Any, approver: bool, timeout: float | None
) -> tuple[bool | None, str | None, str, Any, bool]:
    """(approved, reason, decided_by, changed arguments, reason is a prefix) of what the
    approver answers, as the approval_decided event tells it."""
    if not approver:
        return False, NO_APPROVER, "no approver", None, False
    d = call.decision
    if d == "approve":
        return True, None, "tester", None, False
    if d == "approve_bool":
        return True, None, "user", None, False
    if d == "approve_dict":
        return True, f"{cid} ok", "user", None, False
    if d == "args":
        return True, f"{cid} changed", "tester", changed_args(args), False
    if d == "bad_args":
        return True, None, "tester", {"x": "changed"}, False
    if d == "deny":
        return False, f"{cid} denied", "tester", None, False
    if d == "deny_bool":
        return False, None, "user", None, False
    if d == "raise":
        return False, f"decide_approval raised: {cid} decide boom", "error", None, False
    if d == "junk":
        reason = (
            "decide_approval returned int 42; expected an ApprovalDecision, a dict with its "
            "fields, a bool"
        )
        return False, reason, "error", None, False
    if d == "bad_dict":
        return False, "decide_approval returned an invalid decision: ", "error", None, True
    if d == "none":
        reason = (
            "decide_approval returned None (no decision), which only a journaled run can wait "
            "for (store=...)"
        )
        return False, reason, "error", None, False
    if d == "timeout":
        assert timeout is not None
        return False, f"no decision within {timeout:g} s", "timeout", None, False
    assert d == "abort", d
    return None, None, "abort", None, False


def changed_args(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments an approver who changes them ("args") gives."""
    return {**args, "x": args["x"] + 100}


def expected_course(
    response: int,
    index: int,
    call: CallPlan,
    stop: str,
    *,
    approver: bool = True,
    timeout: float | None = None,
) -> Course:
    """docs/reference.md#the-tool-pipeline (and docs/reference.md#approval-of-tool-calls) for
    one call that runs to its end (no abort, no failure)."""
    cid = call_id(response, index)
    if stop == "length":
        return Course(Expected(TRUNCATED.format(name=call.tool), True))
    if call.tool == MISSING_TOOL:
        return Course(Expected(f"Tool {MISSING_TOOL} not found", True))
    if not call.valid:
        return Course(invalid(call.tool))
    before = call.before
    if before == "block":
        return Course(Expected(f"{cid} blocked", True))
    if before == "block_empty":
        return Course(Expected("Tool execution was blocked", True))
    if before == "raise":
        return Course(Expected(f"{cid} before boom", True))
    if before == "abort":
        return Course(Expected(ABORTED, True))
    args = arguments(call)
    if before == "mutate":
        args = {**args, "x": args["x"] + 1000}
    # approval: asked by the hook (the tool's callable is then not asked), or the tool's own
    asked = before in ("ask", "ask_dict")
    needs = asked or call.tool == ASK_TOOL
    checked = None
    if call.tool == CHECK_TOOL and not asked:
        checked = args
        if call.check == "raise":
            text = f'requires_approval of tool "{CHECK_TOOL}" raised: {CHECK_BOOM}'
            return Course(Expected(text, True), checked=checked)
        if call.check == "junk":
            text = f"requires_approval of tool \"{CHECK_TOOL}\" returned str 'maybe'; "
            text += "expected a bool"
            return Course(Expected(text, True), checked=checked)
        needs = call.check == "yes"
    approval = None
    if needs:
        if before == "ask":
            reason = f"{cid} asks"
        elif before == "ask_dict":
            reason = f'before_tool_call asked for approval of tool "{call.tool}"'
        else:
            reason = f'Tool "{call.tool}" requires approval'
        approved, why, by, changed, prefix = decision_of(cid, call, args, approver, timeout)
        approval = Approval(args, reason, approved, why, by, changed, prefix)
        if approved is None:  # the signal fires while it waits
            return Course(Expected(ABORTED, True), checked=checked, approval=approval)
        if not approved:
            result = denied(call.tool, why)
            if prefix:
                result = Expected(result.text, True, prefix=True)
            return Course(result, checked=checked, approval=approval)
        if changed is not None:
            args = changed
            if not isinstance(args.get("x"), int):
                return Course(invalid(call.tool), checked=checked, approval=approval)
    course = Course(Expected(ABORTED, True), True, args, checked, approval)
    x = args["x"]
    outcome = call.plan.outcome
    if outcome in ("return", "dict_return"):
        result = Expected(f"{cid} x={x}", call.plan.is_error, call.plan.terminate)
    elif outcome == "raise":
        result = Expected(f"{cid} boom", True)
    elif outcome == "bad_return":
        result = Expected(f"Tool {call.tool} returned str; expected an AgentToolResult", True)
    else:  # abort
        return course
    after = call.after
    if after == "override":
        result = Expected(f"{cid} overridden", result.is_error, result.terminate)
    elif after == "error_flag":
        result = Expected(result.text, True, result.terminate)
    elif after == "raise":
        result = Expected(f"{cid} after boom", True)
    elif after == "terminate":
        result = Expected(result.text, result.is_error, True)
    return replace(course, result=result)


def invalid(tool: str) -> Expected:
    return Expected(f'Validation failed for tool "{tool}":\n  - x: ', True, prefix=True)


def expected_result(response: int, index: int, call: CallPlan, stop: str) -> Expected:
    """The result of one call that runs to its end (see :func:`expected_course`)."""
    return expected_course(response, index, call, stop).result


def course_with(sc: Scenario, response: int, index: int) -> Course:
    plan = sc.responses[response]
    call = plan.calls[index]
    if not sc.with_before:
        call = replace(call, before="pass")
    if not sc.with_after:
        call = replace(call, after="pass")
    return expected_course(
        response,
        index,
        call,
        plan.stop_reason,
        approver=sc.approver,
        timeout=approval_timeout_s(sc),
    )


def expected_result_with(sc: Scenario, response: int, index: int) -> Expected:
    return course_with(sc, response, index).result


def batch_is_sequential(sc: Scenario, plan: ResponsePlan) -> bool:
    return sc.mode == "sequential" or any(c.tool == SEQ_TOOL for c in plan.calls)


def gated_order(sc: Scenario, response: int) -> list[str]:
    """The ids of the async calls of a parallel batch that will execute, in completion order."""
    plan = sc.responses[response]
    if plan.stop_reason not in ("toolUse", "stop") or batch_is_sequential(sc, plan):
        return []
    runnable = {
        i
        for i, c in enumerate(plan.calls)
        if c.tool == ASYNC_TOOL and course_with(sc, response, i).executes
    }
    order = list(plan.order) or list(range(len(plan.calls)))
    return [call_id(response, i) for i in order if i in runnable]


# --- the expected run (docs/reference.md#control-flow-of-a-run, read directly) --------------------


@dataclass
class ExpectedRun:
    messages: list[Any]  # descriptors, see describe()
    reason: str
    model_calls: list[tuple[str, str | None, str | None]]  # (model id, reasoning, api key)
    # the loop's own calls, in order: "steering", "follow_up" (polls), "model", "prepare",
    # "should_stop" (only the configured ones)
    trace: list[str] = field(default_factory=list)


def describe(message: Any) -> tuple[Any, ...]:
    role = getattr(message, "role", None)
    if role == "assistant":
        blocks = [b.model_dump() for b in message.content]
        return ("assistant", message.model, message.stop_reason, message.error_message, blocks)
    if role == "toolResult":
        text = "".join(getattr(b, "text", "") for b in message.content)
        return ("toolResult", message.tool_call_id, message.tool_name, text, message.is_error)
    if role == "user":
        return ("user", message.content)
    if isinstance(message, Note):
        return ("note", message.text)
    return ("?", repr(message))


def _polled_descriptors(kinds: tuple[str, ...], label: str) -> list[tuple[Any, ...]]:
    return [
        ("user", f"{label}.{j}") if kind == "user" else ("note", f"{label}.{j}")
        for j, kind in enumerate(kinds)
    ]


def expected_run(sc: Scenario) -> ExpectedRun:
    """What an undisturbed run of ``sc`` creates, read off docs/reference.md#control-flow-of-a-run
    and docs/reference.md#tool-calls."""
    out: list[Any] = (
        [("user", m.content) for m in prompts_for(sc)] if sc.entry != "continue" else []
    )
    calls: list[tuple[str, str | None, str | None]] = []
    model, reasoning = MODEL.id, "low"
    polls = {"steering": 0, "follow_up": 0}
    trace: list[str] = []

    def poll(name: str) -> list[tuple[Any, ...]]:
        script = sc.steering if name == "steering" else sc.follow_up
        if script is None:
            return []
        trace.append(name)
        n = polls[name]
        polls[name] += 1
        kinds = script[n] if n < len(script) else ()
        return _polled_descriptors(kinds, f"{'steer' if name == 'steering' else 'follow'} {n}")

    out += poll("steering")
    turn = prepared = 0
    while True:
        k = len(calls)
        key = ("dynamic" if k % 2 == 0 else None) if sc.api_key_hook else None
        calls.append((model, reasoning, key or "static"))
        trace.append("model")
        if k >= len(sc.responses):
            empty = [TextContent(text="").model_dump()]
            out.append(("assistant", model, "error", EXHAUSTED, empty))
            return ExpectedRun(out, "error", calls, trace)
        plan = sc.responses[k]
        message = assistant_for(k, plan)
        blocks = [b.model_dump() for b in message.content]
        stop = plan.stop_reason
        out.append(("assistant", model, stop, message.error_message, blocks))
        if stop in ("error", "aborted"):
            return ExpectedRun(out, stop, calls, trace)
        results = [expected_result_with(sc, k, i) for i in range(len(plan.calls))]
        for i, (call, result) in enumerate(zip(plan.calls, results, strict=True)):
            out.append(("toolResult", call_id(k, i), call.tool, result, result.is_error))
        had_calls = bool(plan.calls)
        terminated = had_calls and stop != "length" and all(r.terminate for r in results)
        # after turn_end: should_stop_after_turn, the steering poll, the follow-up poll; and
        # only when another turn follows: prepare_next_turn, steering once more (when the
        # turn follows from the batch and the poll returned nothing), turn_start
        stop_now = (
            sc.should_stop is not None and turn < len(sc.should_stop) and sc.should_stop[turn]
        )
        if sc.should_stop is not None:
            trace.append("should_stop")
        turn += 1
        if stop_now:
            return ExpectedRun(out, "stopped", calls, trace)
        injected = poll("steering")
        if not injected and not (had_calls and not terminated):
            injected = poll("follow_up")
            if not injected:
                return ExpectedRun(out, "stopped" if terminated else "completed", calls, trace)
        if sc.prepare is not None:
            trace.append("prepare")
            change = sc.prepare[prepared] if prepared < len(sc.prepare) else "none"
            prepared += 1
            if change == "high":
                reasoning = "high"
            elif change == "off":
                reasoning = None
            elif change == "model":
                model = OTHER_MODEL.id
        if not injected:
            injected = poll("steering")
        out += injected


def matches(actual: tuple[Any, ...], expected: tuple[Any, ...]) -> bool:
    if actual[0] == "toolResult" and expected[0] == "toolResult":
        result = expected[3]
        return actual[1:3] == expected[1:3] and result.matches(actual[3], actual[4])
    return actual == expected


# --- running ----------------------------------------------------------------------------


class InjectedFailure(RuntimeError):
    pass


@dataclass
class ModelCall:
    context: LlmContext
    model: str
    reasoning: str | None
    api_key: str | None
    created_before: list[Any]


class Conductor:
    """Controls the completion order of the async tool calls of a parallel batch.

    Every gated call first waits until all gated calls of its batch have arrived (so no tool can
    abort the run before the others started), then until its predecessors in the scenario's
    completion order have settled (returned and, with an ``after_tool_call`` hook, been through
    it). No sleeps: explicit events only.
    """

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.order: dict[int, list[str]] = {}
        self.arrived: dict[int, int] = {}
        self.all_arrived: dict[int, anyio.Event] = {}
        self.settled: dict[str, anyio.Event] = {}

    def _event(self, cid: str) -> anyio.Event:
        event = self.settled.get(cid)
        if event is None:
            event = self.settled[cid] = anyio.Event()
        return event

    async def wait_turn(self, cid: str) -> None:
        response, _ = parse_call_id(cid)
        order = self.order.setdefault(response, gated_order(self.sc, response))
        if cid not in order:
            return
        barrier = self.all_arrived.setdefault(response, anyio.Event())
        self.arrived[response] = self.arrived.get(response, 0) + 1
        if self.arrived[response] == len(order):
            barrier.set()
        await barrier.wait()
        for predecessor in order[: order.index(cid)]:
            await self._event(predecessor).wait()

    def settle(self, cid: str) -> None:
        self._event(cid).set()


class Harness:
    """Runs one scenario through the real async driver and records what happened."""

    def __init__(self, sc: Scenario, *, record_coverage: bool = True) -> None:
        self.sc = sc
        self.record_coverage = record_coverage
        self.controller = AbortController()
        self.signal = self.controller.signal
        self.events: list[Any] = []
        self.created: list[Any] = []
        self.transitions: list[TransitionRecord] = []
        self.abort_mark: int | None = None
        self.failure_mark: int | None = None
        self.problems: list[str] = []
        self.polled_out: list[Any] = []  # every message a poll returned
        self.trace: list[str] = []  # the loop's own calls, as ExpectedRun.trace names them
        self.counters: Counter[str] = Counter()
        self.model_calls: list[ModelCall] = []
        self.late: dict[str, Callable[[AgentToolResult], None]] = {}
        self.received_args: dict[str, Any] = {}
        self.checked: list[Any] = []  # the arguments requires_approval received, in order
        self.requests: list[ApprovalRequest] = []  # what decide_approval was asked
        self.conductor = Conductor(sc)
        self.prompts = prompts_for(sc)
        self.history = history_messages(sc.history)
        self.tools = [
            AgentTool(ASYNC_TOOL, "async calc", SCHEMA, self._execute_async),
            AgentTool(SYNC_TOOL, "sync calc", SCHEMA, self._execute_sync),
            AgentTool(
                SEQ_TOOL,
                "sequential calc",
                SCHEMA,
                self._execute_async,
                execution_mode="sequential",
            ),
            AgentTool(
                ASK_TOOL,
                "calc, approved first",
                SCHEMA,
                self._execute_async,
                requires_approval=True,
            ),
            AgentTool(
                CHECK_TOOL,
                "calc, approved first when its check says so",
                SCHEMA,
                self._execute_sync,
                requires_approval=self._hook(self.requires_approval),
            ),
        ]
        self.context = AgentContext(SYSTEM, list(self.history), list(self.tools))
        self.signal.add_callback(self._on_abort)

    # --- bookkeeping --------------------------------------------------------------------

    def _on_abort(self) -> None:
        self.abort_mark = len(self.transitions)

    def _failing(self, what: str = "injected failure") -> InjectedFailure:
        """Note that a run failure is being raised (from now on nothing may start)."""
        if self.failure_mark is None:
            self.failure_mark = len(self.transitions)
        return InjectedFailure(what)

    def fault(self, where: str) -> int:
        """Count an invocation of ``where``; raise or abort if the scenario says so."""
        n = self.counters[where]
        self.counters[where] += 1
        for f in self.sc.faults:
            if f.where == where and f.nth == n:
                if f.kind == "abort":
                    self.controller.abort("test")
                elif f.kind == "abort_raise":  # the signal fires, then it fails anyway
                    self.controller.abort("test")
                    raise self._failing(f"{where} #{n} failed after the abort")
                else:
                    raise self._failing(f"{where} #{n} failed")
        return n

    def entering(self, what: str) -> None:
        """docs/reference.md#what-an-abort-does and docs/reference.md#failures: once the signal
        fired or a failure was raised, nothing more starts."""
        if self.signal.aborted:
            self.problems.append(f"{what} started after the abort")
        if self.failure_mark is not None:
            self.problems.append(f"{what} started after a failure")

    def on_transition(self, record: TransitionRecord) -> None:
        self.transitions.append(record)
        if self.record_coverage:
            record_transition(record)

    def on_event(self, event: Any) -> None:
        # (with agent_loop the consumer lags behind the run: only emit sees events in time)
        if self.signal.aborted and event.type == "message_update" and self.sc.entry != "stream":
            # see docs/reference.md#what-an-abort-does
            self.problems.append(f"message_update #{len(self.events)} after the abort")
        self.events.append(event)
        if event.type == "message_end":
            self.created.append(event.message)
        if event.type in ("tool_execution_end", "turn_end"):
            self._late_updates()

    def undecided(self, response: int) -> list[str]:
        """The calls of model response ``response`` asked for approval and not decided yet
        (by the events emitted so far)."""
        prefix = f"r{response}c"
        asked = [
            e.tool_call_id
            for e in self.events
            if e.type == "approval_requested" and e.tool_call_id.startswith(prefix)
        ]
        decided = {e.tool_call_id for e in self.events if e.type == "approval_decided"}
        return [cid for cid in asked if cid not in decided]

    def _late_updates(self) -> None:
        for cid, on_update in list(self.late.items()):
            on_update(AgentToolResult(content=[TextContent(text=f"{cid} late")]))

    # --- callbacks ----------------------------------------------------------------------

    def _hook(self, body: Callable[..., Any]) -> Callable[..., Any]:
        if not self.sc.async_hooks:
            return body

        async def hook(*args: Any) -> Any:
            value = body(*args)
            await anyio.lowlevel.checkpoint()
            return value

        return hook

    def emit(self, event: Any) -> Any:
        self.on_event(event)
        self.fault("emit")
        self.fault(f"emit:{event.type}")
        if self.sc.async_emit:
            return anyio.lowlevel.checkpoint()
        return None

    def transform(self, messages: list[Any], signal: Any) -> list[Any]:
        self.entering("transform_context")
        self.fault("transform")
        return list(messages)

    def convert(self, messages: list[Any]) -> list[Any]:
        self.entering("convert_to_llm")
        self.fault("convert")
        return default_convert_to_llm(messages)

    def get_api_key(self, provider: str) -> str | None:
        self.entering("get_api_key")
        n = self.fault("api_key")
        if provider not in (MODEL.provider, OTHER_MODEL.provider):
            self.problems.append(f"get_api_key({provider!r}): not the model's provider")
        return "dynamic" if n % 2 == 0 else None

    def poll(self, name: str) -> list[Any]:
        self.entering(f"{name} poll")
        self.trace.append(name)
        n = self.fault(name)
        script = self.sc.steering if name == "steering" else self.sc.follow_up
        assert script is not None
        kinds = script[n] if n < len(script) else ()
        label = "steer" if name == "steering" else "follow"
        out = [polled_message(kind, f"{label} {n}.{j}") for j, kind in enumerate(kinds)]
        self.polled_out.extend(out)
        return out

    def prepare_next_turn(self, ctx: Any, signal: Any) -> Any:
        self.entering("prepare_next_turn")
        self.trace.append("prepare")
        self._check_turn_context(ctx, "prepare_next_turn")
        n = self.fault("prepare")
        assert self.sc.prepare is not None
        change = self.sc.prepare[n] if n < len(self.sc.prepare) else "none"
        if change == "high":
            return AgentLoopTurnUpdate(thinking_level="high")
        if change == "off":
            return AgentLoopTurnUpdate(thinking_level="off")
        if change == "model":
            return AgentLoopTurnUpdate(model=OTHER_MODEL)
        if change == "context":
            c = ctx.context
            return AgentLoopTurnUpdate(
                context=AgentContext(c.system_prompt, list(c.messages), list(c.tools))
            )
        return None

    def should_stop_after_turn(self, ctx: Any, signal: Any) -> bool:
        self.entering("should_stop_after_turn")
        self.trace.append("should_stop")
        self._check_turn_context(ctx, "should_stop_after_turn")
        n = self.fault("should_stop")
        assert self.sc.should_stop is not None
        return n < len(self.sc.should_stop) and self.sc.should_stop[n]

    def _check_turn_context(self, ctx: Any, name: str) -> None:
        if self.sc.entry == "stream":
            return  # events reach the consumer asynchronously: no snapshot to compare with
        ends = [e for e in self.events if e.type == "turn_end"]
        if not ends:
            self.problems.append(f"{name} called before any turn_end")
            return
        last = ends[-1]
        if ctx.message != last.message or list(ctx.tool_results) != list(last.tool_results):
            self.problems.append(f"{name}: ctx.message/tool_results are not the turn's")
        if list(ctx.new_messages) != self.created:
            self.problems.append(f"{name}: ctx.new_messages is not what the run created")

    def before_tool_call(self, ctx: Any, signal: Any) -> Any:
        self.entering("before_tool_call")
        cid = ctx.tool_call.id
        r, i = parse_call_id(cid)
        behaviour = self.sc.responses[r].calls[i].before
        if ctx.args != arguments(self.sc.responses[r].calls[i]):
            self.problems.append(f"before_tool_call({cid}) got args {ctx.args!r}")
        if behaviour == "dict_pass":
            return {"block": False}
        if behaviour == "mutate":
            ctx.args["x"] = ctx.args["x"] + 1000
            return None
        if behaviour == "block":
            return BeforeToolCallResult(block=True, reason=f"{cid} blocked")
        if behaviour == "block_empty":
            return {"block": True, "reason": ""}
        if behaviour == "raise":
            raise RuntimeError(f"{cid} before boom")
        if behaviour == "abort":
            self.controller.abort("before hook")
        if behaviour == "ask":
            return BeforeToolCallResult(require_approval=True, reason=f"{cid} asks")
        if behaviour == "ask_dict":
            return {"require_approval": True}
        return None

    # --- approval -------------------------------------------------------------------------

    def requires_approval(self, args: Any) -> Any:
        """CHECK_TOOL's callable: it says what the call's "check" argument says."""
        self.entering("requires_approval")
        self.checked.append(copy.deepcopy(args))
        check = args.get("check") if isinstance(args, dict) else None
        if check == "raise":
            raise RuntimeError(CHECK_BOOM)
        if check == "junk":
            return "maybe"
        return check == "yes"

    def decide_approval(self, request: Any, signal: Any) -> Any:
        """The approver: each call's plan says how it answers (see ``CallPlan.decision``). An
        answer that never comes is an awaitable that waits for ever (the driver's timeout or
        the abort ends the wait)."""
        self.entering("decide_approval")
        if signal is not self.signal:
            self.problems.append(f"decide_approval({request.tool_call_id}) got another signal")
        self.requests.append(request)
        cid = request.tool_call_id
        r, i = parse_call_id(cid)
        decision = self.sc.responses[r].calls[i].decision
        if decision in ("timeout", "abort"):
            if decision == "abort":
                self.controller.abort("approval")
            return anyio.sleep_forever()
        value = self._decision(cid, decision, request.args)
        if not self.sc.async_hooks:
            return value

        async def later() -> Any:
            if approval_timeout_s(self.sc) is None:
                # (no checkpoint under a timeout: a decision that was made must not time out)
                await anyio.lowlevel.checkpoint()
            return value

        return later()

    def _decision(self, cid: str, decision: str, args: Any) -> Any:
        if decision == "approve":
            return ApprovalDecision(approved=True, decided_by="tester")
        if decision == "approve_bool":
            return True
        if decision == "approve_dict":
            return {"approved": True, "reason": f"{cid} ok"}
        if decision == "args":
            return ApprovalDecision(
                approved=True, reason=f"{cid} changed", decided_by="tester", args=changed_args(args)
            )
        if decision == "bad_args":
            return ApprovalDecision(approved=True, decided_by="tester", args={"x": "changed"})
        if decision == "deny":
            return ApprovalDecision(approved=False, reason=f"{cid} denied", decided_by="tester")
        if decision == "deny_bool":
            return False
        if decision == "raise":
            raise RuntimeError(f"{cid} decide boom")
        if decision == "junk":
            return 42
        if decision == "bad_dict":
            return {"approved": "perhaps"}
        assert decision == "none", decision
        return None

    def after_tool_call(self, ctx: Any, signal: Any) -> Any:
        cid = ctx.tool_call.id
        try:
            r, i = parse_call_id(cid)
            behaviour = self.sc.responses[r].calls[i].after
            if cid in self.late:  # the call has settled: this update must be ignored
                self.late[cid](AgentToolResult(content=[TextContent(text=f"{cid} late")]))
            if behaviour == "override":
                return AfterToolCallResult(content=[TextContent(text=f"{cid} overridden")])
            if behaviour == "error_flag":
                return {"is_error": True}
            if behaviour == "raise":
                raise RuntimeError(f"{cid} after boom")
            if behaviour == "terminate":
                return AfterToolCallResult(terminate=True)
            return None
        finally:
            self.conductor.settle(cid)

    # --- tools ----------------------------------------------------------------------------

    def _tool_result(self, cid: str, args: Any, on_update: Any) -> Any:
        r, i = parse_call_id(cid)
        plan = self.sc.responses[r].calls[i].plan
        self.received_args[cid] = dict(args)
        if self.sc.entry != "stream":  # (the consumer of agent_loop lags behind the run)
            waiting = self.undecided(r)
            if waiting:
                self.problems.append(f"{cid} ran while {waiting} waited for approval")
        for u in range(plan.updates):
            on_update(AgentToolResult(content=[TextContent(text=f"{cid} update {u}")]))
        if plan.late_update:
            self.late[cid] = on_update
        if plan.outcome == "raise":
            raise RuntimeError(f"{cid} boom")
        if plan.outcome == "bad_return":
            return "not a result"
        result = AgentToolResult(
            content=[TextContent(text=f"{cid} x={args['x']}")],
            details={"x": args["x"]},
            is_error=True if plan.is_error else None,
            terminate=True if plan.terminate else None,
        )
        if plan.outcome == "dict_return":
            return result.model_dump(by_alias=True)
        return result

    async def _execute_async(self, cid: str, args: Any, signal: Any, on_update: Any) -> Any:
        self.entering(f"tool {cid}")
        await self.conductor.wait_turn(cid)
        try:
            r, i = parse_call_id(cid)
            if self.sc.responses[r].calls[i].plan.outcome == "abort":
                self.controller.abort("tool")
                await anyio.sleep_forever()
            return self._tool_result(cid, args, on_update)
        finally:
            if not self.sc.with_after:
                self.conductor.settle(cid)

    def _execute_sync(self, cid: str, args: Any, signal: Any, on_update: Any) -> Any:
        return self._tool_result(cid, args, on_update)

    # --- the model --------------------------------------------------------------------------

    def stream_fn(self, model: Model, context: LlmContext, options: Any) -> Any:
        k = len(self.model_calls)
        self.entering(f"model call {k}")
        self.trace.append("model")
        self.model_calls.append(
            ModelCall(context, model.id, options.reasoning, options.api_key, list(self.created))
        )
        # (agent_loop hands its own signal, linked to the caller's, to the run: see the report)
        if options.signal is not self.signal and self.sc.entry != "stream":
            self.problems.append(f"model call {k} got another signal")
        self.fault("stream_fn")
        if k >= len(self.sc.responses):
            return FauxProvider([])(model, context, options)
        plan = self.sc.responses[k]
        message = assistant_for(k, plan)
        send_start = plan.style not in ("faux_nostart", "deltas_before_start")
        inner = FauxProvider([message], chunk_size=plan.chunk, send_start=send_start)(
            model, context, options
        )
        if plan.style in ("faux", "faux_nostart"):
            return inner
        return self._odd_stream(plan, inner)

    async def _odd_stream(self, plan: ResponsePlan, inner: Any) -> Any:
        style, cut = plan.style, plan.cut
        try:
            if style == "raise_before":
                raise self._failing()
            n = 0
            async for event in inner:
                terminal = event.type in ("done", "error")
                if n == cut and not terminal:
                    if style == "raise_mid":
                        raise self._failing()
                    if style == "exhausted":
                        self._failing()
                        return
                    if style == "unknown_event":
                        self._failing()
                        yield _Bogus()
                    if style in ("abort_mid", "abort_mid_sync"):
                        self.controller.abort("stream")
                        if style == "abort_mid":
                            await anyio.lowlevel.checkpoint()
                if style == "deltas_before_start" and n == cut:
                    partial = getattr(event, "partial", None)
                    if partial is not None:
                        yield StreamStart(partial=partial)
                yield event
                if style == "double_start" and event.type == "start":
                    yield StreamStart(partial=event.partial)
                n += 1
        finally:
            await inner.aclose()

    # --- the run ------------------------------------------------------------------------------

    def config(self) -> AgentLoopConfig:
        sc = self.sc
        hook = self._hook
        return AgentLoopConfig(
            model=MODEL,
            reasoning="low",
            api_key="static",
            tool_execution=sc.mode,  # type: ignore[arg-type]
            transform_context=hook(self.transform),
            convert_to_llm=hook(self.convert) if sc.custom_convert else None,
            get_api_key=hook(self.get_api_key) if sc.api_key_hook else None,
            before_tool_call=hook(self.before_tool_call) if sc.with_before else None,
            decide_approval=self.decide_approval if sc.approver else None,
            approval_timeout_s=approval_timeout_s(sc),
            after_tool_call=hook(self.after_tool_call) if sc.with_after else None,
            prepare_next_turn=hook(self.prepare_next_turn) if sc.prepare is not None else None,
            should_stop_after_turn=(
                hook(self.should_stop_after_turn) if sc.should_stop is not None else None
            ),
            get_steering_messages=(
                hook(lambda: self.poll("steering")) if sc.steering is not None else None
            ),
            get_follow_up_messages=(
                hook(lambda: self.poll("follow_up")) if sc.follow_up is not None else None
            ),
        )

    async def run(self) -> list[Any]:
        sc = self.sc
        if sc.abort_before:
            self.controller.abort("before the run")
        config = self.config()
        with anyio.fail_after(30):  # a hang guard only: a hung run is a failure, never a pass
            if sc.entry == "stream":
                cm = agent_loop(
                    self.prompts,
                    self.context,
                    config,
                    signal=self.signal,
                    stream_fn=self.stream_fn,
                    on_transition=self.on_transition,
                )
                async with cm as stream:
                    async for event in stream:
                        self.on_event(event)
                    messages = await stream.result()
            elif sc.entry == "continue":
                messages = await run_agent_loop_continue(
                    self.context,
                    config,
                    self.emit,
                    signal=self.signal,
                    stream_fn=self.stream_fn,
                    on_transition=self.on_transition,
                )
            else:
                messages = await run_agent_loop(
                    self.prompts,
                    self.context,
                    config,
                    self.emit,
                    signal=self.signal,
                    stream_fn=self.stream_fn,
                    on_transition=self.on_transition,
                )
        self._late_updates()  # after the run: ignored
        return list(messages)


@dataclass
class _Bogus:
    type: str = "bogus"


# --- checking a finished run ---------------------------------------------------------------


@dataclass
class Verdict:
    disturbed: bool
    reason: str | None
    notes: list[str] = field(default_factory=list)


def verify(sc: Scenario, h: Harness, messages: list[Any]) -> Verdict:
    """Every property of a finished run (see the module docstring). Raises AssertionError."""
    contexts = [c.context for c in h.model_calls]
    summary = check_run(
        h.events,
        messages,
        model_contexts=contexts,
        tool_execution=sc.mode,  # type: ignore[arg-type]
        sequential_tools=sequential_tool_names(h.tools),
    )
    assert not h.problems, h.problems
    # nothing polled is lost: a poll's messages are injected even when the signal fired while
    # it ran (an awaited poll cancelled by the abort never returned them)
    if not sc.async_hooks:
        for polled in h.polled_out:
            assert any(m is polled for m in messages), f"polled message lost: {polled!r}"
    # the caller's context is never mutated
    assert h.context.messages == h.history and len(h.context.messages) == len(h.history)
    # each model call saw exactly what the run had created so far (through convert_to_llm)
    if sc.entry != "stream":
        for n, call in enumerate(h.model_calls):
            want = default_convert_to_llm([*h.history, *call.created_before])
            assert call.context.messages == want, f"model call {n}: context differs"
            assert call.context.system_prompt == SYSTEM
            assert [t.name for t in call.context.tools] == [t.name for t in h.tools]
    # every tool result is its behaviour's, or 'Operation aborted' when the run was disturbed
    disturbed = h.signal.aborted or h.failure_mark is not None
    for m in messages:
        if getattr(m, "role", None) != "toolResult":
            continue
        r, i = parse_call_id(m.tool_call_id)
        want_result = expected_result_with(sc, r, i)
        text = "".join(getattr(b, "text", "") for b in m.content)
        if not want_result.matches(text, m.is_error):
            assert disturbed and text == ABORTED and m.is_error, (
                f"{m.tool_call_id}: {text!r} (is_error={m.is_error}), expected {want_result}"
            )
        if m.details is not None:
            assert m.details == {"x": h.received_args[m.tool_call_id]["x"]}
    # what the tools received: validated (and maybe mutated) arguments
    for cid, args in h.received_args.items():
        r, i = parse_call_id(cid)
        want_args = course_with(sc, r, i).args
        assert args == want_args, f"{cid} received {args}, expected {want_args}"
    verify_approvals(sc, h, messages, disturbed)
    # the end reason follows an abort or a failure that the machine saw
    # (docs/reference.md#how-a-run-ends)
    if h.abort_mark is not None and len(h.transitions) > h.abort_mark:
        assert summary.reason == "aborted", f"aborted run ended {summary.reason}"
    elif h.failure_mark is not None and len(h.transitions) > h.failure_mark:
        assert summary.reason == "error", f"failed run ended {summary.reason}"
    if h.failure_mark is not None and len(h.transitions) > h.failure_mark:
        # an injected failure the machine saw is told in the run's last message
        last = messages[-1] if messages else None
        assert isinstance(last, AssistantMessage) and last.stop_reason in ("error", "aborted")
        assert last.error_message and last.error_message != "Request was aborted", last
    assert h.transitions and h.transitions[-1].dest == "stopped"
    if not disturbed:
        want = expected_run(sc)
        got = [describe(m) for m in messages]
        assert len(got) == len(want.messages) and all(
            matches(a, b) for a, b in zip(got, want.messages, strict=False)
        ), _diff(got, want.messages)
        assert summary.reason == want.reason, (summary.reason, want.reason)
        made = [(c.model, c.reasoning, c.api_key) for c in h.model_calls]
        assert made == want.model_calls, (made, want.model_calls)
        # polls and turn hooks run when, and in the order, docs/reference.md#between-turns says
        assert h.trace == want.trace, (h.trace, want.trace)
    return Verdict(disturbed, summary.reason)


def verify_approvals(sc: Scenario, h: Harness, messages: list[Any], disturbed: bool) -> None:
    """docs/reference.md#approval-of-tool-calls: the calls that need approval, and only those,
    are asked for it (once, with the validated arguments and the reason), get the decision the
    approver made (or the abort's), and requires_approval and decide_approval are asked what
    they should be."""
    requested: dict[str, Any] = {}
    decided: dict[str, Any] = {}
    for event in h.events:
        if event.type == "approval_requested":
            assert event.tool_call_id not in requested, f"{event.tool_call_id} asked twice"
            requested[event.tool_call_id] = event
        elif event.type == "approval_decided":
            assert event.tool_call_id not in decided, f"{event.tool_call_id} decided twice"
            decided[event.tool_call_id] = event
    for cid, event in requested.items():
        r, i = parse_call_id(cid)
        approval = course_with(sc, r, i).approval
        assert approval is not None, f"{cid} was asked for approval: it needs none"
        assert event.tool_name == sc.responses[r].calls[i].tool
        assert (event.args, event.reason) == (approval.args, approval.reason), (
            f"{cid}: request {event.args!r} {event.reason!r}, expected {approval}"
        )
        if cid not in decided:
            continue  # (the run ended on a failure of the emit of that request)
        got = decided[cid]
        aborted = (got.approved, got.reason, got.decided_by, got.args) == (
            False,
            ABORTED,
            "abort",
            None,
        )
        assert approval.decided(got) or (disturbed and aborted), (
            f"{cid}: decided {got}, expected {approval}"
        )
    assert set(decided) <= set(requested)
    # what the approver and the tool's check were asked
    asked = [r.tool_call_id for r in h.requests]
    assert len(asked) == len(set(asked)), f"decide_approval asked twice: {asked}"
    for request in h.requests:
        r, i = parse_call_id(request.tool_call_id)
        approval = course_with(sc, r, i).approval
        assert approval is not None and request.tool_call_id in requested
        assert (request.tool_name, request.args, request.reason) == (
            sc.responses[r].calls[i].tool,
            approval.args,
            approval.reason,
        ), request
    if not sc.approver:
        assert not h.requests
    checks = [
        course_with(sc, r, i).checked
        for r in range(len(sc.responses))
        for i in range(len(sc.responses[r].calls))
    ]
    for args in h.checked:
        assert args in checks, f"requires_approval got {args!r}"
    if disturbed:
        return
    # an undisturbed run asks every call that needs it (in the batches that were answered)
    answered = {m.tool_call_id for m in messages if getattr(m, "role", None) == "toolResult"}
    want = set()
    want_checked = []
    for cid in sorted(answered):
        course = course_with(sc, *parse_call_id(cid))
        if course.approval is not None:
            want.add(cid)
        if course.checked is not None:
            want_checked.append(course.checked)
    assert set(requested) == want, (sorted(requested), sorted(want))
    assert set(decided) == want, (sorted(decided), sorted(want))
    assert sorted(map(repr, h.checked)) == sorted(map(repr, want_checked)), h.checked
    if sc.approver:
        assert set(asked) == want, (sorted(asked), sorted(want))


def _diff(got: list[Any], want: list[Any]) -> str:
    lines = ["created messages differ from the expected run:"]
    for n in range(max(len(got), len(want))):
        a = got[n] if n < len(got) else None
        b = want[n] if n < len(want) else None
        ok = a is not None and b is not None and matches(a, b)
        lines.append(f"{'  ' if ok else '!!'} #{n} got {a!r}\n       want {b!r}")
    return "\n".join(lines)


async def run_and_verify(sc: Scenario) -> Verdict:
    h = Harness(sc)
    messages = await h.run()
    return verify(sc, h, messages)


def run_scenario(sc: Scenario, backend: str) -> Verdict:
    return anyio.run(run_and_verify, sc, backend=backend)
