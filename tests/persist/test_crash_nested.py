"""A run killed (SIGKILL) inside a nested run resumes inside it
(docs/multi-agent.md#runs-that-survive): a subprocess (tests/crash_nested_worker.py) runs an
outer run journaled in a ``SqliteRunStore`` whose tool is an agent, and kills itself inside the
nested run, after the nested run's first tool and its second model answer were journaled;
another process resumes the outer run. The nested run's completed model calls and its
non-idempotent tool are not done again, both runs finish, and each run's record regenerates a
well-formed run. Both backends; and the same on DBOS."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from crash_nested_worker import MODEL, RUN_ID, tools

from agentcore_fsm import AgentLoopConfig
from agentcore_fsm.devtools.testing import check_run
from agentcore_fsm.persist.store import SqliteRunStore
from agentcore_fsm.runtime.resume import load_run_state

WORKER = str(Path(__file__).resolve().parents[1] / "crash_nested_worker.py")


def _worker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, WORKER, *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_run_killed_inside_a_nested_run_resumes_inside_it(tmp_path: Path, backend: str) -> None:
    db, log = str(tmp_path / "runs.db"), str(tmp_path / "log")
    killed = _worker("run", db, log, backend)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert Path(log).read_text().splitlines() == ["outer 0", "inner 0", "step", "inner 1"]
    with SqliteRunStore(db) as store:
        assert {i.run_id: i.status for i in store.runs()} == {
            RUN_ID: "running",
            f"{RUN_ID}/1.w1": "running",
        }
    resumed = _worker("resume", db, log, backend)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "resumed ['inner done']"
    # only what was not journaled is done again: the nested run's last answer and the outer
    # run's; neither the nested run's first two model calls nor its step
    assert Path(log).read_text().splitlines()[4:] == ["inner 2", "outer 1"]
    with SqliteRunStore(db) as store:
        assert {i.run_id: i.end_reason for i in store.runs()} == {
            RUN_ID: "completed",
            f"{RUN_ID}/1.w1": "completed",
        }
        config = AgentLoopConfig(model=MODEL)
        outer, outer_steps = load_run_state(store, RUN_ID, config, tools=tools("resume", log))
        sub = tools("resume", log)[0].sub  # type: ignore[attr-defined]
        inner_config, _, inner_tools, _, _ = sub.parts()  # the nested run's, as it ran
        inner, inner_steps = load_run_state(
            store, f"{RUN_ID}/1.w1", inner_config, tools=inner_tools
        )
    for machine, steps in ((outer, outer_steps), (inner, inner_steps)):
        check_run([e for s in steps for e in s.events], messages=machine.new_messages)
    # the nested run's transcript: the prompt, step, die (run again: idempotent), the answer
    roles = [(m.role, getattr(m, "tool_call_id", None)) for m in inner.new_messages]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("toolResult", "s1"),
        ("assistant", None),
        ("toolResult", "d1"),
        ("assistant", None),
    ]
    assert inner.new_messages[4].content[0].text == "alive"


def test_a_dbos_run_killed_inside_a_nested_run_is_recovered_inside_it(tmp_path: Path) -> None:
    """On DBOS the nested run is a child workflow (docs/durable.md#nested-runs): its steps are
    checkpointed, so the recovery does not call again what the nested run had done."""
    db, log = str(tmp_path / "dbos.db"), str(tmp_path / "log")
    killed = _worker("dbos-run", db, log)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert Path(log).read_text().splitlines() == ["outer 0", "inner 0", "step", "inner 1"]
    recovered = _worker("dbos-recover", db, log)
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.stdout.strip().splitlines()[-1] == "recovered ['inner done']"
    assert Path(log).read_text().splitlines()[4:] == ["inner 2", "outer 1"]
