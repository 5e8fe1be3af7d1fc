"""One tool call's machine (``states/tool_call.toml``): begin, prepare, check, run, review, answer.

A :class:`ToolCallMachine` belongs to the :class:`~agentcore_fsm.machine.LoopMachine` of its
run; the loop offers it its triggers in the order the declaration describes and feeds it the
outcomes of its effects. Its guards, emit actions and effects are the small methods below; the
events it emits and the effects it asks for go into the loop's current step. Pure: it never calls
user code (``prepare_arguments``, the hooks and ``execute`` are effects the driver performs).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from .boundary import exc_text
from .declared import DeclaredMachine
from .events import ToolExecutionEndEvent, ToolExecutionStartEvent
from .messages import ToolCall, ToolResultMessage
from .protocol import CallHook, ExecuteTool, PrepareArguments
from .tools import (
    AfterToolCallContext,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    ToolCallRejected,
    error_result,
    find_tool,
    validate_arguments,
)

if TYPE_CHECKING:
    from .machine import LoopMachine

__all__ = ["ABORTED_TEXT", "TRUNCATED_TEXT", "ToolCallMachine"]

ABORTED_TEXT = "Operation aborted"
TRUNCATED_TEXT = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its '
    "arguments may be truncated. Re-issue the tool call with complete arguments."
)

# states in which a call has started and not ended
STARTED = frozenset({"preparing", "checking", "ready", "running", "reviewing"})
# states in which a call is prepared or further along
PREPARED = frozenset({"ready", "running", "reviewing", "ended", "answered"})


class ToolCallMachine(DeclaredMachine):
    """The machine of tool call ``index`` of the loop's current assistant message."""

    declaration_name = "tool_call"

    def __init__(self, loop: LoopMachine, index: int, call: ToolCall, declaration: Any) -> None:
        super().__init__(declaration)
        self.loop = loop
        self.index = index
        self.call = call
        self.tool: AgentTool | None = None
        self.raw: Any = None  # the arguments to validate (a copy; after prepare_arguments)
        self.args: Any = None  # the validated arguments
        self._validated: bool | None = None
        self.rejection: str | None = None  # why the call ended before running
        self.prepare_error: BaseException | None = None
        self.result: AgentToolResult | None = None
        self.is_error = False
        self.finished_after_abort = False
        self.message: ToolResultMessage | None = None

    @property
    def started(self) -> bool:
        return self.state != "new"

    # --- outcomes fed by the loop ---------------------------------------------------------

    def prepared(self, value: Any, error: BaseException | None) -> None:
        if error is not None:
            self.prepare_error = error
            self.rejection = exc_text(error)
        else:
            self.raw = value
            self._validated = None
        self._fire("arguments_prepared")

    def before_returned(self, blocked: str | None) -> None:
        self.rejection = blocked
        self._fire("before_returned")

    def tool_finished(self, result: AgentToolResult, is_error: bool, after_abort: bool) -> None:
        self.result, self.is_error = result, is_error
        self.finished_after_abort = after_abort
        self._fire("finished")

    def after_returned(self, result: AgentToolResult, is_error: bool) -> None:
        self.result, self.is_error = result, is_error
        self._fire("after_returned")

    # --- guards ---------------------------------------------------------------------------

    def _guard_may_begin(self) -> bool:
        return self.loop._may_begin(self.index)

    def _guard_tool_found(self) -> bool:
        if self.tool is None:
            try:
                self.tool = find_tool(self.loop.context.tools, self.call.name)
            except ToolCallRejected as exc:
                self.rejection = str(exc)
                return False
            # a copy: prepare_arguments, before_tool_call and the tool may mutate the
            # arguments; the assistant message's tool call must not change
            self.raw = _json_copy(self.call.arguments)
        return True

    def _guard_has_prepare(self) -> bool:
        return self.tool is not None and self.tool.prepare_arguments is not None

    def _guard_arguments_valid(self) -> bool:
        if self._validated is None:
            assert self.tool is not None
            try:
                self.args = validate_arguments(self.tool, self.raw)
                self._validated = True
            except ToolCallRejected as exc:
                self.rejection, self._validated = str(exc), False
            except Exception as exc:  # formatting junk arguments failed: still name the tool
                self.rejection = f'Validation failed for tool "{self.call.name}": {exc_text(exc)}'
                self._validated = False
        return self._validated

    def _guard_prepare_failed(self) -> bool:
        return self.prepare_error is not None

    def _guard_has_before_hook(self) -> bool:
        return self.loop.config.before_tool_call is not None

    def _guard_blocked(self) -> bool:
        return self.rejection is not None

    def _guard_has_after_hook(self) -> bool:
        return self.loop.config.after_tool_call is not None and not self.finished_after_abort

    def _guard_may_answer(self) -> bool:
        return self.loop._may_answer(self.index)

    # --- emit actions ---------------------------------------------------------------------

    def _emit_execution_start(self) -> None:
        call = self.call
        self.loop._out.append(
            ToolExecutionStartEvent(tool_call_id=call.id, tool_name=call.name, args=call.arguments)
        )

    def _end(self, result: AgentToolResult, is_error: bool) -> None:
        self.result, self.is_error = result, is_error
        call = self.call
        self.loop._out.append(
            ToolExecutionEndEvent(
                tool_call_id=call.id, tool_name=call.name, result=result, is_error=is_error
            )
        )

    def _emit_rejected_end(self) -> None:
        self._end(error_result(self.rejection or "Tool execution was blocked"), True)

    def _emit_end(self) -> None:
        assert self.result is not None
        self._end(self.result, self.is_error)

    def _emit_aborted_end(self) -> None:
        self._end(error_result(ABORTED_TEXT), True)

    def _emit_truncated_end(self) -> None:
        self._end(error_result(TRUNCATED_TEXT.format(name=self.call.name)), True)

    def _emit_result_message(self) -> None:
        result = self.result
        assert result is not None
        message = ToolResultMessage(
            tool_call_id=self.call.id,
            tool_name=self.call.name,
            content=result.content,
            details=result.details,
            usage=result.usage,
            added_tool_names=result.added_tool_names,
            is_error=self.is_error,
            timestamp=self.loop.clock(),
        )
        self.message = message
        self.loop._append(message)

    # --- effects --------------------------------------------------------------------------

    def _effect_prepare_arguments(self) -> None:
        assert self.tool is not None
        self.loop._effects.append(PrepareArguments(self.index, self.tool, self.raw))

    def _effect_before_tool_call(self) -> None:
        loop = self.loop
        assert loop._final is not None
        ctx = BeforeToolCallContext(
            assistant_message=loop._final, tool_call=self.call, args=self.args, context=loop.context
        )
        loop._effects.append(CallHook("before_tool_call", ctx, self.index))

    def _effect_execute(self) -> None:
        assert self.tool is not None
        self.loop._effects.append(ExecuteTool(self.index, self.tool, self.call, self.args))

    def _effect_after_tool_call(self) -> None:
        loop = self.loop
        assert loop._final is not None and self.result is not None
        ctx = AfterToolCallContext(
            assistant_message=loop._final,
            tool_call=self.call,
            args=self.args,
            result=self.result,
            is_error=self.is_error,
            context=loop.context,
        )
        loop._effects.append(CallHook("after_tool_call", ctx, self.index))


def _json_copy(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts, lists, scalars): several times cheaper than
    ``copy.deepcopy``; anything else falls back to it."""
    cls = value.__class__
    if cls is dict:
        return {k: _json_copy(v) for k, v in value.items()}
    if cls is list:
        return [_json_copy(v) for v in value]
    if cls in (str, int, float, bool) or value is None:
        return value
    return copy.deepcopy(value)
