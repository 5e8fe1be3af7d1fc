"""``str()`` of messages, content blocks and checked runs: one short, readable line each.

``repr()`` stays pydantic's full form for the models; ``str()`` is for people (``print``, logs)
and is bounded whatever the message holds.
"""

from __future__ import annotations

import base64
from typing import Any

import anyio
import pytest

from agentcore_fsm import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentcore_fsm.core.messages import ThinkingContent
from agentcore_fsm.devtools.testing import (
    FauxProvider,
    RunSummary,
    describe_message,
    faux_response,
    faux_tool_call,
    run_checked,
)


def image(size: int, mime_type: str = "image/png") -> ImageContent:
    return ImageContent(data=base64.b64encode(b"\x89" * size).decode(), mime_type=mime_type)


# --- content blocks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Hello", '"Hello"'),
        ("", '""'),
        ("x" * 60, '"' + "x" * 60 + '"'),
        ("x" * 61, '"' + "x" * 59 + '…"'),
        ('say "hi"\nbye\t!', '"say \\"hi\\"\\nbye\\t!"'),
        ("héllo ✓", '"héllo ✓"'),
        ("half an emoji: \ud83d", '"half an emoji: \\ud83d"'),
    ],
)
def test_text(text: str, shown: str) -> None:
    assert str(TextContent(text=text)) == shown
    shown.encode("utf-8")  # always printable


def test_thinking() -> None:
    assert str(ThinkingContent(thinking="Let me think.")) == '[thinking: "Let me think."]'
    long = ThinkingContent(thinking="a" * 31)
    assert str(long) == '[thinking: "' + "a" * 29 + '…"]'
    secret = ThinkingContent(thinking="", thinking_signature="opaque", redacted=True)
    assert str(secret) == "[thinking: redacted]"


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (5, "[image: image/png, 5 B]"),
        (1023, "[image: image/png, 1023 B]"),
        (1536, "[image: image/png, 1.5 KiB]"),
        (2 * 1024 * 1024, "[image: image/png, 2.0 MiB]"),
    ],
)
def test_image_shows_its_type_and_decoded_size(size: int, shown: str) -> None:
    assert str(image(size)) == shown


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ({}, "ls()"),
        ({"path": "a.txt"}, "ls(path='a.txt')"),
        ({"n": 3, "x": 1.5, "ok": True, "none": None}, "ls(n=3, x=1.5, ok=True, none=None)"),
        ({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}, "ls(a=1, b=2, c=3, d=4, …)"),
        ({"text": "y" * 31}, "ls(text='" + "y" * 29 + "…')"),
        ({"items": [1, 2, 3, 4]}, "ls(items=[1, 2, 3, …])"),
        (
            {"opts": {"deep": {"x": 1}, "list": [1], "e": {}}},
            "ls(opts={'deep': {…}, 'list': […], 'e': {}})",
        ),
        ({"opts": {"a": 1, "b": 2, "c": 3, "d": 4}}, "ls(opts={'a': 1, 'b': 2, 'c': 3, …})"),
        ({"two words": 1}, "ls('two words'=1)"),
        ({"n": 10**40}, "ls(n=" + str(10**40)[:29] + "…)"),
    ],
)
def test_tool_call_reads_like_a_call(arguments: dict[str, Any], shown: str) -> None:
    assert str(ToolCall(id="call_1", name="ls", arguments=arguments)) == shown


# --- messages -----------------------------------------------------------------------------------


def test_user_message() -> None:
    assert str(UserMessage(content="What is 2+2?")) == 'user: "What is 2+2?"'
    blocks = UserMessage(content=[TextContent(text="Look:"), image(2048)])
    assert str(blocks) == 'user: "Look:" [image: image/png, 2.0 KiB]'
    assert str(UserMessage(content=[])) == "user: (empty)"


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        (AssistantMessage(content=[TextContent(text="Hello!")]), 'assistant: "Hello!"'),
        (AssistantMessage(), "assistant: (empty)"),
        (
            AssistantMessage(
                content=[
                    TextContent(text="Let me look."),
                    ToolCall(id="c1", name="read", arguments={"path": "a.txt"}),
                ],
                stop_reason="toolUse",
            ),
            "assistant: \"Let me look.\" [toolUse: read(path='a.txt')]",
        ),
        (
            AssistantMessage(
                content=[ToolCall(id="c1", name="read"), ToolCall(id="c2", name="ls")],
                stop_reason="toolUse",
            ),
            "assistant: [toolUse: read(), ls()]",
        ),
        (
            AssistantMessage(content=[ThinkingContent(thinking="Easy."), TextContent(text="4")]),
            'assistant: [thinking: "Easy."] "4"',
        ),
        (
            AssistantMessage(stop_reason="error", error_message="HTTP 429: rate limited"),
            'assistant: [error: "HTTP 429: rate limited"]',
        ),
        (
            AssistantMessage(
                content=[TextContent(text="Partial"), ToolCall(id="c1", name="read")],
                stop_reason="aborted",
                error_message="Request was aborted",
            ),
            'assistant: "Partial" [aborted: read(), "Request was aborted"]',
        ),
        (
            AssistantMessage(content=[TextContent(text="cut")], stop_reason="length"),
            'assistant: "cut" [length]',
        ),
        (AssistantMessage(stop_reason="pending"), "assistant: [pending]"),
        (
            AssistantMessage(
                content=[ToolCall(id=f"c{i}", name="t", arguments={"i": i}) for i in range(6)],
                stop_reason="toolUse",
            ),
            "assistant: [toolUse: t(i=0), t(i=1), t(i=2), t(i=3), +2 more]",
        ),
    ],
)
def test_assistant_message(message: AssistantMessage, shown: str) -> None:
    assert str(message) == shown


def test_tool_result_message() -> None:
    ok = ToolResultMessage(
        tool_call_id="call_1", tool_name="read", content=[TextContent(text="file text")]
    )
    assert str(ok) == 'toolResult call_1 read: "file text"'
    failed = ToolResultMessage(
        tool_call_id="call_2",
        tool_name="read",
        content=[TextContent(text="No such file")],
        is_error=True,
    )
    assert str(failed) == 'toolResult call_2 read (error): "No such file"'
    shot = ToolResultMessage(
        tool_call_id="c", tool_name="shot", content=[TextContent(text="done"), image(10)]
    )
    assert str(shot) == 'toolResult c shot: "done" [image: image/png, 10 B]'
    assert str(ToolResultMessage(tool_call_id="c", tool_name="t")) == "toolResult c t: (empty)"


def test_str_is_bounded_repr_is_not() -> None:
    huge = AssistantMessage(
        content=[
            ThinkingContent(thinking="t" * 10_000),
            TextContent(text="x" * 10_000),
            *[
                ToolCall(id=f"c{i}", name="f", arguments={f"k{j}": "v" * 500 for j in range(50)})
                for i in range(100)
            ],
        ],
        stop_reason="toolUse",
        error_message=None,
    )
    assert len(str(huge)) < 800
    assert "\n" not in str(huge)
    assert len(repr(huge)) > 10_000
    assert repr(TextContent(text="x")) == "TextContent(type='text', text='x', text_signature=None)"


# --- checked runs -------------------------------------------------------------------------------

PROMPT = UserMessage(content="Double 21.", timestamp=1)
ASKS = AssistantMessage(
    content=[
        TextContent(text="Doubling."),
        ToolCall(id="call_1", name="double", arguments={"n": 21}),
    ],
    stop_reason="toolUse",
)
RESULT = ToolResultMessage(
    tool_call_id="call_1", tool_name="double", content=[TextContent(text="42")]
)
ANSWER = AssistantMessage(content=[TextContent(text="The answer is 42.")])


def test_run_summary_lists_the_run() -> None:
    summary = RunSummary(29, 2, [PROMPT, ASKS, RESULT, ANSWER], "completed", ANSWER)
    assert str(summary) == "\n".join(
        [
            "run: 29 events, 2 turns, ended completed",
            '  user: "Double 21."',
            '  assistant: "Doubling." [toolUse: double(n=21)]',
            '  toolResult call_1 double: "42"',
            '  assistant: "The answer is 42."',
        ]
    )
    assert repr(summary) == (
        "RunSummary(events=29, turns=2, reason='completed', created=<4 messages>, "
        'last_message=<assistant: "The answer is 42.">)'
    )


def test_run_summary_of_a_long_run_shows_its_ends() -> None:
    created = [UserMessage(content=f"m{i}") for i in range(25)]
    lines = str(RunSummary(100, 1, created, "stopped", None)).splitlines()
    assert lines[0] == "run: 100 events, 1 turn, ended stopped"
    assert lines[1:11] == [f'  user: "m{i}"' for i in range(10)]
    assert lines[11] == "  … 5 more messages …"
    assert lines[12:] == [f'  user: "m{i}"' for i in range(15, 25)]
    assert repr(RunSummary(1, 0, created[:1], None, None)) == (
        "RunSummary(events=1, turns=0, reason=None, created=<1 message>, last_message=None)"
    )
    assert str(RunSummary(1, 0, [], None, None)) == "run: 1 event, 0 turns, no end reason"


def test_custom_and_broken_messages_are_described() -> None:
    class Note:
        role = "note"

        def __repr__(self) -> str:
            return "Note(" + "n" * 100 + ")"

    assert describe_message(Note()) == "note: Note(" + "n" * 54 + "…"
    assert (
        describe_message({"role": "memo", "text": "hi"}) == "memo: {'role': 'memo', 'text': 'hi'}"
    )
    assert describe_message(5) == "not a message: int 5"
    assert describe_message(ANSWER) == str(ANSWER)


def test_summary_stays_a_plain_comparable_record() -> None:
    a = RunSummary(29, 2, [PROMPT, ANSWER], "completed", ANSWER)
    b = RunSummary(29, 2, [PROMPT, ANSWER], "completed", ANSWER)
    assert a == b
    assert a != RunSummary(30, 2, [PROMPT, ANSWER], "completed", ANSWER)
    assert (a.events, a.turns, a.reason, a.last_message) == (29, 2, "completed", ANSWER)


def test_a_checked_run_prints_its_summary() -> None:
    async def double(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        return AgentToolResult(content=[TextContent(text=str(2 * params["n"]))])

    tool = AgentTool(
        name="double",
        description="Double n.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        execute=double,
    )
    faux = FauxProvider(
        [
            faux_response("Doubling.", tool_calls=[faux_tool_call("double", {"n": 21}, "call_1")]),
            faux_response("The answer is 42."),
        ]
    )

    async def run() -> Any:
        return await run_checked(
            [PROMPT],
            AgentContext(tools=[tool]),
            AgentLoopConfig(model=Model(id="m")),
            stream_fn=faux,
        )

    checked = anyio.run(run, backend="trio")
    assert str(checked) == str(checked.summary)
    assert str(checked).splitlines()[1:] == [
        '  user: "Double 21."',
        '  assistant: "Doubling." [toolUse: double(n=21)]',
        '  toolResult call_1 double: "42"',
        '  assistant: "The answer is 42."',
    ]
    assert str(checked).splitlines()[0] == (
        f"run: {len(checked.events)} events, 2 turns, ended completed"
    )
    assert repr(checked) == (
        f"CheckedRun(messages=<4 messages>, events=<{len(checked.events)} events>, "
        f"transitions=<{len(checked.transitions)} transitions>, summary={checked.summary!r})"
    )
