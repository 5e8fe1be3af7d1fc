"""The demo session, recorded, and the picture of the run viewer on it (``docs/viewer.png``).

``python -m agentcore_fsm.cli.viewer_shot [PNG]`` runs the demo's session
(:mod:`agentcore_fsm.cli.demo`: the invoices, the parallel reads, the steering message, the
approval) offline and silently, recorded by a
:class:`~agentcore_fsm.persist.recorder.RunRecorder`, writes the viewer's page of it
(:mod:`agentcore_fsm.devtools.viewer`) and takes a screenshot of the page, opened at the step
where the summary waits for approval, with the system's headless Chromium
(``chromium --headless --screenshot``; set ``CHROMIUM`` to use another). :func:`record_demo`
is what the viewer's browser tests record too.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import anyio

from agentcore_fsm.cli.calculator import calculator_tool
from agentcore_fsm.cli.demo import (
    APPROVER,
    QUESTION,
    STEERING,
    file_tools,
    make_workspace,
    scripted_model,
)
from agentcore_fsm.core.approval import ApprovalDecision, ApprovalRequest
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig
from agentcore_fsm.core.messages import AgentMessage, Model, UserMessage
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.devtools.viewer import view_data, viewer_html
from agentcore_fsm.devtools.viewer_data import APPROVAL
from agentcore_fsm.integrations.providers.faux import FauxProvider
from agentcore_fsm.persist.recorder import RunRecorder
from agentcore_fsm.runtime.driver import run_agent_loop

DEMO_RUN_ID = "demo"
WINDOW = (1400, 900)
"""The screenshot's size in CSS pixels."""


def _steering_read(tool: AgentTool, steer: Any) -> AgentTool:
    """``read_file`` that sends the steering message when the first read starts (the demo
    sends it from inside the reads, so that the loop injects it before the next model call)."""
    execute: Any = tool.execute

    def run(*args: Any) -> Any:
        steer()
        return execute(*args)

    return dataclasses.replace(tool, execute=run)


async def _run(workspace: Path, recording: Path) -> None:
    steering: list[AgentMessage] = []
    lock = threading.Lock()
    sent: list[bool] = []

    def steer() -> None:
        with lock:
            if not sent:
                sent.append(True)
                steering.append(UserMessage(content=STEERING))

    def poll() -> list[AgentMessage]:
        drained = list(steering)
        steering.clear()
        return drained

    async def approve(request: ApprovalRequest, signal: Any) -> ApprovalDecision:
        return ApprovalDecision(approved=True, decided_by=APPROVER)

    tools = [
        _steering_read(t, steer) if t.name == "read_file" else t
        for t in (*file_tools(workspace), calculator_tool())
    ]
    with RunRecorder(recording) as recorder:
        await run_agent_loop(
            [UserMessage(content=QUESTION)],
            AgentContext(system_prompt="You are a careful bookkeeping assistant.", tools=tools),
            AgentLoopConfig(
                model=Model(id="faux-demo", provider="faux", api="faux"),
                get_steering_messages=poll,
                decide_approval=approve,
            ),
            stream_fn=FauxProvider(scripted_model(), chunk_size=6),
            store=recorder.store,
            run_id=DEMO_RUN_ID,
        )


def record_demo(recording: str | os.PathLike[str]) -> Path:
    """Run the demo's session offline and record it (its record: header and inputs) in the
    JSONL file ``recording``; return its path. The workspace is a temporary directory, removed
    afterwards."""
    path = Path(recording)
    with tempfile.TemporaryDirectory(prefix="agentcore-fsm-viewer-") as tmp:
        workspace = Path(tmp)
        make_workspace(workspace)
        anyio.run(_run, workspace, path)
    return path


def approval_step(page_data: list[dict[str, Any]]) -> int:
    """The number (from 1) of the first step of the first run that asked for approval."""
    steps = page_data[0]["steps"]
    return next((k + 1 for k, s in enumerate(steps) if s["f"] & APPROVAL), len(steps))


def main(argv: list[str] | None = None) -> int:
    """Write the screenshot (default ``docs/viewer.png``); return the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    out = Path(args[0] if args else "docs/viewer.png").resolve()
    chromium = shutil.which(os.environ.get("CHROMIUM", "chromium"))
    if chromium is None:
        print("viewer_shot: error: no chromium to take the screenshot with", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="agentcore-fsm-shot-") as tmp:
        recording = record_demo(Path(tmp) / "demo.jsonl")
        step = approval_step(view_data(recording))
        page = viewer_html(recording, title="the demo session")
        html_path = Path(tmp) / "demo.html"
        html_path.write_text(page, encoding="utf-8")
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--window-size={WINDOW[0]},{WINDOW[1]}",
                f"--screenshot={out}",
                f"{html_path.as_uri()}#step={step}",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    print(f"wrote {out} (the demo run at step {step})")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
