"""The loop through its public async API: a plain turn, entry points, the model call
(docs/reference.md#running-the-loop,
docs/reference.md#control-flow-of-a-run). Every test runs on trio and asyncio (see conftest)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from helpers import (
    MODEL,
    BlockingStream,
    ContextSnapshot,
    check_grammar,
    events_stream,
    make_tool,
    run,
    summarize,
    text_of,
    text_result,
    user,
)

from agentcore_fsm import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    Model,
    TextContent,
    ToolResultMessage,
    UserMessage,
    agent_loop,
    agent_loop_continue,
    run_agent_loop,
    run_agent_loop_continue,
    set_default_stream_fn,
)
from agentcore_fsm.core.config import LlmContext, StreamOptions
from agentcore_fsm.core.events import (
    StreamDone,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
)
from agentcore_fsm.integrations.providers.faux import (
    FauxError,
    FauxProvider,
    faux_response,
    faux_tool_call,
)
from agentcore_fsm.runtime.driver import get_default_stream_fn

pytestmark = pytest.mark.anyio

NO_STREAM_FN = "No stream function: pass stream_fn or call set_default_stream_fn()"


def config(**kwargs: Any) -> AgentLoopConfig:
    return AgentLoopConfig(model=MODEL, **kwargs)


# --- a plain text turn ------------------------------------------------------------------------


async def test_plain_text_turn_emits_the_exact_sequence_and_returns_new_messages() -> None:
    prompt = user("hi")
    faux = FauxProvider([faux_response("Hello there")], chunk_size=100)
    context = AgentContext(system_prompt="be brief")
    r = await run([prompt], context, config(), faux)
    assert r.summary(updates=True) == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_update:text_start",
        "message_update:text_delta",
        "message_update:text_end",
        "message_end:assistant:stop",
        "turn_end",
        "agent_end:completed",
    ]
    assert r.messages[0] is prompt
    assistant = r.messages[1]
    assert len(r.messages) == 2
    assert isinstance(assistant, AssistantMessage)
    assert text_of(assistant) == "Hello there"
    assert (assistant.api, assistant.provider, assistant.model) == ("faux-api", "faux", "faux-1")
    # message_start and message_end of the prompt carry the prompt itself
    assert r.events[2].message is prompt and r.events[3].message is prompt
    # updates carry the stream event and the message so far
    update = r.of_type("message_update")[1]
    assert isinstance(update.assistant_message_event, TextDelta)
    assert update.assistant_message_event.delta == "Hello there"
    assert update.message is update.assistant_message_event.partial
    turn_end = r.of_type("turn_end")[0]
    assert turn_end.message is assistant and turn_end.tool_results == []
    # what the model saw
    (sent,) = faux.calls
    assert sent.system_prompt == "be brief"
    assert sent.messages == [prompt]
    assert context.messages == []


async def test_thinking_and_text_blocks_map_to_updates_in_order() -> None:
    faux = FauxProvider([faux_response("answer", thinking="hmm")], chunk_size=2)
    r = await run([user("q")], AgentContext(), config(), faux)
    updates = [e for e in r.summary(updates=True) if e.startswith("message_update")]
    assert updates == [
        "message_update:thinking_start",
        "message_update:thinking_delta",
        "message_update:thinking_delta",
        "message_update:thinking_end",
        "message_update:text_start",
        "message_update:text_delta",
        "message_update:text_delta",
        "message_update:text_delta",
        "message_update:text_end",
    ]
    deltas = [
        e.assistant_message_event.delta
        for e in r.of_type("message_update")
        if e.assistant_message_event.type == "text_delta"
    ]
    assert deltas == ["an", "sw", "er"]


async def test_tool_call_blocks_map_to_updates() -> None:
    call = faux_tool_call("t", {"path": "a/b"}, id="c1")
    faux = FauxProvider([faux_response(tool_calls=[call]), faux_response("ok")], chunk_size=8)
    r = await run([user("q")], AgentContext(tools=[make_tool("t")]), config(), faux)
    first_turn = r.summary(updates=True)[4:10]
    assert first_turn == [
        "message_start:assistant",
        "message_update:toolcall_start",
        "message_update:toolcall_delta",
        "message_update:toolcall_delta",
        "message_update:toolcall_end",
        "message_end:assistant:toolUse",
    ]
    end = r.of_type("message_update")[3].assistant_message_event
    assert end.tool_call == call and end.content_index == 0
    deltas = [e.assistant_message_event.delta for e in r.of_type("message_update")[1:3]]
    assert "".join(deltas) == '{"path": "a/b"}'


async def test_several_prompts_after_an_existing_transcript() -> None:
    old = [user("earlier"), AssistantMessage(content=[TextContent(text="ok")])]
    context = AgentContext(messages=old)
    p1, p2 = user("one"), user("two")
    faux = FauxProvider([faux_response("done")])
    r = await run([p1, p2], context, config(), faux)
    assert r.summary() == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant:stop",
        "turn_end",
        "agent_end:completed",
    ]
    assert r.messages[:2] == [p1, p2]
    assert faux.calls[0].messages == [*old, p1, p2]
    assert context.messages == old


async def test_run_without_emit_returns_the_messages() -> None:
    faux = FauxProvider([faux_response("x")])
    context = AgentContext()
    messages = await run_agent_loop([user("a")], context, config(), stream_fn=faux)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert context.messages == []


async def test_async_emit_is_awaited_for_every_event_before_the_loop_goes_on() -> None:
    log: list[str] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        log.append("execute")

        return text_result("ok")

    async def emit(event: Any) -> None:
        log.append(f"begin {event.type}")
        await anyio.sleep(0)
        await anyio.sleep(0)
        log.append(f"end {event.type}")

    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1")]), faux_response("done")],
        chunk_size=100,
    )
    context = AgentContext(tools=[make_tool("t", execute)])
    await run_agent_loop([user("go")], context, config(), emit, stream_fn=faux)
    # every begin is directly followed by its end: no overlap and nothing in between
    assert len(log) % 2 == 1
    pairs = [x for x in log if x != "execute"]
    for begin, end in zip(pairs[::2], pairs[1::2], strict=True):
        assert begin.replace("begin", "end") == end
    # the tool ran only after tool_execution_start had been delivered
    at = log.index("execute")
    assert log[at - 1] == "end tool_execution_start"


async def test_sync_emit_sees_every_event() -> None:
    seen: list[Any] = []
    faux = FauxProvider([faux_response("x")])
    messages = await run_agent_loop(
        [user("a")], AgentContext(), config(), seen.append, stream_fn=faux
    )
    check_grammar(seen)
    assert seen[-1].messages == messages


# --- continue ---------------------------------------------------------------------------------


async def test_continue_from_a_user_message_emits_no_prompt_events() -> None:
    last = user("pending question")
    context = AgentContext(messages=[last])
    faux = FauxProvider([faux_response("answer")])
    r = await run(None, context, config(), faux)
    assert r.summary() == [
        "agent_start",
        "turn_start",
        "message_start:assistant",
        "message_end:assistant:stop",
        "turn_end",
        "agent_end:completed",
    ]
    assert [m.role for m in r.messages] == ["assistant"]
    assert faux.calls[0].messages == [last]


async def test_continue_from_a_tool_result() -> None:
    call = faux_tool_call("t", id="c1")
    context = AgentContext(
        messages=[
            user("q"),
            AssistantMessage(content=[call], stop_reason="toolUse"),
            ToolResultMessage(tool_call_id="c1", tool_name="t", content=[TextContent(text="r")]),
        ]
    )
    r = await run(None, context, config(), FauxProvider([faux_response("final")]))
    assert [m.role for m in r.messages] == ["assistant"]
    assert r.end.reason == "completed"


class Note:
    """A custom message: the application's own role."""

    role = "note"

    def __init__(self, text: str) -> None:
        self.text = text


async def test_continue_accepts_a_custom_last_role_and_convert_to_llm_decides() -> None:
    note = Note("remember this")
    context = AgentContext(messages=[user("q"), note])
    seen: list[list[Any]] = []

    def convert(messages: list[Any]) -> list[Any]:
        seen.append(list(messages))
        return [m if not isinstance(m, Note) else user(f"note: {m.text}") for m in messages]

    faux = FauxProvider([faux_response("ok")])
    r = await run(None, context, config(convert_to_llm=convert), faux)
    assert seen == [[context.messages[0], note]]
    assert [text_of(m) for m in faux.calls[0].messages] == ["q", "note: remember this"]
    assert r.end.reason == "completed"


async def test_default_convert_to_llm_drops_custom_messages() -> None:
    note = Note("hidden")
    prompt = user("visible")
    faux = FauxProvider([faux_response("ok")])
    r = await run([note, prompt], AgentContext(), config(), faux)
    assert faux.calls[0].messages == [prompt]
    assert r.summary()[2:6] == [
        "message_start:note",
        "message_end:note",
        "message_start:user",
        "message_end:user",
    ]
    assert r.messages[0] is note


@pytest.mark.parametrize(
    ("messages", "text"),
    [
        ([], "Cannot continue: no messages in context"),
        (
            [user("q"), AssistantMessage(content=[TextContent(text="a")])],
            "Cannot continue from message role: assistant",
        ),
    ],
)
async def test_continue_errors_are_raised_before_any_event(messages: list[Any], text: str) -> None:
    seen: list[Any] = []
    faux = FauxProvider([faux_response("never")])
    context = AgentContext(messages=list(messages))
    with pytest.raises(ValueError) as info:
        await run_agent_loop_continue(context, config(), seen.append, stream_fn=faux)
    assert str(info.value) == text
    with pytest.raises(ValueError) as info:
        async with agent_loop_continue(context, config(), stream_fn=faux):
            raise AssertionError("the block must not be entered")
    assert str(info.value) == text
    assert seen == [] and faux.calls == []


# --- the stream function ------------------------------------------------------------------------


@pytest.fixture
def no_default_stream_fn() -> Any:
    """Run a test with no default stream function; restore whatever was set."""
    saved = get_default_stream_fn()
    set_default_stream_fn(None)
    yield
    set_default_stream_fn(saved)


@pytest.mark.usefixtures("no_default_stream_fn")
async def test_missing_stream_function_is_raised_by_every_entry_point() -> None:
    assert get_default_stream_fn() is None
    seen: list[Any] = []
    context = AgentContext(messages=[user("q")])
    with pytest.raises(ValueError) as info:
        await run_agent_loop([user("a")], AgentContext(), config(), seen.append)
    assert str(info.value) == NO_STREAM_FN
    with pytest.raises(ValueError) as info:
        await run_agent_loop_continue(context, config(), seen.append)
    assert str(info.value) == NO_STREAM_FN
    entered = False
    with pytest.raises(ValueError) as info:
        async with agent_loop([user("a")], AgentContext(), config()):
            entered = True
    assert str(info.value) == NO_STREAM_FN
    with pytest.raises(ValueError) as info:
        async with agent_loop_continue(context, config()):
            entered = True
    assert str(info.value) == NO_STREAM_FN
    assert not entered and seen == []


@pytest.mark.usefixtures("no_default_stream_fn")
async def test_default_stream_function_is_used_and_none_clears_it() -> None:
    faux = FauxProvider([faux_response("one"), faux_response("two")])
    set_default_stream_fn(faux)
    try:
        assert get_default_stream_fn() is faux
        messages = await run_agent_loop([user("a")], AgentContext(), config())
        assert text_of(messages[-1]) == "one"
        async with agent_loop([user("b")], AgentContext(), config()) as events:
            async for _ in events:
                pass
            assert text_of((await events.result())[-1]) == "two"
        # an explicit stream_fn wins over the default
        other = FauxProvider([faux_response("explicit")])
        messages = await run_agent_loop([user("c")], AgentContext(), config(), stream_fn=other)
        assert text_of(messages[-1]) == "explicit"
    finally:
        set_default_stream_fn(None)
    assert get_default_stream_fn() is None
    with pytest.raises(ValueError, match="No stream function"):
        await run_agent_loop([user("a")], AgentContext(), config())


async def test_model_call_order_and_values() -> None:
    """transform_context, then convert_to_llm, then get_api_key(provider), then the stream
    function with the options of the config (docs/reference.md#the-model-call)."""
    log: list[Any] = []
    extra = user("added by transform")
    faux = FauxProvider([faux_response("ok")])
    signal_seen: list[Any] = []

    async def transform(messages: list[Any], signal: Any) -> list[Any]:
        log.append(("transform", [text_of(m) for m in messages]))
        signal_seen.append(signal)
        return [*messages, extra]

    def convert(messages: list[Any]) -> list[Any]:
        log.append(("convert", [text_of(m) for m in messages]))
        return messages[1:]

    async def get_api_key(provider: str) -> str:
        log.append(("api_key", provider))
        return "key-from-hook"

    def stream_fn(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        log.append(("stream", model.id, [text_of(m) for m in context.messages]))
        log.append(options)
        return faux(model, context, options)

    def on_payload(payload: Any) -> None:
        pass

    cfg = config(
        transform_context=transform,
        convert_to_llm=convert,
        get_api_key=get_api_key,
        api_key="config-key",
        reasoning="high",
        session_id="s-1",
        thinking_budgets={"high": 1000},
        transport="sse",
        max_retry_delay_ms=50,
        temperature=0.5,
        max_tokens=99,
        headers={"x": "y"},
        on_payload=on_payload,
    )
    context = AgentContext(messages=[user("old")], tools=[make_tool("t")])

    controller = AbortController()
    await run([user("new")], context, cfg, stream_fn, signal=controller.signal)
    options = log.pop()
    assert log == [
        ("transform", ["old", "new"]),
        ("convert", ["old", "new", "added by transform"]),
        ("api_key", "faux"),
        ("stream", "faux-1", ["new", "added by transform"]),
    ]
    assert signal_seen == [controller.signal]
    assert isinstance(options, StreamOptions)
    assert options.api_key == "key-from-hook"
    assert options.signal is controller.signal
    assert options.reasoning == "high"
    assert options.session_id == "s-1"
    assert options.thinking_budgets == {"high": 1000}
    assert options.transport == "sse"
    assert options.max_retry_delay_ms == 50
    assert options.temperature == 0.5
    assert options.max_tokens == 99
    assert options.headers == {"x": "y"}
    assert options.on_payload is on_payload
    assert faux.calls[0].tools == context.tools


@pytest.mark.parametrize("hook_returns", [None, ""])
async def test_api_key_falls_back_to_config_when_the_hook_gives_none(hook_returns: Any) -> None:
    keys: list[Any] = []

    def stream_fn(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        keys.append(options.api_key)
        return FauxProvider([faux_response("ok")])(model, context, options)

    cfg = config(get_api_key=lambda provider: hook_returns, api_key="fallback")
    await run([user("a")], AgentContext(), cfg, stream_fn)
    await run([user("a")], AgentContext(), config(api_key="plain"), stream_fn)
    await run([user("a")], AgentContext(), config(), stream_fn)
    assert keys == ["fallback", "plain", None]


def _msg(**kwargs: Any) -> AssistantMessage:
    return AssistantMessage(api="faux-api", provider="faux", model="faux-1", **kwargs)


async def test_deltas_before_start_are_dropped() -> None:
    partial = _msg(stop_reason="pending", content=[TextContent(text="ab")])
    final = _msg(content=[TextContent(text="ab")])
    stream_fn = events_stream(
        TextStart(content_index=0, partial=partial),
        TextDelta(content_index=0, delta="a", partial=partial),
        StreamStart(partial=partial),
        TextDelta(content_index=0, delta="b", partial=partial),
        TextEnd(content_index=0, content="ab", partial=partial),
        StreamDone(reason="stop", message=final),
    )
    r = await run([user("a")], AgentContext(), config(), stream_fn)
    assert r.summary(updates=True)[4:8] == [
        "message_start:assistant",
        "message_update:text_delta",
        "message_update:text_end",
        "message_end:assistant:stop",
    ]
    assert r.of_type("message_start")[1].message is partial
    assert r.messages[-1] is final
    assert r.of_type("turn_end")[0].message is final


async def test_without_start_message_start_comes_at_the_terminal_event() -> None:
    partial = _msg(stop_reason="pending")
    final = _msg(content=[TextContent(text="x")])
    stream_fn = events_stream(
        TextDelta(content_index=0, delta="x", partial=partial),
        StreamDone(reason="stop", message=final),
    )
    r = await run([user("a")], AgentContext(), config(), stream_fn)
    assert r.summary(updates=True) == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant:stop",
        "turn_end",
        "agent_end:completed",
    ]
    assert r.events[4].message is final and r.events[5].message is final


async def test_faux_provider_without_start_event() -> None:
    faux = FauxProvider([faux_response("hello")], send_start=False)
    r = await run([user("a")], AgentContext(), config(), faux)
    assert r.summary(updates=True)[4:] == [
        "message_start:assistant",
        "message_end:assistant:stop",
        "turn_end",
        "agent_end:completed",
    ]
    assert text_of(r.messages[-1]) == "hello"


# --- stop_reason error / aborted ends the run (docs/reference.md#error-and-aborted-messages) ------


def _counting_config(calls: list[str]) -> AgentLoopConfig:
    def hook(name: str) -> Any:
        def called(*args: Any) -> Any:
            calls.append(name)
            return None

        return called

    return config(
        before_tool_call=hook("before"),
        after_tool_call=hook("after"),
        prepare_next_turn=hook("prepare"),
        should_stop_after_turn=hook("should_stop"),
        get_steering_messages=hook("steering"),
        get_follow_up_messages=hook("follow_up"),
    )


@pytest.mark.parametrize(("stop_reason", "reason"), [("error", "error"), ("aborted", "aborted")])
async def test_error_or_aborted_stop_reason_ends_the_run_without_running_tools(
    stop_reason: Any, reason: str
) -> None:
    calls: list[str] = []
    executed: list[str] = []

    async def execute(*args: Any) -> Any:
        executed.append("t")
        raise AssertionError("must not run")

    faux = FauxProvider(
        [
            faux_response(
                "partial",
                tool_calls=[faux_tool_call("t", {"x": 1}, id="c1")],
                stop_reason=stop_reason,
                error_message="model broke",
            ),
            faux_response("never"),
        ]
    )
    context = AgentContext(tools=[make_tool("t", execute)])
    r = await run([user("a")], context, _counting_config(calls), faux)
    assert r.summary() == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        f"message_end:assistant:{stop_reason}",
        "turn_end",
        f"agent_end:{reason}",
    ]
    # only the first steering poll (before the model call) happened; no hook, no tool
    assert calls == ["steering"]
    assert executed == []
    assert len(faux.calls) == 1
    assert r.of_type("turn_end")[0].tool_results == []
    assert r.messages[-1].error_message == "model broke"


async def test_the_stop_reason_decides_not_the_event_type() -> None:
    """A ``done`` event whose message says ``stop_reason="error"`` ends the run as an error;
    an ``error`` event whose message says ``"stop"`` is a normal end."""
    failed = _msg(
        stop_reason="error",
        error_message="late failure",
        content=[faux_tool_call("t", id="c1")],
    )
    r = await run(
        [user("a")],
        AgentContext(tools=[make_tool("t")]),
        config(),
        events_stream(StreamDone(reason="toolUse", message=failed)),
    )
    assert r.summary()[-3:] == ["message_end:assistant:error", "turn_end", "agent_end:error"]
    fine = _msg(content=[TextContent(text="fine")])
    r = await run(
        [user("a")],
        AgentContext(),
        config(),
        events_stream(StreamError(reason="error", error=fine)),
    )
    assert r.summary()[-3:] == ["message_end:assistant:stop", "turn_end", "agent_end:completed"]


async def test_faux_error_and_exhausted_script() -> None:

    faux = FauxProvider([FauxError("rate limited")])
    r = await run([user("a")], AgentContext(), config(), faux)
    last = r.messages[-1]
    assert (last.stop_reason, last.error_message) == ("error", "rate limited")
    assert last.content == [TextContent(text="")]
    assert r.end.reason == "error"
    r = await run([user("a")], AgentContext(), config(), faux)
    assert r.messages[-1].error_message == "No more faux responses queued"


async def test_faux_ids_are_numbered_per_provider_not_per_process() -> None:
    """A tool call scripted without an id gets ``call_N`` from the provider that plays it: the
    same script gives the same ids whatever ran before it in the process."""

    def script() -> list[Any]:
        return [
            faux_response(tool_calls=[faux_tool_call("t", {"n": 1})]),
            faux_response(tool_calls=[faux_tool_call("t", id="mine"), faux_tool_call("t")]),
            faux_response("done"),
        ]

    async def ids(items: list[Any]) -> list[str]:
        context = AgentContext(tools=[make_tool("t")])
        r = await run([user("a")], context, config(), FauxProvider(items))
        return [m.tool_call_id for m in r.messages if m.role == "toolResult"]

    first = script()
    assert [c.id for m in first for c in m.content if c.type == "toolCall"] == ["", "mine", ""]
    assert await ids(first) == ["call_1", "mine", "call_3"]
    faux_tool_call("t")  # built, never played: takes no number
    assert await ids(script()) == ["call_1", "mine", "call_3"]
    assert [c.id for m in first for c in m.content if c.type == "toolCall"] == ["", "mine", ""]


# --- agent_loop (the context manager) -------------------------------------------------------------


async def test_agent_loop_yields_the_same_events_and_result() -> None:
    script = [
        faux_response(tool_calls=[faux_tool_call("t", id="c1")]),
        faux_response("done"),
    ]
    context = AgentContext(tools=[make_tool("t")])
    expected = await run([user("a")], context, config(), FauxProvider(list(script)))
    snapshot = ContextSnapshot(context)
    seen: list[Any] = []
    async with agent_loop([user("a")], context, config(), stream_fn=FauxProvider(script)) as events:
        async for event in events:
            seen.append(event)
        messages = await events.result()
    snapshot.assert_unchanged()
    check_grammar(seen)
    assert summarize(seen, updates=True) == expected.summary(updates=True)
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    assert messages == seen[-1].messages


async def test_agent_loop_result_without_iterating() -> None:
    async with agent_loop(
        [user("a")], AgentContext(), config(), stream_fn=FauxProvider([faux_response("x")])
    ) as events:
        messages = await events.result()
    assert [m.role for m in messages] == ["user", "assistant"]


async def test_agent_loop_continue_runs() -> None:
    context = AgentContext(messages=[user("q")])
    faux = FauxProvider([faux_response("a")])
    async with agent_loop_continue(context, config(), stream_fn=faux) as events:
        seen = [event async for event in events]
    check_grammar(seen)
    assert summarize(seen)[2:4] == ["message_start:assistant", "message_end:assistant:stop"]
    assert len(context.messages) == 1


async def test_leaving_the_block_early_aborts_the_run_and_closes_the_stream(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream = BlockingStream("Hel")
    seen: list[Any] = []
    with anyio.fail_after(10):
        async with agent_loop([user("a")], AgentContext(), config(), stream_fn=stream) as events:
            async for event in events:
                seen.append(event)
                if event.type == "message_update" and event.assistant_message_event.type == (
                    "text_delta"
                ):
                    break
        messages = await events.result()
    assert stream.closed
    assert summarize(seen, updates=True)[-3:] == [
        "message_start:assistant",
        "message_update:text_start",
        "message_update:text_delta",
    ]
    last = messages[-1]
    assert (last.stop_reason, last.error_message) == ("aborted", "Request was aborted")
    assert text_of(last) == "Hel"
    # leaving early is normal use: nothing is logged as an error
    assert [r for r in caplog.records if r.name == "agentcore_fsm"] == []


async def test_an_error_in_the_block_propagates_as_is_and_ends_the_run() -> None:
    stream = BlockingStream()
    with anyio.fail_after(10), pytest.raises(KeyError) as info:
        async with agent_loop([user("a")], AgentContext(), config(), stream_fn=stream) as events:
            async for event in events:
                if event.type == "message_update":
                    raise KeyError("mine")
    assert info.value.args == ("mine",)
    assert stream.closed
    messages = await events.result()
    assert messages[-1].stop_reason == "aborted"


async def test_agent_loop_honours_the_callers_signal() -> None:

    stream = BlockingStream()
    controller = AbortController()
    seen: list[Any] = []
    with anyio.fail_after(10):
        async with agent_loop(
            [user("a")], AgentContext(), config(), signal=controller.signal, stream_fn=stream
        ) as events:

            async def abort_when_streaming() -> None:
                await stream.started.wait()
                controller.abort()

            async with anyio.create_task_group() as tg:
                tg.start_soon(abort_when_streaming)
                async for event in events:
                    seen.append(event)
    check_grammar(seen)
    assert summarize(seen)[-3:] == [
        "message_end:assistant:aborted",
        "turn_end",
        "agent_end:aborted",
    ]


async def test_returned_messages_are_in_creation_order_with_tools() -> None:
    faux = FauxProvider(
        [
            faux_response(tool_calls=[faux_tool_call("t", id="c1"), faux_tool_call("t", id="c2")]),
            faux_response("end"),
        ]
    )
    r = await run([user("a")], AgentContext(tools=[make_tool("t")]), config(), faux)
    assert [(m.role, getattr(m, "tool_call_id", None)) for m in r.messages] == [
        ("user", None),
        ("assistant", None),
        ("toolResult", "c1"),
        ("toolResult", "c2"),
        ("assistant", None),
    ]
    # the second model call saw the first turn in full
    roles = [m.role for m in faux.calls[1].messages]
    assert roles == ["user", "assistant", "toolResult", "toolResult"]
    assert isinstance(r.messages[0], UserMessage)
