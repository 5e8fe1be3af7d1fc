"""The wheel works on its own: build it, install it into a fresh venv, use it from outside the repo.

How the fresh venv gets the package's dependencies (the decision, and why):

* The wheel itself is installed with ``pip install --no-deps --no-index``: what is imported as
  ``agentcore_fsm`` can only come from the wheel.
* The dependencies are *not* downloaded: that would make the test slow and dependent on the
  network and on whatever versions the index serves that day. Instead the test computes the
  closure of the wheel's own ``Requires-Dist`` (markers evaluated, extras excluded) over the
  distributions installed in the running environment, and symlinks exactly those
  distributions' top-level files (packages, modules, ``.dist-info``) into a ``deps`` folder,
  which a ``.pth`` file puts on the fresh venv's path. Nothing else of the running environment
  is visible - in particular not the editable install of this package, whose finder hook lives
  in ``.pth`` files that a path added this way never runs. ``python -m venv
  --system-site-packages`` would leak everything, so it is not used.
* ``pip check`` then runs against the fresh venv: it fails unless the wheel's metadata names
  dependencies that the linked distributions satisfy (a missing or wrong ``Requires-Dist``
  shows up here, although nothing is downloaded).

The wheel is built with ``python -m build --wheel`` (isolated: the build backend named in
``pyproject.toml`` is installed into a temporary environment by pip, from the configured index
or its cache), from a copy of the source tree, so that the build's ``build/`` and
``*.egg-info`` never land in the checkout. Everything then runs with the working directory
outside the repository and without ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
SKIP_COPY = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "diagrams", "tests"
)


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _run(args: list[str | Path], cwd: Path, timeout: float = 300) -> str:
    proc = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _requirements(dist: metadata.Distribution) -> list[Requirement]:
    """The distribution's unconditional requirements (markers evaluated, no extras)."""
    found = []
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            found.append(req)
    return found


def dependency_closure(requirements: list[Requirement]) -> list[metadata.Distribution]:
    """The installed distributions that ``requirements`` need, transitively."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        req = todo.pop()
        key = canonicalize_name(req.name)
        if key in seen:
            continue
        dist = metadata.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), (
            f"the running environment has {req.name} {dist.version}, the wheel needs {req}"
        )
        seen[key] = dist
        todo.extend(_requirements(dist))
    return list(seen.values())


def link_distributions(dists: list[metadata.Distribution], target: Path) -> list[str]:
    """Symlink each distribution's top-level entries into ``target``; return their names."""
    target.mkdir()
    names: set[str] = set()
    for dist in dists:
        base = Path(str(dist.locate_file("")))
        for file in dist.files or []:
            top = file.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue
            names.add(top)
            link = target / top
            if not link.exists():
                link.symlink_to(base / top)
    return sorted(names)


INSIDE = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import anyio

    import agentcore_fsm
    from agentcore_fsm import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, Model
    from agentcore_fsm import TextContent, ToolResultMessage, UserMessage, run_agent_loop
    from agentcore_fsm.core.declaration import load_declaration
    from agentcore_fsm.core.declaration import declaration_names
    from agentcore_fsm.devtools.diagrams import run_view, to_mermaid
    from agentcore_fsm import FauxProvider, faux_response, faux_tool_call

    venv = Path(sys.prefix).resolve()
    assert Path(agentcore_fsm.__file__).resolve().is_relative_to(venv), agentcore_fsm.__file__
    print("package:", Path(agentcore_fsm.__file__).resolve())

    async def double(tool_call_id, params, signal, on_update):
        return AgentToolResult(content=[TextContent(text=str(2 * params["n"]))])

    tool = AgentTool(
        name="double",
        description="Double n.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        execute=double,
    )
    faux = FauxProvider([
        faux_response("Doubling.", tool_calls=[faux_tool_call("double", {"n": 21})]),
        lambda ctx: faux_response("The answer is " + ctx.messages[-1].content[0].text + "."),
    ])
    records = []
    events = []
    messages = anyio.run(
        lambda: run_agent_loop(
            [UserMessage(content="Double 21.")],
            AgentContext(tools=[tool]),
            AgentLoopConfig(model=Model(id="faux")),
            events.append,
            stream_fn=faux,
            on_transition=records.append,
        ),
        backend="trio",
    )
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [r.content[0].text for r in results] == ["42"], results
    assert messages[-1].text() == "The answer is 42.", messages[-1]
    assert events[0].type == "agent_start" and events[-1].type == "agent_end"
    print("loop:", messages[-1].text())

    names = declaration_names()
    assert "agent_loop" in names, names
    for name in names:
        decl = load_declaration(name)
        text = to_mermaid(decl)
        for state in decl.states:
            assert state in text, (name, state)
        print("declaration:", name, len(decl.states), "states", len(decl.transitions), "edges")
    loop = load_declaration("agent_loop")
    run_text = to_mermaid(loop, run_view(loop, records))
    assert "stopped" in run_text
    print("run diagram:", len(records), "transitions,", len(run_text.splitlines()), "lines")
    """
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh venv's python, a work directory outside the repo), with the wheel installed."""
    base = tmp_path_factory.mktemp("packaging")
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=SKIP_COPY, symlinks=True)
    dist = base / "dist"
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", dist, source], cwd=base)
    wheels = list(dist.glob("agentcore_fsm-*.whl"))
    assert len(wheels) == 1, wheels

    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=base)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python]
    _run([*pip, "install", "--no-deps", "--no-index", wheels[0]], cwd=base)

    requires = _requirements(metadata.PathDistribution(_dist_info(venv)))
    assert {canonicalize_name(r.name) for r in requires} >= {"pydantic", "anyio", "trio"}
    deps = base / "deps"
    linked = link_distributions(dependency_closure(requires), deps)
    assert not any(n.startswith("agentcore_fsm") for n in linked), linked
    purelib = _run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], base
    )
    Path(purelib.strip(), "_test_deps.pth").write_text(f"{deps}\n", encoding="utf-8")
    _run([*pip, "check"], cwd=base)

    work = base / "work"
    work.mkdir()
    return python, work


def _dist_info(venv: Path) -> Path:
    found = list(venv.glob("lib/python*/site-packages/agentcore_fsm-*.dist-info"))
    assert len(found) == 1, found
    return found[0]


def test_wheel_ships_the_declarations(installed: tuple[Path, Path]) -> None:
    python, _ = installed
    venv = python.parent.parent
    shipped = sorted(p.name for p in venv.glob("lib/python*/site-packages/agentcore_fsm/states/*"))
    assert "agent_loop.toml" in shipped
    in_repo = sorted(p.name for p in (ROOT / "states").glob("*.toml"))
    assert set(in_repo) <= set(shipped), (in_repo, shipped)
    assert list(venv.glob("lib/python*/site-packages/agentcore_fsm/py.typed"))


def test_installed_package_runs_a_loop_and_draws(installed: tuple[Path, Path]) -> None:
    python, work = installed
    script = work / "use_it.py"
    script.write_text(INSIDE, encoding="utf-8")
    out = _run([python, "-I", script], cwd=work)
    assert "loop: The answer is 42." in out
    assert "declaration: agent_loop" in out
    assert "run diagram:" in out
    package = out.splitlines()[0].removeprefix("package: ")
    assert not Path(package).is_relative_to(ROOT), package


def test_installed_command_runs_the_demo(installed: tuple[Path, Path]) -> None:
    python, work = installed
    target = work / "demo-run.mmd"
    out = _run([python.parent / "agentcore-fsm", "demo", "--delay", "0", "--out", target], work)
    assert "with 20% VAT that is 4490.10 EUR" in out
    assert f"run diagram (Mermaid): {target}" in out
    diagram = target.read_text(encoding="utf-8")
    # the run diagram names the final state (whichever Mermaid form draws it)
    assert "stopped" in diagram and "final state" in diagram, diagram


LAZY = textwrap.dedent(
    """
    import sys

    import agentcore_fsm

    held_back = ["trio", "agentcore_fsm.agent.agent", "agentcore_fsm.integrations.providers",
        "agentcore_fsm.cli.commands"]
    assert not [m for m in held_back if m in sys.modules], sys.modules.keys()
    from agentcore_fsm import Agent, FauxProvider, get_model

    assert Agent.__module__ == "agentcore_fsm.agent.agent"
    assert FauxProvider.__module__ == "agentcore_fsm.integrations.providers.faux"
    print("lazy:", get_model("openai", "gpt-4o-mini").id, agentcore_fsm.__version__)
    """
)


def test_installed_package_imports_lazily(installed: tuple[Path, Path]) -> None:
    python, work = installed
    script = work / "lazy.py"
    script.write_text(LAZY, encoding="utf-8")
    out = _run([python, "-I", script], cwd=work)
    assert out == f"lazy: gpt-4o-mini {_project_version()}\n"


def test_installed_command_prints_its_version(installed: tuple[Path, Path]) -> None:
    python, work = installed
    out = _run([python.parent / "agentcore-fsm", "--version"], work)
    assert out == f"agentcore-fsm {_project_version()}\n"


def _project_version() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    version: str = project["version"]
    return version


def test_installed_command_writes_the_run_viewer(installed: tuple[Path, Path]) -> None:
    python, work = installed
    venv = python.parent.parent
    assets = venv.glob("lib/python*/site-packages/agentcore_fsm/devtools/viewer_assets/*")
    assert sorted(p.name for p in assets) == ["viewer.css", "viewer.html", "viewer.js"]
    recording = ROOT / "tests" / "fixtures" / "record_v2_output.jsonl"
    page = work / "viewer.html"
    out = _run([python.parent / "agentcore-fsm", "view", recording, "-o", page], work)
    assert out.startswith(f"wrote {page}")
    text = page.read_text(encoding="utf-8")
    assert (
        "Timeline.prototype.go" in text and ".timeline" in text and 'id="timeline-template"' in text
    )
