"""Shared test configuration: every async test runs on trio and on asyncio."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# the shared helper modules (helpers.py, crash_worker.py, ...) live in tests/, beside this file;
# the tests themselves are in one folder per layer of the package
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# `make test` runs the suite on two pytest-xdist workers (`-n 2 --dist loadgroup`): single tests
# are spread over both, but a module whose module- or session-scoped fixture starts a server or
# child processes runs whole on one worker, so that its fixture starts once per run, not once per
# worker (the Temporal dev server above all).
_WHOLE_MODULES = {
    "tests/persist/test_crash_at_writes.py",
    "tests/persist/test_equivalence_properties.py",
    "tests/integrations/test_otel.py",
    "tests/integrations/test_dbos.py",
    "tests/integrations/test_dbos_postgres.py",
    "tests/integrations/test_mcp.py",
    "tests/property/test_no_hidden_flags.py",
    "tests/package/test_packaging.py",
    "tests/devtools/test_mermaid_render.py",
}
_ONE_WORKER_FOLDERS = ("tests/integrations/temporal/",)  # one dev server for the folder
_WHOLE_MODULE_FOLDERS = ("tests/integrations/providers/",)  # a server per module
_ROOT = Path(__file__).resolve().parents[1]


def pytest_itemcollected(item: pytest.Item) -> None:
    # marked as each item is collected: xdist reads the marks in its own
    # pytest_collection_modifyitems, which may run before a conftest's
    where = item.path.relative_to(_ROOT).as_posix()
    group = next((f for f in _ONE_WORKER_FOLDERS if where.startswith(f)), None)
    if group is None and (where in _WHOLE_MODULES or where.startswith(_WHOLE_MODULE_FOLDERS)):
        group = where
    if group is not None:
        item.add_marker(pytest.mark.xdist_group(group))


# The modules with the longest tests run first, so that the two workers end together instead of
# one of them finishing a long test alone at the end (whole modules move, in their own order, so
# that a module-scoped fixture still starts once); the thousands of short mutant tests fill in.
_FIRST = (
    "tests/property/test_machine_stateful.py",
    "tests/integrations/test_dbos_postgres.py",
    "tests/integrations/temporal/",
    "tests/integrations/test_mcp.py",
    "tests/integrations/test_dbos.py",
    "tests/property/test_driver_properties.py",
    "tests/property/test_adversarial.py",
    "tests/persist/test_crash.py",
    "tests/runtime/test_load.py",
    "tests/property/test_pure_guards.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        where = item.path.relative_to(_ROOT).as_posix()
        return next((i for i, first in enumerate(_FIRST) if where.startswith(first)), len(_FIRST))

    items.sort(key=rank)  # stable: the order within a module and among the rest is kept
