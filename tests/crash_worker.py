"""A process for the crash tests (tests/test_crash.py): runs a journaled agent run in a
``SqliteRunStore`` and kills itself with SIGKILL at a chosen point, or resumes a run.

    python tests/crash_worker.py run DB EFFECTS EVENTS BACKEND POINT
    python tests/crash_worker.py resume DB EFFECTS EVENTS BACKEND [HOLD_S [FOLDER RACERS]]
    python tests/crash_worker.py agent DB EFFECTS EVENTS BACKEND POINT

The run: a prompt, a first turn with two parallel calls (``write`` c1, not idempotent, and
``read`` c2, idempotent), a steering message at the second steering poll, a second turn with a
``write`` call c3, a final answer. Every tool execution appends ``<call id> <process>`` to
EFFECTS (one line, written whole) before it returns; every event is appended to EVENTS as JSON.

POINT says where to die: ``stream:N`` (at the Nth message_update), ``turn_end:N`` (at the Nth
turn_end event), ``append:N`` (right after the Nth journal entry was committed, before the next
one), ``tool:ID:before`` / ``tool:ID:after`` (inside call ID, before / after its side effect),
``parallel`` (inside c2 once c1 has written its side effect and while c1 still runs),
``steering`` (inside the steering poll that returns the message), ``none``.

``resume`` resumes run "run" (exit status 0 and "resumed" on stdout; 3 and the error when the
run is held by another process). HOLD_S makes each of its tools take that long; with FOLDER and
RACERS, it starts resuming only once RACERS processes have each put a file in FOLDER (so that
racing resumers really race).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio

from agentcore_fsm import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.store import RunOwnedError, SqliteRunStore
from agentcore_fsm.runtime.resume import resume_run

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
RESPONSES = [
    faux_response(
        "first I write and read at once",
        tool_calls=[
            faux_tool_call("write", {"n": 1}, id="c1"),
            faux_tool_call("read", {"n": 2}, id="c2"),
        ],
    ),
    faux_response("then one more write", tool_calls=[faux_tool_call("write", {"n": 3}, id="c3")]),
    faux_response("all done, thank you"),
]
RUN_ID = "run"


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class Worker:
    def __init__(self, effects: str, events: str, point: str, who: str, hold: float) -> None:
        self.effects = effects
        self.events_fd = os.open(events, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.point = point
        self.who = who
        self.hold = hold
        # a race: the winner's tools wait until the loser has been refused (this file exists),
        # so that the loser always meets a run that is held, never one already finished
        self.wait_for: Path | None = None
        self.counts: dict[str, int] = {}
        self.c1_wrote = anyio.Event() if point == "parallel" else None

    def at(self, name: str) -> None:
        """Die when this is the point (``name`` counted: ``stream`` → ``stream:1``, ...)."""
        n = self.counts[name] = self.counts.get(name, 0) + 1
        if self.point in (name, f"{name}:{n}"):
            die()

    def effect(self, call_id: str) -> None:
        fd = os.open(self.effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{call_id} {self.who}\n".encode())
        finally:
            os.close(fd)

    def tools(self) -> list[AgentTool]:
        async def run(call_id: str, args: Any, text: str) -> AgentToolResult:
            if self.wait_for is not None:
                with anyio.move_on_after(20):  # a bound, should the loser never report
                    while not self.wait_for.exists():
                        await anyio.sleep(0.005)
            else:
                await anyio.sleep(self.hold)
            if self.point == f"tool:{call_id}:before":
                die()
            self.effect(call_id)
            if self.point == f"tool:{call_id}:after":
                die()
            if self.c1_wrote is not None:
                if call_id == "c1":
                    self.c1_wrote.set()
                    await anyio.sleep(5)  # still running when c2 dies
                elif call_id == "c2":
                    await self.c1_wrote.wait()
                    die()
            return AgentToolResult(content=[TextContent(text=f"{text} {args['n']}")])

        async def write(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
            return await run(call_id, args, "wrote")

        async def read(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
            return await run(call_id, args, "read")

        return [
            AgentTool("write", "writes", SCHEMA, write),
            AgentTool("read", "reads", SCHEMA, read, idempotent=True),
        ]

    def emit(self, event: Any) -> None:
        data = event.model_dump(mode="json", by_alias=True)
        os.write(self.events_fd, (json.dumps(data) + "\n").encode())
        if event.type == "message_update":
            self.at("stream")
        elif event.type == "turn_end":
            self.at("turn_end")

    def listener(self, event: Any, signal: Any) -> None:
        self.emit(event)

    def steering(self, polls: list[int]) -> Any:
        def poll() -> list[Any]:
            polls[0] += 1
            if polls[0] == 2:
                if self.point == "steering":
                    die()
                return ["and say thank you"]
            return []

        return poll

    def config(self, polls: list[int]) -> AgentLoopConfig:
        return AgentLoopConfig(model=MODEL, get_steering_messages=self.steering(polls))


class DyingStore(SqliteRunStore):
    """Dies right after its Nth append was committed (``append:N``)."""

    worker: Worker

    def append(self, run_id: str, seq: int, entry: Any, **kwargs: Any) -> None:
        super().append(run_id, seq, entry, **kwargs)
        self.worker.at("append")


def answered(entries: list[dict[str, Any]]) -> int:
    return sum(e["input"] in ("stream_done", "stream_error") for e in entries)


def polled(entries: list[dict[str, Any]]) -> int:
    return sum(e["input"] == "steering_polled" for e in entries)


async def main(argv: list[str]) -> int:
    mode, db, effects, events, _backend = argv[:5]
    if mode in ("run", "agent"):
        worker = Worker(effects, events, argv[5], "first", 0.0)
        store = DyingStore(db)
        store.worker = worker
        if mode == "agent":
            agent = Agent(
                model=MODEL,
                tools=worker.tools(),
                stream_fn=FauxProvider(RESPONSES, chunk_size=4),
                store=store,
                session_id="session",
            )
            agent.subscribe(worker.listener)
            await agent.prompt("go")
            return 0
        await run_agent_loop(
            [UserMessage(content="go")],
            AgentContext(tools=worker.tools()),
            worker.config([0]),
            worker.emit,
            stream_fn=FauxProvider(RESPONSES, chunk_size=4),
            store=store,
            run_id=RUN_ID,
        )
        return 0
    hold = float(argv[5]) if len(argv) > 5 else 0.0
    worker = Worker(effects, events, "none", f"resumer{os.getpid()}", hold)
    lost: Path | None = None
    if len(argv) > 7:  # a race: wait until every racer got here (a file each in a folder)
        folder, racers = Path(argv[6]), int(argv[7])
        (folder / str(os.getpid())).touch()
        while len([f for f in folder.iterdir() if f.name.isdigit()]) < racers:
            await anyio.sleep(0.005)
        lost = worker.wait_for = folder / "lost"
    store = SqliteRunStore(db)
    entries = store.load(RUN_ID).entries
    try:
        await resume_run(
            RUN_ID,
            store,
            worker.config([polled(entries)]),
            worker.emit,
            tools=worker.tools(),
            stream_fn=FauxProvider(RESPONSES[answered(entries) :]),
        )
    except RunOwnedError as exc:
        print(f"owned: {exc}", flush=True)
        if lost is not None:
            lost.touch()
        return 3
    print("resumed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:], backend=sys.argv[5]))
