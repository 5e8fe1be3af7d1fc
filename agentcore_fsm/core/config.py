"""What a run is given: its context, its configuration and hooks, and the stream-function types.

These hold callables, so they are plain dataclasses rather than pydantic models. Every hook may
be a plain function or ``async def``; the driver awaits whatever comes back.

Every field is checked when it is set, at construction and on assignment (see
:mod:`agentcore_fsm.core.checks`): a hook that is not callable, a duration that is NaN, infinite or
negative, a value of the wrong type is refused at once with a ``TypeError`` or ``ValueError`` naming
the field, not when a run reaches it. The checks run once per value set, never per input.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias, get_args

from agentcore_fsm.core import checks
from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.compaction import Compaction
from agentcore_fsm.core.fallback import ModelFallback
from agentcore_fsm.core.limits import UsageLimits
from agentcore_fsm.core.messages import (
    AgentMessage,
    AssistantMessage,
    Message,
    Model,
    ThinkingLevel,
    ToolResultMessage,
)
from agentcore_fsm.core.output import OutputSpec
from agentcore_fsm.core.tool_policy import ToolPolicy
from agentcore_fsm.core.tools import AgentTool, ToolExecutionMode

if TYPE_CHECKING:
    from agentcore_fsm.core.events import AssistantMessageEvent

__all__ = [
    "MODEL_CALL_OPTIONS",
    "AgentContext",
    "AgentLoopConfig",
    "AgentLoopTurnUpdate",
    "LlmContext",
    "ModelCallOptions",
    "PrepareNextTurnContext",
    "ShouldStopAfterTurnContext",
    "StreamFn",
    "StreamOptions",
    "default_convert_to_llm",
    "stream_options",
]

MaybeAwaitable: TypeAlias = Any
"""A value, or an awaitable of it (hooks may be sync or async)."""


def _messages(where: str, name: str, value: Any) -> list[AgentMessage]:
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        raise TypeError(f"{where}: {name} must be a list of messages, not {type(value).__name__}")
    return value


def _tools(where: str, name: str, value: Any) -> list[AgentTool]:
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        raise TypeError(f"{where}: {name} must be a list of AgentTool, not {type(value).__name__}")
    for i, tool in enumerate(value):
        if not isinstance(tool, AgentTool):
            raise TypeError(f"{where}: {name}[{i}] must be an AgentTool, not {type(tool).__name__}")
    return value


_new_context = object.__new__


class Checked:
    """A dataclass whose fields are checked when set: ``_checks`` maps a field's name to its
    check (:mod:`agentcore_fsm.core.checks`); a subclass adds its own fields' checks."""

    _checks: ClassVar[dict[str, checks.Check]] = {}

    if not TYPE_CHECKING:  # runtime only: type checkers keep checking the fields' types

        def __setattr__(self, name: str, value: Any) -> None:
            check = self._checks.get(name)
            if check is not None:
                value = check(type(self).__name__, name, value)
            object.__setattr__(self, name, value)


@dataclass
class AgentContext(Checked):
    """The conversation a run works on. Runs never mutate the caller's object or its lists.
    ``system_prompt`` is a str, ``messages`` and ``tools`` lists (a tuple is taken as a list;
    every tool an :class:`~agentcore_fsm.core.tools.AgentTool`)."""

    _checks: ClassVar[dict[str, checks.Check]] = {
        "system_prompt": checks.text,
        "messages": _messages,
        "tools": _tools,
    }

    system_prompt: str = ""
    messages: list[AgentMessage] = field(default_factory=list)
    tools: list[AgentTool] = field(default_factory=list)

    def copy(self) -> AgentContext:
        """A context with the same system prompt and copies of the two lists. The fields were
        checked when set; a list's items may have changed since, so the tools are checked
        again (a junk item is still a ``TypeError`` here), but nothing else is: the copy costs
        a third of building a context anew (each run makes one)."""
        copied = _new_context(AgentContext)
        put = object.__setattr__
        put(copied, "system_prompt", self.system_prompt)
        put(copied, "messages", list(self.messages))
        put(copied, "tools", _tools("AgentContext", "tools", list(self.tools)))
        return copied


@dataclass
class LlmContext:
    """What a stream function sees: only user, assistant and toolResult messages."""

    system_prompt: str
    messages: list[Message]
    tools: list[AgentTool]
    output: OutputSpec | None = None
    """The structured output asked for, with its mode resolved (docs/output.md): in modes
    ``tool`` and ``forced_tool`` its final tool is already among ``tools``; a provider reads
    ``output.mode`` to force that tool or to ask for JSON of ``output.parameters``."""


_MODEL_CALL_CHECKS: dict[str, checks.Check] = {
    "api_key": checks.str_or_none,
    "reasoning": checks.choice((None, *get_args(ThinkingLevel))),
    "session_id": checks.str_or_none,
    "thinking_budgets": checks.str_int_dict_or_none,
    "transport": checks.str_or_none,
    "max_retry_delay_ms": checks.int_or_none(0),
    "temperature": checks.finite_number_or_none,
    "max_tokens": checks.int_or_none(1),
    "headers": checks.str_dict_or_none,
    "on_payload": checks.callable_or_none,
    "on_response": checks.callable_or_none,
}


@dataclass(kw_only=True)
class ModelCallOptions(Checked):
    """The options of a model call, defined once: :class:`AgentLoopConfig` and
    :class:`StreamOptions` both have exactly these fields (they inherit them), and an ``Agent``
    keeps its own in :attr:`Agent.options <agentcore_fsm.Agent.options>`. A provider reads the
    ones it supports and ignores the others; ``None`` means the provider's default. Each is
    checked when set (a str where a str belongs, ``temperature`` a finite number >= 0,
    ``max_tokens`` an int >= 1, ``max_retry_delay_ms`` an int >= 0, the hooks callables)."""

    _checks: ClassVar[dict[str, checks.Check]] = _MODEL_CALL_CHECKS

    api_key: str | None = None
    """The API key (``get_api_key``, when configured and returning one, takes precedence)."""
    reasoning: ThinkingLevel | None = None
    """How hard the model should think (None or "off": no reasoning)."""
    session_id: str | None = None
    """An id the provider may use for caching or routing of one conversation."""
    thinking_budgets: dict[str, int] | None = None
    """Token budgets per thinking level, for providers that take a budget."""
    transport: str | None = None
    """The provider's transport ("sse", "websocket", "auto" …), where it has a choice."""
    max_retry_delay_ms: int | None = None
    """The longest a provider waits before retrying a failed request."""
    temperature: float | None = None
    max_tokens: int | None = None
    headers: dict[str, str] | None = None
    """Extra HTTP headers for the request."""
    on_payload: Callable[[Any], Any] | None = None
    """Called with the request payload before it is sent (for logging or inspection)."""
    on_response: Callable[[Any], Any] | None = None
    """Called with the raw response (for logging or inspection)."""


MODEL_CALL_OPTIONS: tuple[str, ...] = tuple(f.name for f in fields(ModelCallOptions))
"""The names of the model-call options, in declaration order."""


@dataclass(kw_only=True)
class StreamOptions(ModelCallOptions):
    """What a stream function is given with each call: the model-call options of the run
    (:class:`ModelCallOptions`) and the run's abort ``signal``."""

    _checks: ClassVar[dict[str, checks.Check]] = {
        **_MODEL_CALL_CHECKS,
        "signal": checks.instance_or_none(AbortSignal, "an AbortSignal"),
    }

    signal: AbortSignal | None = None


def stream_options(
    options: ModelCallOptions,
    signal: AbortSignal | None,
    *,
    api_key: str | None = None,
    reasoning: ThinkingLevel | None = None,
) -> StreamOptions:
    """The :class:`StreamOptions` of one model call: ``options`` (a run's config) with the
    call's ``signal``, its ``api_key`` if one was obtained, and its current ``reasoning``.
    The options were checked when they were set: they are copied without checking again."""
    # built without the dataclass __init__, whose every field assignment would be checked
    # again on each model call: the hot path pays for the checks once, when the options are set
    made = object.__new__(StreamOptions)
    put = object.__setattr__
    for name in MODEL_CALL_OPTIONS:
        put(made, name, getattr(options, name))
    if signal is not None and not isinstance(signal, AbortSignal):
        made.signal = signal  # raises: the check's error names the field
    put(made, "signal", signal)
    if api_key:
        made.api_key = api_key
    made.reasoning = reasoning
    return made


StreamFn: TypeAlias = Callable[
    [Model, LlmContext, StreamOptions], "AsyncIterator[AssistantMessageEvent]"
]
"""``stream_fn(model, context, options)``: an async iterator of stream events (see
docs/reference.md#the-stream-function)."""


@dataclass
class PrepareNextTurnContext:
    """Handed to ``prepare_next_turn`` and ``should_stop_after_turn`` after every turn."""

    message: AgentMessage
    tool_results: list[ToolResultMessage]
    context: AgentContext
    new_messages: list[AgentMessage]


ShouldStopAfterTurnContext = PrepareNextTurnContext


@dataclass
class AgentLoopTurnUpdate:
    """What ``prepare_next_turn`` may return: given fields replace the current ones."""

    context: AgentContext | None = None
    model: Model | None = None
    thinking_level: ThinkingLevel | None = None


def default_convert_to_llm(messages: list[AgentMessage]) -> list[Message]:
    """Keep the messages whose role the model understands (user, assistant, toolResult)."""
    return [m for m in messages if getattr(m, "role", None) in ("user", "assistant", "toolResult")]


Hook: TypeAlias = Callable[..., MaybeAwaitable]


def _model(where: str, name: str, value: Any) -> Model:
    """A :class:`Model`; a str is refused with the way to name a model by a str."""
    if isinstance(value, str):
        raise TypeError(
            f"{where}: {name} must be a Model, not str ({value!r:.60}): for a model named by "
            f"a str, pass resolve_model({value!r:.60}) (agentcore_fsm.core.model_names)"
        )
    model: Model = checks.instance(Model, "a Model")(where, name, value)
    return model


@dataclass(kw_only=True)
class AgentLoopConfig(ModelCallOptions):
    """The configuration of a run (see docs/reference.md#configuration). Only ``model`` is
    required. The model-call options (``api_key``, ``reasoning``, ``temperature`` …) are those
    of :class:`ModelCallOptions`, passed to the stream function with each call. Every field is
    checked when set: ``model`` a :class:`~agentcore_fsm.core.messages.Model`, each hook a
    callable or None, ``tool_execution`` ``"parallel"`` or ``"sequential"``,
    ``approval_timeout_s`` a finite number of seconds >= 0 or None."""

    _checks: ClassVar[dict[str, checks.Check]] = {
        **_MODEL_CALL_CHECKS,
        "model": _model,
        "convert_to_llm": checks.callable_or_none,
        "transform_context": checks.callable_or_none,
        "get_api_key": checks.callable_or_none,
        "tool_execution": checks.choice(get_args(ToolExecutionMode)),
        "before_tool_call": checks.callable_or_none,
        "after_tool_call": checks.callable_or_none,
        "prepare_next_turn": checks.callable_or_none,
        "should_stop_after_turn": checks.callable_or_none,
        "get_steering_messages": checks.callable_or_none,
        "get_follow_up_messages": checks.callable_or_none,
        "decide_approval": checks.callable_or_none,
        "approval_timeout_s": checks.duration_or_none,
        "output": checks.instance_or_none(OutputSpec, "an OutputSpec (see output_spec)"),
        "limits": checks.instance_or_none(UsageLimits, "a UsageLimits"),
        "tool_policy": checks.instance_or_none(ToolPolicy, "a ToolPolicy"),
        "fallback": checks.instance_or_none(ModelFallback, "a ModelFallback"),
        "compaction": checks.instance_or_none(Compaction, "a Compaction"),
    }

    model: Model
    convert_to_llm: Callable[[list[AgentMessage]], MaybeAwaitable] | None = None
    transform_context: Callable[[list[AgentMessage], AbortSignal | None], MaybeAwaitable] | None = (
        None
    )
    get_api_key: Callable[[str], MaybeAwaitable] | None = None
    tool_execution: ToolExecutionMode = "parallel"
    before_tool_call: Hook | None = None
    after_tool_call: Hook | None = None
    prepare_next_turn: Hook | None = None
    should_stop_after_turn: Hook | None = None
    get_steering_messages: Callable[[], MaybeAwaitable] | None = None
    get_follow_up_messages: Callable[[], MaybeAwaitable] | None = None
    decide_approval: Callable[[Any, AbortSignal], MaybeAwaitable] | None = None
    """Decides about a tool call that needs approval: ``decide_approval(request, signal)``
    (sync or async; ``request`` an :class:`~agentcore_fsm.core.approval.ApprovalRequest`) returns an
    :class:`~agentcore_fsm.core.approval.ApprovalDecision`, a bool, or None (no decision in this
    process: a journaled run is suspended). Without it, such a call is denied. See
    docs/reference.md#approval-of-tool-calls."""
    approval_timeout_s: float | None = None
    """Deny a call whose decision has not come within this many seconds (None: wait)."""
    output: OutputSpec | None = None
    """The structured output the run must end with (docs/output.md): made by
    :func:`~agentcore_fsm.core.output.output_spec`, or by ``run_agent_loop(output_type=...)``."""
    limits: UsageLimits | None = None
    """Usage limits of the run (docs/policies.md#usage-limits): requests, turns, tool calls,
    tokens, cost, wall-clock time; a run that reaches one ends with ``reason="limit"``."""
    tool_policy: ToolPolicy | None = None
    """The run-wide tool settings: a cap on parallel executions, refusing repeated identical
    calls (docs/policies-tools.md). None: neither."""
    fallback: ModelFallback | None = None
    """The models to try, in order, after ``model`` when a request fails with a retryable error
    (:class:`~agentcore_fsm.core.fallback.ModelFallback`; docs/policies-models.md)."""
    compaction: Compaction | None = None
    """How the context is compacted when the provider says it is too long, or before a request
    over ``max_context_tokens`` (:class:`~agentcore_fsm.core.compaction.Compaction`;
    docs/policies-models.md)."""


AssistantFinal: TypeAlias = AssistantMessage
StopKind: TypeAlias = Literal["completed", "stopped", "aborted", "error", "limit"]
