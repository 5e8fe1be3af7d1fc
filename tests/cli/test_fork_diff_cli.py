"""``agentcore-fsm fork`` and ``agentcore-fsm diff`` on the demo run and on a SQLite store:
exit status 0 / 1 (diff: different), bad input a one-line error with status 2 and no file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentcore_fsm import SqliteRunStore
from agentcore_fsm.cli import commands as cli
from agentcore_fsm.cli.debug_commands import DEMO_RUN_ID, record_demo_run
from tests.fork_runs import CLI_PLAN, record


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.jsonl"
    record_demo_run(path)
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _calculator_step(demo: Path) -> int:
    steps = [json.loads(line) for line in demo.read_text(encoding="utf-8").splitlines()]
    inputs = [s["entry"] for s in steps if s["kind"] == "input"]
    found = [
        i
        for i, e in enumerate(inputs)
        if e["input"] == "tool_finished" and e["result"]["content"][0]["text"] == "3741.75"
    ]
    assert len(found) == 1
    return found[0]


def test_fork_the_demo_run_and_diff_it(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    at = _calculator_step(demo)
    out_path = tmp_path / "fork.jsonl"
    code, out, err = run_cli(
        capsys, "fork", str(demo), "--at", str(at), "--tool-result", "1000", "--demo",
        "-o", str(out_path),
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert out.startswith(
        f"forked run {DEMO_RUN_ID!r} at step {at} (tool_finished) into run 'demo@{at}': "
    )
    assert out.rstrip().endswith(f"ended completed; recorded in {out_path}")
    code, out, err = run_cli(capsys, "diff", str(demo), str(out_path))
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[1:3] == [
        f"first divergence at step {at}, in its input:",
        '  result.content[0].text: A "3741.75", B "1000"',
    ]
    assert "Your three invoices add up to 1000.00 EUR" in "\n".join(
        json.loads(line)["entry"]["message"]["message"]["content"][0]["text"]
        for line in out_path.read_text(encoding="utf-8").splitlines()
        if '"input":"stream_done"' in line
    )
    code, out, err = run_cli(capsys, "diff", str(demo), str(out_path), "--json")
    data = json.loads(out)
    assert code == 1 and data["first"]["step"] == at and data["b"]["run"] == f"demo@{at}"
    code, out, err = run_cli(capsys, "diff", str(demo), str(demo))
    assert (code, err) == (0, "") and "no divergence" in out


def test_fork_a_store_run_with_an_application_s_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = SqliteRunStore(tmp_path / "runs.db")
    record(CLI_PLAN, store, "order-1")
    last = len(store.load("order-1").entries) - 1
    out_path = tmp_path / "fork.jsonl"
    code, out, err = run_cli(
        capsys, "fork", str(tmp_path / "runs.db"), "--run", "order-1", "--at", str(last),
        "--tools", "tests.fork_runs:TOOLS", "--config", "tests.fork_runs:CLI_CONFIG",
        "-o", str(out_path), "--fork-id", "order-1b",
    )  # fmt: skip
    assert (code, err) == (0, ""), err
    assert "into run 'order-1b'" in out
    code, out, err = run_cli(
        capsys, "diff", str(tmp_path / "runs.db"), str(out_path), "--run-a", "order-1"
    )
    assert (code, err) == (0, "")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--at", "999"], f"run {DEMO_RUN_ID!r} has steps 0 to "),
        (["--at", "0", "--tool-result", "1"], "step 0 of run 'demo' is a start; a ToolResult edit"),
        (["--at", "1", "--error"], "--error goes with --tool-result"),
        (["--at", "3"], "the tool 'list_files', which was not given again"),
        (["--at", "3", "--demo", "--tools", "x:y"], "--demo gives the model and tools"),
        (["--at", "3", "--tools", "no_such_module:TOOLS"], "--tools 'no_such_module:TOOLS'"),
        (["--at", "3", "--tools", "nothing"], "must be MODULE:ATTRIBUTE"),
    ],
)
def test_bad_forks(
    demo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    out_path = tmp_path / "fork.jsonl"
    code, out, err = run_cli(capsys, "fork", str(demo), *argv, "-o", str(out_path))
    assert code == 2 and out == ""
    assert err.startswith("agentcore-fsm fork: error: ") and err.count("\n") == 1
    assert message in err
    assert not out_path.exists()


def test_bad_files(demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.jsonl"
    code, out, err = run_cli(capsys, "fork", str(missing), "--at", "1", "-o", str(tmp_path / "f"))
    assert (code, err) == (2, f"agentcore-fsm fork: error: cannot read {missing}: no such file\n")
    code, out, err = run_cli(capsys, "fork", str(demo), "--at", "1", "--demo", "-o", str(demo))
    assert code == 2 and "would overwrite the run it forks" in err
    damaged = tmp_path / "damaged.jsonl"
    text = demo.read_text(encoding="utf-8")
    damaged.write_text(text.replace('"input":"proceeded"', '"input":"procede"', 1), "utf-8")
    for argv in (["diff", str(demo), str(damaged)], ["fork", str(damaged), "--at", "1", "-o", "x"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and err.count("\n") == 1 and "damaged.jsonl:" in err, err
    other = tmp_path / "other.jsonl"
    digest = json.loads(text.splitlines()[1])["header"]["declaration_hash"]
    other.write_text(text.replace(digest, "0000000000000000"), "utf-8")
    code, out, err = run_cli(capsys, "diff", str(demo), str(other), "--json")
    assert code == 2 and out == "" and "0000000000000000" in err and err.count("\n") == 1
    store = tmp_path / "runs.db"
    SqliteRunStore(store).runs()
    code, out, err = run_cli(capsys, "diff", str(store), str(demo))
    assert code == 2 and "name its run with --run-a ID" in err
    assert not (tmp_path / "x").exists()


def test_the_commands_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    assert "  fork     Fork a run at a step" in out and "  diff     Compare two runs" in out
