"""The Agent (docs/reference.md#the-agent): construction, state and its reduction, listeners, prompt
forms,
continue_, the queues and their modes, reset, the lifecycle machine and the sync convenience.

Runs, aborts and failures seen from several tasks are in ``test_agent_runs.py``.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

import anyio
import pytest
from agent_helpers import (
    ASSISTANT_STOP,
    Recorder,
    label,
    prompt_turn,
    text_of,
)

from agentcore_fsm import (
    AgentToolResult,
    ImageContent,
    Model,
    TextContent,
    ToolResultMessage,
    UserMessage,
    set_default_stream_fn,
)
from agentcore_fsm.agent.agent import Agent, AgentBusyError, AgentState
from agentcore_fsm.core.config import LlmContext, StreamOptions
from agentcore_fsm.core.declaration import load_declaration
from agentcore_fsm.core.tools import AgentTool
from agentcore_fsm.integrations.providers.faux import (
    FauxError,
    FauxProvider,
    faux_response,
    faux_tool_call,
)

PROMPT_BUSY = (
    "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, "
    "or wait for completion."
)
CONTINUE_BUSY = "Agent is already processing. Wait for completion before continuing."
RESET_BUSY = "Agent is already processing. Wait for completion before resetting."
NO_STREAM_FN = "No stream function: pass stream_fn or call set_default_stream_fn()"


# --- helpers --------------------------------------------------------------------------------


class Script:
    """A stream function playing scripted responses (through FauxProvider), recording every
    call's model, context and options."""

    def __init__(self, *items: Any) -> None:
        self.items: deque[Any] = deque(items)
        self.calls: list[tuple[Model, LlmContext, StreamOptions]] = []

    def __call__(self, model: Model, context: LlmContext, options: StreamOptions) -> Any:
        self.calls.append((model, context, options))
        item = self.items.popleft() if self.items else FauxError("No more faux responses queued")
        return FauxProvider([item], chunk_size=64)(model, context, options)


def simple_tool(name: str, log: list[str] | None = None) -> AgentTool:
    async def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
        if log is not None:
            log.append(tool_call_id)
        return AgentToolResult(content=[TextContent(text=f"{name} ok")])

    return AgentTool(name=name, description=name, parameters={"type": "object"}, execute=execute)


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)])


# --- construction and configuration ----------------------------------------------------------


def test_defaults() -> None:
    agent = Agent()
    assert agent.model == Model(id="unknown", provider="unknown", api="unknown")
    assert agent.state.model is agent.model
    assert agent.system_prompt == "" and agent.state.system_prompt == ""
    assert agent.thinking_level == "off"
    assert agent.tools == [] and agent.state.messages == []
    assert agent.steering_mode == "one-at-a-time"
    assert agent.follow_up_mode == "one-at-a-time"
    assert agent.transport == "auto"
    assert agent.tool_execution == "parallel"
    assert agent.session_id is None and agent.thinking_budgets is None
    assert agent.max_retry_delay_ms is None and agent.stream_fn is None
    for hook in (
        "convert_to_llm",
        "transform_context",
        "get_api_key",
        "before_tool_call",
        "after_tool_call",
        "prepare_next_turn",
        "should_stop_after_turn",
    ):
        assert getattr(agent, hook) is None
    state = agent.state
    assert isinstance(state, AgentState)
    assert state.is_streaming is False
    assert state.streaming_message is None
    assert state.pending_tool_calls == set()
    assert state.error_message is None
    assert agent.signal is None
    assert agent.lifecycle_state == "idle"
    assert agent.is_busy is False
    assert agent.has_queued_messages() is False


def test_keywords_become_attributes_and_state() -> None:
    model = Model(id="m1", provider="p1")
    tools = [simple_tool("a")]
    history = [user("old")]
    agent = Agent(
        system_prompt="be brief",
        model=model,
        thinking_level="high",
        tools=tools,
        messages=history,
        steering_mode="all",
        follow_up_mode="all",
        session_id="s1",
        thinking_budgets={"high": 100},
        transport="sse",
        max_retry_delay_ms=5,
        tool_execution="sequential",
    )
    assert agent.state.system_prompt == "be brief"
    assert agent.state.model is model
    assert agent.state.thinking_level == "high"
    assert agent.state.tools == tools and agent.state.tools is not tools
    assert agent.state.messages == history and agent.state.messages is not history
    assert (agent.steering_mode, agent.follow_up_mode) == ("all", "all")
    assert (agent.session_id, agent.thinking_budgets) == ("s1", {"high": 100})
    assert (agent.transport, agent.max_retry_delay_ms) == ("sse", 5)
    assert agent.tool_execution == "sequential"


@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        ("steering_mode", "two"),
        ("follow_up_mode", "many"),
        ("thinking_level", "extreme"),
        ("tool_execution", "random"),
    ],
)
def test_bad_choices_are_rejected(keyword: str, value: str) -> None:
    kwargs: dict[str, Any] = {keyword: value}
    with pytest.raises(ValueError, match=f"{keyword} must be one of"):
        Agent(**kwargs)
    agent = Agent()
    with pytest.raises(ValueError, match=f"{keyword} must be one of"):
        setattr(agent, keyword, value)


def test_state_lists_are_live_and_assignment_copies() -> None:
    agent = Agent()
    state = agent.state
    assert state.messages is state.messages
    state.messages.append(user("a"))
    assert [text_of(m) for m in agent.state.messages] == ["a"]
    mine = [user("b")]
    state.messages = mine
    mine.append(user("c"))
    assert [text_of(m) for m in state.messages] == ["b"]
    assert agent.messages is state.messages
    state.messages = [{"role": "user", "content": "from a dict"}]
    assert isinstance(state.messages[0], UserMessage)

    tool = simple_tool("t")
    state.tools.append(tool)
    assert agent.tools == [tool]
    tools = [tool]
    agent.tools = tools
    tools.append(simple_tool("u"))
    assert [t.name for t in state.tools] == ["t"]


def test_runtime_fields_are_read_only() -> None:
    state = Agent().state
    for name in ("is_streaming", "streaming_message", "pending_tool_calls", "error_message"):
        with pytest.raises(AttributeError):
            setattr(state, name, None)


def test_pending_tool_calls_is_a_copy() -> None:
    state = Agent().state
    state.pending_tool_calls.add("x")
    assert state.pending_tool_calls == set()


@pytest.mark.anyio
async def test_configuration_applies_from_the_next_run() -> None:
    script = Script(faux_response("one"), faux_response("two"))
    agent = Agent(system_prompt="first", stream_fn=script)
    new_model = Model(id="m2", provider="p2")
    new_tool = simple_tool("late")

    def change(event: Any, signal: Any) -> None:
        if event.type == "agent_start" and len(script.calls) == 0:
            agent.model = new_model
            agent.thinking_level = "high"
            agent.system_prompt = "second"
            agent.tools = [new_tool]
            agent.session_id = "s2"

    agent.subscribe(change)
    await agent.prompt("a")
    model, context, options = script.calls[0]
    assert model.id == "unknown"
    assert options.reasoning is None and options.session_id is None
    assert context.system_prompt == "first" and context.tools == []

    await agent.prompt("b")
    model, context, options = script.calls[1]
    assert model is new_model
    assert options.reasoning == "high" and options.session_id == "s2"
    assert context.system_prompt == "second" and context.tools == [new_tool]


@pytest.mark.anyio
async def test_options_and_hooks_reach_the_loop() -> None:
    script = Script(faux_response(tool_calls=[faux_tool_call("t", id="c1")]), faux_response("x"))
    calls: list[str] = []
    signals: list[Any] = []

    def transform_context(messages: list[Any], signal: Any) -> list[Any]:
        calls.append("transform_context")
        signals.append(signal)
        return messages

    def convert_to_llm(messages: list[Any]) -> list[Any]:
        calls.append("convert_to_llm")
        return [m for m in messages if getattr(m, "role", None) != "note"]

    async def get_api_key(provider: str) -> str:
        calls.append(f"get_api_key:{provider}")
        return "k1"

    def before_tool_call(ctx: Any, signal: Any) -> None:
        calls.append(f"before:{ctx.tool_call.id}")
        signals.append(signal)

    async def after_tool_call(ctx: Any, signal: Any) -> None:
        calls.append(f"after:{ctx.tool_call.id}")
        signals.append(signal)

    def prepare_next_turn(ctx: Any, signal: Any) -> None:
        calls.append("prepare_next_turn")
        signals.append(signal)

    async def should_stop_after_turn(ctx: Any, signal: Any) -> bool:
        calls.append("should_stop_after_turn")
        signals.append(signal)
        return False

    agent = Agent(
        model=Model(id="m", provider="prov"),
        thinking_level="low",
        tools=[simple_tool("t")],
        stream_fn=script,
        transform_context=transform_context,
        convert_to_llm=convert_to_llm,
        get_api_key=get_api_key,
        before_tool_call=before_tool_call,
        after_tool_call=after_tool_call,
        prepare_next_turn=prepare_next_turn,
        should_stop_after_turn=should_stop_after_turn,
        session_id="sess",
        thinking_budgets={"low": 10},
        transport="websocket",
        max_retry_delay_ms=7,
    )
    listener_signals: list[Any] = []
    agent.subscribe(lambda event, signal: listener_signals.append(signal))
    agent.state.messages.append(type("Note", (), {"role": "note"})())
    await agent.prompt("go")

    assert calls == [
        "transform_context",
        "convert_to_llm",
        "get_api_key:prov",
        "before:c1",
        "after:c1",
        "should_stop_after_turn",
        "prepare_next_turn",  # another turn follows: prepared right before it
        "transform_context",
        "convert_to_llm",
        "get_api_key:prov",
        "should_stop_after_turn",  # the last turn: no prepare_next_turn after it
    ]
    assert all(s is listener_signals[0] for s in [*signals, *listener_signals])
    _, context, options = script.calls[0]
    assert [getattr(m, "role", None) for m in context.messages] == ["user"]
    assert options.api_key == "k1"
    assert options.reasoning == "low"
    assert options.session_id == "sess"
    assert options.thinking_budgets == {"low": 10}
    assert options.transport == "websocket"
    assert options.max_retry_delay_ms == 7
    assert options.signal is listener_signals[0]


@pytest.mark.anyio
async def test_sequential_tool_execution_is_passed_on() -> None:
    order: list[str] = []

    def tool(name: str) -> AgentTool:
        async def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
            order.append(f"start:{tool_call_id}")
            await anyio.lowlevel.checkpoint()
            order.append(f"end:{tool_call_id}")
            return AgentToolResult(content=[TextContent(text="ok")])

        return AgentTool(name=name, description=name, parameters={}, execute=execute)

    calls = [faux_tool_call("a", id="s1"), faux_tool_call("b", id="s2")]
    agent = Agent(
        tools=[tool("a"), tool("b")],
        stream_fn=Script(faux_response(tool_calls=calls), faux_response("done")),
        tool_execution="sequential",
    )
    rec = Recorder()
    agent.subscribe(rec)
    await agent.prompt("go")
    assert order == ["start:s1", "end:s1", "start:s2", "end:s2"]
    assert rec.seq[6:14] == [
        "tool_execution_start:s1",
        "tool_execution_end:s1",
        "message_start:toolResult:s1",
        "message_end:toolResult:s1",
        "tool_execution_start:s2",
        "tool_execution_end:s2",
        "message_start:toolResult:s2",
        "message_end:toolResult:s2",
    ]


@pytest.mark.anyio
async def test_missing_stream_function_raises_before_anything_happens() -> None:
    agent = Agent(messages=[user("before")])
    rec = Recorder()
    agent.subscribe(rec)
    with pytest.raises(ValueError) as info:
        await agent.prompt("hi")
    assert str(info.value) == NO_STREAM_FN
    with pytest.raises(ValueError) as info:
        await agent.continue_()
    assert str(info.value) == NO_STREAM_FN
    assert rec.all == []
    assert [text_of(m) for m in agent.state.messages] == ["before"]
    assert agent.lifecycle_state == "idle" and agent.lifecycle_history == []
    assert agent.state.is_streaming is False


@pytest.mark.anyio
async def test_default_stream_function_is_used() -> None:
    script = Script(faux_response("from default"))
    set_default_stream_fn(script)
    try:
        agent = Agent()
        await agent.prompt("hi")
    finally:
        set_default_stream_fn(None)
    assert len(script.calls) == 1
    assert text_of(agent.state.messages[-1]) == "from default"


# --- listeners and the state reduction ---------------------------------------------------------


@pytest.mark.anyio
async def test_simple_prompt_exact_events_and_transcript() -> None:
    agent = Agent(stream_fn=Script(faux_response("ok")))
    rec = Recorder()
    agent.subscribe(rec)
    new = await agent.prompt("hi")
    assert rec.all == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        "message_start:assistant:pending",
        "message_update",  # text_start
        "message_update",  # text_delta
        "message_update",  # text_end
        "message_end:assistant:stop",
        "turn_end",
        "agent_end:completed",
    ]
    assert [label(m) for m in agent.state.messages] == ["user:hi", "assistant:stop"]
    assert new == agent.state.messages
    assert rec.events[-1].messages == new
    assert text_of(new[1]) == "ok"
    assert agent.state.is_streaming is False
    assert agent.state.streaming_message is None
    assert agent.state.error_message is None


@pytest.mark.anyio
async def test_listeners_run_in_subscription_order_sync_and_async() -> None:
    agent = Agent(stream_fn=Script(faux_response("ok")))
    order: list[str] = []

    def first(event: Any, signal: Any) -> None:
        order.append(f"first:{event.type}")

    async def second(event: Any, signal: Any) -> None:
        await anyio.lowlevel.checkpoint()
        order.append(f"second:{event.type}")

    def third(event: Any, signal: Any) -> None:
        order.append(f"third:{event.type}")

    agent.subscribe(first)
    agent.subscribe(second)
    agent.subscribe(third)
    await agent.prompt("hi")
    types = [o.split(":")[1] for o in order[::3]]
    assert len(types) == 11
    expected: list[str] = []
    for kind in types:
        expected += [f"first:{kind}", f"second:{kind}", f"third:{kind}"]
    assert order == expected


@pytest.mark.anyio
async def test_listeners_see_the_state_already_updated() -> None:
    calls = [faux_tool_call("t", id="c1"), faux_tool_call("t", id="c2")]
    agent = Agent(
        tools=[simple_tool("t")],
        stream_fn=Script(faux_response(tool_calls=calls), faux_response("done")),
    )
    problems: list[str] = []
    pending: list[tuple[str, set[str]]] = []

    def check(event: Any, signal: Any) -> None:
        state = agent.state
        if not state.is_streaming:
            problems.append(f"not streaming at {event.type}")
        kind = event.type
        if kind in ("message_start", "message_update"):
            if state.streaming_message is not event.message:
                problems.append(f"streaming_message at {kind}")
        elif kind == "message_end":
            if state.streaming_message is not None or state.messages[-1] is not event.message:
                problems.append("message_end not reduced")
        elif kind == "tool_execution_start":
            pending.append((f"start:{event.tool_call_id}", state.pending_tool_calls))
        elif kind == "tool_execution_end":
            pending.append((f"end:{event.tool_call_id}", state.pending_tool_calls))
        elif kind in ("turn_end", "agent_end"):
            pending.append((kind, state.pending_tool_calls))

    agent.subscribe(check)
    await agent.prompt("hi")
    assert problems == []
    assert pending[:2] == [("start:c1", {"c1"}), ("start:c2", {"c1", "c2"})]
    (end1, left1), (end2, left2) = pending[2], pending[3]  # in completion order
    assert {end1, end2} == {"end:c1", "end:c2"}
    assert left1 == {end2.removeprefix("end:")} and left2 == set()
    assert pending[4:] == [("turn_end", set()), ("turn_end", set()), ("agent_end", set())]
    assert agent.state.pending_tool_calls == set()


@pytest.mark.anyio
async def test_unsubscribe() -> None:
    agent = Agent(stream_fn=Script(faux_response("a"), faux_response("b"), faux_response("c")))
    rec = Recorder()
    twice = Recorder()
    unsubscribe = agent.subscribe(rec)
    unsub_a = agent.subscribe(twice)
    agent.subscribe(twice)
    await agent.prompt("1")
    assert len(twice.all) == 2 * len(rec.all)
    unsubscribe()
    unsubscribe()  # a second call does nothing
    unsub_a()
    before = len(rec.all)
    await agent.prompt("2")
    assert len(rec.all) == before
    assert len(twice.all) == 3 * before

    # unsubscribing while an event is delivered applies from the next event
    late = Recorder()
    handle: dict[str, Any] = {}

    def remover(event: Any, signal: Any) -> None:
        if event.type == "turn_start":
            handle["unsub"]()

    agent.subscribe(remover)
    handle["unsub"] = agent.subscribe(late)
    await agent.prompt("3")
    assert late.all == ["agent_start", "turn_start"]


@pytest.mark.anyio
async def test_error_message_from_a_failed_assistant_message_and_cleared_by_next_run() -> None:
    agent = Agent(stream_fn=Script(FauxError("model exploded"), faux_response("fine")))
    rec = Recorder()
    agent.subscribe(rec)
    await agent.prompt("hi")
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        "message_start:assistant:error",
        "message_end:assistant:error",
        "turn_end",
        "agent_end:error",
    ]
    assert agent.state.error_message == "model exploded"

    seen_at_start: list[str | None] = []
    agent.subscribe(
        lambda e, s: (
            seen_at_start.append(agent.state.error_message) if e.type == "agent_start" else None
        )
    )
    await agent.prompt("again")
    assert seen_at_start == [None]
    assert agent.state.error_message is None


@pytest.mark.anyio
async def test_custom_messages_are_carried() -> None:
    class Note:
        role = "note"

        def __init__(self, text: str) -> None:
            self.text = text

    script = Script(faux_response("ok"))
    agent = Agent(stream_fn=script)
    rec = Recorder()
    agent.subscribe(rec)
    note = Note("remember")
    await agent.prompt([note, user("hi")])
    assert agent.state.messages[0] is note
    assert rec.seq[2:6] == [
        "message_start:note",
        "message_end:note",
        "message_start:user:hi",
        "message_end:user:hi",
    ]
    _, context, _ = script.calls[0]
    assert [label(m) for m in context.messages] == ["user:hi"]


# --- prompt ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_prompt_text_with_images() -> None:
    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    script = Script(faux_response("nice"))
    agent = Agent(stream_fn=script)
    await agent.prompt("look", [image])
    first = agent.state.messages[0]
    assert isinstance(first, UserMessage)
    assert first.content == [TextContent(text="look"), image]
    assert script.calls[0][1].messages[0] is first


@pytest.mark.anyio
async def test_prompt_one_message_and_a_list() -> None:
    agent = Agent(stream_fn=Script(faux_response("a"), faux_response("b")))
    one = user("one")
    new = await agent.prompt(one)
    assert new[0] is one
    two, three = user("two"), user("three")
    new = await agent.prompt([two, three])
    assert new[:2] == [two, three]
    assert [label(m) for m in agent.state.messages] == [
        "user:one",
        "assistant:stop",
        "user:two",
        "user:three",
        "assistant:stop",
    ]


@pytest.mark.anyio
async def test_prompt_accepts_a_message_dict() -> None:
    agent = Agent(stream_fn=Script(faux_response("a")))
    await agent.prompt({"role": "user", "content": "as dict"})
    assert isinstance(agent.state.messages[0], UserMessage)
    assert agent.state.messages[0].content == "as dict"


@pytest.mark.anyio
async def test_prompt_bad_inputs() -> None:
    agent = Agent(stream_fn=Script())
    with pytest.raises(TypeError, match="images can only be given with a text prompt"):
        await agent.prompt(user("x"), [ImageContent(data="", mime_type="image/png")])
    with pytest.raises(ValueError, match="No messages to prompt with"):
        await agent.prompt([])
    assert agent.lifecycle_state == "idle" and agent.state.messages == []


# --- continue_ -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_continue_without_messages() -> None:
    agent = Agent(stream_fn=Script())
    with pytest.raises(ValueError) as info:
        await agent.continue_()
    assert str(info.value) == "No messages to continue from"


@pytest.mark.anyio
async def test_continue_from_a_user_message() -> None:
    script = Script(faux_response("answer"))
    agent = Agent(messages=[user("pending question")], stream_fn=script)
    rec = Recorder()
    agent.subscribe(rec)
    new = await agent.continue_()
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *ASSISTANT_STOP,
        "turn_end",
        "agent_end:completed",
    ]
    assert [label(m) for m in new] == ["assistant:stop"]
    assert [label(m) for m in agent.state.messages] == ["user:pending question", "assistant:stop"]
    assert [label(m) for m in script.calls[0][1].messages] == ["user:pending question"]


@pytest.mark.anyio
async def test_continue_from_a_tool_result() -> None:
    history = [
        user("q"),
        faux_response(tool_calls=[faux_tool_call("t", id="c9")]),
        ToolResultMessage(tool_call_id="c9", tool_name="t", content=[TextContent(text="r")]),
    ]
    agent = Agent(messages=history, stream_fn=Script(faux_response("done")))
    new = await agent.continue_()
    assert [label(m) for m in new] == ["assistant:stop"]


@pytest.mark.anyio
async def test_continue_from_assistant_with_neither_queue() -> None:
    agent = Agent(messages=[user("q"), faux_response("a")], stream_fn=Script())
    rec = Recorder()
    agent.subscribe(rec)
    with pytest.raises(ValueError) as info:
        await agent.continue_()
    assert str(info.value) == "Cannot continue from message role: assistant"
    assert rec.all == [] and agent.lifecycle_state == "idle"


@pytest.mark.anyio
async def test_continue_from_assistant_with_queued_steering_one_at_a_time() -> None:
    script = Script(faux_response("r1"), faux_response("r2"), faux_response("r3"))
    agent = Agent(messages=[user("q"), faux_response("a")], stream_fn=script)
    agent.steer("s1")
    agent.steer("s2")
    agent.follow_up("f1")
    rec = Recorder()
    agent.subscribe(rec)
    new = await agent.continue_()
    # s1 is the prompt; the run's first steering poll is skipped, so s2 waits for turn 2;
    # the follow-up is taken once no steering is left
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("s1"),
        *ASSISTANT_STOP,
        "turn_end",
        "turn_start",
        *prompt_turn("s2"),
        *ASSISTANT_STOP,
        "turn_end",
        "turn_start",
        *prompt_turn("f1"),
        *ASSISTANT_STOP,
        "turn_end",
        "agent_end:completed",
    ]
    assert [label(m) for m in new][:2] == ["user:s1", "assistant:stop"]
    assert [label(m) for m in script.calls[0][1].messages] == [
        "user:q",
        "assistant:stop",
        "user:s1",
    ]
    assert not agent.has_queued_messages()


@pytest.mark.anyio
async def test_continue_from_assistant_with_queued_steering_all() -> None:
    script = Script(faux_response("r1"))
    agent = Agent(messages=[user("q"), faux_response("a")], stream_fn=script, steering_mode="all")
    agent.steer("s1")
    agent.steer("s2")
    rec = Recorder()
    agent.subscribe(rec)
    await agent.continue_()
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("s1"),
        *prompt_turn("s2"),
        *ASSISTANT_STOP,
        "turn_end",
        "agent_end:completed",
    ]
    assert len(script.calls) == 1


@pytest.mark.anyio
async def test_continue_from_assistant_with_queued_follow_ups() -> None:
    script = Script(faux_response("r1"), faux_response("r2"))
    agent = Agent(messages=[user("q"), faux_response("a")], stream_fn=script)
    agent.follow_up("f1")
    agent.follow_up("f2")
    rec = Recorder()
    agent.subscribe(rec)
    await agent.continue_()
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("f1"),
        *ASSISTANT_STOP,
        "turn_end",
        "turn_start",
        *prompt_turn("f2"),
        *ASSISTANT_STOP,
        "turn_end",
        "agent_end:completed",
    ]
    assert [label(m) for m in script.calls[1][1].messages] == [
        "user:q",
        "assistant:stop",
        "user:f1",
        "assistant:stop",
        "user:f2",
    ]


# --- queues ----------------------------------------------------------------------------------


def test_steer_and_follow_up_turn_text_into_user_messages() -> None:
    agent = Agent()
    agent.steer("s")
    message = user("f")
    agent.follow_up(message)
    assert agent.has_queued_messages()
    steering = agent._steering[0]
    assert isinstance(steering, UserMessage) and steering.content == [TextContent(text="s")]
    assert agent._follow_ups[0] is message


def test_clearing_queues() -> None:
    agent = Agent()
    agent.steer("s")
    assert agent.has_queued_messages()
    agent.clear_steering_queue()
    assert not agent.has_queued_messages()
    agent.follow_up("f")
    assert agent.has_queued_messages()
    agent.clear_follow_up_queue()
    assert not agent.has_queued_messages()
    agent.steer("s")
    agent.follow_up("f")
    agent.clear_all_queues()
    assert not agent.has_queued_messages()


@pytest.mark.anyio
async def test_cleared_queues_are_not_run() -> None:
    script = Script(faux_response("only"))
    agent = Agent(stream_fn=script)
    agent.steer("s")
    agent.follow_up("f")
    agent.clear_all_queues()
    await agent.prompt("hi")
    assert len(script.calls) == 1


@pytest.mark.anyio
async def test_one_at_a_time_steering_takes_one_turn_per_message() -> None:
    script = Script(faux_response("r1"), faux_response("r2"), faux_response("r3"))
    agent = Agent(stream_fn=script)
    for text in ("s1", "s2", "s3"):
        agent.steer(text)
    rec = Recorder()
    agent.subscribe(rec)
    await agent.prompt("hi")
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        *prompt_turn("s1"),  # the first poll, before the first model call
        *ASSISTANT_STOP,
        "turn_end",
        "turn_start",
        *prompt_turn("s2"),
        *ASSISTANT_STOP,
        "turn_end",
        "turn_start",
        *prompt_turn("s3"),
        *ASSISTANT_STOP,
        "turn_end",
        "agent_end:completed",
    ]
    assert len(script.calls) == 3


@pytest.mark.anyio
async def test_all_mode_steering_injects_every_message_at_once() -> None:
    script = Script(faux_response("r1"))
    agent = Agent(stream_fn=script, steering_mode="all")
    for text in ("s1", "s2", "s3"):
        agent.steer(text)
    rec = Recorder()
    agent.subscribe(rec)
    await agent.prompt("hi")
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        *prompt_turn("s1"),
        *prompt_turn("s2"),
        *prompt_turn("s3"),
        *ASSISTANT_STOP,
        "turn_end",
        "agent_end:completed",
    ]
    assert [label(m) for m in script.calls[0][1].messages] == [
        "user:hi",
        "user:s1",
        "user:s2",
        "user:s3",
    ]


@pytest.mark.anyio
async def test_follow_ups_only_when_the_agent_would_stop() -> None:
    script = Script(
        faux_response(tool_calls=[faux_tool_call("t", id="c1")]),
        faux_response("r2"),
        faux_response("r3"),
        faux_response("r4"),
    )
    agent = Agent(tools=[simple_tool("t")], stream_fn=script)
    agent.follow_up("f1")
    agent.follow_up("f2")
    rec = Recorder()
    agent.subscribe(rec)
    await agent.prompt("hi")
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        "message_start:assistant:pending",
        "message_end:assistant:toolUse",
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "turn_end",
        "turn_start",  # tools continue: the follow-ups wait
        *ASSISTANT_STOP,
        "turn_end",
        "turn_start",
        *prompt_turn("f1"),
        *ASSISTANT_STOP,
        "turn_end",
        "turn_start",
        *prompt_turn("f2"),
        *ASSISTANT_STOP,
        "turn_end",
        "agent_end:completed",
    ]


@pytest.mark.anyio
async def test_all_mode_follow_ups() -> None:
    script = Script(faux_response("r1"), faux_response("r2"))
    agent = Agent(stream_fn=script, follow_up_mode="all")
    agent.follow_up("f1")
    agent.follow_up("f2")
    rec = Recorder()
    agent.subscribe(rec)
    await agent.prompt("hi")
    assert rec.seq == [
        "agent_start",
        "turn_start",
        *prompt_turn("hi"),
        *ASSISTANT_STOP,
        "turn_end",
        "turn_start",
        *prompt_turn("f1"),
        *prompt_turn("f2"),
        *ASSISTANT_STOP,
        "turn_end",
        "agent_end:completed",
    ]


@pytest.mark.anyio
async def test_queue_mode_change_applies_from_the_next_run() -> None:
    script = Script(*(faux_response(f"r{i}") for i in range(4)))
    agent = Agent(stream_fn=script)

    def switch(event: Any, signal: Any) -> None:
        if event.type == "agent_start":
            agent.steering_mode = "all"

    unsubscribe = agent.subscribe(switch)
    agent.steer("a")
    agent.steer("b")
    await agent.prompt("run1")
    assert len(script.calls) == 2  # one at a time, as when the run started
    unsubscribe()
    agent.steer("c")
    agent.steer("d")
    await agent.prompt("run2")
    assert len(script.calls) == 3  # all at once
    assert [label(m) for m in script.calls[2][1].messages][-3:] == [
        "user:run2",
        "user:c",
        "user:d",
    ]


# --- reset -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_reset_clears_transcript_queues_and_runtime_fields_keeps_config() -> None:
    script = Script(FauxError("bad"), faux_response("fresh"))
    model = Model(id="keep")
    agent = Agent(system_prompt="sys", model=model, stream_fn=script, tools=[simple_tool("t")])
    rec = Recorder()
    agent.subscribe(rec)
    await agent.prompt("hi")
    old = agent.state.messages
    assert agent.state.error_message == "bad"
    agent.steer("s")
    agent.follow_up("f")
    agent.reset()
    assert agent.state.messages == [] and len(old) == 2
    assert agent.state.error_message is None
    assert agent.state.streaming_message is None
    assert agent.state.pending_tool_calls == set()
    assert agent.state.is_streaming is False
    assert not agent.has_queued_messages()
    assert agent.model is model and agent.system_prompt == "sys"
    assert [t.name for t in agent.tools] == ["t"]
    rec.all.clear()
    await agent.prompt("again")
    assert rec.seq[0] == "agent_start"  # the listener is still subscribed
    assert [label(m) for m in agent.state.messages] == ["user:again", "assistant:stop"]


@pytest.mark.anyio
async def test_reset_during_a_run_raises_and_keeps_the_transcript() -> None:
    agent = Agent(messages=[user("old")], stream_fn=Script(faux_response("ok")))
    agent.steer("queued")
    errors: list[str] = []

    def try_reset(event: Any, signal: Any) -> None:
        if event.type in ("message_end", "agent_end"):
            try:
                agent.reset()
            except AgentBusyError as exc:
                errors.append(str(exc))

    agent.subscribe(try_reset)
    await agent.prompt("hi")
    assert errors == [RESET_BUSY] * 4  # three message_end, one agent_end
    assert [label(m) for m in agent.state.messages] == [
        "user:old",
        "user:hi",
        "user:queued",
        "assistant:stop",
    ]
    assert agent.state.error_message is None


# --- busy checks ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_prompt_and_continue_while_running_raise_busy() -> None:
    agent = Agent(stream_fn=Script(faux_response("ok")))
    errors: list[tuple[str, str]] = []

    async def reenter(event: Any, signal: Any) -> None:
        if event.type == "turn_start":
            try:
                await agent.prompt("nested")
            except AgentBusyError as exc:
                errors.append(("prompt", str(exc)))
            try:
                await agent.continue_()
            except AgentBusyError as exc:
                errors.append(("continue", str(exc)))

    agent.subscribe(reenter)
    await agent.prompt("hi")
    assert errors == [("prompt", PROMPT_BUSY), ("continue", CONTINUE_BUSY)]
    assert [label(m) for m in agent.state.messages] == ["user:hi", "assistant:stop"]


def test_busy_error_is_a_runtime_error() -> None:
    assert issubclass(AgentBusyError, RuntimeError)


# --- the lifecycle machine ---------------------------------------------------------------------


def test_lifecycle_declaration() -> None:
    decl = load_declaration("agent")
    assert set(decl.states) == {"idle", "running", "aborting", "finished"}
    assert (decl.initial, decl.final) == ("idle", "finished")
    assert [(t.trigger, t.source, t.dest) for t in decl.transitions] == [
        ("start", ("idle",), "running"),
        ("abort", ("running",), "aborting"),
        ("finish", ("running", "aborting"), "finished"),
    ]
    assert decl.accepted_inputs("idle") == ["start"]
    assert decl.accepted_inputs("running") == ["abort", "finish"]
    assert decl.accepted_inputs("aborting") == ["finish"]
    assert all(spec.doc for spec in decl.states.values())


@pytest.mark.anyio
async def test_lifecycle_states_seen_during_a_run() -> None:
    agent = Agent(stream_fn=Script(faux_response("ok")))
    seen: list[tuple[str, str, bool, bool]] = []
    agent.subscribe(
        lambda e, s: seen.append(
            (e.type, agent.lifecycle_state, agent.is_busy, agent._lifecycle._run is not None)
        )
    )
    await agent.prompt("hi")
    assert {(state, busy) for _, state, busy, _ in seen} == {("running", True)}
    assert {held for *_, held in seen} == {True}  # a run holds its lifecycle machine
    assert agent.lifecycle_state == "idle" and not agent.is_busy
    assert agent._lifecycle._run is None  # an idle agent holds none
    compiled = load_declaration("agent").compiled
    assert all(not c.machine.models for c in compiled.values())  # runs are never registered
    assert [(r.trigger, r.source, r.dest) for r in agent.lifecycle_history] == [
        ("start", "idle", "running"),
        ("finish", "running", "finished"),
    ]


@pytest.mark.anyio
async def test_lifecycle_after_a_run_that_raised() -> None:
    class Escape(BaseException):
        """Not an Exception: the loop does not turn it into data, it escapes."""

    def broken(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        raise Escape

    agent = Agent(stream_fn=broken)
    with pytest.raises(BaseException) as info:
        await agent.prompt("hi")
    assert type(info.value) is Escape  # itself, never inside an exception group
    assert agent.lifecycle_state == "idle"
    assert agent.state.is_streaming is False
    assert agent.signal is None


# --- the synchronous convenience -----------------------------------------------------------------


def test_prompt_sync_runs_without_an_event_loop() -> None:
    agent = Agent(stream_fn=Script(faux_response("sync answer"), faux_response("more")))
    rec = Recorder()
    agent.subscribe(rec)
    new = agent.prompt_sync("hi")
    assert [label(m) for m in new] == ["user:hi", "assistant:stop"]
    assert text_of(new[1]) == "sync answer"
    assert rec.seq[-1] == "agent_end:completed"
    agent.state.messages.append(user("and?"))
    new = agent.continue_sync()
    assert [label(m) for m in new] == ["assistant:stop"]
    assert agent.lifecycle_state == "idle"


@pytest.mark.anyio
async def test_prompt_sync_inside_an_event_loop_says_what_to_do(anyio_backend: str) -> None:
    agent = Agent(stream_fn=Script(faux_response("x")))
    with pytest.raises(RuntimeError) as info:
        agent.prompt_sync("hi")
    assert str(info.value) == (
        f"Agent.prompt_sync() cannot be used while an event loop ({anyio_backend}) is running "
        "in this thread; use `await agent.prompt(...)` instead."
    )
    with pytest.raises(RuntimeError, match=r"use `await agent\.continue_\(\)` instead"):
        agent.continue_sync()
    assert agent.state.messages == [] and agent.lifecycle_state == "idle"


def test_listener_errors_are_logged_on_the_package_logger(caplog: pytest.LogCaptureFixture) -> None:
    agent = Agent(stream_fn=Script(faux_response("ok")))

    def bad_end(event: Any, signal: Any) -> None:
        if event.type == "agent_end":
            raise RuntimeError("end listener broke")

    rec = Recorder()
    agent.subscribe(bad_end)
    agent.subscribe(rec)
    with caplog.at_level(logging.ERROR, logger="agentcore_fsm"):
        agent.prompt_sync("hi")
    assert rec.seq[-1] == "agent_end:completed"
    assert agent.state.error_message is None
    records = [r for r in caplog.records if r.name == "agentcore_fsm"]
    assert len(records) == 1
    assert records[0].exc_info is not None
    assert str(records[0].exc_info[1]) == "end listener broke"


def test_lifecycle_machine_is_safe_to_step_from_several_threads() -> None:
    """The lifecycle machine is shared by every agent; agents run in several threads (say,
    ``prompt_sync`` in a thread pool) must not step each other's runs."""
    import sys
    import threading

    from agentcore_fsm.agent.lifecycle import Lifecycle

    errors: list[str] = []

    def work() -> None:
        try:
            for _ in range(300):
                lifecycle = Lifecycle()
                for trigger in ("start", "abort", "finish"):
                    lifecycle.fire(trigger)
                assert lifecycle.state == "idle"
                assert [r.dest for r in lifecycle.history] == ["running", "aborting", "finished"]
        except Exception as exc:
            errors.append(repr(exc))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


@pytest.mark.anyio
async def test_on_transition_sees_every_loop_transition_of_each_run(tmp_path: Any) -> None:
    """``Agent(on_transition=...)`` hands the loop's transitions to a recorder, so an Agent run
    can be drawn like a low-level one."""
    from agentcore_fsm import RunRecorder, load_run

    path = tmp_path / "run.jsonl"
    with RunRecorder(path) as recorder:
        agent = Agent(
            stream_fn=FauxProvider([faux_response("one"), faux_response("two")]),
            on_transition=recorder.on_transition,
        )
        agent.subscribe(lambda event, signal: recorder(event))
        await agent.prompt("first")
        first = [(r.source, r.dest) for r in recorder.transitions]
        await agent.prompt("second")
    assert first[0] == ("idle", "awaiting_steering") and first[-1][1] == "stopped"
    assert len(recorder.transitions) == 2 * len(first)
    run = load_run(path)
    assert [t.dest for t in run.transitions] == [r.dest for r in recorder.transitions]
    assert [e.type for e in run.events].count("agent_end") == 2
