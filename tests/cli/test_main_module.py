"""``python -m agentcore_fsm`` is the ``agentcore-fsm`` command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentcore_fsm", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_python_m_prints_the_version_and_the_commands() -> None:
    version = _run("--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("agentcore-fsm ")
    helped = _run("--help")
    assert helped.returncode == 0, helped.stderr
    assert "demo" in helped.stdout and "diagram" in helped.stdout


def test_python_m_reports_a_usage_error_with_status_2() -> None:
    proc = _run("no-such-command")
    assert proc.returncode == 2
    assert "unknown command 'no-such-command'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_python_m_renders_a_diagram() -> None:
    proc = _run("diagram", "--machine", "agent_loop", "--format", "mermaid")
    assert proc.returncode == 0, proc.stderr
    assert "stateDiagram-v2" in proc.stdout
