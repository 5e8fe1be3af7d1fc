"""A small MCP server for tests/test_mcp.py, written with the MCP SDK's low-level server API.

Run it as a script::

    python tests/mcp_servers.py stdio MARKER_DIR      # over stdin/stdout
    python tests/mcp_servers.py http MARKER_DIR       # streamable HTTP on 127.0.0.1, a free port
    python tests/mcp_servers.py calc                  # one "calculator" tool (the chat test)

Over HTTP it binds 127.0.0.1 only, on a port the system picks, and prints
``listening on <port>`` on stdout once it accepts connections.

``MARKER_DIR`` is where the server leaves what the tests check afterwards: ``slow`` writes
``<marker>.started`` when it starts, ``<marker>.cancelled`` when the server cancels it (the
client's cancellation reached the server) and ``<marker>.finished`` when it ran to its end;
``gate`` writes ``<marker>.cancelled`` too. Over stdio, the server writes its process id to
``server.pid`` when it starts.

The tools exercise every kind of content and every way a call can go wrong: text, an image, an
embedded text and binary resource, a resource link, structured content (with and without text),
an ``isError`` result, progress notifications, a tool that takes as long as it is told, one that
kills the server, a tool list that changes, and a tool whose input schema is not a valid JSON
schema. (Answers that are no MCP at all come from ``tests/mcp_raw_server.py``.)
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError

PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)
OBJECT: dict[str, Any] = {"type": "object"}


def _schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": sorted(properties)}


TOOLS = [
    types.Tool(
        name="echo",
        title="Echo",
        description="Say the text back.",
        input_schema=_schema(text={"type": "string"}),
    ),
    types.Tool(name="picture", description="A tiny picture, and a sound.", input_schema=OBJECT),
    types.Tool(name="resources", description="Embedded resources and a link.", input_schema=OBJECT),
    types.Tool(
        name="weather",
        description="Structured weather.",
        input_schema=_schema(city={"type": "string"}),
        output_schema=_schema(city={"type": "string"}, celsius={"type": "number"}),
    ),
    types.Tool(name="structured_only", description="Structured, no content.", input_schema=OBJECT),
    types.Tool(
        name="wrong_structure",
        description="Structured content that breaks its output schema.",
        input_schema=OBJECT,
        output_schema=_schema(celsius={"type": "number"}),
    ),
    types.Tool(name="fail", description="Fails softly (isError).", input_schema=OBJECT),
    types.Tool(
        name="progress",
        description="Reports progress.",
        input_schema=_schema(steps={"type": "integer"}),
    ),
    types.Tool(
        name="slow",
        description="Sleeps, then answers.",
        input_schema=_schema(seconds={"type": "number"}, marker={"type": "string"}),
    ),
    types.Tool(
        name="gate",
        description="Answers once `count` calls of it are running at the same time.",
        input_schema=_schema(count={"type": "integer"}, marker={"type": "string"}),
    ),
    types.Tool(name="crash", description="Kills the server.", input_schema=OBJECT),
    types.Tool(name="header", description="The request's X-Test header.", input_schema=OBJECT),
    types.Tool(
        name="add_tool",
        description="Adds a tool of that name, and says the tool list changed.",
        input_schema=_schema(name={"type": "string"}),
    ),
    types.Tool(
        name="broken",
        description="Its input schema is not a valid JSON schema.",
        input_schema={"type": "object", "properties": {"x": {"type": "nonsense"}}},
    ),
    types.Tool(
        name="task_only",
        description="Runs only as an MCP task.",
        input_schema=OBJECT,
        execution=types.ToolExecution(taskSupport="required"),
    ),
]


class State:
    def __init__(self, markers: Path) -> None:
        self.markers = markers
        self.tools = list(TOOLS)
        self.added: list[str] = []  # the names of the tools add_tool added
        self.bus = InMemorySubscriptionBus()
        self.gates: dict[str, tuple[list[int], anyio.Event]] = {}  # marker -> (waiting, open)

    def mark(self, marker: str, what: str) -> None:
        (self.markers / f"{marker}.{what}").write_text(what, encoding="utf-8")


def _text(text: str) -> types.TextContent:
    return types.TextContent(text=text)


async def _until_cancelled(state: State, marker: str, seconds: float) -> None:
    state.mark(marker, "started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        state.mark(marker, "cancelled")
        raise
    state.mark(marker, "finished")


def make_server(markers: Path) -> Server[Any]:
    state = State(markers)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=state.tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        name = params.name
        if name == "echo":
            return types.CallToolResult(content=[_text(args["text"])])
        if name == "task_only":  # over the 2026 protocol (no tasks) an ordinary call
            return types.CallToolResult(content=[_text("ran directly")])
        if name == "picture":
            image = types.ImageContent(data=PNG_1X1, mime_type="image/png")
            sound = types.AudioContent(data="UklGRg==", mime_type="audio/wav")
            return types.CallToolResult(content=[_text("a dot:"), image, sound])
        if name == "resources":
            text = types.TextResourceContents(
                uri="file:///notes.txt", mime_type="text/plain", text="remember the milk"
            )
            png = types.BlobResourceContents(
                uri="file:///dot.png", mime_type="image/png", blob=PNG_1X1
            )
            raw = types.BlobResourceContents(
                uri="file:///data.bin", mime_type="application/octet-stream", blob="AAECAw=="
            )
            link = types.ResourceLink(
                uri="file:///big.csv", name="big.csv", mime_type="text/csv", description="Big."
            )
            blocks: list[types.ContentBlock] = [
                types.EmbeddedResource(resource=text),
                types.EmbeddedResource(resource=png),
                types.EmbeddedResource(resource=raw),
                link,
            ]
            return types.CallToolResult(content=blocks)
        if name == "weather":
            data = {"city": args["city"], "celsius": 21.5}
            return types.CallToolResult(content=[_text(json.dumps(data))], structured_content=data)
        if name == "structured_only":
            return types.CallToolResult(content=[], structured_content={"answer": 42})
        if name == "wrong_structure":
            return types.CallToolResult(content=[], structured_content={"celsius": "warm"})
        if name == "fail":
            return types.CallToolResult(content=[_text("the disk is full")], is_error=True)
        if name == "progress":
            steps = int(args["steps"])
            for step in range(1, steps + 1):
                await ctx.session.report_progress(step, steps, f"step {step}")
            return types.CallToolResult(content=[_text(f"{steps} steps done")])
        if name == "slow":
            await _until_cancelled(state, args["marker"], float(args["seconds"]))
            return types.CallToolResult(content=[_text(f"slept {args['seconds']}")])
        if name == "gate":
            waiting, gate_open = state.gates.setdefault(args["marker"], ([0], anyio.Event()))
            waiting[0] += 1
            if waiting[0] >= int(args["count"]):
                gate_open.set()
            try:
                with anyio.fail_after(10):
                    await gate_open.wait()
            except anyio.get_cancelled_exc_class():
                state.mark(args["marker"], "cancelled")
                raise
            return types.CallToolResult(content=[_text(f"{waiting[0]} together")])
        if name == "crash":
            sys.stdout.flush()
            os._exit(3)
        if name == "header":  # over HTTP, the request is the HTTP request
            headers = getattr(ctx.request, "headers", None) or {}
            return types.CallToolResult(content=[_text(headers.get("x-test", "none"))])
        if name == "add_tool":
            added = args["name"]
            if added not in state.added:
                state.added.append(added)
                state.tools.append(
                    types.Tool(name=added, description="Added later.", input_schema=OBJECT)
                )
            await ctx.session.send_tool_list_changed()  # the 2025 protocol: a notification
            await state.bus.publish(ToolsListChanged())  # 2026: a subscriptions/listen event
            return types.CallToolResult(content=[_text("added")])
        if name in state.added:
            return types.CallToolResult(content=[_text(f"{name} here")])
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")

    return Server(
        "test-server",
        version="1.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=ListenHandler(state.bus),
    )


def make_calculator() -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        schema = _schema(expression={"type": "string"})
        tool = types.Tool(name="calculator", description="Add numbers.", input_schema=schema)
        return types.ListToolsResult(tools=[tool])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        expression = (params.arguments or {})["expression"]
        total = sum(int(part) for part in expression.split("+"))
        return types.CallToolResult(content=[_text(str(total))])

    return Server("calc", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


async def serve_http(server: Server[Any]) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # loopback only, a free port
    port = sock.getsockname()[1]
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)

    async def announce() -> None:
        while not web.started:
            await anyio.sleep(0.02)
        print(f"listening on {port}", flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await web.serve(sockets=[sock])


def quit_now() -> None:
    """Exit at once once the client has closed our stdin (the interpreter's own teardown of
    all that the SDK loaded takes longer than the tests need to wait)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str]) -> None:
    kind = argv[0]
    if kind == "calc":
        anyio.run(serve_stdio, make_calculator())
        quit_now()
    markers = Path(argv[1])
    server = make_server(markers)
    if kind == "stdio":
        (markers / "server.pid").write_text(str(os.getpid()), encoding="utf-8")
        anyio.run(serve_stdio, server)
        quit_now()
    elif kind == "http":
        anyio.run(serve_http, server)
    else:
        raise SystemExit(f"unknown kind {kind!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
