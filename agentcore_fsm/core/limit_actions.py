"""The loop's side of usage limits: the guards and emit actions of ``states/agent_loop.toml``'s
block "usage limits", and the counting the declared variable ``usage`` gets (see
docs/policies.md#usage-limits and :mod:`agentcore_fsm.core.limits`).

:class:`LimitActions` is a base of :class:`~agentcore_fsm.core.loop_actions.LoopActions`. Three
declared variables hold everything a limit decides by. ``usage``, a
:class:`~agentcore_fsm.core.limits.RunUsage`, is written by the input ``start`` (the run's start
time), the emit actions ``turn_start`` (a turn), ``assistant_end`` (a response's tokens and cost,
and its request) and ``begin_calls`` (a batch's calls, once it may run). ``requested`` is set by
the effect ``call_model`` and cleared by ``assistant_end``, so that a request asked for again by
a resumed run counts once. ``limit_reached`` is the
:class:`~agentcore_fsm.core.limits.LimitReached` that ``agent_end`` carries. In a run without
limits ``usage`` and ``limit_reached`` stay None and ``requested`` False: each counting point
costs that run one ``is None`` check, nothing more.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentcore_fsm.core.config import AgentContext, AgentLoopConfig
from agentcore_fsm.core.events import (
    AgentEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    TurnEndEvent,
)
from agentcore_fsm.core.limits import (
    NOT_RUN_TEXT,
    LimitReached,
    RunUsage,
    check_batch,
    check_request,
    deadline_ms,
    last_turn_due,
)
from agentcore_fsm.core.messages import (
    AgentMessage,
    AssistantMessage,
    Model,
    TextContent,
    ToolResultMessage,
)
from agentcore_fsm.core.tools import error_result

__all__ = ["LIMIT_TEXT", "LimitActions"]

LIMIT_TEXT = "Usage limit reached: {text}"
"""The ``error_message`` of the assistant message that closes a turn a limit stopped."""


class LimitActions:
    """The usage-limit guards, emit actions and counting of the loop machine (a base of
    ``LoopActions``; the attributes below are the loop's)."""

    config: AgentLoopConfig
    context: AgentContext
    model: Model
    new_messages: list[AgentMessage]
    _final: AssistantMessage | None
    _partial: AssistantMessage | None
    _out: list[Any]
    vars: Any
    now: int

    if TYPE_CHECKING:  # the loop's, from DeclaredMachine (later in the MRO: no stub here)

        def set_var(self, by: str, name: str, value: Any) -> None: ...

    def append_message(self, message: AgentMessage) -> None:  # pragma: no cover
        raise NotImplementedError

    def _failure_message(self, partial: AssistantMessage | None) -> AssistantMessage:
        raise NotImplementedError  # pragma: no cover - the loop's

    def _init_limits(self) -> None:
        # made only when a limit keeps a batch from running: a run without limits allocates
        # nothing for them
        self._limit_results: list[ToolResultMessage] | None = None

    @property
    def usage(self) -> RunUsage | None:
        """What the run used so far (the declared variable ``usage``), or None in a run
        without usage limits."""
        return self.vars.usage  # type: ignore[no-any-return]

    @property
    def deadline(self) -> int | None:
        """The time (ms) the run's deadline passes at (``UsageLimits.seconds`` after its start),
        or None without one."""
        return deadline_ms(self.config.limits, self.vars.usage)

    # --- counting (each called by a declared setter, only when limits are set) ---------------

    def _count_start(self) -> None:
        limits = self.config.limits
        assert limits is not None
        base = limits.used_before if limits.used_before is not None else RunUsage()
        self.set_var("start", "usage", replace(base, started_at=self.now))

    def _count_request(self) -> None:
        # counted when its response ends (assistant_end): a request made again by a resumed
        # run (its effect asked for again) is one request, not two
        self.set_var("call_model", "requested", True)

    def _count_turn(self) -> None:
        usage = self.vars.usage
        if usage is not None:  # None: a turn_start before the run's start (not in a run)
            self.set_var("turn_start", "usage", replace(usage, turns=usage.turns + 1))

    def _count_response(self, message: AssistantMessage) -> None:
        self.set_var("assistant_end", "usage", self._usage_after(message))
        if self.vars.requested:
            self.set_var("assistant_end", "requested", False)

    def _count_calls(self) -> None:
        usage = self.vars.usage
        calls = len(self._final.tool_calls()) if self._final is not None else 0
        self.set_var("begin_calls", "usage", replace(usage, tool_calls=usage.tool_calls + calls))

    def _count_nested(self, used: RunUsage) -> None:
        # a tool result's run_usage: what a nested run used counts as the run's own
        usage = self.vars.usage
        if usage is not None:
            self.set_var("tool_finished", "usage", usage.plus(used))

    def _usage_after(self, message: AssistantMessage) -> RunUsage:
        usage: RunUsage = self.vars.usage
        # the context the request was made from: every message before the response
        counted = usage.responded(message, len(self.context.messages))
        return replace(counted, requests=counted.requests + 1) if self.vars.requested else counted

    @staticmethod
    def _with_batch(usage: RunUsage, batch: int) -> RunUsage:
        return replace(usage, tool_calls=usage.tool_calls + batch)

    def _request_context(self) -> AgentContext:
        """What the model request is made with: the run's context, or, for the last request
        the limits allow (``last_turn_without_tools``), a copy without tools whose system
        prompt ends with the limits' instruction (the transcript does not change)."""
        limits = self.config.limits
        context = self.context
        if limits is None or not last_turn_due(limits, self.vars.usage):
            return context
        prompt = context.system_prompt
        instruction = limits.last_turn_instruction
        return AgentContext(
            f"{prompt}\n\n{instruction}" if prompt else instruction, context.messages, []
        )

    # --- guards -----------------------------------------------------------------------------

    def _guard_request_over_limit(self) -> bool:
        return self.config.limits is not None and self._request_limit() is not None

    def _guard_batch_over_limit(self) -> bool:
        return self.config.limits is not None and self._batch_limit() is not None

    def _guard_deadline_passed(self) -> bool:
        deadline = self.deadline
        return deadline is not None and self.now >= deadline

    def _request_limit(self) -> LimitReached | None:
        limits = self.config.limits
        assert limits is not None
        context = self.context
        return check_request(
            limits, self.vars.usage, context.messages, context.system_prompt, self.model, self.now
        )

    def _batch_limit(self) -> LimitReached | None:
        limits = self.config.limits
        final = self._final
        assert limits is not None and final is not None
        batch = len(final.tool_calls())
        return check_batch(
            limits, self._with_batch(self._usage_after(final), batch), batch, self.now
        )

    # --- emit actions -----------------------------------------------------------------------

    def _emit_limit_turn(self) -> None:
        reached = self._request_limit()
        assert reached is not None
        self.set_var("limit_turn", "limit_reached", reached)
        usage = self.vars.usage
        # the turn made no request: it is not counted (its message says why it was cut)
        self.set_var("limit_turn", "usage", replace(usage, turns=usage.turns - 1))
        model = self.model
        self._final = AssistantMessage(
            content=[TextContent(text="")],
            api=model.api,
            provider=model.provider,
            model=model.id,
            stop_reason="aborted",
            error_message=LIMIT_TEXT.format(text=reached.text()),
            timestamp=self.now,
        )

    def _emit_limit_calls(self) -> None:
        final = self._final
        assert final is not None
        # the response is counted (assistant_end ran); its batch, which does not run, is not
        limits = self.config.limits
        assert limits is not None
        batch = len(final.tool_calls())
        reached = check_batch(limits, self._with_batch(self.vars.usage, batch), batch, self.now)
        assert reached is not None
        self.set_var("limit_calls", "limit_reached", reached)
        calls = final.tool_calls()
        # in the order the batch's mode gives results (the grammar's R4): one at a time, each
        # call's result right after its end; in parallel, every start and end, then the results
        sequential = self.config.tool_execution == "sequential" or any(
            t.execution_mode == "sequential" and any(c.name == t.name for c in calls)
            for t in self.context.tools
        )
        out = self._out
        results: list[ToolResultMessage] = []
        pending: list[ToolResultMessage] = []
        for call in calls:
            result = error_result(NOT_RUN_TEXT.format(name=call.name, limit=reached.text()))
            out.append(
                ToolExecutionStartEvent(
                    tool_call_id=call.id, tool_name=call.name, args=call.arguments
                )
            )
            out.append(
                ToolExecutionEndEvent(
                    tool_call_id=call.id, tool_name=call.name, result=result, is_error=True
                )
            )
            message = ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=result.content,
                details=result.details,
                is_error=True,
                timestamp=self.now,
            )
            results.append(message)
            if sequential:
                self.append_message(message)
            else:
                pending.append(message)
        for message in pending:
            self.append_message(message)
        self._limit_results = results

    def _emit_limit_turn_end(self) -> None:
        self.set_var("limit_turn_end", "turn_open", False)
        results = self._limit_results if self._limit_results is not None else []
        event: AgentEvent = TurnEndEvent(message=self._final, tool_results=results)
        self._out.append(event)

    def _emit_limit_deadline(self) -> None:
        limits = self.config.limits
        usage = self.vars.usage
        assert limits is not None and limits.seconds is not None and usage is not None
        elapsed = (self.now - usage.started_at) / 1000
        reached = LimitReached(
            limit="seconds", maximum=limits.seconds, used=elapsed, where="deadline"
        )
        self.set_var("limit_deadline", "limit_reached", reached)

    def _emit_deadline_message(self) -> None:
        if self._final is not None:
            return
        message = self._failure_message(self._partial)
        reached = self.vars.limit_reached
        if reached is not None:
            message.error_message = LIMIT_TEXT.format(text=reached.text())
        self._final = message
