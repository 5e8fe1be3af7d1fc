"""The durable engines by name: ``engine("dbos")``, ``engine("temporal")`` (docs/durable.md).

Each is a module that implements :class:`~agentcore_fsm.integrations.durable_api.DurableEngine`
(the type checker checks it here). The engine's SDK is imported when it is asked for."""

from __future__ import annotations

from typing import Literal

from agentcore_fsm.integrations.durable_api import DurableEngine

__all__ = ["ENGINES", "engine"]

ENGINES: tuple[str, ...] = ("dbos", "temporal")
"""The names :func:`engine` takes (the first is the default of ``agentcore-fsm worker``)."""


def engine(name: Literal["dbos", "temporal"] | str) -> DurableEngine:
    """The engine module named ``name``; raises :class:`ValueError` for another name and
    :class:`ImportError` when its extra is not installed."""
    if name == "dbos":
        from agentcore_fsm.integrations import dbos

        return dbos
    if name == "temporal":
        from agentcore_fsm.integrations import temporal

        return temporal
    raise ValueError(f"no durable engine named {name!r} (engines: {', '.join(ENGINES)})")
