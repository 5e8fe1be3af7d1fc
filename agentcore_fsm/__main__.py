"""``python -m agentcore_fsm ...``: the ``agentcore-fsm`` command, for an environment whose
scripts folder is not on ``PATH`` (``python -m agentcore_fsm demo``)."""

import sys

from agentcore_fsm.cli import main

if __name__ == "__main__":
    sys.exit(main())
