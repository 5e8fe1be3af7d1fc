"""``agentcore-fsm bench``: our loop against a minimal hand-written loop doing the same work.

Both sides run in one process, on the same anyio backend (trio by default), over two workloads:

* **W1**: one prompt; the model streams 50 text deltas; no tools.
* **W2**: three turns: 10 deltas and 4 parallel calls of an instant async ``echo(x: int)``
  tool; the same again; then 20 deltas and stop (8 tool executions in all).
* **W2 journaled**: W2 journaled in a :class:`~agentcore_fsm.SqliteRunStore` (a file in a
  temporary directory, one run id per run) against *our own* W2 in memory, runs alternating:
  what making a run survive a crash costs. Every journaled run is checked and must be marked
  finished in the store.

*Our side* uses the public API as a user would: :func:`~agentcore_fsm.run_agent_loop` with an
:class:`~agentcore_fsm.AgentTool` whose parameters are a JSON-schema dict, and a real stream
function: it builds a fresh stream event for every delta and keeps a partial
:class:`~agentcore_fsm.AssistantMessage` up to date, as a provider does (``--model faux`` uses
the bundled :class:`~agentcore_fsm.integrations.providers.faux.FauxProvider` instead).

*The minimal loop* is what a careful person would write by hand for exactly this job and no more:
plain dicts, an async-generator fake model that also keeps a partial message up to date, the same
events (same types, same order) delivered to an emit callback, tool calls run concurrently in the
backend's own task group (see :data:`RUN_ALL`), arguments parsed from JSON and type-checked,
result messages in source order. It has no validation library, no hooks, no abort and no failure
handling: it is the floor, not a rival.

Honesty rules this file keeps:

* Before timing, each workload runs once on both sides with a recording sink, and the bench
  refuses to go on unless both emitted the identical sequence of event types.
* Every timed run is checked (streamed text, number of events, tool results) right after its
  timer stops; a run that did not do the work aborts the bench. Nothing is skipped.
* Timers wrap only the run itself; building the prompt and the per-run fake model happens before.
* Runs of the two sides alternate, so that drift (GC, caches, frequency) hits both alike.
* Memory: ``tracemalloc`` peak over a batch of concurrent runs divided by the number of runs,
  measured in a separate pass (tracemalloc slows everything down, so it is never timed).
* Import time: the median wall time of fresh ``python -c "import agentcore_fsm"`` processes,
  next to that of processes importing the required dependencies the package loads (anyio,
  transitions, and pydantic's ``BaseModel``: ``import pydantic`` alone loads almost nothing of
  it, its models load on first use) and of ``python -c pass`` (the interpreter's own start-up),
  runs alternating after one untimed run of each. They read compiled bytecode, as an installed
  package does: the processes keep it in a temporary ``PYTHONPYCACHEPREFIX`` filled by the
  untimed runs (so a ``PYTHONDONTWRITEBYTECODE`` setting does not turn every run into a
  compile, and the source tree gets no ``__pycache__``). A process that fails stops the bench.

The printed ratios are ``ours / minimal``: lower is better. The targets are the project's (see
:data:`TARGETS`): W1 and W2 at most 3x, W2 concurrent 2.5x, memory 1.8x, W2 journaled at most
1.3x our in-memory W2, and the import at most 2x importing the dependencies.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.abc

from agentcore_fsm.cli.bench_minimal import (
    MINIMAL_TOOLS,
    RUN_ALL,
    MinimalRun,
    MinimalSink,
    RunAll,
    minimal_loop,
    minimal_model,
)
from agentcore_fsm.cli.bench_workloads import (
    PROMPT,
    BenchError,
    Turn,
    Workload,
    expected_event_count,
    workload_w1,
    workload_w2,
)
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, LlmContext, StreamOptions
from agentcore_fsm.core.events import (
    StreamDone,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from agentcore_fsm.core.messages import (
    AssistantMessage,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    grow_text,
)
from agentcore_fsm.core.tools import AgentTool, AgentToolResult
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response
from agentcore_fsm.runtime.driver import run_agent_loop

__all__ = [
    "MINIMAL_TOOLS",
    "RUN_ALL",
    "BenchError",
    "MinimalRun",
    "MinimalSink",
    "Turn",
    "Workload",
    "expected_event_count",
    "main",
    "minimal_loop",
    "minimal_model",
    "workload_w1",
    "workload_w2",
]

TARGETS = {
    "W1": 3.0,
    "W2": 3.0,
    "W2 journaled": 1.3,
    "W2 concurrent": 2.5,
    "memory": 1.8,
    "import": 2.0,
}
"""The highest acceptable ratio ``ours / minimal`` of each row (for "W2 journaled": W2 journaled
in a SQLite run store against our own W2 in memory; for "import": ``import agentcore_fsm``
against importing the dependencies, :data:`DEPS_CODE`)."""
IMPORT_CODE = "import agentcore_fsm"
DEPS_CODE = "import anyio, transitions; from pydantic import BaseModel"
"""The required dependencies as the package loads them on import (trio and jsonschema, also
required, load with a run that needs them)."""
BARE_CODE = "pass"


# --- our side ---------------------------------------------------------------------------------


def bench_stream_fn(w: Workload) -> Callable[[Model, LlmContext, StreamOptions], Any]:
    """A stream function playing ``w`` (one turn per call), built like a real provider: a fresh
    event per delta, one partial message updated in place, arguments parsed from JSON."""
    turns = iter(w.turns)

    async def stream(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[Any]:
        turn = next(turns)
        partial = AssistantMessage(
            api=model.api, provider=model.provider, model=model.id, stop_reason="pending"
        )
        content = partial.content
        yield StreamStart(partial=partial)
        if turn.deltas:
            block = TextContent(text="")
            content.append(block)
            yield TextStart(content_index=0, partial=partial)
            for delta in turn.deltas:
                grow_text(block, delta)  # as the providers do (integrations/providers)
                yield TextDelta(content_index=0, delta=delta, partial=partial)
            yield TextEnd(content_index=0, content=block.text, partial=partial)
        for call_id, args in turn.calls:
            index = len(content)
            call = ToolCall(id=call_id, name="echo", arguments={})
            content.append(call)
            yield ToolCallStart(content_index=index, partial=partial)
            yield ToolCallDelta(content_index=index, delta=args, partial=partial)
            call.arguments = json.loads(args)
            yield ToolCallEnd(content_index=index, tool_call=call, partial=partial)
        reason: Literal["toolUse", "stop"] = "toolUse" if turn.calls else "stop"
        partial.stop_reason = reason
        yield StreamDone(reason=reason, message=partial)

    return stream


def faux_stream_fn(w: Workload) -> FauxProvider:
    """The bundled faux provider scripted with ``w`` (8-character chunks: the same deltas)."""
    responses = []
    for t in w.turns:
        calls = [ToolCall(id=i, name="echo", arguments=json.loads(a)) for i, a in t.calls]
        responses.append(faux_response("".join(t.deltas) or None, tool_calls=calls))
    return FauxProvider(responses, chunk_size=8)


async def _echo_execute(
    tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any
) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=str(params["x"]))])


ECHO_TOOL = AgentTool(
    name="echo",
    description="Return x.",
    parameters={
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
    },
    execute=_echo_execute,
)
MODEL = Model(id="bench-model", provider="bench", api="bench")


class OurSink:
    """The emit callback of our side: keeps the streamed text and counts events."""

    __slots__ = ("events", "text", "tool_ends")

    def __init__(self) -> None:
        self.events = 0
        self.tool_ends = 0
        self.text: list[str] = []

    def __call__(self, event: Any) -> None:
        """Count ``event``; keep its text delta, count a tool end."""
        self.events += 1
        kind = event.type
        if kind == "message_update":
            inner = event.assistant_message_event
            if inner.type == "text_delta":
                self.text.append(inner.delta)
        elif kind == "tool_execution_end":
            self.tool_ends += 1


class OurRun:
    """One run of our loop: everything but the run itself is built in ``__init__``."""

    __slots__ = ("fn", "journal", "messages", "prompt", "sink")

    def __init__(self, w: Workload, model: str, journal: dict[str, Any] | None = None) -> None:
        self.sink = OurSink()
        self.prompt = UserMessage(content=PROMPT)
        self.fn: Any = faux_stream_fn(w) if model == "faux" else bench_stream_fn(w)
        self.messages: list[Any] = []
        self.journal = journal or {}

    async def __call__(self, context: AgentContext, config: AgentLoopConfig) -> None:
        """Run our loop once (what is timed)."""
        self.messages = await run_agent_loop(
            [self.prompt], context, config, self.sink, stream_fn=self.fn, **self.journal
        )

    def check(self, w: Workload) -> None:
        """Raise :class:`BenchError` unless the run did ``w``'s work (text, events, results)."""
        sink = self.sink
        results = [m for m in self.messages if isinstance(m, ToolResultMessage)]
        texts = [r.content[0].text for r in results if isinstance(r.content[0], TextContent)]
        problems = []
        if "".join(sink.text) != w.text:
            problems.append("streamed text differs")
        if sink.events != expected_event_count(w):
            problems.append(f"{sink.events} events, expected {expected_event_count(w)}")
        if sink.tool_ends != len(w.echo_values) or texts != w.echo_values:
            problems.append(f"tool results {texts}, expected {w.echo_values}")
        if any(r.is_error for r in results):
            problems.append("a tool result is an error")
        last = self.messages[-1] if self.messages else None
        if not isinstance(last, AssistantMessage) or last.stop_reason != "stop":
            problems.append("the run did not end with a final assistant message")
        if problems:
            raise BenchError(f"our loop, {w.name}: " + "; ".join(problems))


# --- measuring --------------------------------------------------------------------------------


@dataclass
class Setup:
    """What both sides share for a whole bench: our context and config (built once, as a user
    would), our stream-function kind, and how the minimal loop runs a tool batch."""

    context: AgentContext
    config: AgentLoopConfig
    model: str
    run_all: RunAll

    def ours(self, w: Workload) -> OurRun:
        """A fresh run of our loop on ``w``."""
        return OurRun(w, self.model)

    def minimal(self, w: Workload) -> MinimalRun:
        """A fresh run of the minimal loop on ``w``."""
        return MinimalRun(w, self.run_all)


def _event_signature(event: Any) -> str:
    if isinstance(event, dict):
        kind = event["type"]
        inner = event.get("assistant_message_event")
        return f"{kind}:{inner['type']}" if inner is not None else kind
    inner = getattr(event, "assistant_message_event", None)
    return f"{event.type}:{inner.type}" if inner is not None else str(event.type)


async def check_same_events(w: Workload, setup: Setup) -> int:
    """Run ``w`` once on each side, recording every event; raise unless the sequences of event
    types (message updates with their stream event's type) are identical. Returns the count."""
    ours: list[Any] = []
    run = setup.ours(w)
    await run_agent_loop([run.prompt], setup.context, setup.config, ours.append, stream_fn=run.fn)
    minimal: list[dict[str, Any]] = []
    base = setup.minimal(w)
    await minimal_loop(base.prompt, base.model, MINIMAL_TOOLS, minimal.append, setup.run_all)
    a = [_event_signature(e) for e in ours]
    b = [_event_signature(e) for e in minimal]
    if a != b:
        raise BenchError(f"{w.name}: the loops emitted different events:\n ours: {a}\n min:  {b}")
    return len(a)


@dataclass
class Row:
    """One line of the table: our figure and the minimal one, in ``unit``, and the target.

    ``target`` bounds the ratio ``ours / minimal``, or, when ``absolute``, ``ours`` itself (in
    ``unit``); ``digits`` is how many decimals the figures are printed with."""

    label: str
    ours: float
    minimal: float
    unit: str
    target: float | None
    absolute: bool = False
    digits: int = 1

    @property
    def ratio(self) -> float:
        """``ours / minimal`` (lower is better)."""
        return self.ours / self.minimal if self.minimal else float("inf")

    @property
    def met(self) -> bool:
        """Whether the row is within its target (true when it has none), judged on the figure
        as printed (a ratio of 2.004 prints as 2.00x and meets a 2x target), so that the verdict
        never contradicts the number beside it."""
        if self.target is None:
            return True
        if self.absolute:
            return round(self.ours, self.digits) <= self.target
        return round(self.ratio, 2) <= self.target


async def time_sequential(
    w: Workload, iterations: int, warmup: int, setup: Setup
) -> tuple[float, float]:
    """Median µs per run of each side, runs alternating; every run is checked after its timer."""
    context, config = setup.context, setup.config

    async def pair(i: int) -> tuple[int, int]:
        run = setup.ours(w)
        ours = await _timed(lambda: run(context, config))
        run.check(w)
        base = setup.minimal(w)
        minimal = await _timed(base)
        base.check(w)
        return ours, minimal

    return await _medians(pair, iterations, warmup)


async def _timed(run: Callable[[], Awaitable[Any]]) -> int:
    """How long ``await run()`` took, in ns."""
    clock = time.perf_counter_ns
    t0 = clock()
    await run()
    return clock() - t0


async def _medians(
    pair: Callable[[int], Awaitable[tuple[int, int]]], iterations: int, warmup: int
) -> tuple[float, float]:
    """The median µs of each side of ``pair(i)`` (two timings in ns) over ``iterations`` pairs
    after ``warmup`` untimed ones."""
    first: list[int] = []
    second: list[int] = []
    for i in range(warmup + iterations):
        a, b = await pair(i)
        if i >= warmup:
            first.append(a)
            second.append(b)
    return statistics.median(first) / 1000, statistics.median(second) / 1000


async def time_journaled(
    w: Workload, iterations: int, warmup: int, setup: Setup, path: str
) -> tuple[float, float]:
    """Median µs per run of ``w`` journaled in a :class:`~agentcore_fsm.SqliteRunStore` at
    ``path`` and of the same run in memory, alternating; every run is checked."""
    from agentcore_fsm.persist.store import SqliteRunStore

    context, config = setup.context, setup.config
    with SqliteRunStore(path) as store:

        async def pair(i: int) -> tuple[int, int]:
            run = OurRun(w, setup.model, {"store": store, "run_id": f"bench-{i}"})
            journaled = await _timed(lambda: run(context, config))
            run.check(w)
            if store.load(f"bench-{i}").status != "finished":
                raise BenchError(f"{w.name}: the journaled run was not marked finished")
            base = setup.ours(w)
            plain = await _timed(lambda: base(context, config))
            base.check(w)
            return journaled, plain

        return await _medians(pair, iterations, warmup)


async def _timed_batch(start: Callable[[anyio.abc.TaskGroup], None]) -> int:
    t0 = time.perf_counter_ns()
    async with anyio.create_task_group() as tg:
        start(tg)
    return time.perf_counter_ns() - t0


def _starter_ours(runs: list[OurRun], setup: Setup) -> Callable[[anyio.abc.TaskGroup], None]:
    def start(tg: anyio.abc.TaskGroup) -> None:
        for run in runs:
            tg.start_soon(run, setup.context, setup.config)

    return start


def _starter_minimal(runs: list[MinimalRun]) -> Callable[[anyio.abc.TaskGroup], None]:
    def start(tg: anyio.abc.TaskGroup) -> None:
        for run in runs:
            tg.start_soon(run)

    return start


async def time_concurrent(w: Workload, n: int, repeats: int, setup: Setup) -> tuple[float, float]:
    """Median over ``repeats`` batches of (wall time of ``n`` runs started at once) / ``n``. The
    batch is started from one task group on both sides (the same outer cost)."""
    ours: list[float] = []
    minimal: list[float] = []
    for _ in range(repeats):
        our_runs = [setup.ours(w) for _ in range(n)]
        elapsed = await _timed_batch(_starter_ours(our_runs, setup))
        for run in our_runs:
            run.check(w)
        ours.append(elapsed / n / 1000)
        our_runs.clear()
        min_runs = [setup.minimal(w) for _ in range(n)]
        elapsed = await _timed_batch(_starter_minimal(min_runs))
        for base in min_runs:
            base.check(w)
        minimal.append(elapsed / n / 1000)
    return statistics.median(ours), statistics.median(minimal)


async def _traced_peak(start: Callable[[anyio.abc.TaskGroup], None]) -> int:
    """tracemalloc's peak (over the baseline) while the tasks ``start`` spawns run."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        async with anyio.create_task_group() as tg:
            start(tg)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


async def measure_memory(w: Workload, n: int, setup: Setup) -> tuple[float, float]:
    """Bytes per run: tracemalloc's peak while ``n`` runs execute concurrently, over ``n``. The
    runs' inputs (prompt, fake model) are built before the baseline is taken; what a run
    creates (its events, its transcript) counts."""
    our_runs = [setup.ours(w) for _ in range(n)]
    ours = await _traced_peak(_starter_ours(our_runs, setup))
    for run in our_runs:
        run.check(w)
    our_runs.clear()
    min_runs = [setup.minimal(w) for _ in range(n)]
    minimal = await _traced_peak(_starter_minimal(min_runs))
    for base in min_runs:
        base.check(w)
    return ours / n, minimal / n


def _process_seconds(code: str, env: dict[str, str]) -> float:
    """Wall time of one fresh ``python -c code`` process; :class:`BenchError` if it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise BenchError(f"python -c {code!r} failed (exit status {proc.returncode}): {last}")
    return elapsed


def measure_import(runs: int) -> tuple[float, float, float]:
    """Median wall time in seconds of ``runs`` fresh processes running ``import
    agentcore_fsm``, of as many importing the dependencies (:data:`DEPS_CODE`) and of as many
    running ``pass`` (the interpreter's start-up alone). They alternate, after one untimed run
    of each, which compiles the bytecode they then read (kept in a temporary directory, see the
    module docstring)."""
    codes = (IMPORT_CODE, DEPS_CODE, BARE_CODE)
    with tempfile.TemporaryDirectory(prefix="agentcore-fsm-bench-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for code in codes:
            _process_seconds(code, env)
        times: list[list[float]] = [[], [], []]
        for _ in range(runs):
            for code, kept in zip(codes, times, strict=True):
                kept.append(_process_seconds(code, env))
    ours, deps, bare = (statistics.median(kept) for kept in times)
    return ours, deps, bare


def import_row(runs: int) -> tuple[Row, float]:
    """The table's import-time row: ``import agentcore_fsm`` against importing the
    dependencies, in seconds (target: :data:`TARGETS` ``["import"]``), and the interpreter's
    start-up (``python -c pass``) for the notes."""
    ours, deps, bare = measure_import(runs)
    label = "import agentcore_fsm (fresh process)"
    return Row(label, ours, deps, "s", TARGETS["import"], digits=3), bare


async def run_bench(args: argparse.Namespace) -> list[Row]:
    """Check that both loops emit the same events, then time W1, W2 and W2 concurrent and
    measure memory: the table's rows, in that order."""
    w1 = workload_w1(args.deltas)
    w2 = workload_w2()
    kind = args.backend if args.minimal_taskgroup == "native" else "anyio"
    setup = Setup(
        context=AgentContext(tools=[ECHO_TOOL]),
        config=AgentLoopConfig(model=MODEL),
        model=args.model,
        run_all=RUN_ALL[kind],
    )
    for w in (w1, w2):
        await check_same_events(w, setup)
    rows = []
    for w in (w1, w2):
        ours, minimal = await time_sequential(w, args.iterations, args.warmup, setup)
        label = f"{w.name} ({len(w.turns)} turn{'s' if len(w.turns) > 1 else ''}, "
        label += f"{sum(len(t.deltas) for t in w.turns)} deltas, {len(w.echo_values)} tools)"
        rows.append(Row(label, ours, minimal, "µs/run", TARGETS[w.name]))
    if args.store_iterations:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "runs.db")
            warmup = min(args.warmup, args.store_iterations)
            journaled, plain = await time_journaled(w2, args.store_iterations, warmup, setup, path)
        label = "W2 journaled (SqliteRunStore)"
        rows.append(Row(label, journaled, plain, "µs/run", TARGETS["W2 journaled"]))
    # one small untimed batch first, so that the measured batches do not pay one-time costs
    await time_concurrent(w2, min(args.concurrent, 50), 1, setup)
    ours, minimal = await time_concurrent(w2, args.concurrent, args.repeats, setup)
    label = f"W2 x{args.concurrent} concurrent"
    rows.append(Row(label, ours, minimal, "µs/run", TARGETS["W2 concurrent"]))
    ours, minimal = await measure_memory(w2, args.concurrent, setup)
    label = f"memory per W2 run (x{args.concurrent})"
    rows.append(Row(label, ours / 1024, minimal / 1024, "KiB/run", TARGETS["memory"]))
    return rows


def format_table(rows: list[Row], args: argparse.Namespace) -> str:
    """The printed report: a header line naming the settings, then one line per row."""
    py = ".".join(map(str, sys.version_info[:3]))
    head = (
        f"agentcore-fsm bench: backend={args.backend}, model={args.model}, python {py}, "
        f"minimal task group={args.minimal_taskgroup}, {args.iterations} runs per workload "
        f"(median), {args.concurrent} concurrent x {args.repeats}"
    )
    if args.otel:
        head += ", otel=on"
    lines = [head, ""]
    lines.append(f"{'workload':<40} {'ours':>10} {'minimal':>10} {'unit':<8} {'ratio':>7}  target")
    for r in rows:
        verdict = ""
        if r.target is not None:
            bound = f"{r.target:g} {r.unit}" if r.absolute else f"{r.target:g}x"
            verdict = f"<= {bound}  " + ("ok" if r.met else "MISSED")
        ratio = "-" if r.absolute else f"{r.ratio:.2f}x"
        numbers = f"{r.ours:>10.{r.digits}f} {r.minimal:>10.{r.digits}f} {r.unit:<8} {ratio:>7}"
        lines.append(f"{r.label:<40} {numbers}  {verdict}")
    lines.append("")
    lines.append("ratio = ours / minimal (lower is better); every run was checked.")
    if any(r.label.startswith("W2 journaled") for r in rows):
        lines.append(
            "W2 journaled: ours = W2 journaled in a SQLite run store, minimal = our own W2 in "
            "memory (what surviving a crash costs)."
        )
    if any(r.label.startswith("import") for r in rows):
        bare = getattr(args, "bare_seconds", None)
        lines.append(
            f"import: median wall time of {args.import_runs} fresh processes each (bytecode "
            f"cached); minimal = '{DEPS_CODE}'"
            + (f"; 'python -c pass' took {bare:.3f} s." if bare is not None else ".")
        )
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The bench's options (``agentcore-fsm bench --help`` lists them); exits with status 2 on
    a bad one."""
    p = argparse.ArgumentParser(
        prog="agentcore-fsm bench",
        description="Measure our loop against a minimal hand-written loop doing the same work.",
    )
    p.add_argument("--backend", choices=["trio", "asyncio"], default="trio")
    p.add_argument("--iterations", type=int, default=1000, help="timed runs per workload")
    p.add_argument("--warmup", type=int, default=100, help="untimed runs before timing")
    p.add_argument("--concurrent", type=int, default=1000, help="W2 runs started at once")
    p.add_argument("--repeats", type=int, default=3, help="concurrent batches (median)")
    p.add_argument("--deltas", type=int, default=50, help="text deltas in W1")
    p.add_argument(
        "--store-iterations",
        type=int,
        default=300,
        help="timed runs of W2 journaled in a SQLite run store, against our W2 in memory; "
        "0 leaves the row out",
    )
    p.add_argument(
        "--import-runs",
        type=int,
        default=7,
        help="fresh processes timed for the import row (median); 0 leaves the row out",
    )
    p.add_argument(
        "--model",
        choices=["bench", "faux"],
        default="bench",
        help="our side's stream function: a lean provider-like one, or the bundled FauxProvider",
    )
    p.add_argument(
        "--minimal-taskgroup",
        choices=["native", "anyio"],
        default="native",
        help="how the minimal loop runs tools: the backend's own task group (default) or anyio's",
    )
    p.add_argument(
        "--otel",
        action="store_true",
        help="trace our side with agentcore_fsm.integrations.otel on the OpenTelemetry SDK (needs "
        "opentelemetry-sdk): what tracing costs",
    )
    args = p.parse_args(argv)
    for name in ("iterations", "concurrent", "repeats", "deltas"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.warmup < 0:
        p.error("--warmup must not be negative")
    if args.import_runs < 0:
        p.error("--import-runs must not be negative")
    if args.store_iterations < 0:
        p.error("--store-iterations must not be negative")
    return args


def main(argv: list[str]) -> int:
    """Run ``agentcore-fsm bench`` with ``argv`` and print the table; 0 on success, 1 when a
    run did not do its work (nothing is printed then but the reason), 2 for bad options."""
    args = parse_args(argv)
    stop_tracing = _trace_ours() if args.otel else None
    try:
        rows = anyio.run(run_bench, args, backend=args.backend)
        if args.import_runs:
            row, args.bare_seconds = import_row(args.import_runs)
            rows.append(row)
    except BenchError as exc:
        print(f"agentcore-fsm bench: {exc}", file=sys.stderr)
        return 1
    finally:
        if stop_tracing is not None:
            stop_tracing()
    print(format_table(rows, args))
    return 0


def _trace_ours() -> Callable[[], None]:
    """``--otel``: trace and meter every run of our side (the minimal loop has no tracing) with
    :mod:`agentcore_fsm.integrations.otel` on the OpenTelemetry SDK, as a service would: spans go
    through a
    batch processor to an exporter that drops them, measurements are aggregated in memory.
    Returns what switches it off again."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from agentcore_fsm.integrations.otel import instrument, uninstrument

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Dropped()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    instrument(tracer_provider, meter_provider)

    def stop() -> None:
        uninstrument()
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return stop
