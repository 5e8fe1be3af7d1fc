"""``agentcore-fsm worker``: a process that runs durable runs from a DBOS queue (see
:func:`agentcore_fsm.integrations.dbos.worker_main` and docs/durable.md). Needs the ``dbos``
extra."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from agentcore_fsm.integrations.dbos import worker_main
    except ImportError as exc:  # the extra is not installed
        print(
            f"agentcore-fsm worker needs the dbos extra (pip install 'agentcore-fsm[dbos]'): {exc}",
            file=sys.stderr,
        )
        return 2
    return worker_main(argv)
