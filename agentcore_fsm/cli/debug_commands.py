"""``agentcore-fsm fork`` and ``agentcore-fsm diff``: time travel from the terminal
(docs/debugging.md).

``agentcore-fsm fork RUN --at N [EDIT] -o FORK.jsonl`` forks a run (a recording, or a run of a
SQLite store with ``--run ID``) at step ``N`` with at most one edit, continues it live and
records the fork into ``FORK.jsonl``. The live part needs the run's model and tools: ``--demo``
gives the demo's (its file tools in a fresh workspace, its scripted model, its approver and
steering), ``--tools MODULE:ATTR`` and ``--stream MODULE:ATTR`` (and ``--config MODULE:ATTR``
for hooks) give an application's. ``agentcore-fsm diff A B [--json]`` compares two runs step by
step; its exit status is 0 when they took the same steps, 1 when they differ.

Bad input (a file that cannot be read, a damaged record, a step the run does not have, an edit
that does not fit the step, runs that cannot be aligned, a module that cannot be imported): one
line on standard error naming what was wrong, exit status 2, and nothing written.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from agentcore_fsm.cli.calculator import calculator_tool
from agentcore_fsm.cli.demo import (
    APPROVER,
    QUESTION,
    STEERING,
    file_tools,
    make_workspace,
    scripted_model,
)
from agentcore_fsm.core.approval import ApprovalDecision, ApprovalRequest
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, StreamFn
from agentcore_fsm.core.messages import AgentMessage, Model, UserMessage
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.devtools.diff import DiffError, DiffSource, diff_runs
from agentcore_fsm.devtools.fork import (
    KEEP,
    ChangeModel,
    Edit,
    ForkError,
    ForkSource,
    Messages,
    ModelAnswer,
    Settings,
    Steer,
    ToolResult,
    check_fork,
    fork_run,
    nested_to_keep,
    plan_fork,
    polled_items,
    read_parent,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider
from agentcore_fsm.persist.recorder import RunRecorder
from agentcore_fsm.persist.store import SqliteRunStore
from agentcore_fsm.runtime.driver import run_agent_loop

__all__ = [
    "COMMAND_MAINS",
    "DEMO_RUN_ID",
    "demo_world",
    "diff_main",
    "fork_main",
    "main",
    "record_demo_run",
]

DEMO_RUN_ID = "demo"
"""The run id of :func:`record_demo_run`'s recording."""
DEMO_MODEL = Model(id="faux-demo", provider="faux", api="faux")


# --- the demo's world -------------------------------------------------------------------------


def demo_world(
    workspace: Path, entries: Sequence[dict[str, Any]] = ()
) -> tuple[AgentLoopConfig, list[AgentTool], StreamFn]:
    """The demo's config, tools and model for a run that has already taken ``entries`` (the
    steps a fork replays): its file tools in ``workspace`` and the calculator, its scripted
    model without the answers those steps hold, its approver, and its steering message, sent
    (once) when ``read_file`` first runs unless those steps already injected it. Its tools run
    one after another (``agentcore-fsm demo`` runs them in parallel), so that the demo run's
    record is the same every time: the same steps, numbered the same."""
    answered = sum(e.get("input") in ("stream_done", "stream_error") for e in entries)
    steered = any(e.get("input") == "steering_polled" and polled_items(e) for e in entries)
    pending: list[AgentMessage] = []

    def steering() -> list[AgentMessage]:
        sent = list(pending)
        pending.clear()
        return sent

    def when_read() -> None:
        nonlocal steered
        if not steered:
            steered = True
            pending.append(UserMessage(content=STEERING))

    def approve(request: ApprovalRequest, signal: Any) -> ApprovalDecision:
        return ApprovalDecision(approved=True, decided_by=APPROVER)

    tools = [*file_tools(workspace), calculator_tool()]
    tools = [_on_read(t, when_read) if t.name == "read_file" else t for t in tools]
    config = AgentLoopConfig(
        model=DEMO_MODEL,
        get_steering_messages=steering,
        decide_approval=approve,
        tool_execution="sequential",  # one after another: the same record every time
    )
    return config, tools, FauxProvider(scripted_model()[answered:])


def _on_read(tool: AgentTool, before: Callable[[], None]) -> AgentTool:
    execute = tool.execute

    async def run(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        before()
        result = execute(call_id, params, signal, on_update)
        return await result if hasattr(result, "__await__") else result

    return dataclasses.replace(tool, execute=run)


def record_demo_run(path: str | Path) -> None:
    """Run the demo's session (the same tools, model, approver and steering as ``agentcore-fsm
    demo``, quietly, in a temporary workspace) and record it into ``path`` as run
    :data:`DEMO_RUN_ID`."""

    async def go(workspace: Path) -> None:
        config, tools, model = demo_world(workspace)
        context = AgentContext(
            system_prompt="You are a careful bookkeeping assistant.", tools=tools
        )
        with RunRecorder(path) as recorder:
            await run_agent_loop(
                [UserMessage(content=QUESTION)],
                context,
                config,
                stream_fn=model,
                store=recorder.store,
                run_id=DEMO_RUN_ID,
            )

    with tempfile.TemporaryDirectory(prefix="agentcore-fsm-demo-workspace-") as tmp:
        make_workspace(Path(tmp))
        anyio.run(go, Path(tmp), backend="trio")


# --- reading runs --------------------------------------------------------------------------------


class _Bad(Exception):
    """A bad argument: one line, exit status 2."""


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _source(text: str) -> ForkSource:
    path = Path(text)
    if not path.exists():
        raise _Bad(f"cannot read {text}: no such file")
    return SqliteRunStore(path) if _is_sqlite(path) else path


def _attr(spec: str, what: str) -> Any:
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise _Bad(f"{what} {spec!r} must be MODULE:ATTRIBUTE")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        value: Any = importlib.import_module(module_name)
        for part in name.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise _Bad(f"{what} {spec!r}: {exc}") from None
    return value


# --- fork --------------------------------------------------------------------------------------


def _fork_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentcore-fsm fork",
        description="Fork a recorded or stored run at a step: replay the steps before it "
        "exactly, apply an edit there, continue live and record the fork.",
    )
    p.add_argument("run", metavar="RUN", help="a recording (.jsonl) or a SQLite run store")
    p.add_argument("--run", dest="run_id", metavar="ID", help="the run to fork (a store's)")
    p.add_argument("--at", type=int, required=True, metavar="N", help="the step to fork at")
    p.add_argument("-o", "--out", required=True, metavar="FORK.jsonl", help="record the fork here")
    p.add_argument("--fork-id", metavar="ID", help="the fork's run id (default: RUN@N)")
    edits = p.add_mutually_exclusive_group()
    edits.add_argument("--tool-result", metavar="TEXT", help="the tool result at step N")
    edits.add_argument("--answer", metavar="TEXT", help="the model's answer at step N")
    edits.add_argument("--steer", metavar="TEXT", help="add a steering message at step N")
    edits.add_argument("--prompt", metavar="TEXT", help="the prompt (at step 0)")
    edits.add_argument("--model", metavar="ID", help="continue with this model id from step N")
    edits.add_argument("--reasoning", metavar="LEVEL", help="continue with this reasoning level")
    edits.add_argument(
        "--tool-execution", choices=("parallel", "sequential"), help="continue in this mode"
    )
    p.add_argument("--error", action="store_true", help="--tool-result is an error result")
    p.add_argument("--demo", action="store_true", help="continue with the demo's model and tools")
    p.add_argument("--tools", metavar="MODULE:ATTR", help="the run's tools (a list)")
    p.add_argument("--stream", metavar="MODULE:ATTR", help="the stream function (the model)")
    p.add_argument("--config", metavar="MODULE:ATTR", help="an AgentLoopConfig with the hooks")
    return p


def _edit(args: argparse.Namespace, header: dict[str, Any]) -> Edit | None:
    if args.error and args.tool_result is None:
        raise _Bad("--error goes with --tool-result")
    if args.tool_result is not None:
        return ToolResult(args.tool_result, is_error=args.error)
    if args.answer is not None:
        return ModelAnswer(args.answer)
    if args.steer is not None:
        return Steer(args.steer)
    if args.prompt is not None:
        return Messages([args.prompt])
    if args.model is not None:
        recorded = header.get("model") if isinstance(header.get("model"), dict) else {}
        base = {k: v for k, v in (recorded or {}).items() if k in ("provider", "api")}
        return ChangeModel(Model(id=args.model, name=args.model, **base))
    if args.reasoning is not None:
        return Settings(reasoning=None if args.reasoning == "none" else args.reasoning)
    if args.tool_execution is not None:
        return Settings(reasoning=KEEP, tool_execution=args.tool_execution)
    return None


def _fork(args: argparse.Namespace, workspace: Path) -> str:
    source = _source(args.run)
    if isinstance(source, SqliteRunStore) and args.run_id is None:
        raise _Bad(f"{args.run} is a run store: name the run to fork with --run ID")
    parent = read_parent(source, args.run_id)
    edit = _edit(args, parent.header)
    plan = plan_fork(parent, args.at, edit)
    if Path(args.out).resolve() == Path(args.run).resolve():
        raise _Bad(f"-o {args.out}: the fork would overwrite the run it forks")
    if not Path(args.out).parent.is_dir():
        raise _Bad(f"-o {args.out}: its directory does not exist")
    config: AgentLoopConfig
    stream: StreamFn | None
    if args.demo:
        if args.tools or args.stream or args.config:
            raise _Bad("--demo gives the model and tools: not with --tools, --stream, --config")
        config, tools, stream = demo_world(workspace, plan.entries)
    else:
        given = _attr(args.config, "--config") if args.config else None
        if given is not None and not isinstance(given, AgentLoopConfig):
            raise _Bad(f"--config {args.config!r} is not an AgentLoopConfig")
        config = given or AgentLoopConfig(model=DEMO_MODEL)
        tools = list(_attr(args.tools, "--tools")) if args.tools else []
        stream = _attr(args.stream, "--stream") if args.stream else None
    check_fork(plan, config, tools)
    nested_to_keep(source, plan)  # nested records that do not fit: refused now
    # everything checked: now the fork is written

    async def go() -> str:
        with RunRecorder(args.out) as recorder:
            result = await fork_run(
                source,
                args.at,
                edit,
                run=args.run_id,
                config=config,
                tools=tools,
                stream_fn=stream,
                store=recorder.store,
                run_id=args.fork_id,
            )
        snapshot = result.snapshot()
        ended = result.store.load(result.run_id).end_reason
        return (
            f"forked run {parent.run_id!r} at step {args.at} "
            f"({parent.entries[args.at].get('input')}) into run {result.run_id!r}: "
            f"{len(snapshot.entries)} steps, ended {ended}; recorded in {args.out}"
        )

    return anyio.run(go, backend="trio")


def fork_main(argv: list[str]) -> int:
    """``agentcore-fsm fork``: returns the exit status (0, or 2 for bad input)."""
    args = _fork_parser().parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="agentcore-fsm-fork-") as tmp:
            if args.demo:
                make_workspace(Path(tmp))
            print(_fork(args, Path(tmp)))
    except (_Bad, ForkError, DiffError) as exc:
        print(f"agentcore-fsm fork: error: {exc}", file=sys.stderr)
        return 2
    return 0


# --- diff --------------------------------------------------------------------------------------


def _diff_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentcore-fsm diff",
        description="Compare two runs step by step: where they first diverge (input, state, "
        "event), then the rest side by side. Exit status 0: the same steps; 1: they differ.",
    )
    p.add_argument("a", metavar="A", help="a recording (.jsonl) or a SQLite run store")
    p.add_argument("b", metavar="B", help="a recording (.jsonl) or a SQLite run store")
    p.add_argument("--run-a", metavar="ID", help="the run of A (default: a recording's last)")
    p.add_argument("--run-b", metavar="ID", help="the run of B (default: a recording's last)")
    p.add_argument("--json", action="store_true", help="print the diff as JSON")
    return p


def _diff_source(text: str, run: str | None, flag: str) -> DiffSource:
    source = _source(text)
    if isinstance(source, SqliteRunStore):
        if run is None:
            raise _Bad(f"{text} is a run store: name its run with {flag} ID")
        return (source, run)
    return source


def diff_main(argv: list[str]) -> int:
    """``agentcore-fsm diff``: returns the exit status (0 same, 1 different, 2 bad input)."""
    args = _diff_parser().parse_args(argv)
    try:
        a = _diff_source(args.a, args.run_a, "--run-a")
        b = _diff_source(args.b, args.run_b, "--run-b")
        diff = diff_runs(a, b, run_a=args.run_a, run_b=args.run_b)
    except (_Bad, DiffError) as exc:
        print(f"agentcore-fsm diff: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(diff.data(), ensure_ascii=False, indent=1))
    else:
        print(diff.text())
    return 0 if diff.same else 1


COMMAND_MAINS = {"fork": fork_main, "diff": diff_main}
"""The command each subcommand of this module runs (``cli/commands.py`` picks by name)."""


def main(argv: list[str]) -> int:
    """``fork`` or ``diff`` by the first argument (``COMMAND_MAINS``)."""
    if not argv or argv[0] not in COMMAND_MAINS:
        print("usage: agentcore-fsm fork|diff ...", file=sys.stderr)
        return 2
    return COMMAND_MAINS[argv[0]](argv[1:])
