"""The command line refuses junk arguments with a one-line error, never a traceback.

Usage errors (a bad argument value) exit with status 2, as argparse does; a failure while doing
the work (a recording that cannot be read, Graphviz missing) exits with status 1.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentcore_fsm.cli import commands as cli
from agentcore_fsm.cli import demo
from agentcore_fsm.core.declaration import declaration_names, load_declaration
from agentcore_fsm.devtools.diagram_files import regenerate
from agentcore_fsm.devtools.diagrams import to_dot, to_mermaid
from agentcore_fsm.integrations.providers.faux import FauxError


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``agentcore-fsm ARGV`` in this process: (exit status, stdout, stderr)."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's own errors
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, command: str) -> str:
    """The message of a one-line ``agentcore-fsm COMMAND: error: ...`` (no traceback)."""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    prefix = f"agentcore-fsm {command}: error: "
    assert lines[0].startswith(prefix), err
    return lines[0].removeprefix(prefix)


# --- agentcore-fsm (no command) ---------------------------------------------------------------


def test_no_command_is_a_usage_error_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys)
    assert code == 2
    assert out == ""
    assert err.startswith("usage: agentcore-fsm COMMAND")
    code, out, err = run_cli(capsys, "--help")
    assert code == 0 and out.startswith("usage: agentcore-fsm COMMAND") and err == ""


# --- diagram --out ----------------------------------------------------------------------------


def test_diagram_out_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "diagram", "--out", str(tmp_path))
    assert code == 2 and out == ""
    assert one_line_error(err, "diagram") == f"--out {tmp_path} is a directory, not a file"


def test_diagram_out_in_a_missing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "x.mmd"
    code, _, err = run_cli(capsys, "diagram", "--out", str(target))
    assert code == 2
    message = one_line_error(err, "diagram")
    assert message == f"--out {target}: the directory {target.parent} does not exist"
    assert not target.parent.exists()


def test_diagram_out_under_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    code, _, err = run_cli(capsys, "diagram", "--out", str(tmp_path / "file" / "x.mmd"))
    assert code == 2
    assert "is not a directory" in one_line_error(err, "diagram")


def test_diagram_out_an_empty_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "diagram", "--out", "")
    assert code == 2 and out == ""
    assert "--out" in one_line_error(err, "diagram")


def test_diagram_format_follows_the_suffix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decl = load_declaration("agent_loop")
    for name, text in [("a.MMD", to_mermaid(decl)), ("b.gv", to_dot(decl)), ("c", None)]:
        code, _, err = run_cli(capsys, "diagram", "--out", str(tmp_path / name))
        assert code == 0, err
        expected = to_mermaid(decl) if text is None else text  # no suffix: Mermaid
        assert (tmp_path / name).read_text(encoding="utf-8") == expected


@pytest.mark.parametrize("name", ["x.gif", "x.jpeg", "x.svgz", "x.mmd.bak"])
def test_diagram_out_an_unsupported_suffix(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / name
    code, _, err = run_cli(capsys, "diagram", "--out", str(target))
    assert code == 2
    message = one_line_error(err, "diagram")
    assert message == (
        f"cannot tell the format of --out {target} from its suffix: use one of "
        ".mmd, .mermaid (mermaid); .dot, .gv (dot); .svg (svg); .png (png), or pass --format"
    )
    assert not target.exists()


@pytest.mark.parametrize(
    ("name", "fmt"), [("x.svg", "dot"), ("x.mmd", "png"), ("x.gif", "png"), ("x.txt", "svg")]
)
def test_diagram_out_suffix_contradicting_format(
    name: str, fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / name
    code, _, err = run_cli(capsys, "diagram", "--format", fmt, "--out", str(target))
    assert code == 2
    message = one_line_error(err, "diagram")
    assert message.startswith(f"--out {target} does not fit --format {fmt}: name it .")
    assert not target.exists()


def test_diagram_explicit_text_format_may_go_to_a_txt_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "diagram", "--format", "dot", "--out", str(tmp_path / "x.txt"))
    assert code == 0, err
    assert (tmp_path / "x.txt").read_text(encoding="utf-8") == to_dot(
        load_declaration("agent_loop")
    )


# --- diagram --machine, --run -----------------------------------------------------------------


def test_diagram_unknown_machine_lists_each_machine_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, "diagram", "--machine", "nope")
    assert code == 2 and out == ""
    message = one_line_error(err, "diagram")
    assert message.startswith("--machine: no machine named 'nope'; known: loop (agent_loop)")
    listed = message.split("; known: ")[1].replace(" (agent_loop)", "").split(", ")
    assert len(listed) == len(set(listed))
    assert set(listed) == {"loop", *declaration_names()} - {"agent_loop"}


def test_diagram_empty_machine(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "diagram", "--machine", "")
    assert code == 2 and out == ""
    assert "no machine named ''" in one_line_error(err, "diagram")


def test_diagram_unknown_machine_with_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run.jsonl"
    run.write_text("", encoding="utf-8")
    code, _, err = run_cli(capsys, "diagram", "--run", str(run), "--machine", "nope")
    assert code == 2
    assert "no machine named 'nope'" in one_line_error(err, "diagram")


def test_diagram_run_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.jsonl"
    code, out, err = run_cli(capsys, "diagram", "--run", str(missing))
    assert code == 1 and out == ""
    assert one_line_error(err, "diagram") == f"cannot read {missing}: No such file or directory"


def test_diagram_run_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "diagram", "--run", str(tmp_path))
    assert code == 1
    assert one_line_error(err, "diagram") == f"cannot read {tmp_path}: Is a directory"


def test_diagram_run_empty_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "diagram", "--run", "")
    assert code == 2 and out == ""
    assert "--run" in one_line_error(err, "diagram")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe{}\n", ":1: not UTF-8 text (byte 0xff at column 1)"),
        (b'{"kind": "run", "format": "agentcore-fsm.run",', ":1: not JSON"),
        (b'{"kind": "run", "format": "other"}\n', ":1: not an agentcore-fsm run"),
        (b"[" * 100_000, ":1: not JSON this reader can take: nested too deeply"),
    ],
)
def test_diagram_run_garbled(
    content: bytes, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    code, out, err = run_cli(capsys, "diagram", "--run", str(path))
    assert code == 1 and out == ""
    assert one_line_error(err, "diagram").startswith(f"{path}{message}")


def test_diagram_run_of_another_declaration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header = {"kind": "run", "format": "agentcore-fsm.run", "version": 1, "machine": "agent_loop"}
    bogus = {
        "kind": "transition",
        "machine": "agent_loop",
        "index": 9999,
        "trigger": "x",
        "source": "idle",
        "dest": "y",
    }
    path = tmp_path / "run.jsonl"
    path.write_text(f"{json.dumps(header)}\n{json.dumps(bogus)}\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "diagram", "--run", str(path))
    assert code == 1
    assert "declares no transition #9999" in one_line_error(err, "diagram")


def test_diagram_run_of_events_without_transitions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recording of the events only (the recorder was not given the transitions): the path
    cannot be drawn, and the command says so rather than draw an idle machine."""
    import trio

    from agentcore_fsm import AgentContext, AgentLoopConfig, Model, UserMessage, run_agent_loop
    from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response
    from agentcore_fsm.persist.recorder import RunRecorder

    path = tmp_path / "events.jsonl"

    async def main() -> None:
        with RunRecorder(path) as recorder:
            await run_agent_loop(
                [UserMessage(content="hi")],
                AgentContext(),
                AgentLoopConfig(model=Model(id="m")),
                recorder,
                stream_fn=FauxProvider([faux_response("hello")]),
            )

    trio.run(main)
    code, out, err = run_cli(capsys, "diagram", "--run", str(path))
    assert code == 1 and out == ""
    assert one_line_error(err, "diagram") == (
        "the recording holds events but no transitions of 'agent_loop', so the path of the run "
        "cannot be drawn: record them too (on_transition=recorder.on_transition, or "
        "store=recorder.store to record the run's inputs; docs/record.md)"
    )


# --- diagram --regenerate --dir ---------------------------------------------------------------


@pytest.mark.parametrize("check", [False, True])
def test_regenerate_into_a_missing_tree(
    check: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "deeper"
    argv = ["diagram", "--regenerate", *(["--check"] if check else []), "--dir", str(target)]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert one_line_error(err, "diagram") == (
        f"--dir {target}: the directory {target.parent} does not exist "
        "(only the last directory of --dir is created)"
    )
    assert not (tmp_path / "missing").exists()


def test_regenerate_into_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x", encoding="utf-8")
    code, _, err = run_cli(capsys, "diagram", "--regenerate", "--dir", str(target))
    assert code == 2
    assert one_line_error(err, "diagram") == f"--dir {target} is not a directory"
    assert target.read_text(encoding="utf-8") == "x"


def test_regenerate_empty_dir(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "diagram", "--regenerate", "--check", "--dir", "")
    assert code == 2 and out == ""
    assert "--dir" in one_line_error(err, "diagram")


def test_regenerate_creates_only_the_last_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        regenerate(tmp_path / "missing" / "deeper", names=["agent_loop"])
    assert not (tmp_path / "missing").exists()


def test_diagram_help_says_what_is_created(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "diagram", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "created if missing, but its parent must exist" in text  # --dir
    assert "its directory must exist" in text  # --out
    assert ".mmd, .mermaid (mermaid); .dot, .gv (dot); .svg (svg); .png (png)" in text


# --- demo -------------------------------------------------------------------------------------


@pytest.fixture
def no_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's session must not start (a test of a refused argument fails, not hangs)."""

    async def refuse(*args: Any) -> Any:
        raise AssertionError("the session started")

    monkeypatch.setattr(demo, "run_demo", refuse)


@pytest.mark.parametrize("delay", ["-1", "-0.5", "nan", "inf", "-inf", "soon"])
@pytest.mark.usefixtures("no_session")
def test_demo_rejects_a_bad_delay(delay: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "demo", f"--delay={delay}")  # "-inf" is not an option
    assert code == 2 and out == ""
    assert "Traceback" not in err
    assert f"argument --delay: must be a finite number of seconds, 0 or more, not {delay!r}" in err


@pytest.mark.usefixtures("no_session")
@pytest.mark.parametrize("parts", [("a", "run.mmd"), ("a", "b", "run.mmd")])
def test_demo_out_in_a_missing_directory(
    parts: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path.joinpath(*parts)
    code, out, err = run_cli(capsys, "demo", "--delay", "0", "--out", str(target))
    assert code == 2 and out == ""  # refused before the session starts
    message = one_line_error(err, "demo")
    assert message == f"--out {target}: the directory {target.parent} does not exist"
    assert not (tmp_path / "a").exists()


@pytest.mark.usefixtures("no_session")
def test_demo_out_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "demo", "--delay", "0", "--out", str(tmp_path))
    assert code == 2 and out == ""
    assert one_line_error(err, "demo") == f"--out {tmp_path} is a directory, not a file"


@pytest.mark.usefixtures("no_session")
@pytest.mark.parametrize("name", ["run.svg", "run.png", "run", "run.dot"])
def test_demo_out_must_be_a_mermaid_file(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / name
    code, out, err = run_cli(capsys, "demo", "--delay", "0", "--out", str(target))
    assert code == 2 and out == ""
    assert one_line_error(err, "demo") == (
        f"--out {target}: the run diagram is Mermaid, so its name must end in .mmd or .mermaid"
    )
    assert not target.exists()


def test_demo_help_says_what_is_created(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "demo", "--help")
    assert code == 0
    assert "its directory must exist" in " ".join(out.split())


def test_demo_shows_the_error_of_a_failed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "scripted_model", lambda: [FauxError("the model is on fire")])
    target = tmp_path / "run.mmd"
    code, out, err = run_cli(capsys, "demo", "--delay", "0", "--out", str(target))
    assert code == 1
    assert "assistant ! error: the model is on fire" in out.splitlines()
    assert "agent_end: reason=error, 2 new messages" in out.splitlines()
    assert err == "agentcore-fsm demo: the run ended with an error: the model is on fire\n"
    assert "ended: error" in target.read_text(encoding="utf-8")


def test_demo_output_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentcore_fsm.cli.commands", "demo", "--delay", "0.02"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # like `agentcore-fsm demo | head -1`
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 141
    assert first.startswith(b"agentcore-fsm demo:")
    assert "Traceback" not in err and "Broken pipe" not in err, err


# --- chat -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-tokens", "0"], "argument --max-tokens: must be a whole number, at least 1"),
        (["--max-tokens", "-5"], "argument --max-tokens: must be a whole number, at least 1"),
        (["--max-tokens", "2.5"], "argument --max-tokens: must be a whole number, at least 1"),
        (["--model", ""], "argument --model: must not be empty"),
        (["--model", "  "], "argument --model: must not be empty"),
        (["--base-url", "localhost:11434/v1"], "argument --base-url: must be an http(s) URL"),
        (["--base-url", "ftp://example.com"], "argument --base-url: must be an http(s) URL"),
        (["--base-url", "http://"], "argument --base-url: must be an http(s) URL"),
        (["--base-url", "http://[::1/v1"], "argument --base-url: must be an http(s) URL"),
    ],
)
def test_chat_rejects_junk(
    argv: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # accepted, the session would end at once
    if "--model" not in argv:
        argv = ["--model", "gpt-4o-mini", *argv]
    code, out, err = run_cli(capsys, "chat", *argv)
    assert code == 2 and out == ""
    assert "Traceback" not in err
    assert f"agentcore-fsm chat: error: {message}" in err


# --- bench ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--iterations", "0"],
        ["--repeats", "0"],
        ["--deltas", "-3"],
        ["--concurrent", "0"],
        ["--warmup", "-1"],
        ["--iterations", "ten"],
    ],
)
def test_bench_rejects_junk(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "bench", *argv)
    assert code == 2 and out == ""
    assert "Traceback" not in err
    assert argv[0] in err


@pytest.mark.parametrize(
    ("provider", "package"), [("openai", "openai"), ("anthropic", "anthropic")]
)
def test_chat_without_the_extra_says_so_before_asking_for_a_key(
    provider: str,
    package: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No API key and no SDK: the missing package is the first thing to fix, so it is the one
    named (a key would not help)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setitem(sys.modules, package, None)  # `import openai` raises ImportError
    for name in [n for n in sys.modules if n.startswith("agentcore_fsm.integrations.providers.")]:
        monkeypatch.delitem(sys.modules, name)
    code, out, err = run_cli(capsys, "chat", "--provider", provider, "--model", "m")
    assert code == 2 and out == ""
    assert "Traceback" not in err
    assert "API key" not in err, err
    assert f"pip install 'agentcore-fsm[{package}]'" in err, err
