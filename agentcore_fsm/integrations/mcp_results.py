"""What an MCP server's answers become: a tool call's result (its content blocks mapped to ours,
see :mod:`agentcore_fsm.integrations.mcp`), a progress report, and the few words that describe
what went wrong (an error the server answered, a reply that is not valid, a closed connection).
"""

from __future__ import annotations

import json
from typing import Any

import anyio

try:
    import mcp.types as mcp_types
    from mcp.shared.exceptions import MCPError
except ImportError as _exc:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(
        "agentcore_fsm.integrations.mcp needs the MCP SDK: pip install 'agentcore-fsm[mcp]'"
    ) from _exc
from pydantic import ValidationError

from agentcore_fsm.core.messages import ImageContent, TextContent, ToolResultContent, clip
from agentcore_fsm.core.tools import AgentToolResult

__all__ = [
    "closed_in",
    "convert_result",
    "describe_exception",
    "error_result",
    "is_closed",
    "progress_result",
    "rpc_error",
    "validation_problems",
]

_MAX_PROBLEMS = 3


def convert_result(server: str, tool: str, result: mcp_types.CallToolResult) -> AgentToolResult:
    """What the answer of ``server``'s tool ``tool`` becomes (see the mapping in
    :mod:`agentcore_fsm.integrations.mcp`)."""
    content: list[ToolResultContent] = []
    resources: list[dict[str, Any]] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            content.append(TextContent(text=block.text))
        elif isinstance(block, mcp_types.ImageContent):
            content.append(ImageContent(data=block.data, mime_type=block.mime_type))
        elif isinstance(block, mcp_types.AudioContent):
            size = size_text(decoded_length(block.data))
            content.append(TextContent(text=f"[audio {block.mime_type}, {size}: not shown]"))
        elif isinstance(block, mcp_types.EmbeddedResource):
            inner = block.resource
            mime = inner.mime_type or "application/octet-stream"
            resources.append({"type": "resource", "uri": inner.uri, "mime_type": inner.mime_type})
            if isinstance(inner, mcp_types.TextResourceContents):
                content.append(TextContent(text=f"[resource {inner.uri}]\n{inner.text}"))
            elif mime.startswith("image/"):
                content.append(ImageContent(data=inner.blob, mime_type=mime))
            else:
                size = size_text(decoded_length(inner.blob))
                content.append(
                    TextContent(text=f"[resource {inner.uri} ({mime}, {size}): not shown]")
                )
        elif isinstance(block, mcp_types.ResourceLink):
            resources.append(
                {
                    "type": "resource_link",
                    "uri": block.uri,
                    "mime_type": block.mime_type,
                    "name": block.name,
                }
            )
            about = f" ({block.mime_type})" if block.mime_type else ""
            more = f": {block.description}" if block.description else ""
            content.append(
                TextContent(text=f"[resource link {block.uri}: {block.name}{about}{more}]")
            )
    structured = result.structured_content
    if structured is not None and not result.content:
        content.append(TextContent(text=json.dumps(structured, ensure_ascii=False)))
    if result.is_error and not content:
        content.append(
            TextContent(text=f'MCP server "{server}", tool "{tool}": failed without saying why')
        )
    details: dict[str, Any] = {"server": server, "tool": tool}
    if structured is not None:
        details["structured_content"] = structured
    if resources:
        details["resources"] = resources
    return AgentToolResult(content=content, details=details, is_error=result.is_error or None)


def error_result(text: str) -> AgentToolResult:
    """An error result with ``text``."""
    return AgentToolResult(content=[TextContent(text=text)], is_error=True)


def progress_result(amount: float, total: float | None, message: str | None) -> AgentToolResult:
    """A progress notification as a partial result (``3/10 copying``)."""
    text = f"{amount:g}/{total:g}" if total is not None else f"{amount:g}"
    if message:
        text += f" {message}"
    return AgentToolResult(
        content=[TextContent(text=text)],
        details={"progress": amount, "total": total, "message": message},
    )


def rpc_error(exc: MCPError) -> str:
    """An error the server answered, in a few words."""
    return f"{exc.error.message} (JSON-RPC error {exc.code})"


def validation_problems(exc: ValidationError) -> str:
    """What pydantic found wrong, in a few words: ``path: problem``, at most three of them. The
    alternatives of a union (a content block of an unknown type) make one problem."""
    shown: list[str] = []
    unions: dict[str, tuple[list[str], str]] = {}  # path -> (alternatives, the type given)
    count = 0
    for error in exc.errors(include_url=False):
        loc = list(error["loc"])
        # the name of a union's alternative is a path segment that is a class name
        cut = next((i for i, p in enumerate(loc) if isinstance(p, str) and p[:1].isupper()), None)
        if cut is None:
            count += 1
            where = ".".join(str(p) for p in loc) or "root"
            text = f"{where}: {error['msg']}"
            if error["type"] == "json_invalid":
                text += f" in {clip(repr(error['input']), 60)}"
            shown.append(text)
            continue
        where = ".".join(str(p) for p in loc[:cut]) or "root"
        if where not in unions:
            count += 1
            unions[where] = ([], "")
            shown.append(where)
        alternatives, given = unions[where]
        if loc[cut] not in alternatives:
            alternatives.append(str(loc[cut]))
        if loc[cut + 1 :] == ["type"] and error["type"] == "literal_error":
            given = json.dumps(error["input"], default=str)
        unions[where] = (alternatives, given)
    lines = []
    for line in shown[:_MAX_PROBLEMS]:
        if line in unions:
            alternatives, given = unions[line]
            line = f"{line}: is none of {', '.join(alternatives)}"
            if given:
                line += f" (its type is {given})"
        lines.append(line)
    more = count - len(lines)
    return "; ".join(lines) + (f" (and {more} more)" if more > 0 else "")


def is_closed(exc: MCPError) -> bool:
    """The SDK's own error for a connection that closed (a server may send -32000 too)."""
    return exc.code == mcp_types.CONNECTION_CLOSED and exc.error.message == "Connection closed"


def describe_exception(exc: BaseException) -> str:
    """One line about an exception; for a group, about its first leaf that is not a
    cancellation."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if not isinstance(inner, anyio.get_cancelled_exc_class()):
                return describe_exception(inner)
    if isinstance(exc, MCPError):
        return rpc_error(exc)
    if isinstance(exc, ValidationError):
        return validation_problems(exc)
    try:
        text = str(exc)
    except Exception:
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def closed_in(exc: BaseException) -> bool:
    """Whether ``exc`` (or a leaf of its group) says the connection closed."""
    if isinstance(exc, BaseExceptionGroup):
        return any(closed_in(inner) for inner in exc.exceptions)
    return isinstance(exc, MCPError) and is_closed(exc)


def decoded_length(data: str) -> int:
    """The length of base64 ``data`` once decoded."""
    return len(data) * 3 // 4 - data.count("=", max(len(data) - 2, 0))


def size_text(n: int) -> str:
    """``512 B``, ``2.0 KiB``."""
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"
