"""Every ```python block of README.md and docs/*.md runs as a standalone script, and prints
what the ```text block right after it (when there is one) says it prints: the docs stay true.

How blocks are found and paired with their output: ``tests/readme_sections.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.readme_sections import README, CodeBlock, code_blocks, doc_files, python_blocks

BLOCKS = python_blocks()


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").split("\n")]


def test_the_readme_and_every_guide_have_examples() -> None:
    assert [b for b in code_blocks(README) if b.lang == "python"], "README.md has no example"
    pages = {b.path.name for b in BLOCKS}
    for page in ("loop.md", "agent.md", "tools.md", "testing.md", "providers.md", "diagrams.md"):
        assert page in pages, f"docs/{page} has no runnable example"
    assert len(BLOCKS) >= 15


def test_outputs_are_paired_only_with_python_blocks() -> None:
    # a ```text block right after a ```python one is its output; make sure the pairing sees some
    paired = [b for b in BLOCKS if b.output is not None]
    assert len(paired) >= 8
    for path in doc_files():
        for block in code_blocks(path):
            assert block.lang in ("python", "python-skip", "text", "sh", "mermaid", ""), (
                f"{block.where}: unexpected code block language {block.lang!r}"
            )


class Runner:
    """tests/example_runner.py: runs each example script in a fork of a process that has
    imported the package once (a new interpreter per example cost a second each)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve().parents[1] / "example_runner.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def run(self, script: Path) -> tuple[int, str, str]:
        """Run ``script`` in its folder: its exit status, standard output and error."""
        out, err = script.with_suffix(".out"), script.with_suffix(".err")
        request = {"script": str(script), "cwd": str(script.parent), "out": str(out)}
        request["err"] = str(err)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, "the example runner stopped"
        return int(answer), out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    made = Runner()
    yield made
    made.close()


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_example_runs(block: CodeBlock, tmp_path: Path, runner: Runner) -> None:
    script = tmp_path / "example.py"
    script.write_text(block.code, encoding="utf-8")
    code, stdout, stderr = runner.run(script)
    assert code == 0, f"{block.where} failed:\n{block.code}\n---\n{stderr}"
    if block.output is not None:
        assert _lines(stdout) == _lines(block.output), (
            f"{block.where} printed something else than the docs show:\n{stdout}"
        )


def test_the_runner_reports_a_failing_script_and_its_output(tmp_path: Path, runner: Runner) -> None:
    script = tmp_path / "bad.py"
    script.write_text("print('before')\nimport sys\nprint('to err', file=sys.stderr)\n1 / 0\n")
    code, stdout, stderr = runner.run(script)
    assert (code, stdout) == (1, "before\n")
    assert "to err" in stderr and "ZeroDivisionError" in stderr
    # a script sees only what it imports, as in a new interpreter
    script.write_text("print(Agent)\n")
    code, _, stderr = runner.run(script)
    assert code == 1 and "NameError" in stderr
    script.write_text("raise SystemExit(3)\n")
    assert runner.run(script)[0] == 3
