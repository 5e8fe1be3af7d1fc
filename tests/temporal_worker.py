"""A process for the Temporal tests (tests/integrations/temporal/): a worker of the agents of
tests/temporal_app.py, or a one-shot decision.

    python tests/temporal_worker.py worker ADDRESS QUEUE
    python tests/temporal_worker.py decide ADDRESS RUN_ID CALL_ID approve|deny

``worker`` prints ``ready`` once it polls, and runs until SIGTERM (or stdin closes), then shuts
its worker down before the interpreter exits (the SDK's runtime must not be torn down under a
running worker). ``$AGENTCORE_TEMPORAL_DIE`` makes it kill itself mid-run (tests/temporal_app.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import temporal_app

from agentcore_fsm.integrations import temporal as durable


async def worker(address: str, queue: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_reader(sys.stdin.fileno(), lambda: stop.set() if not sys.stdin.read(1) else None)
    await durable.launch(
        address,
        agents=temporal_app.agents(),
        queue=queue,
        passed_through=["temporal_app"],
        sticky_timeout_s=1.0,  # a killed worker's runs go on elsewhere 1 s later
    )
    print("ready", flush=True)
    try:
        await stop.wait()
    finally:
        await durable.shutdown()


async def decide(address: str, run_id: str, call_id: str, verdict: str) -> None:
    await durable.launch(address)
    try:
        await durable.send_decision_async(run_id, call_id, verdict == "approve")
    finally:
        await durable.shutdown()


def main(argv: list[str]) -> int:
    if argv[0] == "worker":
        asyncio.run(worker(argv[1], argv[2]))
    else:
        asyncio.run(decide(*argv[1:5]))
        # the decision is sent: leave at once. The SDK's core runtime, torn down by the
        # interpreter's exit, can abort the process (PyGILState_Release) after the work is done
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
