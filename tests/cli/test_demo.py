"""The demo (``make demo`` / ``agentcore-fsm demo``): its transcript, its tools and its diagram."""

from __future__ import annotations

import getpass
import json
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from agentcore_fsm.cli import commands as cli
from agentcore_fsm.cli import demo
from agentcore_fsm.cli.demo import STEERING, file_tools, make_workspace
from agentcore_fsm.integrations.providers.faux import FauxError, faux_response
from tests.readme_sections import DOCS, code_blocks


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

    # the steering message is sent while the reads run (after they started, before any
    # result), and injected before the next model call
    sent = lines.index("    (while the reads run, the user sends a steering message)")
    injected = lines.index(f"user (steering) > {STEERING}")
    turn3 = lines.index("--- turn 3 ---")
    vat_reply = next(i for i, line in enumerate(lines) if "the 20% VAT you asked for" in line)
    assert max(starts) < sent < min(ends)
    assert max(ends) < turn3 < injected < vat_reply
    assert out.count("the user sends a steering message") == 1

    # the summary is saved with write_file, which waits for the demo user's approval: the
    # loop enters awaiting_approval, the decision comes, then the call runs
    summary = "Invoices: 3741.75 EUR\nWith 20% VAT: 4490.10 EUR\n"
    wrote = lines.index(f"    tool  write_file(path='summary.txt', content={summary!r})")
    assert lines[wrote + 1 : wrote + 6] == [
        "    [fsm] preparing_tools -(tools_prepared)-> awaiting_approval",
        "    wait  write_file needs approval; the run waits for it",
        '    approval: write_file {"path": "summary.txt", "content": '
        + json.dumps(summary)
        + "} -- approved by the demo user",
        "    [fsm] awaiting_approval -(approvals_settled)-> executing",
        "    ok    write_file -> wrote 48 bytes to summary.txt",
    ]
    assert lines.index(final) < wrote < lines.index("--- turn 5 ---")
    assert "assistant > I saved the totals in summary.txt." in lines
    assert out.count("approval: ") == 1

    # every transition is shown; the counts agree with the summary line
    fsm = [line.strip() for line in lines if line.strip().startswith("[fsm] ")]
    assert fsm[0] == "[fsm] idle -(start)-> awaiting_steering"
    assert fsm[-1] == "[fsm] awaiting_follow_up -(skip_follow_up_poll)-> stopped"
    assert f"{len(fsm)} transitions, 7 tool results, final state: stopped" in lines
    assert "outcome: completed" in lines
    assert "agent_end: reason=completed, 14 new messages" in lines

    # the diagram file: where the transcript says, naming the final state, the path drawn
    assert f"run diagram (Mermaid): {target}" in lines
    diagram = target.read_text(encoding="utf-8")
    assert f"{len(fsm)} transitions, ended: completed" in diagram
    assert "flowchart TB" in diagram
    assert "class stopped current" in diagram
    assert 'stopped("<b>stopped</b><br/><b>final state</b>")' in diagram
    assert 'closing_turn -->|"<b>5\u00d7 proceeded</b>"| awaiting_steering' in diagram
    assert "<b>1\u00d7 steering_polled [has_new_messages]</b>" in diagram
    styles = re.findall(r"^    linkStyle \d+ (.*)$", diagram, re.MULTILINE)
    arrows = {re.sub(r"-\(\w+\)->", "->", x) for x in fsm}  # one arrow per pair of states
    assert sum("stroke:#2b6cb0" in x for x in styles) == len(arrows) + 2  # + start and end
    assert not any("#c53030" in x for x in styles)  # nothing red in a clean run
    # the approval: its state was visited and says how long the run waited there (with
    # --delay 0 the demo user decides at once)
    waited = re.search(
        r'^    awaiting_approval\("<b>awaiting_approval</b><br/><i>waited (\d+\.\d\d) s</i>"\)$',
        diagram,
        re.MULTILINE,
    )
    assert waited is not None and float(waited.group(1)) < 1
    assert re.search(r"^    class \S*\bawaiting_approval\b\S* visited$", diagram, re.MULTILINE)
    assert "<b>1\u00d7 tools_prepared [calls_prepared, approvals_pending]</b>" in diagram

    # the steps, in order, next to it
    steps = target.with_name("run-steps.md")
    assert f"run steps (Markdown): {steps}" in lines
    rows = [x for x in steps.read_text(encoding="utf-8").splitlines() if re.match(r"\| \d+ \|", x)]
    assert len(rows) == len(fsm)
    for number, (row, shown) in enumerate(zip(rows, fsm, strict=True), 1):
        match = re.fullmatch(r"\[fsm\] (\w+) -\((\w+)\)-> (\w+)", shown)
        assert match is not None
        source, trigger, dest = match.groups()
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == str(number) and cells[1].strip("*") == trigger
        assert cells[2] == f"{source} \u2192 {dest}"
        # the waited column: only the step out of awaiting_approval has a time
        assert cells[3].startswith("waited ") == (source == "awaiting_approval"), cells[3]
    svg = target.with_suffix(".svg")
    if shutil.which("dot") is not None:
        assert f"run diagram (SVG): {svg}" in lines
        drawn = svg.read_text(encoding="utf-8")
        assert "stopped" in drawn and ">waited " in drawn
    else:
        assert not svg.exists()


def test_demo_default_output_goes_to_the_user_s_demo_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one private folder per user in the temporary directory, replaced by each demo: running
    # it again leaves no second folder behind (it used to make a new one every time)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    expected = tmp_path / f"agentcore-fsm-demo-{getpass.getuser()}" / "run.mmd"
    for _ in range(2):
        code, out = run_demo(capsys)
        assert code == 0
        line = next(x for x in out.splitlines() if x.startswith("run diagram (Mermaid): "))
        assert Path(line.removeprefix("run diagram (Mermaid): ")) == expected
    assert expected.is_file() and "<b>final state</b>" in expected.read_text(encoding="utf-8")
    assert (expected.parent / "run-steps.md").is_file()
    assert stat.S_IMODE(expected.parent.stat().st_mode) == 0o700
    assert [p.name for p in tmp_path.iterdir()] == [expected.parent.name]  # nothing else left


def test_demo_never_writes_through_a_link_at_its_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / f"agentcore-fsm-demo-{getpass.getuser()}").symlink_to(elsewhere)
    code, out = run_demo(capsys)
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("run diagram (Mermaid): "))
    path = Path(line.removeprefix("run diagram (Mermaid): "))
    assert path.is_file() and path.parent.parent == tmp_path
    assert path.parent.name.startswith("agentcore-fsm-demo-") and not path.parent.is_symlink()
    assert list(elsewhere.iterdir()) == []


def test_the_demo_page_shows_what_the_demo_prints(capsys: pytest.CaptureFixture[str]) -> None:
    # docs/demo.md quotes the end of the transcript and the summary, with the output directory
    # written as /tmp/agentcore-fsm-demo-USER
    shown = [b.code for b in code_blocks(DOCS / "demo.md") if b.lang == "text"]
    assert len(shown) == 1
    expected = shown[0].rstrip("\n").split("\n")
    code, out = run_demo(capsys)
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("run diagram (Mermaid): "))
    folder = Path(line.removeprefix("run diagram (Mermaid): ")).parent
    try:
        printed = out.replace(str(folder), "/tmp/agentcore-fsm-demo-USER").splitlines()
        tail = printed[printed.index(expected[0]) :]
        if shutil.which("dot") is None:  # no SVG without Graphviz
            expected = [x for x in expected if not x.startswith("run diagram (SVG): ")]
        assert [x.rstrip() for x in tail] == expected
    finally:
        shutil.rmtree(folder)


def test_demo_command_in_a_subprocess_leaves_the_working_directory_alone(tmp_path: Path) -> None:
    target = tmp_path / "diagram.mmd"
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentcore_fsm.cli.commands",
            "demo",
            "--delay",
            "0",
            "--out",
            str(target),
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "4490.10 EUR" in proc.stdout
    assert target.is_file()
    assert list(work.iterdir()) == []


# --- a run that goes wrong ------------------------------------------------------------------


def test_a_failed_run_says_why_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = demo.scripted_model()
    monkeypatch.setattr(demo, "scripted_model", lambda: [*script[:2], FauxError("overloaded")])
    target = tmp_path / "run.mmd"
    code = cli.main(["demo", "--delay", "0", "--out", str(target)])
    out, err = capsys.readouterr()
    assert code == 1
    lines = out.splitlines()
    assert "assistant ! error: overloaded" in lines  # in the transcript, where it happened
    assert "outcome: error: overloaded" in lines  # in the closing lines
    assert err == "agentcore-fsm demo: the run ended with an error: overloaded\n"
    diagram = target.read_text(encoding="utf-8")
    # in the diagram, inside the state where the model call failed, and the arrow out is red
    assert (
        'streaming("<b>streaming</b><br/><i>call_model</i><br/><b>error here</b><br/>overloaded")'
        in diagram
    )
    assert "class streaming incident" in diagram
    assert "ended: error" in diagram.splitlines()[1]
    steps = target.with_name("run-steps.md").read_text(encoding="utf-8")
    assert "- error: overloaded" in steps
    assert "*model_finished* (error here) | streaming \u2192 stopped" in steps


def test_a_run_that_completes_despite_a_tool_error_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    look = demo.scripted_model()[0]

    def read_missing(context: Any) -> Any:
        return faux_response("Reading it.", tool_calls=[demo._call("read_file", {"path": "x"}, 1)])

    def give_up(context: Any) -> Any:
        return faux_response("There is no such file.")

    monkeypatch.setattr(demo, "scripted_model", lambda: [look, read_missing, give_up])
    target = tmp_path / "run.mmd"
    code = cli.main(["demo", "--delay", "0", "--out", str(target)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert any(re.match(r"\s+error read_file -> .*No such file", x) for x in lines)
    outcome = next(x for x in lines if x.startswith("outcome: "))
    assert outcome.startswith("outcome: completed despite 1 tool error(s): read_file: ")
    diagram = target.read_text(encoding="utf-8")
    assert "ended: completed despite 1 tool error" in diagram.splitlines()[1]
    assert "class stopped warned" in diagram
    assert "<b>final state</b><br/>completed despite 1 tool error#58;<br/>read_file#58; " in diagram


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


def test_the_demo_shows_an_agent_calling_an_agent_as_a_tree(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = run_demo(capsys)
    assert code == 0
    lines = out.splitlines()
    start = lines.index(
        "agents: a bookkeeper asks an auditor (an agent as a tool) to check the sum"
    )
    tree = lines[start + 1 :]
    call = tree.index("    tool  auditor(prompt='Please check 1249.50 + 380.25 + 2112.00')")
    result = tree.index("    ok    auditor -> Checked with the calculator: 3741.75.")
    # the nested run's lines, tagged with the bookkeeper's call id and indented one level
    # deeper, all come between the call and its result: the inner run is enclosed in the call
    nested = [i for i, line in enumerate(tree) if line.startswith("      [a1] ")]
    assert nested and call < min(nested) and max(nested) < result
    assert [tree[i].removeprefix("      [a1] ") for i in nested] == [
        "agent_start",
        "tool  calculator(expression='1249.50 + 380.25 + 2112.00')",
        "ok    calculator -> 3741.75",  # computed during the run
        "assistant > Checked with the calculator: 3741.75.",
        "agent_end completed",
    ]
    assert tree[0] == "    agent_start" and "    agent_end completed" in tree[result:]
    assert tree[-1] == "agents outcome: completed"
