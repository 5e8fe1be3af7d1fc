"""The examples of the providers guide (docs/providers.md) run as they are (each ```python block
is a script; ```python-skip blocks need real keys and are only shown)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.readme_sections import section

TEXT = section("Providers")
BLOCKS = re.findall(r"^```python\n(.*?)^```", TEXT, re.S | re.M)


def test_the_section_and_its_examples() -> None:
    assert TEXT.startswith("## Providers\n")
    assert len(BLOCKS) == 3
    assert "get_model" in BLOCKS[0] and "openai_compatible_model" in BLOCKS[0]
    assert 'Agent(model="anthropic:claude-sonnet-4-6")' in BLOCKS[1]
    assert "run_agent_loop" in BLOCKS[2] and "OpenAIProvider" in BLOCKS[2]


def run(index: int, tmp_path: Path) -> str:
    script = tmp_path / f"example_{index}.py"
    script.write_text(BLOCKS[index], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_models_example(tmp_path: Path) -> None:
    lines = run(0, tmp_path).splitlines()
    assert lines[0] == "openai-completions https://api.openai.com/v1 0.15 0.6 128000"
    assert lines[1] == "anthropic-messages True 128000 0.3"
    assert lines[2] == "ollama http://localhost:11434/v1 ['text'] 0.0"
    assert re.fullmatch(r"\d+ models known, e\.g\. \[.*\]", lines[3])


def test_model_names_example(tmp_path: Path) -> None:
    lines = run(1, tmp_path).splitlines()
    assert lines[0] == "anthropic 3.0"
    assert lines[1] == "128000"
    assert lines[2].startswith("model 'gpt-4o': name a model as 'provider:model-id'")
    assert len(lines) == 3


def test_loop_example_fails_as_data(tmp_path: Path) -> None:
    lines = run(2, tmp_path).splitlines()
    assert lines[0] == (
        "request: llama3.2 [{'role': 'system', 'content': 'Be brief.'}, "
        "{'role': 'user', 'content': 'Hello!'}]"
    )
    assert lines[1].startswith("error | Connection error: ")
