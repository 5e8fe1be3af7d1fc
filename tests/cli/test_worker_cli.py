"""``agentcore-fsm worker`` refuses junk arguments with a one-line usage error (exit status 2),
before starting anything (docs/durable.md)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import dbos  # noqa: F401  (the dbos extra is part of the test install: fail, never skip)
import pytest

from agentcore_fsm.cli import commands as cli

URL = "sqlite:///never-created.sqlite"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: --app"),
        (
            ["--app", "tests.dbos_pg_app:agents"],
            "--database-url (or AGENTCORE_DBOS_URL) is required",
        ),
        (
            ["--app", "nocolon", "--database-url", URL],
            "--app must be module:function, not 'nocolon'",
        ),
        (
            ["--app", "no_such_module_here:agents", "--database-url", URL],
            "--app no_such_module_here:agents: cannot import 'no_such_module_here': ",
        ),
        (
            ["--app", "json:no_such_thing", "--database-url", URL],
            "--app json:no_such_thing: module 'json' has no 'no_such_thing'",
        ),
        (
            ["--app", "json:__name__", "--database-url", URL],
            "--app json:__name__ gave 'json', not a DurableAgent or a list of them",
        ),
        (
            ["--app", "json:loads", "--database-url", "nonsense"],
            "--database-url must be sqlite:///FILE or postgresql://USER@HOST/DATABASE, not "
            "'nonsense'",
        ),
        (
            ["--app", "json:loads", "--database-url", "mysql://me:secret@db.example/runs"],
            "--database-url must be sqlite:///FILE or postgresql://USER@HOST/DATABASE, not "
            "'mysql://me:***@db.example/runs'",
        ),
        (
            ["--app", "json:loads", "--database-url", URL, "--model-rate", "fast"],
            "argument --model-rate: expected LIMIT/SECONDS (e.g. 20/1), not 'fast'",
        ),
        (
            ["--app", "json:loads", "--database-url", URL, "--model-rate", "0/1"],
            "argument --model-rate: LIMIT and SECONDS must be positive, not '0/1'",
        ),
        (
            ["--app", "json:loads", "--database-url", URL, "--model-rate", "5/inf"],
            "argument --model-rate: LIMIT and SECONDS must be positive, not '5/inf'",
        ),
        (
            ["--app", "json:loads", "--database-url", URL, "--polling-interval", "nan"],
            "argument --polling-interval: must be a finite number of seconds above 0, not 'nan'",
        ),
        (
            ["--app", "json:loads", "--database-url", URL, "--polling-interval", "-1"],
            "argument --polling-interval: must be a finite number of seconds above 0, not '-1'",
        ),
        (
            ["--app", "json:loads", "--database-url", URL, "--polling-interval", "often"],
            "argument --polling-interval: expected a number of seconds, not 'often'",
        ),
        (
            ["--app", "json:loads", "--database-url", URL, "--concurrency", "0"],
            "argument --concurrency: must be at least 1, not 0",
        ),
        (
            ["--app", "json:loads", "--database-url", URL, "--worker-concurrency", "two"],
            "argument --worker-concurrency: expected a whole number, not 'two'",
        ),
    ],
)
def test_bad_worker_arguments_are_one_line_usage_errors(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AGENTCORE_DBOS_URL", raising=False)
    with pytest.raises(SystemExit) as exc:
        cli.main(["worker", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("agentcore-fsm worker: error: "), err
    assert message in last, err


APP = """
from agentcore_fsm import AgentLoopConfig, Model
from agentcore_fsm.integrations.dbos import DurableAgent


def agents():
    return [DurableAgent("a", lambda *args: None, AgentLoopConfig(model=Model(id="m")))]


def none_at_all():
    return []


def broken():
    raise ValueError("no config file")
"""


@pytest.mark.parametrize(
    ("app", "message"),
    [
        (
            "raising_app:agents",
            "--app raising_app:agents: importing 'raising_app' raised RuntimeError: boom at import",
        ),
        (
            "worker_app:none_at_all",
            "--app worker_app:none_at_all gave an empty list: no agent to serve",
        ),
        (
            "worker_app:broken",
            "--app worker_app:broken: calling 'broken' raised ValueError: no config file",
        ),
    ],
)
def test_an_app_that_fails_or_gives_nothing_is_a_one_line_error(
    app: str,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "worker_app.py").write_text(APP)
    (tmp_path / "raising_app.py").write_text('raise RuntimeError("boom at import")\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit) as exc:
        cli.main(["worker", "--app", app, "--database-url", URL])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == f"agentcore-fsm worker: error: {message}", err


def test_a_database_the_worker_cannot_start_on_is_a_one_line_error(tmp_path: Path) -> None:
    """An unreachable server and an unwritable file: DBOS fails to launch; the worker says so
    in one line (no traceback, the password hidden) and exits with status 2."""
    (tmp_path / "worker_app.py").write_text(APP)
    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    urls = {
        f"postgresql://me:secret@127.0.0.1:{port}/runs": (
            f"cannot start on postgresql://me:***@127.0.0.1:{port}/runs: OperationalError: "
        ),
        f"sqlite:///{tmp_path}/missing/dir/runs.db": (
            f"cannot start on sqlite:///{tmp_path}/missing/dir/runs.db: OperationalError: "
        ),
    }
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentcore_fsm",
                "worker",
                "--app",
                "worker_app:agents",
                "--database-url",
                url,
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for url in urls
    ]
    for proc, start in zip(procs, urls.values(), strict=True):
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, err
        assert "Traceback" not in err and "secret" not in err, err
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"agentcore-fsm worker: error: {start}"), err
