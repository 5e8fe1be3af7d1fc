"""The stateful layer: :class:`Agent` (a conversation, its listeners, queues and sessions)."""

from agentcore_fsm.agent.agent import Agent, AgentBusyError, AgentListener, AgentState, QueueMode
from agentcore_fsm.agent.handoff import handoff

__all__ = ["Agent", "AgentBusyError", "AgentListener", "AgentState", "QueueMode", "handoff"]
