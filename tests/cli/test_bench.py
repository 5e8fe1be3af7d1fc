"""``agentcore-fsm bench`` works, and checks what it measures. No timing is asserted here: the
tests check the output's shape (every row, its unit, its target, a verdict that agrees with the
printed figures), never a speed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore_fsm import AgentContext, AgentLoopConfig, cli
from agentcore_fsm.cli import bench as bench_module
from agentcore_fsm.cli.bench import (
    ECHO_TOOL,
    MINIMAL_TOOLS,
    MODEL,
    RUN_ALL,
    BenchError,
    MinimalRun,
    OurRun,
    Setup,
    Turn,
    Workload,
    check_same_events,
    expected_event_count,
    minimal_loop,
    minimal_model,
    workload_w1,
    workload_w2,
)

TINY = [
    "--iterations",
    "3",
    "--warmup",
    "1",
    "--concurrent",
    "4",
    "--repeats",
    "1",
    "--import-runs",
    "0",
    "--store-iterations",
    "2",
]
ROW = re.compile(
    r"^(?P<label>.+?)\s+(?P<ours>\d+\.\d)\s+(?P<minimal>\d+\.\d)\s+(?P<unit>\S+)\s+"
    r"(?P<ratio>\d+\.\d\d)x\s+<= (?P<target>\d+(\.\d+)?)x\s+(?P<verdict>ok|MISSED)$"
)
IMPORT_ROW = re.compile(
    r"^import agentcore_fsm \(fresh process\)\s+(?P<ours>\d+\.\d{3})\s+"
    r"(?P<minimal>\d+\.\d{3})\s+s\s+(?P<ratio>\d+\.\d\d)x\s+<= 2x\s+(?P<verdict>ok|MISSED)$"
)


def _rows(out: str) -> dict[str, re.Match[str]]:
    rows = {}
    for line in out.splitlines():
        match = ROW.match(line)
        if match:
            rows[match["label"]] = match
    return rows


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize("extra", [[], ["--model", "faux", "--minimal-taskgroup", "anyio"]])
def test_bench_prints_every_row_with_its_ratio(
    backend: str, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["bench", "--backend", backend, *TINY, *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith(f"agentcore-fsm bench: backend={backend}, ")
    rows = _rows(out)
    assert list(rows) == [
        "W1 (1 turn, 50 deltas, 0 tools)",
        "W2 (3 turns, 40 deltas, 8 tools)",
        "W2 journaled (SqliteRunStore)",
        "W2 x4 concurrent",
        "memory per W2 run (x4)",
    ], out
    targets = [float(r["target"]) for r in rows.values()]
    assert targets == [3.0, 3.0, 1.3, 2.5, 1.8]
    assert [r["unit"] for r in rows.values()] == ["µs/run"] * 4 + ["KiB/run"]
    assert "minimal = our own W2 in memory" in out
    for row in rows.values():
        ours, minimal, ratio = float(row["ours"]), float(row["minimal"]), float(row["ratio"])
        assert ours > 0 and minimal > 0
        # the ratio is ours / minimal (up to the rounding of the printed numbers)
        assert ours / minimal == pytest.approx(ratio, rel=0.05, abs=0.02)
        assert row["verdict"] == ("ok" if ratio <= float(row["target"]) else "MISSED")
    assert "every run was checked" in out
    assert "import agentcore_fsm" not in out  # --import-runs 0


def test_bench_reports_the_import_time(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["bench", *TINY, "--import-runs", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    rows = [line for line in lines if IMPORT_ROW.match(line)]
    assert len(rows) == 1, out
    match = IMPORT_ROW.match(rows[0])
    assert match is not None
    ours, deps, ratio = float(match["ours"]), float(match["minimal"]), float(match["ratio"])
    assert ours > 0 and deps > 0
    # the ratio is ours / the dependencies' import (up to the rounding of the printed numbers)
    assert ours / deps == pytest.approx(ratio, rel=0.05, abs=0.02)
    assert match["verdict"] == ("ok" if ratio <= 2.0 else "MISSED")
    # the last row of the table, after the five loop rows
    assert list(_rows(out)) == [
        "W1 (1 turn, 50 deltas, 0 tools)",
        "W2 (3 turns, 40 deltas, 8 tools)",
        "W2 journaled (SqliteRunStore)",
        "W2 x4 concurrent",
        "memory per W2 run (x4)",
    ]
    assert lines.index(rows[0]) == max(lines.index(line) for line in lines if ROW.match(line)) + 1
    note = re.fullmatch(
        r"import: median wall time of 2 fresh processes each \(bytecode cached\); "
        r"minimal = 'import anyio, transitions; from pydantic import BaseModel'; "
        r"'python -c pass' took (?P<bare>\d+\.\d{3}) s\.",
        lines[-1],
    )
    assert note is not None, lines[-1]
    assert 0 < float(note["bare"]) < deps


def test_measure_import_times_fresh_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    codes: list[tuple[str, str | None, str | None]] = []
    real = bench_module._process_seconds

    def spy(code: str, env: dict[str, str]) -> float:
        codes.append((code, env.get("PYTHONPYCACHEPREFIX"), env.get("PYTHONDONTWRITEBYTECODE")))
        return real(code, env)

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setattr(bench_module, "_process_seconds", spy)
    ours, deps, bare = bench_module.measure_import(2)
    assert ours > 0 and deps > 0 and bare > 0
    # one untimed run of each, then the three alternate
    assert [c for c, _, _ in codes] == [
        "import agentcore_fsm",
        "import anyio, transitions; from pydantic import BaseModel",
        "pass",
    ] * 3
    caches = {cache for _, cache, _ in codes}
    assert len(caches) == 1 and None not in caches  # one bytecode cache for all of them
    assert {dont for _, _, dont in codes} == {None}
    (cache,) = caches
    assert cache is not None and not Path(cache).exists()  # removed afterwards


def test_bench_stops_when_the_import_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench_module, "IMPORT_CODE", "import sys; sys.exit('no such package')")
    code = cli.main(["bench", *TINY, "--import-runs", "1"])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""
    assert captured.err == (
        "agentcore-fsm bench: python -c \"import sys; sys.exit('no such package')\" failed "
        "(exit status 1): no such package\n"
    )


@pytest.mark.parametrize(
    ("row", "met"),
    [
        (bench_module.Row("a", 5.0, 1.0, "µs/run", 5.0), True),
        (bench_module.Row("a", 5.1, 1.0, "µs/run", 5.0), False),
        (bench_module.Row("i", 0.25, 0.02, "s", 0.25, absolute=True), True),
        (bench_module.Row("i", 0.26, 0.2, "s", 0.25, absolute=True), False),
        (bench_module.Row("n", 9.0, 1.0, "s", None), True),
    ],
)
def test_a_row_meets_its_target(row: bench_module.Row, met: bool) -> None:
    assert row.met is met


def test_bench_sizes_are_options(capsys: pytest.CaptureFixture[str]) -> None:
    sizes = ["--concurrent", "3", "--repeats", "2", "--deltas", "7", "--import-runs", "0"]
    sizes += ["--store-iterations", "0"]
    code = cli.main(["bench", *TINY[:4], *sizes])
    out = capsys.readouterr().out
    assert code == 0, out
    assert next(iter(_rows(out))) == "W1 (1 turn, 7 deltas, 0 tools)"
    assert "W2 x3 concurrent" in _rows(out)


@pytest.mark.parametrize(
    "bad",
    [
        ["--iterations", "0"],
        ["--concurrent", "0"],
        ["--warmup", "-1"],
        ["--import-runs", "-1"],
        ["--store-iterations", "-1"],
    ],
)
def test_bench_rejects_bad_sizes(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", *bad])
    assert exc.value.code == 2


def test_bench_stops_when_the_two_loops_do_different_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = bench_module.bench_stream_fn

    def lossy(w: Workload) -> Any:
        # our side's model silently drops the last delta of every turn
        turns = tuple(Turn(t.deltas[:-1], t.calls) for t in w.turns)
        return real(Workload(w.name, turns))

    monkeypatch.setattr(bench_module, "bench_stream_fn", lossy)
    code = cli.main(["bench", *TINY])
    captured = capsys.readouterr()
    assert code == 1
    assert "the loops emitted different events" in captured.err
    assert captured.out == ""


# --- the pieces -----------------------------------------------------------------------------


def test_workloads_are_the_issue_s() -> None:
    w1, w2 = workload_w1(), workload_w2()
    assert [(len(t.deltas), len(t.calls)) for t in w1.turns] == [(50, 0)]
    assert [(len(t.deltas), len(t.calls)) for t in w2.turns] == [(10, 4), (10, 4), (20, 0)]
    assert w2.echo_values == ["0", "1", "2", "3"] * 2
    assert all(len(d) == 8 for t in w2.turns for d in t.deltas)


@pytest.mark.anyio
@pytest.mark.parametrize("model", ["bench", "faux"])
async def test_both_loops_emit_the_same_events(anyio_backend: str, model: str) -> None:
    setup = Setup(
        AgentContext(tools=[ECHO_TOOL]),
        AgentLoopConfig(model=MODEL),
        model,
        RUN_ALL[anyio_backend],
    )
    for w in (workload_w1(), workload_w2()):
        assert await check_same_events(w, setup) == expected_event_count(w)


@pytest.mark.anyio
async def test_runs_are_checked(anyio_backend: str) -> None:
    w2 = workload_w2()
    ours = OurRun(w2, "bench")
    await ours(AgentContext(tools=[ECHO_TOOL]), AgentLoopConfig(model=MODEL))
    ours.check(w2)
    minimal = MinimalRun(w2, RUN_ALL[anyio_backend])
    await minimal()
    minimal.check(w2)
    other = workload_w2(deltas=9)
    with pytest.raises(BenchError, match="our loop, W2: streamed text differs"):
        ours.check(other)
    with pytest.raises(BenchError, match="minimal loop, W2: streamed text differs"):
        minimal.check(other)
    with pytest.raises(BenchError, match="tool results"):
        ours.check(workload_w2(calls=3))


@pytest.mark.anyio
async def test_minimal_loop_type_checks_arguments(anyio_backend: str) -> None:
    w = Workload("bad", (Turn(("a",), (("c1", '{"x": "1"}'), ("c2", '{"x": 2}'))), Turn((), ())))
    events: list[dict[str, Any]] = []
    prompt = {"role": "user", "content": "go", "timestamp": 0}
    messages = await minimal_loop(
        prompt, minimal_model(w), MINIMAL_TOOLS, events.append, RUN_ALL[anyio_backend]
    )
    results = [m for m in messages if m["role"] == "toolResult"]
    assert [r["is_error"] for r in results] == [True, False]
    assert results[0]["content"][0]["text"] == "x: expected int"
    assert results[1]["content"][0]["text"] == "2"
    assert events[-1]["type"] == "agent_end"


def test_memory_is_measured_per_run() -> None:
    setup = Setup(
        AgentContext(tools=[ECHO_TOOL]), AgentLoopConfig(model=MODEL), "bench", RUN_ALL["trio"]
    )

    async def measure() -> tuple[float, float]:
        return await bench_module.measure_memory(workload_w2(), 3, setup)

    ours, minimal = anyio.run(measure, backend="trio")
    assert ours > 0 and minimal > 0
