"""An approval that waits across processes (docs/reference.md#waiting-across-processes).

One process (tests/approval_worker.py) prompts an agent whose tool call needs approval, in a
``SqliteRunStore``, and stops while the call waits: suspended (``agent.suspend()``) or killed
with SIGKILL. Another process, later, opens the session, sees the pending request, decides and
resumes. The tools count their executions in a file: the approved call runs once, in the
second process, with the arguments the approver gave; a denied one never runs; ``look`` (no
approval needed) ran in neither process before the decision, and exactly once after it. The
first process's events followed by the second's are one well-formed run. Both backends.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentcore_fsm.core.events import AGENT_EVENT_ADAPTER
from agentcore_fsm.devtools.testing import check_resumed_run
from agentcore_fsm.persist.store import SqliteRunStore

WORKER = str(Path(__file__).resolve().parents[1] / "approval_worker.py")
REQUEST = {
    "tool_call_id": "p",
    "tool_name": "pay",
    "args": {"eur": 30},
    "reason": 'Tool "pay" requires approval',
}


def _worker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, WORKER, *args], capture_output=True, text=True, timeout=60
    )


def _events(path: Path) -> list[Any]:
    if not path.exists():
        return []
    return [AGENT_EVENT_ADAPTER.validate_json(line) for line in path.read_text().splitlines()]


def _effects(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize(("how", "verdict"), [("suspend", "approve"), ("kill", "deny")])
def test_an_approval_waits_for_another_process(
    tmp_path: Path, backend: str, how: str, verdict: str
) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects"
    first_events, second_events = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first = _worker("ask", str(db), str(effects), str(first_events), backend, how)
    if how == "kill":
        assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    else:
        assert first.returncode == 0, first.stderr[-2000:]
        assert first.stdout.splitlines()[1].startswith("suspended ")
    assert json.loads(first.stdout.splitlines()[0]) == [REQUEST]
    assert _effects(effects) == []  # nothing of the batch ran while pay waited

    store = SqliteRunStore(db)
    (run,) = store.runs("s")
    assert run.status == "running"
    store.close()

    second = _worker("decide", str(db), str(effects), str(second_events), backend, verdict)
    assert second.returncode == 0, second.stderr[-3000:]
    lines = second.stdout.splitlines()
    assert json.loads(lines[0]) == [REQUEST]  # the new process sees the waiting request
    transcript = json.loads(lines[1])
    if verdict == "approve":
        assert sorted(_effects(effects)) == ["l decider", "p decider"]
        assert 'toolResult p pay: "paid 25"' in transcript
    else:
        assert _effects(effects) == ["l decider"]
        assert (
            'toolResult p pay (error): "Tool call \\"pay\\" was denied: not this month"'
            in transcript
        )
    assert transcript[-1] == 'assistant: "all settled"'

    store = SqliteRunStore(db)
    (run,) = store.runs("s")
    assert run.status == "finished" and run.end_reason == "completed"
    entries = store.load(run.run_id).entries
    store.close()
    decided = [e for e in entries if e["input"] == "approval_decided"]
    assert [(e["approved"], e["decided_by"]) for e in decided] == [(verdict == "approve", "alice")]

    before, after = _events(first_events), _events(second_events)
    assert [e.type for e in before if e.type.startswith("approval")] == ["approval_requested"]
    assert "agent_end" not in [e.type for e in before]
    summary = check_resumed_run(before, after)
    assert summary.reason == "completed"
