"""The ``agentcore-fsm`` command: ``demo``, ``bench``, ``diagram`` and ``chat``.

``agentcore-fsm --version`` prints the installed version, ``agentcore-fsm --help`` the commands.
Each subcommand lives in its own module and is imported only when used. Exit status: 0 on
success, 2 for a usage error (no or an unknown command, a bad argument), 1 when the work
failed; when standard output is closed early (``agentcore-fsm demo | head``) the command stops
quietly with status 141, as a program killed by SIGPIPE does.
"""

from __future__ import annotations

import importlib
import os
import sys

COMMANDS = {
    "demo": ("agentcore_fsm.cli.demo", "Run a scripted agent session offline (faux provider)."),
    "bench": ("agentcore_fsm.cli.bench", "Measure the loop against a minimal hand-written loop."),
    "diagram": ("agentcore_fsm.cli.diagram", "Render the declared machines or a recorded run."),
    "chat": ("agentcore_fsm.cli.chat", "Chat with a real model (OpenAI-compatible or Anthropic)."),
    "replay": (
        "agentcore_fsm.devtools.replay",
        "Re-run a recording offline; report the first divergence.",
    ),
    "worker": ("agentcore_fsm.cli.worker", "Run durable runs from a DBOS queue (dbos extra)."),
    "view": ("agentcore_fsm.cli.view_command", "Write a run viewer page (HTML) for a run."),
    "fork": ("agentcore_fsm.cli.debug_commands", "Fork a run at a step, edit it, go on live."),
    "diff": ("agentcore_fsm.cli.debug_commands", "Compare two runs step by step."),
}
"""Each subcommand: the module whose ``main(argv)`` runs it, and its one-line summary."""
BROKEN_PIPE = 141  # 128 + SIGPIPE
"""The exit status when standard output was closed early."""
DISTRIBUTION = "agentcore-fsm"
"""The name the package is installed under (what ``pip show`` takes)."""


def version() -> str:
    """The installed version of the package (its metadata), or ``agentcore_fsm.__version__``
    when it is not installed (run from a source tree)."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        from agentcore_fsm.core.version import __version__

        return __version__


def usage() -> str:
    """The text of ``agentcore-fsm --help``: the commands and what each does."""
    lines = ["usage: agentcore-fsm COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<8} {doc}" for name, (_, doc) in COMMANDS.items()]
    lines += ["", "options:", "  -h, --help  show this help and exit"]
    lines += ["  --version   print the version and exit"]
    lines += ["", "Run 'agentcore-fsm COMMAND --help' for a command's options."]
    return "\n".join(lines)


def _silence_stdout() -> None:
    """Point standard output at the null device, so that the interpreter's last flush of what
    is still buffered does not fail again on the closed pipe."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (captured in a test)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """Run ``agentcore-fsm`` with ``argv`` (default: the command line's arguments) and return
    the exit status: 0 on success, 1 when the work failed, 2 for a usage error, 141 when
    standard output was closed early."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(usage(), file=sys.stderr)
        return 2
    if args[0] in ("-h", "--help"):
        print(usage())
        return 0
    if args[0] == "--version":
        print(f"{DISTRIBUTION} {version()}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"agentcore-fsm: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    run_command = getattr(module, "COMMAND_MAINS", {}).get(name, module.main)  # a shared module
    try:
        code: int = run_command(rest)
    except BrokenPipeError:
        _silence_stdout()
        return BROKEN_PIPE
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
