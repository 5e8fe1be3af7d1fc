"""Structured-output runs for the property suite: cases, an oracle, and two ways to run them.

An :class:`OutputCase` is a run with an output type: the answers the model gives, one per
attempt (a valid final answer, an invalid one, plain text, text that is not JSON, an answer a
validator refuses with ``ModelRetry``, a valid answer beside another tool call), the mode, the
number of retries, and whether an abort or a failure (a validator that raises) comes while an
answer is validated. :func:`expected` is the oracle: the messages the run creates, how it ends
and its output. :func:`run_stepped` steps a :class:`LoopMachine` by hand on any declaration
(the mutants of test_mutants), :func:`run_driven` runs the real driver on a backend; both check
the events with the grammar checker and the outcome against the oracle (:func:`verify`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import prop_coverage
from hypothesis import strategies as st
from pydantic import BaseModel

from agentcore_fsm import AgentContext, AgentLoopConfig, Model, run_agent_loop
from agentcore_fsm.core.declaration import Declaration
from agentcore_fsm.core.events import StreamDone
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import AssistantMessage, TextContent, ToolCall, UserMessage
from agentcore_fsm.core.output import ModelRetry, OutputSpec, output_spec
from agentcore_fsm.core.output_actions import ACCEPTED_TEXT, NOT_EXECUTED_TEXT
from agentcore_fsm.core.protocol import (
    Abort,
    CallModel,
    Fail,
    Proceed,
    Proceeded,
    ValidateOutput,
)
from agentcore_fsm.devtools.testing import GrammarChecker
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.runtime.output_run import check_output

MODEL = Model(id="faux-output", provider="faux", api="faux-api")
ABORTED = "Operation aborted"
ANSWERS = ("valid", "invalid", "text", "refused", "with_call")
NATIVE_ANSWERS = ("valid", "invalid", "text", "refused")
REFUSED = "the score must be even"


class Score(BaseModel):
    name: str
    score: int


def must_be_even(value: Score) -> Score:
    if value.score % 2:
        raise ModelRetry(REFUSED)
    return value


@dataclasses.dataclass(frozen=True)
class OutputCase:
    answers: tuple[str, ...]
    mode: str = "tool"
    retries: int = 1
    cut: str | None = None  # "abort" or "fail": while the last answer is validated

    def spec(self) -> OutputSpec:
        return output_spec(
            Score,
            mode=self.mode,  # type: ignore[arg-type]
            retries=self.retries,
            validators=[must_be_even, self.validator_that_fails],
        )

    def validator_that_fails(self, value: Score) -> Score:
        if self.cut in ("fail", "fail_aborted") and value.name == "last":
            raise RuntimeError("validator boom")
        return value


def answer_message(case: OutputCase, i: int) -> AssistantMessage:
    kind = case.answers[i]
    last = i == len(case.answers) - 1
    name = "last" if last else f"n{i}"
    good = {"name": name, "score": 2 * i}
    data = {
        "valid": good,
        "invalid": {"name": name, "score": "lots"},
        "refused": {"name": name, "score": 2 * i + 1},
        "with_call": good,
    }.get(kind)
    if kind == "text" or (case.mode == "native" and data is None):
        content: list[Any] = [TextContent(text="no JSON here")]
        stop = "stop"
    elif case.mode == "native":
        import json

        content = [TextContent(text=json.dumps(data))]
        stop = "stop"
    else:
        content = []
        if kind == "with_call":
            content.append(ToolCall(id=f"x{i}", name="lookup", arguments={"q": "x"}))
        content.append(ToolCall(id=f"f{i}", name="final_result", arguments=data))
        stop = "toolUse"
    return AssistantMessage(
        content=content, api=MODEL.api, provider=MODEL.provider, model=MODEL.id, stop_reason=stop
    )


@dataclasses.dataclass
class Expected:
    roles: list[tuple[str, ...]]
    reason: str
    output: Any


def expected(case: OutputCase) -> Expected:
    """The oracle: the messages (role and what matters of each), the end reason, the output."""
    roles: list[tuple[str, ...]] = [("user",)]
    for i, kind in enumerate(case.answers):
        roles.append(("assistant",))
        last = i == len(case.answers) - 1
        cut = case.cut if last else None
        uses_call = case.mode != "native" and kind != "text"
        valid = kind in ("valid", "with_call")
        if cut is not None:
            if uses_call:
                if kind == "with_call":
                    roles.append(("toolResult", "lookup", ABORTED))
                roles.append(("toolResult", "final_result", ABORTED))
            if cut == "fail":
                roles.append(("assistant", "error", "validator boom"))
            if cut == "fail_aborted":  # the failure message is marked aborted
                roles.append(("assistant",))
            return Expected(roles, "error" if cut == "fail" else "aborted", None)
        if uses_call:
            if kind == "with_call":
                roles.append(("toolResult", "lookup", NOT_EXECUTED_TEXT.format(name="lookup")))
            roles.append(("toolResult", "final_result", ACCEPTED_TEXT if valid else "error"))
        if valid:
            return Expected(
                roles, "completed", {"name": "last" if last else f"n{i}", "score": 2 * i}
            )
        if i >= case.retries:
            tries = f"answer{'s' if i else ''}"
            roles.append(("assistant", "error", f"No valid output after {i + 1} {tries}"))
            return Expected(roles, "error", None)
        if not uses_call:
            roles.append(("user",))
    raise AssertionError("a case's answers end the run")


def _describe(message: Any) -> tuple[str, ...]:
    if message.role == "assistant":
        if message.stop_reason == "error":  # a failure: why, by the first words of its text
            return ("assistant", "error", (message.error_message or "").split(":")[0])
        return ("assistant",)
    if message.role == "toolResult":
        text = message.content[0].text
        if message.is_error and text not in (ABORTED,) and not text.startswith("Tool call"):
            text = "error"
        return ("toolResult", message.tool_name, text)
    return (message.role,)


def verify(case: OutputCase, events: list[Any], messages: list[Any]) -> None:
    checker = GrammarChecker()
    checker.feed_all(events)
    checker.close(messages)
    want = expected(case)
    got = [_describe(m) for m in messages]
    assert got == want.roles, f"{case}: {got} != {want.roles}"
    end = events[-1]
    assert end.type == "agent_end" and end.reason == want.reason, (case, end.reason)
    assert end.output == want.output, (case, end.output)
    partials = [e.output for e in events if e.type == "output_partial"]
    if want.output is not None and partials:
        assert partials[-1] == want.output


def cases(max_answers: int = 4) -> st.SearchStrategy[OutputCase]:
    @st.composite
    def build(draw: st.DrawFn) -> OutputCase:
        mode = draw(st.sampled_from(["tool", "native", "forced_tool"]))
        pool = NATIVE_ANSWERS if mode == "native" else ANSWERS
        retries = draw(st.integers(0, 2))
        cut = draw(st.sampled_from([None, None, "abort", "fail"]))
        n = draw(st.integers(1, min(retries + 1, max_answers)))
        wrong = [k for k in pool if k not in ("valid", "with_call")]
        answers = [draw(st.sampled_from(wrong)) for _ in range(n - 1)]
        if cut is not None:  # the abort or failure comes while a valid answer is validated
            last = draw(st.sampled_from([k for k in pool if k in ("valid", "with_call")]))
        elif n == retries + 1:
            last = draw(st.sampled_from(pool))
        else:
            last = draw(st.sampled_from([k for k in pool if k in ("valid", "with_call")]))
        return OutputCase((*answers, last), mode, retries, cut)

    return build()


# --- running a case ---------------------------------------------------------------------------


def run_stepped(
    case: OutputCase, declaration: Declaration | None = None
) -> tuple[list[Any], list[Any]]:
    """Step a machine by hand (on ``declaration``, default the real one); events and messages."""
    config = AgentLoopConfig(model=MODEL, output=case.spec().resolved("tool"))
    m = LoopMachine(
        [UserMessage(content="go")],
        AgentContext(),
        config,
        declaration=declaration,
    )
    events: list[Any] = []
    step = m.start()
    attempt = 0
    for _ in range(200):
        for record in step.transitions:  # the machine calls nobody: its steps carry them
            prop_coverage.record_transition(record)
        events.extend(step.events)
        if step.run_over or m.finished:
            break
        (effect,) = step.effects
        if isinstance(effect, CallModel):
            if attempt >= len(case.answers):
                raise AssertionError(f"{case}: a model call after the last answer")
            message = answer_message(case, attempt)
            attempt += 1
            step = m.stream_event(StreamDone(reason=message.stop_reason, message=message))
        elif isinstance(effect, ValidateOutput):
            if case.cut == "abort" and attempt == len(case.answers):
                step = m.feed(Abort())
                continue
            try:
                checked = _check_sync(effect)
            except RuntimeError as exc:
                step = m.feed(Fail(exc, case.cut == "fail_aborted"))
                continue
            step = m.feed(checked)
        elif isinstance(effect, Proceed):
            step = m.feed(Proceeded())
        else:
            raise AssertionError(f"{case}: unexpected effect {effect!r}")
    else:
        raise AssertionError(f"{case}: the run never ended")
    return events, list(m.new_messages)


def _check_sync(effect: ValidateOutput) -> Any:
    coro = check_output(effect, lambda: 0)
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("the validators are sync: check_output does not wait")


def faux_of(case: OutputCase) -> FauxProvider:
    responses = []
    for i in range(len(case.answers)):
        message = answer_message(case, i)
        texts = [b.text for b in message.content if isinstance(b, TextContent)]
        calls = [
            faux_tool_call(b.name, b.arguments, id=b.id)
            for b in message.content
            if isinstance(b, ToolCall)
        ]
        responses.append(faux_response(texts[0] if texts else None, tool_calls=calls))
    return FauxProvider(responses)


async def run_driven(case: OutputCase) -> tuple[list[Any], list[Any]]:
    """Run ``case`` through ``run_agent_loop`` (the faux model streams each answer)."""
    from agentcore_fsm.core.abort import AbortController

    controller = AbortController()
    events: list[Any] = []

    def abort_on_last(value: Score) -> Score:
        if case.cut == "abort" and value.name == "last":
            controller.abort("stop")
        return value

    spec = output_spec(
        Score,
        mode=case.mode,  # type: ignore[arg-type]
        retries=case.retries,
        validators=[abort_on_last, must_be_even, case.validator_that_fails],
    )
    messages = await run_agent_loop(
        ["go"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        events.append,
        signal=controller.signal,
        stream_fn=faux_of(case),
        output_type=spec,
        on_transition=prop_coverage.record_transition,
    )
    return events, list(messages)


def run_on(case: OutputCase, backend: str) -> tuple[list[Any], list[Any]]:
    return anyio.run(run_driven, case, backend=backend)


OUTPUT_BANK: dict[str, OutputCase] = {
    "valid at once": OutputCase(("valid",)),
    "invalid then valid": OutputCase(("invalid", "valid")),
    "text then valid": OutputCase(("text", "valid"), retries=2),
    "refused then beside a call": OutputCase(("refused", "with_call"), retries=1),
    "retries used up": OutputCase(("invalid", "refused"), retries=1),
    "no retries": OutputCase(("text",), retries=0),
    "abort while validating": OutputCase(("invalid", "with_call"), cut="abort"),
    "fail while validating": OutputCase(("valid",), cut="fail"),
    "fail beside a call": OutputCase(("with_call",), cut="fail"),
    "native: bad then valid": OutputCase(("text", "valid"), mode="native"),
    "native: refused, used up": OutputCase(("refused",), mode="native", retries=0),
    "forced tool": OutputCase(("invalid", "valid"), mode="forced_tool"),
}
# cases only the stepped runs make (a failure fed with the signal fired)
STEPPED_BANK: dict[str, OutputCase] = {
    **OUTPUT_BANK,
    "fail after the signal": OutputCase(("valid",), cut="fail_aborted"),
}
