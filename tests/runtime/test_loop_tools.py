"""Tool calls through the public async API (docs/reference.md#tool-calls), on trio and asyncio."""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
import pytest
from helpers import MODEL, make_tool, run, text_of, text_result, user
from pydantic import BaseModel

from agentcore_fsm import (
    AbortController,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentToolResult,
    AssistantMessage,
    BeforeToolCallResult,
    ImageContent,
    TextContent,
    ToolResultMessage,
)
from agentcore_fsm.core.messages import Usage
from agentcore_fsm.core.tools import AfterToolCallContext, BeforeToolCallContext
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

pytestmark = pytest.mark.anyio

TRUNCATED = (
    'Tool call "{}" was not executed: the response hit the output token limit, so its '
    "arguments may be truncated. Re-issue the tool call with complete arguments."
)


def config(**kwargs: Any) -> AgentLoopConfig:
    return AgentLoopConfig(model=MODEL, **kwargs)


def calls_then_done(*calls: Any, stop_reason: Any = None) -> FauxProvider:
    return FauxProvider(
        [
            faux_response(tool_calls=list(calls), stop_reason=stop_reason),
            faux_response("done"),
        ]
    )


def result_message(r: Any, call_id: str) -> ToolResultMessage:
    (message,) = [
        m
        for m in r.messages
        if getattr(m, "role", None) == "toolResult" and m.tool_call_id == call_id
    ]
    assert isinstance(message, ToolResultMessage)
    return message


def assert_error_result(r: Any, call_id: str, text: str) -> None:
    """An error result made by the loop: one text block, no details, is_error everywhere."""
    message = result_message(r, call_id)
    assert message.is_error is True
    assert message.content == [TextContent(text=text)]
    assert message.details is None
    (end,) = [e for e in r.of_type("tool_execution_end") if e.tool_call_id == call_id]
    assert end.is_error is True
    assert end.result.content == [TextContent(text=text)]
    assert end.result.details is None


TURN_TAIL = ["turn_end", "turn_start", "message_start:assistant", "message_end:assistant:stop"]
RUN_TAIL = [*TURN_TAIL, "turn_end", "agent_end:completed"]
HEAD = [
    "agent_start",
    "turn_start",
    "message_start:user",
    "message_end:user",
    "message_start:assistant",
    "message_end:assistant:toolUse",
]


# --- parallel and sequential -------------------------------------------------------------------


async def test_parallel_ends_in_completion_order_and_results_in_source_order() -> None:
    """c2 is made to finish first: its tool_execution_end comes first, but the result messages
    and turn_end.tool_results are in source order. Both run at the same time."""
    c1_started = anyio.Event()
    c2_ended = anyio.Event()

    async def slow(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        c1_started.set()
        await c2_ended.wait()
        return text_result("slow result")

    async def fast(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        await c1_started.wait()  # proves both run at once
        return text_result("fast result")

    def on_event(event: Any) -> None:
        if event.type == "tool_execution_end" and event.tool_call_id == "c2":
            c2_ended.set()

    context = AgentContext(tools=[make_tool("slow", slow), make_tool("fast", fast)])
    faux = calls_then_done(faux_tool_call("slow", id="c1"), faux_tool_call("fast", id="c2"))
    with anyio.fail_after(10):
        r = await run([user("go")], context, config(), faux, on_event=on_event)
    assert r.summary() == [
        *HEAD,
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c2",
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        *RUN_TAIL,
    ]
    turn_end = r.of_type("turn_end")[0]
    assert [m.tool_call_id for m in turn_end.tool_results] == ["c1", "c2"]
    assert [text_of(m) for m in turn_end.tool_results] == ["slow result", "fast result"]
    assert [getattr(m, "tool_call_id", m.role) for m in r.messages] == [
        "user",
        "assistant",
        "c1",
        "c2",
        "assistant",
    ]
    # the second model call saw both results, in source order
    assert [getattr(m, "tool_call_id", None) for m in faux.calls[1].messages] == [
        None,
        None,
        "c1",
        "c2",
    ]


SEQUENTIAL = [
    *HEAD,
    "tool_execution_start:c1",
    "tool_execution_end:c1",
    "message_start:toolResult:c1",
    "message_end:toolResult:c1",
    "tool_execution_start:c2",
    "tool_execution_end:c2",
    "message_start:toolResult:c2",
    "message_end:toolResult:c2",
    *RUN_TAIL,
]


def _sequence_tools(log: list[str], mode_of_b: Any = None) -> list[Any]:
    def tool(name: str, mode: Any = None) -> Any:
        async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
            log.append(f"begin {tool_call_id}")
            for _ in range(3):
                await anyio.sleep(0)
            log.append(f"end {tool_call_id}")
            return text_result(tool_call_id)

        return make_tool(name, execute, execution_mode=mode)

    return [tool("a"), tool("b", mode_of_b)]


async def test_sequential_by_config_runs_one_call_after_another() -> None:
    log: list[str] = []
    before: list[str] = []

    def before_hook(ctx: BeforeToolCallContext, signal: Any) -> None:
        before.append(ctx.tool_call.id)
        log.append(f"before {ctx.tool_call.id}")

    context = AgentContext(tools=_sequence_tools(log))
    faux = calls_then_done(faux_tool_call("a", id="c1"), faux_tool_call("b", id="c2"))
    r = await run(
        [user("go")],
        context,
        config(tool_execution="sequential", before_tool_call=before_hook),
        faux,
    )
    assert r.summary() == SEQUENTIAL
    assert log == ["before c1", "begin c1", "end c1", "before c2", "begin c2", "end c2"]


async def test_one_sequential_tool_makes_the_batch_sequential() -> None:
    log: list[str] = []
    context = AgentContext(tools=_sequence_tools(log, mode_of_b="sequential"))
    faux = calls_then_done(faux_tool_call("a", id="c1"), faux_tool_call("b", id="c2"))
    r = await run([user("go")], context, config(), faux)
    assert r.summary() == SEQUENTIAL
    assert log == ["begin c1", "end c1", "begin c2", "end c2"]


async def test_a_sequential_tool_that_is_not_called_changes_nothing() -> None:
    log: list[str] = []
    tools = _sequence_tools(log)
    tools.append(make_tool("lonely", execution_mode="sequential"))
    faux = calls_then_done(faux_tool_call("a", id="c1"), faux_tool_call("b", id="c2"))
    r = await run([user("go")], AgentContext(tools=tools), config(), faux)
    # parallel: both start before either ends (the order of the ends is the completion order)
    assert r.summary()[6:8] == ["tool_execution_start:c1", "tool_execution_start:c2"]
    assert sorted(r.summary()[8:10]) == ["tool_execution_end:c1", "tool_execution_end:c2"]
    assert sorted(log[:2]) == ["begin c1", "begin c2"]


async def test_per_tool_parallel_mode_does_not_override_sequential_config() -> None:
    log: list[str] = []
    tools = [make_tool(t.name, t.execute, execution_mode="parallel") for t in _sequence_tools(log)]
    faux = calls_then_done(faux_tool_call("a", id="c1"), faux_tool_call("b", id="c2"))
    r = await run(
        [user("go")], AgentContext(tools=tools), config(tool_execution="sequential"), faux
    )
    assert r.summary() == SEQUENTIAL


# --- immediate errors ---------------------------------------------------------------------------


async def test_unknown_tool_is_an_immediate_error_ended_at_once_in_parallel_mode() -> None:
    started = anyio.Event()

    async def known(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        started.set()
        return text_result("fine")

    faux = calls_then_done(faux_tool_call("nope", id="c1"), faux_tool_call("known", id="c2"))
    after: list[str] = []
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("known", known)]),
        config(after_tool_call=lambda ctx, signal: after.append(ctx.tool_call.id)),
        faux,
    )
    assert r.summary() == [
        *HEAD,
        "tool_execution_start:c1",
        "tool_execution_end:c1:error",
        "tool_execution_start:c2",
        "tool_execution_end:c2",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        *RUN_TAIL,
    ]
    assert_error_result(r, "c1", "Tool nope not found")
    assert result_message(r, "c1").tool_name == "nope"
    assert after == ["c2"]  # not called for the immediate error
    assert r.of_type("tool_execution_start")[0].args == {}


SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
    "required": ["a", "b"],
}


async def test_validation_failure_text_for_a_json_schema() -> None:
    raw = {"a": "x", "extra": [1, "ü"]}
    executed: list[Any] = []
    tool = make_tool("calc", lambda *a: executed.append(a), parameters=SCHEMA)
    faux = calls_then_done(faux_tool_call("calc", raw, id="c1"))
    r = await run([user("go")], AgentContext(tools=[tool]), config(), faux)
    expected = "\n".join(
        [
            'Validation failed for tool "calc":',
            "  - a: must be integer, got string",
            "  - b: required property is missing",
            "",
            "Received arguments:",
            "{",
            '  "a": "x",',
            '  "extra": [',
            "    1,",
            '    "ü"',
            "  ]",
            "}",
        ]
    )
    assert_error_result(r, "c1", expected)
    assert executed == []
    assert r.summary()[6:10] == [
        "tool_execution_start:c1",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
    ]


async def test_valid_json_schema_arguments_reach_execute_as_the_dict() -> None:
    got: list[Any] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        got.append((tool_call_id, params))
        return text_result("ok")

    args = {"a": 1, "b": "two"}
    tool = make_tool("calc", execute, parameters=SCHEMA)
    r = await run(
        [user("go")],
        AgentContext(tools=[tool]),
        config(),
        calls_then_done(faux_tool_call("calc", args, id="c1")),
    )
    assert got == [("c1", args)]
    assert result_message(r, "c1").is_error is False


class CalcParams(BaseModel):
    a: int
    b: str


async def test_validation_failure_text_for_a_pydantic_model() -> None:
    tool = make_tool("calc", parameters=CalcParams)
    faux = calls_then_done(faux_tool_call("calc", {"a": "x"}, id="c1"))
    r = await run([user("go")], AgentContext(tools=[tool]), config(), faux)
    expected = "\n".join(
        [
            'Validation failed for tool "calc":',
            "  - a: Input should be a valid integer, unable to parse string as an integer",
            "  - b: Field required",
            "",
            "Received arguments:",
            "{",
            '  "a": "x"',
            "}",
        ]
    )
    assert_error_result(r, "c1", expected)


async def test_pydantic_parameters_reach_execute_as_an_instance() -> None:
    got: list[Any] = []

    def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        got.append(params)
        return text_result(f"{params.a}{params.b}")

    tool = make_tool("calc", execute, parameters=CalcParams)
    r = await run(
        [user("go")],
        AgentContext(tools=[tool]),
        config(),
        calls_then_done(faux_tool_call("calc", {"a": "7", "b": "x"}, id="c1")),
    )
    assert got == [CalcParams(a=7, b="x")]
    assert text_of(result_message(r, "c1")) == "7x"
    # the start event carries the raw arguments; updates and hooks see the validated ones
    assert r.of_type("tool_execution_start")[0].args == {"a": "7", "b": "x"}


async def test_prepare_arguments_runs_before_validation() -> None:
    got: list[Any] = []
    seen_raw: list[Any] = []

    def prepare(raw: dict[str, Any]) -> dict[str, Any]:
        seen_raw.append(dict(raw))
        raw["scribbled"] = True  # mutating its input must not reach the transcript
        return {"a": int(raw["a_text"]), "b": raw.get("b", "default")}

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        got.append(params)
        return text_result("ok")

    tool = make_tool("calc", execute, parameters=SCHEMA, prepare_arguments=prepare)
    raw = {"a_text": "12"}
    r = await run(
        [user("go")],
        AgentContext(tools=[tool]),
        config(),
        calls_then_done(faux_tool_call("calc", raw, id="c1")),
    )
    assert seen_raw == [raw]
    assert got == [{"a": 12, "b": "default"}]
    assert r.of_type("tool_execution_start")[0].args == {"a_text": "12"}
    assert r.messages[1].content[0].arguments == {"a_text": "12"}


async def test_prepared_arguments_are_what_validation_reports() -> None:
    """Decision: the "Received arguments" of a validation failure are the arguments that were
    validated, i.e. after ``prepare_arguments``."""
    tool = make_tool(
        "calc", parameters=SCHEMA, prepare_arguments=lambda raw: {"a": raw["n"], "b": 3}
    )
    r = await run(
        [user("go")],
        AgentContext(tools=[tool]),
        config(),
        calls_then_done(faux_tool_call("calc", {"n": 1}, id="c1")),
    )
    text = text_of(result_message(r, "c1"))
    assert text.endswith('Received arguments:\n{\n  "a": 1,\n  "b": 3\n}')
    assert "  - b: must be string, got integer" in text


async def test_prepare_arguments_raising_is_a_tool_error() -> None:
    def prepare(raw: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("cannot prepare")

    tool = make_tool("calc", parameters=SCHEMA, prepare_arguments=prepare)
    r = await run(
        [user("go")],
        AgentContext(tools=[tool]),
        config(),
        calls_then_done(faux_tool_call("calc", {}, id="c1")),
    )
    assert_error_result(r, "c1", "cannot prepare")
    assert r.end.reason == "completed"


# --- before_tool_call --------------------------------------------------------------------------


async def test_before_hook_sees_the_call_and_passing_lets_it_run() -> None:
    seen: list[BeforeToolCallContext] = []
    signals: list[Any] = []

    last_in_context: list[Any] = []

    async def before(ctx: BeforeToolCallContext, signal: Any) -> None:
        seen.append(ctx)
        signals.append(signal)
        last_in_context.append(ctx.context.messages[-1])

    context = AgentContext(tools=[make_tool("t")])

    controller = AbortController()
    r = await run(
        [user("go")],
        context,
        config(before_tool_call=before),
        calls_then_done(faux_tool_call("t", {"k": "v"}, id="c1")),
        signal=controller.signal,
    )
    (ctx,) = seen
    assistant = r.messages[1]
    assert ctx.assistant_message is assistant
    assert ctx.tool_call is assistant.content[0]
    assert ctx.args == {"k": "v"}
    assert last_in_context == [assistant]  # the run's context, holding the message
    assert ctx.context is not context
    assert signals == [controller.signal]
    assert text_of(result_message(r, "c1")) == "t done"


async def test_before_hook_may_mutate_args_without_revalidation() -> None:
    got: list[Any] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        got.append(dict(params))
        return text_result("ok")

    def before(ctx: BeforeToolCallContext, signal: Any) -> None:
        ctx.args["a"] = "not an integer any more"

    tool = make_tool("calc", execute, parameters=SCHEMA)
    r = await run(
        [user("go")],
        AgentContext(tools=[tool]),
        config(before_tool_call=before),
        calls_then_done(faux_tool_call("calc", {"a": 1, "b": "x"}, id="c1")),
    )
    assert got == [{"a": "not an integer any more", "b": "x"}]
    assert result_message(r, "c1").is_error is False
    # the transcript keeps what the model sent
    assert r.messages[1].content[0].arguments == {"a": 1, "b": "x"}
    assert r.of_type("tool_execution_start")[0].args == {"a": 1, "b": "x"}


@pytest.mark.parametrize(
    ("block", "text"),
    [
        (BeforeToolCallResult(block=True, reason="not allowed here"), "not allowed here"),
        (BeforeToolCallResult(block=True), "Tool execution was blocked"),
        (BeforeToolCallResult(block=True, reason=""), "Tool execution was blocked"),
        ({"block": True, "reason": "as a dict"}, "as a dict"),
    ],
)
async def test_before_hook_blocks(block: Any, text: str) -> None:
    executed: list[str] = []
    after: list[str] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        executed.append(tool_call_id)
        return text_result("ran")

    def before(ctx: BeforeToolCallContext, signal: Any) -> Any:
        return block if ctx.tool_call.id == "c1" else BeforeToolCallResult(block=False)

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        config(before_tool_call=before, after_tool_call=lambda c, s: after.append(c.tool_call.id)),
        calls_then_done(faux_tool_call("t", id="c1"), faux_tool_call("t", id="c2")),
    )
    assert_error_result(r, "c1", text)
    assert executed == ["c2"] and after == ["c2"]
    assert r.summary()[6:10] == [
        "tool_execution_start:c1",
        "tool_execution_end:c1:error",
        "tool_execution_start:c2",
        "tool_execution_end:c2",
    ]


async def test_before_hook_raising_is_a_tool_error_not_a_run_failure() -> None:
    async def before(ctx: BeforeToolCallContext, signal: Any) -> None:
        raise PermissionError("hook says no")

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t")]),
        config(before_tool_call=before),
        calls_then_done(faux_tool_call("t", id="c1")),
    )
    assert_error_result(r, "c1", "hook says no")
    assert r.summary() == [
        *HEAD,
        "tool_execution_start:c1",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        *RUN_TAIL,
    ]


# --- execute ---------------------------------------------------------------------------------


async def test_tool_raising_becomes_an_error_result_and_after_hook_sees_it() -> None:
    async def boom(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        raise RuntimeError("disk on fire")

    seen: list[AfterToolCallContext] = []

    def after(ctx: AfterToolCallContext, signal: Any) -> None:
        seen.append(ctx)

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", boom)]),
        config(after_tool_call=after),
        calls_then_done(faux_tool_call("t", {"q": 1}, id="c1")),
    )
    assert_error_result(r, "c1", "disk on fire")
    (ctx,) = seen
    assert ctx.is_error is True
    assert ctx.result.content == [TextContent(text="disk on fire")]
    assert ctx.args == {"q": 1}
    assert ctx.assistant_message is r.messages[1]
    assert r.end.reason == "completed"


async def test_result_fields_are_copied_to_the_message_and_terminate_is_not_stored() -> None:
    usage = Usage(input=3, output=4, total_tokens=7)
    image = ImageContent(data="aGk=", mime_type="image/png")

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return AgentToolResult(
            content=[TextContent(text="see"), image],
            details={"rows": 2},
            usage=usage,
            added_tool_names=["extra"],
            terminate=False,
        )

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        config(),
        calls_then_done(faux_tool_call("t", id="c1")),
    )
    message = result_message(r, "c1")
    assert message.content == [TextContent(text="see"), image]
    assert message.details == {"rows": 2}
    assert message.usage == usage
    assert message.added_tool_names == ["extra"]
    assert message.is_error is False
    assert message.tool_name == "t"
    assert "terminate" not in message.model_dump()
    end = r.of_type("tool_execution_end")[0]
    assert end.result.terminate is False and end.result.details == {"rows": 2}


async def test_a_dict_result_is_validated_and_a_wrong_type_is_an_error() -> None:
    """Decision: ``execute`` may return a mapping in the shape of an AgentToolResult; any other
    type is a tool error naming what came back."""

    async def as_dict(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return {"content": [{"type": "text", "text": "from a dict"}], "details": 1}

    async def wrong(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return "just text"

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("d", as_dict), make_tool("w", wrong)]),
        config(),
        calls_then_done(faux_tool_call("d", id="c1"), faux_tool_call("w", id="c2")),
    )
    assert text_of(result_message(r, "c1")) == "from a dict"
    assert result_message(r, "c1").details == 1
    assert_error_result(r, "c2", "Tool w returned str; expected an AgentToolResult")


async def test_an_invalid_result_mapping_is_an_error_not_a_crash() -> None:
    async def bad(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return {"content": "not a list"}

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", bad)]),
        config(),
        calls_then_done(faux_tool_call("t", id="c1")),
    )
    assert_error_result(
        r, "c1", "Tool t returned an invalid AgentToolResult: content: Input should be a valid list"
    )
    assert r.end.reason == "completed"


async def test_an_invalid_update_raises_in_the_tool_that_sent_it() -> None:
    """Decision: ``on_update`` checks its argument; a wrong value raises in the caller (the
    tool), so the run goes on and the tool decides what to do about it."""
    raised: list[str] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        try:
            on_update("not a result")
        except ValueError as exc:
            raised.append(type(exc).__name__)
        on_update({"content": [{"type": "text", "text": "as a dict"}]})
        return text_result("ok")

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        config(),
        calls_then_done(faux_tool_call("t", id="c1")),
    )
    assert raised == ["ValidationError"]
    (update,) = r.of_type("tool_execution_update")
    assert text_of(update.partial_result) == "as a dict"
    assert text_of(result_message(r, "c1")) == "ok"


async def test_is_error_on_a_result_is_honoured() -> None:
    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return AgentToolResult(
            content=[TextContent(text="soft failure")], details={"x": 1}, is_error=True
        )

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        config(),
        calls_then_done(faux_tool_call("t", id="c1")),
    )
    message = result_message(r, "c1")
    assert message.is_error is True and message.details == {"x": 1}
    assert r.summary()[7] == "tool_execution_end:c1:error"
    assert r.end.reason == "completed"


async def test_updates_from_an_async_tool_come_between_start_and_end() -> None:
    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        on_update(text_result("25%"))
        await anyio.sleep(0)
        on_update(AgentToolResult(content=[TextContent(text="50%")], details={"p": 50}))
        return text_result("100%")

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        config(),
        calls_then_done(faux_tool_call("t", {"n": 1}, id="c1")),
    )
    assert r.summary()[6:10] == [
        "tool_execution_start:c1",
        "tool_execution_update:c1",
        "tool_execution_update:c1",
        "tool_execution_end:c1",
    ]
    first, second = r.of_type("tool_execution_update")
    assert text_of(first.partial_result) == "25%"
    assert second.partial_result.details == {"p": 50}
    assert (first.tool_name, first.args) == ("t", {"n": 1})


async def test_a_sync_tool_runs_in_a_worker_thread_and_may_update_from_it() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        threads.append(threading.get_ident())
        on_update(text_result("from the thread"))
        return text_result("sync done")

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        config(),
        calls_then_done(faux_tool_call("t", id="c1")),
    )
    assert threads and threads[0] != loop_thread
    assert r.summary()[6:9] == [
        "tool_execution_start:c1",
        "tool_execution_update:c1",
        "tool_execution_end:c1",
    ]
    assert text_of(r.of_type("tool_execution_update")[0].partial_result) == "from the thread"
    assert text_of(result_message(r, "c1")) == "sync done"


async def test_updates_after_a_call_settled_are_ignored() -> None:
    """c1 keeps its ``on_update`` and returns; c2 calls it once c1 has ended (ignored), then
    its own (emitted). After the run, calling it again does nothing either."""
    kept: list[Any] = []
    c1_ended = anyio.Event()

    async def first(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        kept.append(on_update)
        return text_result("first")

    async def second(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        await c1_ended.wait()
        kept[0](text_result("late"))
        on_update(text_result("mine"))
        return text_result("second")

    def on_event(event: Any) -> None:
        if event.type == "tool_execution_end" and event.tool_call_id == "c1":
            c1_ended.set()

    with anyio.fail_after(10):
        r = await run(
            [user("go")],
            AgentContext(tools=[make_tool("a", first), make_tool("b", second)]),
            config(),
            calls_then_done(faux_tool_call("a", id="c1"), faux_tool_call("b", id="c2")),
            on_event=on_event,
        )
    assert r.summary()[6:11] == [
        "tool_execution_start:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c1",
        "tool_execution_update:c2",
        "tool_execution_end:c2",
    ]
    (update,) = r.of_type("tool_execution_update")
    assert text_of(update.partial_result) == "mine"
    kept[0](text_result("after the run"))  # no error, no event
    assert len(r.of_type("tool_execution_update")) == 1


# --- after_tool_call -------------------------------------------------------------------------


async def test_after_hook_overrides_each_given_field() -> None:
    usage = Usage(output=9)

    def after(ctx: AfterToolCallContext, signal: Any) -> Any:
        assert ctx.is_error is False
        assert text_of(ctx.result) == "original"
        if ctx.tool_call.id == "c1":
            return AfterToolCallResult(content=[TextContent(text="replaced")], is_error=True)
        if ctx.tool_call.id == "c2":
            return AfterToolCallResult(details={"new": True}, usage=usage)
        return None

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return text_result("original", details={"old": True})

    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        config(after_tool_call=after),
        calls_then_done(
            faux_tool_call("t", id="c1"), faux_tool_call("t", id="c2"), faux_tool_call("t", id="c3")
        ),
    )
    one, two, three = (result_message(r, c) for c in ("c1", "c2", "c3"))
    assert (text_of(one), one.details, one.is_error) == ("replaced", {"old": True}, True)
    assert (text_of(two), two.details, two.usage, two.is_error) == (
        "original",
        {"new": True},
        usage,
        False,
    )
    assert (text_of(three), three.details, three.is_error) == ("original", {"old": True}, False)
    ends = {e.tool_call_id: e for e in r.of_type("tool_execution_end")}
    assert ends["c1"].is_error is True and text_of(ends["c1"].result) == "replaced"


async def test_after_hook_can_clear_an_error_and_set_terminate() -> None:
    async def failing(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        raise ValueError("bad")

    async def after(ctx: AfterToolCallContext, signal: Any) -> Any:
        return {
            "content": [{"type": "text", "text": "recovered"}],
            "is_error": False,
            "terminate": True,
        }

    faux = calls_then_done(faux_tool_call("t", id="c1"))
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", failing)]),
        config(after_tool_call=after),
        faux,
    )
    message = result_message(r, "c1")
    assert (text_of(message), message.is_error) == ("recovered", False)
    assert r.end.reason == "stopped" and len(faux.calls) == 1


async def test_after_hook_raising_makes_an_error_result() -> None:
    def after(ctx: AfterToolCallContext, signal: Any) -> Any:
        raise LookupError("after broke")

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return text_result("fine", details={"d": 1}, terminate=True)

    faux = calls_then_done(faux_tool_call("t", id="c1"))
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        config(after_tool_call=after),
        faux,
    )
    assert_error_result(r, "c1", "after broke")
    # the error result replaced the terminating one: the run goes on
    assert len(faux.calls) == 2 and r.end.reason == "completed"


# --- terminate ---------------------------------------------------------------------------------


def _terminating(flag: Any) -> Any:
    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return text_result(tool_call_id, terminate=flag)

    return execute


async def test_a_batch_where_every_result_terminates_stops_the_run() -> None:
    faux = calls_then_done(faux_tool_call("t", id="c1"), faux_tool_call("t", id="c2"))
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("t", _terminating(True))]),
        config(tool_execution="sequential"),
        faux,
    )
    assert r.summary() == [
        *HEAD,
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c2",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        "turn_end",
        "agent_end:stopped",
    ]
    assert len(faux.calls) == 1


async def test_a_batch_where_only_some_results_terminate_goes_on() -> None:
    faux = calls_then_done(faux_tool_call("yes", id="c1"), faux_tool_call("no", id="c2"))
    tools = [make_tool("yes", _terminating(True)), make_tool("no", _terminating(None))]
    r = await run([user("go")], AgentContext(tools=tools), config(), faux)
    assert len(faux.calls) == 2
    assert r.summary()[-6:] == [*RUN_TAIL]


async def test_an_immediate_error_keeps_a_batch_from_terminating() -> None:
    faux = calls_then_done(faux_tool_call("yes", id="c1"), faux_tool_call("missing", id="c2"))
    r = await run(
        [user("go")], AgentContext(tools=[make_tool("yes", _terminating(True))]), config(), faux
    )
    assert len(faux.calls) == 2 and r.end.reason == "completed"


# --- "length" truncation ------------------------------------------------------------------------


async def test_length_stop_with_tool_calls_executes_none_and_goes_on() -> None:
    executed: list[str] = []
    hooks: list[str] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        executed.append(tool_call_id)
        return text_result("ran")

    faux = calls_then_done(
        faux_tool_call("write", {"text": "abc"}, id="c1"),
        faux_tool_call("other", id="c2"),
        stop_reason="length",
    )
    cfg = config(
        before_tool_call=lambda c, s: hooks.append("before"),
        after_tool_call=lambda c, s: hooks.append("after"),
    )
    r = await run(
        [user("go")],
        AgentContext(tools=[make_tool("write", execute), make_tool("other", execute)]),
        cfg,
        faux,
    )
    assert r.summary() == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant:length",
        "tool_execution_start:c1",
        "tool_execution_end:c1:error",
        "message_start:toolResult:c1",
        "message_end:toolResult:c1",
        "tool_execution_start:c2",
        "tool_execution_end:c2:error",
        "message_start:toolResult:c2",
        "message_end:toolResult:c2",
        *RUN_TAIL,
    ]
    assert_error_result(r, "c1", TRUNCATED.format("write"))
    assert_error_result(r, "c2", TRUNCATED.format("other"))
    assert executed == [] and hooks == []
    assert r.of_type("tool_execution_start")[0].args == {"text": "abc"}
    assert len(faux.calls) == 2


async def test_length_stop_without_tool_calls_ends_like_stop() -> None:
    faux = FauxProvider([faux_response("cut off", stop_reason="length"), faux_response("never")])
    r = await run([user("go")], AgentContext(), config(), faux)
    assert r.summary()[-3:] == ["message_end:assistant:length", "turn_end", "agent_end:completed"]
    assert len(faux.calls) == 1


async def test_tool_results_reach_the_next_model_call() -> None:
    seen: list[list[str]] = []

    def answer(context: Any) -> AssistantMessage:
        seen.append([json.dumps(text_of(m)) for m in context.messages])
        return faux_response("final")

    faux = FauxProvider(
        [faux_response(tool_calls=[faux_tool_call("t", id="c1")]), answer], chunk_size=50
    )
    await run([user("go")], AgentContext(tools=[make_tool("t")]), config(), faux)
    assert seen == [['"go"', '""', '"t done"']]
