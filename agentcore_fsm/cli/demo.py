"""``agentcore-fsm demo`` (and ``make demo``): a real agent session, offline, in a few seconds.

The model is the bundled :class:`~agentcore_fsm.integrations.providers.faux.FauxProvider`;
everything else is
real. The demo creates a small workspace of invoice files in a temporary directory and asks the
agent what the invoices add up to. The scripted model answers from what it is actually sent
(each response is a callable reading the tool results in its context), so every number in the
final answer was computed by the tools during the run:

1. it lists the workspace (``list_files``, a plain function: it runs in a worker thread);
2. it reads every invoice the listing showed, with parallel ``read_file`` calls;
3. while those run (from inside the first ``read_file`` call to start, so the claim is literally
   true), the user sends a steering message asking for VAT to be added; the transcript says so
   at that moment, and the loop injects it before the next model call
   (``get_steering_messages``);
4. it adds the totals up with the ``calculator`` tool (two parallel calls: the sum, and the sum
   with VAT); the calculator (:mod:`agentcore_fsm.cli.calculator`, shared with ``agentcore-fsm
   chat``) parses arithmetic with :mod:`ast` and computes with :class:`~decimal.Decimal` - no
   ``eval``;
5. it answers with the computed numbers, and saves them in ``summary.txt`` with ``write_file``,
   a tool that needs approval (``requires_approval=True``, see docs/approval.md): the call waits
   in the loop's ``awaiting_approval`` state until the demo user (the script's
   ``decide_approval``) approves it, a moment later;
6. it says where the summary is.

The transcript shows the streamed text as it arrives, every tool call and result, the steering
message, the approval (``approval: write_file {...} -- approved by the demo user``), and every
transition of the loop's state machine (``[fsm] source -(trigger)-> dest``).
At the end the run's diagram (Mermaid, from the declaration and the transitions taken: the path
thick, with counts, and how long the run waited in ``awaiting_approval``) is written to a file
whose path is printed: ``--out PATH``, or by default
``run.mmd`` in the user's own demo directory in the temporary directory,
``agentcore-fsm-demo-USER`` (:func:`demo_directory`: made private to the user, and the files of
the last demo replaced, so that demos do not pile up folders; never
inside the current directory). Next to it go the run's steps in order, as a Markdown table
(``run-steps.md`` for ``run.mmd``), and, when Graphviz is installed, an SVG (``run.svg``).
``--out`` must name a ``.mmd`` or ``.mermaid`` file in an existing directory (none is created);
``--delay`` must be a finite number of seconds, 0 or more. Both are checked before the session
starts: a bad value is a one-line error and exit status 2. The workspace itself is removed when
the demo ends.

The last lines say how the run ended (``outcome: completed``). When it ended in an error or an
abort, the transcript shows the error text where it happened, the outcome line and the run
diagram (in the state where it happened) carry it too, the command repeats it on standard error
and exits with status 1. Tool errors are shown as they happen, and a run that completed despite
them says so in its outcome line and diagram.

The output is plain ASCII, so it reads the same in any terminal or log.

Last, the demo shows a budget being reached (:mod:`agentcore_fsm.cli.demo_budget`): the same
question once more, with ``UsageLimits(tool_calls=3)``; the batch of reads that would go over it
does not run, each of its calls is answered, and the run ends with reason ``limit``. Its lines
come after the summary; they do not change the session's outcome or exit status.

Then two agents (:mod:`agentcore_fsm.cli.demo_nested`): a bookkeeper asks an auditor, an agent
made a tool with ``Agent.as_tool``, to check the invoices' sum; the nested run's events reach
the bookkeeper's listener with the path of calls, and the demo prints them as a tree.
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import inspect
import json
import math
import os
import re
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

import anyio
from pydantic_core import to_jsonable_python

from agentcore_fsm.cli.calculator import calculator_tool
from agentcore_fsm.cli.demo_budget import run_budget
from agentcore_fsm.cli.demo_nested import run_nested
from agentcore_fsm.cli.diagram import output_file_problem
from agentcore_fsm.core.approval import ApprovalDecision, ApprovalRequest
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, LlmContext, StreamOptions
from agentcore_fsm.core.declaration import Declaration, load_declaration
from agentcore_fsm.core.function_tools import tool
from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.core.messages import (
    AgentMessage,
    AssistantMessage,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.devtools.diagrams import (
    GraphvizError,
    find_dot,
    render_dot,
    run_view,
    steps_markdown,
    to_dot,
    to_mermaid,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response
from agentcore_fsm.persist.recorder import run_error, tool_errors
from agentcore_fsm.runtime.driver import run_agent_loop

__all__ = ["main"]

QUESTION = "What do the invoices in my workspace add up to?"
STEERING = "Oh, and please add 20% VAT to the total as well."
SUMMARY = "summary.txt"
APPROVER = "the demo user"
THINKING = 30
"""How long the demo user takes to approve, in streamed chunks (``--delay`` each)."""
INVOICES = {
    "invoices/2024-01-acme.txt": ("ACME Corp", "Anvils (3)", "1249.50"),
    "invoices/2024-02-globex.txt": ("Globex", "Consulting, 2 days", "380.25"),
    "invoices/2024-03-initech.txt": ("Initech", "TPS report covers (500)", "2112.00"),
}


# --- the file tools (plain functions: they run in a worker thread) ---------------------------


def _inside(root: Path, relative: str) -> Path:
    path = (root / relative).resolve()
    if path != root and root not in path.parents:
        raise ValueError(f"{relative!r} is outside the workspace")
    return path


def file_tools(root: Path) -> list[AgentTool]:
    """``list_files``, ``read_file`` and ``write_file`` confined to ``root``: plain functions
    made tools with :func:`~agentcore_fsm.core.function_tools.tool` (their parameters and
    descriptions come from their signatures and docstrings); ``write_file`` needs approval
    (``requires_approval=True``)."""
    root = root.resolve()

    @tool
    def list_files(path: str = ".") -> str:
        """List every file under a directory of the workspace, with sizes.

        Args:
            path: A directory
        """
        base = _inside(root, path)
        if not base.is_dir():
            raise ValueError(f"{path!r} is not a directory")
        lines = [
            f"{p.relative_to(root).as_posix()} ({p.stat().st_size} bytes)"
            for p in sorted(base.rglob("*"))
            if p.is_file()
        ]
        return "\n".join(lines) or "(empty)"

    @tool
    def read_file(path: str) -> str:
        """Read a text file of the workspace."""
        return _inside(root, path).read_text(encoding="utf-8")

    @tool(requires_approval=True)
    def write_file(path: str, content: str) -> str:
        """Write a text file of the workspace (the user approves each write)."""
        target = _inside(root, path)
        data = content.encode("utf-8")
        target.write_bytes(data)
        return f"wrote {len(data)} bytes to {target.relative_to(root).as_posix()}"

    return [list_files, read_file, write_file]


def make_workspace(root: Path) -> None:
    for name, (customer, item, total) in INVOICES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"INVOICE {path.stem.upper()}\nCustomer: {customer}\nItem: {item}\n"
            f"Total: {total} EUR\n",
            encoding="utf-8",
        )
    (root / "notes.txt").write_text("Pay invoices within 30 days.\n", encoding="utf-8")


# --- the scripted model: each response reads what the model was sent ---------------------------


def _results(context: LlmContext) -> list[ToolResultMessage]:
    """The tool results of the latest turn (the messages after the last assistant message)."""
    found: list[ToolResultMessage] = []
    for message in reversed(context.messages):
        if isinstance(message, AssistantMessage):
            break
        if isinstance(message, ToolResultMessage):
            found.append(message)
    return list(reversed(found))


def _text(message: ToolResultMessage) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


def _call(name: str, arguments: dict[str, Any], n: int) -> ToolCall:
    return ToolCall(id=f"demo_{name}_{n}", name=name, arguments=arguments)


def scripted_model() -> list[Callable[[LlmContext], AssistantMessage]]:
    def look(context: LlmContext) -> AssistantMessage:
        return faux_response(
            "Let me see what is in your workspace first.",
            tool_calls=[_call("list_files", {"path": "."}, 1)],
        )

    def read_invoices(context: LlmContext) -> AssistantMessage:
        listing = _text(_results(context)[0])
        paths = re.findall(r"^(invoices/\S+\.txt) ", listing, flags=re.MULTILINE)
        return faux_response(
            f"I found {len(paths)} invoices. I will read them all at once.",
            tool_calls=[_call("read_file", {"path": p}, i) for i, p in enumerate(paths, 1)],
        )

    def add_up(context: LlmContext) -> AssistantMessage:
        totals = [
            re.search(r"^Total: ([0-9.]+)", _text(r), flags=re.MULTILINE) for r in _results(context)
        ]
        amounts = [m.group(1) for m in totals if m is not None]
        wants_vat = any(
            isinstance(m, UserMessage) and "VAT" in str(m.content) for m in context.messages[1:]
        )
        total = " + ".join(amounts)
        calls = [_call("calculator", {"expression": total}, 1)]
        text = f"The invoice totals are {', '.join(amounts)}. Let me add them up"
        if wants_vat:
            calls.append(_call("calculator", {"expression": f"({total}) * 1.2"}, 2))
            text += ", with and without the 20% VAT you asked for."
        else:
            text += "."
        return faux_response(text, tool_calls=calls)

    def answer(context: LlmContext) -> AssistantMessage:
        values = [Decimal(_text(r)) for r in _results(context)]
        text = f"Your three invoices add up to {values[0]:.2f} EUR"
        summary = f"Invoices: {values[0]:.2f} EUR\n"
        if len(values) > 1:
            text += f"; with 20% VAT that is {values[1]:.2f} EUR"
            summary += f"With 20% VAT: {values[1]:.2f} EUR\n"
        call = _call("write_file", {"path": SUMMARY, "content": summary}, 1)
        return faux_response(text + ".", tool_calls=[call])

    def saved(context: LlmContext) -> AssistantMessage:
        result = _results(context)[0]
        if result.is_error:
            return faux_response(f"I could not save the summary: {_text(result)}")
        return faux_response(f"I saved the totals in {SUMMARY}.")

    return [look, read_invoices, add_up, answer, saved]


# --- the run diagram --------------------------------------------------------------------------


_MESSAGE = frozenset({"message_start", "message_end"})
_TOOL = frozenset({"tool_execution_start", "tool_execution_end"})
EMITTED: dict[str, frozenset[str]] = {
    "agent_start": frozenset({"agent_start"}),
    "turn_start": frozenset({"turn_start"}),
    "prompt_messages": _MESSAGE,
    "injected_messages": _MESSAGE,
    "assistant_end": _MESSAGE,
    "truncated_results": _TOOL | _MESSAGE,
    "tool_result_messages": _MESSAGE,
    "unanswered_results": _TOOL | _MESSAGE,
    "turn_end": frozenset({"turn_end"}),
    "failure_turn": _MESSAGE | {"turn_start", "turn_end"},
    "agent_end": frozenset({"agent_end"}),
}
"""The event types each emit action of ``states/agent_loop.toml`` produces."""


class Transcript:
    """Prints the run for a person: text as it streams, tools, steering, transitions.

    The machine reports a transition while it processes an input, before the driver delivers
    the events of that step, and a step's events may come from before or after its transitions
    (a tool's ``tool_execution_end`` precedes the ``tools_settled`` it causes). To print things
    in the order they happened, transitions are held: one is printed just before the first
    event its declared emit actions produce, or, for one that emits nothing, when the driver
    performs the next effect (a poll, a model call, a tool, the approver: :meth:`flush`). Two
    exceptions: a call's ``approval_requested`` comes in the step in which the loop entered
    ``awaiting_approval``, so it is printed after every held transition; ``approval_decided`` is
    printed before the transitions the decision caused. Tools may start in worker threads,
    hence the lock.

    The steering message is sent by :meth:`steer`, which the first ``read_file`` call to start
    runs inside its execution: the line that says so is printed while the reads are running.
    """

    def __init__(self, out: TextIO, steering: list[AgentMessage], decl: Declaration) -> None:
        self.decl = decl
        self.out = out
        self.steering = steering
        self.at_line_start = True
        self.steered = False
        self.turns = 0
        self.pending: list[TransitionRecord] = []
        self.lock = threading.Lock()
        self.closed = False
        """The output was closed by its reader (``demo | head``): the run goes on unprinted."""
        self.end_reason: str | None = None
        self.asked: dict[str, Any] = {}  # the arguments of each call waiting for approval

    def write(self, text: str) -> None:
        with self.lock:
            if self.closed:
                return
            try:
                self.out.write(text)
                self.out.flush()
            except BrokenPipeError:
                self.closed = True
                return
            if text:
                self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        if not self.at_line_start:
            self.write("\n")
        self.write(text + "\n")

    def steer(self) -> None:
        """The user sends the steering message (once): called from inside a running tool, so
        it is sent, and said, while the tools run; the loop injects it before the next model
        call."""
        with self.lock:
            if self.steered:
                return
            self.steered = True
            self.steering.append(UserMessage(content=STEERING))
        self.line("    (while the reads run, the user sends a steering message)")

    def transition(self, record: TransitionRecord) -> None:
        self.pending.append(record)

    def flush(self, upto: int | None = None) -> None:
        """Print the held transitions (the first ``upto`` of them; all by default)."""
        with self.lock:
            cut = len(self.pending) if upto is None else upto
            records, self.pending = self.pending[:cut], self.pending[cut:]
        for r in records:
            self.line(f"    [fsm] {r.source} -({r.trigger})-> {r.dest}")

    def _flush_for(self, kind: str) -> None:
        """Print the held transitions up to the first one whose emit actions make ``kind``."""
        for n, record in enumerate(self.pending):
            emits = self.decl.transitions[record.index].emits
            if any(kind in EMITTED.get(action, {kind}) for action in emits):
                self.flush(n + 1)
                return

    def __call__(self, event: Any) -> None:
        kind = event.type
        if kind == "approval_requested":
            self.flush()  # the loop entered awaiting_approval in this very step
        elif kind != "approval_decided":
            self._flush_for(kind)
        if kind == "turn_start":
            self.turns += 1
            self.line(f"--- turn {self.turns} ---")
        elif kind == "message_update":
            inner = event.assistant_message_event
            if inner.type == "text_start":
                if not self.at_line_start:
                    self.write("\n")
                self.write("assistant > ")
            elif inner.type == "text_delta":
                self.write(inner.delta)
        elif kind == "message_end" and isinstance(event.message, AssistantMessage):
            message = event.message
            if message.stop_reason in ("error", "aborted") or message.error_message:
                error = message.error_message or "(no error message)"
                self.line(f"assistant ! {message.stop_reason}: {error}")
        elif kind == "message_end" and isinstance(event.message, UserMessage):
            text = event.message.content if isinstance(event.message.content, str) else "..."
            who = "user (steering)" if text == STEERING else "user"
            self.line(f"{who} > {text}")
        elif kind == "tool_execution_start":
            args = ", ".join(f"{k}={v!r}" for k, v in (event.args or {}).items())
            self.line(f"    tool  {event.tool_name}({args})")
        elif kind == "tool_execution_end":
            text = "".join(b.text for b in event.result.content if isinstance(b, TextContent))
            shown = text.strip().splitlines() or [""]
            status = "error" if event.is_error else "ok"
            self.line(f"    {status:<5} {event.tool_name} -> {shown[0]}")
            for extra in shown[1:4]:
                self.line(f"          {' ' * len(event.tool_name)}    {extra}")
        elif kind == "approval_requested":
            self.asked[event.tool_call_id] = event.args
            self.line(f"    wait  {event.tool_name} needs approval; the run waits for it")
        elif kind == "approval_decided":
            args = _json(self.asked.pop(event.tool_call_id, None))
            verdict = "approved" if event.approved else f"denied ({event.reason})"
            self.line(f"    approval: {event.tool_name} {args} -- {verdict} by {event.decided_by}")
        elif kind == "agent_end":
            self.end_reason = event.reason
            self.line(f"agent_end: reason={event.reason}, {len(event.messages)} new messages")


def _json(value: Any) -> str:
    """``value`` as one line of ASCII JSON (the transcript is plain ASCII)."""
    return json.dumps(to_jsonable_python(value, fallback=repr))


def _flushing(tool: AgentTool, flush: Callable[[], None]) -> AgentTool:
    """``tool`` with ``flush()`` called as its execution starts (sync stays sync); ``flush``
    may do more (the demo's sends the steering message from inside ``read_file``)."""
    execute: Any = tool.execute
    if inspect.iscoroutinefunction(execute):

        async def run_async(*args: Any) -> Any:
            flush()
            return await execute(*args)

        wrapped: Any = run_async
    else:

        def run_sync(*args: Any) -> Any:
            flush()
            return execute(*args)

        wrapped = run_sync
    return dataclasses.replace(tool, execute=wrapped)


# --- main ------------------------------------------------------------------------------------


MERMAID_SUFFIXES = (".mmd", ".mermaid")


def _delay(text: str) -> float:
    """``--delay``: a finite number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(
            f"must be a finite number of seconds, 0 or more, not {text!r}"
        )
    return value


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="agentcore-fsm demo",
        description="Run a scripted agent session offline (faux provider, real tools).",
    )
    p.add_argument(
        "--out",
        metavar="FILE.mmd",
        help="write the run diagram (Mermaid) to this .mmd or .mermaid file; its directory "
        "must exist (the steps go next to it as NAME-steps.md, and an SVG when Graphviz is "
        "installed). Default: run.mmd in a new temporary directory",
    )
    p.add_argument(
        "--delay",
        type=_delay,
        default=0.01,
        help="seconds between streamed chunks, so that streaming is visible (0 for none)",
    )
    return p.parse_args(argv)


def _out_problem(out: str) -> str | None:
    """Why ``--out`` cannot take the run diagram (None when it can)."""
    problem = output_file_problem("--out", out)
    if problem is None and Path(out).suffix.lower() not in MERMAID_SUFFIXES:
        problem = (
            f"--out {out}: the run diagram is Mermaid, so its name must end in "
            f"{' or '.join(MERMAID_SUFFIXES)}"
        )
    return problem


async def run_demo(
    workspace: Path,
    out: TextIO,
    delay: float,
    script: list[Any] | None = None,
) -> tuple[list[Any], list[TransitionRecord], str | None, list[float]]:
    """Run the session in ``workspace``; return the new messages, the transition records, the
    ``agent_end`` reason and the clock reading (``time.monotonic()``) of each transition.
    ``script``: the model's responses (default :func:`scripted_model`; the tests pass others,
    e.g. one that fails)."""
    steering: list[AgentMessage] = []
    transcript = Transcript(out, steering, load_declaration("agent_loop"))
    records: list[TransitionRecord] = []
    times: list[float] = []

    def on_transition(record: TransitionRecord) -> None:
        records.append(record)
        times.append(time.monotonic())
        transcript.transition(record)

    async def approve(request: ApprovalRequest, signal: Any) -> ApprovalDecision:
        """The demo user looks at the call for a moment, then approves it."""
        transcript.flush()
        await anyio.sleep(delay * THINKING)
        return ApprovalDecision(approved=True, decided_by=APPROVER)

    def get_steering_messages() -> list[AgentMessage]:
        transcript.flush()
        drained = list(steering)
        steering.clear()
        return drained

    def before_read() -> None:
        transcript.flush()
        transcript.steer()

    tools = [
        _flushing(t, before_read if t.name == "read_file" else transcript.flush)
        for t in (*file_tools(workspace), calculator_tool())
    ]
    context = AgentContext(system_prompt="You are a careful bookkeeping assistant.", tools=tools)
    config = AgentLoopConfig(
        model=Model(id="faux-demo", provider="faux", api="faux"),
        get_steering_messages=get_steering_messages,
        decide_approval=approve,
    )
    faux = FauxProvider(scripted_model() if script is None else script, chunk_size=6, delay=delay)

    def stream_fn(model: Model, llm_context: LlmContext, options: StreamOptions) -> Any:
        transcript.flush()
        return faux(model, llm_context, options)

    messages = await run_agent_loop(
        [UserMessage(content=QUESTION)],
        context,
        config,
        transcript,
        stream_fn=stream_fn,
        on_transition=on_transition,
    )
    transcript.flush()
    transcript.line("")
    if transcript.closed:
        raise BrokenPipeError("standard output was closed")
    return messages, records, transcript.end_reason, times


def demo_directory() -> Path:
    """Where the demo writes its diagrams by default: ``agentcore-fsm-demo-USER`` in the
    temporary directory, made (mode 0700) when missing, and the same one every time, so that
    running the demo again replaces its files instead of leaving another folder behind. A path
    there that is not a directory of this user's (a symlink, another user's folder, a file) is
    never written into: a new private directory is made instead (:func:`tempfile.mkdtemp`)."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name to be had (some containers): the uid will do
        user = str(os.getuid())
    path = Path(tempfile.gettempdir()) / f"agentcore-fsm-demo-{user}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = path.lstat()
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
            return path
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="agentcore-fsm-demo-"))


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.out is not None:
        problem = _out_problem(args.out)
        if problem is not None:
            print(f"agentcore-fsm demo: error: {problem}", file=sys.stderr)
            return 2
    out = sys.stdout
    decl = load_declaration("agent_loop")
    with tempfile.TemporaryDirectory(prefix="agentcore-fsm-demo-workspace-") as tmp:
        workspace = Path(tmp)
        make_workspace(workspace)
        print("agentcore-fsm demo: a scripted agent session on the faux provider (offline).")
        print(f"workspace: {workspace} ({len(INVOICES)} invoices and a note)")
        print(
            "tools: list_files, read_file, write_file (worker threads; each write needs "
            "approval), calculator (ast, no eval)"
        )
        print()
        messages, records, end_reason, times = anyio.run(
            run_demo, workspace, out, args.delay, backend="trio"
        )
        budget = anyio.run(  # a budget reached (docs/demo.md)
            run_budget,
            QUESTION,
            make_workspace,
            lambda root: [*file_tools(root), calculator_tool()],
            scripted_model,
            backend="trio",
        )
    amounts = [amount for _, _, amount in INVOICES.values()]
    agents = anyio.run(run_nested, amounts, backend="trio")  # an agent as a tool (docs/demo.md)
    final = messages[-1]
    if args.out is not None:
        target = Path(args.out)
    else:
        target = demo_directory() / "run.mmd"
    failure = run_error(messages, end_reason)
    answered = isinstance(final, AssistantMessage) and final.stop_reason == "stop"
    ok = failure is None and end_reason == "completed" and answered
    if not ok and failure is None:
        failure = f"the run ended with reason {end_reason!r} and no answer"
    outcome = "completed" if ok else ("aborted" if end_reason == "aborted" else "error")
    failed_tools = tool_errors(messages)
    view = run_view(
        decl,
        records,
        outcome=outcome,
        label="demo run",
        error=failure,
        tool_errors=failed_tools,
        times=times,
    )
    steps = target.with_name(target.stem + "-steps.md")
    svg: Path | None = None
    try:
        target.write_text(to_mermaid(decl, view), encoding="utf-8")
        steps.write_text(steps_markdown(decl, view), encoding="utf-8")
        if find_dot() is not None:  # an SVG too, when Graphviz is installed
            svg = target.with_suffix(".svg")
            svg.write_bytes(render_dot(to_dot(decl, view), "svg"))
    except (OSError, GraphvizError) as exc:
        print(f"agentcore-fsm demo: error: cannot write the run diagram: {exc}", file=sys.stderr)
        return 1
    tools = sum(isinstance(m, ToolResultMessage) for m in messages)
    print(
        f"{len(records)} transitions, {tools} tool results, "
        f"final state: {records[-1].dest if records else decl.initial}"
    )
    if failure is not None:
        print(f"outcome: {outcome}: {failure}")
    elif failed_tools:
        listed = "; ".join(failed_tools)
        print(f"outcome: {outcome} despite {len(failed_tools)} tool error(s): {listed}")
    else:
        print(f"outcome: {outcome}")
    print(f"run diagram (Mermaid): {target}")
    print(f"run steps (Markdown): {steps}")
    if svg is not None:
        print(f"run diagram (SVG): {svg}")
    print()
    print("\n".join(budget))
    print()
    print("\n".join(agents))
    if failure is not None:
        what = "was aborted" if end_reason == "aborted" else "ended with an error"
        print(f"agentcore-fsm demo: the run {what}: {failure}", file=sys.stderr)
    return 0 if ok else 1
