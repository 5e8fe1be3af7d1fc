"""The loop's side of structured output: the guards, emit actions and effect of the state
``validating_output`` (``states/agent_loop.toml``, the block "structured output"; see
docs/output.md).

:class:`OutputActions` is a base of :class:`~agentcore_fsm.core.loop_actions.LoopActions`. What
decides the path of a run with an output type is two declared variables (``machine.vars``), set
only by the input :class:`~agentcore_fsm.core.protocol.OutputChecked` and the emit action
``output_retry_prompt``: ``output_problem`` (the last answer's problem, None when it validated)
and ``output_retries_used`` (how many answers went back to the model). ``output`` is the valid
output, as JSON data, that ``agent_end`` carries (data, not a variable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentcore_fsm.core.config import AgentLoopConfig
from agentcore_fsm.core.events import (
    AgentEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    TurnEndEvent,
)
from agentcore_fsm.core.messages import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentcore_fsm.core.output import OutputError
from agentcore_fsm.core.protocol import Effect, ValidateOutput
from agentcore_fsm.core.tool_call import ABORTED_TEXT
from agentcore_fsm.core.tools import AgentToolResult, error_result

__all__ = ["ACCEPTED_TEXT", "NOT_EXECUTED_TEXT", "OutputActions"]

ACCEPTED_TEXT = "Final answer accepted."
NOT_EXECUTED_TEXT = 'Tool call "{name}" was not executed: the message gave a final answer.'


class OutputActions:
    """The structured-output guards, emit actions and effect of the loop machine (a base of
    ``LoopActions``; the attributes below are the loop's)."""

    config: AgentLoopConfig
    _final: AssistantMessage | None
    _out: list[Any]
    _effects: list[Effect]
    _failure: BaseException | None
    vars: Any
    now: int

    if TYPE_CHECKING:  # the loop's, from DeclaredMachine (later in the MRO: no stub here)

        def set_var(self, by: str, name: str, value: Any) -> None: ...

    def append_message(self, message: AgentMessage) -> None:  # pragma: no cover
        raise NotImplementedError

    def _emit_failure_turn(self) -> None:  # pragma: no cover - the loop's
        raise NotImplementedError

    def _init_output(self) -> None:
        self.output: Any = None
        self._output_results: list[ToolResultMessage] = []
        self._retry_text: str | None = None

    # --- guards -----------------------------------------------------------------------------

    def _guard_output_due(self) -> bool:
        spec = self.config.output
        final = self._final
        if spec is None or final is None:
            return False
        return not final.tool_calls() or spec.answer_call(final) is not None

    def _guard_output_valid(self) -> bool:
        return self.vars.output_problem is None

    def _guard_output_retries_left(self) -> bool:
        spec = self.config.output
        return spec is not None and self.vars.output_retries_used < spec.retries

    # --- the effect -------------------------------------------------------------------------

    def _effect_validate_output(self) -> None:
        spec = self.config.output
        assert spec is not None and self._final is not None
        self._effects.append(ValidateOutput(self._final, spec))

    # --- emit actions -----------------------------------------------------------------------

    def _emit_answer_output_calls(self) -> None:
        final = self._final
        spec = self.config.output
        assert final is not None and spec is not None
        answer = spec.answer_call(final)
        cut = self.vars.aborted or self._failure is not None
        self._retry_text = self.vars.output_problem if answer is None else None
        results: list[ToolResultMessage] = []
        for call in final.tool_calls():
            if cut:
                result, is_error = error_result(ABORTED_TEXT), True
            elif call is answer:
                problem = self.vars.output_problem
                if problem is None:
                    result, is_error = (
                        AgentToolResult(content=[TextContent(text=ACCEPTED_TEXT)]),
                        False,
                    )
                else:
                    result, is_error = error_result(problem), True
            else:
                result, is_error = error_result(NOT_EXECUTED_TEXT.format(name=call.name)), True
            results.append(self._answer(call, result, is_error))
        self._output_results = results

    def _answer(self, call: ToolCall, result: AgentToolResult, is_error: bool) -> ToolResultMessage:
        out = self._out
        out.append(
            ToolExecutionStartEvent(tool_call_id=call.id, tool_name=call.name, args=call.arguments)
        )
        out.append(
            ToolExecutionEndEvent(
                tool_call_id=call.id, tool_name=call.name, result=result, is_error=is_error
            )
        )
        message = ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=result.content,
            details=result.details,
            is_error=is_error,
            timestamp=self.now,
        )
        self.append_message(message)
        return message

    def _emit_output_turn_end(self) -> None:
        self.set_var("output_turn_end", "turn_open", False)
        event: AgentEvent = TurnEndEvent(message=self._final, tool_results=self._output_results)
        self._out.append(event)

    def _emit_output_retry_prompt(self) -> None:
        used = self.vars.output_retries_used + 1
        self.set_var("output_retry_prompt", "output_retries_used", used)
        text = self._retry_text
        if text is not None:
            self.append_message(UserMessage(content=text, timestamp=self.now))

    def _emit_output_failure_turn(self) -> None:
        tries = self.vars.output_retries_used + 1
        self._failure = OutputError(
            f"No valid output after {tries} answer{'s' if tries > 1 else ''}: "
            f"{self.vars.output_problem}"
        )
        self._emit_failure_turn()
