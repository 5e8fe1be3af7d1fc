"""The stateful layer: :class:`Agent` (a conversation, its listeners, queues and sessions)."""

from agentcore_fsm.agent.agent import Agent, AgentBusyError, AgentListener, AgentState, QueueMode

__all__ = ["Agent", "AgentBusyError", "AgentListener", "AgentState", "QueueMode"]
