"""agentcore_fsm: an LLM agent loop as an explicit, declared, sans-IO finite-state machine.

Every public name is importable from here (``from agentcore_fsm import run_agent_loop``); see
README.md for the tour. Importing the package loads the loop itself (messages, events, tools,
the machines and the async driver). What only some programs need is loaded on first use: the
:class:`Agent`, the providers (``OpenAIProvider``, ``AnthropicProvider``, ``FauxProvider``, the
model table) and the run recorder are imported when one of their names is first read from here
(``agentcore_fsm.Agent``, ``from agentcore_fsm import FauxProvider``); the ``testing``,
``bench``, ``diagrams`` and ``cli`` modules only when you import them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .abort import AbortController, AbortSignal
from .approval import ApprovalDecision, ApprovalRequest, RunSuspended
from .config import (
    AgentContext,
    AgentLoopConfig,
    AgentLoopTurnUpdate,
    LlmContext,
    ModelCallOptions,
    PrepareNextTurnContext,
    ShouldStopAfterTurnContext,
    StreamFn,
    StreamOptions,
    default_convert_to_llm,
)
from .declaration import Declaration, DeclarationError, load_declaration, parse_declaration
from .declared import DeclaredMachine, MachineError, MachineInputError, TransitionRecord
from .driver import (
    EventStream,
    agent_loop,
    agent_loop_continue,
    get_default_stream_fn,
    run_agent_loop,
    run_agent_loop_continue,
    set_default_stream_fn,
)
from .events import (
    AGENT_EVENT_ADAPTER,
    STREAM_EVENT_ADAPTER,
    AgentEndEvent,
    AgentEndReason,
    AgentEvent,
    AgentStartEvent,
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    AssistantMessageEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
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
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from .machine import LoopMachine
from .messages import (
    AgentMessage,
    AssistantMessage,
    Cost,
    ImageContent,
    Message,
    Model,
    ModelCost,
    StopReason,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .protocol import (
    Abort,
    ApprovalChecked,
    ApprovalDecided,
    ArgumentsPrepared,
    AwaitApproval,
    CallHook,
    CallModel,
    CheckApproval,
    ExecuteTool,
    Fail,
    FollowUpPolled,
    HookFailed,
    HookReturned,
    PollFollowUp,
    PollSteering,
    PrepareArguments,
    Proceed,
    Proceeded,
    Start,
    SteeringPolled,
    Step,
    StreamEvent,
    StreamExhausted,
    ToolFinished,
    ToolUpdated,
)
from .tool_call import ToolCallMachine
from .tools import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    ToolExecutionMode,
)

if TYPE_CHECKING:
    from .agent import Agent, AgentBusyError, AgentListener, AgentState, QueueMode
    from .journal import JournaledLoopMachine, JournalError, RunSnapshot
    from .providers.anthropic import AnthropicProvider, stream_anthropic
    from .providers.faux import FauxError, FauxProvider, faux_response, faux_tool_call
    from .providers.models import get_model, list_models, openai_compatible_model
    from .providers.openai import OpenAIProvider, stream_openai
    from .recorder import RecordedRun, RunFileError, RunRecorder, load_run
    from .resume import resume_run
    from .store import (
        JournalConflictError,
        LeaseLostError,
        MemoryRunStore,
        RunExistsError,
        RunFinishedError,
        RunOwnedError,
        RunStore,
        RunStoreError,
        SqliteRunStore,
        StoreFormatError,
        UnknownRunError,
    )

__version__ = "0.1.0"
"""The version of this package (``agentcore-fsm --version`` prints the installed one)."""

_LAZY: dict[str, str] = {
    "Agent": ".agent",
    "AgentBusyError": ".agent",
    "AgentListener": ".agent",
    "AgentState": ".agent",
    "QueueMode": ".agent",
    "AnthropicProvider": ".providers.anthropic",
    "stream_anthropic": ".providers.anthropic",
    "FauxError": ".providers.faux",
    "FauxProvider": ".providers.faux",
    "faux_response": ".providers.faux",
    "faux_tool_call": ".providers.faux",
    "get_model": ".providers.models",
    "list_models": ".providers.models",
    "openai_compatible_model": ".providers.models",
    "OpenAIProvider": ".providers.openai",
    "stream_openai": ".providers.openai",
    "RecordedRun": ".recorder",
    "RunFileError": ".recorder",
    "RunRecorder": ".recorder",
    "load_run": ".recorder",
    "JournalError": ".journal",
    "JournaledLoopMachine": ".journal",
    "RunSnapshot": ".journal",
    "resume_run": ".resume",
    "JournalConflictError": ".store",
    "LeaseLostError": ".store",
    "MemoryRunStore": ".store",
    "RunExistsError": ".store",
    "RunFinishedError": ".store",
    "RunOwnedError": ".store",
    "RunStore": ".store",
    "RunStoreError": ".store",
    "SqliteRunStore": ".store",
    "StoreFormatError": ".store",
    "UnknownRunError": ".store",
}
"""The public names whose module is imported on first use, and that module."""

if not TYPE_CHECKING:  # type checkers see the imports above instead

    def __getattr__(name: str) -> Any:
        """Import the module of a lazily loaded public name on first use, and keep the value."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    """The module's names, the lazily loaded ones included (for ``dir()`` and completion)."""
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AGENT_EVENT_ADAPTER",
    "STREAM_EVENT_ADAPTER",
    "Abort",
    "AbortController",
    "AbortSignal",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "Agent",
    "AgentBusyError",
    "AgentContext",
    "AgentEndEvent",
    "AgentEndReason",
    "AgentEvent",
    "AgentListener",
    "AgentLoopConfig",
    "AgentLoopTurnUpdate",
    "AgentMessage",
    "AgentStartEvent",
    "AgentState",
    "AgentTool",
    "AgentToolResult",
    "AnthropicProvider",
    "ApprovalChecked",
    "ApprovalDecided",
    "ApprovalDecidedEvent",
    "ApprovalDecision",
    "ApprovalRequest",
    "ApprovalRequestedEvent",
    "ArgumentsPrepared",
    "AssistantMessage",
    "AssistantMessageEvent",
    "AwaitApproval",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "CallHook",
    "CallModel",
    "CheckApproval",
    "Cost",
    "Declaration",
    "DeclarationError",
    "DeclaredMachine",
    "EventStream",
    "ExecuteTool",
    "Fail",
    "FauxError",
    "FauxProvider",
    "FollowUpPolled",
    "HookFailed",
    "HookReturned",
    "ImageContent",
    "JournalConflictError",
    "JournalError",
    "JournaledLoopMachine",
    "LeaseLostError",
    "LlmContext",
    "LoopMachine",
    "MachineError",
    "MachineInputError",
    "MemoryRunStore",
    "Message",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "Model",
    "ModelCallOptions",
    "ModelCost",
    "OpenAIProvider",
    "PollFollowUp",
    "PollSteering",
    "PrepareArguments",
    "PrepareNextTurnContext",
    "Proceed",
    "Proceeded",
    "QueueMode",
    "RecordedRun",
    "RunExistsError",
    "RunFileError",
    "RunFinishedError",
    "RunOwnedError",
    "RunRecorder",
    "RunSnapshot",
    "RunStore",
    "RunStoreError",
    "RunSuspended",
    "ShouldStopAfterTurnContext",
    "SqliteRunStore",
    "Start",
    "SteeringPolled",
    "Step",
    "StopReason",
    "StoreFormatError",
    "StreamDone",
    "StreamError",
    "StreamEvent",
    "StreamExhausted",
    "StreamFn",
    "StreamOptions",
    "StreamStart",
    "TextContent",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ThinkingContent",
    "ThinkingDelta",
    "ThinkingEnd",
    "ThinkingLevel",
    "ThinkingStart",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallMachine",
    "ToolCallStart",
    "ToolExecutionEndEvent",
    "ToolExecutionMode",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolFinished",
    "ToolResultMessage",
    "ToolUpdated",
    "TransitionRecord",
    "TurnEndEvent",
    "TurnStartEvent",
    "UnknownRunError",
    "Usage",
    "UserMessage",
    "__version__",
    "agent_loop",
    "agent_loop_continue",
    "default_convert_to_llm",
    "faux_response",
    "faux_tool_call",
    "get_default_stream_fn",
    "get_model",
    "list_models",
    "load_declaration",
    "load_run",
    "openai_compatible_model",
    "parse_declaration",
    "resume_run",
    "run_agent_loop",
    "run_agent_loop_continue",
    "set_default_stream_fn",
    "stream_anthropic",
    "stream_openai",
]
