"""Runs of model fallback and context compaction (docs/policies-models.md), with their oracle.

A :class:`ModelCase` scripts each model request's outcome ("ok", or a failure kind), the
fallback list, the compaction settings, follow-up prompts (more requests in one run) and where
the run is cut (abort or failure while compacting or falling back). :func:`expected` is the
oracle: the event types the run must emit, its end reason, the model that answered, the
compactions and, when every model failed, the error text. The runs go through the machine
stepped by hand (:func:`run_stepped`, on any declaration: the coverage and mutation tests use
it) and through the real driver on either backend with the faux provider (:func:`run_on`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Coroutine
from typing import Any

import anyio
import prop_coverage

from agentcore_fsm import AgentContext, AgentLoopConfig, Model
from agentcore_fsm.core.compaction import Compaction, CompactionRequest, run_compaction
from agentcore_fsm.core.declaration import Declaration
from agentcore_fsm.core.events import StreamDone, StreamError
from agentcore_fsm.core.fallback import DEFAULT_FALLBACK_KINDS, ModelFallback, failures_text
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentcore_fsm.core.model_policies import model_label
from agentcore_fsm.core.protocol import (
    Abort,
    CallHook,
    CallModel,
    Fail,
    FollowUpPolled,
    HookReturned,
    PollFollowUp,
    Proceed,
    Proceeded,
)
from agentcore_fsm.devtools.testing import run_checked
from agentcore_fsm.integrations.providers.faux import FauxError, FauxProvider, faux_response

MODELS = tuple(Model(id=f"m{i}", provider="faux", api="faux-api") for i in range(4))
KINDS = {
    "rate_limit": "rate_limit",
    "overloaded": "overloaded",
    "server": "server_error",
    "timeout": "timeout",
    "overflow": "context_overflow",
    "invalid": "invalid_request",
}
CUTS = (
    None,
    "abort_compacting",
    "fail_compacting",
    "fail_aborted_compacting",
    "bad_compaction",
    "abort_falling_back",
    "fail_falling_back",
    "fail_aborted_falling_back",
)


@dataclasses.dataclass(frozen=True)
class ModelCase:
    answers: tuple[str, ...]  # per request: "ok" or a key of KINDS
    fallbacks: int = 0  # how many models of MODELS[1:] the fallback lists (0: no fallback)
    on: tuple[str, ...] = DEFAULT_FALLBACK_KINDS
    compaction: str | None = None  # None | "overflow" (Compaction()) | "budget" (max 1 token)
    follow_ups: int = 0  # follow-up prompts: each one more request after an answer
    cut: str | None = None

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.fallbacks:
            out["fallback"] = ModelFallback(MODELS[1 : 1 + self.fallbacks], on=self.on)  # type: ignore[arg-type]
        if self.compaction == "overflow":
            out["compaction"] = Compaction()
        elif self.compaction == "budget":
            out["compaction"] = Compaction(max_context_tokens=1)
        return out


def error_text(kind: str, model: Model) -> str:
    return f"{kind} from {model.id}"


def history() -> list[Any]:
    """Two earlier turns, the first with a tool call and its result."""
    call = ToolCall(id="h1", name="look", arguments={})
    return [
        UserMessage(content="first question", timestamp=1),
        AssistantMessage(content=[call], stop_reason="toolUse", timestamp=2),
        ToolResultMessage(
            tool_call_id="h1", tool_name="look", content=[TextContent(text="seen")], timestamp=3
        ),
        AssistantMessage(content=[TextContent(text="first answer")], timestamp=4),
        UserMessage(content="second question", timestamp=5),
        AssistantMessage(content=[TextContent(text="second answer")], timestamp=6),
    ]


@dataclasses.dataclass
class Expected:
    types: list[str]
    reason: str
    answered_by: str | None = None  # the model id of a completed run's last answer
    error: str | None = None  # the last message's error text when every model failed
    compactions: list[str] = dataclasses.field(default_factory=list)


def expected(case: ModelCase) -> Expected:
    """The oracle: what the run must emit, walking the documented rules."""
    types = ["agent_start", "turn_start", "message_start", "message_end"]
    compactions: list[str] = []
    model_i = 0
    errors: list[str] = []
    compacted: str | None = None
    follow_ups = case.follow_ups
    cut_done = False
    answers = list(case.answers)
    request_start = True

    def cut(where: str) -> str | None:
        nonlocal cut_done
        if case.cut is not None and not cut_done and case.cut.endswith(where):
            cut_done = True
            return case.cut
        return None

    def compacting_cut(reason: str) -> Expected | None:
        how = cut("compacting") if case.cut != "bad_compaction" else cut("bad_compaction")
        opens = ["turn_start"] if reason == "overflow" else []  # the failed turn was closed
        if how is None:
            compactions.append(reason)
            types.extend([*opens, "context_compacted"])
            return None
        types.extend([*opens, "message_start", "message_end", "turn_end", "agent_end"])
        aborted = how.startswith("abort") or how == "fail_aborted_compacting"
        return Expected(types, "aborted" if aborted else "error", compactions=compactions)

    while True:
        if request_start and case.compaction == "budget" and compacted is None:
            done = compacting_cut("budget")
            if done is not None:
                return done
            compacted = "budget"
        request_start = True
        if not answers:
            raise AssertionError(f"{case}: the oracle ran out of answers")
        answer = answers.pop(0)
        types.extend(["message_start", "message_end"])
        model = MODELS[model_i]
        if answer == "ok":
            compacted = None
            errors = []
            types.append("turn_end")
            if follow_ups:
                follow_ups -= 1
                types.extend(["turn_start", "message_start", "message_end"])
                continue
            types.append("agent_end")
            return Expected(types, "completed", answered_by=model.id, compactions=compactions)
        kind = KINDS[answer]
        compactable = (
            case.compaction is not None and kind == "context_overflow" and compacted != "overflow"
        )
        compacted = None
        types.append("turn_end")
        if compactable:
            done = compacting_cut("overflow")
            if done is not None:
                return done
            compacted = "overflow"
            request_start = False
            continue
        if case.fallbacks and model_i < case.fallbacks and kind in case.on:
            errors.append(f"{model_label(model)}: {error_text(kind, model)}")
            model_i += 1
            how = cut("falling_back")
            if how is not None:
                types.extend(
                    ["turn_start", "message_start", "message_end", "turn_end", "agent_end"]
                )
                reason = "error" if how == "fail_falling_back" else "aborted"
                return Expected(types, reason, compactions=compactions)
            types.append("turn_start")
            continue
        types.append("agent_end")
        text = None
        if errors:
            text = failures_text([*errors, f"{model_label(model)}: {error_text(kind, model)}"])
        return Expected(types, "error", error=text, compactions=compactions)


def reachable_cut(case: ModelCase) -> bool:
    """Whether the oracle reaches the case's cut (a cut that is never reached is no case)."""
    if case.cut is None:
        return True
    base = dataclasses.replace(case, cut=None)
    try:
        whole = expected(base)
    except AssertionError:
        return False
    if case.cut.endswith("compacting") or case.cut == "bad_compaction":
        return bool(whole.compactions)
    return "falling_back" in case.cut and _falls_back(base)


def _falls_back(case: ModelCase) -> bool:
    return expected(dataclasses.replace(case, cut="abort_falling_back")).reason == "aborted"


# --- the stepped run -------------------------------------------------------------------------


def _sync(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("the built-in compaction does not wait")


def answer_for(case: ModelCase, answer: str, model: Model) -> Any:
    if answer == "ok":
        message = AssistantMessage(
            content=[TextContent(text="ok")], api=model.api, provider=model.provider, model=model.id
        )
        return StreamDone(reason="stop", message=message)
    kind = KINDS[answer]
    message = AssistantMessage(
        content=[TextContent(text="")],
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason="error",
        error_message=error_text(kind, model),
        error_kind=kind,  # type: ignore[arg-type]
    )
    return StreamError(reason="error", error=message)


def run_stepped(
    case: ModelCase, declaration: Declaration | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """Step a machine by hand; its events, its messages and the models it called."""
    follow_ups = case.follow_ups
    config = AgentLoopConfig(
        model=MODELS[0],
        get_follow_up_messages=(lambda: None) if follow_ups else None,
        **case.config(),
    )
    m = LoopMachine(
        [UserMessage(content="go", timestamp=7)],
        AgentContext(messages=history()),
        config,
        declaration=declaration,
    )
    events: list[Any] = []
    called: list[Any] = []
    answers = list(case.answers)
    cut_done = False
    step = m.start()
    for _ in range(300):
        for record in step.transitions:
            prop_coverage.record_transition(record)
        events.extend(step.events)
        if step.run_over or m.finished:
            break
        (effect,) = step.effects
        if isinstance(effect, CallModel):
            if not answers:
                raise AssertionError(f"{case}: a model call after the last answer")
            called.append(effect.model)
            step = m.stream_event(answer_for(case, answers.pop(0), effect.model))
        elif isinstance(effect, CallHook) and effect.name == "compact":
            if (
                case.cut is not None
                and not cut_done
                and (case.cut.endswith("compacting") or case.cut == "bad_compaction")
            ):
                cut_done = True
                if case.cut == "abort_compacting":
                    step = m.feed(Abort())
                elif case.cut == "bad_compaction":
                    step = m.feed(HookReturned("compact", "not a list"))
                else:
                    step = m.feed(Fail(RuntimeError("hook broke"), case.cut.startswith("fail_ab")))
                continue
            assert isinstance(effect.ctx, CompactionRequest)
            step = m.feed(HookReturned("compact", _sync(run_compaction(effect.ctx))))
        elif isinstance(effect, Proceed):
            if (
                m.state == "falling_back"
                and case.cut is not None
                and not cut_done
                and case.cut.endswith("falling_back")
            ):
                cut_done = True
                if case.cut == "abort_falling_back":
                    step = m.feed(Abort())
                else:
                    step = m.feed(Fail(RuntimeError("emit broke"), case.cut.startswith("fail_ab")))
                continue
            step = m.feed(Proceeded())
        elif isinstance(effect, PollFollowUp):
            if follow_ups:
                follow_ups -= 1
                step = m.feed(FollowUpPolled([UserMessage(content="more", timestamp=8)]))
            else:
                step = m.feed(FollowUpPolled(None))
        else:
            raise AssertionError(f"{case}: unexpected effect {effect!r}")
    else:
        raise AssertionError(f"{case}: the run never ended")
    return events, list(m.new_messages), called


# --- the driven run (either backend) ---------------------------------------------------------


def run_on(case: ModelCase, backend: str) -> tuple[list[Any], list[Any]]:
    """The case through ``run_checked`` (the real driver, the grammar checked) on ``backend``
    with the faux provider; no cut (a driven run is not cut). Events and messages."""
    assert case.cut is None
    script: list[Any] = []
    for answer in case.answers:
        if answer == "ok":
            script.append(faux_response("ok"))
        else:
            kind = KINDS[answer]
            script.append(FauxError(f"{kind} from ?", kind=kind))  # type: ignore[arg-type]
    faux = FauxProvider(script)
    follow_ups = [case.follow_ups]

    def follow_up() -> Any:
        if follow_ups[0]:
            follow_ups[0] -= 1
            return "more"
        return None

    config = AgentLoopConfig(
        model=MODELS[0],
        get_follow_up_messages=follow_up if case.follow_ups else None,
        **case.config(),
    )

    async def main() -> Any:
        return await run_checked(
            [UserMessage(content="go")], AgentContext(messages=history()), config, stream_fn=faux
        )

    run = anyio.run(main, backend=backend)
    return run.events, run.messages


# --- the checks ------------------------------------------------------------------------------


def verify(case: ModelCase, events: list[Any], messages: list[Any], driven: bool = False) -> None:
    """The run against the oracle, and the compaction's own rules."""
    want = expected(case)
    types = [e.type for e in events if e.type != "message_update"]
    assert types == want.types, f"{case}: {types} != {want.types}"
    end = events[-1]
    assert end.type == "agent_end" and end.reason == want.reason, f"{case}: {end.reason}"
    assert end.messages == messages
    last = [m for m in messages if isinstance(m, AssistantMessage)]
    if want.answered_by is not None:
        assert last[-1].model == want.answered_by and last[-1].stop_reason == "stop"
    if want.error is not None and not driven:
        assert last[-1].error_message == want.error, f"{case}: {last[-1].error_message!r}"
    if want.error is not None and driven:  # the faux texts say "?": the model ids are named
        text = last[-1].error_message or ""
        assert text.startswith("Every model failed: ")
        named = [
            part.split(":")[0] for part in text.removeprefix("Every model failed: ").split("; ")
        ]
        assert named == [model_label(m) for m in MODELS[: len(named)]] and len(named) >= 2
    compacted = [e for e in events if e.type == "context_compacted"]
    assert [e.reason for e in compacted] == want.compactions
    latest: Any = None
    for event in events:
        if event.type == "message_end" and isinstance(event.message, UserMessage):
            latest = event.message
        if event.type == "context_compacted":
            check_compaction(case, event, latest)


def check_compaction(case: ModelCase, event: Any, latest: Any) -> None:
    """Never a tool call without its result, or a result without its call; never the latest
    user message; the indices name the dropped messages."""
    dropped_calls = {
        c.id for m in event.dropped if isinstance(m, AssistantMessage) for c in m.tool_calls()
    }
    dropped_results = {m.tool_call_id for m in event.dropped if isinstance(m, ToolResultMessage)}
    assert dropped_calls == dropped_results, f"{case}: a call split from its result"
    assert latest is not None and not any(m is latest for m in event.dropped), (
        f"{case}: the latest user message was dropped"
    )
    assert len(event.indices) == len(event.dropped) and event.kept >= 1
    assert event.tokens_after <= event.tokens_before


# --- the bank (every transition of the block, for coverage and mutants) ----------------------

MODEL_BANK: dict[str, ModelCase] = {
    "fallback_answers": ModelCase(("rate_limit", "overloaded", "ok"), fallbacks=2),
    "fallback_all_failed": ModelCase(("rate_limit", "server", "timeout"), fallbacks=2),
    "fallback_not_for_kind": ModelCase(("rate_limit", "invalid"), fallbacks=2),
    "fallback_forgets_after_success": ModelCase(
        ("rate_limit", "ok", "invalid"), fallbacks=1, follow_ups=1
    ),
    "fallback_stays_on_reached_model": ModelCase(("server", "ok", "ok"), fallbacks=2, follow_ups=1),
    "overflow_compacted": ModelCase(("overflow", "ok"), compaction="overflow"),
    "overflow_twice": ModelCase(("overflow", "overflow"), compaction="overflow"),
    "overflow_then_fallback": ModelCase(
        ("overflow", "overflow", "ok"),
        fallbacks=1,
        on=("context_overflow",),
        compaction="overflow",
    ),
    "budget_every_request": ModelCase(("ok", "ok"), compaction="budget", follow_ups=1),
    "budget_then_overflow": ModelCase(("ok", "overflow", "ok"), compaction="budget", follow_ups=1),
    "fallback_and_budget": ModelCase(("rate_limit", "ok"), fallbacks=1, compaction="budget"),
    "abort_compacting": ModelCase(
        ("overflow", "ok"), compaction="overflow", cut="abort_compacting"
    ),
    "fail_compacting": ModelCase(("ok",), compaction="budget", cut="fail_compacting"),
    "fail_compacting_overflow": ModelCase(
        ("overflow", "ok"), compaction="overflow", cut="fail_compacting"
    ),
    "abort_compacting_budget": ModelCase(("ok",), compaction="budget", cut="abort_compacting"),
    "fail_aborted_compacting_budget": ModelCase(
        ("ok",), compaction="budget", cut="fail_aborted_compacting"
    ),
    "fail_aborted_compacting": ModelCase(
        ("overflow", "ok"), compaction="overflow", cut="fail_aborted_compacting"
    ),
    "bad_compaction": ModelCase(("overflow", "ok"), compaction="overflow", cut="bad_compaction"),
    "abort_falling_back": ModelCase(("rate_limit", "ok"), fallbacks=1, cut="abort_falling_back"),
    "fail_falling_back": ModelCase(("rate_limit", "ok"), fallbacks=1, cut="fail_falling_back"),
    "fail_aborted_falling_back": ModelCase(
        ("rate_limit", "ok"), fallbacks=1, cut="fail_aborted_falling_back"
    ),
}
