"""Recording a run to JSONL and reading it back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.declaration import declaration_names, load_declaration
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.events import (
    AGENT_EVENT_ADAPTER,
    AgentEndEvent,
    AgentStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    TurnStartEvent,
)
from agentcore_fsm.devtools.diagrams import view_of_recording
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.recorder import (
    RUN_FORMAT,
    RecordedRun,
    RunFileError,
    RunRecorder,
    describe_event,
    load_run,
    run_error,
    tool_errors,
)

MODEL = Model(id="faux-1", provider="faux", api="faux")


class Opaque:
    """Something JSON cannot carry (a tool may put anything in ``details``)."""

    def __repr__(self) -> str:
        return "<Opaque>"


def lookup_tool() -> AgentTool:
    async def execute(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        on_update(AgentToolResult(content=[TextContent(text="looking...")]))
        return AgentToolResult(
            content=[TextContent(text=f"{params['city']}: 21°C")], details={"raw": Opaque()}
        )

    return AgentTool(
        name="weather",
        description="The weather in a city.",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        execute=execute,
    )


def script() -> list[Any]:
    return [
        faux_response(
            "Let me look.",
            thinking="The user wants the weather.",
            tool_calls=[faux_tool_call("weather", {"city": "Lyon"})],
        ),
        faux_response("It is 21°C in Lyon."),
    ]


@pytest.mark.anyio
async def test_a_recorded_run_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    seen: list[Any] = []  # each event's JSON form at the moment it was emitted
    taken: list[TransitionRecord] = []

    with RunRecorder(path) as rec:

        def emit(event: Any) -> None:
            seen.append(event.model_dump(mode="json", by_alias=True, fallback=repr))
            rec(event)

        def on_transition(record: TransitionRecord) -> None:
            taken.append(record)
            rec.on_transition(record)

        await run_agent_loop(
            [UserMessage(content="Weather in Lyon?")],
            AgentContext(tools=[lookup_tool()]),
            AgentLoopConfig(model=MODEL),
            emit,
            stream_fn=FauxProvider(script(), chunk_size=4),
            on_transition=on_transition,
        )

    run = load_run(path)
    assert isinstance(run, RecordedRun)
    assert run.machine == "agent_loop"
    assert run.transitions == taken
    assert run.machines == {"agent_loop": taken}
    assert [e.model_dump(mode="json", by_alias=True) for e in run.events] == seen
    # validated back into the classes the loop emits
    assert type(run.events[0]) is AgentStartEvent
    assert isinstance(run.events[-1], AgentEndEvent)
    assert run.end_reason == "completed"
    kinds = {e.type for e in run.events}
    assert {"message_update", "tool_execution_update", "tool_execution_end"} <= kinds
    end = next(e for e in run.events if isinstance(e, ToolExecutionEndEvent))
    assert end.result.details == {"raw": "<Opaque>"}  # kept as its repr, the run went on
    # streamed partials were recorded as they were then, not as they ended up
    updates = [e for e in run.events if isinstance(e, MessageUpdateEvent)]
    texts = [json.dumps(u.model_dump(mode="json", by_alias=True)["message"]) for u in updates]
    assert len(set(texts)) > len(updates) // 2  # not one final message repeated
    first = updates[0].message  # thinking_start of the first answer: nothing thought yet
    assert first.content[0].thinking == ""
    # the camelCase wire form is what is stored
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert lines[0] == {
        "kind": "run",
        "format": RUN_FORMAT,
        "version": 2,
        "machine": "agent_loop",
        "surrogates": "escaped",
    }
    assert [x["seq"] for x in lines[1:]] == list(range(1, len(lines)))
    assert {x["kind"] for x in lines[1:]} == {"event", "transition"}
    assert any("toolCallId" in x["event"] for x in lines if x["kind"] == "event")
    # the in-memory side agrees
    assert rec.transitions == taken
    assert rec.end_reason == "completed"
    assert rec.events == []  # a file recorder does not keep events in memory by default
    assert rec.event_count == len(seen)
    # and it renders: the recorded path is the one taken
    _, view = view_of_recording(path)
    assert view.path == tuple((r.index, r.source, r.dest) for r in taken)


@pytest.mark.anyio
async def test_a_memory_recorder_keeps_events(tmp_path: Path) -> None:
    rec = RunRecorder(updates=False)
    await run_agent_loop(
        [UserMessage(content="Weather in Lyon?")],
        AgentContext(tools=[lookup_tool()]),
        AgentLoopConfig(model=MODEL),
        rec,
        stream_fn=FauxProvider(script()),
        on_transition=rec.on_transition,
    )
    assert rec.events and not any(e.type == "message_update" for e in rec.events)
    assert rec.event_count == len(rec.events)
    recorded = rec.recorded()
    assert recorded.events == rec.events and recorded.transitions == rec.transitions
    assert recorded.end_reason == "completed"
    assert rec.transitions[0] == TransitionRecord(0, "start", "idle", "awaiting_steering")
    with pytest.raises(ValueError, match="closed"):
        rec._write({"kind": "event"})


def test_it_is_an_agent_listener_and_records_other_machines(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with RunRecorder(path) as rec:
        rec(AgentStartEvent(), None)  # listener(event, signal)
        rec({"type": "turn_start"})  # a dict is validated first
        rec.transition_callback("agent")(TransitionRecord(0, "start", "idle", "running"))
        rec.on_transition(TransitionRecord(0, "start", "idle", "awaiting_steering"))
        rec(AgentEndEvent(reason="aborted"))
    run = load_run(path)
    assert [type(e) for e in run.events] == [AgentStartEvent, TurnStartEvent, AgentEndEvent]
    assert run.machines == {
        "agent_loop": [TransitionRecord(0, "start", "idle", "awaiting_steering")],
        "agent": [TransitionRecord(0, "start", "idle", "running")],
    }
    assert run.end_reason == "aborted"
    with pytest.raises(TypeError, match="not an agent event"):
        RunRecorder()(object())


@pytest.mark.skipif("agent" not in declaration_names(), reason="states/agent.toml not declared")
def test_a_recorded_agent_lifecycle_renders(tmp_path: Path) -> None:
    decl = load_declaration("agent")
    first = next(t for t in decl.transitions if decl.initial in t.source)
    path = tmp_path / "agent.jsonl"
    with RunRecorder(path, machine="agent") as rec:
        rec.on_transition(TransitionRecord(first.index, first.trigger, decl.initial, first.dest))
    decl2, view = view_of_recording(path, "agent")
    assert decl2 is decl
    assert view.state == first.dest and view.counts == {(first.index, decl.initial): 1}


def write_lines(path: Path, *lines: Any) -> Path:
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines),
        encoding="utf-8",
    )
    return path


HEADER = {"kind": "run", "format": RUN_FORMAT, "version": 1, "machine": "agent_loop"}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ((), "empty file"),
        (("{not json",), ":1: not JSON"),
        (([1, 2],), ":1: expected a JSON object with a 'kind'"),
        (({"kind": "event", "event": {"type": "agent_start"}},), ":1: the file does not start"),
        (({**HEADER, "format": "other"},), ":1: not an agentcore-fsm run"),
        (({**HEADER, "version": 3},), ":1: run format version 3 is not supported"),
        ((HEADER, HEADER), ":2: a second 'run' header"),
        ((HEADER, {"kind": "event", "event": {"type": "nope"}}), ":2: invalid event"),
        ((HEADER, {"kind": "event"}), ":2: an event record without 'event'"),
        ((HEADER, {"kind": "transition", "machine": "agent_loop"}), ":2: invalid transition"),
        (
            (
                HEADER,
                {
                    "kind": "transition",
                    "machine": "m",
                    "index": "0",
                    "trigger": "t",
                    "source": "a",
                    "dest": "b",
                },
            ),
            "'index' must be int",
        ),
        ((HEADER, {"kind": "mystery"}), ":2: unknown record kind 'mystery'"),
    ],
)
def test_load_run_says_what_is_wrong(tmp_path: Path, lines: tuple[Any, ...], message: str) -> None:
    path = write_lines(tmp_path / "bad.jsonl", *lines)
    with pytest.raises(RunFileError) as info:
        load_run(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_blank_lines_are_ignored_and_events_validate_camel_case(tmp_path: Path) -> None:
    event = {
        "type": "tool_execution_end",
        "toolCallId": "c1",
        "toolName": "weather",
        "result": {"content": [{"type": "text", "text": "ok"}], "isError": False},
        "isError": False,
    }
    path = write_lines(tmp_path / "ok.jsonl", HEADER, "", {"kind": "event", "event": event}, "")
    run = load_run(path)
    assert len(run.events) == 1
    assert run.events[0] == AGENT_EVENT_ADAPTER.validate_python(event)
    assert run.events[0].tool_call_id == "c1"
    assert run.transitions == [] and run.end_reason is None


@pytest.mark.anyio
async def test_it_records_an_agent_as_a_listener(tmp_path: Path) -> None:
    from agentcore_fsm import Agent

    path = tmp_path / "agent.jsonl"
    seen: list[Any] = []
    agent = Agent(tools=[lookup_tool()], stream_fn=FauxProvider(script()))
    with RunRecorder(path, updates=False) as rec:
        agent.subscribe(rec)  # called as rec(event, signal)
        agent.subscribe(
            lambda event, signal: seen.append(
                event.model_dump(mode="json", by_alias=True, fallback=repr)
            )
        )
        await agent.prompt("Weather in Lyon?")
    run = load_run(path)
    expected = [e for e in seen if e["type"] != "message_update"]
    assert [e.model_dump(mode="json", by_alias=True) for e in run.events] == expected
    assert run.end_reason == "completed"
    assert rec.event_count == len(expected)


# --- hostile text and failing files ---------------------------------------------------------

LONE_HIGH = json.loads('"\\ud83d"')  # what a provider's JSON gives for half an emoji
LONE_LOW = json.loads('"\\udc00"')
SPLIT_PAIR = LONE_HIGH + json.loads('"\\ude00"')  # two code points, as two stream deltas leave it
HOSTILE_TEXT = f"half {LONE_HIGH}, low {LONE_LOW}, split {SPLIT_PAIR}, whole \U0001f600, °"
HOSTILE_ARGS = {"q": f"x{LONE_HIGH}", LONE_LOW: [SPLIT_PAIR, "\U0001f600"]}


def echo_tool() -> AgentTool:
    async def execute(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text=f"got {params['q']}")])

    return AgentTool(
        name="echo",
        description="Echo q.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
        execute=execute,
    )


async def record_hostile_run(rec: RunRecorder, seen: list[Any]) -> list[Any]:
    def emit(event: Any) -> None:
        # (pydantic's JSON mode cannot dump a dict key that is a lone surrogate)
        seen.append(event.model_dump(mode="python", by_alias=True))
        rec(event)

    script = [
        faux_response(HOSTILE_TEXT, tool_calls=[faux_tool_call("echo", HOSTILE_ARGS)]),
        faux_response(f"done {LONE_HIGH}"),
    ]
    return await run_agent_loop(
        [UserMessage(content=f"hi {LONE_LOW}")],
        AgentContext(tools=[echo_tool()]),
        AgentLoopConfig(model=MODEL),
        emit,
        stream_fn=FauxProvider(script, chunk_size=3),
        on_transition=rec.on_transition,
    )


@pytest.mark.anyio
async def test_lone_surrogates_are_recorded_losslessly(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    seen: list[Any] = []
    with RunRecorder(path) as rec:
        messages = await record_hostile_run(rec, seen)
    assert rec.error is None
    assert messages[-1].stop_reason == "stop" and rec.end_reason == "completed"
    run = load_run(path)
    assert run.end_reason == "completed"
    assert [e.model_dump(mode="python", by_alias=True) for e in run.events] == seen
    first = next(e for e in run.events if e.type == "message_end" and e.message.role == "assistant")
    assert first.message.content[0].text == HOSTILE_TEXT  # the same code points, none merged
    start = next(e for e in run.events if e.type == "tool_execution_start")
    assert start.args == HOSTILE_ARGS
    assert run.events[-1].messages[-1].content[0].text == f"done {LONE_HIGH}"
    # the file is plain UTF-8 that any JSON reader takes; readable text stays as it is
    text = path.read_bytes().decode("utf-8")
    assert "\\uD83D" in text and "°" in text and "\U0001f600" in text
    for line in text.splitlines():
        json.loads(line)


def test_escaped_pairs_of_other_writers_are_one_character(tmp_path: Path) -> None:
    # a file written by another tool (plain json.dumps) means what JSON says: a pair escaped
    # as two escapes is one character
    event = {"type": "agent_end", "messages": [], "reason": "completed"}
    user = {"role": "user", "content": "\U0001f600", "timestamp": 1}
    event["messages"] = [user]
    path = write_lines(tmp_path / "other.jsonl", HEADER, {"kind": "event", "event": event})
    assert "\\ud83d\\ude00" in path.read_text(encoding="utf-8")
    assert load_run(path).events[0].messages[0].content == "\U0001f600"


class ClosedUnderneath:
    """Closes the recorder's file after ``after`` records, as if something else closed it."""

    def __init__(self, rec: RunRecorder, after: int) -> None:
        self.rec, self.after, self.count = rec, after, 0

    def __call__(self, event: Any) -> None:
        self.count += 1
        if self.count == self.after:
            assert rec_file(self.rec) is not None
            rec_file(self.rec).close()
        self.rec(event)


def rec_file(rec: RunRecorder) -> Any:
    return rec._file


@pytest.mark.anyio
async def test_a_file_closed_underneath_does_not_break_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "run.jsonl"
    with RunRecorder(path) as rec:
        emit = ClosedUnderneath(rec, after=4)
        messages = await run_agent_loop(
            [UserMessage(content="Weather in Lyon?")],
            AgentContext(tools=[lookup_tool()]),
            AgentLoopConfig(model=MODEL),
            emit,
            stream_fn=FauxProvider(script()),
            on_transition=rec.on_transition,
        )
    assert messages[-1].stop_reason == "stop"  # the run ended normally
    assert rec.end_reason == "completed" and rec.transitions[-1].dest == "stopped"
    assert isinstance(rec.error, ValueError)
    assert any(r.name == "agentcore_fsm" and str(path) in r.getMessage() for r in caplog.records)
    run = load_run(path)  # what was written before is a well-formed recording
    assert len(run.events) == 3 and run.events[0].type == "agent_start"


class DiskFills:
    """A file that takes ``budget`` bytes, then writes part of a line and fails (disk full)."""

    def __init__(self, inner: Any, budget: int) -> None:
        self.inner, self.budget = inner, budget

    def write(self, data: Any) -> int:
        if self.budget <= 0:
            raise OSError(28, "No space left on device")
        n = min(len(data), self.budget)
        self.budget -= n
        written: int = self.inner.write(bytes(data[:n]))
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.anyio
async def test_a_full_disk_does_not_break_the_run_and_leaves_whole_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "run.jsonl"
    seen: list[Any] = []
    with RunRecorder(path) as rec:
        header = path.stat().st_size
        rec._file = DiskFills(rec._file, budget=header + 700)
        messages = await record_hostile_run(rec, seen)
    assert messages[-1].stop_reason == "stop"
    assert rec.end_reason == "completed" and rec.event_count == len(seen)
    assert isinstance(rec.error, OSError)
    assert "No space left on device" in caplog.text
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")  # the line cut short was taken back
    run = load_run(path)
    assert 0 < len(run.events) < len(seen)
    loaded = [e.model_dump(mode="python", by_alias=True) for e in run.events]
    assert loaded == seen[: len(run.events)]


def test_an_event_that_cannot_be_serialised_is_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    deep: Any = "bottom"
    for _ in range(100_000):  # deeper than any serialiser goes
        deep = [deep]
    path = tmp_path / "deep.jsonl"
    with RunRecorder(path, keep_events=True) as rec:
        rec(AgentStartEvent())
        rec(ToolExecutionStartEvent(tool_call_id="c1", tool_name="t", args={"deep": deep}))
        rec(AgentEndEvent(reason="completed"))
    assert rec.error is None and rec.end_reason == "completed"
    assert "tool_execution_start" in caplog.text
    kept = ["agent_start", "tool_execution_start", "agent_end"]
    assert [e.type for e in rec.events] == kept  # in memory nothing needs serialising
    run = load_run(path)
    assert [e.type for e in run.events] == ["agent_start", "agent_end"]


def test_a_file_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    body = '{"kind": "event", "event": {"type": "agent_start"}, "note": "café"}\n'
    path.write_bytes((json.dumps(HEADER) + "\n").encode() + body.encode("latin-1"))
    with pytest.raises(RunFileError) as info:
        load_run(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2: not UTF-8")
    assert "0xe9" in message


def test_a_nested_too_deeply_line_is_a_run_file_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(HEADER) + "\n" + "[" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(RunFileError, match=":2: "):
        load_run(path)


def test_values_json_cannot_carry_keep_the_file_strict_json(tmp_path: Path) -> None:
    path = tmp_path / "nan.jsonl"
    result = AgentToolResult(
        content=[TextContent(text="ok")],
        details={"nan": float("nan"), "inf": [float("inf")], "raw": Opaque()},
    )
    with RunRecorder(path) as rec:
        rec(ToolExecutionEndEvent(tool_call_id="c1", tool_name="t", result=result, is_error=False))

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} is not JSON")

    line = path.read_text(encoding="utf-8").splitlines()[1]
    assert json.loads(line, parse_constant=refuse)["event"]["result"]["details"] == {
        "nan": None,
        "inf": [None],
        "raw": "<Opaque>",
    }
    assert load_run(path).events[0].result.details["raw"] == "<Opaque>"


# --- what went wrong, read back -----------------------------------------------------------------


def failing_weather() -> AgentTool:
    async def execute(call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        raise ValueError(f"no weather for {params['city']}")

    return AgentTool(
        name="weather",
        description="The weather in a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        execute=execute,
    )


async def record(path: Path, responses: list[Any], tool: AgentTool) -> list[TransitionRecord]:
    taken: list[TransitionRecord] = []
    with RunRecorder(path, updates=False) as rec:

        def on_transition(record: TransitionRecord) -> None:
            taken.append(record)
            rec.on_transition(record)

        await run_agent_loop(
            [UserMessage(content="Weather in Lyon?")],
            AgentContext(tools=[tool]),
            AgentLoopConfig(model=MODEL),
            rec,
            stream_fn=FauxProvider(responses),
            on_transition=on_transition,
        )
    return taken


@pytest.mark.anyio
async def test_the_order_of_records_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    taken = await record(path, script(), lookup_tool())
    run = load_run(path)
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()[1:]]
    assert [("event" if who is None else "transition") for who, _ in run.order] == [
        line["kind"] for line in lines
    ]
    assert [run.machines[w][i] for w, i in run.order if w is not None] == taken
    after = run.events_after()
    assert len(after) == len(taken)
    assert [e for events in after for e in events] == run.events  # each event once, in order
    assert after[-1][-1].type == "agent_end"
    # the same from a live recorder that keeps its events
    rec = RunRecorder(updates=False)
    rec.on_transition(TransitionRecord(0, "start", "idle", "awaiting_steering"))
    rec(AgentStartEvent())
    rec(TurnStartEvent())
    recorded = rec.recorded()
    assert recorded.order == [("agent_loop", 0), (None, 0), (None, 1)]
    assert recorded.events_after() == [recorded.events]
    assert RecordedRun(machine="agent_loop").events_after() == []


@pytest.mark.anyio
async def test_a_clean_recording_has_no_error(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await record(path, script(), lookup_tool())
    run = load_run(path)
    assert run.error is None and run.tool_errors == []
    assert run.summary().splitlines() == [
        f"agent_loop: {len(run.transitions)} transitions, {len(run.events)} events",
        "ended: completed",
    ]


@pytest.mark.anyio
async def test_a_recording_says_why_it_failed(tmp_path: Path) -> None:
    from agentcore_fsm.integrations.providers.faux import FauxError

    path = tmp_path / "run.jsonl"
    responses = [script()[0], FauxError("the model is overloaded")]
    await record(path, responses, failing_weather())
    run = load_run(path)
    assert run.end_reason == "error"
    assert run.error == "the model is overloaded"
    assert run.tool_errors == ["weather: no weather for Lyon"]
    summary = run.summary().splitlines()
    assert summary[1] == "ended: error: the model is overloaded"
    assert summary[2] == "tool errors (1): weather: no weather for Lyon"
    # and the run diagram says it too
    _, view = view_of_recording(run)
    assert view.error == "the model is overloaded" and view.outcome == "error"


@pytest.mark.anyio
async def test_a_recording_that_completed_despite_a_tool_error(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await record(path, script(), failing_weather())
    run = load_run(path)
    assert run.end_reason == "completed" and run.error is None
    assert run.tool_errors == ["weather: no weather for Lyon"]
    assert run.summary().splitlines()[1:] == [
        "ended: completed",
        "tool errors (1): weather: no weather for Lyon",
    ]


def test_a_recording_cut_short_has_no_end() -> None:
    run = RecordedRun(machine="agent_loop", events=[AgentStartEvent()])
    assert run.end_reason is None and run.error is None
    assert run.summary().splitlines()[1] == "ended: no agent_end recorded"
    other = RecordedRun(
        machine="agent_loop",
        machines={"agent_loop": [], "agent": [TransitionRecord(0, "start", "idle", "running")]},
    )
    assert other.summary().splitlines()[0] == (
        "agent_loop: 0 transitions, 0 events (and 1 transition of agent)"
    )


def test_run_error_and_tool_errors_of_messages() -> None:
    from agentcore_fsm import AssistantMessage, ToolResultMessage

    failed = AssistantMessage(stop_reason="error", error_message="HTTP 500")
    aborted = AssistantMessage(stop_reason="aborted", error_message=None)
    tool = ToolResultMessage(
        tool_call_id="c1", tool_name="add", content=[TextContent(text="bad")], is_error=True
    )
    good = ToolResultMessage(tool_call_id="c2", tool_name="add", content=[TextContent(text="3")])
    user = UserMessage(content="hi")
    assert run_error([user, failed], "error") == "HTTP 500"
    assert run_error([user, failed], None) == "HTTP 500"  # the end is unknown, the text is not
    assert run_error([user, failed], "completed") is None
    assert run_error([user, aborted], "aborted") == "the model call ended with 'aborted'"
    assert run_error([user, AssistantMessage(), tool], "aborted") == "add: bad"
    assert run_error([user], "error") == "the run ended with reason 'error'"
    assert run_error([user, AssistantMessage()], None) is None
    assert tool_errors([user, good, tool, tool]) == ["add: bad", "add: bad"]


def test_describe_event() -> None:
    from agentcore_fsm import AssistantMessage
    from agentcore_fsm.core.events import MessageEndEvent

    assert describe_event(TurnStartEvent()) == "turn_start"
    end = MessageEndEvent(message=AssistantMessage(stop_reason="error", error_message="x"))
    assert describe_event(end) == "message_end(assistant: error)"
    assert describe_event(AgentEndEvent(reason="aborted")) == "agent_end(aborted)"
    started = ToolExecutionStartEvent(tool_call_id="c", tool_name="add", args={})
    assert describe_event(started) == "tool_execution_start(add)"
    ended = ToolExecutionEndEvent(
        tool_call_id="c", tool_name="add", result=AgentToolResult(content=[]), is_error=True
    )
    assert describe_event(ended) == "tool_execution_end(add: error)"


# --- clock readings and approvals -----------------------------------------------------------


def test_describe_the_approval_events() -> None:
    from agentcore_fsm.core.events import ApprovalDecidedEvent, ApprovalRequestedEvent

    asked = ApprovalRequestedEvent(tool_call_id="c", tool_name="pay", args={"eur": 5})
    assert describe_event(asked) == "approval_requested(pay)"

    def decided(approved: bool, by: str = "user") -> str:
        event = ApprovalDecidedEvent(
            tool_call_id="c", tool_name="pay", approved=approved, decided_by=by
        )
        return describe_event(event)

    assert decided(True) == "approval_decided(pay: approved)"
    assert decided(False) == "approval_decided(pay: denied)"
    assert decided(False, "timeout") == "approval_decided(pay: denied by timeout)"
    assert decided(True, "the finance team of the north") == (
        "approval_decided(pay: approved by the finance team of the…)"
    )


def test_durations_for_a_person() -> None:
    from agentcore_fsm.persist.recorder import duration_text

    assert [duration_text(s) for s in (0, 0.04, 2.34, 59.94, 250, 7500, 277_000)] == [
        "0.00 s",
        "0.04 s",
        "2.3 s",
        "59.9 s",
        "4 min 10 s",
        "2 h 5 min",
        "3 d 4 h",
    ]


async def approval_recording(path: Path) -> None:
    """Three weather calls that need approval: c1 approved by alice, c2 denied, c3 with no
    decision in time (approval_timeout_s)."""

    async def decide(request: Any, signal: Any) -> Any:
        if request.tool_call_id == "c1":
            return {"approved": True, "decided_by": "alice"}
        if request.tool_call_id == "c2":
            return {"approved": False, "reason": "too far"}
        await anyio.sleep_forever()

    tool = lookup_tool()
    tool.requires_approval = True
    calls = [
        faux_tool_call("weather", {"city": c}, id=i)
        for c, i in zip("ABC", ("c1", "c2", "c3"), strict=True)
    ]
    with RunRecorder(path) as rec:
        await run_agent_loop(
            [UserMessage(content="Weather in A, B and C?")],
            AgentContext(tools=[tool]),
            AgentLoopConfig(model=MODEL, decide_approval=decide, approval_timeout_s=0.05),
            rec,
            stream_fn=FauxProvider([faux_response(tool_calls=calls), faux_response("One.")]),
            on_transition=rec.on_transition,
        )


@pytest.mark.anyio
async def test_every_record_keeps_its_clock_reading(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await approval_recording(path)
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    run = load_run(path)
    assert len(run.times) == len(run.order) == len(lines) - 1  # all but the header
    assert run.times == [line["t"] for line in lines[1:]]
    readings = [t for t in run.times if isinstance(t, float)]
    assert readings == run.times and readings == sorted(readings)
    assert run.last_time == lines[-1]["t"]
    assert run.transition_times() == [line["t"] for line in lines if line["kind"] == "transition"]
    assert run.transition_times("agent") == []
    # a live recorder keeps the same readings it writes
    rec = RunRecorder(updates=False)
    rec.on_transition(TransitionRecord(0, "start", "idle", "awaiting_steering"))
    rec(AgentStartEvent())
    recorded = rec.recorded()
    first, second = recorded.times
    assert first is not None and second is not None and first <= second
    assert recorded.transition_times() == recorded.times[:1]


@pytest.mark.anyio
async def test_approvals_are_read_back_and_summed_up(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await approval_recording(path)
    # the readings set by hand: each request at 1.0 s, each decision 2.5 s later
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    for line in lines[1:]:
        kind = line.get("event", {}).get("type")
        line["t"] = 3.5 if kind == "approval_decided" else 1.0
    timed = tmp_path / "timed.jsonl"
    timed.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    run = load_run(timed)
    approvals = {a.tool_call_id: a for a in run.approvals}
    assert sorted(approvals) == ["c1", "c2", "c3"]
    assert [(a.tool_name, a.args, a.reason) for a in run.approvals] == [
        ("weather", {"city": city}, 'Tool "weather" requires approval') for city in "ABC"
    ]
    assert {k: (a.decision.approved, a.decision.decided_by) for k, a in approvals.items()} == {
        "c1": (True, "alice"),
        "c2": (False, "user"),
        "c3": (False, "timeout"),
    }
    assert {a.waited for a in run.approvals} == {2.5}
    assert approvals["c1"].text() == "weather approved by alice after 2.5 s"
    assert approvals["c2"].text() == "weather denied by user: too far after 2.5 s"
    summary = run.summary().splitlines()
    assert summary[-1].startswith("approvals (3): ")
    assert sorted(summary[-1].removeprefix("approvals (3): ").split("; ")) == [
        "weather approved by alice after 2.5 s",
        "weather denied by timeout: no decision within 0.05 s after 2.5 s",
        "weather denied by user: too far after 2.5 s",
    ]
    # a recording without readings (and one that stops before a decision) says less
    bare = tmp_path / "bare.jsonl"
    cut = next(
        n for n, x in enumerate(lines) if x.get("event", {}).get("type") == "approval_decided"
    )
    bare.write_text(
        "".join(json.dumps({k: v for k, v in x.items() if k != "t"}) + "\n" for x in lines[:cut]),
        encoding="utf-8",
    )
    stopped = load_run(bare)
    assert stopped.times == [None] * len(stopped.order) and stopped.last_time is None
    assert [a.text() for a in stopped.approvals] == ["weather waiting (no decision recorded)"] * 3
    assert stopped.approvals[0].waited is None
    assert stopped.summary().splitlines()[-1] == (
        "approvals (3): " + "; ".join(["weather waiting (no decision recorded)"] * 3)
    )
