"""How each provider asks for a run's structured output (docs/output.md#modes).

The loop gives the provider the run's :class:`~agentcore_fsm.core.output.OutputSpec` on the
call's context (``LlmContext.output``, its mode resolved; in modes ``tool`` and ``forced_tool``
the final-answer tool is already among the context's tools). Here is what each mode adds to a
request body:

===============  ==========================================  ===============================
mode             OpenAI Chat Completions                     Anthropic Messages
===============  ==========================================  ===============================
``tool``         nothing (the final tool is one of the tools)  nothing
``native``       ``response_format``: ``json_schema`` of the   refused: a ``ValueError`` (the
                 answer (``strict`` false: the schema is       call ends with an error); use
                 pydantic's, not OpenAI's strict subset)       ``tool`` or ``forced_tool``
``forced_tool``  ``tool_choice``: the final tool when it is    ``tool_choice``: the final tool
                 the only tool, ``"required"`` otherwise       when it is the only tool,
                                                               ``any`` otherwise; ``auto`` with
                                                               extended thinking (which refuses
                                                               a forced tool)
===============  ==========================================  ===============================
"""

from __future__ import annotations

from typing import Any

from agentcore_fsm.core.config import LlmContext

__all__ = ["anthropic_output_fields", "openai_output_fields"]


def openai_output_fields(context: LlmContext) -> dict[str, Any]:
    """The request fields of OpenAI Chat Completions for the context's output mode."""
    spec = context.output
    if spec is None or spec.mode == "tool":
        return {}
    if spec.mode == "native":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": spec.tool_name,
                    "description": spec.description,
                    "schema": spec.parameters,
                    "strict": False,
                },
            }
        }
    if len(context.tools) == 1:
        return {"tool_choice": {"type": "function", "function": {"name": spec.tool_name}}}
    return {"tool_choice": "required"}


def anthropic_output_fields(context: LlmContext, thinking: bool) -> dict[str, Any]:
    """The request fields of Anthropic Messages for the context's output mode (``thinking``:
    extended thinking is on)."""
    spec = context.output
    if spec is None or spec.mode == "tool":
        return {}
    if spec.mode == "native":
        raise ValueError(
            "the Anthropic provider has no native structured output: use output_mode='tool' "
            "or 'forced_tool' (its default)"
        )
    if thinking:
        return {"tool_choice": {"type": "auto"}}
    if len(context.tools) == 1:
        return {"tool_choice": {"type": "tool", "name": spec.tool_name}}
    return {"tool_choice": {"type": "any"}}
