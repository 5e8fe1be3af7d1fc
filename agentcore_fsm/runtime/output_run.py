"""The driver's side of structured output (docs/output.md): the spec a run is given, the
validation of an answer (the :class:`~agentcore_fsm.core.protocol.ValidateOutput` effect), the
``output_partial`` events, and the result that carries the typed output.

Nothing here runs for a run without an output type: the partial events come from a wrapper of
``emit`` made only when a run has an output type and someone listens.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from agentcore_fsm.core.config import AgentLoopConfig
from agentcore_fsm.core.events import AgentEndEvent, MessageUpdateEvent, OutputPartialEvent
from agentcore_fsm.core.messages import AgentMessage, AssistantMessage, Model
from agentcore_fsm.core.output import (
    DEFAULT_OUTPUT_RETRIES,
    ModelRetry,
    OutputError,
    OutputInvalid,
    OutputMode,
    OutputSpec,
    OutputValidator,
    output_spec,
)
from agentcore_fsm.core.protocol import OutputChecked, ValidateOutput

__all__ = [
    "OutputRun",
    "RunOutput",
    "check_output",
    "default_output_mode",
    "make_output_spec",
    "output_run",
    "partial_output_emit",
    "run_output",
]

T = TypeVar("T")

_MODE_OF_API: dict[str, OutputMode] = {
    "openai-completions": "native",
    "anthropic-messages": "forced_tool",
}


def default_output_mode(model: Model) -> OutputMode:
    """The mode a run uses unless told otherwise, by the model's ``api``: ``native`` for
    OpenAI Chat Completions (its JSON-schema response format), ``forced_tool`` for Anthropic
    Messages (``tool_choice``), ``tool`` for every other stream function (the faux model
    included): a final-answer tool works with any model that calls tools."""
    return _MODE_OF_API.get(model.api, "tool")


def make_output_spec(
    output_type: Any,
    model: Model,
    *,
    mode: OutputMode | None = None,
    retries: int | None = None,
    validators: Sequence[OutputValidator] = (),
) -> OutputSpec | None:
    """The run's spec, its mode resolved for ``model`` (None without an output type).
    ``output_type`` may be an :class:`OutputSpec` already (``mode``, ``retries`` and
    ``validators`` must then not be given)."""
    if output_type is None:
        if mode is not None or retries is not None or validators:
            raise ValueError(
                "output_mode, output_retries and output_validators need an output_type"
            )
        return None
    if isinstance(output_type, OutputSpec):
        if mode is not None or retries is not None or validators:
            raise ValueError(
                "output_type is an OutputSpec: give its mode, retries and validators to "
                "output_spec(...), not to the run"
            )
        spec = output_type
    else:
        spec = output_spec(
            output_type,
            mode=mode,
            retries=DEFAULT_OUTPUT_RETRIES if retries is None else retries,
            validators=validators,
        )
    return spec.resolved(default_output_mode(model))


async def check_output(effect: ValidateOutput, now: Callable[[], int]) -> OutputChecked:
    """Validate the answer: the type, then each validator in order (each gets the value the
    one before returned). An invalid answer or a validator's :class:`ModelRetry` is the
    outcome's ``error``; anything else a validator raises propagates (the run fails). The
    outcome is stamped ``now()`` (the time the validation ended)."""
    spec = effect.spec
    try:
        value = spec.parse(effect.message)
        for validator in spec.validators:
            value = validator(value)
            if inspect.isawaitable(value):
                value = await value
    except OutputInvalid as exc:
        return OutputChecked(error=str(exc), timestamp=now())
    except ModelRetry as exc:
        return OutputChecked(error=exc.message, timestamp=now())
    return OutputChecked(value=spec.dump(value), timestamp=now())


def partial_output_emit(emit: Callable[[Any], Any], spec: OutputSpec) -> Callable[[Any], Any]:
    """``emit`` that also emits an ``output_partial`` after each ``message_update`` that
    changed the output validated so far (pydantic's partial validation); the value of the
    last one is the complete answer's. Only made for a run with an output type and an emit."""
    last: list[Any] = [_NOTHING]

    async def emit_with_partials(event: Any) -> None:
        result = emit(event)
        if inspect.isawaitable(result):
            await result
        if type(event) is not MessageUpdateEvent:
            if getattr(event, "type", None) == "turn_start":
                last[0] = _NOTHING  # a retry starts from nothing
            return
        message = event.message
        if not isinstance(message, AssistantMessage):
            return
        ok, value = spec.partial(message)
        if not ok or value == last[0]:
            return
        last[0] = value
        result = emit(OutputPartialEvent(output=value))
        if inspect.isawaitable(result):
            await result

    return emit_with_partials


_NOTHING: Any = object()


class RunOutput(list[AgentMessage], Generic[T]):
    """What a run with an output type returns: the messages the run created (a list, as
    without one) and :attr:`output`, the validated value."""

    def __init__(self, messages: list[AgentMessage], output: T | None, problem: str | None):
        super().__init__(messages)
        self._output = output
        self._problem = problem

    @property
    def output(self) -> T:
        """The validated output. Raises :class:`~agentcore_fsm.core.output.OutputError` when
        the run ended without one (the retries were used up, it was aborted or failed): the
        text says why."""
        if self._problem is not None:
            raise OutputError(self._problem)
        return self._output  # type: ignore[return-value]

    @property
    def has_output(self) -> bool:
        """True when the run ended with a valid output."""
        return self._problem is None


def run_output(messages: list[AgentMessage], spec: OutputSpec, end: Any) -> RunOutput[Any]:
    """The result of a run with an output type from its messages and its ``agent_end`` (or
    None when there was none)."""
    if end is not None and getattr(end, "reason", None) == "completed":
        return RunOutput(messages, spec.load(end.output), None)
    problem = "the run ended without a valid output"
    if end is not None:
        problem = f"the run ended ({end.reason}) without a valid output"
    for message in reversed(messages):
        if isinstance(message, AssistantMessage) and message.error_message:
            problem += f": {message.error_message}"
            break
    return RunOutput(messages, None, problem)


class OutputRun:
    """A run's structured output, set up by :func:`output_run` (None without an output type):
    the config that carries the resolved spec, ``emit`` wrapped to give the partial events and
    to keep ``agent_end``, and :meth:`result`."""

    def __init__(self, config: AgentLoopConfig, spec: OutputSpec, emit: Any) -> None:
        self.spec = spec
        self.config = copy.copy(config)
        self.config.output = spec
        self.end: Any = None
        inner = partial_output_emit(emit, spec) if emit is not None else None

        async def keep_end(event: Any) -> None:
            if type(event) is AgentEndEvent:
                self.end = event
            if inner is not None:
                await inner(event)

        self.emit = keep_end

    def result(self, messages: list[AgentMessage]) -> RunOutput[Any]:
        return run_output(messages, self.spec, self.end)


def output_run(
    config: AgentLoopConfig,
    emit: Any,
    output_type: Any,
    mode: OutputMode | None,
    retries: int | None,
    validators: Sequence[OutputValidator],
) -> OutputRun | None:
    """The structured output of a run given ``output_type`` (and the rest) or a config whose
    ``output`` is set; None when the run has none."""
    if output_type is None and config.output is not None:
        output_type = config.output
    spec = make_output_spec(
        output_type, config.model, mode=mode, retries=retries, validators=validators
    )
    if spec is None:
        return None
    return OutputRun(config, spec, emit)
