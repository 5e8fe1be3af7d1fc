"""Fixtures of the provider tests: one scripted SSE server on 127.0.0.1 per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _provider_sse_server import ScriptedServer


@pytest.fixture(scope="module")
def _module_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(_module_server: ScriptedServer) -> Iterator[ScriptedServer]:
    _module_server.reset()
    yield _module_server
    _module_server.reset()
