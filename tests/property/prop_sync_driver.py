"""A small synchronous driver for :class:`LoopMachine`, for the mutation tests.

The public async driver always loads the real declaration; to run a *mutant* declaration we
drive ``LoopMachine(..., declaration=mutant)`` by hand. This driver performs the machine's
effects with the same :class:`~prop_scenarios.Harness` callbacks the async property tests use
(polls, hooks, tools, faults), feeds their outcomes back the way ``driver.py`` does (events
first, then a pending failure or abort — after draining finished tool results —, then the
effects), with no event loop and no threads. A run that stops making progress (no effect to
perform, nothing pending, not finished) or takes too many steps is reported as a problem.

The machine never reads the signal: like ``driver.py``, this driver watches it, feeds ``abort``
instead of performing anything once it fired, passes ``aborted=True`` with a poll's messages or
a tool's result that came back after it fired, and drops a hook's answer that did.

Approval: ``CheckApproval`` is performed like a hook (the tool's ``requires_approval``);
``AwaitApproval`` like a task that asks ``decide_approval`` at once and posts the decision (or,
for none, the driver's denial) to the inbox. An answer that never comes (the harness returns an
awaitable that waits for ever) is the timeout's denial, or nothing when the signal fired.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections import deque
from collections.abc import Iterator
from typing import Any

from prop_scenarios import (
    EXHAUSTED,
    Harness,
    ModelCall,
    Scenario,
    _Bogus,
    assistant_for,
    parse_call_id,
)
from transition_watch import watch_transitions

from agentcore_fsm import (
    ApprovalDecision,
    AssistantMessage,
    LoopMachine,
    Model,
    TextContent,
    ToolCall,
)
from agentcore_fsm.core.approval import NO_APPROVER_TEXT, TIMEOUT_TEXT
from agentcore_fsm.core.boundary import describe_value, exc_text
from agentcore_fsm.core.config import LlmContext, default_convert_to_llm
from agentcore_fsm.core.declaration import Declaration
from agentcore_fsm.core.declared import MachineInputError
from agentcore_fsm.core.events import (
    StreamDone,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from agentcore_fsm.core.messages import ThinkingContent
from agentcore_fsm.core.protocol import (
    ApprovalChecked,
    ApprovalDecided,
    AwaitApproval,
    CallHook,
    CallModel,
    CheckApproval,
    ExecuteTool,
    PollFollowUp,
    PollSteering,
    PrepareArguments,
    Proceed,
    Step,
)

MAX_STEPS = 3000


def stream_events(model: Model, message: AssistantMessage, chunk: int) -> Iterator[Any]:
    """The events a provider streams for ``message`` (one partial, updated in place)."""
    partial = AssistantMessage(
        api=model.api, provider=model.provider, model=model.id, stop_reason="pending"
    )
    yield StreamStart(partial=partial)

    def chunks(text: str) -> list[str]:
        return [text[i : i + chunk] for i in range(0, len(text), chunk)] or [""]

    for block in message.content:
        index = len(partial.content)
        if isinstance(block, TextContent):
            text = TextContent(text="")
            partial.content.append(text)
            yield TextStart(content_index=index, partial=partial)
            for piece in chunks(block.text):
                text.text += piece
                yield TextDelta(content_index=index, delta=piece, partial=partial)
            yield TextEnd(content_index=index, content=text.text, partial=partial)
        elif isinstance(block, ThinkingContent):
            think = ThinkingContent(thinking="")
            partial.content.append(think)
            yield ThinkingStart(content_index=index, partial=partial)
            for piece in chunks(block.thinking):
                think.thinking += piece
                yield ThinkingDelta(content_index=index, delta=piece, partial=partial)
            yield ThinkingEnd(content_index=index, content=think.thinking, partial=partial)
        elif isinstance(block, ToolCall):
            call = ToolCall(id=block.id, name=block.name, arguments={})
            partial.content.append(call)
            yield ToolCallStart(content_index=index, partial=partial)
            yield ToolCallDelta(content_index=index, delta="{}", partial=partial)
            call.arguments = dict(block.arguments)
            yield ToolCallEnd(content_index=index, tool_call=call, partial=partial)
    partial.stop_reason = message.stop_reason
    partial.error_message = message.error_message
    if message.stop_reason in ("error", "aborted"):
        yield StreamError(reason=message.stop_reason, error=partial)  # type: ignore[arg-type]
    else:
        yield StreamDone(reason=message.stop_reason, message=partial)  # type: ignore[arg-type]


class SyncDriver:
    def __init__(self, sc: Scenario, declaration: Declaration | None, *, record: bool) -> None:
        # Callbacks run synchronously here. With ``async_hooks`` the async driver would await a
        # hook, so an abort fired inside it cancels the wait and its outcome is never fed:
        # ``cancelled()`` mimics that.
        self.async_hooks = sc.async_hooks
        self.sc = sc = dataclasses.replace(sc, async_hooks=False, async_emit=False)
        self.h = h = Harness(sc, record_coverage=record)
        self.config = h.config()
        prompts = [] if sc.entry == "continue" else h.prompts
        self.m = LoopMachine(
            prompts,
            h.context,
            self.config,
            declaration=declaration,
        )
        watch_transitions(self.m, h.on_transition)
        self.failure: BaseException | None = None
        self.failed = False
        self.inbox: deque[tuple[Any, ...]] = deque()

    # --- the main loop (mirrors driver.py) ----------------------------------------------------

    def run(self) -> list[Any]:
        m = self.m
        if self.sc.abort_before:
            self.h.controller.abort("before the run")
        step = m.start()
        for _ in range(MAX_STEPS):
            self.deliver(step.events)
            if step.run_over:
                self.h._late_updates()
                return list(m.new_messages)
            if self.failure is not None or self.h.signal.aborted:
                pending = self.drain()
                if pending is not None:
                    step = pending
                elif self.failure is not None:
                    failure, self.failure = self.failure, None
                    self.failed = True
                    step = m.fail(failure, aborted=self.h.signal.aborted)
                else:
                    step = m.abort()
                continue
            step = self.perform(step.effects)
        self.h.problems.append(f"the run did not finish in {MAX_STEPS} steps (state {m.state})")
        return list(m.new_messages)

    def deliver(self, events: list[Any]) -> None:
        for event in events:
            try:
                self.h.emit(event)
            except Exception as exc:
                if not (self.failed or self.failure is not None or self.m.finished):
                    self.failure = exc

    def drain(self) -> Step | None:
        while self.inbox:
            item = self.inbox.popleft()
            if item[0] != "update":
                try:
                    return self.feed(item)
                except MachineInputError:
                    continue  # an outcome of a batch that was already closed
        return None

    def feed(self, item: tuple[Any, ...]) -> Step:
        m = self.m
        kind = item[0]
        if kind == "update":
            try:
                return m.tool_update(item[1], item[2])
            except MachineInputError:
                return Step()  # an update after its batch was closed
        if kind == "finished":
            return m.tool_finished(
                item[1], result=item[2], error=item[3], aborted=self.h.signal.aborted
            )
        if kind == "decided":
            return m.feed(item[1])
        if kind == "hook":
            return m.hook_returned(item[2], item[1])
        return m.hook_failed(item[2], item[1])

    # --- effects ------------------------------------------------------------------------

    def perform(self, effects: list[Any]) -> Step:
        main: Any = None
        batch: list[tuple[int, list[tuple[Any, ...]]]] = []
        tools = [e for e in effects if isinstance(e, ExecuteTool)]
        for effect in tools:  # every tool of a batch starts before any of them runs on
            self.h.entering(f"tool {effect.tool_call.id}")
        for effect in effects:
            if isinstance(effect, ExecuteTool):
                if not self.h.signal.aborted:  # the others were cancelled by the abort
                    batch.append(self.execute(effect))
            elif isinstance(effect, AwaitApproval):
                if not self.h.signal.aborted:  # nothing starts once the signal fired
                    self.await_approval(effect)
            elif isinstance(effect, CallHook) and effect.name == "after_tool_call":
                try:
                    value = self.config.after_tool_call(effect.ctx, self.h.signal)  # type: ignore[misc]
                except Exception as exc:
                    self.inbox.append(("hook_failed", effect.index, exc))
                else:
                    self.inbox.append(("hook", effect.index, value))
            else:
                main = effect
        for _, items in sorted(batch, key=lambda b: b[0]):
            self.inbox.extend(items)
        m = self.m
        if main is None:
            if not self.inbox:
                if self.h.signal.aborted:
                    return Step()
                self.h.problems.append(f"stuck in state {m.state}: no effect, nothing pending")
                return m.fail(RuntimeError("stuck")) if "fail" in m.accepted_inputs() else Step()
            return self.feed(self.inbox.popleft())
        if self.h.signal.aborted:
            return Step()  # nothing starts once the signal fired: run() feeds the abort
        if isinstance(main, CallModel):
            return self.call_model(main)
        if isinstance(main, Proceed):
            return m.proceed()
        if isinstance(main, PrepareArguments):
            try:
                value = main.tool.prepare_arguments(main.raw)  # type: ignore[misc]
            except Exception as exc:
                return m.arguments_prepared(main.index, error=exc)
            return m.arguments_prepared(main.index, value)
        if isinstance(main, CheckApproval):
            try:
                needed = main.tool.requires_approval(main.args)  # type: ignore[operator]
            except Exception as exc:
                return (
                    Step()
                    if self.h.signal.aborted
                    else m.feed(ApprovalChecked(main.index, error=exc))
                )
            return Step() if self.h.signal.aborted else m.feed(ApprovalChecked(main.index, needed))
        config = self.config
        aborted = self.h.signal
        try:
            if isinstance(main, PollSteering):
                assert config.get_steering_messages is not None
                messages = config.get_steering_messages()
                if self.cancelled():
                    return Step()
                return m.steering_polled(messages, aborted=aborted.aborted)
            if isinstance(main, PollFollowUp):
                assert config.get_follow_up_messages is not None
                messages = config.get_follow_up_messages()
                if self.cancelled():
                    return Step()
                return m.follow_up_polled(messages, aborted=aborted.aborted)
            assert isinstance(main, CallHook), main
            hook = getattr(config, main.name)
            try:
                value = hook(main.ctx, self.h.signal)
            except Exception as exc:
                if main.index is None:
                    raise
                return Step() if aborted.aborted else m.hook_failed(exc, main.index)
            # an answer that came back after the signal fired is dropped for the abort
            return Step() if aborted.aborted else m.hook_returned(value, main.index)
        except Exception as exc:
            return Step() if self.cancelled() else m.fail(exc, aborted=aborted.aborted)

    def await_approval(self, effect: AwaitApproval) -> None:
        """What the driver's approval task does (``decide_approval``, or a denial), at once."""
        index, request = effect.index, effect.request
        decide = self.config.decide_approval
        if decide is None:
            self.post(ApprovalDecided(index, False, NO_APPROVER_TEXT, "no approver"))
            return
        try:
            value = decide(request, self.h.signal)
        except Exception as exc:
            self.post(
                ApprovalDecided(index, False, f"decide_approval raised: {exc_text(exc)}", "error")
            )
            return
        if inspect.isawaitable(value):  # an answer that never comes
            value.close()  # type: ignore[attr-defined]
            if self.h.signal.aborted:
                return  # the abort cancels the wait
            timeout = self.config.approval_timeout_s
            if timeout is None:
                self.h.problems.append(f"the approval of call #{index} would wait for ever")
                return
            reason = TIMEOUT_TEXT.format(seconds=timeout)
            self.post(ApprovalDecided(index, False, reason, "timeout"))
            return
        self.post(decision_input(index, value))

    def post(self, decision: ApprovalDecided) -> None:
        self.inbox.append(("decided", decision))

    def cancelled(self) -> bool:
        """Whether the async driver would have cancelled the callback that just ran."""
        return self.async_hooks and self.h.signal.aborted

    def execute(self, effect: ExecuteTool) -> tuple[int, list[tuple[Any, ...]]]:
        h = self.h
        cid = effect.tool_call.id
        index = effect.index
        items: list[tuple[Any, ...]] = []
        settled = False

        def on_update(partial: Any) -> None:
            if not settled:
                self.inbox.append(("update", index, partial))

        r, i = parse_call_id(cid)
        plan = self.sc.responses[r]
        position = list(plan.order).index(i) if plan.order else i
        if plan.calls[i].plan.outcome == "abort":
            h.controller.abort("tool")
            return position, items
        try:
            result = h._tool_result(cid, effect.args, on_update)
        except Exception as exc:
            items.append(("finished", index, None, exc))
        else:
            items.append(("finished", index, result, None))
        settled = True
        return position, items

    def call_model(self, effect: CallModel) -> Step:
        m, h, config = self.m, self.h, self.config
        try:
            # docs/reference.md#what-an-abort-does: once the signal fired, no callback and no model
            # call starts
            messages = effect.context.messages
            if config.transform_context is not None:
                messages = config.transform_context(messages, h.signal)
            if h.signal.aborted:
                return Step()
            convert = config.convert_to_llm or default_convert_to_llm
            llm_messages = convert(messages)
            if h.signal.aborted:
                return Step()
            api_key = None
            if config.get_api_key is not None:
                api_key = config.get_api_key(effect.model.provider)
            if h.signal.aborted:
                return Step()
            context = LlmContext(effect.context.system_prompt, llm_messages, effect.context.tools)
            k = len(h.model_calls)
            h.entering(f"model call {k}")
            h.trace.append("model")
            h.model_calls.append(
                ModelCall(
                    context,
                    effect.model.id,
                    effect.reasoning,
                    api_key or config.api_key,
                    list(h.created),
                )
            )
            h.fault("stream_fn")
            return self.stream(k, effect.model)
        except Exception as exc:
            return m.fail(exc, aborted=h.signal.aborted)

    def stream(self, k: int, model: Model) -> Step:
        m, h = self.m, self.h
        if k >= len(self.sc.responses):
            error = AssistantMessage(
                content=[TextContent(text="")],
                api=model.api,
                provider=model.provider,
                model=model.id,
                stop_reason="error",
                error_message=EXHAUSTED,
            )
            return m.stream_event(StreamError(reason="error", error=error))
        plan = self.sc.responses[k]
        style, cut = plan.style, plan.cut
        if style == "raise_before":
            raise h._failing()
        events = list(stream_events(model, assistant_for(k, plan), plan.chunk))
        if style in ("faux_nostart", "deltas_before_start"):
            start = events.pop(0)
            if style == "deltas_before_start" and cut < len(events) - 1:
                events.insert(cut, start)
        if style == "double_start":
            events.insert(1, StreamStart(partial=events[0].partial))
        for n, event in enumerate(events):
            terminal = event.type in ("done", "error")
            if n == cut and not terminal:
                if style == "raise_mid":
                    raise h._failing()
                if style == "exhausted":
                    h._failing()
                    return m.stream_exhausted()
                if style == "unknown_event":
                    h._failing()
                    step = m.stream_event(_Bogus())
                    if step.stream_over:
                        return step
                if style in ("abort_mid", "abort_mid_sync"):
                    h.controller.abort("stream")
            # no stream event is processed after the abort (docs/reference.md#what-an-abort-does)
            if h.signal.aborted:
                return Step()
            step = m.stream_event(event)
            if step.stream_over:
                return step
            if step.events:
                self.deliver(step.events)
                if self.failure is not None or h.signal.aborted:
                    return Step()
        return m.stream_exhausted()


def decision_input(index: int, value: Any) -> ApprovalDecided:
    """What ``decide_approval`` returned, as the machine's input
    (docs/reference.md#approval-of-tool-calls: a decision, a dict of its fields, a bool; anything
    else is a denial saying what was wrong)."""
    if isinstance(value, bool):
        return ApprovalDecided(index, value)
    if isinstance(value, dict):
        try:
            value = ApprovalDecision.model_validate(value)
        except Exception as exc:
            reason = f"decide_approval returned an invalid decision: {exc_text(exc)}"
            return ApprovalDecided(index, False, reason, "error")
    if isinstance(value, ApprovalDecision):
        return ApprovalDecided(index, value.approved, value.reason, value.decided_by, value.args)
    if value is None:
        reason = (
            "decide_approval returned None (no decision), which only a journaled run can wait "
            "for (store=...)"
        )
    else:
        reason = (
            f"decide_approval returned {describe_value(value)}; expected an ApprovalDecision, "
            f"a dict with its fields, a bool"
        )
    return ApprovalDecided(index, False, reason, "error")


def run_sync(
    sc: Scenario, declaration: Declaration | None = None, *, record: bool = False
) -> tuple[Harness, list[Any]]:
    """Run ``sc`` on ``declaration`` (default: the real one) with the synchronous driver."""
    driver = SyncDriver(sc, declaration, record=record)
    messages = driver.run()
    return driver.h, messages
