"""A scripted HTTP server on 127.0.0.1 that plays SSE fixtures to the real SDK clients.

Each request pops the next queued :class:`Reply` and is recorded (method, path, headers, JSON
body). A reply is either an SSE stream read from a fixture file (sent with chunked transfer
encoding, one chunk per event, as real servers do) or a plain body with a status code.

SSE fixtures are the documented wire format, byte for byte, plus a few *directives* written as
SSE comment lines (which a real client would ignore anyway) that the server acts on instead of
sending:

``: @cut``
    close the connection at once, without the chunked terminator (a stream cut mid-way);
``: @wait-disconnect``
    stop sending and block until the client closes the connection (the abort tests use it to
    prove that aborting closes the HTTP stream); sets ``waiting`` on arrival and records the
    disconnection in ``disconnected``. ``Reply(hold=True)`` does the same before any header.

The server runs in a thread, so it works the same under trio and asyncio.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@dataclass
class Reply:
    """What the server answers to one request."""

    status: int = 200
    sse: str | None = None
    """An SSE fixture (path relative to ``fixtures/``)."""
    body: str | None = None
    """A plain body fixture (path relative to ``fixtures/``), sent as JSON."""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    hold: bool = False
    """Answer nothing: block until the client closes the connection (abort before headers)."""


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


def load_fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def sse_chunks(text: str) -> list[str]:
    """Split an SSE fixture into events (each with its blank line), keeping directives apart."""
    chunks: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith(": @"):
            if current:
                chunks.append("\n".join(current) + "\n\n")
                current = []
            chunks.append(line)
        elif line == "":
            if current:
                chunks.append("\n".join(current) + "\n\n")
                current = []
        else:
            current.append(line)
    if current:
        chunks.append("\n".join(current) + "\n\n")
    return chunks


class ScriptedServer:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.disconnected = threading.Event()
        self.waiting = threading.Event()
        """Set when a stream reaches ``: @wait-disconnect`` (the client has what came before)."""
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with server._lock:
                    server.requests.append(
                        Recorded(
                            self.command,
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            body,
                        )
                    )
                    reply = server.replies.popleft() if server.replies else None
                if reply is None:
                    self._send_plain(500, json.dumps({"error": {"message": "no reply queued"}}))
                elif reply.hold:
                    self._wait_disconnect()
                elif reply.sse is not None:
                    self._send_sse(reply)
                else:
                    text = load_fixture(reply.body) if reply.body else ""
                    self._send_plain(reply.status, text, reply.headers, reply.content_type)

            def _send_plain(
                self,
                status: int,
                text: str,
                headers: dict[str, str] | None = None,
                content_type: str = "application/json",
            ) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            def _wait_disconnect(self) -> None:
                server.waiting.set()
                self.connection.settimeout(30)
                try:
                    while self.connection.recv(1024):
                        pass
                    server.disconnected.set()
                except OSError:
                    pass
                self.close_connection = True

            def _send_sse(self, reply: Reply) -> None:
                assert reply.sse is not None
                self.send_response(reply.status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                for chunk in sse_chunks(load_fixture(reply.sse)):
                    if chunk == ": @cut":
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    if chunk == ": @wait-disconnect":
                        self.wfile.flush()
                        self._wait_disconnect()
                        return
                    data = chunk.encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def reset(self) -> None:
        with self._lock:
            self.replies.clear()
            self.requests.clear()
        self.disconnected.clear()
        self.waiting.clear()

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]
