"""agentcore_fsm: an LLM agent loop as an explicit, declared, sans-IO finite-state machine.

The names a program that builds an agent needs are importable from here (``from agentcore_fsm
import Agent, AgentTool, run_agent_loop``); everything else is imported from the subpackage that
holds it, one per layer (docs/architecture.md):

* ``agentcore_fsm.core`` — the data model, the declarations and the pure machines;
* ``agentcore_fsm.persist`` — the record of a run: its codec, journals and run stores;
* ``agentcore_fsm.runtime`` — the async driver, the run functions, resume, the ports;
* ``agentcore_fsm.agent`` — the stateful :class:`Agent`;
* ``agentcore_fsm.integrations`` — providers, MCP, OpenTelemetry, DBOS (each an extra);
* ``agentcore_fsm.devtools`` — testing helpers, diagrams, replay;
* ``agentcore_fsm.cli`` — the ``agentcore-fsm`` command and its apps.

Importing the package loads the loop itself (the core and the driver). The Agent, ``tool``, the
providers, the stores and the recorder are imported when one of their names is first read from
here.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from agentcore_fsm.core.abort import AbortController
from agentcore_fsm.core.approval import ApprovalDecision, ApprovalRequest
from agentcore_fsm.core.config import (
    AgentContext,
    AgentLoopConfig,
)
from agentcore_fsm.core.limits import UsageLimits
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import (
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentcore_fsm.core.model_names import ModelSource, register_model_source
from agentcore_fsm.core.run_context import RunContext
from agentcore_fsm.core.tools import (
    AfterToolCallResult,
    AgentTool,
    AgentToolResult,
    BeforeToolCallResult,
)
from agentcore_fsm.core.version import __version__
from agentcore_fsm.runtime.driver import (
    agent_loop,
    agent_loop_continue,
    run_agent_loop,
    run_agent_loop_continue,
    set_default_stream_fn,
)

if TYPE_CHECKING:
    from agentcore_fsm.agent.agent import Agent
    from agentcore_fsm.agent.handoff import handoff
    from agentcore_fsm.core.function_tools import tool
    from agentcore_fsm.integrations.providers.anthropic import AnthropicProvider
    from agentcore_fsm.integrations.providers.faux import (
        FauxProvider,
        faux_response,
        faux_tool_call,
    )
    from agentcore_fsm.integrations.providers.models import get_model
    from agentcore_fsm.integrations.providers.openai import OpenAIProvider
    from agentcore_fsm.persist.recorder import RunRecorder, load_run
    from agentcore_fsm.persist.store import MemoryRunStore, SqliteRunStore
    from agentcore_fsm.runtime.resume import resume_run

_LAZY: dict[str, str] = {
    "Agent": "agentcore_fsm.agent.agent",
    "handoff": "agentcore_fsm.agent.handoff",
    "AnthropicProvider": "agentcore_fsm.integrations.providers.anthropic",
    "FauxProvider": "agentcore_fsm.integrations.providers.faux",
    "faux_response": "agentcore_fsm.integrations.providers.faux",
    "faux_tool_call": "agentcore_fsm.integrations.providers.faux",
    "get_model": "agentcore_fsm.integrations.providers.models",
    "OpenAIProvider": "agentcore_fsm.integrations.providers.openai",
    "RunRecorder": "agentcore_fsm.persist.recorder",
    "load_run": "agentcore_fsm.persist.recorder",
    "MemoryRunStore": "agentcore_fsm.persist.store",
    "SqliteRunStore": "agentcore_fsm.persist.store",
    "resume_run": "agentcore_fsm.runtime.resume",
    "tool": "agentcore_fsm.core.function_tools",
}
"""The public names whose module is imported on first use, and that module."""

_MOVED: dict[str, str] = {
    "AbortSignal": "agentcore_fsm.core.abort",
    "AfterToolCallContext": "agentcore_fsm.core.tools",
    "AgentBusyError": "agentcore_fsm.agent.agent",
    "AgentEndEvent": "agentcore_fsm.core.events",
    "AgentEvent": "agentcore_fsm.core.events",
    "AgentLoopTurnUpdate": "agentcore_fsm.core.config",
    "AgentMessage": "agentcore_fsm.core.messages",
    "AgentState": "agentcore_fsm.agent.agent",
    "AssistantMessageEvent": "agentcore_fsm.core.events",
    "BeforeToolCallContext": "agentcore_fsm.core.tools",
    "LimitReached": "agentcore_fsm.core.limits",
    "MachineInputError": "agentcore_fsm.core.declared",
    "PrepareNextTurnContext": "agentcore_fsm.core.config",
    "RunStore": "agentcore_fsm.persist.store",
    "RunStoreError": "agentcore_fsm.persist.store",
    "RunSuspended": "agentcore_fsm.core.approval",
    "RunUsage": "agentcore_fsm.core.limits",
    "ShouldStopAfterTurnContext": "agentcore_fsm.core.config",
    "Step": "agentcore_fsm.core.protocol",
    "StreamOptions": "agentcore_fsm.core.config",
    "ThinkingContent": "agentcore_fsm.core.messages",
    "Usage": "agentcore_fsm.core.messages",
}
"""Names that were importable from here and now live only in their subpackage (given, with a
``DeprecationWarning``, until a later release drops them): the types a program that builds an
agent rarely names, its events, hook contexts, errors and the machine's step."""


if not TYPE_CHECKING:  # type checkers see the imports above instead

    def __getattr__(name: str) -> Any:
        """Import the module of a lazily loaded public name on first use, and keep the value;
        a name that moved to its subpackage (:data:`_MOVED`) is still given, with a
        ``DeprecationWarning`` saying where to import it from."""
        module = _LAZY.get(name)
        if module is None:
            moved = _MOVED.get(name)
            if moved is None:
                raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
            warnings.warn(
                f"importing {name} from agentcore_fsm is deprecated: import it from {moved} "
                f"(the top-level package keeps the names a program that builds an agent "
                f"needs; docs/reference.md)",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(moved), name)
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def _builtin_model_sources() -> None:
    """Register the built-in providers as model sources, so that a model can be named
    ``"openai:gpt-4o-mini"`` or ``"anthropic:claude-sonnet-4-6"``
    (:mod:`agentcore_fsm.core.model_names`). Nothing is imported until a name is resolved."""

    def source(provider: str, module: str, cls: str) -> ModelSource:
        def describe(model_id: str) -> Model:
            models = importlib.import_module("agentcore_fsm.integrations.providers.models")
            described: Model = models.get_model(provider, model_id)
            return described

        def stream_fn() -> Any:  # a provider with default settings, made per run
            return getattr(importlib.import_module(module), cls)()

        return ModelSource(describe, stream_fn)

    providers = "agentcore_fsm.integrations.providers."
    register_model_source("openai", source("openai", providers + "openai", "OpenAIProvider"))
    register_model_source(
        "anthropic", source("anthropic", providers + "anthropic", "AnthropicProvider")
    )


_builtin_model_sources()


def __dir__() -> list[str]:
    """The module's names, the lazily loaded ones included (for ``dir()`` and completion)."""
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AbortController",
    "AfterToolCallResult",
    "Agent",
    "AgentContext",
    "AgentLoopConfig",
    "AgentTool",
    "AgentToolResult",
    "AnthropicProvider",
    "ApprovalDecision",
    "ApprovalRequest",
    "AssistantMessage",
    "BeforeToolCallResult",
    "FauxProvider",
    "ImageContent",
    "LoopMachine",
    "MemoryRunStore",
    "Model",
    "OpenAIProvider",
    "RunContext",
    "RunRecorder",
    "SqliteRunStore",
    "TextContent",
    "ToolCall",
    "ToolResultMessage",
    "UsageLimits",
    "UserMessage",
    "__version__",
    "agent_loop",
    "agent_loop_continue",
    "faux_response",
    "faux_tool_call",
    "get_model",
    "handoff",
    "load_run",
    "resume_run",
    "run_agent_loop",
    "run_agent_loop_continue",
    "set_default_stream_fn",
    "tool",
]
