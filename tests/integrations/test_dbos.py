"""Durable runs on DBOS with a SQLite system database (agentcore_fsm.integrations.dbos): processes
killed with SIGKILL mid-stream, mid-tool and between turns are recovered by DBOS and finish
exactly; approvals decided from another process; the trio refusal.

The worker processes are tests/dbos_worker.py and tests/dbos_approval_worker.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dbos  # noqa: F401  (the dbos extra is part of the test install: fail, never skip)
import pytest
import trio

from agentcore_fsm import AgentLoopConfig, ApprovalDecision, Model
from agentcore_fsm.devtools.testing import check_run
from agentcore_fsm.integrations import dbos as durable
from agentcore_fsm.persist.journal import decode_message
from agentcore_fsm.runtime.resume import INTERRUPTED_TEXT

TESTS = Path(__file__).resolve().parents[1]
WORKER = TESTS / "dbos_worker.py"
APPROVAL_WORKER = TESTS / "dbos_approval_worker.py"

TRANSCRIPT = [
    'user: "charge order 1"',
    'assistant: "Looking it up." [toolUse: lookup(q=1)]',
    'toolResult a lookup: "order 1: 2 books"',
    'assistant: "Charging the card now, then checking again." [toolUse: charge(eur=30), '
    "lookup(q=2)]",
    'toolResult b charge: "charged 30"',
    'toolResult c lookup: "order 2: 2 books"',
    'assistant: "Charged 30 EUR."',
]
EVENT_TYPES = (
    ["agent_start", "turn_start", "message_start", "message_end"]
    + ["message_start", "message_end", "tool_execution_start", "tool_execution_end"]
    + ["message_start", "message_end", "turn_end", "turn_start", "message_start", "message_end"]
    + ["tool_execution_start", "tool_execution_end", "message_start", "message_end"] * 2
    + ["turn_end", "turn_start", "message_start", "message_end", "turn_end", "agent_end"]
)
ALL_EFFECTS = ["lookup a", "after a", "charge b", "after b", "lookup c", "after c"]


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _not_streamed(event: dict[str, Any]) -> bool:
    """The events that do not come from a model's stream (whose replay skips the deltas and
    the partial message): they must be the same, timestamps included, when replayed."""
    message = event.get("message") or {}
    if event["type"] in ("message_start", "message_end"):
        return message.get("role") != "assistant"
    return event["type"] in ("tool_execution_start", "tool_execution_end", "agent_start")


POINTS = ("stream", "tool", "tool_idempotent", "between")


def _parallel(commands: list[list[str]], timeout: float = 90) -> list[tuple[int, str, str]]:
    """Run the commands at once (each process spends most of its time importing and waiting
    on the disk); their exit statuses and outputs."""
    procs = [
        subprocess.Popen(
            [sys.executable, *c], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for c in commands
    ]
    out = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.append((proc.returncode, stdout, stderr))
    return out


@pytest.fixture(scope="module")
def crashes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, ...]]:
    """Each point: a process killed there, then a process that recovers the run."""
    dirs = {point: tmp_path_factory.mktemp(point) for point in POINTS}
    runs = _parallel([[str(WORKER), "run", str(d / "runs.db"), str(d), p] for p, d in dirs.items()])
    for (code, _, stderr), point in zip(runs, POINTS, strict=True):
        assert code == -9, (point, stderr)
    pairs = [str(p) for d in dirs.values() for p in (d / "runs.db", d)]
    ((code, stdout, stderr),) = _parallel([[str(WORKER), "recover", *pairs]])
    assert code == 0, stderr
    reports = [json.loads(line) for line in stdout.strip().splitlines() if line.startswith("{")]
    assert len(reports) == len(POINTS), stdout
    results: dict[str, tuple[Any, ...]] = {}
    for report, (point, d) in zip(reports, dirs.items(), strict=True):
        live = [json.loads(line) for line in (d / "live.jsonl").read_text().splitlines()]
        results[point] = (report, (d / "effects").read_text().splitlines(), live)
    return results


def _crash_and_recover(
    crashes: dict[str, tuple[Any, ...]], point: str
) -> tuple[dict[str, Any], list[str], list[Any]]:
    report, effects, live = crashes[point]
    messages = [decode_message(m) for m in report["encoded"]]
    # the run's events, as a client of its DBOS stream sees them: one well-formed run
    summary = check_run(report["events"], messages, tool_execution="sequential")
    assert summary is not None
    assert [e["type"] for e in report["events"]] == EVENT_TYPES
    # the recovered execution replayed the first one exactly (clock readings included): every
    # event of the first process that does not come from a stream is the same again
    before = [e for e in live if _not_streamed(e)]
    again = [e for e in report["replayed"] if _not_streamed(e)]
    assert before, live
    assert again[: len(before)] == before
    return report, effects, live


def test_killed_mid_stream(crashes: dict[str, tuple[Any, ...]]) -> None:
    report, effects, live = _crash_and_recover(crashes, "stream")
    assert report["messages"] == TRANSCRIPT
    assert report["errors"] == []
    assert effects == ALL_EFFECTS  # lookup a (and its hook) ran once: recorded, not run again
    # the deltas reached the live listener during the first execution of the model call
    assert [e["type"] for e in live].count("message_update") > 3
    assert live[-1]["type"] == "message_update"


def test_killed_mid_tool(crashes: dict[str, tuple[Any, ...]]) -> None:
    report, effects, _ = _crash_and_recover(crashes, "tool")
    expected = list(TRANSCRIPT)
    expected[4] = (
        'toolResult b charge (error): "Tool \\"charge\\" was interrupted: the process running it '
        'stopp…"'
    )
    assert report["messages"] == expected
    assert report["errors"] == [INTERRUPTED_TEXT.format(name="charge")]
    assert effects == ALL_EFFECTS  # charge b's side effect happened once, before the kill


def test_killed_mid_idempotent_tool(crashes: dict[str, tuple[Any, ...]]) -> None:
    report, effects, _ = _crash_and_recover(crashes, "tool_idempotent")
    assert report["messages"] == TRANSCRIPT
    # lookup c is idempotent: it runs again; nothing else does
    assert effects == [
        "lookup a",
        "after a",
        "charge b",
        "after b",
        "lookup c",
        "lookup c",
        "after c",
    ]


def test_killed_between_turns(crashes: dict[str, tuple[Any, ...]]) -> None:
    report, effects, live = _crash_and_recover(crashes, "between")
    assert report["messages"] == TRANSCRIPT
    assert effects == ALL_EFFECTS
    assert live[-1]["type"] == "turn_end"


def test_approval_decided_from_another_process(tmp_path: Path) -> None:
    """The run waits for approval in one process; that process is killed; a client in this
    process (no DBOS launched here) sees the request in the run's stream and sends the decision;
    the recovering process continues with it."""
    from dbos import DBOSClient
    from dbos._error import DBOSNonExistentWorkflowError, DBOSStreamTimeoutError

    db = tmp_path / "runs.db"
    proc = subprocess.Popen(
        [sys.executable, str(APPROVAL_WORKER), "run", str(db), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "started\n"  # DBOS is launched: the database exists
    client = DBOSClient(system_database_url=f"sqlite:///{db}")
    try:
        deadline = time.monotonic() + 30
        seen: list[str] = []
        while "approval_requested" not in seen:
            assert time.monotonic() < deadline, seen
            seen = []
            try:
                for event in durable.follow("mail-1", client=client, timeout_s=0.5):
                    seen.append(event.type)
            except (DBOSStreamTimeoutError, DBOSNonExistentWorkflowError):
                time.sleep(0.05)  # no event for 0.5 s, or no run yet: look again
        proc.kill()
        proc.wait(timeout=10)
        decision = ApprovalDecision(approved=True, decided_by="alice", args={"to": "bob@example"})
        durable.send_decision("mail-1", "m1", decision, client=client)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        client.destroy()
    assert not (tmp_path / "effects").exists()  # nothing was sent before the decision
    second = _run(str(APPROVAL_WORKER), "recover", str(db), str(tmp_path))
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout.strip().splitlines()[-1])
    assert report["messages"] == [
        'user: "Mail Bob"',
        "assistant: [toolUse: send_mail(to='bob')]",
        'toolResult m1 send_mail: "sent to bob@example"',
        'assistant: "Sent."',
    ]
    assert (tmp_path / "effects").read_text() == "send bob@example\n"
    decided = [e for e in report["events"] if e["type"] == "approval_decided"]
    assert len(decided) == 1
    assert (
        decided[0]["approved"],
        decided[0]["decidedBy"] if "decidedBy" in decided[0] else decided[0]["decided_by"],
    ) == (True, "alice")
    check_run(report["events"], [decode_message(m) for m in report["encoded"]])


def test_refuses_trio() -> None:
    agent = durable.DurableAgent("t", lambda *a: None, AgentLoopConfig(model=Model(id="m")))

    async def under_trio() -> None:
        await durable.launch("sqlite:///unused.db", agents=[agent])

    with pytest.raises(durable.DurableBackendError) as info:
        trio.run(under_trio)
    assert str(info.value) == durable.TRIO_TEXT
    assert "asyncio" in durable.TRIO_TEXT and "trio" in durable.TRIO_TEXT

    async def run_under_trio() -> None:
        await durable.run_durable("t", ["hi"], run_id="x")

    with pytest.raises(durable.DurableBackendError):
        trio.run(run_under_trio)


def test_not_imported_by_the_package() -> None:
    code = "import sys, agentcore_fsm, agentcore_fsm.integrations; print('dbos' in sys.modules)"
    out = _run("-c", code)
    assert out.stdout.strip() == "False", out.stderr


def test_start_run_on_a_queue_from_async_code(tmp_path: Path) -> None:
    """``start_run(..., queue=...)`` is called from async code (it is a coroutine): the queue is
    looked up with the SDK's async call, and a queue nobody registered is named in the error."""
    from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response

    faux = FauxProvider([faux_response("queued and done")])
    agent = durable.DurableAgent("queued", faux, AgentLoopConfig(model=Model(id="faux")))

    async def main() -> tuple[list[str], str]:
        await durable.launch(
            f"sqlite:///{tmp_path / 'dbos.db'}",
            agents=[agent],
            queue=durable.RUNS_QUEUE,
            polling_interval_s=0.05,
        )
        try:
            run_id = await durable.start_run(
                "queued", ["hi"], run_id="queued-1", queue=durable.RUNS_QUEUE
            )
            messages = await durable.result_async(run_id)
            with pytest.raises(durable.DurableRunError) as info:
                await durable.start_run("queued", ["hi"], run_id="queued-2", queue="nowhere")
            return [str(m) for m in messages], str(info.value)
        finally:
            durable.shutdown()

    shown, error = asyncio.run(main())
    assert shown == ['user: "hi"', 'assistant: "queued and done"']
    assert error == "no queue named 'nowhere' is registered in this process"
