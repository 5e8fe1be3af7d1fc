"""Exact replay of a durable run (agentcore_fsm.integrations.dbos), in this process: DBOS forks a
finished run from past its last step, so that every step is replayed from its recorded
outcome and none runs again; the fork must give the same messages, timestamps included (the
machine's clock readings are recorded), with no tool, hook or poll called again. A fork from
an earlier step runs the rest live and is still one well-formed run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import dbos  # noqa: F401  (the dbos extra is part of the test install: fail, never skip)
from dbos import DBOS

from agentcore_fsm import AgentLoopConfig, AgentTool, AgentToolResult, Model, TextContent
from agentcore_fsm.core.config import AgentLoopTurnUpdate
from agentcore_fsm.core.tools import AfterToolCallResult
from agentcore_fsm.devtools.testing import check_run
from agentcore_fsm.integrations import dbos as durable
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call


def _agent(calls: list[str]) -> durable.DurableAgent:
    answers = [
        faux_response("One.", tool_calls=[faux_tool_call("note", {"text": "a"}, id="n1")]),
        faux_response(
            "Two.",
            tool_calls=[
                faux_tool_call("note", {"text": "b"}, id="n2"),
                faux_tool_call("note", {"text": "c"}, id="n3"),
            ],
        ),
        faux_response("Done."),
    ]

    async def stream_fn(model: Any, context: Any, options: Any) -> Any:
        calls.append("model")
        turn = sum(1 for m in context.messages if getattr(m, "role", None) == "assistant")
        async for event in FauxProvider([answers[turn]])(model, context, options):
            yield event

    async def note(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        calls.append(f"note {call_id} {args}")
        await asyncio.sleep(0.005)  # a replay made later would read another time
        return AgentToolResult(content=[TextContent(text=f"noted {args['text']}")])

    def before_tool_call(ctx: Any, signal: Any) -> None:
        calls.append("before")
        ctx.args["text"] = ctx.args["text"].upper()  # an edit in place: replayed too

    def after_tool_call(ctx: Any, signal: Any) -> AfterToolCallResult:
        calls.append("after")
        return AfterToolCallResult(details={"checked": ctx.tool_call.id})

    def prepare_next_turn(ctx: Any, signal: Any) -> AgentLoopTurnUpdate:
        calls.append("prepare")
        return AgentLoopTurnUpdate(thinking_level="low")

    polls = iter([None, ["and one more thing"]])

    def steering() -> Any:
        calls.append("steering")
        return next(polls, None)

    config = AgentLoopConfig(
        model=Model(id="faux"),
        before_tool_call=before_tool_call,
        after_tool_call=after_tool_call,
        prepare_next_turn=prepare_next_turn,
        get_steering_messages=steering,
    )
    tool = AgentTool("note", "take a note", {"type": "object"}, note)
    return durable.DurableAgent("notes", stream_fn, config, [tool])


def test_a_replay_is_exact(tmp_path: Path) -> None:
    calls: list[str] = []

    async def main() -> tuple[Any, ...]:
        await durable.launch(f"sqlite:///{tmp_path / 'runs.db'}", agents=[_agent(calls)])
        try:
            events: list[Any] = []
            messages = await durable.run_durable(
                "notes", ["take notes"], run_id="n", emit=events.append
            )
            first_calls = list(calls)
            steps = await DBOS.list_workflow_steps_async("n")
            last = max(s["function_id"] for s in steps)
            fork: Any = await DBOS.fork_workflow_async("n", last + 1)
            replayed = await durable.result_async(fork.workflow_id)
            replay_calls = calls[len(first_calls) :]
            # from the second model call on, live again (the first turn replayed)
            model_steps = [s["function_id"] for s in steps if s["function_name"] == "model_call"]
            fork2: Any = await DBOS.fork_workflow_async("n", model_steps[1])
            again = await durable.result_async(fork2.workflow_id)
            followed = [e async for e in durable.follow_async(fork2.workflow_id)]
            return events, messages, first_calls, replayed, replay_calls, again, followed, steps
        finally:
            durable.shutdown()

    events, messages, first_calls, replayed, replay_calls, again, followed, steps = asyncio.run(
        main()
    )
    check_run(events, messages, tool_execution="sequential")
    assert [str(m) for m in messages] == [
        'user: "take notes"',
        "assistant: \"One.\" [toolUse: note(text='a')]",
        'toolResult n1 note: "noted A"',
        'user: "and one more thing"',
        "assistant: \"Two.\" [toolUse: note(text='b'), note(text='c')]",
        'toolResult n2 note: "noted B"',
        'toolResult n3 note: "noted C"',
        'assistant: "Done."',
    ]
    assert messages[2].details == {"checked": "n1"}
    assert first_calls.count("model") == 3 and first_calls.count("before") == 3
    names = [s["function_name"] for s in steps]
    assert names.count("model_call") == 3
    assert names.count("tool:note") == 3 and names.count("tool_started:note") == 3
    assert {"before_tool_call", "after_tool_call", "prepare_next_turn"} <= set(names)
    assert "get_steering_messages" in names
    # the full replay: the same messages, timestamps and all, and nothing ran again
    assert replay_calls == []
    assert [m.model_dump() for m in replayed] == [m.model_dump() for m in messages]
    # the fork from the second model call: the first turn replayed, the rest live again
    assert [str(m) for m in again][:4] == [str(m) for m in messages][:4]
    assert [m.model_dump() for m in again][:4] == [m.model_dump() for m in messages][:4]
    assert [str(m) for m in again][4:] == [str(m) for m in messages][4:]
    assert again[5].timestamp != messages[5].timestamp  # that tool result is a new one
    check_run(followed, again, tool_execution="sequential")


def test_an_approval_wait_times_out_durably(tmp_path: Path) -> None:
    """A call waiting for approval with ``approval_timeout_s``: no decision comes, the wait
    (a DBOS recv with that timeout) ends and the call is denied as timed out."""
    from agentcore_fsm.core.approval import TIMEOUT_TEXT, denied_text

    ran: list[str] = []

    def send(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        ran.append(call_id)
        return AgentToolResult(content=[TextContent(text="sent")])

    answers = [
        faux_response(tool_calls=[faux_tool_call("send", {}, id="s1")]),
        faux_response("Not sent."),
    ]

    async def stream_fn(model: Any, context: Any, options: Any) -> Any:
        turn = sum(1 for m in context.messages if getattr(m, "role", None) == "assistant")
        async for event in FauxProvider([answers[turn]])(model, context, options):
            yield event

    tool = AgentTool("send", "send", {"type": "object"}, send, requires_approval=True)
    config = AgentLoopConfig(model=Model(id="faux"), approval_timeout_s=0.3)
    agent = durable.DurableAgent("sender", stream_fn, config, [tool])

    async def main() -> tuple[list[Any], list[Any]]:
        await durable.launch(f"sqlite:///{tmp_path / 'runs.db'}", agents=[agent])
        try:
            events: list[Any] = []
            messages = await durable.run_durable("sender", ["send"], run_id="s", emit=events.append)
            return events, messages
        finally:
            durable.shutdown()

    events, messages = asyncio.run(main())
    check_run(events, messages)
    assert ran == []
    reason = TIMEOUT_TEXT.format(seconds=0.3)
    assert messages[2].content[0].text == denied_text("send", reason)
    decided = [e for e in events if e.type == "approval_decided"]
    assert [(e.approved, e.decided_by, e.reason) for e in decided] == [(False, "timeout", reason)]


def test_a_stream_that_raises_midway_replays_exactly(tmp_path: Path) -> None:
    """The model stream raises after some deltas: the run fails with the message it had
    begun; a replay (a fork past the last step) ends the same way, message and all."""

    async def stream_fn(model: Any, context: Any, options: Any) -> Any:
        count = 0
        async for event in FauxProvider([faux_response("a long answer cut short")])(
            model, context, options
        ):
            count += 1
            if count == 4:
                raise ConnectionError("the connection dropped")
            yield event

    agent = durable.DurableAgent("cut", stream_fn, AgentLoopConfig(model=Model(id="faux")))

    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        await durable.launch(f"sqlite:///{tmp_path / 'runs.db'}", agents=[agent])
        try:
            events: list[Any] = []
            messages = await durable.run_durable("cut", ["go"], run_id="c", emit=events.append)
            steps = await DBOS.list_workflow_steps_async("c")
            fork: Any = await DBOS.fork_workflow_async(
                "c", max(s["function_id"] for s in steps) + 1
            )
            return events, messages, await durable.result_async(fork.workflow_id)
        finally:
            durable.shutdown()

    events, messages, replayed = asyncio.run(main())
    check_run(events, messages)
    assert events[-1].type == "agent_end"
    assert messages[-1].error_message == "the connection dropped"
    assert messages[-1].content[0].text.startswith("a long a")  # the message it had begun
    assert [m.model_dump() for m in replayed] == [m.model_dump() for m in messages]
