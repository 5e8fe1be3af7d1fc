"""Exact replay of a recorded run (agentcore_fsm.devtools.replay): real runs are recorded with
RunRecorder,
then replayed offline and compared with their recording; edited recordings diverge where they were
edited; ``agentcore-fsm replay`` reports the same from a terminal."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore_fsm import (
    AbortController,
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    ApprovalDecision,
    BeforeToolCallResult,
    MemoryRunStore,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.cli import commands as cli
from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.approval import RunSuspended
from agentcore_fsm.core.config import LlmContext, StreamOptions
from agentcore_fsm.devtools.replay import (
    ReplayError,
    ReplayResult,
    assert_replays,
    replay_run,
    replay_run_sync,
    replay_script,
)
from agentcore_fsm.integrations.providers.faux import (
    FauxError,
    FauxProvider,
    faux_response,
    faux_tool_call,
)
from agentcore_fsm.persist.recorder import RecordedRun, RunRecorder, load_run

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
STALL = 0.5  # seconds: a replay never waits on anything real, so a short stall timeout is safe
ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


def text(value: str) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=value)])


def add_tool(name: str = "add", **kwargs: Any) -> AgentTool:
    """Adds a and b after reporting progress; a == 3 raises; a == 1 is slow."""

    async def execute(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        on_update(text(f"adding {params['a']}"))
        if params["a"] == 1:
            await anyio.sleep(0.02)
        if params["a"] == 3:
            raise ValueError("no threes today")
        return AgentToolResult(
            content=[TextContent(text=str(params["a"] + params["b"]))], details={"by": name}
        )

    return AgentTool(
        name=name, description="Add two integers.", parameters=ADD_SCHEMA, execute=execute, **kwargs
    )


def add_call(a: int, b: int = 1, *, id: str, name: str = "add") -> Any:
    return faux_tool_call(name, {"a": a, "b": b}, id=id)


async def record(
    path: Path,
    responses: Iterable[Any] = (),
    *,
    tools: Iterable[AgentTool] = (),
    prompts: Iterable[str] = ("hi",),
    stream_fn: Any = None,
    listener: Callable[[Any], None] | None = None,
    signal: AbortSignal | None = None,
    journal: dict[str, Any] | None = None,
    **config: Any,
) -> RecordedRun:
    """Run the loop once on the faux provider, recorded to ``path``; the recording read back.
    ``listener`` sees every event after the recorder has written it; ``journal``: the run's
    ``store=``/``run_id=``."""
    model = stream_fn or FauxProvider(list(responses), chunk_size=4)
    with RunRecorder(path) as recorder:

        def sink(event: Any) -> None:
            recorder(event)
            if listener is not None:
                listener(event)

        await run_agent_loop(
            [UserMessage(content=p) for p in prompts],
            AgentContext(system_prompt="You add numbers.", tools=list(tools)),
            AgentLoopConfig(model=MODEL, **config),
            sink,
            signal=signal,
            stream_fn=model,
            on_transition=recorder.on_transition,
            **(journal or {}),
        )
    return load_run(path)


async def identical(path: Path) -> ReplayResult:
    result = await replay_run(path, stall_timeout=STALL)
    assert result.ok, str(result)
    run = load_run(path)
    assert [e.type for e in result.events] == [e.type for e in run.events]
    assert result.transitions == run.transitions
    assert str(result) == (
        f"replayed {len(run.events)} events and {len(run.transitions)} transitions: identical"
    )
    return result


def triggers(run: RecordedRun) -> list[str]:
    return [t.trigger for t in run.transitions]


def types(run: RecordedRun) -> list[str]:
    return [e.type for e in run.events]


# --- runs that replay identically -----------------------------------------------------------


@pytest.mark.anyio
async def test_a_text_run_replays_with_the_same_deltas(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    run = await record(
        path, [faux_response("Hello there, how can I help?", thinking="A greeting.")]
    )
    deltas = [e for e in run.events if e.type == "message_update"]
    assert len(deltas) > 10
    result = await identical(path)
    replayed = [
        e.assistant_message_event.delta
        for e in result.events
        if e.type == "message_update" and hasattr(e.assistant_message_event, "delta")
    ]
    assert replayed == [
        e.assistant_message_event.delta
        for e in deltas
        if hasattr(e.assistant_message_event, "delta")
    ]
    script = replay_script(path)
    assert [m.content for m in script.prompts] == ["hi"]
    assert [m.text() for m in script.responses] == ["Hello there, how can I help?"]
    assert script.complete and script.notes == []


@pytest.mark.anyio
async def test_parallel_tools_interleave_as_recorded(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [
            faux_response("Adding.", tool_calls=[add_call(1, id="c1"), add_call(2, id="c2")]),
            faux_response("3 and 3."),
        ],
        tools=[add_tool()],
    )
    ends = [e.tool_call_id for e in run.events if e.type == "tool_execution_end"]
    assert ends == ["c2", "c1"]  # the slow first call ended last
    result = await identical(path)
    assert [e.tool_call_id for e in result.events if e.type == "tool_execution_end"] == ends

    def updates(events: list[Any]) -> list[str]:
        return [
            e.partial_result.content[0].text for e in events if e.type == "tool_execution_update"
        ]

    assert sorted(updates(run.events)) == ["adding 1", "adding 2"]
    assert updates(result.events) == updates(run.events)  # in the order the backend ran them
    assert replay_script(path).tool_names == ["add"]


@pytest.mark.anyio
async def test_sequential_batches_replay_one_call_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [
            faux_response(tool_calls=[add_call(1, id="c1"), add_call(2, id="c2")]),
            faux_response("Done."),
        ],
        tools=[add_tool()],
        tool_execution="sequential",
    )
    assert triggers(run).count("tools_settled") == 2  # one executing phase per call
    await identical(path)
    assert replay_script(path).runs[0].tool_execution == "sequential"


@pytest.mark.anyio
async def test_a_sequential_tool_among_parallel_ones(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await record(
        path,
        [
            faux_response(tool_calls=[add_call(2, id="c1"), add_call(4, id="c2", name="slow")]),
            faux_response(tool_calls=[add_call(2, id="c3"), add_call(4, id="c4")]),
            faux_response("Done."),
        ],
        tools=[add_tool(), add_tool("slow", execution_mode="sequential")],
    )
    await identical(path)
    script = replay_script(path)
    assert script.runs[0].tool_execution == "parallel"
    assert {spec.name: spec.mode for spec in script.tool_specs} == {
        "add": None,
        "slow": "sequential",
    }


@pytest.mark.anyio
async def test_tool_errors_and_rejected_calls_replay(tmp_path: Path) -> None:
    def block(ctx: Any, signal: Any) -> Any:
        return {"block": True, "reason": "not b"} if ctx.tool_call.name == "b" else None

    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [
            faux_response(
                tool_calls=[
                    add_call(3, id="c1"),  # raises
                    faux_tool_call("missing", {}, id="c2"),  # no such tool
                    faux_tool_call("add", {"a": "x"}, id="c3"),  # invalid arguments
                    add_call(2, id="c4", name="b"),  # blocked by before_tool_call
                    add_call(2, id="c5"),
                ]
            ),
            faux_response("Some failed."),
        ],
        tools=[add_tool(), add_tool("b")],
        before_tool_call=block,
    )
    errors = [e.result.content[0].text for e in run.events if e.type == "tool_execution_end"]
    assert errors[:3] == ["Tool missing not found", errors[1], "not b"]
    assert errors[1].startswith('Validation failed for tool "add"')
    result = await identical(path)
    script = replay_script(path)
    rejected = {k[0]: c.rejected for k, c in script.tool_calls.items()}
    assert rejected == {
        "c1": None,
        "c2": "Tool missing not found",
        "c3": errors[1],
        "c4": "not b",
        "c5": None,
    }
    ends = {e.tool_call_id: e for e in result.events if e.type == "tool_execution_end"}
    assert ends["c1"].is_error and ends["c1"].result.content[0].text == "no threes today"
    assert not ends["c5"].is_error and ends["c5"].result.details == {"by": "add"}


@pytest.mark.anyio
async def test_a_prepared_call_runs_with_its_recorded_arguments(tmp_path: Path) -> None:
    def prepare(raw: dict[str, Any]) -> dict[str, Any]:
        return {"a": int(raw["a"]), "b": 1}

    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [faux_response(tool_calls=[faux_tool_call("add", {"a": "5"}, id="c1")]), faux_response()],
        tools=[add_tool(prepare_arguments=prepare)],
    )
    update = next(e for e in run.events if e.type == "tool_execution_update")
    assert update.args == {"a": 5, "b": 1}
    await identical(path)


@pytest.mark.anyio
async def test_a_provider_error_replays(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    run = await record(path, [FauxError("model overloaded")])
    assert run.end_reason == "error" and run.error == "model overloaded"
    await identical(path)


@pytest.mark.anyio
async def test_a_stream_function_that_raises_midway_replays(tmp_path: Path) -> None:
    faux = FauxProvider([faux_response("This answer is cut short.")], chunk_size=4)

    async def broken(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[Any]:
        deltas = 0
        async for event in faux(model, context, options):
            yield event
            deltas += event.type == "text_delta"
            if deltas == 2:
                raise ConnectionError("connection reset")

    path = tmp_path / "run.jsonl"
    run = await record(path, stream_fn=broken)
    assert ("streaming", "fail") in [(t.source, t.trigger) for t in run.transitions]
    assert run.error == "connection reset"
    await identical(path)


@pytest.mark.anyio
async def test_steering_and_follow_up_messages_are_injected_again(tmp_path: Path) -> None:
    steering = [[], ["Use b = 10 instead."]]
    follow_ups = [["And now 2 + 2?"]]

    def steer() -> list[str]:
        return steering.pop(0) if steering else []

    def follow_up() -> list[str]:
        return follow_ups.pop(0) if follow_ups else []

    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [
            faux_response(tool_calls=[add_call(2, id="c1")]),
            faux_response("2 + 10 = 12."),
            faux_response("2 + 2 = 4."),
        ],
        tools=[add_tool()],
        get_steering_messages=steer,
        get_follow_up_messages=follow_up,
    )
    assert "steering_polled" in triggers(run) and "follow_up_polled" in triggers(run)
    await identical(path)
    script = replay_script(path).runs[0]
    assert script.steering is not None and script.follow_up is not None
    injected = [[m.content[0].text for m in o.value] for o in script.steering]
    assert injected == [[], ["Use b = 10 instead."], [], []]
    assert [[m.content[0].text for m in o.value] for o in script.follow_up] == [
        ["And now 2 + 2?"],
        [],
    ]


@pytest.mark.anyio
async def test_an_abort_while_a_tool_runs_replays(tmp_path: Path) -> None:
    controller = AbortController()

    async def hang(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        on_update(text("working"))
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    def abort_on_update(event: Any) -> None:
        if event.type == "tool_execution_update" and event.tool_name == "hang":
            controller.abort()

    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [faux_response(tool_calls=[add_call(2, id="c1"), faux_tool_call("hang", {}, id="c2")])],
        tools=[add_tool(), AgentTool("hang", "Never ends.", {}, hang)],
        listener=abort_on_update,
        signal=controller.signal,
    )
    assert run.end_reason == "aborted" and "abort" in triggers(run)
    ends = {
        e.tool_call_id: e.result.content[0].text
        for e in run.events
        if e.type == "tool_execution_end"
    }
    assert ends["c2"] == "Operation aborted"
    await identical(path)
    assert replay_script(path).runs[0].abort_at is not None


@pytest.mark.anyio
async def test_an_abort_while_the_model_streams_replays(tmp_path: Path) -> None:
    controller = AbortController()
    seen = 0

    def abort_midway(event: Any) -> None:
        nonlocal seen
        seen += event.type == "message_update"
        if seen == 3:
            controller.abort()

    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [faux_response("A long answer that is never finished.")],
        listener=abort_midway,
        signal=controller.signal,
    )
    assert run.end_reason == "aborted"
    final = run.last_run_messages()[-1]
    assert final.stop_reason == "aborted" and 0 < len(final.text()) < 20
    await identical(path)


@pytest.mark.anyio
async def test_turn_hooks_replay(tmp_path: Path) -> None:
    decisions = [False, True]

    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [faux_response(tool_calls=[add_call(2, id="c1")]), faux_response("Stop here.")],
        tools=[add_tool()],
        prepare_next_turn=lambda ctx, signal: None,
        should_stop_after_turn=lambda ctx, signal: decisions.pop(0),
    )
    # prepare_next_turn runs once: before the second turn, never after the last one
    assert run.end_reason == "stopped" and triggers(run).count("next_turn_prepared") == 1
    await identical(path)
    script = replay_script(path).runs[0]
    assert script.should_stop_after_turn is not None
    assert [o.value for o in script.should_stop_after_turn] == [False, True]


@pytest.mark.anyio
async def test_a_listener_that_raises_replays(tmp_path: Path) -> None:
    def explode(event: Any) -> None:
        if event.type == "turn_end":
            raise RuntimeError("listener broke")

    path = tmp_path / "run.jsonl"
    run = await record(path, [faux_response("Fine.")], listener=explode)
    assert run.end_reason == "error" and run.error == "listener broke"
    assert ("closing_turn", "fail") in [(t.source, t.trigger) for t in run.transitions]
    await identical(path)


@pytest.mark.anyio
async def test_a_poll_that_raises_replays(tmp_path: Path) -> None:
    calls = 0

    def steer() -> list[str]:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError("queue unavailable")
        return []

    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [faux_response(tool_calls=[add_call(2, id="c1")]), faux_response("Never.")],
        tools=[add_tool()],
        get_steering_messages=steer,
    )
    assert run.end_reason == "error" and run.error == "queue unavailable"
    await identical(path)


@pytest.mark.anyio
async def test_several_runs_of_an_agent_replay(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with RunRecorder(path) as recorder:
        agent = Agent(
            model=MODEL,
            tools=[add_tool()],
            stream_fn=FauxProvider(
                [
                    faux_response(tool_calls=[add_call(2, id="c1")]),
                    faux_response("3."),
                    faux_response("Again: 3."),
                ]
            ),
            on_transition=recorder.on_transition,
        )
        agent.subscribe(recorder)
        await agent.prompt("2 + 1?")
        await agent.prompt("Once more?")
    run = load_run(path)
    assert types(run).count("agent_start") == 2
    await identical(path)
    assert len(replay_script(path).runs) == 2


@pytest.mark.anyio
async def test_a_recording_that_stops_mid_run_replays_up_to_its_end(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await record(
        path,
        [faux_response(tool_calls=[add_call(2, id="c1")]), faux_response("Done.")],
        tools=[add_tool()],
    )
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if '"tool_execution_update"' in line)
    crashed = tmp_path / "crashed.jsonl"
    crashed.write_text("".join(lines[: cut + 1]), encoding="utf-8")
    result = await replay_run(crashed, stall_timeout=STALL)
    assert result.ok, str(result)
    assert any("stops mid-run" in note for note in result.notes)
    assert len(result.events) >= len(load_run(crashed).events)


# --- divergences ----------------------------------------------------------------------------


def edit(path: Path, target: Path, line: Callable[[dict[str, Any]], bool], change: Any) -> int:
    """Copy the recording with the first record matching ``line`` changed by ``change(record)``
    (or dropped when ``change`` is None); return that record's index among the events."""
    records = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    events = -1
    out: list[str] = []
    found = None
    for record in records:
        if record["kind"] == "event":
            events += 1
        if found is None and line(record):
            found = events
            if change is None:
                continue
            change(record)
        out.append(json.dumps(record))
    assert found is not None
    target.write_text("\n".join(out) + "\n", encoding="utf-8")
    return found


def event_of(kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    def match(record: dict[str, Any]) -> bool:
        event = record.get("event") or {}
        return event.get("type") == kind and all(event.get(k) == v for k, v in fields.items())

    return match


async def tool_run(path: Path) -> RecordedRun:
    return await record(
        path,
        [
            faux_response("Adding.", tool_calls=[add_call(1, id="c1"), add_call(2, id="c2")]),
            faux_response("The sums are 2 and 3."),
        ],
        tools=[add_tool()],
    )


@pytest.mark.anyio
async def test_a_changed_tool_result_diverges_at_its_result_message(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    run = await tool_run(path)

    def change(record: dict[str, Any]) -> None:
        record["event"]["result"]["content"][0]["text"] = "99"

    edited = tmp_path / "edited.jsonl"
    edit(path, edited, event_of("tool_execution_end", toolCallId="c1"), change)
    result = await replay_run(edited, stall_timeout=STALL)
    divergence = result.divergence
    assert divergence is not None and not result.ok
    # the stub answered 99 as recorded; the recorded result message still says 2
    at = next(
        i
        for i, e in enumerate(run.events)
        if e.type == "message_start" and getattr(e.message, "tool_call_id", None) == "c1"
    )
    assert (divergence.kind, divergence.index) == ("event", at)
    assert divergence.expected == divergence.got == "message_start(toolResult)"
    assert divergence.detail == 'message.content[0].text: expected "2", got "99"'
    assert len(divergence.context) == 4
    assert f"replay diverged at event #{at} " in str(result)


@pytest.mark.anyio
async def test_a_dropped_event_diverges_where_it_was(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    run = await tool_run(path)
    edited = tmp_path / "edited.jsonl"
    second_turn = [i for i, e in enumerate(run.events) if e.type == "turn_start"][1]

    def second_turn_start(record: dict[str, Any]) -> bool:
        return record.get("seq") == _seqs(path, "turn_start")[1]

    at = edit(path, edited, second_turn_start, None)
    assert at == second_turn
    result = await replay_run(edited, stall_timeout=STALL)
    assert result.divergence is not None
    assert (result.divergence.kind, result.divergence.index) == ("event", second_turn)
    assert result.divergence.got == "turn_start"
    assert result.divergence.expected == "message_start(assistant)"


def _seqs(path: Path, kind: str) -> list[int]:
    records = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    return [int(r["seq"]) for r in records if r.get("event", {}).get("type") == kind]


@pytest.mark.anyio
async def test_changed_model_text_diverges_at_the_first_event_that_repeats_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    run = await tool_run(path)

    def change(record: dict[str, Any]) -> None:
        record["event"]["message"]["content"][0]["text"] = "The sums are 2 and 4."

    last_answer = [
        i
        for i, e in enumerate(run.events)
        if e.type == "message_end" and getattr(e.message, "role", "") == "assistant"
    ][-1]
    edited = tmp_path / "edited.jsonl"

    def last_assistant_end(record: dict[str, Any]) -> bool:
        event = record.get("event") or {}
        return event.get("type") == "message_end" and record["seq"] == _last_end_seq(path)

    assert edit(path, edited, last_assistant_end, change) == last_answer
    result = await replay_run(edited, stall_timeout=STALL)
    divergence = result.divergence
    assert divergence is not None
    # the model "said" the edited text; the recorded turn_end still holds the old one
    assert (divergence.kind, divergence.index) == ("event", last_answer + 1)
    assert divergence.expected == "turn_end"
    assert divergence.detail is not None and divergence.detail.startswith("message.content[0]")


def _last_end_seq(path: Path) -> int:
    records = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    ends = [
        r["seq"]
        for r in records
        if r.get("event", {}).get("type") == "message_end"
        and r["event"]["message"]["role"] == "assistant"
    ]
    return int(ends[-1])


@pytest.mark.anyio
async def test_a_dropped_tool_result_stalls_and_says_where(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    run = await tool_run(path)
    edited = tmp_path / "edited.jsonl"
    dropped = edit(path, edited, event_of("tool_execution_end", toolCallId="c2"), None)
    assert run.events[dropped].type == "tool_execution_end"
    with anyio.fail_after(5):
        result = await replay_run(edited, stall_timeout=0.2)
    divergence = result.divergence
    assert divergence is not None and divergence.got is None
    # c2's stub never answers, so the batch never settles: the first record that does not come
    # is the transition recorded when the last call ended
    assert (divergence.kind, divergence.index) == (
        "transition",
        triggers(run).index("tools_settled"),
    )
    assert divergence.expected == "executing --tools_settled--> turn_end"
    assert divergence.detail == "nothing came for 0.2 s: the replay stalled"
    assert len(result.events) < len(run.events)


@pytest.mark.anyio
async def test_a_changed_transition_diverges_as_a_transition(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    run = await tool_run(path)
    edited = tmp_path / "edited.jsonl"

    def change(record: dict[str, Any]) -> None:
        record["dest"] = "executing"

    def settled(record: dict[str, Any]) -> bool:
        return record.get("trigger") == "tools_settled"

    edit(path, edited, settled, change)
    result = await replay_run(edited, stall_timeout=STALL)
    divergence = result.divergence
    assert divergence is not None and divergence.kind == "transition"
    assert divergence.index == triggers(run).index("tools_settled")
    assert divergence.expected == "executing --tools_settled--> executing"
    assert divergence.got == "executing --tools_settled--> turn_end"


@pytest.mark.anyio
async def test_recordings_that_cannot_be_replayed(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with RunRecorder(path) as recorder:  # events only: no on_transition
        await run_agent_loop(
            [UserMessage(content="hi")],
            AgentContext(),
            AgentLoopConfig(model=MODEL),
            recorder,
            stream_fn=FauxProvider([faux_response("Hi.")]),
        )
    with pytest.raises(ReplayError, match="no transitions of agent_loop"):
        replay_script(path)
    with pytest.raises(ReplayError, match="no events"):
        replay_script(RecordedRun(machine="agent_loop"))


# --- synchronous use and the command ----------------------------------------------------------


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    anyio.run(tool_run, path, backend="trio")
    return path


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_assert_replays_is_the_regression_test(
    recording: Path, tmp_path: Path, backend: Any
) -> None:
    assert assert_replays(recording, backend=backend).ok
    edited = tmp_path / "edited.jsonl"

    def change(record: dict[str, Any]) -> None:
        record["event"]["result"]["content"][0]["text"] = "99"

    edit(recording, edited, event_of("tool_execution_end", toolCallId="c2"), change)
    with pytest.raises(AssertionError, match=r"replay diverged at event #\d+") as caught:
        assert_replays(edited, backend=backend, stall_timeout=STALL)
    assert 'expected "3", got "99"' in str(caught.value)
    assert replay_run_sync(edited, backend=backend).divergence is not None


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's own exits
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_the_command_says_identical(
    recording: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    run = load_run(recording)
    code, out, err = run_cli(capsys, "replay", str(recording), "--backend", backend)
    assert (code, err) == (0, "")
    assert out == (
        f"replayed {len(run.events)} events and {len(run.transitions)} transitions: identical\n"
    )


def test_the_command_prints_the_divergence(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edited = tmp_path / "edited.jsonl"
    at = edit(recording, edited, event_of("turn_start"), None)
    code, out, err = run_cli(capsys, "replay", str(edited))
    assert (code, err) == (1, "")
    assert out.startswith(f"replay diverged at event #{at} ")
    assert "  expected: message_start(user)\n  got:      turn_start\n" in out


def test_the_command_names_a_file_it_cannot_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.jsonl"
    code, out, err = run_cli(capsys, "replay", str(missing))
    assert (code, out) == (1, "")
    assert err == f"agentcore-fsm replay: error: cannot read {missing}: No such file or directory\n"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "run", "format": "agentcore-fsm.run", "version": 1,\n', "utf-8")
    code, out, err = run_cli(capsys, "replay", str(bad))
    assert code == 1 and err.startswith(f"agentcore-fsm replay: error: {bad}:1: not JSON")
    empty = tmp_path / "empty.jsonl"
    with RunRecorder(empty):
        pass
    code, out, err = run_cli(capsys, "replay", str(empty))
    assert code == 1
    assert err.startswith(f"agentcore-fsm replay: error: cannot replay {empty}: ")


def test_the_command_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "replay")
    assert code == 2 and "usage: agentcore-fsm replay" in err
    code, out, err = run_cli(capsys, "replay", "x.jsonl", "--backend", "curio")
    assert code == 2 and "invalid choice" in err
    code, out, err = run_cli(capsys, "replay", "x.jsonl", "--stall-timeout", "0")
    assert code == 2 and "--stall-timeout" in err
    code, out, err = run_cli(capsys, "replay", "--help")
    assert code == 0 and out.startswith("usage: agentcore-fsm replay") and "--backend" in out
    code, out, err = run_cli(capsys, "--help")
    assert "  replay   " in out


@pytest.mark.anyio
async def test_a_poll_that_returns_after_the_signal_fired_replays(tmp_path: Path) -> None:
    controller = AbortController()
    calls = 0

    def steer() -> list[str]:
        nonlocal calls
        calls += 1
        if calls == 2:
            controller.abort()  # the messages it returns are still injected, then the run ends
            return ["Too late."]
        return []

    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [faux_response(tool_calls=[add_call(2, id="c1")]), faux_response("Never.")],
        tools=[add_tool()],
        get_steering_messages=steer,
        signal=controller.signal,
    )
    assert run.end_reason == "aborted"
    assert ("steering_polled", "stopped") in [(t.trigger, t.dest) for t in run.transitions]
    await identical(path)
    steering = replay_script(path).runs[0].steering
    assert steering is not None and steering[1].abort
    assert [m.content[0].text for m in steering[1].value] == ["Too late."]


@pytest.mark.anyio
async def test_a_turn_hook_that_raises_after_an_abort_replays(tmp_path: Path) -> None:
    controller = AbortController()

    def prepare(ctx: Any, signal: Any) -> None:
        controller.abort()
        raise RuntimeError("prepare failed")

    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [faux_response(tool_calls=[add_call(2, id="c1")]), faux_response("Never.")],
        tools=[add_tool()],
        prepare_next_turn=prepare,
        signal=controller.signal,
    )
    assert run.end_reason == "aborted"
    assert ("preparing_next_turn", "fail") in [(t.source, t.trigger) for t in run.transitions]
    await identical(path)


@pytest.mark.anyio
async def test_a_recording_without_deltas_replays_without_them(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with RunRecorder(path, updates=False) as recorder:
        await run_agent_loop(
            [UserMessage(content="hi")],
            AgentContext(tools=[add_tool()]),
            AgentLoopConfig(model=MODEL),
            recorder,
            stream_fn=FauxProvider(
                [faux_response(tool_calls=[add_call(2, id="c1")]), faux_response("Three.")]
            ),
            on_transition=recorder.on_transition,
        )
    assert "message_update" not in types(load_run(path))
    result = await identical(path)
    assert any("no message_update" in note for note in result.notes)


# --- approvals ------------------------------------------------------------------------------


def decisions(events: Iterable[Any]) -> list[tuple[str, bool, str | None, str, Any]]:
    return [
        (e.tool_call_id, e.approved, e.reason, e.decided_by, e.args)
        for e in events
        if e.type == "approval_decided"
    ]


async def approval_run(path: Path) -> RecordedRun:
    """c1 approved, c2 denied, c3 approved with other arguments, c4 (tool "b", approval asked
    by before_tool_call with its own reason) approved; c5 needs none (requires_approval says
    so). The approver answers c3 first, then c1, c2 and c4, each once the one before is
    decided."""
    answers = {
        "c1": ApprovalDecision(approved=True, decided_by="alice"),
        "c2": ApprovalDecision(approved=False, reason="not today", decided_by="bob"),
        "c3": ApprovalDecision(approved=True, args={"a": 5, "b": 5}),
        "c4": True,
    }

    after = {"c1": "c3", "c2": "c1", "c4": "c2"}
    decided = {call_id: anyio.Event() for call_id in answers}

    async def approver(request: Any, signal: Any) -> Any:
        call_id = request.tool_call_id
        if call_id in after:
            await decided[after[call_id]].wait()
        return answers[call_id]

    def note_decision(event: Any) -> None:
        if event.type == "approval_decided":
            decided[event.tool_call_id].set()

    def ask_for_b(ctx: Any, signal: Any) -> Any:
        if ctx.tool_call.name == "b":
            return BeforeToolCallResult(require_approval=True, reason="b is new")
        return None

    return await record(
        path,
        [
            faux_response(
                tool_calls=[
                    add_call(2, id="c1"),
                    add_call(4, id="c2"),
                    add_call(6, id="c3"),
                    add_call(2, id="c4", name="b"),
                    add_call(0, id="c5"),
                ]
            ),
            faux_response("Some ran."),
        ],
        tools=[add_tool(requires_approval=lambda args: args["a"] > 0), add_tool("b")],
        before_tool_call=ask_for_b,
        decide_approval=approver,
        listener=note_decision,
    )


@pytest.mark.anyio
async def test_approvals_denials_and_changed_arguments_replay(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    run = await approval_run(path)
    requested = [(e.tool_call_id, e.reason) for e in run.events if e.type == "approval_requested"]
    assert requested == [
        ("c1", 'Tool "add" requires approval'),
        ("c2", 'Tool "add" requires approval'),
        ("c3", 'Tool "add" requires approval'),
        ("c4", "b is new"),
    ]
    recorded = decisions(run.events)
    assert recorded == [
        ("c3", True, None, "user", {"a": 5, "b": 5}),
        ("c1", True, None, "alice", None),
        ("c2", False, "not today", "bob", None),
        ("c4", True, None, "user", None),
    ]
    ends = {
        e.tool_call_id: e.result.content[0].text
        for e in run.events
        if e.type == "tool_execution_end"
    }
    assert ends == {
        "c1": "3",
        "c2": 'Tool call "add" was denied: not today',
        "c3": "10",
        "c4": "3",
        "c5": "1",
    }
    assert "awaiting_approval" in [t.dest for t in run.transitions]
    result = await identical(path)
    assert decisions(result.events) == recorded
    calls = {key[0]: call for key, call in replay_script(path).tool_calls.items()}
    assert {k: (c.asked, c.approval) for k, c in calls.items()} == {
        "c1": (True, 'Tool "add" requires approval'),
        "c2": (True, 'Tool "add" requires approval'),
        "c3": (True, 'Tool "add" requires approval'),
        "c4": (True, "b is new"),
        "c5": (False, None),
    }


@pytest.mark.anyio
async def test_denials_the_loop_makes_itself_replay_as_recorded(tmp_path: Path) -> None:
    # no approver configured at all
    lone = tmp_path / "no-approver.jsonl"
    run = await record(
        lone,
        [faux_response(tool_calls=[add_call(2, id="c1")]), faux_response("Denied.")],
        tools=[add_tool(requires_approval=True)],
    )
    assert decisions(run.events) == [
        (
            "c1",
            False,
            "it needs approval and no approver is configured (AgentLoopConfig.decide_approval)",
            "no approver",
            None,
        )
    ]
    await identical(lone)

    # a timeout, and an approver that raises
    async def approver(request: Any, signal: Any) -> Any:
        if request.tool_call_id == "c2":
            raise RuntimeError("approval service down")
        await anyio.sleep_forever()

    timed = tmp_path / "timeout.jsonl"
    run = await record(
        timed,
        [
            faux_response(tool_calls=[add_call(2, id="c1"), add_call(4, id="c2")]),
            faux_response("Both denied."),
        ],
        tools=[add_tool(requires_approval=True)],
        decide_approval=approver,
        approval_timeout_s=0.05,
    )
    assert decisions(run.events) == [
        ("c2", False, "decide_approval raised: approval service down", "error", None),
        ("c1", False, "no decision within 0.05 s", "timeout", None),
    ]
    result = await identical(timed)
    assert decisions(result.events) == decisions(run.events)


@pytest.mark.anyio
async def test_an_abort_while_calls_wait_for_approval_replays(tmp_path: Path) -> None:
    controller = AbortController()

    async def approver(request: Any, signal: Any) -> Any:
        if request.tool_call_id == "c1":
            return True
        await anyio.sleep(0.01)
        controller.abort()  # the person gives up on the whole run
        await anyio.sleep_forever()

    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [faux_response(tool_calls=[add_call(2, id="c1"), add_call(4, id="c2")])],
        tools=[add_tool(requires_approval=True)],
        decide_approval=approver,
        signal=controller.signal,
    )
    assert run.end_reason == "aborted"
    assert decisions(run.events) == [
        ("c1", True, None, "user", None),
        ("c2", False, "Operation aborted", "abort", None),
    ]
    assert ("awaiting_approval", "abort") in [(t.source, t.trigger) for t in run.transitions]
    result = await identical(path)
    assert decisions(result.events) == decisions(run.events)
    calls = {key[0]: call for key, call in replay_script(path).tool_calls.items()}
    assert calls["c1"].decision is not None and calls["c2"].decision is None


@pytest.mark.anyio
async def test_an_agent_s_approvals_in_a_sequential_batch_replay(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with RunRecorder(path) as recorder:
        agent = Agent(
            model=MODEL,
            tools=[add_tool(requires_approval=True)],
            stream_fn=FauxProvider(
                [
                    faux_response(tool_calls=[add_call(2, id="c1"), add_call(4, id="c2")]),
                    faux_response("One of two."),
                ]
            ),
            on_transition=recorder.on_transition,
            tool_execution="sequential",
        )

        def decide(event: Any, signal: Any) -> None:
            if event.type == "approval_requested":
                if event.tool_call_id == "c1":
                    agent.approve("c1", {"a": 7, "b": 7}, decided_by="carol")
                else:
                    agent.deny("c2", "enough")

        agent.subscribe(recorder)
        agent.subscribe(decide)
        await agent.prompt("Add them, one at a time.")
    run = load_run(path)
    assert decisions(run.events) == [
        ("c1", True, None, "carol", {"a": 7, "b": 7}),
        ("c2", False, "enough", "user", None),
    ]
    assert [t.dest for t in run.transitions].count("awaiting_approval") == 2
    await identical(path)
    assert replay_script(path).runs[0].tool_execution == "sequential"


@pytest.mark.anyio
async def test_a_suspended_run_replays_up_to_where_it_waits(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with pytest.raises(RunSuspended) as caught:
        await record(
            path,
            [faux_response(tool_calls=[add_call(2, id="c1")])],
            tools=[add_tool(requires_approval=True)],
            decide_approval=lambda request, signal: None,  # no decision in this process
            journal={"store": MemoryRunStore(), "run_id": "r1"},
        )
    assert [r.tool_call_id for r in caught.value.pending] == ["c1"]
    run = load_run(path)
    assert run.end_reason is None and types(run)[-1] == "approval_requested"
    result = await replay_run(path, stall_timeout=STALL)
    assert result.ok, str(result)
    assert any("stops mid-run" in note for note in result.notes)


@pytest.mark.anyio
async def test_a_changed_decision_diverges_at_its_approval_decided_event(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    run = await approval_run(path)
    first = next(i for i, e in enumerate(run.events) if e.type == "approval_decided")

    # another approver: the same decisions replay identically, another one diverges at once
    recorded = {e.tool_call_id: e for e in run.events if e.type == "approval_decided"}

    def same(request: Any, signal: Any) -> ApprovalDecision:
        e = recorded[request.tool_call_id]
        return ApprovalDecision(
            approved=e.approved, reason=e.reason, decided_by=e.decided_by, args=e.args
        )

    assert (await replay_run(path, stall_timeout=STALL, decide_approval=same)).ok

    async def stricter(request: Any, signal: Any) -> bool:
        return bool(request.tool_call_id != "c3")  # c3 was approved (with other arguments)

    result = await replay_run(path, stall_timeout=STALL, decide_approval=stricter)
    divergence = result.divergence
    assert divergence is not None
    assert (divergence.kind, divergence.index) == ("event", first)
    assert divergence.expected == "approval_decided(add: approved)"
    assert divergence.got == "approval_decided(add: denied)"
    assert divergence.detail == "approved: expected true, got false"

    # an edited recording: the replay gives the edited decision, so the loop diverges at the
    # first event that follows from it (the call is answered with the denial at once)
    def deny(record: dict[str, Any]) -> None:
        record["event"].update(approved=False, reason="edited", args=None)

    edited = tmp_path / "edited.jsonl"
    at = edit(path, edited, event_of("approval_decided", toolCallId="c3"), deny)
    assert at == first
    result = await replay_run(edited, stall_timeout=STALL)
    divergence = result.divergence
    assert divergence is not None
    assert decisions(result.events)[0] == ("c3", False, "edited", "user", None)
    assert (divergence.kind, divergence.index) == ("event", first + 1)
    assert divergence.expected == "approval_decided(add: approved by alice)"
    assert divergence.got == "tool_execution_end(add: error)"


@pytest.mark.anyio
async def test_approved_arguments_the_tool_refused_are_noted(tmp_path: Path) -> None:
    # the stub tools accept any arguments, so this one call cannot be replayed: a note says so
    path = tmp_path / "run.jsonl"
    run = await record(
        path,
        [faux_response(tool_calls=[add_call(2, id="c1")]), faux_response("Refused.")],
        tools=[add_tool(requires_approval=True)],
        decide_approval=lambda request, signal: ApprovalDecision(
            approved=True, args={"a": "x", "b": 1}
        ),
    )
    end = next(e for e in run.events if e.type == "tool_execution_end")
    assert end.is_error and end.result.content[0].text.startswith(
        'Validation failed for tool "add"'
    )
    result = await replay_run(path, stall_timeout=STALL)
    assert result.notes == [
        "an approver's changed arguments were rejected by validation: the stub tools accept any "
        "arguments, so the replay runs that call instead"
    ]
    divergence = result.divergence
    assert divergence is not None and divergence.kind == "transition"
    assert divergence.expected == "awaiting_approval --approvals_settled--> turn_end"
    assert divergence.got == "awaiting_approval --approvals_settled--> executing"
