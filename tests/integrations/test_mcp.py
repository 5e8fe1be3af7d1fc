"""MCP servers' tools through ``agentcore_fsm.integrations.mcp`` (docs/mcp.md), on trio and asyncio.

Nothing here is mocked: the real SDK client talks to real local servers written with the SDK's
server API (``tests/mcp_servers.py``: over stdio as a subprocess, and over streamable HTTP on
127.0.0.1 at a free port) and to a hand-written one that misbehaves
(``tests/mcp_raw_server.py``). What the servers do is checked on their side too: a tool the
client cancelled leaves a ``<marker>.cancelled`` file.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import MODEL, user

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AgentToolResult,
    ImageContent,
    TextContent,
    ToolResultMessage,
    run_agent_loop,
)
from agentcore_fsm.devtools.testing import check_run
from agentcore_fsm.integrations.mcp import (
    DEFAULT_TIMEOUT,
    HttpServer,
    MCPConnectionError,
    MCPSession,
    StdioServer,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).resolve().parents[1]
SERVERS = str(TESTS / "mcp_servers.py")
RAW = str(TESTS / "mcp_raw_server.py")
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)
TOOL_NAMES = [
    "echo",
    "picture",
    "resources",
    "weather",
    "structured_only",
    "wrong_structure",
    "fail",
    "progress",
    "slow",
    "gate",
    "crash",
    "header",
    "add_tool",
]
# "task_only" is task-only over the 2025 protocol; the 2026 protocol has no tasks (the SDK drops
# the field), so there it is an ordinary tool: what a session on the 2026 protocol lists
LISTED = [*TOOL_NAMES, "task_only"]
TASK_ONLY = (
    'Tool "task_only": the server runs it only as an MCP task (execution.taskSupport '
    '"required"), and this client calls tools directly'
)
BROKEN = (
    'Tool "broken": its parameters are not a valid JSON schema: at properties.x.type: '
    "'nonsense' is not valid under any of the given schemas"
)


def stdio_server(markers: Path) -> StdioServer:
    return StdioServer(sys.executable, [SERVERS, "stdio", str(markers)])


def raw_server(variant: str) -> StdioServer:
    return StdioServer(sys.executable, [RAW, variant])


def marker() -> str:
    return uuid.uuid4().hex[:12]


async def wait_for_file(path: Path, seconds: float = 10.0) -> str:
    with anyio.fail_after(seconds):
        while not path.exists():
            await anyio.sleep(0.02)
    return path.read_text(encoding="utf-8")


def texts(result: AgentToolResult | ToolResultMessage) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


async def collect(into: list[list[str]], call: Awaitable[AgentToolResult]) -> None:
    into.append(texts(await call))


class HttpProcess:
    """``tests/mcp_servers.py http``: a streamable HTTP server on 127.0.0.1 at a free port."""

    def __init__(self, markers: Path) -> None:
        self.markers = markers
        self.proc = subprocess.Popen(
            [sys.executable, SERVERS, "http", str(markers)], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"the HTTP test server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[-1])}/mcp"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpProcess]:
    server = HttpProcess(tmp_path_factory.mktemp("mcp-http"))
    try:
        yield server
    finally:
        server.stop()


# --- listing --------------------------------------------------------------------------------


async def test_prefix_and_filters(http: HttpProcess, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "agentcore_fsm.integrations.mcp")
    server = HttpServer(http.url)
    async with (
        MCPSession(server, prefix="t_", include=["echo", "fail", "nope"], name="tests") as named,
        MCPSession(server, include=lambda tool: tool.name.startswith("s")) as chosen,
    ):
        assert [tool.name for tool in named.tools] == ["t_echo", "t_fail"]
        assert list(named.mcp_tools) == ["t_echo", "t_fail"]
        assert named.name == "tests"
        assert [tool.name for tool in chosen.tools] == ["structured_only", "slow"]
        assert texts(await named.call("header", {})) == ["none"]
        # the prefixed tool calls the server's tool
        result = await named.tools[0].execute("c1", {"text": "hello"}, None, None)
        assert result == AgentToolResult(
            content=[TextContent(text="hello")], details={"server": "tests", "tool": "echo"}
        )
    warnings = [
        r.getMessage() for r in caplog.records if r.name == "agentcore_fsm.integrations.mcp"
    ]
    assert 'MCP server "tests" has no tool "nope"' in warnings
    # headers go with every request
    async with MCPSession(HttpServer(http.url, headers={"X-Test": "sent"})) as session:
        assert texts(await session.call("header", {})) == ["sent"]


# --- calling and mapping results ------------------------------------------------------------


async def test_stdio_tools_are_listed_and_their_results_mapped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "agentcore_fsm.integrations.mcp")
    async with MCPSession(stdio_server(tmp_path)) as session:
        assert session.name == "test-server"
        assert session.connected
        assert [tool.name for tool in session.tools] == LISTED
        echo = session.tools[0]
        assert (echo.description, echo.label) == ("Say the text back.", "Echo")
        assert echo.parameters == {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }
        assert session.tools[1].label == "picture"  # no title: the name
        assert session.skipped == {"broken": BROKEN}
        assert list(session.mcp_tools) == LISTED
        assert session.mcp_tools["weather"].output_schema is not None
        warnings = [
            r.getMessage() for r in caplog.records if r.name == "agentcore_fsm.integrations.mcp"
        ]
        assert warnings == [f'MCP server "test-server": tool "broken" is left out: {BROKEN}']

        details = {"server": "test-server"}
        assert await session.call("echo", {"text": "hi"}) == AgentToolResult(
            content=[TextContent(text="hi")], details={**details, "tool": "echo"}
        )
        assert await session.call("picture", {}) == AgentToolResult(
            content=[
                TextContent(text="a dot:"),
                ImageContent(data=PNG, mime_type="image/png"),
                TextContent(text="[audio audio/wav, 4 B: not shown]"),
            ],
            details={**details, "tool": "picture"},
        )
        assert await session.call("resources", {}) == AgentToolResult(
            content=[
                TextContent(text="[resource file:///notes.txt]\nremember the milk"),
                ImageContent(data=PNG, mime_type="image/png"),
                TextContent(
                    text="[resource file:///data.bin (application/octet-stream, 4 B): not shown]"
                ),
                TextContent(text="[resource link file:///big.csv: big.csv (text/csv): Big.]"),
            ],
            details={
                **details,
                "tool": "resources",
                "resources": [
                    {"type": "resource", "uri": "file:///notes.txt", "mime_type": "text/plain"},
                    {"type": "resource", "uri": "file:///dot.png", "mime_type": "image/png"},
                    {
                        "type": "resource",
                        "uri": "file:///data.bin",
                        "mime_type": "application/octet-stream",
                    },
                    {
                        "type": "resource_link",
                        "uri": "file:///big.csv",
                        "mime_type": "text/csv",
                        "name": "big.csv",
                    },
                ],
            },
        )
        weather = {"city": "Rome", "celsius": 21.5}
        assert await session.call("weather", {"city": "Rome"}) == AgentToolResult(
            content=[TextContent(text=json.dumps(weather))],
            details={**details, "tool": "weather", "structured_content": weather},
        )
        # structured content without content blocks: the model gets its JSON
        assert await session.call("structured_only", {}) == AgentToolResult(
            content=[TextContent(text='{"answer": 42}')],
            details={**details, "tool": "structured_only", "structured_content": {"answer": 42}},
        )
        # the SDK checks structured content against the tool's output schema
        assert texts(await session.call("wrong_structure", {})) == [
            'MCP server "test-server", tool "wrong_structure": its answer is not a valid tool '
            "result: Invalid structured content returned by tool wrong_structure: 'warm' is not "
            "of type 'number'"
        ]
        assert await session.call("fail", {}) == AgentToolResult(
            content=[TextContent(text="the disk is full")],
            details={**details, "tool": "fail"},
            is_error=True,
        )
        # the server's own answer to a tool it does not know
        assert await session.call("nope", {}) == AgentToolResult(
            content=[
                TextContent(
                    text='MCP server "test-server", tool "nope": the server answered with an '
                    "error: Unknown tool: nope (JSON-RPC error -32602)"
                )
            ],
            details={**details, "tool": "nope"},
            is_error=True,
        )
        # calls from several tasks share the session's one pipe, and run on the server at once
        gate = {"count": 3, "marker": marker()}
        together: list[list[str]] = []
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(lambda: collect(together, session.call("gate", gate)))
        assert together == [["3 together"]] * 3
        refused = await session.call("echo", [1])
        assert texts(refused) == [
            'MCP server "test-server", tool "echo": arguments must be a JSON object, got [1]'
        ]
    assert not session.connected


async def test_progress_reaches_on_update(http: HttpProcess) -> None:
    updates: list[AgentToolResult] = []
    async with MCPSession(HttpServer(http.url)) as session:
        result = await session.call("progress", {"steps": 3}, on_update=updates.append)
    assert texts(result) == ["3 steps done"]
    assert updates == [
        AgentToolResult(
            content=[TextContent(text=f"{n}/3 step {n}")],
            details={"progress": float(n), "total": 3.0, "message": f"step {n}"},
        )
        for n in (1, 2, 3)
    ]


async def test_parallel_calls_to_one_server_run_at_once(http: HttpProcess) -> None:
    # each `gate` call answers only once three of them are running on the server together
    name = marker()
    calls = [faux_tool_call("gate", {"count": 3, "marker": name}, id=f"g{i}") for i in range(3)]
    model = FauxProvider([faux_response(tool_calls=calls), faux_response("together")])
    events: list[Any] = []
    async with MCPSession(HttpServer(http.url), timeout=20) as session:
        messages = await run_agent_loop(
            [user("all at once")],
            AgentContext(tools=session.tools),
            AgentLoopConfig(model=MODEL, tool_execution="parallel"),
            events.append,
            stream_fn=model,
        )
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [(m.tool_call_id, texts(m), m.is_error) for m in results] == [
        (f"g{i}", ["3 together"], False) for i in range(3)
    ]
    check_run(events, messages, tool_execution="parallel")


# --- a whole run, on both backends ------------------------------------------------------------


async def test_a_whole_agent_run_with_mcp_tools(tmp_path: Path) -> None:
    model = FauxProvider(
        [
            faux_response(
                tool_calls=[
                    faux_tool_call("docs_echo", {"text": "ping"}, id="c1"),
                    faux_tool_call("docs_progress", {"steps": 2}, id="c2"),
                    faux_tool_call("docs_fail", {}, id="c3"),
                ]
            ),
            faux_response("All three ran."),
        ]
    )
    events: list[Any] = []
    async with MCPSession(stdio_server(tmp_path), prefix="docs_") as session:
        messages = await run_agent_loop(
            [user("use the tools")],
            AgentContext(tools=session.tools),
            AgentLoopConfig(model=MODEL),
            events.append,
            stream_fn=model,
        )
    summary = check_run(events, messages, tool_execution="parallel")
    assert summary is not None
    assert [str(m) for m in messages] == [
        'user: "use the tools"',
        "assistant: [toolUse: docs_echo(text='ping'), docs_progress(steps=2), docs_fail()]",
        'toolResult c1 docs_echo: "ping"',
        'toolResult c2 docs_progress: "2 steps done"',
        'toolResult c3 docs_fail (error): "the disk is full"',
        'assistant: "All three ran."',
    ]
    updates = [
        (e.tool_call_id, texts(e.partial_result))
        for e in events
        if e.type == "tool_execution_update"
    ]
    assert updates == [("c2", ["1/2 step 1"]), ("c2", ["2/2 step 2"])]
    # the model was offered every tool, with the server's schema
    (offered,) = {tuple(t.name for t in call.tools) for call in model.calls}
    assert offered == tuple(f"docs_{name}" for name in LISTED)
    assert model.calls[0].tools[0].json_schema() == session.mcp_tools["docs_echo"].input_schema


# --- abort, timeout, crash, garbage ---------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_abort_cancels_the_request_on_the_server(
    transport: str, tmp_path: Path, http: HttpProcess
) -> None:
    markers = tmp_path if transport == "stdio" else http.markers
    server = stdio_server(tmp_path) if transport == "stdio" else HttpServer(http.url)
    name = marker()
    model = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("slow", {"seconds": 60, "marker": name})])]
    )
    controller = AbortController()
    events: list[Any] = []
    async with MCPSession(server) as session:

        async def abort_once_started() -> None:
            await wait_for_file(markers / f"{name}.started")
            controller.abort()

        async with anyio.create_task_group() as tg:
            tg.start_soon(abort_once_started)
            with anyio.fail_after(20):
                messages = await run_agent_loop(
                    [user("sleep")],
                    AgentContext(tools=session.tools),
                    AgentLoopConfig(model=MODEL),
                    events.append,
                    signal=controller.signal,
                    stream_fn=model,
                )
        # the server was told, and cancelled the tool
        assert await wait_for_file(markers / f"{name}.cancelled") == "cancelled"
        assert not (markers / f"{name}.finished").exists()
        # and the session goes on
        assert texts(await session.call("echo", {"text": "still here"})) == ["still here"]
    check_run(events, messages)
    assert events[-1].reason == "aborted"
    result = messages[-1]
    assert isinstance(result, ToolResultMessage)
    assert (texts(result), result.is_error) == (["Operation aborted"], True)


async def test_a_call_past_the_timeout_is_cancelled(http: HttpProcess) -> None:
    name = marker()
    async with MCPSession(HttpServer(http.url), timeout=0.5) as session:
        with anyio.fail_after(10):
            result = await session.call("slow", {"seconds": 60, "marker": name})
        assert result == AgentToolResult(
            content=[
                TextContent(
                    text='MCP server "test-server", tool "slow": no answer within 0.5 s; '
                    "the call was cancelled"
                )
            ],
            details={"server": "test-server", "tool": "slow"},
            is_error=True,
        )
        assert await wait_for_file(http.markers / f"{name}.cancelled") == "cancelled"
        assert texts(await session.call("echo", {"text": "after"})) == ["after"]
    assert DEFAULT_TIMEOUT == 60.0


async def test_a_crashing_stdio_server() -> None:
    async with MCPSession(raw_server("tools")) as session:
        with anyio.fail_after(10):
            crashed = await session.call("crash", {})
        assert crashed == AgentToolResult(
            content=[
                TextContent(
                    text='MCP server "raw-server", tool "crash": the connection closed before '
                    "the tool answered (did the server exit?)"
                )
            ],
            details={"server": "raw-server", "tool": "crash"},
            is_error=True,
        )
        assert not session.connected
        later = await session.call("ok", {})
        assert texts(later) == [
            'MCP server "raw-server", tool "ok": not connected: its connection closed '
            "earlier (did the server exit?)"
        ]
        with pytest.raises(MCPConnectionError, match='MCP server "raw-server" is not connected'):
            await session.refresh_tools()


async def test_an_http_server_that_dies_during_a_call(tmp_path: Path) -> None:
    server = HttpProcess(tmp_path)
    name = marker()
    try:
        async with MCPSession(HttpServer(server.url), timeout=20) as session:

            async def kill_once_started() -> None:
                await wait_for_file(tmp_path / f"{name}.started")
                server.proc.kill()

            async with anyio.create_task_group() as tg:
                tg.start_soon(kill_once_started)
                with anyio.fail_after(15):
                    result = await session.call("slow", {"seconds": 60, "marker": name})
            lost = "the connection was lost: RemoteProtocolError: Server disconnected without "
            lost += "sending a response."
            assert result.is_error
            assert texts(result) == [f'MCP server "test-server", tool "slow": {lost}']
            assert not session.connected
            later = await session.call("echo", {"text": "x"})
            assert texts(later) == [f'MCP server "test-server", tool "echo": not connected: {lost}']
    finally:
        server.stop()


async def test_answers_that_are_not_mcp() -> None:
    async with MCPSession(raw_server("tools"), timeout=0.5) as session:
        assert session.name == "raw-server"
        wrong = ["bad_result", "unknown_block", "rpc_error", "not_json"]
        assert [tool.name for tool in session.tools] == [*wrong, "ok", "env", "crash"]
        prefix = 'MCP server "raw-server", tool '
        got = {name: texts(await session.call(name, {})) for name in wrong}
        assert got == {
            "bad_result": [
                prefix + '"bad_result": its answer is not a valid tool result: '
                "content: Input should be a valid list"
            ],
            "unknown_block": [
                prefix + '"unknown_block": its answer is not a valid tool result: content.0: is '
                "none of TextContent, ImageContent, AudioContent, ResourceLink, "
                'EmbeddedResource (its type is "video")'
            ],
            # -32000 is also the code of the SDK's own "Connection closed": not confused
            "rpc_error": [
                prefix + '"rpc_error": the server answered with an error: database down '
                "(JSON-RPC error -32000)"
            ],
            "not_json": [
                prefix + '"not_json": no answer within 0.5 s; the call was cancelled; the server '
                "also sent something that is not MCP: root: Invalid JSON: expected ident at "
                "line 1 column 2 in 'this is not JSON'"
            ],
        }
        assert session.connected
        assert texts(await session.call("ok", {})) == ["fine"]  # the session goes on


async def test_a_stdio_server_gets_env_and_cwd_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_SECRET", "ours")  # not inherited: the SDK's default environment
    server = StdioServer(sys.executable, [RAW, "tools"], env={"MCP_TEST": "given"}, cwd=tmp_path)
    async with MCPSession(server) as session:
        assert texts(await session.call("env", {})) == [f"given unset {tmp_path}"]


async def test_servers_that_cannot_be_used_raise_on_entering(tmp_path: Path) -> None:
    errlog = (tmp_path / "stderr.txt").open("w", encoding="utf-8")
    cases = [
        (
            MCPSession(raw_server("silent"), connect_timeout=0.5),
            f'MCP server "{Path(sys.executable).name} {RAW} silent" did not answer within 0.5 s',
        ),
        (
            MCPSession(raw_server("exit"), errlog=errlog),
            f'MCP server "{Path(sys.executable).name} {RAW} exit" could not be started: the '
            "server closed the connection (did it exit?)",
        ),
        (
            MCPSession(raw_server("bad_list")),
            'MCP server "raw-server" sent a tool list that is not valid: '
            "tools.0.inputSchema: Field required",
        ),
        (
            MCPSession(StdioServer("/no/such/mcp-server")),
            'MCP server "mcp-server" could not be started: FileNotFoundError: [Errno 2] '
            "No such file or directory: '/no/such/mcp-server'",
        ),
    ]
    for session, message in cases:
        with anyio.fail_after(15), pytest.raises(MCPConnectionError) as info:
            async with session:
                raise AssertionError("entered")
        assert str(info.value) == message
    errlog.close()
    # the server's stderr went to errlog
    text = (tmp_path / "stderr.txt").read_text(encoding="utf-8")
    assert text == "raw-server: cannot start: no configuration\n"


# --- the session's lifetime -----------------------------------------------------------------


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_the_server_stops_whatever_ends_the_session(tmp_path: Path) -> None:
    first, second = tmp_path / "first.pid", tmp_path / "second.pid"
    # an exception in the block goes through as it is (not in an exception group)
    with pytest.raises(ZeroDivisionError):
        async with MCPSession(StdioServer(sys.executable, [RAW, "tools", str(first)])):
            _ = 1 / 0
    assert process_gone(int(first.read_text()))
    # a cancellation of the block
    with anyio.move_on_after(30) as scope:
        async with MCPSession(StdioServer(sys.executable, [RAW, "tools", str(second)])) as session:
            assert texts(await session.call("ok", {})) == ["fine"]
            scope.cancel()
            await anyio.sleep(30)
    assert scope.cancelled_caught
    assert process_gone(int(second.read_text()))
    assert texts(await session.call("ok", {})) == [
        'MCP server "raw-server", tool "ok": not connected: the session is closed'
    ]
    # a cancellation while the session connects
    third = tmp_path / "third.pid"
    with anyio.move_on_after(0.5) as scope:
        async with MCPSession(StdioServer(sys.executable, [RAW, "silent", str(third)])):
            raise AssertionError("connected to a server that never answers")
    assert scope.cancelled_caught
    assert process_gone(int(third.read_text()))
    with pytest.raises(RuntimeError, match="entered only once"):
        async with session:
            pass


async def test_a_tool_that_runs_only_as_a_task_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Over the 2025 protocol a server may mark a tool ``execution.taskSupport: "required"``
    (it answers a direct call with -32601): such a tool is left out, like one with a bad
    schema, with the reason in ``skipped`` and one warning."""
    caplog.set_level(logging.WARNING, "agentcore_fsm.integrations.mcp")
    async with MCPSession(stdio_server(tmp_path), mode="legacy") as session:
        assert [tool.name for tool in session.tools] == TOOL_NAMES
        assert session.skipped == {"broken": BROKEN, "task_only": TASK_ONLY}
        warnings = [
            r.getMessage() for r in caplog.records if r.name == "agentcore_fsm.integrations.mcp"
        ]
        assert warnings == [
            f'MCP server "test-server": tool "{name}" is left out: {why}'
            for name, why in (("broken", BROKEN), ("task_only", TASK_ONLY))
        ]


# --- a tool list that changes ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("transport", "mode"), [("http", "auto"), ("http", "legacy"), ("stdio", "auto")]
)
async def test_the_tools_are_listed_again_when_they_change(
    transport: str, mode: Any, tmp_path: Path, http: HttpProcess
) -> None:
    # the 2026 protocol's subscriptions/listen stream (over HTTP and stdio), and the 2025
    # protocol's notifications/tools/list_changed
    seen: list[list[str]] = []
    changed = anyio.Event()

    def on_change(tools: list[Any]) -> None:
        seen.append([tool.name for tool in tools])
        changed.set()

    server = HttpServer(http.url) if transport == "http" else stdio_server(tmp_path)
    added = f"late_{marker()}"
    async with MCPSession(server, mode=mode, on_tools_changed=on_change) as session:
        before = session.tools
        names = [tool.name for tool in before]  # the shared HTTP server may have more already
        assert names[: len(TOOL_NAMES)] == TOOL_NAMES
        assert texts(await session.call("add_tool", {"name": added})) == ["added"]
        with anyio.fail_after(10):
            await changed.wait()
        assert seen == [[*names, added]]
        assert session.tools is not before
        assert all(new is old for new, old in zip(session.tools, before, strict=False))
        assert texts(await session.tools[-1].execute("c1", {}, None, None)) == [f"{added} here"]
        assert [tool.name for tool in await session.refresh_tools()] == [*names, added]
        assert len(seen) == 1  # nothing changed since: no new call


# --- construction and import ----------------------------------------------------------------


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="StdioServer or an HttpServer, not str"):
        MCPSession("python server.py")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be positive"):
        MCPSession(StdioServer("x"), timeout=0)
    with pytest.raises(ValueError, match='mode must be "auto" or "legacy"'):
        MCPSession(StdioServer("x"), mode="2026")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a single str"):
        MCPSession(StdioServer("x"), include="echo")
    assert StdioServer.parse("npx -y 'my server' --flag") == StdioServer(
        "npx", ("-y", "my server", "--flag")
    )
    with pytest.raises(ValueError, match="must not be empty"):
        StdioServer.parse("  ")
    with pytest.raises(ValueError, match="invalid MCP server command line"):
        StdioServer.parse("python 'unclosed")


def test_importing_the_package_does_not_load_the_sdk() -> None:
    code = (
        "import sys, agentcore_fsm\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'httpx2'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.strip() == "[]"
