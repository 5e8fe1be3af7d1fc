"""Every ```python block of README.md and docs/*.md runs as a standalone script, and prints
what the ```text block right after it (when there is one) says it prints: the docs stay true.

How blocks are found and paired with their output: ``tests/readme_sections.py``."""

from __future__ import annotations

import subprocess
import sys
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


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_example_runs(block: CodeBlock, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block.code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"{block.where} failed:\n{block.code}\n---\n{proc.stderr}"
    if block.output is not None:
        assert _lines(proc.stdout) == _lines(block.output), (
            f"{block.where} printed something else than the docs show:\n{proc.stdout}"
        )
