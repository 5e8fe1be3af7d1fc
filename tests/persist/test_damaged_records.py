"""Damaged records, generated: every field of every kind of record (the header and each kind of
entry) mutated, removed or joined by an unknown one; entries truncated, duplicated, reordered or
replaced. Each damaged record is given to the readers: rebuilding a run from a store
(``load_run_state``), resuming it (``resume_run``, both backends), loading it as a recording
(``load_run``) and replaying that recording. Every outcome must be a valid run (its events keep
the event grammar) or a :class:`~agentcore_fsm.persist.codec.RecordError` naming the run and
the entry (or the header) — never a raw exception — and a refused resume writes nothing.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    run_agent_loop,
)
from agentcore_fsm.core.abort import AbortController
from agentcore_fsm.core.config import AgentLoopTurnUpdate
from agentcore_fsm.devtools.replay import ReplayError, replay_run
from agentcore_fsm.devtools.testing import GrammarChecker
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.codec import RecordError
from agentcore_fsm.persist.recording import load_run
from agentcore_fsm.persist.store import MemoryRunStore
from agentcore_fsm.runtime.resume import load_run_state, resume_run

MODEL = Model(id="faux", provider="faux", api="faux")
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
OWNER = "elsewhere.invalid:1:dead"  # another host's owner whose lease has expired


async def _count(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
    if args["n"] == 3:
        raise ValueError("no threes")
    return AgentToolResult(content=[TextContent(text=f"n={args['n']}")], details={"n": args["n"]})


def _tools() -> list[AgentTool]:
    return [
        AgentTool("count", "count", SCHEMA, _count, prepare_arguments=lambda raw: raw),
        AgentTool("guarded", "guarded", SCHEMA, _count, requires_approval=lambda args: True),
    ]


def _config() -> AgentLoopConfig:
    polls = iter([None, ["steer \ud83d"]])
    return AgentLoopConfig(
        model=MODEL,
        before_tool_call=lambda ctx, signal: None,
        after_tool_call=lambda ctx, signal: {"details": {"after": True}},
        prepare_next_turn=lambda ctx, signal: AgentLoopTurnUpdate(thinking_level="low"),
        should_stop_after_turn=lambda ctx, signal: False,
        get_steering_messages=lambda: next(polls, None),
        decide_approval=lambda request, signal: True,
    )


def _answers() -> list[Any]:
    return [
        faux_response(
            "Counting.",
            tool_calls=[
                faux_tool_call("count", {"n": 1}, id="a"),
                faux_tool_call("count", {"n": 3}, id="b"),
                faux_tool_call("guarded", {"n": 2}, id="c"),
            ],
        ),
        faux_response("Done counting."),
    ]


async def _base_runs() -> MemoryRunStore:
    """Two journaled runs: "full" (tools, a failing one, approval, every hook, a steering
    message) and "cut" (aborted while its answer streams: an entry with a partial message)."""
    store = MemoryRunStore()
    await run_agent_loop(
        ["count for me"],
        AgentContext(tools=_tools()),
        _config(),
        stream_fn=FauxProvider(_answers()),
        store=store,
        run_id="full",
    )
    controller = AbortController()
    faux = FauxProvider([faux_response("a long answer " * 20)], chunk_size=3)

    async def stream_fn(model: Any, context: Any, options: Any) -> Any:
        deltas = 0
        async for event in faux(model, context, options):
            yield event
            deltas += event.type.endswith("_delta")
            if deltas == 3:
                controller.abort("enough")

    await run_agent_loop(
        ["talk"],
        AgentContext(tools=_tools()),
        _config(),
        stream_fn=stream_fn,
        store=store,
        run_id="cut",
        signal=controller.signal,
    )
    return store


BASE = anyio.run(_base_runs)
RECORDS = {run_id: BASE.load(run_id) for run_id in ("full", "cut")}
assert RECORDS["full"].status == "finished" and RECORDS["cut"].end_reason == "aborted"
assert any("partial" in e for e in RECORDS["cut"].entries)

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 10)
    | st.sampled_from([2**70, -1, 0.5, "", "x", "\ud83d", "toolUse", "user", "os:system"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indexes)."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*prefix, i))
    return out


@st.composite
def damaged(draw: st.DrawFn) -> tuple[str, dict[str, Any], list[dict[str, Any]], str]:
    """A run's header and entries with one damage, and what was done."""
    run_id = draw(st.sampled_from(sorted(RECORDS)))
    stored = RECORDS[run_id]
    header = copy.deepcopy(stored.header)
    entries = copy.deepcopy(stored.entries)
    how = draw(
        st.sampled_from(
            ["set", "set", "set", "delete", "add", "truncate", "duplicate", "swap", "replace"]
        )
    )
    if how in ("truncate", "duplicate", "swap", "replace"):
        k = draw(st.integers(0, len(entries) - 1))
        if how == "truncate":
            entries = entries[:k]
        elif how == "duplicate":
            entries.insert(k, copy.deepcopy(entries[k]))
        elif how == "swap" and k + 1 < len(entries):
            entries[k], entries[k + 1] = entries[k + 1], entries[k]
        elif how == "replace":
            entries[k] = draw(st.dictionaries(st.sampled_from(["input", "index", "x"]), JSON))
        return run_id, header, entries, f"{how} entry #{k}"
    target = draw(st.sampled_from(["header"] + [f"entry {i}" for i in range(len(entries))]))
    record: Any = header if target == "header" else entries[int(target.split()[1])]
    path = draw(st.sampled_from(_paths(record)))
    parent = record
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "add" and isinstance(parent, dict):
        parent["unknown_field"] = draw(JSON)
    else:
        parent[last] = draw(JSON)
    return run_id, header, entries, f"{how} {target} at {path}"


def _store_of(run_id: str, header: Any, entries: list[Any]) -> MemoryRunStore:
    store = MemoryRunStore()
    store.create_run(run_id, header, session_id=None, owner=OWNER, lease_s=-1.0)
    for seq, entry in enumerate(entries):
        store.append(run_id, seq, entry, owner=OWNER, lease_s=-1.0)
    return store


def _refused(exc: BaseException, run_id: str, what: str) -> None:
    assert isinstance(exc, RecordError), f"{what}: {type(exc).__name__}: {exc}"
    text = str(exc)
    assert f"run {run_id!r}" in text, f"{what}: {text}"
    assert "entry #" in text or "header" in text or "prompt" in text or "record" in text, (
        f"{what}: {text}"
    )


def _grammar(events: list[Any], finished: bool) -> None:
    checker = GrammarChecker()
    for event in events:
        checker.feed(event)
    if finished:
        checker.close()


FAST = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


@FAST
@given(damaged())
def test_rebuilding_a_damaged_run_gives_a_valid_run_or_a_record_error(
    case: tuple[str, dict[str, Any], list[dict[str, Any]], str],
) -> None:
    run_id, header, entries, what = case
    store = _store_of(run_id, header, entries)
    try:
        machine, steps = load_run_state(store, run_id, _config(), tools=_tools())
    except Exception as exc:
        _refused(exc, run_id, what)
        return
    _grammar([e for s in steps for e in s.events], machine.finished)


def _recording(path: Path, run_id: str, header: Any, entries: list[Any]) -> Path:
    lines = [
        {"kind": "run", "format": "agentcore-fsm.run", "version": 2, "machine": "agent_loop"},
        {"kind": "header", "run": run_id, "header": header},
        *({"kind": "input", "run": run_id, "n": n, "entry": e} for n, e in enumerate(entries)),
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@settings(FAST, max_examples=60)
@given(damaged())
def test_loading_and_replaying_a_damaged_recording(
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[str, dict[str, Any], list[dict[str, Any]], str],
) -> None:
    run_id, header, entries, what = case
    path = _recording(tmp_path_factory.mktemp("rec") / "run.jsonl", run_id, header, entries)
    try:
        run = load_run(path)
    except Exception as exc:
        _refused(exc, run_id, what)
        assert f"{path}:" in str(exc)
        return
    _grammar(run.events, run.end_reason is not None)
    if not (run.events and run.transitions and run.transitions[0].trigger == "start"):
        return
    try:
        result = anyio.run(lambda: replay_run(run, stall_timeout=0.3))
    except ReplayError:
        return  # a recording it cannot replay, said so
    # the replay is a run of the loop: its events keep the grammar, whether it diverged or not
    _grammar(result.events, False)
    if run.end_reason is not None:  # a whole run replays exactly
        assert result.ok, f"{what}: {result}"


@pytest.mark.anyio
@settings(FAST, max_examples=25)
@given(case=damaged())
async def test_resuming_a_damaged_run_resumes_or_writes_nothing(
    case: tuple[str, dict[str, Any], list[dict[str, Any]], str],
) -> None:
    run_id, header, entries, what = case
    store = _store_of(run_id, header, entries)
    events: list[Any] = []
    try:
        with anyio.fail_after(10):
            await resume_run(
                run_id,
                store,
                _config(),
                events.append,
                tools=_tools(),
                stream_fn=FauxProvider([faux_response("Resumed.")] * 4),
                history=True,
            )
    except Exception as exc:
        _refused(exc, run_id, what)
        stored = store.load(run_id)
        assert stored.entries == entries and stored.status == "running", what
        assert stored.owner is None  # the lease taken to resume was given back
        return
    stored = store.load(run_id)
    assert stored.status == "finished", what
    _grammar(events, True)
