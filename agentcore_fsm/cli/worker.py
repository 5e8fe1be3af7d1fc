"""``agentcore-fsm worker``: a process that runs durable runs from a DBOS queue, or with
``--engine temporal`` from a Temporal task queue (:mod:`agentcore_fsm.cli.worker_temporal`)
(docs/durable.md). Needs the engine's extra, imported when the command runs."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import math
import os
import signal as signals
import sys
from collections.abc import Sequence
from typing import Any


class _AppError(Exception):
    """``--app`` names nothing usable (the text says what is wrong)."""


def _load_app(spec: str) -> list[Any]:
    from agentcore_fsm.integrations.durable_api import DurableAgent

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise _AppError(f"--app must be module:function, not {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _AppError(f"--app {spec}: cannot import {module_name!r}: {exc}") from None
    except Exception as exc:  # the app's own module failed while importing
        raise _AppError(
            f"--app {spec}: importing {module_name!r} raised {_one_line(exc)}"
        ) from None
    target: Any = getattr(module, attr, None)
    if target is None:
        raise _AppError(f"--app {spec}: module {module_name!r} has no {attr!r}")
    if callable(target) and not isinstance(target, DurableAgent):
        try:
            value = target()
        except Exception as exc:
            raise _AppError(f"--app {spec}: calling {attr!r} raised {_one_line(exc)}") from None
    else:
        value = target
    agents = [value] if isinstance(value, DurableAgent) else value
    if not isinstance(agents, (list, tuple)) or not all(
        isinstance(agent, DurableAgent) for agent in agents
    ):
        raise _AppError(f"--app {spec} gave {value!r}, not a DurableAgent or a list of them")
    if not agents:
        raise _AppError(f"--app {spec} gave an empty {type(agents).__name__}: no agent to serve")
    return list(agents)


def _no_tracebacks(record: logging.LogRecord) -> bool:
    """A logging filter: drops the records that carry a traceback."""
    return record.exc_info is None


def _one_line(exc: BaseException) -> str:
    """``TypeName: the first line of the message`` (database errors run over several lines)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


_URL_SCHEMES = ("sqlite:///", "postgresql://", "postgresql+psycopg://", "postgres://")


def _shown_url(url: str) -> str:
    """The URL as an error shows it: a password replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if sep and at and ":" in userinfo:
        user = userinfo.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url


def _database_url(url: str) -> str:
    """``--database-url``: a SQLite file or a PostgreSQL server (what DBOS can run on)."""
    if not url.startswith(_URL_SCHEMES) or url in _URL_SCHEMES:
        raise _AppError(
            f"--database-url must be sqlite:///FILE or postgresql://USER@HOST/DATABASE, not "
            f"{_shown_url(url)!r}"
        )
    return url


def _rate(text: str) -> tuple[int, float]:
    """``--model-rate LIMIT/SECONDS``: a positive whole number of calls per positive period."""
    limit, _, period = text.partition("/")
    try:
        calls, seconds = int(limit), float(period or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected LIMIT/SECONDS (e.g. 20/1), not {text!r}"
        ) from None
    if calls < 1 or not 0 < seconds < math.inf:
        raise argparse.ArgumentTypeError(f"LIMIT and SECONDS must be positive, not {text!r}")
    return calls, seconds


def _seconds(text: str) -> float:
    """``--polling-interval``: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(
            f"must be a finite number of seconds above 0, not {text!r}"
        )
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """``agentcore-fsm worker``: consume a queue of durable runs until SIGTERM or SIGINT
    (``--engine dbos``, the default, or ``--engine temporal``)."""
    argv = list(argv) if argv is not None else sys.argv[1:]
    engine = argparse.ArgumentParser(prog="agentcore-fsm worker", add_help=False)
    engine.add_argument("--engine", choices=("dbos", "temporal"), default="dbos")
    chosen, rest = engine.parse_known_args(argv)
    if chosen.engine == "temporal":
        from agentcore_fsm.cli.worker_temporal import main as temporal_main

        return temporal_main(rest, load_app=_load_app)
    argv = rest
    try:
        from agentcore_fsm.integrations import dbos
    except ImportError as exc:  # the extra is not installed
        print(
            f"agentcore-fsm worker needs the dbos extra (pip install 'agentcore-fsm[dbos]'): {exc}",
            file=sys.stderr,
        )
        return 2
    parser = argparse.ArgumentParser(
        prog="agentcore-fsm worker", description="Run durable agent runs from a DBOS queue."
    )
    parser.add_argument("--engine", choices=("dbos", "temporal"), default="dbos")
    parser.add_argument("--app", required=True, help="module:function giving DurableAgent(s)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("AGENTCORE_DBOS_URL"),
        help="the DBOS system database (sqlite:///file or postgresql://...)",
    )
    parser.add_argument(
        "--queue", default=dbos.RUNS_QUEUE, help=f"the queue (default {dbos.RUNS_QUEUE})"
    )
    parser.add_argument("--executor-id", help="this worker's id (give each worker its own)")
    parser.add_argument("--concurrency", type=_positive, help="runs at once over all workers")
    parser.add_argument("--worker-concurrency", type=_positive, help="runs at once in this worker")
    parser.add_argument("--model-rate", type=_rate, help="model calls per period: LIMIT/SECONDS")
    parser.add_argument(
        "--polling-interval", type=_seconds, default=0.2, help="seconds between queue polls"
    )
    args = parser.parse_args(argv)
    if not args.database_url:
        parser.error("--database-url (or AGENTCORE_DBOS_URL) is required")
    try:
        _database_url(args.database_url)
        agents = _load_app(args.app)
    except _AppError as exc:
        parser.error(str(exc))

    async def launch(url: str, **options: Any) -> None:
        # DBOS logs a failed launch with its traceback; the worker says it in one line instead
        sdk_logger = logging.getLogger("dbos")
        sdk_logger.addFilter(_no_tracebacks)
        try:
            await dbos.launch(url, **options)
        except Exception as exc:  # unreachable server, unwritable file, refused login, ...
            dbos.shutdown()
            raise _AppError(f"cannot start on {_shown_url(url)}: {_one_line(exc)}") from None
        finally:
            sdk_logger.removeFilter(_no_tracebacks)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signals.SIGTERM, signals.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await launch(
            args.database_url,
            agents=agents,
            executor_id=args.executor_id,
            queue=args.queue,
            concurrency=args.concurrency,
            worker_concurrency=args.worker_concurrency,
            model_rate_limit=args.model_rate,
            polling_interval_s=args.polling_interval,
        )
        print(f"worker {args.executor_id or 'local'} consuming {args.queue}", flush=True)
        try:
            await stop.wait()
        finally:
            dbos.shutdown()

    try:
        asyncio.run(serve())
    except _AppError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0
