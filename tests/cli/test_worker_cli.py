"""``agentcore-fsm worker`` refuses junk arguments with a one-line usage error (exit status 2),
before starting anything (docs/durable.md)."""

from __future__ import annotations

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
            ["--app", "json:loads", "--database-url", URL, "--model-rate", "fast"],
            "argument --model-rate: expected LIMIT/SECONDS (e.g. 20/1), not 'fast'",
        ),
        (
            ["--app", "json:loads", "--database-url", URL, "--model-rate", "0/1"],
            "argument --model-rate: LIMIT and SECONDS must be positive, not '0/1'",
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
