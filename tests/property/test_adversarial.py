"""Hostile inputs and faults: no raise, no hang, no leak, nothing lost.

Every user-supplied callable (tools, ``prepare_arguments``, every hook, the polls, the stream
function, ``emit`` and Agent listeners) may behave, return junk, raise anything, hang until
rescued, or fire the abort, on every call or only on its n-th one; aborts and outside
cancellation strike at random events. Whatever happens:

* ``run_agent_loop`` returns normally (outside cancellation propagates; a BaseException from
  user code closes the run as aborted and is re-raised bare, the very same object);
* every run's events keep the grammar (``agentcore_fsm.devtools.testing.check_run``) and the
invariants
  of :mod:`adversarial` (an independent restatement), and the transcripts the model and the
  Agent see are well-formed;
* error texts are non-empty str; junk is reported naming the callable that returned it;
* once the abort fired nothing starts, and the run ends "aborted";
* no run stays registered on the shared machine and no task is left running.

Each example runs in its own ``anyio.run`` (trio and asyncio) under ``anyio.fail_after``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from adversarial import (
    AGENT_HOOK_SITES,
    BASE_EXCEPTIONS,
    EXCEPTIONS,
    HANG_TIMEOUT,
    HOOK_SITES,
    JUNK,
    JUNK_LABELS,
    LOOP_HOOK_SITES,
    MODEL,
    POLL_SITES,
    SCHEMA,
    SYSTEM,
    TOOL_EXEC_SITES,
    TOOL_HOOK_SITES,
    TOOL_OF_SITE,
    AgentHarness,
    Behaviour,
    CallSpec,
    Harness,
    Plan,
    Response,
    RunSummary,
    check_invariants,
    check_llm_context,
    check_transcript,
    describe_event,
    exception_expectation,
    failure_text,
    junk_label,
    label,
    message_text,
    plans,
    registered_runs,
    result_text,
    same,
    text_meets,
    verify_run,
)
from hypothesis import event, given, settings
from hypothesis import strategies as st

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.config import default_convert_to_llm
from agentcore_fsm.devtools.testing import EventRecorder, FauxProvider, check_run, faux_response

BACKENDS = ["trio", "asyncio"]


def scaled(n: int) -> int:
    """``n`` examples under the ``ci`` profile, proportionally more under ``thorough``."""
    return max(1, n * settings().max_examples // 300)


@pytest.fixture(autouse=True)
def _quiet_library_logger() -> Iterator[None]:
    # the library logs what it ignores by design (listeners raising in a tail, ...)
    logger = logging.getLogger("agentcore_fsm")
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was


def run_plan(plan: Plan, backend: str) -> tuple[Harness, RunSummary]:
    before = registered_runs()
    h = Harness(plan)
    anyio.run(h.run, backend=backend)
    summary = verify_run(h)
    assert registered_runs() == before, "a run stayed registered on the shared machine"
    return h, summary


def tool_plan(site: str, behaviour: Behaviour, *, is_async: bool = False, **extra: Any) -> Plan:
    """One tool call (of the tool ``site`` belongs to), then a final answer; only ``site``
    misbehaves. Hooks and polls are configured when ``site`` is one."""
    tool = TOOL_OF_SITE.get(site, "calc")
    hooks = (site,) if site in HOOK_SITES else ()
    return Plan(
        responses=(
            Response(text="calling", calls=(CallSpec(tool=tool),)),
            Response(text="done"),
            Response(text="more"),
            Response(text="still more"),
        ),
        hooks=hooks,
        behaviours=((site, behaviour),),
        asyncs=(site,) if is_async else (),
        **extra,
    )


def the_result(summary: RunSummary) -> Any:
    results = [m for m in summary.created if getattr(m, "role", None) == "toolResult"]
    assert len(results) == 1, [label(m) for m in summary.created]
    return results[0]


# --- 1. everything at once -----------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=scaled(400), deadline=None)
@given(plan=plans())
def test_hostile_loop_runs_end_well(backend: str, plan: Plan) -> None:
    h, summary = run_plan(plan, backend)
    event(f"reason={summary.reason}")
    event(f"misbehaved={sorted({kind for _, kind, _ in h.misbehaved})}")


# --- 2. junk return values are reported, naming the callable --------------------------------

NAMED_SITES = (*TOOL_EXEC_SITES, "prepare_arguments", *TOOL_HOOK_SITES, *LOOP_HOOK_SITES, "emit")
ASYNC_CAPABLE = frozenset({*HOOK_SITES, "emit"})

# junk values that are not junk for a site (a valid return) and those that may be coerced
ACCEPTED = {
    "before_tool_call": {"None"},
    "after_tool_call": {"None"},
    "prepare_next_turn": {"None"},
    "should_stop_after_turn": {"None", "True"},
    "get_api_key": {"None", "str"},
    "emit": set(JUNK_LABELS),  # emit's return value is ignored
}
MAY_COERCE = {
    "execute": {"dict"},
    "execute_sync": {"dict"},
    "before_tool_call": {"dict"},
    "after_tool_call": {"dict"},
    "prepare_next_turn": {"dict"},
    # truthiness is a fair reading of "should I stop?"; only a value without one is junk
    "should_stop_after_turn": {"str", "int", "dict", "junk list", "object", "Model", "Usage"}
    | {"UserMessage", "pending AssistantMessage", "bytes", "nan"},
}


def site_name_in(site: str) -> tuple[str, ...]:
    """What a report about ``site`` must name (any one of them)."""
    if site in TOOL_EXEC_SITES:
        return (TOOL_OF_SITE[site],)
    if site == "prepare_arguments":
        return ("prepare_arguments", "prep")
    return (site,)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=scaled(450), deadline=None)  # enough to try every combination
@given(
    site=st.sampled_from(NAMED_SITES),
    j=st.integers(0, len(JUNK) - 1),
    is_async=st.booleans(),
)
def test_junk_return_values_are_named(backend: str, site: str, j: int, is_async: bool) -> None:
    what = junk_label(j)
    verdict = (
        "accepted"
        if what in ACCEPTED.get(site, set())
        else "lenient"
        if what in MAY_COERCE.get(site, set())
        else "strict"
    )
    plan = tool_plan(site, Behaviour("junk", j), is_async=is_async and site in ASYNC_CAPABLE)
    _, summary = run_plan(plan, backend)
    names = site_name_in(site)
    if site in (*TOOL_EXEC_SITES, "prepare_arguments", *TOOL_HOOK_SITES):
        assert summary.reason == "completed", f"{site} returned {what}: the run must go on"
        result = the_result(summary)
        text = result_text(result)
        if verdict == "strict":
            assert result.is_error, f"{site} returned {what}: the call must get an error result"
        if verdict == "accepted":
            assert not result.is_error, f"{site} returned {what} (valid), got error {text!r}"
        if result.is_error:
            assert any(n in text for n in names), (
                f"{site} returned {what}: the error result {text!r} does not name {names}"
            )
    elif site == "emit":
        assert summary.reason == "completed", f"emit returned {what}: it must be ignored"
    else:
        error = failure_text(summary)
        if verdict == "strict":
            assert summary.reason == "error", f"{site} returned {what}; run ended {summary.reason}"
        if verdict == "accepted":
            assert summary.reason in ("completed", "stopped"), (site, what, summary.reason, error)
        if summary.reason == "error":
            assert isinstance(error, str) and any(n in error for n in names), (
                f"{site} returned {what}: the failure {error!r} does not name {site}"
            )


# --- 3. junk from the polls is never injected as junk ----------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=scaled(100), deadline=None)  # every combination
@given(
    site=st.sampled_from(POLL_SITES),
    j=st.integers(0, len(JUNK) - 1),
    is_async=st.booleans(),
)
def test_junk_polls_inject_no_junk(backend: str, site: str, j: int, is_async: bool) -> None:
    what = junk_label(j)
    plan = Plan(
        responses=(Response(text="first"), Response(text="second"), Response(text="third")),
        hooks=POLL_SITES,
        behaviours=((site, Behaviour("junk", j, 0)),),
        asyncs=(site,) if is_async else (),
    )
    _, summary = run_plan(plan, backend)
    normal = {"hi", "steered", "followed up"}
    injected = [
        m
        for m in summary.created
        if getattr(m, "role", None) not in ("assistant", "toolResult")
        and message_text(m) not in normal
    ]
    assert len(injected) <= 1, (
        f"{site} returned {what} once; injected {[label(m) for m in injected]}"
    )
    error = failure_text(summary)
    if summary.reason == "error":
        assert isinstance(error, str) and site in error, (
            f"{site} returned {what}: the failure {error!r} does not name the poll"
        )
    if what == "str":
        coerced = (
            len(injected) == 1
            and isinstance(injected[0], UserMessage)
            and message_text(injected[0]) == "hello"
        )
        assert coerced or summary.reason == "error", (
            f"{site} returned 'hello': expected one user message or a failure naming the poll; "
            f"got {[label(m) for m in injected]}, reason {summary.reason}"
        )


# --- 4. raising user code: error texts ------------------------------------------------------

RAISE_SITES = (*NAMED_SITES, *POLL_SITES, "stream_fn", "stream_mid")


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=scaled(450), deadline=None)  # every combination
@given(
    site=st.sampled_from(RAISE_SITES),
    e=st.integers(0, len(EXCEPTIONS) - 1),
    is_async=st.booleans(),
)
def test_raising_user_code_gives_error_texts(
    backend: str, site: str, e: int, is_async: bool
) -> None:
    class_name, expect = exception_expectation(e)
    if site in ("stream_fn", "stream_mid"):
        style = "raise_before" if site == "stream_fn" else "raise_mid"
        plan = Plan(responses=(Response(text="a longer text", style=style, arg=e, cut=2),))
    else:
        plan = tool_plan(
            site,
            Behaviour("raise", e, 0),
            is_async=is_async and site in ASYNC_CAPABLE,
        )
    _, summary = run_plan(plan, backend)
    if site in (*TOOL_EXEC_SITES, "prepare_arguments", *TOOL_HOOK_SITES):
        assert summary.reason == "completed", summary.reason
        result = the_result(summary)
        text = result_text(result)
        assert result.is_error and text_meets(text, class_name, expect), (
            f"{site} raised {class_name}: error result {text!r}"
        )
    else:
        error = failure_text(summary)
        assert summary.reason == "error", f"{site} raised {class_name}; run ended {summary.reason}"
        assert text_meets(error, class_name, expect), (
            f"{site} raised {class_name}: failure message {error!r}"
        )


# --- 5. BaseExceptions close the run, then propagate bare -----------------------------------

BASE_SITES = (
    "execute",
    "execute_sync",
    "prepare_arguments",
    "before_tool_call",
    "after_tool_call",
    "prepare_next_turn",
    "should_stop_after_turn",
    "transform_context",
    "convert_to_llm",
    "get_api_key",
    "get_steering_messages",
    "get_follow_up_messages",
    "stream_fn",
    "stream_mid",
    "emit",
)


def base_plan(site: str, e: int, nth: int, is_async: bool, mode: str) -> Plan:
    calls = (CallSpec("calc"), CallSpec("calc_sync"), CallSpec("prep"))
    first = Response(text="calling", calls=calls)
    if site in ("stream_fn", "stream_mid"):
        style = "base_before" if site == "stream_fn" else "base_mid"
        first = Response(text="calling", calls=calls, style=style, arg=e, cut=3)
        behaviours: tuple[tuple[str, Behaviour], ...] = ()
    else:
        behaviours = ((site, Behaviour("base", e, nth if site == "emit" else 0)),)
    return Plan(
        responses=(first, Response(text="done")),
        hooks=HOOK_SITES,
        behaviours=behaviours,
        asyncs=tuple(s for s in (site,) if is_async and s in ASYNC_CAPABLE),
        mode=mode,
    )


async def run_bare(h: Harness) -> None:
    """The run with no scope or task group of ours around it (nothing to wrap what it raises)."""
    h.history = []
    context = AgentContext(SYSTEM, [], h.tools())
    with anyio.fail_after(HANG_TIMEOUT):
        h.returned = await run_agent_loop(
            [UserMessage(content="go")],
            context,
            h.loop_config(),
            h.emit_fn(),
            signal=h.controller.signal,
            stream_fn=h.stream_fn,
        )


def assert_closed_as_aborted(events: list[Any], who: str) -> None:
    summary = check_invariants(events)
    check_run(events)
    assert summary.reason == "aborted", f"{who}: the run ended {summary.reason!r}, not aborted"


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=scaled(250), deadline=None)  # every combination
@given(
    site=st.sampled_from(BASE_SITES),
    e=st.integers(0, len(BASE_EXCEPTIONS) - 1),
    is_async=st.booleans(),
    mode=st.sampled_from(["parallel", "sequential"]),
)
def test_base_exceptions_close_the_run_then_propagate(
    backend: str, site: str, e: int, is_async: bool, mode: str
) -> None:
    before = registered_runs()
    nth = (4 * e + 2 * is_async + (mode == "sequential")) % 13  # the event emit raises at
    h = Harness(base_plan(site, e, nth, is_async, mode))
    with pytest.raises(BaseException) as info:
        anyio.run(run_bare, h, backend=backend)
    assert h.base is not None, f"{site} was never reached"
    assert info.value is h.base, (
        f"{site} raised {h.base!r}; the caller got {info.value!r} ({type(info.value).__name__})"
    )
    assert_closed_as_aborted(h.events, f"{site} raised {type(h.base).__name__}")
    assert not h.problems, h.problems
    assert registered_runs() == before, "a run stayed registered on the shared machine"


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=scaled(200), deadline=None)  # every combination
@given(
    site=st.sampled_from(["listener", "execute", "before_tool_call", "transform_context"]),
    e=st.integers(0, len(BASE_EXCEPTIONS) - 1),
    nth=st.sampled_from([0, 1, 2, 5, 9, 14]),
    is_async=st.booleans(),
)
def test_agent_base_exceptions_close_the_run_then_propagate(
    backend: str, site: str, e: int, nth: int, is_async: bool
) -> None:
    before = registered_runs()
    hooks = tuple(s for s in (site,) if s in AGENT_HOOK_SITES)
    plan = Plan(
        responses=(
            Response(text="calling", calls=(CallSpec("calc"), CallSpec("calc_sync"))),
            Response(text="done"),
        ),
        hooks=hooks,
        behaviours=((site, Behaviour("base", e, nth if site == "listener" else 0)),),
        asyncs=(site,) if is_async and site != "execute" else (),
    )
    h = AgentHarness(plan)
    agent = h.make_agent()
    first, last = EventRecorder(), EventRecorder()
    agent.subscribe(first)
    agent.subscribe(h.emit_fn("listener"))
    agent.subscribe(last)

    async def prompt() -> None:
        with anyio.fail_after(HANG_TIMEOUT):
            await agent.prompt("go")

    with pytest.raises(BaseException) as info:
        anyio.run(prompt, backend=backend)
    assert h.base is not None, f"{site} was never reached"
    assert info.value is h.base, (
        f"{site} raised {h.base!r}; prompt() raised {info.value!r} ({type(info.value).__name__})"
    )
    for name, recorder in (("first listener", first), ("last listener", last)):
        assert_closed_as_aborted(
            recorder.events, f"{site} raised {type(h.base).__name__}; the {name}'s events"
        )
    assert not agent.is_busy and not agent.state.is_streaming
    assert not agent.state.pending_tool_calls
    check_transcript(agent.state.messages)
    assert registered_runs() == before, "a run stayed registered on the shared machine"
    assert_second_prompt_works(agent, backend, [first, last])


def assert_second_prompt_works(agent: Any, backend: str, recorders: list[EventRecorder]) -> None:
    """With every hook cleared and a plain model, the agent runs again on a clean transcript."""
    for name in AGENT_HOOK_SITES:
        setattr(agent, name, None)
    # messages the first run left queued (steered or followed up) may take a turn each
    faux = FauxProvider([faux_response(f"second answer {n}") for n in range(6)])
    agent.stream_fn = faux
    for recorder in recorders:
        recorder.clear()
    before = list(agent.state.messages)

    async def again() -> Any:
        with anyio.fail_after(HANG_TIMEOUT):
            return await agent.prompt("second")

    messages = anyio.run(again, backend=backend)
    for recorder in recorders:
        summary = check_invariants(recorder.events, returned=messages)
        check_run(recorder.events, messages)
        assert summary.reason == "completed", (
            f"a plain second prompt ended {summary.reason!r}: {failure_text(summary)!r}"
        )
    assert faux.calls, "the second prompt made no model call"
    for k, context in enumerate(faux.calls):
        check_llm_context(context, call=k)
    first_answer = next(
        (i for i, m in enumerate(messages) if getattr(m, "role", None) == "assistant"),
        len(messages),
    )
    # the prompt, and any message the first run left queued, precede the first model call
    want = default_convert_to_llm([*before, *messages[:first_answer]])
    got = faux.calls[0].messages
    assert len(got) == len(want) and all(same(a, b) for a, b in zip(got, want, strict=True)), (
        f"the second prompt's model context {[label(m) for m in got]} is not the transcript "
        f"{[label(m) for m in want]}"
    )
    assert list(agent.state.messages) == [*before, *messages]
    check_transcript(agent.state.messages)


# --- 6. outside cancellation ---------------------------------------------------------------

HANGABLE = (
    "execute",
    "execute_sync",
    "before_tool_call",
    "after_tool_call",
    "prepare_next_turn",
    "should_stop_after_turn",
    "transform_context",
    "convert_to_llm",
    "get_api_key",
    "get_steering_messages",
    "get_follow_up_messages",
    "stream_fn",
)


@st.composite
def cancel_plans(draw: st.DrawFn, *, agent: bool = False) -> Plan:
    how = draw(st.sampled_from(["event", "event", "hang"]))
    emitter = "listener" if agent else "emit"
    hook_sites = AGENT_HOOK_SITES if agent else HOOK_SITES
    hooks = tuple(s for s in hook_sites if draw(st.booleans()))
    calls = tuple(
        draw(
            st.lists(
                st.sampled_from([CallSpec("calc"), CallSpec("calc_sync"), CallSpec("seq")]),
                min_size=1,
                max_size=3,
            )
        )
    )
    first = Response(text="calling", calls=calls)
    behaviours: tuple[tuple[str, Behaviour], ...] = ()
    rescue = "cancel"
    cancel_at = None
    if how == "event":
        cancel_at = draw(st.integers(0, 40))
    else:
        choices = [
            s for s in HANGABLE if s in hooks or s in ("execute", "execute_sync", "stream_fn")
        ]
        if agent:
            choices = [s for s in choices if s not in POLL_SITES]
        site = draw(st.sampled_from(choices))
        rescue = draw(st.sampled_from(["cancel", "timer"]))
        if site == "stream_fn":
            first = Response(
                text="calling", calls=calls, style="hang", arg=1, cut=draw(st.integers(0, 3))
            )
        else:
            behaviours = ((site, Behaviour("hang", 1, draw(st.integers(0, 1)))),)
            if site in POLL_SITES:
                hooks = tuple(sorted({*hooks, site}))
    asyncs = tuple(s for s in (*hooks, emitter) if draw(st.booleans()))
    return Plan(
        responses=(first, Response(text="done")),
        hooks=hooks,
        behaviours=behaviours,
        asyncs=asyncs,
        mode=draw(st.sampled_from(["parallel", "sequential"])),
        cancel_at=cancel_at,
        rescue=rescue,
    )


def assert_cancellation_propagated(h: Harness) -> None:
    if h.plan.rescue == "timer" and h.counts and any(k == "hang" for _, k, _ in h.misbehaved):
        assert not h.returned_normally, "move_on_after expired during a hang, yet the run returned"


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=scaled(150), deadline=None)
@given(plan=cancel_plans())
def test_outside_cancellation_propagates_after_a_closing_tail(backend: str, plan: Plan) -> None:
    h, _ = run_plan(plan, backend)
    assert_cancellation_propagated(h)


def run_agent_plan(plan: Plan, backend: str) -> AgentHarness:
    before = registered_runs()
    h = AgentHarness(plan)
    agent = h.make_agent()
    first, last = EventRecorder(), EventRecorder()
    agent.subscribe(first)
    unsubscribe = agent.subscribe(h.emit_fn("listener"))
    agent.subscribe(last)
    transcript_before = list(agent.state.messages)

    async def main() -> None:
        async def body() -> Any:
            return await agent.prompt(plan.prompt)

        await h.guarded(body)

    anyio.run(main, backend=backend)
    summary = verify_run(h)
    for name, recorder in (("first", first), ("last", last)):
        try:
            check_invariants(
                recorder.events,
                returned=h.returned if h.returned_normally else None,
                mode=plan.mode,
            )
        except AssertionError as exc:
            raise AssertionError(f"the {name} listener's events: {exc}") from None
        check_run(recorder.events, h.returned if h.returned_normally else None)
    assert first.types() == last.types(), (
        f"two listeners saw different runs: {first.types()} vs {last.types()}"
    )
    state = agent.state
    assert list(state.messages) == [*transcript_before, *summary.created], (
        "the transcript is not what the run's message_end events said"
    )
    check_transcript(state.messages)
    assert not agent.is_busy, "the agent is still busy after the run"
    assert not state.is_streaming and state.streaming_message is None
    assert not state.pending_tool_calls, state.pending_tool_calls
    if summary.reason in ("error", "aborted"):
        assert isinstance(state.error_message, str) and state.error_message, (
            f"the run ended {summary.reason!r}; state.error_message is {state.error_message!r}"
        )
    assert registered_runs() == before, "a run stayed registered on the shared machine"
    unsubscribe()
    assert_second_prompt_works(agent, backend, [first, last])
    assert registered_runs() == before, "a run stayed registered on the shared machine"
    return h


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=scaled(120), deadline=None)
@given(plan=cancel_plans(agent=True))
def test_agent_outside_cancellation_leaves_a_clean_agent(backend: str, plan: Plan) -> None:
    h = run_agent_plan(plan, backend)
    assert_cancellation_propagated(h)


# --- 7. the Agent under fire ---------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=scaled(200), deadline=None)
@given(plan=plans(agent=True))
def test_hostile_agent_runs_leave_a_clean_agent(backend: str, plan: Plan) -> None:
    run_agent_plan(plan, backend)


# --- 8. abort or failure at any point; sequential order kept ---------------------------------


@st.composite
def disruption_plans(draw: st.DrawFn) -> Plan:
    calls = tuple(
        draw(
            st.lists(
                st.sampled_from(
                    [CallSpec("calc"), CallSpec("calc_sync"), CallSpec("prep"), CallSpec("seq")]
                ),
                min_size=2,
                max_size=4,
            )
        )
    )
    how = draw(st.sampled_from(["abort_at", "abort_at", "emit_raise", "tool_abort", "hook_abort"]))
    hooks = HOOK_SITES if draw(st.booleans()) else TOOL_HOOK_SITES
    behaviours: tuple[tuple[str, Behaviour], ...] = ()
    abort_at = None
    if how == "abort_at":
        abort_at = draw(st.integers(0, 45))
    elif how == "emit_raise":
        behaviours = (("emit", Behaviour("raise", 0, draw(st.integers(0, 45)))),)
    elif how == "tool_abort":
        site = draw(st.sampled_from(["execute", "execute_sync"]))
        behaviours = ((site, Behaviour("abort", 0, draw(st.integers(0, 2)))),)
    else:
        site = draw(st.sampled_from([s for s in hooks if s not in POLL_SITES]))
        behaviours = ((site, Behaviour("abort", 0, draw(st.integers(0, 2)))),)
    asyncs = tuple(s for s in (*hooks, "emit") if draw(st.booleans()))
    return Plan(
        responses=(
            Response(text="calling", calls=calls),
            Response(text="again", calls=calls[:1]),
            Response(text="done"),
        ),
        hooks=hooks,
        behaviours=behaviours,
        asyncs=asyncs,
        mode=draw(st.sampled_from(["parallel", "sequential"])),
        abort_at=abort_at,
    )


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=scaled(250), deadline=None)
@given(plan=disruption_plans())
def test_abort_or_failure_at_any_point(backend: str, plan: Plan) -> None:
    h, summary = run_plan(plan, backend)
    raised = [m for m in h.misbehaved if m[0] == "emit" and m[1] == "raise"]
    if raised and h.abort_mark is None:
        end_at = len(h.events) - 1
        if raised[0][2] <= end_at:  # (the index just after the event emit raised on)
            assert summary.reason == "error", (
                f"emit raised at #{raised[0][2]}; run ended {summary.reason}"
            )


# --- 9. abort callbacks that raise ---------------------------------------------------------


def _raising_callback() -> None:
    raise RuntimeError("callback boom")


def test_a_raising_abort_callback_does_not_stop_the_others() -> None:
    controller = AbortController()
    seen: list[str] = []
    controller.signal.add_callback(lambda: seen.append("first"))
    controller.signal.add_callback(_raising_callback)
    controller.signal.add_callback(lambda: seen.append("last"))
    controller.abort("why")  # must not raise into the caller
    assert controller.signal.aborted and controller.signal.reason == "why"
    assert seen == ["first", "last"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", ["emit", "tool", "task"])
def test_a_run_whose_signal_has_a_raising_callback_still_aborts(backend: str, where: str) -> None:
    before = registered_runs()
    controller = AbortController()
    controller.signal.add_callback(_raising_callback)  # before the run's own callback
    events: list[Any] = []
    abort_errors: list[BaseException] = []

    def fire() -> None:
        try:
            controller.abort("stop")
        except BaseException as exc:
            abort_errors.append(exc)

    async def execute(tool_call_id: Any, args: Any, signal: Any, on_update: Any) -> Any:
        if where == "tool":
            fire()
        await anyio.sleep_forever()  # ignores the signal: only cancellation ends it

    def emit(event: Any) -> None:
        events.append(event)
        if where == "emit" and event.type == "tool_execution_start":
            fire()

    tool = AgentTool("sleepy", "never returns", SCHEMA, execute)
    faux = FauxProvider([faux_response(tool_calls=[_call("sleepy")]), faux_response("done")])
    out: dict[str, Any] = {}

    async def main() -> None:
        with anyio.fail_after(HANG_TIMEOUT):
            async with anyio.create_task_group() as tg:
                if where == "task":

                    async def later() -> None:
                        while not any(e.type == "tool_execution_start" for e in events):
                            await anyio.sleep(0.001)
                        fire()

                    tg.start_soon(later)
                out["messages"] = await run_agent_loop(
                    [UserMessage(content="go")],
                    AgentContext(SYSTEM, [], [tool]),
                    AgentLoopConfig(model=MODEL),
                    emit,
                    signal=controller.signal,
                    stream_fn=faux,
                )

    try:
        anyio.run(main, backend=backend)
    except BaseException as exc:  # a hang (TimeoutError) or anything raised
        pytest.fail(f"the run did not end cleanly: {exc!r}")
    assert not abort_errors, f"controller.abort() raised {abort_errors[0]!r} into its caller"
    summary = check_invariants(events, returned=out["messages"])
    check_run(events, out["messages"])
    assert summary.reason == "aborted", summary.reason
    results = [m for m in summary.created if getattr(m, "role", None) == "toolResult"]
    assert [result_text(m) for m in results] == ["Operation aborted"]
    assert registered_runs() == before


def _call(name: str) -> Any:
    from agentcore_fsm import ToolCall

    return ToolCall(id="c1", name=name, arguments={"x": 1})


# --- 10. invalid prompts are refused before anything happens --------------------------------

INVALID_PROMPTS = [
    pytest.param([123], id="int"),
    pytest.param([None], id="None"),
    pytest.param([{"foo": 1}], id="dict-without-role"),
    pytest.param([{"role": 5, "content": "x"}], id="dict-with-int-role"),
    pytest.param([UserMessage(content="fine"), 123], id="message-then-int"),
    pytest.param([Model(id="not-a-message")], id="Model"),
    pytest.param([object()], id="object"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prompts", INVALID_PROMPTS)
def test_invalid_prompts_are_refused_before_any_event(backend: str, prompts: list[Any]) -> None:
    before = registered_runs()
    events: list[Any] = []
    faux = FauxProvider([faux_response("never")])

    async def main() -> None:
        await run_agent_loop(
            prompts,
            AgentContext(SYSTEM, [], []),
            AgentLoopConfig(model=MODEL),
            events.append,
            stream_fn=faux,
        )

    with pytest.raises(TypeError):
        anyio.run(main, backend=backend)
    assert not events, f"events before the refusal: {[describe_event(e) for e in events]}"
    assert not faux.calls
    assert registered_runs() == before


def test_helpers_are_consistent() -> None:
    """The checker rejects what it must (so that it can fail)."""
    bad = [
        UserMessage(content="q"),
        _assistant_with_call("c1"),
    ]
    with pytest.raises(AssertionError):
        check_transcript(bad)
    ok = [*bad, _result("c1")]
    check_transcript(ok)


def _assistant_with_call(call_id: str) -> Any:
    from agentcore_fsm import AssistantMessage, ToolCall

    return AssistantMessage(
        content=[ToolCall(id=call_id, name="calc", arguments={"x": 1})], stop_reason="toolUse"
    )


def _result(call_id: str) -> Any:
    from agentcore_fsm import ToolResultMessage

    return ToolResultMessage(
        tool_call_id=call_id, tool_name="calc", content=[TextContent(text="x")]
    )
