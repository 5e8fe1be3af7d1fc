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
