"""Tools from MCP (Model Context Protocol) servers, as :class:`~agentcore_fsm.AgentTool` s.

::

    from agentcore_fsm.integrations.mcp import MCPSession, StdioServer

    async with MCPSession(StdioServer("python", ["my_server.py"]), prefix="files_") as files:
        context = AgentContext(tools=files.tools)
        messages = await run_agent_loop(prompts, context, config, stream_fn=...)

An :class:`MCPSession` owns one client session of the official ``mcp`` SDK (the ``mcp`` extra:
``pip install 'agentcore-fsm[mcp]'``; this module is the only one that imports it, and
``import agentcore_fsm`` never does). Entering it starts the server (:class:`StdioServer`: a
subprocess spoken to over stdin/stdout) or connects to it (:class:`HttpServer`: streamable
HTTP), negotiates the protocol and lists the tools; leaving it closes the session and stops the
server, whatever happens: an error, a cancellation. Both transports work on trio and asyncio.

Decisions (docs/mcp.md says the same for users):

* **Names.** A tool's name is ``prefix + the server's name`` (not rewritten to suit a
  provider's rules); ``include`` (names of the server, before the prefix, or a predicate on the
  SDK's ``mcp.types.Tool``) keeps a subset. A server that lists a name twice keeps the first.
* **Schemas.** The server's input schema is the tool's ``parameters``, checked as every
  ``AgentTool`` schema is. A tool whose schema is not a valid JSON schema, or whose root is not
  ``"type": "object"``, is *skipped*: it is left out of :attr:`MCPSession.tools`, a warning is
  logged on the ``agentcore_fsm.integrations.mcp`` logger and :attr:`MCPSession.skipped` says why.
  (A
  permissive fallback schema would hide the tool's real parameters from the model, and an
  invalid schema sent to a provider can fail every model call of the run.) A tool list that the
  SDK itself rejects (it checks every tool) fails the whole listing instead. A tool the server
  runs only as an MCP task (``execution.taskSupport: "required"``) is skipped the same way: this
  client calls tools directly, and every direct call of such a tool fails.
* **Results.** Text and image blocks are copied; an embedded text resource becomes a text block
  ``[resource <uri>]`` followed by its text, an embedded image becomes an image block, other
  binary resources, resource links and audio become one line of text saying what they were
  (their bytes are not kept). ``details`` is a dict: ``server``, ``tool`` (the server's name of
  the tool), ``structured_content`` when the result has some, ``resources`` (``uri``,
  ``mime_type``, ``type``, and ``name`` for a link) when it had resources. Structured content
  without any content block is also given to the model as its JSON text. ``isError`` results are
  error results (``is_error=True``).
* **Progress.** Each ``notifications/progress`` of a call is an ``on_update`` with a partial
  result: one text block (``<progress>/<total> <message>``) and ``details`` ``{"progress",
  "total", "message"}``.
* **Abort and timeout.** The run's abort cancels the request: the SDK sends the server
  ``notifications/cancelled`` (over the 2026 HTTP protocol, it closes the request's stream,
  which is how that protocol cancels), and the call gets the loop's ``Operation aborted``. The
  request runs in a task of the session, not in the tool's task: on asyncio the run cancels a
  tool's task with ``Task.cancel()``, more than once, which would cut short the SDK's shielded
  cancellation notice; the session's task is cancelled through its own cancel scope. A call
  that takes longer than ``timeout`` seconds (per session, 60 by default, the whole call however
  much progress it reports) is cancelled the same way and answered with an error result.
* **Failures never fail the run.** A JSON-RPC error, a closed connection (a crashed server), a
  timeout, an answer that is no valid tool result: each is an error result whose text starts
  ``MCP server "<server>", tool "<tool>":`` and says what happened. A dead server is not
  restarted: its tools keep answering with errors until a new session is opened. Only entering
  the session raises (:class:`MCPConnectionError`), when the server cannot be started, does not
  answer within ``connect_timeout`` or lists its tools wrongly.
* **A tool list that changes.** When the server says its tools changed
  (``notifications/tools/list_changed``, or an event of a ``subscriptions/listen`` stream on the
  2026 protocol, which the session opens when the server offers it), the session lists them
  again: :attr:`MCPSession.tools` is then a new list, and ``on_tools_changed(tools)`` is called.
  A run keeps the tools it started with; give the next run (or ``agent.tools``) the new list.
* The server's name in messages is ``name`` if given, else the name the server gives itself,
  else the command line or URL. Tool annotations are hints only (``mcp.types.Tool`` in
  :attr:`MCPSession.mcp_tools`); none changes how a tool runs (``idempotent`` stays False).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shlex
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TextIO, TypeAlias

import anyio
import anyio.abc
import anyio.lowlevel

try:
    import httpx2
    import mcp.types as mcp_types
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
except ImportError as _exc:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(
        "agentcore_fsm.integrations.mcp needs the MCP SDK: pip install 'agentcore-fsm[mcp]'"
    ) from _exc
from pydantic import BaseModel, ValidationError

from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.messages import TextContent, clip
from agentcore_fsm.core.tool_call import ABORTED_TEXT
from agentcore_fsm.core.tools import AgentTool, AgentToolResult, ToolUpdateCallback
from agentcore_fsm.core.version import __version__
from agentcore_fsm.integrations.mcp_results import (
    closed_in,
    convert_result,
    describe_exception,
    error_result,
    is_closed,
    progress_result,
    rpc_error,
    validation_problems,
)

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "HttpServer",
    "MCPConnectionError",
    "MCPSession",
    "StdioServer",
    "ToolFilter",
]

logger = logging.getLogger("agentcore_fsm.integrations.mcp")

DEFAULT_TIMEOUT = 60.0
"""Seconds a tool call may take before it is cancelled and answered with an error."""
DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds the server has to start, negotiate the protocol and list its tools."""
MAX_PAGES = 100
"""How many pages of ``tools/list`` are read at most (a server that pages forever)."""

ToolFilter: TypeAlias = Collection[str] | Callable[[mcp_types.Tool], bool]
"""Which of the server's tools to keep: their names (the server's, before the prefix), or a
predicate on the SDK's tool description."""


class MCPConnectionError(ConnectionError):
    """The server could not be started or connected to, did not answer in time, or listed its
    tools wrongly (raised when entering an :class:`MCPSession`, or by
    :meth:`MCPSession.refresh_tools`)."""


@dataclass(frozen=True)
class StdioServer:
    """A server run as a subprocess, spoken to over its stdin and stdout.

    ``env`` is added to the small default environment the SDK gives a server (``HOME``,
    ``PATH``, ``USER`` and a few more); the server does not inherit the rest of ours. Its
    stderr goes to ``errlog`` of the session (our stderr by default)."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None

    @classmethod
    def parse(cls, command_line: str) -> StdioServer:
        """A server from a shell-like command line (split as a POSIX shell would, not run by
        one): ``StdioServer.parse("npx -y @modelcontextprotocol/server-everything")``."""
        try:
            words = shlex.split(command_line)
        except ValueError as exc:
            raise ValueError(f"invalid MCP server command line {command_line!r}: {exc}") from None
        if not words:
            raise ValueError("an MCP server command line must not be empty")
        return cls(words[0], tuple(words[1:]))

    def label(self) -> str:
        return shlex.join([Path(self.command).name, *self.args])


@dataclass(frozen=True)
class HttpServer:
    """A server reached over streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:8000/mcp``);
    ``headers`` are sent with every request (an ``Authorization`` header, for example)."""

    url: str
    headers: Mapping[str, str] | None = None

    def label(self) -> str:
        return self.url


@dataclass(eq=False)
class _Call:
    """A tool call in flight. Its request runs in a task of the session (see
    :meth:`MCPSession.call`); ``done`` is set once one of the other fields says how it ended."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    result: mcp_types.CallToolResult | None = None
    failure: str | None = None
    timed_out: bool = False
    lost: str | None = None  # why the session ended the call


@dataclass
class _Listing:
    tools: list[AgentTool] = field(default_factory=list)
    mcp_tools: dict[str, mcp_types.Tool] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


class MCPSession:
    """One MCP server's tools, for as long as the ``async with`` block lasts.

    ``async with MCPSession(server, prefix="", include=None, name=None, timeout=60,
    connect_timeout=30, mode="auto", on_tools_changed=None, errlog=None) as session:``
    gives :attr:`tools`. ``mode="legacy"`` skips the 2026 protocol's probe and speaks the 2025
    handshake (for servers that stumble on the probe). A session is entered once.
    """

    def __init__(
        self,
        server: StdioServer | HttpServer,
        *,
        prefix: str = "",
        include: ToolFilter | None = None,
        name: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        mode: Literal["auto", "legacy"] = "auto",
        on_tools_changed: Callable[[list[AgentTool]], None] | None = None,
        errlog: TextIO | None = None,
    ) -> None:
        if not isinstance(server, StdioServer | HttpServer):
            raise TypeError(
                f"server must be a StdioServer or an HttpServer, not {type(server).__name__}"
            )
        if not (timeout > 0 and connect_timeout > 0):
            raise ValueError("timeout and connect_timeout must be positive numbers of seconds")
        if mode not in ("auto", "legacy"):
            raise ValueError(f'mode must be "auto" or "legacy", not {mode!r}')
        if include is not None and isinstance(include, str):
            raise TypeError("include takes a collection of tool names, not a single str")
        self.server = server
        self.prefix = prefix
        self.include = include
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.mode = mode
        self.on_tools_changed = on_tools_changed
        self.errlog = errlog
        self._name = name
        self._listing = _Listing()
        self._client: Client | None = None
        self._requests: anyio.abc.TaskGroup | None = None  # where tool calls run
        self._entered = False
        self._stack: AsyncExitStack | None = None
        self._closing = anyio.Event()
        self._changed = anyio.Event()
        self._start_error: str | None = None
        self._lost: str | None = None  # why the connection is gone, once it is
        self._calls: set[_Call] = set()
        self._missing: set[str] = set()  # names of `include` the server has no tool for
        self._noise: Exception | None = None  # the last thing the server sent that is no MCP

    # --- what the session offers ------------------------------------------------------------

    @property
    def name(self) -> str:
        """The server's name in messages: ``name``, else the one the server gives itself, else
        its command line or URL."""
        return self._name or self.server.label()

    @property
    def tools(self) -> list[AgentTool]:
        """The server's tools, as listed last (a new list after each change)."""
        return self._listing.tools

    @property
    def mcp_tools(self) -> dict[str, mcp_types.Tool]:
        """The SDK's description of each tool of :attr:`tools`, by the tool's (prefixed) name."""
        return self._listing.mcp_tools

    @property
    def skipped(self) -> dict[str, str]:
        """Tools the server lists that are not in :attr:`tools` (by the server's name), and why:
        an invalid input schema, a name listed twice."""
        return self._listing.skipped

    @property
    def connected(self) -> bool:
        """True while the session is open and its connection has not been lost."""
        return self._client is not None and self._lost is None

    # --- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> MCPSession:
        if self._entered:
            raise RuntimeError("an MCPSession can be entered only once; make a new one")
        self._entered = True
        stack = AsyncExitStack()
        tg = await stack.enter_async_context(anyio.create_task_group())
        try:
            await tg.start(self._own)
        except BaseException:
            self._closing.set()
            await stack.aclose()
            raise
        if self._start_error is not None:
            self._closing.set()
            await stack.aclose()
            raise MCPConnectionError(self._start_error)
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.set()
        stack, self._stack = self._stack, None
        if stack is not None:
            # the body's exception is not handed to the task group: it would wrap it in an
            # exception group; it goes on as it is once the server is stopped
            await stack.aclose()

    async def _own(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """The task that owns the SDK's client: connect, list, serve until closed, close."""
        started = False
        label = self.server.label()
        try:
            with anyio.CancelScope() as connecting:
                connecting.deadline = anyio.current_time() + self.connect_timeout
                async with AsyncExitStack() as stack:
                    client = Client(
                        await self._transport(stack),
                        mode=self.mode,
                        cache=None,
                        message_handler=self._on_message,
                        client_info=mcp_types.Implementation(
                            name="agentcore-fsm", version=__version__
                        ),
                    )
                    await stack.enter_async_context(client)
                    self._client = client
                    info = client.server_info
                    if not self._name and info is not None and info.name.strip():
                        self._name = clip(" ".join(info.name.split()), 60)  # one short line
                    try:
                        self._listing = await self._list(client)
                    except MCPConnectionError as exc:
                        self._start_error = str(exc)
                        return
                    async with anyio.create_task_group() as tg:
                        tools = client.server_capabilities.tools
                        if tools is not None and tools.list_changed:
                            # subscribed before the session is handed out: no change is missed
                            await tg.start(self._listen, client)
                        connecting.deadline = math.inf
                        self._requests = tg
                        started = True
                        task_status.started()
                        tg.start_soon(self._relist_when_changed, client)
                        await self._closing.wait()
                        self._lose("the session is closed")
                        tg.cancel_scope.cancel()
            if connecting.cancelled_caught and not started:
                self._start_error = (
                    f'MCP server "{label}" did not answer within {self.connect_timeout:g} s'
                )
        except Exception as exc:
            why = describe_exception(exc)
            if closed_in(exc):
                why = "the server closed the connection (did it exit?)"
            if not started:
                self._start_error = f'MCP server "{label}" could not be started: {why}'
            else:
                self._lose(f"the connection was lost: {why}")
                logger.warning('MCP server "%s": the connection was lost: %s', self.name, why)
        finally:
            if started:
                self._lose("the session is closed")
            self._client = None
            self._requests = None
            if not started:
                task_status.started()

    async def _transport(self, stack: AsyncExitStack) -> Any:
        server = self.server
        if isinstance(server, StdioServer):
            params = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=dict(server.env) if server.env is not None else None,
                cwd=Path(server.cwd) if server.cwd is not None else None,
            )
            return stdio_client(params, errlog=self.errlog or _stderr())
        http_client = None
        if server.headers:
            http_client = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=dict(server.headers), timeout=httpx2.Timeout(30.0, read=300.0)
                )
            )
        return streamable_http_client(server.url, http_client=http_client)

    def _lose(self, why: str) -> None:
        """The connection is gone: calls in flight are cancelled and answered with ``why``."""
        if self._lost is None:
            self._lost = why
        calls, self._calls = self._calls, set()
        for call in calls:
            if not call.done.is_set():
                call.lost = why
                call.scope.cancel()
                call.done.set()

    # --- listing ----------------------------------------------------------------------------

    async def refresh_tools(self) -> list[AgentTool]:
        """List the server's tools again now (the session also does it by itself when the
        server says they changed); returns the new :attr:`tools`."""
        client = self._client
        if client is None or self._lost is not None:
            raise MCPConnectionError(f'MCP server "{self.name}" is not connected')
        try:
            with anyio.fail_after(self.timeout):
                listing = await self._list(client)
        except TimeoutError:
            raise MCPConnectionError(
                f'MCP server "{self.name}" did not list its tools within {self.timeout:g} s'
            ) from None
        self._install(listing)
        return listing.tools

    async def _list(self, client: Client) -> _Listing:
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        try:
            for _ in range(MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                listed.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            else:
                logger.warning(
                    'MCP server "%s": more than %d pages of tools; the rest is ignored',
                    self.name,
                    MAX_PAGES,
                )
        except ValidationError as exc:
            problems = validation_problems(exc)
            raise MCPConnectionError(
                f'MCP server "{self.name}" sent a tool list that is not valid: {problems}'
            ) from None
        except MCPError as exc:
            raise MCPConnectionError(
                f'MCP server "{self.name}" did not list its tools: {rpc_error(exc)}'
            ) from None
        return self._build(listed)

    def _build(self, listed: list[mcp_types.Tool]) -> _Listing:
        listing = _Listing()
        include = self.include
        previous = self._listing
        seen: set[str] = set()
        for tool in listed:
            if tool.name in seen:
                listing.skipped[tool.name] = "the server lists this name more than once"
                continue
            seen.add(tool.name)
            if include is not None and not (
                include(tool) if callable(include) else tool.name in include
            ):
                continue
            agent_name = self.prefix + tool.name
            old = previous.mcp_tools.get(agent_name)
            if old is not None and old == tool:  # unchanged: keep the same AgentTool
                kept = next(t for t in previous.tools if t.name == agent_name)
                listing.tools.append(kept)
                listing.mcp_tools[agent_name] = tool
                continue
            try:
                made = self._make_tool(tool, agent_name)
            except (ValueError, TypeError) as exc:
                listing.skipped[tool.name] = str(exc)
                if previous.skipped.get(tool.name) != str(exc):  # once, not at every listing
                    logger.warning(
                        'MCP server "%s": tool "%s" is left out: %s', self.name, tool.name, exc
                    )
                continue
            listing.tools.append(made)
            listing.mcp_tools[agent_name] = tool
        if include is not None and not callable(include):
            for missing in sorted(set(include) - seen - self._missing):
                logger.warning('MCP server "%s" has no tool "%s"', self.name, missing)
            self._missing = set(include) - seen
        return listing

    def _make_tool(self, tool: mcp_types.Tool, agent_name: str) -> AgentTool:
        execution = tool.execution
        if execution is not None and execution.task_support == "required":
            raise ValueError(
                f'Tool "{agent_name}": the server runs it only as an MCP task '
                f'(execution.taskSupport "required"), and this client calls tools directly'
            )
        schema = tool.input_schema
        if schema.get("type") != "object":
            raise ValueError(
                f'Tool "{agent_name}": its input schema must be an object schema '
                f'("type": "object"), got "type": {json.dumps(schema.get("type"))}'
            )
        mcp_name = tool.name

        async def execute(
            tool_call_id: str,
            params: Any,
            signal: AbortSignal | None = None,
            on_update: ToolUpdateCallback | None = None,
        ) -> AgentToolResult:
            return await self.call(mcp_name, params, signal=signal, on_update=on_update)

        title = tool.title or (tool.annotations.title if tool.annotations else None)
        return AgentTool(
            name=agent_name,
            description=tool.description or "",
            parameters=schema,
            execute=execute,
            label=title or tool.name,
        )

    def _install(self, listing: _Listing) -> None:
        before = self._listing
        self._listing = listing
        if before.mcp_tools == listing.mcp_tools and before.skipped == listing.skipped:
            return
        logger.info('MCP server "%s": tools are now %s', self.name, [t.name for t in listing.tools])
        if self.on_tools_changed is not None:
            try:
                self.on_tools_changed(listing.tools)
            except Exception:
                logger.exception('MCP server "%s": on_tools_changed raised; ignored', self.name)

    async def _on_message(self, message: Any) -> None:
        """The SDK's message handler: every notification, and what could not be read."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._changed.set()
        elif isinstance(message, Exception):
            self._noise = message
            logger.warning(
                'MCP server "%s" sent something that is not MCP: %s',
                self.name,
                describe_exception(message),
            )
        await anyio.lowlevel.checkpoint()

    async def _relist_when_changed(self, client: Client) -> None:
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            try:
                with anyio.fail_after(self.timeout):
                    listing = await self._list(client)
            except Exception as exc:
                logger.warning(
                    'MCP server "%s": its tools changed but could not be listed again: %s',
                    self.name,
                    "timed out"
                    if isinstance(exc, TimeoutError)
                    else str(exc)
                    if isinstance(exc, MCPConnectionError)
                    else describe_exception(exc),
                )
            else:
                self._install(listing)

    async def _listen(self, client: Client, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """On the 2026 protocol, change notifications come on a ``subscriptions/listen``
        stream: keep one open (its events also reach :meth:`_on_message`). Started once the
        server acknowledged the subscription, or failed to."""
        from mcp.client.subscriptions import ListenNotSupportedError

        started = False
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                started = True
                task_status.started()
                async for _event in subscription:
                    self._changed.set()
        except ListenNotSupportedError:
            pass  # the 2025 protocol: plain notifications
        except Exception as exc:
            logger.warning(
                'MCP server "%s": %s told when its tools change: %s',
                self.name,
                "no longer" if started else "not",
                describe_exception(exc),
            )
        finally:
            if not started:
                task_status.started()

    # --- calling ----------------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        arguments: Any,
        *,
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
    ) -> AgentToolResult:
        """Call the server's tool ``tool`` (its own name, without the prefix) and map its
        answer to an :class:`AgentToolResult`; every failure is an error result (see the
        module's docstring). This is what the tools of :attr:`tools` run."""
        if signal is not None and signal.aborted:
            return error_result(ABORTED_TEXT)
        client = self._client
        if client is None or self._lost is not None:
            return self._failed(tool, f"not connected: {self._lost or 'the session is closed'}")
        if isinstance(arguments, BaseModel):
            arguments = arguments.model_dump(mode="json")
        if arguments is not None and not isinstance(arguments, dict):
            return self._failed(tool, f"arguments must be a JSON object, got {arguments!r}")

        progress: Any = None
        if on_update is not None:
            report = on_update

            async def progress(amount: float, total: float | None, message: str | None) -> None:
                report(progress_result(amount, total, message))

        requests = self._requests
        if requests is None:
            return self._failed(tool, "not connected: the session is closed")
        # The request runs in a task of the session, not in the caller's: a caller cancelled
        # by the run's abort (on asyncio a plain Task.cancel(), possibly more than once) could
        # cut short the SDK's shielded notifications/cancelled; the session's task is cancelled
        # through its own cancel scope only, so the server is always told.
        call = _Call()
        self._calls.add(call)
        requests.start_soon(self._request, client, call, tool, arguments, progress)
        remove = signal.add_callback(call.scope.cancel) if signal is not None else None
        try:
            await call.done.wait()
        finally:
            if remove is not None:
                remove()
            if not call.done.is_set():  # the caller is cancelled: so is the request
                call.scope.cancel()
        if signal is not None and signal.aborted:
            return error_result(ABORTED_TEXT)
        if call.lost is not None:
            return self._failed(tool, f"{call.lost}{self._noise_note()}")
        if call.timed_out:
            return self._failed(
                tool,
                f"no answer within {self.timeout:g} s; the call was cancelled{self._noise_note()}",
            )
        if call.failure is not None:
            return self._failed(tool, call.failure)
        if call.result is None:  # pragma: no cover - cancelled by nothing this module knows
            return self._failed(tool, "the call was cancelled")
        return self._convert(tool, call.result)

    async def _request(
        self, client: Client, call: _Call, tool: str, arguments: Any, progress: Any
    ) -> None:
        """Run one ``tools/call`` (in the session's task group) and record how it ended."""
        cancelled = anyio.get_cancelled_exc_class()
        try:
            with call.scope:
                with anyio.move_on_after(self.timeout) as timer:
                    call.result = await client.call_tool(
                        tool, arguments, progress_callback=progress
                    )
                call.timed_out = timer.cancelled_caught
        except MCPError as exc:
            call.failure = self._mcp_failure(exc)
        except ValidationError as exc:
            call.failure = f"its answer is not a valid tool result: {validation_problems(exc)}"
        except RuntimeError as exc:  # the SDK's check of structured content (output schema)
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            call.failure = f"its answer is not a valid tool result: {first_line}"
        except cancelled:
            raise  # the session is closing: _lose() answers the call
        except Exception as exc:
            call.failure = describe_exception(exc)
        self._calls.discard(call)
        call.done.set()

    def _mcp_failure(self, exc: MCPError) -> str:
        if is_closed(exc):
            self._lost = "its connection closed earlier (did the server exit?)"
            closed = "the connection closed before the tool answered (did the server exit?)"
            return closed + self._noise_note()
        return f"the server answered with an error: {rpc_error(exc)}"

    def _noise_note(self) -> str:
        if self._noise is None:
            return ""
        return (
            f"; the server also sent something that is not MCP: {describe_exception(self._noise)}"
        )

    def _failed(self, tool: str, what: str) -> AgentToolResult:
        return AgentToolResult(
            content=[TextContent(text=f'MCP server "{self.name}", tool "{tool}": {what}')],
            details={"server": self.name, "tool": tool},
            is_error=True,
        )

    def _convert(self, tool: str, result: mcp_types.CallToolResult) -> AgentToolResult:
        return convert_result(self.name, tool, result)


# --- helpers --------------------------------------------------------------------------------


def _stderr() -> TextIO:
    """Where a stdio server's stderr goes by default: ours, as a stream with a file descriptor
    (``sys.stderr`` when it has one, else the process's own, e.g. under pytest's capture)."""
    for stream in (sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        try:
            stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        return stream
    raise RuntimeError("no stderr to give the MCP server; pass errlog=")
