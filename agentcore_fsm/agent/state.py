"""What an agent holds, and how each event of a run changes it (the *reduction*).

:class:`AgentState` is the conversation so far and the model configuration of the next run,
plus the fields a run maintains (``is_streaming``, ``streaming_message``, the pending tool calls
and approvals, ``error_message``). Those are read-only from outside: they change only through
the methods here, which the :class:`~agentcore_fsm.agent.agent.Agent` calls — :meth:`apply` for
each event of a run, :meth:`begin_run` and :meth:`end_run` around it, :meth:`clear` for
``reset()`` and :meth:`load_session` when a stored session is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, get_args

from agentcore_fsm.agent.limits import check_limits, run_limits
from agentcore_fsm.core.approval import ApprovalRequest
from agentcore_fsm.core.boundary import coerce_messages
from agentcore_fsm.core.config import AgentLoopConfig
from agentcore_fsm.core.limit_actions import LIMIT_TEXT
from agentcore_fsm.core.limits import RunUsage, UsageLimits
from agentcore_fsm.core.messages import (
    AgentMessage,
    AssistantMessage,
    Model,
    TextContent,
    ThinkingLevel,
    ToolResultMessage,
)
from agentcore_fsm.core.model_names import resolve_model
from agentcore_fsm.core.tools import AgentTool

__all__ = ["ABORTED_TEXT", "REQUEST_ABORTED", "AgentState", "UsageLimits", "check_choice"]

REQUEST_ABORTED = "Request was aborted"
ABORTED_TEXT = "Operation aborted"

_THINKING_LEVELS: frozenset[str] = frozenset(get_args(ThinkingLevel))


def check_choice(what: str, value: str, allowed: frozenset[str]) -> str:
    """``value`` if it is one of ``allowed``; else ``ValueError`` naming ``what`` and the
    choices."""
    if not isinstance(value, str) or value not in allowed:
        choices = ", ".join(repr(v) for v in sorted(allowed))
        raise ValueError(f"{what} must be one of {choices}; got {value!r}")
    return value


def _check_model(value: Any) -> Model:
    # a Model, or a name such as "openai:gpt-4o-mini" (agentcore_fsm.core.model_names)
    return resolve_model(value)


def _check_tools(value: Any) -> list[AgentTool]:
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise TypeError(f"tools must be a list of AgentTool, not {type(value).__name__}")
    tools = list(value)
    for i, tool in enumerate(tools):
        if not isinstance(tool, AgentTool):
            raise TypeError(f"tools[{i}] must be an AgentTool, not {type(tool).__name__}")
    return tools


class AgentState:
    """What an agent holds: its configuration for the model and the conversation so far.

    ``messages`` and ``tools`` are the live lists (append to them between runs as you like);
    assigning a list stores a copy. ``system_prompt`` must be a str, ``model`` a ``Model``,
    ``thinking_level`` one of the thinking levels and ``tools`` AgentTools: a wrong value is
    refused when it is set (``TypeError``/``ValueError`` naming the field). ``is_streaming``,
    ``streaming_message``, ``pending_tool_calls``, ``pending_approvals`` and ``error_message``
    are maintained by the agent and read-only. ``pending_tool_calls`` returns a fresh set of
    ids on every read.
    """

    __slots__ = (
        "_error_message",
        "_is_streaming",
        "_limits",
        "_messages",
        "_model",
        "_pending_approvals",
        "_pending_tool_calls",
        "_streaming_message",
        "_system_prompt",
        "_thinking_level",
        "_tools",
        "_usage",
    )

    def __init__(
        self,
        system_prompt: str,
        model: Model,
        thinking_level: ThinkingLevel,
        tools: Iterable[AgentTool],
        messages: Iterable[AgentMessage],
        limits: UsageLimits | None = None,
    ) -> None:
        self.limits = limits
        self._usage = RunUsage()
        self.system_prompt = system_prompt
        self.model = model
        self.thinking_level = thinking_level
        self.tools = tools
        self.messages = messages
        self._is_streaming = False
        self._streaming_message: AgentMessage | None = None
        self._pending_tool_calls: set[str] = set()
        self._pending_approvals: dict[str, ApprovalRequest] = {}
        self._error_message: str | None = None

    # --- configuration of the next run ------------------------------------------------------

    @property
    def limits(self) -> UsageLimits | None:
        """The session's usage limits (docs/policies.md#an-agents-limits): they bound all the
        agent's runs together, counted from :attr:`usage`. None: no session limits."""
        return self._limits

    @limits.setter
    def limits(self, value: UsageLimits | None) -> None:
        self._limits = check_limits("limits", value)

    @property
    def usage(self) -> RunUsage:
        """What the session's runs used so far, as their usage limits count it (the counters
        the last run with limits ended with; a run without limits counts nothing). Assign a
        ``RunUsage()`` to start counting afresh."""
        return self._usage

    @usage.setter
    def usage(self, value: RunUsage) -> None:
        if not isinstance(value, RunUsage):
            raise TypeError(f"usage must be a RunUsage, not {type(value).__name__}")
        self._usage = value

    def limited(self, config: AgentLoopConfig, prompt: UsageLimits | None) -> AgentLoopConfig:
        """``config`` with the limits of the next run: the session's and the prompt's
        ``prompt`` (see :mod:`agentcore_fsm.agent.limits`)."""
        limits = run_limits(self._limits, prompt, self._usage)
        if limits is not None:
            config.limits = limits
        return config

    @property
    def system_prompt(self) -> str:
        """The system prompt of the next run."""
        return self._system_prompt

    @system_prompt.setter
    def system_prompt(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"system_prompt must be a str, not {type(value).__name__}")
        self._system_prompt = value

    @property
    def model(self) -> Model:
        """The model of the next run."""
        return self._model

    @model.setter
    def model(self, value: Model) -> None:
        self._model = _check_model(value)

    @property
    def thinking_level(self) -> ThinkingLevel:
        """The reasoning level of the next run (``"off"`` sends no reasoning option)."""
        return self._thinking_level

    @thinking_level.setter
    def thinking_level(self, value: ThinkingLevel) -> None:
        check_choice("thinking_level", value, _THINKING_LEVELS)
        self._thinking_level = value

    @property
    def tools(self) -> list[AgentTool]:
        """The live list of tools (a run uses a copy taken when it starts)."""
        return self._tools

    @tools.setter
    def tools(self, value: Iterable[AgentTool]) -> None:
        self._tools = _check_tools(value)

    @property
    def messages(self) -> list[AgentMessage]:
        """The live transcript. During a run it grows only through ``message_end`` events."""
        return self._messages

    @messages.setter
    def messages(self, value: Iterable[AgentMessage]) -> None:
        self._messages = coerce_messages(list(value), "messages")

    # --- maintained by the agent -------------------------------------------------------------

    @property
    def is_streaming(self) -> bool:
        """True from the start of a run until its ``agent_end`` listeners have all returned."""
        return self._is_streaming

    @property
    def streaming_message(self) -> AgentMessage | None:
        """The message between its ``message_start`` and ``message_end`` (else None)."""
        return self._streaming_message

    @property
    def pending_tool_calls(self) -> set[str]:
        """Ids of the tool calls that have started and not yet ended (a copy)."""
        return set(self._pending_tool_calls)

    @property
    def pending_approvals(self) -> list[ApprovalRequest]:
        """The tool calls waiting for approval, in the order they asked (a copy): those of the
        running run, or of a suspended or interrupted one loaded with the session. Decide with
        :meth:`Agent.approve` / :meth:`Agent.deny`."""
        return list(self._pending_approvals.values())

    def awaits_approval(self, call_id: str) -> bool:
        """True when tool call ``call_id`` is among :attr:`pending_approvals`."""
        return call_id in self._pending_approvals

    @property
    def error_message(self) -> str | None:
        """The error of the last run: a failed or aborted assistant message's
        ``error_message``, or ``"Request was aborted"``; None when the run went well."""
        return self._error_message

    # --- the reduction -----------------------------------------------------------------------

    def apply(self, event: Any) -> None:
        """Update the state for one event of a run (before the listeners see it)."""
        kind = event.type
        if kind == "message_update" or kind == "message_start":
            self._streaming_message = event.message
        elif kind == "message_end":
            self._streaming_message = None
            self._messages.append(event.message)
        elif kind == "tool_execution_start":
            self._pending_tool_calls.add(event.tool_call_id)
        elif kind == "tool_execution_end":
            self._pending_tool_calls.discard(event.tool_call_id)
        elif kind == "approval_requested":
            self._pending_approvals[event.tool_call_id] = ApprovalRequest(
                tool_call_id=event.tool_call_id,
                tool_name=event.tool_name,
                args=event.args,
                reason=event.reason,
            )
        elif kind == "approval_decided":
            self._pending_approvals.pop(event.tool_call_id, None)
        elif kind == "turn_end":
            message = event.message
            if getattr(message, "role", None) == "assistant" and message.error_message:
                self._error_message = message.error_message
        elif kind == "agent_end":
            self._streaming_message = None
            if event.reason == "aborted" and self._error_message is None:
                self._error_message = REQUEST_ABORTED
            usage = getattr(event, "usage", None)
            if usage is not None:  # a run with limits: its counters, from the session's on
                self._usage = usage
            limit = getattr(event, "limit", None)
            if limit is not None and self._error_message is None:
                self._error_message = LIMIT_TEXT.format(text=limit.text())

    def begin_run(self) -> None:
        """A run starts: streaming, no message in flight, no error yet."""
        self._is_streaming = True
        self._streaming_message = None
        self._error_message = None

    def end_run(self, suspended: bool) -> None:
        """A run ended (or was suspended, keeping its calls that wait for approval). A run cut
        off before it could close itself leaves no tool call of the transcript unanswered."""
        if not suspended:
            _answer_dangling_calls(self._messages)
            self._pending_approvals = {}
        self._is_streaming = False
        self._streaming_message = None
        self._pending_tool_calls = set()

    def clear(self) -> None:
        """``Agent.reset()``: no transcript and no run's fields; the configuration stays."""
        self._messages = []
        self._is_streaming = False
        self._streaming_message = None
        self._pending_tool_calls = set()
        self._error_message = None

    def load_session(
        self, messages: Iterable[AgentMessage], pending_approvals: Iterable[ApprovalRequest]
    ) -> None:
        """The transcript of a stored session, and the approvals its unfinished run waits for."""
        self._messages = list(messages)
        self._pending_approvals = {r.tool_call_id: r for r in pending_approvals}

    def __repr__(self) -> str:
        return (
            f"AgentState(model={self._model.id!r}, thinking_level={self._thinking_level!r}, "
            f"messages={len(self._messages)}, tools={[t.name for t in self._tools]!r}, "
            f"is_streaming={self._is_streaming}, error_message={self._error_message!r})"
        )


def _answer_dangling_calls(messages: list[AgentMessage]) -> None:
    """Answer, with ``Operation aborted``, every tool call of the transcript's last answerable
    assistant message that has no result: the transcript stays valid for the next run even
    when a run was cut off before it could close itself (a cancellation whose closing events
    could not all be delivered)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if not isinstance(message, AssistantMessage):
            continue
        if message.stop_reason not in ("toolUse", "stop", "length"):
            return
        answered = {m.tool_call_id for m in messages[i + 1 :] if isinstance(m, ToolResultMessage)}
        for call in message.tool_calls():
            if call.id not in answered:
                messages.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        tool_name=call.name,
                        content=[TextContent(text=ABORTED_TEXT)],
                        is_error=True,
                    )
                )
        return
