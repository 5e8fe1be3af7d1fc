"""The demo (``make demo`` / ``agentcore-fsm demo``): its transcript, its tools and its diagram."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentcore_fsm import cli
from agentcore_fsm.demo import STEERING, file_tools, make_workspace


def run_demo(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["demo", "--delay", "0", *args])
    return code, capsys.readouterr().out


def test_demo_transcript(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out" / "run.mmd"
    target.parent.mkdir()  # --out's directory must exist (see tests/test_cli_errors.py)
    code, out = run_demo(capsys, "--out", str(target))
    assert code == 0, out
    lines = out.splitlines()

    # the question, the streamed answers, and real tool results
    assert "user > What do the invoices in my workspace add up to?" in lines
    assert "assistant > Let me see what is in your workspace first." in lines
    assert re.search(r"ok\s+list_files -> invoices/2024-01-acme.txt \(\d+ bytes\)", out)
    for total in ("Total: 1249.50 EUR", "Total: 380.25 EUR", "Total: 2112.00 EUR"):
        assert total in out
    assert "    tool  calculator(expression='1249.50 + 380.25 + 2112.00')" in lines
    assert re.search(r"ok\s+calculator -> 3741\.75$", out, re.MULTILINE)
    assert re.search(r"ok\s+calculator -> 4490\.1$", out, re.MULTILINE)
    final = (
        "assistant > Your three invoices add up to 3741.75 EUR; with 20% VAT that is 4490.10 EUR."
    )
    assert final in lines

    # three read_file calls were started before any of them finished (one parallel batch)
    starts = [i for i, line in enumerate(lines) if line.strip().startswith("tool  read_file(")]
    ends = [i for i, line in enumerate(lines) if re.match(r"\s+ok\s+read_file ->", line)]
    assert len(starts) == 3 and len(ends) == 3
    assert max(starts) < min(ends)

    # the steering message arrives while tools run and is injected before the next model call
    sent = lines.index("    (meanwhile the user sends a steering message)")
    injected = lines.index(f"user (steering) > {STEERING}")
    turn3 = lines.index("--- turn 3 ---")
    vat_reply = next(i for i, line in enumerate(lines) if "the 20% VAT you asked for" in line)
    assert max(ends) < sent + 1 < turn3 < injected < vat_reply

    # every transition is shown; the counts agree with the summary line
    fsm = [line.strip() for line in lines if line.strip().startswith("[fsm] ")]
    assert fsm[0] == "[fsm] idle -(start)-> awaiting_steering"
    assert fsm[-1] == "[fsm] awaiting_follow_up -(skip_follow_up_poll)-> stopped"
    assert f"{len(fsm)} transitions, 6 tool results, final state: stopped" in lines
    assert "agent_end: reason=completed, 12 new messages" in lines

    # the diagram file: where the transcript says, naming the final state
    assert f"run diagram (Mermaid): {target}" in lines
    diagram = target.read_text(encoding="utf-8")
    assert f"{len(fsm)} transitions, ended: completed" in diagram
    assert "stateDiagram-v2" in diagram
    assert "class stopped current" in diagram
    assert "note right of stopped : final state" in diagram
    assert "closing_turn --> awaiting_steering : 4\u00d7 proceeded" in diagram
    assert "1\u00d7 steering_polled [has_new_messages]" in diagram
    svg = target.with_suffix(".svg")
    if shutil.which("dot") is not None:
        assert f"run diagram (SVG): {svg}" in lines
        assert "stopped" in svg.read_text(encoding="utf-8")
    else:
        assert not svg.exists()


def test_demo_default_output_goes_to_a_fresh_temporary_directory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = run_demo(capsys)
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("run diagram (Mermaid): "))
    path = Path(line.removeprefix("run diagram (Mermaid): "))
    try:
        assert path.is_file()
        assert path.name == "run.mmd" and path.parent.name.startswith("agentcore-fsm-demo-")
        assert "note right of stopped : final state" in path.read_text(encoding="utf-8")
    finally:
        shutil.rmtree(path.parent)


def test_demo_command_in_a_subprocess_leaves_the_working_directory_alone(tmp_path: Path) -> None:
    target = tmp_path / "diagram.mmd"
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "agentcore_fsm.cli", "demo", "--delay", "0", "--out", str(target)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "4490.10 EUR" in proc.stdout
    assert target.is_file()
    assert list(work.iterdir()) == []


# --- the file tools -------------------------------------------------------------------------


def test_file_tools_stay_inside_the_workspace(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    make_workspace(root)
    (tmp_path / "secret.txt").write_text("no", encoding="utf-8")
    tools = {t.name: t for t in file_tools(root)}
    listing = tools["list_files"].execute("c1", {"path": "."}, None, None)
    text = listing.content[0].text  # type: ignore[union-attr]
    assert "invoices/2024-02-globex.txt" in text and "notes.txt" in text
    read = tools["read_file"].execute("c2", {"path": "notes.txt"}, None, None)
    assert read.content[0].text == "Pay invoices within 30 days.\n"  # type: ignore[union-attr]
    for bad in ("../secret.txt", "/etc/passwd", "invoices/../../secret.txt"):
        with pytest.raises(ValueError, match="outside the workspace"):
            tools["read_file"].execute("c3", {"path": bad}, None, None)
    with pytest.raises(ValueError, match="outside the workspace"):
        tools["list_files"].execute("c4", {"path": ".."}, None, None)


# --- the run diagram ------------------------------------------------------------------------
