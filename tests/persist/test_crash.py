"""Runs that survive a kill -9 (docs/reference.md#runs-that-survive).

A subprocess (tests/crash_worker.py) runs a journaled agent run in a ``SqliteRunStore`` and
kills itself with SIGKILL at a chosen point: mid-stream, inside a tool before and after its side
effect, between turns, right after a journal write, while parallel tools run, inside a steering
poll. Another process resumes the run. Then:

* the run is finished in the store and its whole event stream (regenerated from the journal)
  passes the grammar checker, ``agent_end`` once, every tool call answered exactly once;
* the journaled steps' events followed by the resumer's events are one well-formed run, and
  what the killed process's listener saw agrees with the journal (it saw a prefix of it, plus at
  most the beginning of an answer that was still streaming);
* side effects, counted in a file by both processes: a tool whose result was journaled never ran
  again; the non-idempotent ``write`` never ran twice (an interrupted one is answered with the
  interrupted error); only the idempotent ``read`` may run again.

Both backends. Two resumers racing for one run: exactly one proceeds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from crash_worker import MODEL, RESPONSES, RUN_ID, Worker, answered
from helpers import text_of

from agentcore_fsm import Agent
from agentcore_fsm.core.events import AGENT_EVENT_ADAPTER
from agentcore_fsm.devtools.testing import check_resumed_run, check_run
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response
from agentcore_fsm.persist.store import SqliteRunStore
from agentcore_fsm.runtime.resume import INTERRUPTED_TEXT, load_run_state

WORKER = str(Path(__file__).resolve().parents[1] / "crash_worker.py")
POINTS = [
    "stream:2",
    "stream:20",
    "turn_end:1",
    "append:1",
    "append:4",
    "append:9",
    "tool:c1:before",
    "tool:c1:after",
    "tool:c2:after",
    "tool:c3:after",
    "parallel",
    "steering",
    "turn_end:2",
]


def _worker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, WORKER, *args], capture_output=True, text=True, timeout=timeout
    )


def _events(path: Path) -> list[Any]:
    if not path.exists():
        return []
    return [
        AGENT_EVENT_ADAPTER.validate_python(json.loads(x)) for x in path.read_text().splitlines()
    ]


def _key(event: Any) -> tuple[Any, ...]:
    """What must agree between what a listener saw and the journal (a regenerated
    ``message_start`` carries the final message, the live one the empty start)."""
    kind = event.type
    if kind == "message_end":
        return (kind, event.message.model_dump_json())
    if kind == "message_start":
        return (kind, event.message.role)
    if kind.startswith("tool_execution"):
        return (kind, event.tool_call_id)
    if kind == "agent_end":
        return (kind, event.reason)
    return (kind,)


def _effects(path: Path) -> list[tuple[str, str]]:
    if not path.exists():
        return []
    return [tuple(line.split()) for line in path.read_text().splitlines()]  # type: ignore[misc]


def _config() -> Any:
    worker = Worker(os.devnull, os.devnull, "none", "check", 0.0)
    return worker, worker.config([0])


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize("point", POINTS)
def test_a_run_killed_at_any_point_is_resumed_by_another_process(
    tmp_path: Path, point: str, backend: str
) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects"
    first_events, resumed_events = tmp_path / "first.jsonl", tmp_path / "resumed.jsonl"
    first = _worker("run", str(db), str(effects), str(first_events), backend, point)
    assert first.returncode == -signal.SIGKILL, (first.returncode, first.stderr[-2000:])

    store = SqliteRunStore(db)
    crashed = store.load(RUN_ID)
    assert crashed.status == "running"
    journaled = crashed.entries
    worker, config = _config()
    machine, steps = load_run_state(store, RUN_ID, config, tools=worker.tools())
    history = [e for s in steps for e in s.events]
    # the calls whose results were journaled: their result messages are in the transcript
    # rebuilt from the journal (earlier turns' calls), or the current batch's calls that have
    # their result already
    finished_before = {m.tool_call_id for m in machine.new_messages if m.role == "toolResult"}
    finished_before |= {c.call.id for c in machine._calls if c.result is not None}
    running_before = {c.call.id for c in machine._calls if c.state != "new"} - finished_before
    store.close()

    # what the killed process's listener saw agrees with the journal's steps as far as both go
    # (the journal is written by the run's writer, so the listener may have seen the steps of
    # entries not yet written, and an answer still streaming: those the resumed run supersedes,
    # docs/survive.md#what-is-durable-when)
    seen = [e for e in _events(first_events) if e.type != "message_update"]
    if seen and seen[-1].type == "message_start" and seen[-1].message.role == "assistant":
        if len(seen) > len(history) or _key(seen[-1]) != _key(history[len(seen) - 1]):
            seen.pop()
    both = min(len(seen), len(history))
    assert [_key(e) for e in seen[:both]] == [_key(e) for e in history[:both]]
    if point in ("tool:c1:before", "tool:c1:after", "parallel", "tool:c3:after"):
        # killed inside a batch with a tool that is not idempotent, before any of its results
        # came back: everything the listener saw, the batch's start included, was written first
        assert len(seen) <= len(history), (len(seen), len(history))

    second = _worker("resume", str(db), str(effects), str(resumed_events), backend)
    assert second.returncode == 0, second.stdout + second.stderr[-3000:]

    store = SqliteRunStore(db)
    done = store.load(RUN_ID)
    assert done.status == "finished" and done.end_reason == "completed"
    assert done.entries[: len(journaled)] == journaled  # nothing journaled was rewritten
    machine, steps = load_run_state(store, RUN_ID, config, tools=worker.tools())
    store.close()
    # the journaled steps' events followed by the resumed ones: one well-formed run
    check_resumed_run(history, _events(resumed_events), machine.new_messages)
    # the whole run, regenerated from the journal
    summary = check_run([e for s in steps for e in s.events], machine.new_messages)
    assert summary.reason == "completed"
    results = {m.tool_call_id: m for m in machine.new_messages if m.role == "toolResult"}
    assert sorted(results) == ["c1", "c2", "c3"]

    ran = Counter(call for call, _ in _effects(effects))
    resumed_ran = {call for call, who in _effects(effects) if who.startswith("resumer")}
    assert not resumed_ran & finished_before, "a tool whose result was journaled ran again"
    for call in ("c1", "c3"):  # write: never twice
        assert ran[call] <= 1, (call, ran)
    for call, result in results.items():
        if call in running_before and result.tool_name == "write":
            assert result.is_error and text_of(result) == INTERRUPTED_TEXT.format(name="write")
            assert call not in resumed_ran
        else:
            assert not result.is_error, text_of(result)
            assert ran[call] >= 1


def test_of_two_resumers_exactly_one_proceeds(tmp_path: Path) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects"
    first = _worker("run", str(db), str(effects), str(tmp_path / "e0"), "trio", "tool:c3:before")
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    args = [sys.executable, WORKER, "resume", str(db), str(effects)]
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    racers = [
        subprocess.Popen(
            [*args, str(tmp_path / f"e{i}"), "trio", "1.0", str(barrier), "2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2)
    ]
    outcomes = sorted((p.wait(timeout=60), p.communicate()[0].strip()) for p in racers)
    assert [code for code, _ in outcomes] == [0, 3], outcomes
    assert outcomes[1][1].startswith("owned:") and repr(RUN_ID) in outcomes[1][1]
    store = SqliteRunStore(db)
    assert store.load(RUN_ID).status == "finished"
    store.close()


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_an_agent_session_survives_its_process(tmp_path: Path, backend: str) -> None:
    db, effects = tmp_path / "runs.db", tmp_path / "effects"
    first = _worker("agent", str(db), str(effects), str(tmp_path / "e0"), backend, "tool:c1:after")
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]

    async def main() -> None:
        store = SqliteRunStore(db)
        worker = Worker(str(effects), str(tmp_path / "e1"), "none", "resumer", 0.0)
        (run,) = store.runs("session")
        calls = answered(store.load(run.run_id).entries)
        agent = Agent(
            model=MODEL,
            tools=worker.tools(),
            stream_fn=FauxProvider([*RESPONSES[calls:], faux_response("again")]),
            store=store,
            session_id="session",
        )
        assert agent.interrupted_run == run.run_id
        # the transcript up to the crash: the prompt and the first answer
        assert [m.role for m in agent.messages] == ["user", "assistant"]
        with pytest.raises(ValueError, match="interrupted"):
            await agent.prompt("something else")
        seen: list[Any] = []
        agent.subscribe(lambda event, signal: seen.append(event))
        await agent.resume()
        assert agent.interrupted_run is None
        roles = [m.role for m in agent.messages]
        assert roles == [
            "user",
            "assistant",
            "toolResult",
            "toolResult",
            "assistant",
            "toolResult",
            "assistant",
        ]
        c1 = next(m for m in agent.messages if getattr(m, "tool_call_id", "") == "c1")
        assert c1.is_error and text_of(c1) == INTERRUPTED_TEXT.format(name="write")
        assert seen[-1].type == "agent_end" and seen[-1].reason == "completed"
        # the next prompt is a new run of the same session; a new agent loads it all
        await agent.prompt("again")
        assert [r.status for r in store.runs("session")] == ["finished", "finished"]
        again = Agent(model=MODEL, tools=worker.tools(), store=store, session_id="session")
        assert again.messages == agent.messages and again.interrupted_run is None
        store.close()

    anyio.run(main, backend=backend)
