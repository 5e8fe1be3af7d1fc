"""The examples of the README's "The agent loop" section run as they are (each ```python
block is a script)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.readme_sections import section

BLOCKS = re.findall(r"```python\n(.*?)```", section("The agent loop"), re.S)


def test_the_doc_has_the_three_examples() -> None:
    assert len(BLOCKS) == 3
    assert "run_agent_loop" in BLOCKS[0] and "AgentTool" in BLOCKS[0]
    assert "agent_loop(" in BLOCKS[1]
    assert "LoopMachine" in BLOCKS[2]


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index: int, tmp_path: Path) -> None:
    script = tmp_path / f"example_{index}.py"
    script.write_text(BLOCKS[index], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the example printed nothing"
