"""The ``agentcore-fsm`` command line and its apps: demo, chat, bench, diagram, worker.

``main(argv)`` is the command (:mod:`agentcore_fsm.cli.commands`); each subcommand lives in its
own module and is imported only when used.
"""

from agentcore_fsm.cli.commands import main

__all__ = ["main"]
