"""Handoff (docs/multi-agent.md#handoff): a tool that hands the conversation to another agent.

:func:`handoff` makes a :class:`HandoffTool`. When the model calls it, the tool answers at once
with a result that terminates the batch (``terminate=True``; its ``details`` name both agents,
:func:`handoff_of` reads them), and the run ends its turn there (``agent_end`` with the reason
``"stopped"``). A handoff must be the only kind of call of its turn: beside other tools' calls
it is refused (an error result; the run goes on), and of two handoffs in one turn the first
wins (the second is refused, terminating too). Then the target agent continues the
conversation in a **new run**: its own system prompt, tools, model, stream function, hooks and
deps, on the transcript so far (through the handoff's ``input_filter`` when it has one), with
no new prompt (a continue). So a prompt that hands off
is a **chain of runs**, one per agent, each with its own ``agent_start`` ... ``agent_end`` (the
event grammar holds per run); every ``agent_end`` of a chain names the agent that ran it
(``AgentEndEvent.agent``), and the result is a :class:`HandoffMessages`: every message of the
chain, ``agent`` (who answered) and ``handoffs`` (the hops, in order).

What the runs of a chain share: the signal (an abort stops the chain: no run starts after it),
the steering and follow-up polls, the approver, ``on_transition``, the usage limits (each run
starts from what the previous ones used, and the deadline is the first run's) and, for an
Agent, the output type of the prompt and its run store (each run journaled under its own id in
the session).

:func:`follow_handoffs` is what :class:`~agentcore_fsm.Agent` runs through (for an agent that
has a handoff among its tools); :func:`run_with_handoffs` is the same for the plain loop.
A handoff called where no chain follows it (a nested run, a plain ``run_agent_loop``, a
resumed run), or beyond its ``max_handoffs``, is answered with an error result that says why,
and the run goes on.
"""

from __future__ import annotations

import inspect
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

from agentcore_fsm.agent.nested import check_inner
from agentcore_fsm.agent.run_config import loop_config
from agentcore_fsm.agent.state import AgentState
from agentcore_fsm.core.abort import AbortController, AbortSignal
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, StreamFn
from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.core.messages import AgentMessage, TextContent, now_ms
from agentcore_fsm.core.nesting import Nesting, current_nesting
from agentcore_fsm.core.output import OutputError, OutputSpec, output_spec
from agentcore_fsm.core.tools import AgentTool, AgentToolResult, ToolUpdateCallback
from agentcore_fsm.runtime.driver import run_agent_loop, run_agent_loop_continue

__all__ = [
    "DEFAULT_MAX_HANDOFFS",
    "Handoff",
    "HandoffMessages",
    "HandoffTool",
    "follow_handoffs",
    "handoff",
    "handoff_of",
    "run_with_handoffs",
]

DEFAULT_MAX_HANDOFFS = 5
"""How many times one prompt's conversation may be handed off, by default: a handoff called
when the chain already has that many hops is refused (an error result naming the chain)."""

UNNAMED = "agent"
"""The name of an agent without one, where a chain names it (its first run)."""

PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
"""A handoff takes no arguments."""

HANDED_OFF_TEXT = "Handed off to {agent!r}."
NOT_FOLLOWED_TEXT = (
    "not handed off to {agent!r}: this run does not follow handoffs (a handoff works in an "
    "Agent's prompt or run_with_handoffs, not in a nested run or a plain run_agent_loop)"
)
MIXED_TEXT = (
    "not handed off to {agent!r}: a handoff must be the only kind of call of its turn (this "
    "turn also calls {others}); call it alone"
)
ALREADY_TEXT = "not handed off to {agent!r}: this turn already hands the conversation to {other!r}"
TOO_MANY_TEXT = (
    "not handed off to {agent!r}: the conversation was handed off {hops} times already, the "
    "most this handoff allows (max_handoffs {limit}; chain: {chain})"
)

Filter = Callable[[list[AgentMessage]], Sequence[AgentMessage]]


@dataclass(frozen=True, slots=True)
class Handoff:
    """One hop of a chain: the agent that handed the conversation off, and the one it went
    to. A handoff's tool result carries it in its ``details`` as JSON data (tool results'
    details are JSON data): ``{"handoff": {"from_agent": ..., "to_agent": ...}}``;
    :func:`handoff_of` reads it back from the ``tool_execution_end`` event or the result."""

    from_agent: str
    to_agent: str

    def details(self) -> dict[str, Any]:
        """The ``details`` of the handoff's tool result."""
        return {"handoff": {"from_agent": self.from_agent, "to_agent": self.to_agent}}


def handoff_of(item: Any) -> Handoff | None:
    """The :class:`Handoff` a handoff's ``tool_execution_end`` event, tool result or tool
    result message carries; None for anything else."""
    result = getattr(item, "result", None) if getattr(item, "type", None) else None
    details = getattr(result if result is not None else item, "details", None)
    hop = details.get("handoff") if isinstance(details, dict) else None
    if not isinstance(hop, dict):
        return None
    from_agent, to_agent = hop.get("from_agent"), hop.get("to_agent")
    if not isinstance(from_agent, str) or not isinstance(to_agent, str):
        return None
    return Handoff(from_agent, to_agent)


def chain_text(agents: Iterable[str]) -> str:
    """A chain of agents for people: ``triage > billing > refunds``."""
    return " > ".join(agents)


@dataclass(eq=False)
class _Chain:
    """The chain a prompt's runs make, as its handoff tools see it (through ``_CHAIN``)."""

    position: Nesting
    """Where the chain's runs stand: a run nested below them does not follow their handoffs."""
    agents: list[str]
    """The agents of the chain so far, the one running now last."""
    handoffs: dict[str, HandoffTool] = field(default_factory=dict)
    """The handoffs among the running run's tools, by name."""
    calls: tuple[tuple[str, str], ...] = ()
    """The calls of the current turn: (id, tool name) in order."""
    pending: tuple[HandoffTool, Handoff] | None = None
    """The handoff called in the current turn (the run ends after it)."""

    def running(self, tools: Iterable[Any]) -> None:
        """A run of the chain starts with ``tools``."""
        self.handoffs = {t.name: t for t in tools if isinstance(t, HandoffTool)}
        self.calls = ()
        self.pending = None

    def saw(self, event: Any) -> None:
        """Follow the running run's turns: what each one calls; a turn after the one that
        handed off (a queued message kept the run going) drops the handoff."""
        kind = event.type
        if kind == "turn_start":
            self.pending = None
        elif kind == "message_end" and getattr(event.message, "role", None) == "assistant":
            content = event.message.content
            self.calls = tuple(
                (b.id, b.name) for b in content if getattr(b, "type", "") == "toolCall"
            )


_CHAIN: ContextVar[_Chain | None] = ContextVar("agentcore_fsm_handoff_chain", default=None)


@dataclass(eq=False)
class HandoffTool(AgentTool):
    """A handoff (see the module's documentation): an
    :class:`~agentcore_fsm.core.tools.AgentTool` whose call hands the conversation to
    ``target``."""

    target: Any = None
    """The :class:`~agentcore_fsm.Agent` the conversation goes to (its settings are read when
    the hop happens)."""
    input_filter: Filter | None = None
    max_handoffs: int = DEFAULT_MAX_HANDOFFS
    _checking: bool = field(default=False, init=False, repr=False)

    @property
    def target_name(self) -> str:
        return str(self.target.name)

    def check_nested(self, agents: tuple[str, ...] = ()) -> None:
        """Check the target: a name, a stream function (or a model that names one), tools with
        distinct names and valid parameter schemas, and the same of the agents its own agent
        tools and handoffs reach (each once). Raises ``ValueError`` naming the handoff and the
        problem. The driver calls this when a run that has this tool starts."""
        if self._checking:
            return
        self._checking = True
        try:
            target = self.target
            if not target.name:
                raise ValueError(
                    f"handoff {self.name!r}: its target agent has no name (Agent(name=...))"
                )
            where = f"handoff target {target.name!r}"
            check_inner(where, target.stream_fn, target.state.model, target.state.tools, agents)
        finally:
            self._checking = False

    async def run_call(
        self,
        tool_call_id: str,
        args: Any,
        signal: AbortSignal,
        on_update: ToolUpdateCallback,
    ) -> AgentToolResult:
        """The call: the hand-off claimed for the chain, or an error result saying why not."""
        to = self.target_name
        chain = _CHAIN.get()
        if chain is None or chain.position != current_nesting():
            return _refused(NOT_FOLLOWED_TEXT.format(agent=to))
        others = [name for _, name in chain.calls if name not in chain.handoffs]
        if others:
            names = ", ".join(repr(name) for name in dict.fromkeys(others))
            return _refused(MIXED_TEXT.format(agent=to, others=names))
        if chain.calls and chain.calls[0][0] != tool_call_id:
            # the turn's first handoff (in the order of its calls) wins; this one ends too
            other = chain.handoffs[chain.calls[0][1]].target_name
            return _refused(ALREADY_TEXT.format(agent=to, other=other), terminate=True)
        hops = len(chain.agents) - 1
        if hops >= self.max_handoffs:
            text = TOO_MANY_TEXT.format(
                agent=to, hops=hops, limit=self.max_handoffs, chain=chain_text(chain.agents)
            )
            return _refused(text)
        hop = Handoff(chain.agents[-1], to)
        if chain.pending is not None:  # claimed already (a call id used twice, say)
            other = chain.pending[1].to_agent
            return _refused(ALREADY_TEXT.format(agent=to, other=other), terminate=True)
        chain.pending = (self, hop)
        return AgentToolResult(
            content=[TextContent(text=HANDED_OFF_TEXT.format(agent=to))],
            details=hop.details(),
            terminate=True,
        )

    def filtered(self, transcript: list[AgentMessage]) -> list[AgentMessage]:
        """What the target sees: ``transcript`` through the input filter (unchanged without
        one). Raises ``TypeError``/``ValueError`` naming the handoff for a filter that returns
        something else than messages a run can continue from."""
        if self.input_filter is None:
            return list(transcript)
        where = f"handoff {self.name!r}: input_filter"
        value = self.input_filter(list(transcript))
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise TypeError(f"{where} must return a list of messages, not {type(value).__name__}")
        messages = list(value)
        for message in messages:
            if getattr(message, "role", None) is None:
                raise TypeError(
                    f"{where} must return messages, not {type(message).__name__} among them"
                )
        if not messages:
            raise ValueError(f"{where} left no message: the target has nothing to continue from")
        if getattr(messages[-1], "role", None) == "assistant":
            raise ValueError(
                f"{where} left an assistant message last: the target cannot continue from it"
            )
        return messages


def _refused(text: str, *, terminate: bool | None = None) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=text)], is_error=True, terminate=terminate)


async def _unbound(*args: Any) -> AgentToolResult:  # replaced by the tool's own run_call
    raise AssertionError("not bound")


def handoff(
    agent: Any,
    *,
    name: str | None = None,
    description: str | None = None,
    input_filter: Filter | None = None,
    max_handoffs: int = DEFAULT_MAX_HANDOFFS,
) -> HandoffTool:
    """A tool that hands the conversation to ``agent`` (an :class:`~agentcore_fsm.Agent` with
    a name): named ``name`` (default ``transfer_to_<agent name>``), described by
    ``description`` (default: says so). ``input_filter(messages) -> messages`` chooses what of
    the transcript the target sees (default: all of it); ``max_handoffs``: a call when the
    conversation was already handed off that many times in the prompt is refused."""
    if not isinstance(getattr(agent, "state", None), AgentState):  # an Agent (no import cycle)
        raise TypeError(f"handoff: the target must be an Agent, not {type(agent).__name__}")
    if not agent.name:
        raise ValueError("handoff: the target agent has no name: make it with Agent(name=...)")
    if input_filter is not None and not callable(input_filter):
        raise TypeError(f"handoff: input_filter must be callable, not {input_filter!r}")
    if isinstance(max_handoffs, bool) or not isinstance(max_handoffs, int) or max_handoffs < 1:
        raise ValueError(f"handoff: max_handoffs must be an int >= 1, not {max_handoffs!r}")
    tool = HandoffTool(
        name=name if name is not None else f"transfer_to_{agent.name}",
        description=(
            description
            if description is not None
            else f"Hand the conversation to the agent {agent.name!r}."
        ),
        parameters=dict(PARAMETERS),
        execute=_unbound,
        target=agent,
        input_filter=input_filter,
        max_handoffs=max_handoffs,
    )
    tool.execute = tool.run_call
    return tool


class HandoffMessages(list[AgentMessage]):
    """What a prompt whose agent has handoffs returns: every message its chain of runs
    created, in order (a list, as without handoffs), ``agent`` (the name of the agent that
    answered: the last of the chain) and ``handoffs`` (the hops followed, in order). With an
    output type, ``output`` and ``has_output`` are those of the last run."""

    def __init__(
        self, messages: list[AgentMessage], agent: str, handoffs: Sequence[Handoff], last: Any
    ) -> None:
        super().__init__(messages)
        self.agent = agent
        self.handoffs = tuple(handoffs)
        self._last = last

    @property
    def output(self) -> Any:
        """The last run's validated output; :class:`~agentcore_fsm.core.output.OutputError`
        when it has none."""
        if not hasattr(self._last, "has_output"):
            raise OutputError("the run had no output type")
        return self._last.output

    @property
    def has_output(self) -> bool:
        return bool(getattr(self._last, "has_output", False))


# --- following a chain --------------------------------------------------------------------

Run = Callable[..., Awaitable[list[AgentMessage]]]
R = TypeVar("R", bound=Callable[..., Any])


def has_handoffs(tools: Iterable[Any]) -> bool:
    return any(isinstance(tool, HandoffTool) for tool in tools)


def follow_handoffs(agent: Any, run: R, journal: dict[str, Any], output: Any = None) -> R:
    """The run of an :class:`~agentcore_fsm.Agent` (``run``, called as the Agent calls the
    driver) made a chain that follows its handoffs; ``run`` itself when the agent has none.
    ``journal`` (the Agent's store, run id and session) gets the run id of the chain's last
    run; ``output``: the prompt's output type, asked of every run of the chain."""
    if not has_handoffs(agent.state.tools):
        return run
    name = agent.name or UNNAMED

    async def chained(
        context: AgentContext,
        config: AgentLoopConfig,
        emit: Any,
        *,
        signal: AbortSignal | None = None,
        stream_fn: StreamFn | None = None,
        on_transition: Callable[[TransitionRecord], None] | None = None,
        deps: Any = None,
        **stored: Any,
    ) -> list[AgentMessage]:
        return await _follow(
            name, run, context, config, emit, signal, stream_fn, on_transition, deps,
            journal, output,
        )  # fmt: skip

    return cast(R, chained)


async def run_with_handoffs(
    prompts: Iterable[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Any = None,
    *,
    name: str = UNNAMED,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
    on_transition: Callable[[TransitionRecord], None] | None = None,
    deps: Any = None,
    output_type: Any = None,
) -> HandoffMessages:
    """:func:`~agentcore_fsm.run_agent_loop`, following the handoffs among ``context.tools``:
    the first run is the loop's (its agent called ``name``), each handoff a run of its target
    (see the module's documentation). Returns every message of the chain, with ``agent`` and
    ``handoffs``. The runs are not journaled (an Agent with a store journals its chains)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"run_with_handoffs: name must be a non-empty str, not {name!r}")
    first = list(prompts)

    async def start(ctx: AgentContext, cfg: AgentLoopConfig, relay: Any, **kw: Any) -> Any:
        return await run_agent_loop(first, ctx, cfg, relay, output_type=output_type, **kw)

    return await _follow(
        name, start, context, config, emit, signal, stream_fn, on_transition, deps, {},
        output_type,
    )  # fmt: skip


async def _follow(
    name: str,
    run: Run,
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Any,
    signal: AbortSignal | None,
    stream_fn: StreamFn | None,
    on_transition: Callable[[TransitionRecord], None] | None,
    deps: Any,
    journal: dict[str, Any],
    output: Any,
) -> HandoffMessages:
    if signal is None:
        signal = AbortController().signal  # one signal for every run of the chain
    chain = _Chain(current_nesting(), [name])
    ended: list[Any] = []
    started = now_ms()

    async def relay(event: Any) -> None:
        chain.saw(event)
        if event.type == "agent_end":
            ended.append(event)
            event = replace(event, agent=chain.agents[-1])
        if emit is not None:
            value = emit(event)
            if inspect.isawaitable(value):
                await value

    token = _CHAIN.set(chain)
    chain.running(context.tools)
    try:
        result: Any = await run(
            context,
            config,
            relay,
            signal=signal,
            stream_fn=stream_fn,
            on_transition=on_transition,
            deps=deps,
            **journal,
        )
        messages = list(result)
        transcript = [*context.messages, *result]
        hops: list[Handoff] = []
        while True:
            pending = chain.pending
            end = ended[-1] if ended else None
            if pending is None or end is None or end.reason != "stopped" or signal.aborted:
                break
            tool, hop = pending
            target = tool.target
            seen = tool.filtered(transcript)
            chain.running(target.state.tools)
            chain.agents.append(hop.to_agent)
            hops.append(hop)
            if journal:
                journal["run_id"] = uuid.uuid4().hex  # the Agent releases the last run's session
            result = await run_agent_loop_continue(
                AgentContext(target.state.system_prompt, seen, list(target.state.tools)),
                _target_config(target, config, end, started, output),
                relay,
                signal=signal,
                stream_fn=target.stream_fn,
                on_transition=on_transition,
                deps=target.deps,
                **journal,
            )
            messages.extend(result)
            transcript = [*seen, *result]
    finally:
        _CHAIN.reset(token)
    return HandoffMessages(messages, chain.agents[-1], hops, result)


def _replaced(*args: Any) -> Any:  # the approver of a target's config is the chain's
    raise AssertionError("replaced")


def _target_config(
    target: Any, first: AgentLoopConfig, end: Any, started: int, output: Any
) -> AgentLoopConfig:
    """The config of the target's run: the target's settings, with the chain's polls,
    approver, output type and what is left of its limits."""
    own = loop_config(target, target.state, deque(), deque(), _replaced, False)
    limits = first.limits
    if limits is not None:
        seconds = limits.seconds
        if seconds is not None:  # the first run's deadline (a run past it ends with "limit")
            seconds = max(seconds - (now_ms() - started) / 1000, 1e-6)
        used = getattr(end, "usage", None)
        limits = replace(limits, used_before=used if used is not None else limits.used_before)
        limits = replace(limits, seconds=seconds)
    spec = first.output if output is None else output
    if spec is not None and not isinstance(spec, OutputSpec):
        spec = output_spec(spec)
    return replace(
        own,
        get_steering_messages=first.get_steering_messages,
        get_follow_up_messages=first.get_follow_up_messages,
        decide_approval=first.decide_approval,
        approval_timeout_s=first.approval_timeout_s,
        limits=limits,
        output=spec,
    )
