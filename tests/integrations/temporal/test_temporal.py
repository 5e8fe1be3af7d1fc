"""Runs on a real Temporal dev server (the session's ``temporal_server``, no mock of the SDK):
the same run as in memory, approval from another process while no worker runs, abort, a worker
killed mid-tool, the SDK's replayer on a recorded history."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import temporal_app
from equivalence_runs import Snapshots, as_regenerated, plain_events, plain_messages, snapshot
from temporalio.worker import Replayer

from agentcore_fsm.core.config import AgentContext
from agentcore_fsm.integrations import temporal as durable
from agentcore_fsm.integrations.durable_api import DurableAgent, write_recording
from agentcore_fsm.persist.journal import derive_run
from agentcore_fsm.persist.recording import load_run
from agentcore_fsm.runtime.driver import as_prompts, run_agent_loop
from agentcore_fsm.runtime.resume import INTERRUPTED_TEXT

WORKER = str(Path(__file__).resolve().parents[2] / "temporal_worker.py")
SHORT = durable.RunOptions(model_timeout_s=2.0, tool_timeout_s=2.0)


async def _in_memory(agent: DurableAgent) -> tuple[list[Any], list[Any]]:
    events = Snapshots()
    messages = await run_agent_loop(
        as_prompts(["charge order 7"]),
        AgentContext("", [], list(agent.tools)),
        agent.config,
        events,
        stream_fn=agent.stream_fn,
    )
    return events.events, messages


@asynccontextmanager
async def _launched(address: str, *agents: DurableAgent, queue: str | None) -> AsyncIterator[None]:
    await durable.launch(address, agents=agents, queue=queue, passed_through=["temporal_app"])
    try:
        yield
    finally:
        await durable.shutdown()


async def _until(run_id: str, kind: str) -> list[Any]:
    """The run's events up to the first of type ``kind`` (bounded: 20 s)."""
    seen = []
    async for event in durable.follow_async(run_id, timeout_s=20):
        seen.append(event)
        if event.type == kind:
            return seen
    raise AssertionError(f"no {kind} event: {[e.type for e in seen]}")


def _worker(address: str, queue: str, **env: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, WORKER, "worker", address, queue],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    return proc


def _stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        assert proc.stdin is not None
        proc.stdin.close()  # the worker shuts down and exits
    return proc.wait(timeout=30)


def test_a_run_completes_as_in_memory_with_its_record(temporal_server: str, tmp_path: Path) -> None:
    agent = temporal_app.make("shop-plain")
    run_id = f"plain-{uuid.uuid4()}"

    async def main() -> Any:
        async with _launched(temporal_server, agent, queue=f"q-{uuid.uuid4()}"):
            live = Snapshots()
            messages = await durable.run_durable(
                "shop-plain", ["charge order 7"], run_id=run_id, emit=live
            )
            followed = [snapshot(e) async for e in durable.follow_async(run_id, timeout_s=10)]
            record = await durable.record_async(run_id)
            history = await durable.connect(temporal_server)
            history_data = await history.get_workflow_handle(run_id).fetch_history()
        return live, messages, followed, record, history_data

    live, messages, followed, record, history = asyncio.run(main())
    ref_events, ref_messages = asyncio.run(_in_memory(agent))
    assert plain_messages(messages) == plain_messages(ref_messages)
    expected = as_regenerated(plain_events(ref_events, updates=False))
    assert as_regenerated(plain_events(live.events)) == expected
    assert as_regenerated(plain_events(followed)) == expected
    # the record is the run store's: derived again, it gives the same messages and end
    derived = derive_run(record, run_id=run_id)
    assert plain_messages(derived.machine.new_messages) == plain_messages(ref_messages)
    assert derived.machine.end_reason == "completed"
    # ... and written as a recording, load_run and `diagram --run` read it as any run's
    path = tmp_path / "run.jsonl"
    write_recording(record, path, run_id=run_id)
    loaded = load_run(path)
    assert loaded.end_reason == "completed"
    assert plain_messages(loaded.last_run_messages()) == plain_messages(ref_messages)
    assert as_regenerated(plain_events([snapshot(e) for e in loaded.events])) == expected
    drawn = subprocess.run(
        [sys.executable, "-m", "agentcore_fsm", "diagram", "--run", str(path), "--steps"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert drawn.returncode == 0, drawn.stderr
    assert f"{len(derived.machine.history)} transitions, ended: completed" in drawn.stdout
    assert "tool_execution_start(charge)" in drawn.stdout

    # the SDK's replayer replays the recorded history (determinism) ...
    async def replay(agents: list[DurableAgent]) -> None:
        for a in agents:
            durable.register(a)
        replayer = Replayer(
            workflows=[durable.RunWorkflow],
            workflow_runner=durable.worker_for_runner(["temporal_app"]),
            data_converter=durable.DATA_CONVERTER,
        )
        await replayer.replay_workflow(history)

    asyncio.run(replay([agent]))
    # ... and fails it when the workflow's code would decide otherwise (no tools: no activity)
    changed = DurableAgent("shop-plain", agent.stream_fn, agent.config, ())
    with pytest.raises(Exception, match=r"[Nn]ondetermin"):
        asyncio.run(replay([changed]))
    durable.register(agent)


def test_approval_from_another_process_while_no_worker_runs(temporal_server: str) -> None:
    agent = temporal_app.make("shop-approve", approve=True)
    run_id = f"approve-{uuid.uuid4()}"
    queue = f"q-{uuid.uuid4()}"

    async def wait_for_approval() -> list[str]:
        async with _launched(temporal_server, agent, queue=queue):
            await durable.start_run("shop-approve", ["charge order 7"], run_id=run_id)
            return [e.type for e in await _until(run_id, "approval_requested")]

    before = asyncio.run(wait_for_approval())  # the worker is gone once this returns
    assert before[-1] == "approval_requested" and "tool_execution_end" in before
    decided = subprocess.run(
        [sys.executable, WORKER, "decide", temporal_server, run_id, "b", "approve"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert decided.returncode == 0, decided.stderr

    async def finish() -> list[Any]:
        async with _launched(temporal_server, agent, queue=queue):
            return await durable.result_async(run_id)

    messages = asyncio.run(finish())
    assert messages[-2].role == "toolResult" and not messages[-2].is_error
    assert messages[-2].content[0].text == "charged 30 EUR"
    assert messages[-1].content[0].text == "Done: order 7 is paid."


def test_abort_is_a_cancellation(temporal_server: str) -> None:
    agent = temporal_app.make("shop-abort", approve=True)
    run_id = f"abort-{uuid.uuid4()}"

    async def main() -> tuple[list[Any], Any]:
        async with _launched(temporal_server, agent, queue=f"q-{uuid.uuid4()}"):
            await durable.start_run("shop-abort", ["charge order 7"], run_id=run_id)
            await _until(run_id, "approval_requested")
            await durable.abort_async(run_id)
            messages = await durable.result_async(run_id)
            events = [e async for e in durable.follow_async(run_id, timeout_s=10)]
            record = await durable.record_async(run_id)
        return messages, (events, record)

    messages, (events, record) = asyncio.run(main())
    assert events[-1].type == "agent_end"
    assert derive_run(record).machine.end_reason == "aborted"
    assert all(m.content[0].text != "charged 30 EUR" for m in messages if m.role == "toolResult")


@pytest.fixture(scope="module")
def crashes(
    temporal_server: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[list[Any], list[str]]]:
    """For each point (``charge``: inside the non-idempotent tool; ``stream``: at the third
    streamed event of the second model call; ``lookup``: inside the idempotent tool), a worker
    that kills itself (SIGKILL) there, then a second worker that continues the run: the run's
    messages and the effects, in order. The crashes run at once (each mostly waits for
    Temporal's timeouts)."""
    points = ("charge", "stream", "lookup", "nested")
    agent_of = {"nested": "desk"}  # inside the nested run of desk's agent tool
    queues = {p: f"q-{uuid.uuid4()}" for p in points}
    run_ids = {p: f"killed-{p}-{uuid.uuid4()}" for p in points}
    effects = {p: tmp_path_factory.mktemp(p) / "effects" for p in points}
    envs = {p: {"AGENTCORE_TEMPORAL_EFFECTS": str(effects[p])} for p in points}
    procs: list[subprocess.Popen[str]] = []
    try:
        firsts = {
            p: _worker(temporal_server, queues[p], AGENTCORE_TEMPORAL_DIE=p, **envs[p])
            for p in points
        }
        procs.extend(firsts.values())

        async def start() -> None:
            async with _launched(temporal_server, queue=None):
                for p in points:
                    await durable.start_run(
                        agent_of.get(p, "shop"),
                        ["charge order 7"],
                        run_id=run_ids[p],
                        queue=queues[p],
                        options=SHORT,
                    )

        asyncio.run(start())
        for p, first in firsts.items():
            assert first.wait(timeout=30) == -9, p  # it killed itself
        seconds = [_worker(temporal_server, queues[p], **envs[p]) for p in points]
        procs.extend(seconds)

        async def finish() -> list[list[Any]]:
            async with _launched(temporal_server, queue=None):
                return list(
                    await asyncio.gather(*(durable.result_async(run_ids[p]) for p in points))
                )

        results = asyncio.run(finish())
        for second in seconds:
            assert _stop(second) == 0  # a clean shutdown, no crash at exit
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return {
        p: (messages, effects[p].read_text().splitlines())
        for p, messages in zip(points, results, strict=True)
    }


def test_a_worker_killed_mid_tool_is_continued_by_another(
    crashes: dict[str, tuple[list[Any], list[str]]],
) -> None:
    messages, effects = crashes["charge"]
    charged = [m for m in messages if m.role == "toolResult" and m.tool_call_id == "b"]
    assert charged[0].is_error
    assert charged[0].content[0].text == INTERRUPTED_TEXT.format(name="charge")
    # nothing that completed ran again: each model call once, lookup once, charge once
    assert effects == ["model 0", "lookup a", "model 1", "charge b", "model 2"]


def test_an_idempotent_tool_killed_mid_call_runs_again_on_another_worker(
    crashes: dict[str, tuple[list[Any], list[str]]],
) -> None:
    messages, effects = crashes["lookup"]
    # Temporal's retry policy runs it again (it is idempotent); the model call before it does not
    assert effects == ["model 0", "lookup a", "lookup a", "model 1", "charge b", "model 2"]
    looked = [m for m in messages if m.role == "toolResult" and m.tool_call_id == "a"]
    assert not looked[0].is_error and looked[0].content[0].text == "order 7: 2 books, 30 EUR"
    assert messages[-1].content[0].text == "Done: order 7 is paid."


def test_a_worker_killed_inside_a_nested_run_is_continued_inside_it(
    crashes: dict[str, tuple[list[Any], list[str]]],
) -> None:
    """The nested run is a child workflow (docs/durable.md#nested-runs): the other worker goes
    on inside it, and what it had done (two model calls, the non-idempotent step) is not done
    again; the killed activity (die, idempotent) is retried."""
    messages, effects = crashes["nested"]
    assert effects == ["desk 0", "inner 0", "step s1", "inner 1", "inner 2", "desk 1"]
    worked = [m for m in messages if m.role == "toolResult" and m.tool_call_id == "w1"]
    assert not worked[0].is_error and worked[0].content[0].text == "inner done"
    assert messages[-1].content[0].text == "all done"


def test_a_worker_killed_mid_stream_is_continued_by_another(
    crashes: dict[str, tuple[list[Any], list[str]]],
) -> None:
    messages, effects = crashes["stream"]
    # the model call cut short runs again (it never completed); lookup, done before, does not
    assert effects == ["model 0", "lookup a", "model 1", "model 1", "charge b", "model 2"]
    charged = [m for m in messages if m.role == "toolResult" and m.tool_call_id == "b"]
    assert not charged[0].is_error and charged[0].content[0].text == "charged 30 EUR"
    assert messages[-1].content[0].text == "Done: order 7 is paid."
    assert [m.role for m in messages].count("assistant") == 3


def test_worker_command_runs_a_run_and_refuses_bad_input(temporal_server: str) -> None:
    queue = f"q-{uuid.uuid4()}"
    run_id = f"cli-{uuid.uuid4()}"
    tests = str(Path(WORKER).parent)
    command = [sys.executable, "-m", "agentcore_fsm", "worker", "--engine", "temporal"]
    bad = subprocess.run(
        [*command, "--app", "temporal_app:agents", "--address", "nowhere"],
        capture_output=True,
        text=True,
        cwd=tests,
        timeout=60,
    )
    assert bad.returncode == 2
    assert (
        bad.stderr.strip().splitlines()[-1].endswith("--address must be host:port, not 'nowhere'")
    )
    proc = subprocess.Popen(
        [*command, "--app", "temporal_app:agents", "--address", temporal_server, "--queue", queue],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tests,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(f"worker consuming {queue}")

        async def main() -> list[Any]:
            async with _launched(temporal_server, queue=None):
                await durable.start_run("shop", ["charge order 7"], run_id=run_id, queue=queue)
                return await durable.result_async(run_id)

        messages = asyncio.run(main())
        assert messages[-1].content[0].text == "Done: order 7 is paid."
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""


def test_fifty_queued_runs_across_two_workers(temporal_server: str, tmp_path: Path) -> None:
    queue = f"q-{uuid.uuid4()}"
    prefix = uuid.uuid4().hex[:8]
    effects = [tmp_path / "effects-1", tmp_path / "effects-2"]

    async def enqueue() -> None:  # queued before any worker runs
        async with _launched(temporal_server, queue=None):
            for i in range(50):
                await durable.start_run(
                    "shop", [f"charge order {i}"], run_id=f"{prefix}-{i}", queue=queue
                )

    asyncio.run(enqueue())
    workers = [_worker(temporal_server, queue, AGENTCORE_TEMPORAL_EFFECTS=str(e)) for e in effects]
    try:

        async def results() -> list[list[Any]]:
            async with _launched(temporal_server, queue=None):
                return list(
                    await asyncio.gather(
                        *(durable.result_async(f"{prefix}-{i}") for i in range(50))
                    )
                )

        runs = asyncio.run(results())
    finally:
        codes = [_stop(w) for w in workers]
    assert codes == [0, 0]
    for i, messages in enumerate(runs):
        assert messages[0].content[0].text == f"charge order {i}"
        assert messages[-1].content[0].text == "Done: order 7 is paid."
    lines = [e.read_text().splitlines() if e.exists() else [] for e in effects]
    assert all(lines), "both workers ran some of the calls"
    done = sorted(lines[0] + lines[1])
    assert done == sorted(["model 0", "lookup a", "model 1", "charge b", "model 2"] * 50)


def test_the_durable_bench_measures_every_engine(temporal_server: str) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentcore_fsm.cli.durable_bench",
            "--runs",
            "2",
            "--temporal",
            temporal_server,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert [line.split("  ")[0].strip() for line in lines[1:]] == [
        "in memory",
        "SQLite journal",
        "DBOS (SQLite)",
        "Temporal",
    ]
    assert lines[1].split()[-1] == "1.0"  # memory is the unit of the ratios
    assert all(float(line.split()[-1]) > 0 for line in lines[1:])
