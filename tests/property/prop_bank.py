"""A fixed bank of hand-written scenarios that, between them, take every declared transition
from every one of its source states. The coverage test runs them through the async driver; the
mutation tests run them (on mutant declarations) through the synchronous driver."""

from __future__ import annotations

from prop_scenarios import (
    ASK_TOOL,
    CHECK_TOOL,
    MISSING_TOOL,
    SEQ_TOOL,
    SYNC_TOOL,
    CallPlan,
    Fault,
    ResponsePlan,
    Scenario,
    ToolPlan,
)

DONE = ResponsePlan(text="done")
CALL = CallPlan()
ASK = CallPlan(tool=ASK_TOOL)


def tools(*calls: CallPlan, **kwargs: object) -> ResponsePlan:
    return ResponsePlan(text="tools", calls=calls, **kwargs)  # type: ignore[arg-type]


BANK: dict[str, Scenario] = {
    "plain": Scenario(responses=(DONE,)),
    "tools": Scenario(
        responses=(
            tools(
                CALL,
                CallPlan(tool=MISSING_TOOL),
                CallPlan(valid=False),
                CallPlan(tool=SYNC_TOOL, plan=ToolPlan(updates=2)),
            ),
            DONE,
        )
    ),
    "only_immediate_errors": Scenario(responses=(tools(CallPlan(tool=MISSING_TOOL)), DONE)),
    "sequential_with_hooks": Scenario(
        mode="sequential",
        responses=(tools(CALL, CallPlan(plan=ToolPlan(updates=1)), CallPlan(valid=False)), DONE),
        with_before=True,
        with_after=True,
    ),
    "parallel_hooks_and_order": Scenario(
        responses=(
            tools(
                CallPlan(before="block"),
                CallPlan(after="override"),
                CallPlan(plan=ToolPlan(outcome="raise")),
                CallPlan(after="raise"),
                order=(3, 2, 1, 0),
            ),
            DONE,
        ),
        with_before=True,
        with_after=True,
    ),
    "before_hook_mutates_args": Scenario(
        responses=(tools(CallPlan(before="mutate")), DONE), with_before=True
    ),
    "truncated": Scenario(
        responses=(tools(CALL, CallPlan(tool=MISSING_TOOL), stop="length"), DONE)
    ),
    "model_error": Scenario(responses=(tools(CALL, stop="error"),)),
    "model_aborted": Scenario(responses=(tools(CALL, stop="aborted"),)),
    "script_exhausted": Scenario(responses=(tools(CALL),)),
    "steering_and_follow_up": Scenario(
        responses=(DONE, DONE, DONE),
        steering=((), ("user",)),
        follow_up=(("user", "note"),),
    ),
    "first_turn_steering": Scenario(responses=(DONE,), steering=(("user", "note"),)),
    "turn_hooks": Scenario(
        responses=(tools(CALL), DONE, DONE),
        prepare=("high", "model"),
        should_stop=(False, True),
    ),
    "terminate": Scenario(
        responses=(tools(CallPlan(plan=ToolPlan(terminate=True))), DONE),
    ),
    "prepare_hook_only": Scenario(responses=(tools(CALL), DONE), prepare=("high", "none")),
    "truncated_with_turn_hooks": Scenario(
        responses=(tools(CALL, stop="length"), DONE), prepare=("high", "none")
    ),
    "immediate_errors_with_turn_hooks": Scenario(
        responses=(tools(CallPlan(tool=MISSING_TOOL)), DONE), prepare=("high", "none")
    ),
    "steering_after_tools": Scenario(responses=(tools(CALL), DONE), steering=((), (), ())),
    # should_stop_after_turn right after a turn that ended without running a tool
    "truncated_then_stop": Scenario(
        responses=(tools(CALL, stop="length"), DONE), should_stop=(True,)
    ),
    "only_immediate_errors_then_stop": Scenario(
        responses=(tools(CallPlan(tool=MISSING_TOOL)), DONE), should_stop=(True,)
    ),
    "approval_every_call_denied_then_stop": Scenario(
        responses=(tools(CallPlan(tool=ASK_TOOL, decision="deny")), DONE),
        approver=False,
        should_stop=(True,),
    ),
    "steering_after_tools_prepared_for": Scenario(
        responses=(tools(CALL), DONE), steering=((), (), ("user",)), prepare=("high",)
    ),
    "steering_after_a_text_turn_prepared_for": Scenario(
        responses=(DONE, DONE), steering=((), ("user", "note")), prepare=("model",)
    ),
    "follow_up_prepared_for": Scenario(
        responses=(DONE, DONE), follow_up=(("user",),), prepare=("off",)
    ),
    "terminate_then_empty_follow_up": Scenario(
        responses=(tools(CallPlan(plan=ToolPlan(terminate=True))), DONE), follow_up=((),)
    ),
    "terminate_then_follow_up": Scenario(
        responses=(tools(CallPlan(plan=ToolPlan(terminate=True))), DONE),
        follow_up=(("user",),),
    ),
    "odd_streams": Scenario(
        responses=(
            tools(CALL, style="faux_nostart"),
            tools(CALL, style="deltas_before_start", cut=2),
            ResponsePlan(text="bye", style="double_start"),
        )
    ),
    "continue_after_tool_result": Scenario(entry="continue", history="tool", responses=(DONE,)),
    # --- approval of tool calls ------------------------------------------------------------
    "approval_approved": Scenario(
        responses=(tools(ASK, CallPlan(tool=CHECK_TOOL, check="no"), CALL), DONE)
    ),
    "approval_every_decision": Scenario(
        responses=(
            tools(
                CallPlan(tool=ASK_TOOL, decision="args", after="override"),
                CallPlan(tool=ASK_TOOL, decision="bad_args"),
                CallPlan(tool=CHECK_TOOL, decision="deny"),
                CallPlan(tool=CHECK_TOOL, check="raise"),
                CallPlan(tool=CHECK_TOOL, check="junk"),
                CallPlan(tool=ASK_TOOL, decision="deny_bool", x=2),
                CallPlan(tool=ASK_TOOL, decision="raise", x=3),
                CallPlan(tool=ASK_TOOL, decision="junk", x=4),
                CallPlan(tool=ASK_TOOL, decision="none", x=5),
                CallPlan(tool=ASK_TOOL, decision="bad_dict", x=6),
                CallPlan(tool=ASK_TOOL, decision="approve_dict", x=7),
                CallPlan(tool=CHECK_TOOL, decision="approve_bool", x=8),
                CallPlan(tool=SYNC_TOOL),
                order=(12, 11, 10, 0),
            ),
            DONE,
        ),
        with_after=True,
    ),
    "approval_asked_by_the_before_hook": Scenario(
        responses=(
            tools(
                CallPlan(before="ask", decision="args"),
                CallPlan(tool=CHECK_TOOL, check="no", before="ask_dict"),
                CallPlan(tool=ASK_TOOL, before="mutate"),
                CallPlan(tool=CHECK_TOOL, before="mutate"),
                CallPlan(tool=ASK_TOOL, before="block"),
            ),
            DONE,
        ),
        with_before=True,
        async_hooks=True,
    ),
    "approval_every_call_denied": Scenario(
        responses=(
            tools(CallPlan(tool=ASK_TOOL, decision="deny"), CallPlan(tool=CHECK_TOOL)),
            DONE,
        ),
        approver=False,
    ),
    "approval_every_call_denied_then_turn_hooks": Scenario(
        responses=(
            tools(
                CallPlan(tool=ASK_TOOL, decision="junk"),
                CallPlan(tool=CHECK_TOOL, decision="deny_bool"),
            ),
            DONE,
        ),
        prepare=("high",),
        should_stop=(False, False),
    ),
    "approval_sequential": Scenario(
        mode="sequential",
        responses=(
            tools(
                CallPlan(tool=ASK_TOOL, decision="deny"),
                ASK,
                CALL,
                CallPlan(tool=CHECK_TOOL, check="no"),
                CallPlan(tool=ASK_TOOL, decision="args"),
            ),
            DONE,
        ),
        with_before=True,
        with_after=True,
    ),
    "approval_a_sequential_tool_in_the_batch": Scenario(
        responses=(tools(ASK, CallPlan(tool=SEQ_TOOL), CallPlan(tool=ASK_TOOL, x=2)), DONE)
    ),
    "approval_times_out": Scenario(
        responses=(tools(CallPlan(tool=ASK_TOOL, decision="timeout"), ASK), DONE),
        async_hooks=True,
    ),
    "approval_terminates": Scenario(
        responses=(tools(CallPlan(tool=ASK_TOOL, plan=ToolPlan(terminate=True))), DONE)
    ),
    "approval_then_steering": Scenario(responses=(tools(ASK), DONE), steering=((), ("user",))),
    # --- aborts ------------------------------------------------------------------------
    "abort_while_streaming": Scenario(responses=(ResponsePlan(style="abort_mid", cut=1),)),
    "abort_inside_the_stream_function": Scenario(
        responses=(ResponsePlan(style="abort_mid_sync", cut=1),)
    ),
    "abort_in_transform_context": Scenario(
        responses=(DONE,), faults=(Fault("transform", 0, "abort"),)
    ),
    "abort_in_get_api_key": Scenario(responses=(DONE,), faults=(Fault("api_key", 0, "abort"),)),
    # the driver cancels an awaited follow-up poll and feeds the abort in awaiting_follow_up
    "abort_in_async_follow_up_poll": Scenario(
        responses=(ResponsePlan(text="done"),),
        follow_up=((),),
        async_hooks=True,
        faults=(Fault("follow_up", 0, "abort"),),
    ),
    "abort_when_the_stream_function_is_called": Scenario(
        responses=(DONE,), faults=(Fault("stream_fn", 0, "abort"),)
    ),
    "abort_at_a_delta": Scenario(
        responses=(DONE,), faults=(Fault("emit:message_update", 1, "abort"),)
    ),
    "abort_before_the_run": Scenario(responses=(DONE,), abort_before=True),
    "abort_in_first_poll": Scenario(
        responses=(DONE,), steering=((),), faults=(Fault("steering", 0, "abort"),)
    ),
    "abort_in_first_async_poll": Scenario(
        responses=(DONE,),
        steering=((),),
        async_hooks=True,
        faults=(Fault("steering", 0, "abort"),),
    ),
    "abort_in_later_async_poll": Scenario(
        responses=(DONE,),
        steering=((), ()),
        async_hooks=True,
        faults=(Fault("steering", 1, "abort"),),
    ),
    "abort_in_later_poll": Scenario(
        responses=(DONE,), steering=((), ()), faults=(Fault("steering", 1, "abort"),)
    ),
    "abort_in_follow_up_poll": Scenario(
        responses=(DONE,), follow_up=((),), faults=(Fault("follow_up", 0, "abort"),)
    ),
    "abort_after_turn": Scenario(
        responses=(tools(CALL), DONE), prepare=("none",), faults=(Fault("prepare", 0, "abort"),)
    ),
    "abort_in_prepare_while_steering_waits": Scenario(
        responses=(DONE, DONE),
        steering=((), ("user",)),
        prepare=("none",),
        faults=(Fault("prepare", 0, "abort"),),
    ),
    "abort_in_the_second_steering_poll": Scenario(
        responses=(tools(CALL), DONE),
        steering=((), (), ()),
        faults=(Fault("steering", 2, "abort"),),
    ),
    "abort_in_the_second_async_steering_poll": Scenario(
        responses=(tools(CALL), DONE),
        steering=((), (), ()),
        async_hooks=True,
        faults=(Fault("steering", 2, "abort"),),
    ),
    "second_steering_poll_steers_as_the_signal_fires": Scenario(
        responses=(tools(CALL), DONE),
        steering=((), (), ("user",)),
        faults=(Fault("steering", 2, "abort"),),
    ),
    "abort_in_should_stop_hook": Scenario(
        responses=(DONE,), should_stop=(False,), faults=(Fault("should_stop", 0, "abort"),)
    ),
    "abort_in_should_stop_hook_that_stops": Scenario(
        responses=(DONE,), should_stop=(True,), faults=(Fault("should_stop", 0, "abort"),)
    ),
    "abort_at_turn_end": Scenario(
        responses=(tools(CALL), DONE), faults=(Fault("emit:turn_end", 0, "abort"),)
    ),
    "abort_in_before_hook": Scenario(
        responses=(tools(CallPlan(before="abort"), CALL), DONE), with_before=True
    ),
    "abort_while_waiting_for_approval": Scenario(
        responses=(tools(CALL, CallPlan(tool=ASK_TOOL, decision="abort"), ASK), DONE)
    ),
    "abort_while_waiting_for_approval_sequential": Scenario(
        mode="sequential",
        responses=(tools(CALL, ASK, CallPlan(tool=ASK_TOOL, decision="abort"), CALL), DONE),
    ),
    "abort_at_an_approval_request": Scenario(
        responses=(tools(ASK, CALL), DONE), faults=(Fault("emit:approval_requested", 0, "abort"),)
    ),
    "abort_at_an_approval_decision": Scenario(
        responses=(tools(ASK, ASK), DONE), faults=(Fault("emit:approval_decided", 0, "abort"),)
    ),
    "abort_in_a_tool": Scenario(
        responses=(tools(CallPlan(plan=ToolPlan(outcome="abort")), CALL), DONE)
    ),
    "first_poll_steers_as_the_signal_fires": Scenario(
        responses=(DONE,), steering=(("user",),), faults=(Fault("steering", 0, "abort"),)
    ),
    "later_poll_steers_as_the_signal_fires": Scenario(
        responses=(tools(CALL), DONE),
        steering=((), ("user",)),
        faults=(Fault("steering", 1, "abort"),),
    ),
    "follow_up_as_the_signal_fires": Scenario(
        responses=(DONE, DONE), follow_up=(("user",),), faults=(Fault("follow_up", 0, "abort"),)
    ),
    # --- failures ----------------------------------------------------------------------
    "fail_in_prepare_hook": Scenario(
        responses=(tools(CALL), DONE), prepare=("none",), faults=(Fault("prepare", 0),)
    ),
    "fail_in_prepare_while_a_follow_up_waits": Scenario(
        responses=(DONE, DONE),
        follow_up=(("user", "note"),),
        prepare=("none",),
        faults=(Fault("prepare", 0),),
    ),
    "abort_then_fail_in_prepare_while_steering_waits": Scenario(
        responses=(DONE, DONE),
        steering=((), ("user",)),
        prepare=("none",),
        faults=(Fault("prepare", 0, "abort_raise"),),
    ),
    "fail_in_the_second_steering_poll": Scenario(
        responses=(tools(CALL), DONE), steering=((), (), ()), faults=(Fault("steering", 2),)
    ),
    "abort_then_fail_in_the_second_steering_poll": Scenario(
        responses=(tools(CALL), DONE),
        steering=((), (), ()),
        faults=(Fault("steering", 2, "abort_raise"),),
    ),
    "abort_then_fail_in_transform": Scenario(
        responses=(DONE,), faults=(Fault("transform", 0, "abort_raise"),)
    ),
    "abort_then_fail_in_first_poll": Scenario(
        responses=(DONE,), steering=((),), faults=(Fault("steering", 0, "abort_raise"),)
    ),
    "abort_then_fail_in_later_poll": Scenario(
        responses=(DONE,), steering=((), ()), faults=(Fault("steering", 1, "abort_raise"),)
    ),
    "abort_then_fail_in_follow_up_poll": Scenario(
        responses=(DONE,), follow_up=((),), faults=(Fault("follow_up", 0, "abort_raise"),)
    ),
    "abort_then_fail_in_prepare_hook": Scenario(
        responses=(tools(CALL), DONE),
        prepare=("none",),
        faults=(Fault("prepare", 0, "abort_raise"),),
    ),
    "abort_then_fail_in_should_stop": Scenario(
        responses=(DONE,), should_stop=(False,), faults=(Fault("should_stop", 0, "abort_raise"),)
    ),
    "abort_then_fail_at_turn_end": Scenario(
        responses=(tools(CALL), DONE), faults=(Fault("emit:turn_end", 0, "abort_raise"),)
    ),
    "abort_then_fail_while_preparing_tools": Scenario(
        responses=(tools(CALL, CALL), DONE),
        with_before=True,
        faults=(Fault("emit:tool_execution_start", 0, "abort_raise"),),
    ),
    "abort_then_fail_while_executing": Scenario(
        responses=(tools(CallPlan(plan=ToolPlan(updates=1)), CALL), DONE),
        faults=(Fault("emit:tool_execution_update", 0, "abort_raise"),),
    ),
    "fail_while_streaming": Scenario(responses=(ResponsePlan(style="raise_mid", cut=2),)),
    "fail_stream_without_end": Scenario(responses=(ResponsePlan(style="exhausted", cut=1),)),
    "fail_unknown_stream_event": Scenario(responses=(ResponsePlan(style="unknown_event", cut=1),)),
    "fail_stream_at_once": Scenario(responses=(ResponsePlan(style="raise_before"),)),
    "fail_transform": Scenario(responses=(DONE,), faults=(Fault("transform", 0),)),
    "fail_first_poll": Scenario(responses=(DONE,), steering=((),), faults=(Fault("steering", 0),)),
    "fail_later_poll": Scenario(
        responses=(DONE,), steering=((), ()), faults=(Fault("steering", 1),)
    ),
    "fail_follow_up_poll": Scenario(
        responses=(DONE,), follow_up=((),), faults=(Fault("follow_up", 0),)
    ),
    "fail_after_turn": Scenario(
        responses=(DONE,), should_stop=(False,), faults=(Fault("should_stop", 0),)
    ),
    "fail_at_turn_end": Scenario(
        responses=(tools(CALL), DONE), faults=(Fault("emit:turn_end", 0),)
    ),
    "fail_while_preparing_tools": Scenario(
        responses=(tools(CALL, CALL), DONE),
        with_before=True,
        faults=(Fault("emit:tool_execution_start", 0),),
    ),
    "fail_at_an_approval_request": Scenario(
        responses=(tools(CALL, ASK), DONE), faults=(Fault("emit:approval_requested", 0),)
    ),
    "abort_then_fail_at_an_approval_request": Scenario(
        responses=(tools(ASK, CALL), DONE),
        faults=(Fault("emit:approval_requested", 0, "abort_raise"),),
    ),
    "fail_at_an_approval_decision": Scenario(
        responses=(tools(ASK, ASK), DONE), faults=(Fault("emit:approval_decided", 0),)
    ),
    "fail_while_executing": Scenario(
        responses=(tools(CallPlan(plan=ToolPlan(updates=1)), CALL), DONE),
        faults=(Fault("emit:tool_execution_update", 0),),
    ),
}
