"""``agentcore-fsm chat``: an interactive session with a real model.

::

    export OPENAI_API_KEY=...        # or ANTHROPIC_API_KEY for --provider anthropic
    agentcore-fsm chat --provider openai --model gpt-4o-mini
    agentcore-fsm chat --provider anthropic --model claude-sonnet-4-6 --thinking medium
    agentcore-fsm chat --provider openai --model llama3.2 --base-url http://localhost:11434/v1

Each line you type is a prompt; the reply streams as it is written, tool calls and their
results are shown as they run, and a usage line follows each reply. The conversation is kept
between prompts (``/reset`` clears it). **Ctrl-C aborts the reply in progress**, not the
program; at the prompt, Ctrl-C, Ctrl-D or ``/exit`` ends the session. Reading from a pipe
works too (no prompt is printed then), which is how the tests drive it.

When a reply fails, the error text is printed where it happened (``[error] HTTP 429 ...``), and
an aborted reply says ``[aborted]`` (with the reason, when there is more to say than that it
was aborted). A run that ends in an error or an abort without a failed reply to show it (an
abort while tools run) says so when it ends: ``[aborted] add: Operation aborted``. A tool
result that is an error is printed as ``[error] ...`` as it arrives.

The model has two safe built-in tools (``--no-tools`` leaves them out):

* ``current_time`` — the current date and time, in UTC or an IANA time zone;
* ``calculator`` — exact decimal arithmetic on numbers (``+ - * / // % **``, parentheses), the
  same as the demo's (:mod:`agentcore_fsm.cli.calculator`). The expression is parsed, never
  evaluated as Python: anything else (names, functions, ...) is refused, and sizes are bounded
  so that no expression can exhaust memory or time.

``--mcp "<command line>"`` (repeatable; the ``mcp`` extra) starts that MCP server over stdio for
the session and adds its tools, after the built-in ones, as the server lists them before each
prompt (see docs/mcp.md). A server that cannot be started ends the command with exit status 2.
``--mcp-tools NAME,NAME`` keeps only those tools of the servers (a name that no server offers
ends the command with exit status 2, naming the tools offered).

``--approve`` asks before each tool call runs: the tool's name and its arguments (as JSON) are
shown, ``y`` approves, anything else denies (the model then reads that the call was "denied at
the terminal"), and the decision is printed (``[approved] NAME`` / ``[denied] NAME: denied at
the terminal``). Every tool of the session, MCP ones included, then needs approval
(``requires_approval=True``, see docs/approval.md); the calls of one reply are asked about one
after the other, and none of them runs before every answer is in. Ctrl-C at the question
aborts the reply.

Arguments are checked before anything starts: an empty ``--model``, a ``--base-url`` that is
not an http(s) URL with a host, a ``--max-tokens`` below 1 or an ``--mcp`` command line that
cannot be split into words is refused with exit status 2.

Keys come from ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``. With ``--base-url`` (a local
OpenAI-compatible server) a key is optional. A model missing from the table in
:mod:`agentcore_fsm.integrations.providers.models` is described generically (zero prices).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shlex
import signal
import sys
import urllib.parse
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TextIO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import anyio
import anyio.abc
import anyio.to_thread
from pydantic_core import to_jsonable_python

from agentcore_fsm.cli.calculator import calculator_tool
from agentcore_fsm.core.abort import AbortController
from agentcore_fsm.core.approval import ApprovalDecision, ApprovalRequest
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, StreamFn
from agentcore_fsm.core.messages import AssistantMessage, Model, TextContent, UserMessage
from agentcore_fsm.core.tools import AgentTool, AgentToolResult
from agentcore_fsm.integrations.providers._common import ABORTED_MESSAGE
from agentcore_fsm.integrations.providers.models import (
    ANTHROPIC_API,
    ANTHROPIC_BASE_URL,
    OPENAI_BASE_URL,
    get_model,
    openai_compatible_model,
)
from agentcore_fsm.persist.recorder import run_error
from agentcore_fsm.runtime.driver import run_agent_loop

__all__ = ["builtin_tools", "main"]

LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

# --- the built-in tools ---------------------------------------------------------------------

TIME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "timezone": {
            "type": "string",
            "description": "An IANA time zone such as 'Europe/Paris'. Default: UTC.",
        }
    },
    "additionalProperties": False,
}


def _text(text: str) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=text)])


async def _current_time(call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> Any:
    name = params.get("timezone") or "UTC"
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"Unknown time zone {name!r}") from None
    now = dt.datetime.now(zone)
    return _text(f"{now.isoformat(timespec='seconds')} ({now:%A}, {name})")


def builtin_tools() -> list[AgentTool]:
    """The chat's tools: ``current_time`` and ``calculator``."""
    return [
        AgentTool(
            name="current_time",
            description="The current date and time (ISO 8601), in UTC or a given time zone.",
            parameters=TIME_SCHEMA,
            execute=_current_time,
            label="Current time",
        ),
        calculator_tool(
            description="Evaluate an arithmetic expression exactly; use it for any arithmetic.",
            label="Calculator",
        ),
    ]


# --- output ---------------------------------------------------------------------------------


class Printer:
    """Writes a run's events as a readable transcript, streaming text as it arrives."""

    def __init__(self, out: TextIO, color: bool) -> None:
        self.out = out
        self.color = color
        self.line_open = False  # the last write did not end a line
        self.thinking_label = False
        self.ending_shown = False  # this run's failed or aborted reply was printed

    def dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.color else text

    def write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self.line_open = not text.endswith("\n")

    def line(self, text: str) -> None:
        """Write ``text`` on a line of its own."""
        self.write(("\n" if self.line_open else "") + text + "\n")

    def __call__(self, event: Any) -> None:
        kind = event.type
        if kind == "agent_start":
            self.ending_shown = False
        elif kind == "message_update":
            inner = event.assistant_message_event
            inner_kind = inner.type
            if inner_kind == "text_delta":
                self.write(inner.delta)
            elif inner_kind == "thinking_start":
                self.thinking_label = True  # shown with the first delta (omitted thinking: none)
            elif inner_kind == "thinking_delta" and inner.delta:
                label, self.thinking_label = self.thinking_label, False
                self.write(self.dim(("[thinking] " if label else "") + inner.delta))
            elif inner_kind in ("text_end", "thinking_end") and self.line_open:
                self.write("\n")
        elif kind == "tool_execution_start":
            args = json.dumps(event.args, ensure_ascii=False)
            self.line(self.dim(f"[tool] {event.tool_name} {args}"))
        elif kind == "tool_execution_end":
            texts = [b.text for b in event.result.content if isinstance(b, TextContent)]
            mark = "error" if event.is_error else "result"
            self.line(self.dim(f"[{mark}] {' '.join(texts)}"))
        elif kind == "message_end" and isinstance(event.message, AssistantMessage):
            message = event.message
            if message.stop_reason == "aborted":
                reason = message.error_message
                shown = reason if reason and reason != ABORTED_MESSAGE else None
                self.line("[aborted]" + (f" {shown}" if shown else ""))
                self.ending_shown = True
            elif message.stop_reason == "error":
                self.line(f"[error] {message.error_message or '(no error message)'}")
                self.ending_shown = True
        elif kind == "agent_end" and event.reason in ("error", "aborted"):
            if not self.ending_shown:
                self.line(f"[{event.reason}] {run_error(event.messages, event.reason)}")
            self.ending_shown = True

    def usage(self, messages: list[Any]) -> None:
        replies = [m for m in messages if isinstance(m, AssistantMessage)]
        if not replies:
            return
        tokens_in = sum(m.usage.input for m in replies)
        cached = sum(m.usage.cache_read for m in replies)
        tokens_out = sum(m.usage.output for m in replies)
        cost = sum(m.usage.cost.total for m in replies)
        if not (tokens_in or cached or tokens_out):
            return
        line = f"[usage] {tokens_in} input"
        if cached:
            line += f" (+{cached} cached)"
        line += f", {tokens_out} output tokens"
        if cost:
            line += f", ${cost:.6f}"
        self.line(self.dim(line))


# --- the session ----------------------------------------------------------------------------


def _model_id(text: str) -> str:
    """``--model``: any id but an empty one."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def _base_url(text: str) -> str:
    """``--base-url``: an http or https URL with a host."""
    try:
        parts = urllib.parse.urlsplit(text)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # e.g. a bad port or bracketed host
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(
            f"must be an http(s) URL such as http://localhost:11434/v1, not {text!r}"
        )
    return text


def _max_tokens(text: str) -> int:
    """``--max-tokens``: a whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number, at least 1, not {text!r}")
    return value


def _tool_names(text: str) -> frozenset[str]:
    """``--mcp-tools``: tool names, comma-separated, at least one."""
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"expected tool names separated by commas, not {text!r}")
    return names


def _mcp_command(text: str) -> str:
    """``--mcp``: a command line that splits into words (as a POSIX shell splits it)."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"cannot split {text!r} into words: {exc}") from None
    if not words:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="agentcore-fsm chat",
        description="Chat with a real model (OpenAI-compatible Chat Completions or Anthropic).",
    )
    parser.add_argument("--provider", choices=("openai", "anthropic"), default="openai")
    parser.add_argument("--model", type=_model_id, required=True, help="model id, e.g. gpt-4o-mini")
    parser.add_argument(
        "--base-url",
        type=_base_url,
        help="API base URL, http(s) (any OpenAI-compatible server for --provider openai)",
    )
    parser.add_argument("--system", default="You are a helpful assistant.", help="system prompt")
    parser.add_argument("--thinking", choices=LEVELS, default="off", help="reasoning level")
    parser.add_argument(
        "--max-tokens", type=_max_tokens, help="output token limit per reply (at least 1)"
    )
    parser.add_argument("--no-tools", action="store_true", help="leave the built-in tools out")
    parser.add_argument(
        "--approve",
        action="store_true",
        help="ask y/n at the terminal before each tool call runs",
    )
    parser.add_argument(
        "--mcp",
        action="append",
        default=[],
        type=_mcp_command,
        metavar="COMMAND",
        help="an MCP server to run over stdio (its command line, quoted); adds its tools "
        "(repeatable)",
    )
    parser.add_argument(
        "--mcp-tools",
        type=_tool_names,
        metavar="NAME,NAME",
        help="with --mcp: keep only these tools of the MCP servers (their names, comma-separated)",
    )
    args = parser.parse_args(argv)
    if args.mcp_tools is not None and not args.mcp:
        parser.error("--mcp-tools only goes with --mcp")
    return args


def resolve_model(provider: str, model_id: str, base_url: str | None, thinking: str) -> Model:
    """The model from the table, or a generic description of it."""
    try:
        model = get_model(provider, model_id)
    except KeyError:
        if provider == "openai":
            model = openai_compatible_model(
                model_id,
                base_url or OPENAI_BASE_URL,
                provider="openai-compatible" if base_url else "openai",
                reasoning=thinking != "off",
            )
        else:
            model = Model(
                id=model_id,
                api=ANTHROPIC_API,
                provider="anthropic",
                base_url=ANTHROPIC_BASE_URL,
                reasoning=True,
                input=["text", "image"],
            )
    if base_url:
        model = model.model_copy(update={"base_url": base_url})
    return model


def make_stream_fn(provider: str) -> StreamFn:
    if provider == "openai":
        from agentcore_fsm.integrations.providers.openai import OpenAIProvider

        return OpenAIProvider()
    from agentcore_fsm.integrations.providers.anthropic import AnthropicProvider

    return AnthropicProvider()


class _SigintWatch:
    """Ctrl-C during a run aborts it; at the prompt it ends the session."""

    def __init__(self) -> None:
        self.controller: AbortController | None = None
        self.quit = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[bool]) -> None:
        with contextlib.ExitStack() as stack:
            try:
                signals = stack.enter_context(anyio.open_signal_receiver(signal.SIGINT))
            except (NotImplementedError, ValueError, RuntimeError):
                # no signal support here (not the main thread, or a platform without it):
                # Ctrl-C keeps its default meaning
                task_status.started(False)
                return
            task_status.started(True)
            async for _ in signals:
                if self.controller is not None:
                    self.controller.abort()
                else:
                    self.quit.set()


async def _with_mcp(args: argparse.Namespace, stream_fn: StreamFn, api_key: str | None) -> int:
    """The session, with the ``--mcp`` servers started before it and stopped after it."""
    if not args.mcp:
        return await _session(args, stream_fn, api_key)
    try:
        from agentcore_fsm.integrations.mcp import MCPConnectionError, MCPSession, StdioServer
    except ImportError as exc:
        print(f"agentcore-fsm chat: {exc}", file=sys.stderr)
        return 2
    async with contextlib.AsyncExitStack() as stack:
        servers = []
        for command in args.mcp:
            try:
                session = MCPSession(StdioServer.parse(command))
                servers.append(await stack.enter_async_context(session))
            except MCPConnectionError as exc:
                print(f"agentcore-fsm chat: {exc}", file=sys.stderr)
                return 2
        if args.mcp_tools is not None:
            offered = {tool.name for server in servers for tool in server.tools}
            unknown = sorted(args.mcp_tools - offered)
            if unknown:
                print(
                    f"agentcore-fsm chat: error: --mcp-tools: no MCP server offers "
                    f"{', '.join(map(repr, unknown))} (offered: "
                    f"{', '.join(sorted(offered)) or 'none'})",
                    file=sys.stderr,
                )
                return 2
        return await _session(args, stream_fn, api_key, servers)


async def _session(
    args: argparse.Namespace, stream_fn: StreamFn, api_key: str | None, mcp: Sequence[Any] = ()
) -> int:
    stdin, stdout = sys.stdin, sys.stdout
    interactive = stdin.isatty()
    printer = Printer(stdout, color=stdout.isatty())
    model = resolve_model(args.provider, args.model, args.base_url, args.thinking)
    tools = [] if args.no_tools else builtin_tools()
    context = AgentContext(args.system, [], tools)
    config = AgentLoopConfig(
        model=model,
        api_key=api_key,
        reasoning=None if args.thinking == "off" else args.thinking,
        max_tokens=args.max_tokens,
    )
    watch = _SigintWatch()
    code = 0
    async with anyio.create_task_group() as tg:
        await tg.start(watch.run)
        lines = _Lines(stdin, tg)
        if args.approve:
            config.decide_approval = _Approver(lines, printer, interactive)
        if interactive:
            printer.write(
                f"Chatting with {model.id} ({model.provider}). Ctrl-C aborts a reply; "
                "Ctrl-D or /exit quits; /reset clears the conversation.\n"
            )
        while True:
            if interactive:
                printer.write("\nyou> ")
            line = await _read_line(lines, watch)
            printer.line_open = False  # the Enter that ended the line ended it on screen too
            if line is None:
                code = 130
                break
            if line == "":
                if interactive:
                    printer.write("\n")
                break
            text = line.strip()
            if not text:
                continue
            if text in ("/exit", "/quit"):
                break
            if text == "/reset":
                context.messages.clear()
                printer.write("[conversation cleared]\n")
                continue
            keep = args.mcp_tools
            served = [t for server in mcp for t in server.tools if keep is None or t.name in keep]
            context.tools = [*tools, *served]
            if args.approve:  # every call asks first (see _Approver)
                context.tools = [replace(t, requires_approval=True) for t in context.tools]
            controller = AbortController()
            watch.controller = controller
            try:
                new = await run_agent_loop(
                    [UserMessage(content=text)],
                    context,
                    config,
                    printer,
                    signal=controller.signal,
                    stream_fn=stream_fn,
                )
            finally:
                watch.controller = None
            context.messages.extend(new)
            printer.usage(new)
        tg.cancel_scope.cancel()
    if code == 130:
        printer.write("\n")
    return code


class _Lines:
    """Standard input, line by line, read in a worker thread so that the event loop goes on.
    A read whose reader gave up (Ctrl-C at the prompt, an abort while an approval question
    waits) goes on in its thread, and its line goes to the next reader instead of being lost
    to a second thread reading at the same time. The reads run in the session's task group."""

    def __init__(self, stdin: TextIO, tg: anyio.abc.TaskGroup) -> None:
        self.stdin = stdin
        self.tg = tg
        self._read: anyio.Event | None = None  # set once the read in progress has its line
        self._line = ""

    async def readline(self) -> str:
        """The next line ('' at end of input)."""
        done = self._read
        if done is None:
            done = self._read = anyio.Event()
            self.tg.start_soon(self._read_one, done)
        await done.wait()
        self._read = None
        return self._line

    async def _read_one(self, done: anyio.Event) -> None:
        self._line = await anyio.to_thread.run_sync(self.stdin.readline, abandon_on_cancel=True)
        done.set()


class _Approver:
    """``--approve``: the session's ``decide_approval``. It asks at the terminal, one call at a
    time, showing the tool's name and arguments as JSON; ``y`` approves, anything else denies.
    The question and the decision are printed; piped input is echoed after the question, so
    that the transcript reads as it would on a terminal."""

    DENIED = "denied at the terminal"

    def __init__(self, lines: _Lines, printer: Printer, interactive: bool) -> None:
        self.lines = lines
        self.printer = printer
        self.interactive = interactive
        self.lock = anyio.Lock()  # one question at a time

    async def __call__(self, request: ApprovalRequest, signal: Any) -> ApprovalDecision:
        printer, name = self.printer, request.tool_name
        async with self.lock:
            args = json.dumps(to_jsonable_python(request.args, fallback=repr), ensure_ascii=False)
            printer.write(("\n" if printer.line_open else "") + f"[approve?] {name} {args} [y/N] ")
            answer = await self.lines.readline()
            if self.interactive and answer.endswith("\n"):
                printer.line_open = False  # the Enter ended the line on screen
            else:
                printer.write(answer.strip() + "\n")
            if answer.strip().lower() == "y":
                printer.line(f"[approved] {name}")
                return ApprovalDecision(approved=True, decided_by="terminal")
            printer.line(f"[denied] {name}: {self.DENIED}")
            return ApprovalDecision(approved=False, reason=self.DENIED, decided_by="terminal")


async def _read_line(lines: _Lines, watch: _SigintWatch) -> str | None:
    """The next line ('' at end of input), or None when Ctrl-C was pressed at the prompt."""
    result: list[str] = []
    async with anyio.create_task_group() as tg:

        async def read() -> None:
            result.append(await lines.readline())
            tg.cancel_scope.cancel()

        async def interrupted() -> None:
            await watch.quit.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(read)
        tg.start_soon(interrupted)
    return result[0] if result else None


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:  # a missing extra first: no key would help without it
        stream_fn = make_stream_fn(args.provider)
    except ImportError as exc:
        print(f"agentcore-fsm chat: {exc}", file=sys.stderr)
        return 2
    variable = KEY_VARIABLES[args.provider]
    api_key = os.environ.get(variable) or None
    if api_key is None:
        if not (args.provider == "openai" and args.base_url):
            print(
                f"agentcore-fsm chat: set {variable} (your {args.provider} API key)",
                file=sys.stderr,
            )
            return 2
        api_key = "not-needed"  # a local OpenAI-compatible server usually wants none
    try:
        code: int = anyio.run(_with_mcp, args, stream_fn, api_key, backend="trio")
    except KeyboardInterrupt:  # Ctrl-C before the handler was installed
        return 130
    return code
