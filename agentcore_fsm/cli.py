"""The ``agentcore-fsm`` command: ``demo``, ``bench``, ``diagram`` and ``chat``.

Each subcommand lives in its own module and is imported only when used.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "demo": ("agentcore_fsm.demo", "Run a scripted agent session offline (faux provider)."),
    "bench": ("agentcore_fsm.bench", "Measure the loop against a minimal hand-written loop."),
    "diagram": ("agentcore_fsm.diagrams", "Render the declared machines or a recorded run."),
    "chat": ("agentcore_fsm.chat", "Chat with a real model (OpenAI-compatible or Anthropic)."),
}


def usage() -> str:
    lines = ["usage: agentcore-fsm COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<8} {doc}" for name, (_, doc) in COMMANDS.items()]
    lines += ["", "Run 'agentcore-fsm COMMAND --help' for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"agentcore-fsm: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    code: int = module.main(rest)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
