"""``import agentcore_fsm`` loads the loop and nothing the caller did not ask for.

The checks run in fresh interpreters (this test process has imported everything long ago) and
look at ``sys.modules``: a deterministic check, unlike a timing. The time itself is reported by
``agentcore-fsm bench``, never asserted.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import agentcore_fsm
from agentcore_fsm.cli import commands as cli

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "agentcore_fsm"

NOT_ON_IMPORT = [
    "trio",
    "openai",
    "anthropic",
    "agentcore_fsm.agent.agent",
    "agentcore_fsm.integrations.providers",
    "agentcore_fsm.integrations.providers.faux",
    "agentcore_fsm.integrations.providers.models",
    "agentcore_fsm.integrations.providers.openai",
    "agentcore_fsm.integrations.providers.anthropic",
    "agentcore_fsm.persist.recorder",
    "agentcore_fsm.devtools.diagrams",
    "agentcore_fsm.devtools.diagram_files",
    "agentcore_fsm.cli.diagram",
    "agentcore_fsm.cli.commands",
    "agentcore_fsm.devtools.testing",
    "agentcore_fsm.cli.bench",
    "agentcore_fsm.cli.demo",
    "agentcore_fsm.cli.chat",
    "agentcore_fsm.integrations.otel",
    "jsonschema",
    "opentelemetry",
]
"""Modules a bare ``import agentcore_fsm`` must not load."""


def fresh(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter (from the repository root); it prints one JSON
    value, which is returned."""
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def loaded_after(statements: str) -> list[str]:
    """Which of :data:`NOT_ON_IMPORT` are in ``sys.modules`` after ``statements`` ran in a
    fresh interpreter."""
    code = (
        f"import json, sys\n{statements}\n"
        f"print(json.dumps({{'loaded': [m for m in {NOT_ON_IMPORT!r} if m in sys.modules]}}))"
    )
    loaded = fresh(code)["loaded"]
    assert isinstance(loaded, list)
    return loaded


def test_importing_the_package_loads_only_the_loop() -> None:
    assert loaded_after("import agentcore_fsm") == []


def test_the_loop_itself_is_loaded() -> None:
    code = (
        "import json, sys, agentcore_fsm\n"
        "core = ['core.messages', 'core.events', 'core.tools', 'core.config', 'core.machine',"
        " 'runtime.driver', 'core.abort']\n"
        "print(json.dumps({'missing': [m for m in core "
        "if 'agentcore_fsm.' + m not in sys.modules]}))"
    )
    assert fresh(code) == {"missing": []}


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        (
            "from agentcore_fsm import get_model",
            ["integrations.providers", "integrations.providers.models"],
        ),
        ("agentcore_fsm.FauxProvider", ["integrations.providers", "integrations.providers.faux"]),
        ("agentcore_fsm.RunRecorder", ["persist.recorder"]),
        (
            "agentcore_fsm.OpenAIProvider",
            [
                "integrations.providers",
                "integrations.providers.models",
                "integrations.providers.openai",
            ],
        ),
        (
            "agentcore_fsm.AnthropicProvider",
            [
                "integrations.providers",
                "integrations.providers.anthropic",
                "integrations.providers.models",
            ],
        ),
        # the checker re-exports the faux provider it runs the loop with
        (
            "import agentcore_fsm.devtools.testing",
            ["integrations.providers", "integrations.providers.faux", "devtools.testing"],
        ),
        ("import agentcore_fsm.cli.commands", ["cli.commands"]),
    ],
)
def test_a_lazy_name_loads_its_own_module_only(statement: str, expected: list[str]) -> None:
    loaded = loaded_after(f"import agentcore_fsm\n{statement}")
    # its module (and the providers package); never trio, an SDK or another provider
    assert sorted(loaded) == sorted(f"agentcore_fsm.{m}" for m in expected)


def test_every_public_name_is_importable_and_the_same_object() -> None:
    from agentcore_fsm.agent.agent import Agent
    from agentcore_fsm.integrations.providers.faux import FauxProvider
    from agentcore_fsm.persist.recorder import load_run

    for name in agentcore_fsm.__all__:
        assert getattr(agentcore_fsm, name) is not None, name
    assert agentcore_fsm.Agent is Agent
    assert agentcore_fsm.FauxProvider is FauxProvider
    assert agentcore_fsm.load_run is load_run
    assert set(agentcore_fsm.__all__) <= set(dir(agentcore_fsm))
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
        _ = agentcore_fsm.NoSuchName  # type: ignore[attr-defined]


def test_star_import_gives_every_public_name() -> None:
    result = fresh(
        "import json\nfrom agentcore_fsm import *\n"
        "import agentcore_fsm\n"
        "print(json.dumps({'missing': [n for n in agentcore_fsm.__all__ "
        "if n not in globals()]}))"
    )
    assert result == {"missing": []}


def test_type_checkers_see_every_lazy_name() -> None:
    """Each lazily loaded name is imported under ``if TYPE_CHECKING:`` from the module it is
    loaded from, and the module ``__getattr__`` is hidden from type checkers (so that a
    misspelt name is still an error for them)."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    typed: dict[str, str] = {}
    getattr_hidden = False
    lazy: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                for alias in stmt.names:
                    typed[alias.name] = "." * stmt.level + (stmt.module or "")
        if isinstance(node, ast.If) and ast.unparse(node.test) == "not TYPE_CHECKING":
            getattr_hidden = any(
                isinstance(s, ast.FunctionDef) and s.name == "__getattr__" for s in node.body
            )
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "_LAZY":
            lazy = ast.literal_eval(node.value) if node.value is not None else {}
    assert lazy, "no _LAZY table"
    assert typed == lazy
    assert getattr_hidden
    assert set(lazy) <= set(agentcore_fsm.__all__)


# --- the version ------------------------------------------------------------------------------


def test_version_is_the_project_s() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert agentcore_fsm.__version__ == project["version"]
    assert metadata.version("agentcore-fsm") == agentcore_fsm.__version__


def test_version_option_prints_the_installed_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["--version"]) == 0
    out, err = capsys.readouterr()
    assert out == f"agentcore-fsm {metadata.version('agentcore-fsm')}\n"
    assert err == ""


def test_version_falls_back_to_the_package_s_own(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    from agentcore_fsm.core import version

    monkeypatch.setattr(version, "__version__", "9.8.7")
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == "agentcore-fsm 9.8.7\n"


def test_version_from_the_command_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentcore_fsm.cli.commands", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"agentcore-fsm {agentcore_fsm.__version__}\n"


def test_help_lists_the_version_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert "  --version   print the version and exit" in capsys.readouterr().out.splitlines()
