"""Runs the docs' example scripts for tests/package/test_readme.py, each in a process of its own,
without paying the interpreter's start and the package's imports for every one.

    python tests/example_runner.py

The runner imports what the examples import (the package, pydantic, anyio, trio), then reads
requests from standard input, one JSON line each: ``{"script": PATH, "cwd": DIR, "out": PATH,
"err": PATH}``. For each it forks: the child changes to ``cwd``, sends its standard output and
error to ``out`` and ``err``, runs ``script`` as ``__main__`` and exits with the script's
status (1 for an uncaught exception, whose traceback goes to ``err``); the runner writes the
status as one line on standard output. Every script starts from the runner's state as it was
after its imports, never from another script's: a fork of a clean process, which has started
no thread and no event loop. Only the names a script imports itself are defined in it, as in a
new interpreter; what differs is that the modules are already loaded.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio  # noqa: F401
import pydantic  # noqa: F401
import trio  # noqa: F401

import agentcore_fsm
from agentcore_fsm.agent import agent  # noqa: F401
from agentcore_fsm.devtools import testing  # noqa: F401
from agentcore_fsm.integrations.providers import faux  # noqa: F401

assert agentcore_fsm


def run(request: dict[str, str]) -> int:
    """Run one script in a forked child; its exit status."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.chdir(request["cwd"])
            out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            err = os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the runner's requests stay its own
            os.dup2(out, 1)
            os.dup2(err, 2)
            sys.argv = [request["script"]]
            sys.path[0] = str(Path(request["script"]).parent)
            try:
                runpy.run_path(request["script"], run_name="__main__")
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:
                traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def main() -> None:
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip():
            print(run(json.loads(line)), flush=True)


if __name__ == "__main__":
    main()
