"""The loop's side of model fallback and context compaction: the guards, emit actions, effect
and input of the block "model fallback and context compaction" of ``states/agent_loop.toml``
(docs/policies-models.md).

:class:`ModelPolicyActions` is a base of :class:`~agentcore_fsm.core.loop_actions.LoopActions`.
What decides the path is four declared variables (``machine.vars``): ``model_index`` (how far
down the fallback list the run is), ``model_errors`` (the errors of the models the current
request fell back from), ``compacted`` (the current request's context was compacted) and
``compaction_reason``. The machine's model is data (``prepare_next_turn`` may replace it too);
``fall_back`` sets it from ``model_index``, so a replayed journal reaches the same model.

With neither setting configured, the loop pays per request one None check (the guard of the
automatic ``compact_first`` transition on entering ``streaming``), one flag check in
``assistant_end`` and three more reads of ``assistant_errored`` when the model finishes; the other
guards are read only after a request failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentcore_fsm.core.boundary import InvalidValueError, check_message_list
from agentcore_fsm.core.compaction import (
    CompactionInfo,
    CompactionReason,
    CompactionRequest,
    dropped_messages,
    estimate_tokens,
)
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig
from agentcore_fsm.core.events import ContextCompactedEvent
from agentcore_fsm.core.fallback import failures_text
from agentcore_fsm.core.messages import AgentMessage, AssistantMessage, Model
from agentcore_fsm.core.protocol import CallHook, Effect, HookReturned, Step

__all__ = ["ModelPolicyActions", "check_compacted", "model_label"]


def check_compacted(value: Any) -> list[AgentMessage]:
    """The compaction hook's answer: a list of messages (checked by the machine and by the
    journal). Raises :class:`~agentcore_fsm.core.boundary.InvalidValueError` naming the hook."""
    return check_message_list(value, "The compaction hook (Compaction.compact)")


def model_label(model: Model) -> str:
    """How an error names a model: ``provider/id`` (``id`` when the provider is unknown)."""
    return model.id if model.provider in ("", "unknown") else f"{model.provider}/{model.id}"


class ModelPolicyActions:
    """The fallback and compaction guards, emit actions, effect and input of the loop machine
    (a base of ``LoopActions``; the attributes below are the loop's)."""

    config: AgentLoopConfig
    context: AgentContext
    model: Model
    _final: AssistantMessage | None
    _out: list[Any]
    _effects: list[Effect]
    vars: Any

    if TYPE_CHECKING:  # the loop's (DeclaredMachine, LoopMachine): later in the MRO

        def set_var(self, by: str, name: str, value: Any) -> None: ...
        def fire(self, trigger: str) -> None: ...
        def _check(self, name: str) -> None: ...
        def _take_step(self) -> Step: ...
        def _failed(self, error: BaseException, aborted: bool = False) -> Step: ...

    def _init_model_policies(self) -> None:
        # write-once: whether either policy is configured (the one check assistant_end makes)
        self._policies = self.config.fallback is not None or self.config.compaction is not None
        # data: the hook's answer, between the input and the emit action that applies it
        self._compacted_to: list[AgentMessage] | None = None

    def _end_request(self) -> None:
        """A request's message ended (``assistant_end``, when a policy is configured): a
        request that did not fail forgets the errors of the models it fell back from, and the
        next request may be compacted again."""
        if self.vars.compacted is not None:
            self.set_var("assistant_end", "compacted", None)
        final = self._final
        if self.vars.model_errors and (final is None or final.stop_reason != "error"):
            self.set_var("assistant_end", "model_errors", [])

    # --- guards -----------------------------------------------------------------------------

    def _guard_fallback_left(self) -> bool:
        fallback = self.config.fallback
        final = self._final
        if fallback is None or final is None:
            return False
        return self.vars.model_index < len(fallback.models) and fallback.moves_on(final.error_kind)

    def _guard_fell_back(self) -> bool:
        return bool(self.vars.model_errors)

    def _guard_overflow_compactable(self) -> bool:
        final = self._final
        return (
            self.config.compaction is not None
            and final is not None
            and final.error_kind == "context_overflow"
            and self.vars.compacted != "overflow"
        )

    def _guard_over_context_budget(self) -> bool:
        compaction = self.config.compaction
        if compaction is None:
            return False
        limit = compaction.max_context_tokens
        if limit is None or self.vars.compacted is not None:
            return False
        context = self.context
        return estimate_tokens(context.messages, context.system_prompt) > limit

    # --- emit actions -----------------------------------------------------------------------

    def _emit_fall_back(self) -> None:
        fallback = self.config.fallback
        final = self._final
        assert fallback is not None and final is not None
        errors = [*self.vars.model_errors, f"{model_label(self.model)}: {final.error_message}"]
        index = self.vars.model_index + 1
        self.set_var("fall_back", "model_errors", errors)
        self.set_var("fall_back", "model_index", index)
        self.model = fallback.models[index - 1]

    def _emit_name_failures(self) -> None:
        final = self._final
        assert final is not None
        text = failures_text(
            [*self.vars.model_errors, f"{model_label(self.model)}: {final.error_message}"]
        )
        self._final = final.model_copy(update={"error_message": text})

    def _emit_compact_for_overflow(self) -> None:
        self.set_var("compact_for_overflow", "compaction_reason", "overflow")

    def _emit_compact_for_budget(self) -> None:
        self.set_var("compact_for_budget", "compaction_reason", "budget")

    def _emit_context_compacted(self) -> None:
        context = self.context
        before = list(context.messages)
        after = self._compacted_to
        assert after is not None
        self._compacted_to = None
        indices, dropped = dropped_messages(before, after)
        context.messages[:] = after
        self._out.append(
            ContextCompactedEvent(
                reason="budget" if self.vars.compaction_reason == "budget" else "overflow",
                dropped=dropped,
                indices=indices,
                kept=len(after),
                tokens_before=estimate_tokens(before, context.system_prompt),
                tokens_after=estimate_tokens(after, context.system_prompt),
            )
        )

    # --- effect -----------------------------------------------------------------------------

    def _effect_compact_context(self) -> None:
        compaction = self.config.compaction
        assert compaction is not None
        context = self.context
        messages = list(context.messages)
        reason: CompactionReason = (
            "budget" if self.vars.compaction_reason == "budget" else "overflow"
        )
        error = None
        if reason == "overflow":
            for message in reversed(messages):
                if isinstance(message, AssistantMessage):
                    error = message.error_message
                    break
        info = CompactionInfo(
            reason=reason,
            model=self.model,
            estimated_tokens=estimate_tokens(messages, context.system_prompt),
            max_context_tokens=compaction.max_context_tokens,
            error=error,
        )
        self._effects.append(CallHook("compact", CompactionRequest(compaction, messages, info)))

    # --- the input --------------------------------------------------------------------------

    def _on_compacted(self, input: HookReturned) -> Step:
        """The compaction hook returned (``HookReturned("compact", messages)``): the input
        ``context_compacted``; a value that is not a list of messages fails the run."""
        self._check("context_compacted")
        try:
            messages = check_compacted(input.value)
        except InvalidValueError as exc:
            return self._failed(exc)
        self._compacted_to = list(messages)
        reason = "budget" if self.vars.compaction_reason == "budget" else "overflow"
        self.set_var("context_compacted", "compacted", reason)
        self.fire("context_compacted")
        return self._take_step()
