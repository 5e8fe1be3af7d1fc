"""A hand-written MCP server over stdio that misbehaves, for tests/test_mcp.py.

It speaks JSON-RPC by hand (no SDK: a real server with bugs), the 2025 protocol only: it
refuses the 2026 probe (``server/discover``) as an unknown method, which makes the client fall
back to the ``initialize`` handshake. Standard library only, so it starts fast.

``python tests/mcp_raw_server.py VARIANT [PID_FILE]`` (the server writes its process id to
``PID_FILE`` when it starts):

* ``tools``: lists tools whose answers are wrong (``bad_result``: a result whose ``content`` is
  no list; ``unknown_block``: a content block of an unknown type; ``rpc_error``: a JSON-RPC error
  with the code -32000, which the SDK also uses for a closed connection; ``not_json``: prints a
  line that is not JSON and never answers), ``ok`` that answers "fine", ``env`` that answers
  the variables ``MCP_TEST`` and ``MCP_SECRET`` and its working directory, and ``crash`` that
  exits at once with status 3;
* ``bad_list``: answers ``tools/list`` with a tool that has no input schema;
* ``silent``: reads its input and never answers anything;
* ``exit``: says why on stderr and exits with status 1 at once.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

OBJECT = {"type": "object"}
TOOLS = [
    {"name": "bad_result", "inputSchema": OBJECT},
    {"name": "unknown_block", "inputSchema": OBJECT},
    {"name": "rpc_error", "inputSchema": OBJECT},
    {"name": "not_json", "inputSchema": OBJECT},
    {"name": "ok", "inputSchema": OBJECT},
    {"name": "env", "inputSchema": OBJECT},
    {"name": "crash", "inputSchema": OBJECT},
]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def answer(variant: str, request: dict[str, Any]) -> None:
    method, rid = request["method"], request["id"]
    if method == "initialize":
        result = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-server", "version": "0"},
        }
        send({"id": rid, "result": result})
    elif method == "tools/list":
        tools = [{"name": "no_schema"}] if variant == "bad_list" else TOOLS
        send({"id": rid, "result": {"tools": tools}})
    elif method == "tools/call":
        name = request["params"]["name"]
        if name == "bad_result":
            send({"id": rid, "result": {"content": 7}})
        elif name == "unknown_block":
            send({"id": rid, "result": {"content": [{"type": "video", "url": "x"}]}})
        elif name == "rpc_error":
            send({"id": rid, "error": {"code": -32000, "message": "database down"}})
        elif name == "not_json":
            sys.stdout.write("this is not JSON\n")
            sys.stdout.flush()
        elif name == "ok":
            send({"id": rid, "result": {"content": [{"type": "text", "text": "fine"}]}})
        elif name == "env":
            seen = [os.environ.get(v, "unset") for v in ("MCP_TEST", "MCP_SECRET")]
            text = " ".join([*seen, os.getcwd()])
            send({"id": rid, "result": {"content": [{"type": "text", "text": text}]}})
        elif name == "crash":
            os._exit(3)
    elif method == "ping":
        send({"id": rid, "result": {}})
    else:
        send({"id": rid, "error": {"code": -32601, "message": "Method not found"}})


def main(variant: str, pid_file: str | None = None) -> None:
    if pid_file is not None:
        Path(pid_file).write_text(str(os.getpid()), encoding="utf-8")
    if variant == "exit":
        sys.stderr.write("raw-server: cannot start: no configuration\n")
        raise SystemExit(1)
    for line in sys.stdin:
        if variant == "silent" or not line.strip():
            continue
        message = json.loads(line)
        if "id" in message and "method" in message:
            answer(variant, message)


if __name__ == "__main__":
    main(*sys.argv[1:3])
