"""Agents that call agents (docs/multi-agent.md): an agent, or a plain run configuration, as a
tool whose call runs a nested run, a sub-machine of that call.

* :func:`agent_tool` (what :meth:`Agent.as_tool` calls) and :func:`run_tool` make a
  :class:`NestedAgentTool`. The model calls it with a prompt (``{"prompt": "..."}``), or with
  the fields of ``input_type`` (a pydantic model; the prompt is then the instance's JSON).
  Each call runs the inner agent's loop with its own system prompt, tools, model and stream
  function; its final answer is the tool result (with ``output_type``: the validated value, as
  JSON, docs/output.md). The inner transcript is fresh for every call, or, with
  ``keep_history=True``, kept by the tool across its calls (such calls then run one at a
  time). The :class:`~agentcore_fsm.Agent` the tool was made from is a template: its state,
  listeners and queues are not touched, so one agent may serve many calls at once.
* **Events**: every inner event reaches the outer run's listeners as a ``tool_execution_update``
  of the call, its ``partial_result.details`` a
  :class:`~agentcore_fsm.core.nesting.NestedEvent` (path of call ids, agents, the event) and its
  ``partial_result.content`` the inner answer's text so far. Deeper events are passed up with
  the path extended, so the outermost listeners see every event of the tree once.
* **One budget**: a run with usage limits hands each nested run what is left of them (its
  ``used_before`` is the outer run's usage so far, its ``seconds`` the time left to the outer
  deadline); when the nested run ends, what it used is the tool result's ``run_usage``, which
  the outer run adds to its own counters (so its later checks, and its later nested runs, count
  it), and its tokens and cost are the result's ``usage``. Nested runs that run at the same
  time each start from what was left when they started.
* **One abort**: the inner run's signal fires with the outer call's.
* **One approver**: an inner call that needs approval is asked of the outer run's approver
  (``decide_approval``, or the outer Agent's ``approve``/``deny``) as a
  :class:`~agentcore_fsm.core.nesting.NestedApprovalRequest` with the path of calls; the
  decision goes back to the inner run.
* **Depth**: a call that would nest deeper than the tool's ``max_depth`` (default 3) is
  answered with an error result naming the path of agents; the inner configuration is checked
  when the outer run starts (``check_nested``, called by the driver).
"""

from __future__ import annotations

import inspect
import json
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

import anyio
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from agentcore_fsm.agent.nested_record import child_record, observed_by, run_recorded
from agentcore_fsm.agent.run_config import loop_config
from agentcore_fsm.core.abort import AbortController, AbortSignal
from agentcore_fsm.core.approval import NO_APPROVER_TEXT, ApprovalDecision, ApprovalRequest
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, StreamFn
from agentcore_fsm.core.limits import RunUsage, UsageLimits
from agentcore_fsm.core.messages import (
    AgentMessage,
    Cost,
    TextContent,
    Usage,
    UserMessage,
    now_ms,
)
from agentcore_fsm.core.nesting import (
    DEFAULT_MAX_DEPTH,
    NestedEvent,
    Nesting,
    agents_text,
    current_nesting,
    depth_error_text,
    enter_nesting,
    nested_event_of,
    nested_request,
)
from agentcore_fsm.core.output import OutputSpec, output_spec
from agentcore_fsm.core.run_context import RunScope, current_scope
from agentcore_fsm.core.schema import compile_schema
from agentcore_fsm.core.tools import AgentTool, AgentToolResult, ToolUpdateCallback
from agentcore_fsm.runtime.driver import resolve_stream_fn, run_agent_loop

__all__ = ["NestedAgentTool", "SubRun", "agent_tool", "check_inner", "run_tool"]

PROMPT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "description": "What to ask the agent."}},
    "required": ["prompt"],
    "additionalProperties": False,
}
"""The parameters of an agent as a tool without ``input_type``: one prompt string."""

NO_TIME_TEXT = "agent {agent!r} was not called: the run's deadline has passed"
ENDED_TEXT = "agent {agent!r} ended with {reason}: {detail}"


@dataclass(eq=False)
class SubRun:
    """What a nested run is made of: the inner agent's system prompt, tools, stream function,
    deps and the config of its loop (without an approver or limits: each call sets the outer
    run's), read when a call starts. Made by :func:`agent_tool` (from an Agent, read anew at
    every call) or :func:`run_tool` (fixed)."""

    source: Any
    """The Agent the run is made from, or None (the fields below are used)."""
    config: AgentLoopConfig | None = None
    system_prompt: str = ""
    tools: list[AgentTool] = field(default_factory=list)
    stream_fn: StreamFn | None = None
    deps: Any = None

    def parts(self) -> tuple[AgentLoopConfig, str, list[AgentTool], StreamFn | None, Any]:
        """The config (approver and limits still the source's), system prompt, tools, stream
        function and deps of the next run."""
        agent = self.source
        if agent is None:
            assert self.config is not None
            return self.config, self.system_prompt, list(self.tools), self.stream_fn, self.deps
        state = agent.state
        config = loop_config(agent, state, deque(), deque(), _no_approver, False)
        return config, state.system_prompt, list(state.tools), agent.stream_fn, agent.deps


async def _no_approver(request: ApprovalRequest, signal: AbortSignal) -> Any:
    return ApprovalDecision(approved=False, reason=NO_APPROVER_TEXT, decided_by="no approver")


@dataclass(eq=False)
class NestedAgentTool(AgentTool):
    """An agent as a tool (see the module's documentation): an
    :class:`~agentcore_fsm.core.tools.AgentTool` whose ``execute`` runs a nested run."""

    sub: SubRun | None = None
    output: OutputSpec | None = None
    input_type: type[BaseModel] | None = None
    keep_history: bool = False
    max_depth: int = DEFAULT_MAX_DEPTH
    resumes_nested: ClassVar[bool] = True
    """A call that was running when its journaled run's process stopped runs again on resume:
    it resumes its nested run from that run's own record (agent/nested_record.py)."""
    history: list[AgentMessage] = field(default_factory=list)
    """With ``keep_history``: the inner transcript so far (every call's messages)."""
    _lock: anyio.Lock | None = field(default=None, init=False, repr=False)
    _checking: bool = field(default=False, init=False, repr=False)

    # --- the check when the outer run starts ------------------------------------------------

    def check_nested(self, agents: tuple[str, ...] = ()) -> None:
        """Check the inner configuration: a stream function (or a model that names one),
        tools with distinct names and valid parameter schemas, and the same of every agent
        tool among them (an agent reaching itself is checked once). Raises ``ValueError``
        naming the path of agents and the problem. The driver calls this when a run that has
        this tool starts (runtime/nested.py)."""
        if self._checking:
            return  # an agent that reaches itself: checked already (the depth rule bounds it)
        here = (*agents, self.name)
        self._checking = True
        try:
            assert self.sub is not None
            config, _, tools, stream_fn, _ = self.sub.parts()
            check_inner(f"inner agent {agents_text(here)}", stream_fn, config.model, tools, here)
        finally:
            self._checking = False

    # --- a call ------------------------------------------------------------------------------

    async def run_call(
        self,
        tool_call_id: str,
        args: Any,
        signal: AbortSignal,
        on_update: ToolUpdateCallback,
    ) -> AgentToolResult:
        """One call: the nested run, its events passed up, its answer as the result."""
        position = current_nesting().child(tool_call_id, self.name)
        if position.depth > self.max_depth:
            return _error(depth_error_text(position.agents, self.max_depth))
        if not self.keep_history:
            return await self._run(position, args, signal, on_update)
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:  # the outer run's usage is read once the call may run
            return await self._run(position, args, signal, on_update)

    def prompt_of(self, args: Any) -> str:
        """The nested run's prompt for a call's (validated) arguments."""
        return self._prompt(args)

    def result_of(
        self, messages: list[AgentMessage], reason: str | None, agents: tuple[str, ...]
    ) -> AgentToolResult:
        """The call's result from the nested run's messages and how it ended (a durable
        engine's nested run, docs/durable.md); ``agents``: the path of agents down to it."""
        end = None if reason is None else _Ended(reason)
        return self._result(messages, end, Nesting(agents=agents))

    def _prompt(self, args: Any) -> str:
        if isinstance(args, BaseModel):
            return args.model_dump_json()
        return str(args["prompt"]) if isinstance(args, dict) else str(args)

    async def _run(
        self,
        position: Nesting,
        args: Any,
        signal: AbortSignal,
        on_update: ToolUpdateCallback,
    ) -> AgentToolResult:
        scope = current_scope()
        outer = scope.config if scope is not None else None
        limits = _inherited_limits(outer, scope)
        if isinstance(limits, bool):
            return _error(NO_TIME_TEXT.format(agent=self.name))
        assert self.sub is not None
        config, system_prompt, tools, stream_fn, deps = self.sub.parts()
        call_id, name = position.path[-1], self.name
        config = replace(
            config, decide_approval=_forwarder(outer, call_id, name), limits=limits, output=None
        )
        history = list(self.history) if self.keep_history else []
        context = AgentContext(system_prompt, history, tools)
        controller = AbortController()
        unlink = signal.add_callback(lambda: controller.abort(signal.reason))
        if signal.aborted:
            controller.abort(signal.reason)
        ended: list[Any] = []
        spent: list[RunUsage] = []
        finals: list[RunUsage] = []  # a nested run read from its record: its counters
        deliver = _deliverer(call_id, name, on_update, ended, spent, limits)
        spec = self.output
        record = child_record(scope, position) if scope is not None else None
        prompt = [UserMessage(content=self._prompt(args))]
        try:
            with enter_nesting(position):
                if record is None:
                    messages = await run_agent_loop(
                        prompt,
                        context,
                        config,
                        deliver,
                        signal=controller.signal,
                        stream_fn=stream_fn,
                        deps=deps,
                        output_type=spec,
                        **observed_by(scope),
                    )
                else:
                    messages = await run_recorded(
                        record,
                        prompt,
                        context,
                        config,
                        deliver,
                        controller.signal,
                        stream_fn,
                        deps,
                        spec,
                        ended,
                        finals,
                        observed_by(scope),
                    )
        finally:
            unlink()
        if self.keep_history:
            self.history.extend(messages)
        if finals and limits is not None and not spent:
            spent.append(_consumed(finals[0], limits.used_before))
        result = self._result(messages, ended[0] if ended else None, position)
        if spent:  # counted by the outer run when the result arrives (one budget)
            result.run_usage = spent[0]
        return result

    def _result(self, messages: list[AgentMessage], end: Any, position: Nesting) -> AgentToolResult:
        reason = getattr(end, "reason", "error")
        usage = _usage_of(messages)
        details: dict[str, Any] = {"agents": list(position.agents), "reason": reason}
        if self.output is not None:
            has_output = getattr(messages, "has_output", False)
            if has_output:
                value = to_jsonable_python(messages.output)  # type: ignore[attr-defined]
                details["output"] = value
                text = json.dumps(value, ensure_ascii=False)
                return AgentToolResult(
                    content=[TextContent(text=text)], details=details, usage=usage
                )
        if reason in ("completed", "stopped") and self.output is None:
            return AgentToolResult(
                content=[TextContent(text=_answer_text(messages))], details=details, usage=usage
            )
        detail = _failure_text(messages) or "no answer"
        if self.output is not None and reason in ("completed", "stopped"):
            detail = "no valid output"
        return AgentToolResult(
            content=[
                TextContent(text=ENDED_TEXT.format(agent=self.name, reason=reason, detail=detail))
            ],
            details=details,
            usage=usage,
            is_error=True,
        )


def check_inner(
    where: str,
    stream_fn: StreamFn | None,
    model: Any,
    tools: Iterable[Any],
    agents: tuple[str, ...],
) -> None:
    """Check the configuration of an agent another run starts (a nested run's, a handoff
    target's): a stream function (or a ``model`` that names one), tools that are
    ``AgentTool``s with distinct names and valid parameter schemas, and, through their own
    ``check_nested``, the agents those tools start (``agents``: the path down to this one).
    Raises ``ValueError`` starting with ``where``."""
    try:
        resolve_stream_fn(stream_fn, model)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    seen: set[str] = set()
    for tool in tools:
        if not isinstance(tool, AgentTool):
            raise ValueError(f"{where}: a tool must be an AgentTool, not {type(tool).__name__}")
        if tool.name in seen:
            raise ValueError(f"{where}: two tools are named {tool.name!r}")
        seen.add(tool.name)
        if isinstance(tool.parameters, dict):
            try:
                compile_schema(tool.parameters, tool.name)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        check = getattr(tool, "check_nested", None)
        if check is not None:
            check(agents)


@dataclass(frozen=True, slots=True)
class _Ended:
    """How a nested run read back from a durable engine ended (what ``agent_end`` says)."""

    reason: str


def _error(text: str) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=text)], is_error=True)


def _answer_text(messages: Sequence[AgentMessage]) -> str:
    for message in reversed(messages):
        if getattr(message, "role", None) == "assistant":
            return "".join(
                block.text for block in message.content if getattr(block, "type", "") == "text"
            )
    return ""


def _failure_text(messages: Sequence[AgentMessage]) -> str:
    for message in reversed(messages):
        if getattr(message, "role", None) == "assistant":
            return str(getattr(message, "error_message", None) or "")
    return ""


def _usage_of(messages: Iterable[AgentMessage]) -> Usage | None:
    """The tokens and cost of a nested run: its responses' and its tools' (nested runs')."""
    total: Usage | None = None
    for message in messages:
        usage = getattr(message, "usage", None)
        if usage is None:
            continue
        if total is None:
            total = Usage(cost=Cost())
        total.input += usage.input
        total.output += usage.output
        total.cache_read += usage.cache_read
        total.cache_write += usage.cache_write
        total.total_tokens += usage.total_tokens
        cost, add = total.cost, usage.cost
        cost.input += add.input
        cost.output += add.output
        cost.cache_read += add.cache_read
        cost.cache_write += add.cache_write
        cost.total += add.total
    return total


# --- one budget -----------------------------------------------------------------------------


def _inherited_limits(
    outer: AgentLoopConfig | None, scope: RunScope | None
) -> UsageLimits | Literal[False] | None:
    """The limits of a nested run: what is left of the outer run's (None: it has none;
    False: its deadline has passed)."""
    limits = outer.limits if outer is not None else None
    if limits is None or scope is None:
        return None
    used = scope.run_usage  # with what its finished nested runs used (their run_usage)
    if used is None:
        return None
    seconds = limits.seconds
    if seconds is not None:
        seconds -= (now_ms() - used.started_at) / 1000
        if seconds <= 0:
            return False
    return replace(limits, used_before=used, seconds=seconds)


def _consumed(final: RunUsage, before: RunUsage | None) -> RunUsage:
    """What a nested run used (its own nested runs' included): its counters less where they
    started."""
    base = before if before is not None else RunUsage()
    return RunUsage(
        requests=final.requests - base.requests,
        turns=final.turns - base.turns,
        tool_calls=final.tool_calls - base.tool_calls,
        input_tokens=final.input_tokens - base.input_tokens,
        output_tokens=final.output_tokens - base.output_tokens,
        cost_usd=final.cost_usd - base.cost_usd,
    )


# --- events and approvals -------------------------------------------------------------------


def _deliverer(
    call_id: str,
    agent: str,
    on_update: ToolUpdateCallback,
    ended: list[Any],
    spent: list[RunUsage],
    limits: UsageLimits | None,
) -> Any:
    """The inner run's ``emit``: each event passed up as a progress update of the call."""
    content: list[Any] = []

    def deliver(event: Any) -> None:
        nonlocal content
        nested = nested_event_of(event)
        if nested is not None:
            on_update(AgentToolResult(content=content, details=nested.under(call_id, agent)))
            return
        kind = event.type
        if kind == "message_update" or kind == "message_end":
            message = event.message
            if getattr(message, "role", None) == "assistant":
                text = "".join(b.text for b in message.content if getattr(b, "type", "") == "text")
                if text and (not content or content[0].text != text):
                    content = [TextContent(text=text)]
        elif kind == "agent_end":
            ended.append(event)
            scope = current_scope()  # the inner run's
            if scope is not None and limits is not None:
                final = scope.run_usage
                if final is not None:
                    spent.append(_consumed(final, limits.used_before))
        tagged = NestedEvent((call_id,), (agent,), event)
        on_update(AgentToolResult(content=content, details=tagged))

    return deliver


def _forwarder(outer: AgentLoopConfig | None, call_id: str, agent: str) -> Any:
    """The inner run's ``decide_approval``: the request, with the path, to the outer run's."""
    decide = outer.decide_approval if outer is not None else None

    async def forward(request: ApprovalRequest, signal: AbortSignal) -> Any:
        if decide is None:
            return await _no_approver(request, signal)
        value = decide(nested_request(request, call_id, agent), signal)
        if inspect.isawaitable(value):
            value = await value
        return value

    return forward


# --- making one -----------------------------------------------------------------------------


def _make(
    sub: SubRun,
    name: str,
    description: str,
    input_type: type[BaseModel] | None,
    output_type: Any,
    keep_history: bool,
    max_depth: int,
) -> NestedAgentTool:
    if input_type is not None and not (
        isinstance(input_type, type) and issubclass(input_type, BaseModel)
    ):
        raise TypeError(f"as_tool: input_type must be a pydantic model class, not {input_type!r}")
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
        raise ValueError(f"as_tool: max_depth must be an int >= 1, not {max_depth!r}")
    if not isinstance(keep_history, bool):
        raise TypeError(f"as_tool: keep_history must be a bool, not {keep_history!r}")
    spec: OutputSpec | None = None
    if output_type is not None:
        spec = output_type if isinstance(output_type, OutputSpec) else output_spec(output_type)
    tool = NestedAgentTool(
        name=name,
        description=description,
        parameters=input_type if input_type is not None else dict(PROMPT_PARAMETERS),
        execute=_unbound,
        sub=sub,
        output=spec,
        input_type=input_type,
        keep_history=keep_history,
        max_depth=max_depth,
    )
    tool.execute = tool.run_call
    return tool


async def _unbound(*args: Any) -> AgentToolResult:  # replaced by the tool's own run_call
    raise AssertionError("not bound")


def agent_tool(
    agent: Any,
    name: str,
    description: str,
    *,
    input_type: type[BaseModel] | None = None,
    output_type: Any = None,
    keep_history: bool = False,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> NestedAgentTool:
    """``agent`` (an :class:`~agentcore_fsm.Agent`) as a tool named ``name`` (see
    :meth:`Agent.as_tool` and the module's documentation). The agent's settings are read at
    each call."""
    return _make(SubRun(agent), name, description, input_type, output_type, keep_history, max_depth)


def run_tool(
    config: AgentLoopConfig,
    name: str,
    description: str,
    *,
    system_prompt: str = "",
    tools: Iterable[AgentTool] = (),
    stream_fn: StreamFn | None = None,
    deps: Any = None,
    input_type: type[BaseModel] | None = None,
    output_type: Any = None,
    keep_history: bool = False,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> NestedAgentTool:
    """A run configuration (``config``, with ``system_prompt``, ``tools``, ``stream_fn`` and
    ``deps``, as :func:`~agentcore_fsm.run_agent_loop` takes them) as a tool named ``name``:
    each call runs that loop, nested. ``config.decide_approval`` and ``config.limits`` are
    replaced by the outer run's (see the module's documentation)."""
    if not isinstance(config, AgentLoopConfig):
        raise TypeError(f"run_tool: config must be an AgentLoopConfig, not {config!r}")
    sub = SubRun(None, config, system_prompt, list(tools), stream_fn, deps)
    return _make(sub, name, description, input_type, output_type, keep_history, max_depth)
