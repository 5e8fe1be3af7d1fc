"""Runs with nested runs for the tests of the nested views (tests/devtools/test_nested_*.py,
tests/cli/test_nested_cli.py, the viewer's and Mermaid's browser tests).

``boss`` (run ``run-1``) calls the ``researcher`` (call ``c1``) in its message #1, which calls
the ``checker`` (call ``c7``) in its message #1; journaled into a store, each nested run gets
its own record there (``run-1/1.c1``, ``run-1/1.c1/1.c7``, with the ``"parent"`` header key).
Records that do not fit (for the bad-input tests) are made by copying runs by hand
(:func:`copy_run`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from agentcore_fsm import Agent, AgentContext, AgentLoopConfig, AgentTool, Model, run_agent_loop
from agentcore_fsm.devtools.testing import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.recorder import RunRecorder
from agentcore_fsm.persist.store import MemoryRunStore
from agentcore_fsm.persist.store_rules import RunStore, default_owner

MODEL = Model(id="faux-nested")
RESEARCHER = "run-1/1.c1"
CHECKER = "run-1/1.c1/1.c7"


def call(name: str, prompt: str, id: str, text: str = "") -> Any:
    return faux_response(text, tool_calls=[faux_tool_call(name, {"prompt": prompt}, id=id)])


def checker_agent() -> Agent:
    return Agent(system_prompt="You check.", stream_fn=FauxProvider([faux_response("Checked.")]))


def researcher_model() -> FauxProvider:
    return FauxProvider([call("checker", "check 522,000", "c7"), faux_response("Lyon: 522,000.")])


def researcher_agent(model: FauxProvider | None = None) -> Agent:
    tools = [checker_agent().as_tool("checker", "Check a fact.")]
    stream = model if model is not None else researcher_model()
    return Agent(system_prompt="You research.", tools=tools, stream_fn=stream)


def boss_answers() -> list[Any]:
    return [
        call("researcher", "How big is Lyon?", "c1", "Let me ask."),
        faux_response("About 522,000 people."),
    ]


def boss_tools(researcher: FauxProvider | None = None) -> list[AgentTool]:
    """The boss's tools: the researcher (whose model is ``researcher`` when given)."""
    return [researcher_agent(researcher).as_tool("researcher", "Ask the researcher.")]


def _journal(
    store: RunStore, run_id: str, prompt: str, tools: list[AgentTool], answers: list[Any]
) -> None:
    async def main() -> None:
        await run_agent_loop(
            [prompt],
            AgentContext(tools=tools),
            AgentLoopConfig(model=MODEL),
            stream_fn=FauxProvider(answers),
            store=store,
            run_id=run_id,
        )

    trio.run(main)


def copy_run(
    source: RunStore, run_id: str, target: RunStore, new_id: str, parent: dict[str, Any] | None
) -> None:
    """Copy run ``run_id`` of ``source`` into ``target`` as ``new_id``, its header with
    ``"parent"`` when given (finished as the original)."""
    stored = source.load(run_id)
    header = dict(stored.header)
    if parent is not None:
        header["parent"] = parent
    owner = default_owner()
    target.create_run(new_id, header, session_id=None, owner=owner, lease_s=60)
    for seq, entry in enumerate(stored.entries):
        target.append(new_id, seq, entry, owner=owner, lease_s=60)
    if stored.end_reason is not None:
        target.finish(new_id, stored.end_reason, owner=owner)


def nested_store() -> MemoryRunStore:
    """A store with ``run-1`` and its two nested runs, journaled as they ran."""
    store = MemoryRunStore()
    _journal(store, "run-1", "How big is Lyon?", boss_tools(), boss_answers())
    return store


def record_nested(path: Path) -> Path:
    """``run-1`` recorded live by a :class:`RunRecorder` (its store journals the nested runs
    too: their lines interleaved with the outer run's)."""

    async def main() -> None:
        with RunRecorder(path) as recorder:
            await run_agent_loop(
                ["How big is Lyon?"],
                AgentContext(tools=boss_tools()),
                AgentLoopConfig(model=MODEL),
                recorder,
                stream_fn=FauxProvider(boss_answers()),
                store=recorder.store,
                run_id="run-1",
                on_transition=recorder.on_transition,
            )

    trio.run(main)
    return path


TOOLS = boss_tools()
"""The boss's tools, for ``agentcore-fsm fork --tools nested_view_runs:TOOLS``."""


def sqlite_copy(store: RunStore, path: Path, runs: dict[str, dict[str, Any] | None]) -> Path:
    """A SQLite run store at ``path`` holding ``runs`` of ``store`` (run id: the ``"parent"``
    to give its header, None to copy the header as it is)."""
    from agentcore_fsm.persist.sqlite_store import SqliteRunStore

    with SqliteRunStore(path) as target:
        for run_id, parent in runs.items():
            header_parent = (
                parent if parent is not None else store.load(run_id).header.get("parent")
            )
            copy_run(store, run_id, target, run_id, header_parent)
    return path
