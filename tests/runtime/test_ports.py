"""The runtime's ports (docs/ports.md): the run-observer port and the journal port.

An observer sees a run's start and end, each input with its step and transitions, each event,
each effect with its duration and outcome, and wraps the model call and each tool execution
(the stream function and the tool run inside its context); one that raises is logged and
ignored. A journal gets the header once, the entries in order, one append at a time, every
entry that led to a non-idempotent tool before the tool starts, and the end; one that fails
ends the run once, as data. Both backends.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import anyio
import pytest

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    Model,
    TextContent,
    UserMessage,
    agent_loop,
    run_agent_loop,
)
from agentcore_fsm.core.declared import TransitionRecord
from agentcore_fsm.core.protocol import (
    CallModel,
    Effect,
    ExecuteTool,
    Input,
    Start,
    Step,
    StreamEvent,
    ToolFinished,
)
from agentcore_fsm.devtools.testing import EventRecorder, check_run
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.persist.journal import JournaledLoopMachine
from agentcore_fsm.runtime import observer as observer_module
from agentcore_fsm.runtime.driver import run_machine
from agentcore_fsm.runtime.observer import (
    ModelRequest,
    RunObserver,
    RunStart,
    RunWatch,
    register_observer,
    registered_observers,
    unregister_observer,
)

pytestmark = pytest.mark.anyio

MODEL = Model(id="faux-1", provider="faux", api="faux-api")
OBJECT: dict[str, Any] = {"type": "object"}
WHERE: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="outside")


def script() -> FauxProvider:
    calls = [faux_tool_call("aio", {"n": 1}, id="c1"), faux_tool_call("sync", {"n": 2}, id="c2")]
    return FauxProvider([faux_response("tools", tool_calls=calls), faux_response("done")])


class Tools:
    """An async tool and a plain one (it runs in a worker thread); each notes the context
    variable it sees."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}
        self.threads: dict[str, int] = {}

    def tools(self) -> list[AgentTool]:
        async def aio(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
            self.seen[call_id] = WHERE.get()
            await anyio.lowlevel.checkpoint()
            return AgentToolResult(content=[TextContent(text="a")])

        def sync(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
            self.seen[call_id] = WHERE.get()
            self.threads[call_id] = threading.get_ident()
            return AgentToolResult(content=[TextContent(text="s")])

        return [AgentTool("aio", "", OBJECT, aio), AgentTool("sync", "", OBJECT, sync)]


@contextmanager
def where(name: str) -> Iterator[None]:
    token = WHERE.set(name)
    try:
        yield
    finally:
        WHERE.reset(token)


class Watcher(RunObserver):
    """Notes everything it is told, and sets the context variable in its context managers."""

    def __init__(self) -> None:
        self.runs: list[RunStart] = []
        self.log: list[Any] = []
        self.inputs: list[tuple[Input, Step, list[TransitionRecord]]] = []
        self.events: list[Any] = []
        self.effects: list[tuple[Effect, float, Input | None]] = []
        self.ended: list[BaseException | None] = []
        self.stream_saw: list[str] = []

    def observe_run(self, run: RunStart) -> RunObserver:
        self.runs.append(run)
        return self

    def run_context(self) -> AbstractContextManager[Any]:
        return where("run")

    def input_fed(self, input: Input, step: Step, transitions: Sequence[TransitionRecord]) -> None:
        self.inputs.append((input, step, list(transitions)))

    def event(self, event: Any) -> None:
        self.events.append(event)

    def effect_performed(self, effect: Effect, seconds: float, outcome: Input | None) -> None:
        self.effects.append((effect, seconds, outcome))

    def model_call(self, request: ModelRequest) -> AbstractContextManager[Any]:
        self.log.append(("model_call", request.model.id, len(request.context.messages)))
        return where("model call")

    def tool_execution(self, effect: ExecuteTool) -> AbstractContextManager[Any]:
        return where(f"tool {effect.tool_call.id}")

    def run_ended(self, error: BaseException | None) -> None:
        self.ended.append(error)


async def test_an_observer_sees_the_whole_run(anyio_backend: str) -> None:
    watcher, tools, recorder = Watcher(), Tools(), EventRecorder()
    faux = script()
    stream_saw: list[str] = []

    def stream_fn(model: Any, context: Any, options: Any) -> Any:
        stream_saw.append(WHERE.get())  # the call runs inside the model-call context

        async def stream() -> Any:
            async for event in faux(model, context, options):
                stream_saw.append(WHERE.get())  # and so does the iteration
                yield event

        return stream()

    transitions: list[TransitionRecord] = []
    messages = await run_agent_loop(
        ["go"],
        AgentContext(tools=tools.tools()),
        AgentLoopConfig(model=MODEL),
        recorder,
        stream_fn=stream_fn,
        on_transition=transitions.append,
        observers=[watcher],
    )
    check_run(recorder.events, messages)
    (run,) = watcher.runs
    assert run.run_id is None and not run.resumed and run.config.model == MODEL
    assert watcher.ended == [None]
    # every event, as the listener got it; the inputs from Start on, with every transition
    assert watcher.events == recorder.events
    assert type(watcher.inputs[0][0]) is Start
    assert [t for _, _, ts in watcher.inputs for t in ts] == transitions
    assert [e for _, step, _ in watcher.inputs for e in step.events] == [
        e for e in recorder.events if e.type != "message_update"
    ]
    # two model calls, each timed, each with the input that ended its stream
    calls = [(e, s, o) for e, s, o in watcher.effects if isinstance(e, CallModel)]
    assert len(calls) == 2 and all(s >= 0 for _, s, _ in calls)
    assert [type(o) for _, _, o in calls] == [StreamEvent, StreamEvent]
    assert watcher.log == [("model_call", "faux-1", 1), ("model_call", "faux-1", 4)]
    assert set(stream_saw) == {"model call"}
    # each tool ran inside its own context (the plain one in a worker thread), and its outcome
    # is the result it gave
    assert tools.seen == {"c1": "tool c1", "c2": "tool c2"}
    assert tools.threads["c2"] != threading.get_ident()
    outcomes = {e.tool_call.id: o for e, _, o in watcher.effects if isinstance(e, ExecuteTool)}
    assert set(outcomes) == {"c1", "c2"}
    assert all(isinstance(o, ToolFinished) and o.error is None for o in outcomes.values())


async def test_an_aborted_tool_has_no_outcome_and_a_cut_model_call_neither(
    anyio_backend: str,
) -> None:
    watcher = Watcher()
    controller = AbortController()

    async def stuck(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        controller.abort()
        await anyio.sleep_forever()

    await run_agent_loop(
        ["go"],
        AgentContext(tools=[AgentTool("stuck", "", OBJECT, stuck)]),
        AgentLoopConfig(model=MODEL),
        stream_fn=FauxProvider([faux_response(tool_calls=[faux_tool_call("stuck", id="c1")])]),
        signal=controller.signal,
        observers=[watcher],
    )
    ((effect, _, outcome),) = [x for x in watcher.effects if isinstance(x[0], ExecuteTool)]
    assert effect.tool_call.id == "c1" and outcome is None
    assert watcher.events[-1].type == "agent_end" and watcher.events[-1].reason == "aborted"

    cut = Watcher()
    controller = AbortController()

    def abort_at_first_delta(event: Any) -> None:
        if event.type == "message_update":
            controller.abort()

    await run_agent_loop(
        ["go"],
        AgentContext(),
        AgentLoopConfig(model=MODEL),
        abort_at_first_delta,
        stream_fn=FauxProvider([faux_response("a long answer")]),
        signal=controller.signal,
        observers=[cut],
    )
    ((_, _, outcome),) = [x for x in cut.effects if isinstance(x[0], CallModel)]
    assert outcome is None


class Raising(RunObserver):
    """Raises in every method and in its context managers."""

    def __init__(self, where: str) -> None:
        self.where = where

    def observe_run(self, run: RunStart) -> RunObserver:
        if self.where == "observe_run":
            raise RuntimeError("observe_run broke")
        return self

    def run_context(self) -> AbstractContextManager[Any]:
        return self.broken("run_context")

    @contextmanager
    def broken(self, name: str) -> Iterator[None]:
        if self.where == "enter":
            raise RuntimeError(f"{name} broke on enter")
        yield
        raise RuntimeError(f"{name} broke on exit")

    def input_fed(self, input: Input, step: Step, transitions: Sequence[TransitionRecord]) -> None:
        raise RuntimeError("input_fed broke")

    def event(self, event: Any) -> None:
        raise RuntimeError("event broke")

    def effect_performed(self, effect: Effect, seconds: float, outcome: Input | None) -> None:
        raise RuntimeError("effect_performed broke")

    def model_call(self, request: ModelRequest) -> AbstractContextManager[Any]:
        return self.broken("model_call")

    def tool_execution(self, effect: ExecuteTool) -> AbstractContextManager[Any]:
        return self.broken("tool_execution")

    def run_ended(self, error: BaseException | None) -> None:
        raise RuntimeError("run_ended broke")


@pytest.mark.parametrize("where_", ["observe_run", "enter", "exit"])
async def test_an_observer_that_raises_is_logged_and_ignored(
    anyio_backend: str, where_: str, caplog: pytest.LogCaptureFixture
) -> None:
    plain, tools_plain = EventRecorder(), Tools()
    await run_agent_loop(
        ["go"],
        AgentContext(tools=tools_plain.tools()),
        AgentLoopConfig(model=MODEL),
        plain,
        stream_fn=script(),
    )
    watched, tools, witness = EventRecorder(), Tools(), Watcher()
    with caplog.at_level(logging.ERROR, logger="agentcore_fsm"):
        messages = await run_agent_loop(
            ["go"],
            AgentContext(tools=tools.tools()),
            AgentLoopConfig(model=MODEL),
            watched,
            stream_fn=script(),
            observers=[Raising(where_), witness],
        )
    check_run(watched.events, messages)
    assert [e.type for e in watched.events] == [e.type for e in plain.events]
    assert witness.events == watched.events and witness.ended == [None]  # the others go on
    logged = [r.getMessage() for r in caplog.records]
    assert logged and all("a run observer" in line and "ignored" in line for line in logged)
    if where_ == "exit":
        assert any("__exit__" in line for line in logged)


async def test_registered_observers_watch_runs_until_unregistered(anyio_backend: str) -> None:
    every, asked = Watcher(), Watcher()
    register_observer(every)
    register_observer(asked, always=False)
    try:
        assert every in registered_observers() and asked not in registered_observers()
        assert asked in registered_observers(requested=True)
        await run_agent_loop(
            ["a"], AgentContext(), AgentLoopConfig(model=MODEL), stream_fn=script()
        )
        await run_agent_loop(
            ["b"],
            AgentContext(),
            AgentLoopConfig(model=MODEL),
            stream_fn=FauxProvider([faux_response("x")]),
            instrument=True,
        )
        await run_agent_loop(
            ["c"],
            AgentContext(),
            AgentLoopConfig(model=MODEL),
            stream_fn=FauxProvider([faux_response("x")]),
            instrument=False,
        )
        only = Watcher()
        await run_agent_loop(
            ["d"],
            AgentContext(),
            AgentLoopConfig(model=MODEL),
            stream_fn=FauxProvider([faux_response("x")]),
            instrument=only,
        )
        async with agent_loop(
            ["e"],
            AgentContext(),
            AgentLoopConfig(model=MODEL),
            stream_fn=FauxProvider([faux_response("x")]),
        ) as events:
            async for _ in events:
                pass
    finally:
        unregister_observer(every)
        unregister_observer(asked)
    assert every not in registered_observers(requested=True)

    def prompts(watcher: Watcher) -> list[str]:
        return [r.machine.prompts[0].content[0].text for r in watcher.runs]  # type: ignore[union-attr]

    assert prompts(every) == ["a", "b", "e"]
    assert prompts(asked) == ["b"]
    assert prompts(only) == ["d"]


async def test_a_run_without_observers_makes_none(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any) -> Any:
        raise AssertionError("a run without observers asked for them")

    monkeypatch.setattr(RunWatch, "start", refuse)
    messages = await run_agent_loop(
        ["go"],
        AgentContext(tools=Tools().tools()),
        AgentLoopConfig(model=MODEL),
        stream_fn=script(),
        instrument=False,
    )
    assert messages[-1].text() == "done"


def test_bad_observer_settings_are_refused_up_front() -> None:
    async def run(**keywords: Any) -> Any:
        return await run_agent_loop(
            ["go"],
            AgentContext(),
            AgentLoopConfig(model=MODEL),
            stream_fn=FauxProvider([faux_response("x")]),
            **keywords,
        )

    with pytest.raises(
        TypeError, match=r"observers: an observer must be an .*RunObserver, not int"
    ):
        anyio.run(lambda: run(observers=[3]))
    with pytest.raises(TypeError, match="observers must be a list of RunObserver"):
        anyio.run(lambda: run(observers=Watcher()))
    with pytest.raises(TypeError, match="register_observer: an observer must be"):
        register_observer("tracing")  # type: ignore[arg-type]


def test_instrument_true_with_nothing_registered_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(observer_module, "_always", ())
    monkeypatch.setattr(observer_module, "_requested", ())
    with pytest.raises(ValueError, match="instrument=True asks for the registered observers"):
        anyio.run(
            lambda: run_agent_loop(
                ["go"],
                AgentContext(),
                AgentLoopConfig(model=MODEL),
                stream_fn=FauxProvider([faux_response("x")]),
                instrument=True,
            )
        )


# --- the journal port ----------------------------------------------------------------------


class DictJournal:
    """A journal kept in a dict; ``slow`` appends take a few checkpoints, and note whether two
    ever overlapped."""

    def __init__(self, *, slow: bool = False, fail_at: int | None = None) -> None:
        self.record: dict[str, Any] = {"header": None, "entries": [], "end": "open"}
        self.calls: list[str] = []
        self.slow = slow
        self.fail_at = fail_at
        self.busy = False
        self.overlapped = False

    def __str__(self) -> str:
        return "the test's dict journal"

    async def open(self, header: dict[str, Any]) -> int:
        self.calls.append("open")
        self.record["header"] = header
        return 0

    async def append(self, seq: int, entries: Sequence[dict[str, Any]]) -> None:
        self.overlapped |= self.busy
        self.busy = True
        try:
            assert seq == len(self.record["entries"]), (seq, len(self.record["entries"]))
            if self.fail_at is not None and seq + len(entries) > self.fail_at:
                raise OSError("the dict is full")
            if self.slow:
                for _ in range(5):
                    await anyio.lowlevel.checkpoint()
            self.record["entries"].extend(entries)
            self.calls.append(f"append {len(entries)}")
        finally:
            self.busy = False

    async def close(
        self, seq: int, entries: Sequence[dict[str, Any]], end_reason: str | None
    ) -> None:
        assert seq == len(self.record["entries"])
        self.record["entries"].extend(entries)
        self.calls.append(f"close {len(entries)} {end_reason}")
        self.record["end"] = end_reason


def write_tools(journal: DictJournal, machine: list[JournaledLoopMachine]) -> list[AgentTool]:
    async def write(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        # every entry that led to this call is in the journal before it starts
        assert journal.record["entries"] == machine[0].entries
        return AgentToolResult(content=[TextContent(text="written")])

    async def read(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return AgentToolResult(content=[TextContent(text="read")])

    return [
        AgentTool("write", "", OBJECT, write),
        AgentTool("read", "", OBJECT, read, idempotent=True),
    ]


def journal_script() -> FauxProvider:
    return FauxProvider(
        [
            faux_response(tool_calls=[faux_tool_call("read", id="r1")]),
            faux_response(tool_calls=[faux_tool_call("write", id="w1")]),
            faux_response("done"),
        ]
    )


async def test_a_journal_gets_the_whole_record_in_order(anyio_backend: str) -> None:
    journal = DictJournal(slow=True)
    holder: list[JournaledLoopMachine] = []
    machine = JournaledLoopMachine(
        [UserMessage(content="go")],
        AgentContext(tools=write_tools(journal, holder)),
        AgentLoopConfig(model=MODEL),
    )
    holder.append(machine)
    recorder = EventRecorder()
    messages = await run_machine(
        machine, stream_fn=journal_script(), emit=recorder, journal=journal, run_id="d"
    )
    check_run(recorder.events, messages)
    assert journal.record["header"] == machine.header
    assert journal.record["entries"] == machine.entries and machine.entries
    assert journal.calls[0] == "open" and journal.calls[-1].endswith(" completed")
    assert not journal.overlapped
    # grouped: fewer writes than entries (the last ones come with the end)
    writes = journal.calls[1:]
    assert sum(int(c.split()[1]) for c in writes) == len(machine.entries)
    assert len(writes) < len(machine.entries)


async def test_a_journal_that_fails_ends_the_run_once_as_data(anyio_backend: str) -> None:
    journal = DictJournal(fail_at=2)
    holder: list[JournaledLoopMachine] = []
    machine = JournaledLoopMachine(
        [UserMessage(content="go")],
        AgentContext(tools=write_tools(journal, holder)),
        AgentLoopConfig(model=MODEL),
    )
    holder.append(machine)
    recorder = EventRecorder()
    messages = await run_machine(
        machine, stream_fn=journal_script(), emit=recorder, journal=journal
    )
    summary = check_run(recorder.events, messages)
    assert summary.reason == "error"
    assert messages[-1].error_message == (
        "the run's journal (the test's dict journal) failed, so the run stopped: the dict is full"
    )
    written = journal.record["entries"]
    assert written == machine.entries[: len(written)] and len(written) <= 2  # a prefix
    assert journal.record["end"] is None
    assert journal.calls[-1] == "close 0 None"


async def test_a_journal_that_cannot_open_raises_before_the_run(anyio_backend: str) -> None:
    class Refusing(DictJournal):
        async def open(self, header: dict[str, Any]) -> int:
            raise LookupError("run 'x' exists")

    recorder = EventRecorder()
    machine = JournaledLoopMachine(
        [UserMessage(content="go")], AgentContext(), AgentLoopConfig(model=MODEL)
    )
    with pytest.raises(LookupError, match="exists"):
        await run_machine(machine, stream_fn=journal_script(), emit=recorder, journal=Refusing())
    assert recorder.events == []


async def test_a_journal_needs_a_machine_that_keeps_one(anyio_backend: str) -> None:
    from agentcore_fsm.core.machine import LoopMachine

    machine = LoopMachine([UserMessage(content="go")], AgentContext(), AgentLoopConfig(model=MODEL))
    with pytest.raises(TypeError, match=r"keeps its journal .*not LoopMachine"):
        await run_machine(machine, stream_fn=journal_script(), journal=DictJournal())
