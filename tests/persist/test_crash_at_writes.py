"""A journaled run killed (SIGKILL) right after each of its grouped writes, resumed by this
process (docs/survive.md#what-is-durable-when).

The child runs the bench's W2 shape in a ``SqliteRunStore``: three model answers, the first two
with four calls each of ``write``, a tool that is not idempotent and counts its executions in a
file. Its store dies right after its Nth write committed: after creating the run (before the
first model call) or after the Nth group (before the tools start, or before the next model
call). Each write is a durability point, so the kill lands exactly between the write and the
effect it guards. The resumed run then keeps every promise of the page:

* what the store holds is a prefix of the finished run's journal (nothing written twice,
  nothing reordered), and the run ends finished, its events one well-formed run;
* ``write`` never runs twice, and a call whose result was journaled never runs again;
* the model is never asked again for an answer the journal holds: the resumer asks exactly for
  the answers after it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore_fsm import AgentLoopConfig, Model, SqliteRunStore, resume_run
from agentcore_fsm.core.messages import TextContent
from agentcore_fsm.core.tools import AgentTool, AgentToolResult
from agentcore_fsm.devtools.testing import check_run
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

RUN_ID = "w2"

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import anyio
    from agentcore_fsm import AgentContext, AgentLoopConfig, Model, SqliteRunStore, run_agent_loop
    sys.path.insert(0, sys.argv[5])
    from test_crash_at_writes import responses, tools

    db, effects, kill_at, backend = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    writes = 0

    def wrote() -> None:
        global writes
        writes += 1
        if writes == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    class Dying(SqliteRunStore):
        def create_run(self, *args, **kwargs):
            super().create_run(*args, **kwargs)
            wrote()

        def append_many(self, *args, **kwargs):
            super().append_many(*args, **kwargs)
            wrote()

    from agentcore_fsm.integrations.providers.faux import FauxProvider

    async def main() -> None:
        await run_agent_loop(
            ["go"], AgentContext(tools=tools(effects, "first")),
            AgentLoopConfig(model=Model(id="faux")), stream_fn=FauxProvider(responses()),
            store=Dying(db), run_id="w2",
        )

    anyio.run(main, backend=backend)
    print("writes", writes)
    """
)


CASES = [(1, "trio"), (2, "trio"), (3, "trio"), (4, "trio"), (5, "trio"), (4, "asyncio")]
"""Where the child dies: every write on trio; the writes and their order do not depend on the
backend (the driver's rule), so asyncio is killed at one of them: before the second turn's
tools. ``(99, "trio")`` (added below) runs to the end."""


@pytest.fixture(scope="module")
def children(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Any, Any]]:
    """The children of every case, started at once (they are slow to start, not to run): by
    case, the store's file, the effects file and the finished child."""
    started = {}
    for kill_at, backend in [*CASES, (99, "trio")]:
        where = tmp_path_factory.mktemp(f"kill{kill_at}{backend}")
        db, effects = where / "runs.db", where / "effects"
        argv = [str(db), str(effects), str(kill_at), backend, str(Path(__file__).parent)]
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started[kill_at, backend] = (db, effects, proc)
    done = {}
    try:
        for case, (db, effects, proc) in started.items():
            out, err = proc.communicate(timeout=120)
            done[case] = (db, effects, proc.returncode, out, err)
        yield done
    finally:
        for _, _, proc in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def responses() -> list[Any]:
    """The model's three answers (fresh objects for each provider)."""
    calls = [
        [faux_tool_call("write", {"x": t * 4 + i}, id=f"c{t}{i}") for i in range(4)] for t in (0, 1)
    ]
    return [
        faux_response("one", tool_calls=calls[0]),
        faux_response("two", tool_calls=calls[1]),
        faux_response("done"),
    ]


def tools(effects: str, process: str) -> list[AgentTool]:
    async def write(call_id: str, args: Any, signal_: Any, on_update: Any) -> AgentToolResult:
        with open(effects, "a") as f:
            f.write(f"{call_id} {process}\n")
        return AgentToolResult(content=[TextContent(text=str(args["x"]))])

    return [AgentTool("write", "write x", {"type": "object"}, write)]


def _runs(effects: Path) -> list[tuple[str, str]]:
    if not effects.exists():
        return []
    return [tuple(line.split()) for line in effects.read_text().splitlines()]  # type: ignore[misc]


@pytest.mark.parametrize(("kill_at", "backend"), CASES)
def test_a_run_killed_after_any_write_resumes_keeping_every_promise(
    children: dict[Any, Any], kill_at: int, backend: str
) -> None:
    db, effects, returncode, _, err = children[kill_at, backend]
    assert returncode == -signal.SIGKILL, err[-2000:]

    with SqliteRunStore(db) as store:
        cut = store.load(RUN_ID)
        assert cut.status == "running"
        before_effects = _runs(effects)
        answered = sum(e["input"] == "stream_done" for e in cut.entries)
        done_ids = _journaled_call_ids(cut.entries)

        events: list[Any] = []
        model = FauxProvider(responses()[answered:])

        async def resume() -> Any:
            return await resume_run(
                RUN_ID,
                store,
                AgentLoopConfig(model=Model(id="faux")),
                events.append,
                tools=tools(str(effects), "resumer"),
                stream_fn=model,
                history=True,
            )

        anyio.run(resume, backend=backend)
        finished = store.load(RUN_ID)

    # the store held a prefix of the run's journal; the run is finished and well-formed
    assert finished.status == "finished" and finished.end_reason == "completed"
    assert finished.entries[: len(cut.entries)] == cut.entries
    check_run(events)
    # the model was asked only for the answers the journal did not hold
    assert len(model.calls) == len(responses()) - answered
    # the tool that is not idempotent never ran twice; a journaled result never ran again
    runs = _runs(effects)
    ids = [call for call, _ in runs]
    assert len(ids) == len(set(ids)), runs
    assert not [call for call, who in runs if who == "resumer" and call in done_ids]
    assert runs[: len(before_effects)] == before_effects


def _journaled_call_ids(entries: list[dict[str, Any]]) -> set[str]:
    """The ids of the calls whose results the journal holds."""
    ids: set[str] = set()
    calls: list[str] = []
    for entry in entries:
        if entry["input"] == "stream_done":
            content = entry["message"]["message"]["content"]
            calls = [block["id"] for block in content if block.get("type") == "toolCall"]
        elif entry["input"] == "tool_finished":
            ids.add(calls[entry["index"]])
    return ids


def test_the_child_dies_between_each_write_and_the_effect_it_guards(
    children: dict[Any, Any],
) -> None:
    # the kill points are the run's writes: five of them before the run's end (the run, two
    # answers before their tools, two groups of results before the next model call), then the
    # last one that finishes it
    db, effects, returncode, out, err = children[99, "trio"]
    assert returncode == 0, err[-2000:]
    assert out.split() == ["writes", "6"]
    with SqliteRunStore(db) as store:
        run = store.load(RUN_ID)
    assert run.status == "finished"
    kinds = [e["input"] for e in run.entries]
    assert kinds.count("stream_done") == 3 and kinds.count("tool_finished") == 8
    assert len(_runs(effects)) == 8
