"""``agentcore-fsm worker --engine temporal``: a Temporal worker of durable runs (its workflows
and activities) on a task queue, until SIGTERM or SIGINT (docs/durable.md). Needs the
``temporal`` extra, imported when the command runs."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal as signals
import sys
from collections.abc import Callable, Sequence
from typing import Any


def main(argv: Sequence[str], *, load_app: Callable[[str], list[Any]]) -> int:
    """Parse ``argv`` (without ``--engine``), serve until a signal; 2 on bad input."""
    try:
        from agentcore_fsm.integrations import temporal
    except ImportError as exc:  # the extra is not installed
        print(
            "agentcore-fsm worker --engine temporal needs the temporal extra "
            f"(pip install 'agentcore-fsm[temporal]'): {exc}",
            file=sys.stderr,
        )
        return 2
    parser = argparse.ArgumentParser(
        prog="agentcore-fsm worker --engine temporal",
        description="Run durable agent runs from a Temporal task queue.",
    )
    parser.add_argument("--app", required=True, help="module:function giving DurableAgent(s)")
    parser.add_argument(
        "--address",
        default=os.environ.get("AGENTCORE_TEMPORAL_ADDRESS", "127.0.0.1:7233"),
        help="the Temporal server, host:port (default $AGENTCORE_TEMPORAL_ADDRESS or "
        "127.0.0.1:7233)",
    )
    parser.add_argument("--namespace", default="default", help="the namespace (default default)")
    parser.add_argument(
        "--queue", default=temporal.RUNS_QUEUE, help=f"the task queue ({temporal.RUNS_QUEUE})"
    )
    args = parser.parse_args(list(argv))
    host, _, port = args.address.rpartition(":")
    if not host or not port.isdigit():
        parser.error(f"--address must be host:port, not {args.address!r}")
    try:
        agents = load_app(args.app)
    except Exception as exc:  # the app names nothing usable (the text says what)
        parser.error(str(exc))
    module = args.app.partition(":")[0]

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signals.SIGTERM, signals.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await temporal.launch(
                args.address,
                agents=agents,
                namespace=args.namespace,
                queue=args.queue,
                passed_through=[module],
            )
        except Exception as exc:  # unreachable server, unknown namespace, ...
            await temporal.shutdown()
            text = str(exc).strip().splitlines()
            raise ConnectionError(
                f"cannot start on {args.address}: {type(exc).__name__}: {text[0] if text else ''}"
            ) from None
        print(f"worker consuming {args.queue} on {args.address}", flush=True)
        try:
            await stop.wait()
        finally:
            await temporal.shutdown()  # before the interpreter exits: a clean SDK teardown

    try:
        asyncio.run(serve())
    except ConnectionError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0
