"""The configuration of an Agent's run: its settings, its state and its queues made one
:class:`~agentcore_fsm.core.config.AgentLoopConfig` when a run starts (changing an attribute of
the agent applies from the next run). Moved out of ``agent.py``, which keeps the Agent's own
methods; the run policies an Agent takes (``tool_policy``, ``fallback``, ``compaction``; its
``limits`` are combined per run by :mod:`agentcore_fsm.agent.limits`) are passed through here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from agentcore_fsm.agent.queues import dequeue
from agentcore_fsm.agent.state import AgentState
from agentcore_fsm.core.config import MODEL_CALL_OPTIONS, AgentLoopConfig
from agentcore_fsm.core.messages import AgentMessage

__all__ = ["loop_config"]


def loop_config(
    agent: Any,
    state: AgentState,
    steering: deque[AgentMessage],
    follow_ups: deque[AgentMessage],
    decide_approval: Callable[..., Any],
    skip_initial_steering: bool,
) -> AgentLoopConfig:
    """The config of a run of ``agent`` (its public settings), with the model and reasoning of
    ``state``, polls that take from the ``steering`` and ``follow_ups`` queues (the first
    steering poll answers nothing when ``skip_initial_steering``: ``continue_`` took those
    messages as its prompt) and the agent's approver ``decide_approval``."""
    steering_mode, follow_up_mode = agent.steering_mode, agent.follow_up_mode
    skip = skip_initial_steering

    def get_steering_messages() -> list[AgentMessage]:
        nonlocal skip
        if skip:
            skip = False
            return []
        return dequeue(steering, steering_mode)

    def get_follow_up_messages() -> list[AgentMessage]:
        return dequeue(follow_ups, follow_up_mode)

    level = state.thinking_level
    options = {name: getattr(agent.options, name) for name in MODEL_CALL_OPTIONS}
    options["reasoning"] = None if level == "off" else level
    return AgentLoopConfig(
        model=state.model,
        convert_to_llm=agent.convert_to_llm,
        transform_context=agent.transform_context,
        get_api_key=agent.get_api_key,
        **options,
        tool_execution=agent.tool_execution,
        before_tool_call=agent.before_tool_call,
        after_tool_call=agent.after_tool_call,
        prepare_next_turn=agent.prepare_next_turn,
        should_stop_after_turn=agent.should_stop_after_turn,
        get_steering_messages=get_steering_messages,
        get_follow_up_messages=get_follow_up_messages,
        decide_approval=decide_approval,
        approval_timeout_s=agent.approval_timeout_s,
        tool_policy=agent.tool_policy,
        fallback=agent.fallback,
        compaction=agent.compaction,
    )
