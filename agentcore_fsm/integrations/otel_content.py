"""What a traced run records of content with ``record_content=True``
(:mod:`agentcore_fsm.integrations.otel`, docs/tracing.md#content-stays-out-unless-you-ask):
messages in the GenAI conventions' message format, and any value as a JSON string."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["FINISH_REASON", "conventions_message", "json_text", "jsonable"]

FINISH_REASON = {"stop": "stop", "length": "length", "toolUse": "tool_call", "error": "error"}
"""The library's stop reasons in the conventions' finish-reason vocabulary (others as they are)."""


def json_text(value: Any) -> str:
    """``value`` as compact JSON text (what JSON cannot carry as its ``str()``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def jsonable(value: Any) -> Any:
    """``value`` as JSON data: a pydantic model's camelCase JSON form, anything else as is."""
    dump = getattr(value, "model_dump", None)  # pydantic models: messages, results, parameters
    if callable(dump):
        try:
            return dump(mode="json", by_alias=True, exclude_none=True)
        except Exception:
            return str(value)
    return value


def conventions_parts(content: Any) -> list[dict[str, Any]]:
    """Content blocks as the conventions' message parts."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append({"type": "text", "content": block.text})
        elif kind == "thinking":
            parts.append({"type": "reasoning", "content": "" if block.redacted else block.thinking})
        elif kind == "toolCall":
            call = {"type": "tool_call", "id": block.id, "name": block.name}
            parts.append({**call, "arguments": block.arguments})
        elif kind == "image":
            image = {"type": "blob", "modality": "image", "mime_type": block.mime_type}
            parts.append({**image, "content": block.data})
        else:
            parts.append({"type": str(kind), "content": jsonable(block)})
    return parts


def conventions_message(message: Any, output: bool = False) -> dict[str, Any]:
    """A message in the conventions' message format (``output``: with its finish reason)."""
    role = getattr(message, "role", None)
    if role == "toolResult":
        blocks = conventions_parts(message.content)
        texts = [p["content"] for p in blocks if p["type"] == "text"]
        response: Any = "".join(texts) if len(texts) == len(blocks) else blocks
        part = {"type": "tool_call_response", "id": message.tool_call_id, "response": response}
        return {"role": "tool", "parts": [part]}
    made: dict[str, Any] = {"role": role, "parts": conventions_parts(message.content)}
    if output:
        stop = message.stop_reason
        made["finish_reason"] = FINISH_REASON.get(stop, stop)
    return made
