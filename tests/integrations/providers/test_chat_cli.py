"""``agentcore-fsm chat``, driven through stdin against the local SSE server, and its tools."""

from __future__ import annotations

import io
import os
import re
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from _provider_sse_server import Reply, ScriptedServer

from agentcore_fsm import TextContent
from agentcore_fsm.cli.calculator import CalculatorArgs, CalculatorError
from agentcore_fsm.cli.chat import builtin_tools, main, resolve_model
from agentcore_fsm.cli.commands import main as cli_main


def run_chat(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    stdin: str,
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_openai_session_with_a_tool(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.queue(Reply(sse="openai/chat_calculator.sse"), Reply(sse="openai/final_text.sse"))
    argv = ["--provider", "openai", "--model", "gpt-4o-mini", "--base-url", server.url + "/v1"]
    code, out, err = run_chat(monkeypatch, capsys, argv, "What is 2 + 3?\n\n/exit\nnot read\n")
    assert (code, err) == (0, "")
    assert out == (
        '[tool] calculator {"expression": "2 + 3"}\n'
        "[result] 5\n"
        "2 + 3 = 5.\n"
        "[usage] 132 input (+128 cached), 18 output tokens, $0.000040\n"
    )
    first, second = server.requests
    assert first.headers["authorization"] == "Bearer not-needed"
    assert [t["function"]["name"] for t in first.body["tools"]] == ["current_time", "calculator"]
    assert first.body["messages"] == [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2 + 3?"},
    ]
    assert second.body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_calc_1",
        "content": "5",
    }


def test_anthropic_session_with_thinking(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    server.queue(Reply(sse="anthropic/chat_calculator.sse"), Reply(sse="anthropic/final_text.sse"))
    argv = [
        "--provider",
        "anthropic",
        "--model",
        "claude-haiku-4-5",
        "--base-url",
        server.url,
        "--thinking",
        "low",
        "--system",
        "Be exact.",
    ]
    code, out, err = run_chat(monkeypatch, capsys, argv, "What is 2 + 3?\n")
    assert (code, err) == (0, "")
    assert out == (
        "[thinking] Use the calculator.\n"
        '[tool] calculator {"expression": "2 + 3"}\n'
        "[result] 5\n"
        "2 + 3 = 5.\n"
        "[usage] 132 input (+128 cached), 18 output tokens, $0.000235\n"
    )
    first, second = server.requests
    assert first.headers["authorization"] == "Bearer sk-ant-test"
    assert first.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first.body["system"][0]["text"] == "Be exact."
    assert second.body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Use the calculator.",
        "signature": "c2lnbmF0dXJl",
    }


def test_ctrl_c_aborts_the_reply_not_the_session(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server.queue(Reply(sse="openai/abort.sse"), Reply(sse="openai/final_text.sse"))

    shown = threading.Event()

    class Watched:
        """stdout that notes when the streamed ", two" has been printed."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def write(self, text: str) -> int:
            written: int = self.inner.write(text)
            if "two" in text:
                shown.set()
            return written

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(sys, "stdout", Watched(sys.stdout))

    def press_ctrl_c() -> None:
        # press once the client has shown ", two" (the server then holds the stream open):
        # after the abort no further stream event is processed, so pressing earlier could cut
        # the reply shorter than this test expects
        if server.waiting.wait(20) and shown.wait(20):
            os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c, daemon=True)
    presser.start()
    argv = ["--model", "gpt-4o-mini", "--base-url", server.url + "/v1", "--no-tools"]
    code, out, err = run_chat(monkeypatch, capsys, argv, "count\nWhat now?\n")
    presser.join(5)
    assert (code, err) == (0, "")
    assert out == (
        "Counting: one, two\n"
        "[aborted]\n"
        "2 + 3 = 5.\n"
        "[usage] 32 input (+128 cached), 8 output tokens, $0.000019\n"
    )
    assert server.disconnected.is_set()
    first, second = server.bodies()
    assert "tools" not in first
    assert second["messages"] == [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "count"},
        {"role": "assistant", "content": "Counting: one, two"},
        {"role": "user", "content": "What now?"},
    ]


def test_errors_are_printed_and_the_session_goes_on(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server.queue(
        Reply(status=429, body="openai/error_429.json", headers={"x-should-retry": "false"}),
        Reply(sse="openai/text.sse"),
    )
    argv = ["--model", "gpt-4o-mini", "--base-url", server.url + "/v1"]
    code, out, err = run_chat(monkeypatch, capsys, argv, "hi\n/reset\nhi again\n")
    assert (code, err) == (0, "")
    assert out == (
        "[error] HTTP 429 (requests): Rate limit reached for gpt-4o-mini on requests per min "
        "(RPM): Limit 3, Used 3, Requested 1.\n"
        "[conversation cleared]\n"
        "Hello, world!\n"
        "[usage] 176 input (+1024 cached), 5 output tokens, $0.000106\n"
    )
    assert server.bodies()[-1]["messages"][1:] == [{"role": "user", "content": "hi again"}]


def test_missing_key_and_missing_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, _out, err = run_chat(monkeypatch, capsys, ["--provider", "anthropic", "--model", "x"], "")
    assert code == 2
    assert err == "agentcore-fsm chat: set ANTHROPIC_API_KEY (your anthropic API key)\n"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setitem(sys.modules, "openai", None)
    code, _out, err = run_chat(monkeypatch, capsys, ["--model", "gpt-4o-mini"], "")
    assert code == 2
    assert "pip install 'agentcore-fsm[openai]'" in err


def test_cli_dispatches_to_chat(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        cli_main(["chat", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--provider {openai,anthropic}" in out and "--base-url" in out


MCP_SERVERS = Path(__file__).resolve().parents[2] / "mcp_servers.py"


def test_mcp_server_tools_join_the_session(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # tests/mcp_servers.py "calc" serves one tool named "calculator": with --no-tools, the
    # model's call of it is answered by the MCP server
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.queue(Reply(sse="openai/chat_calculator.sse"), Reply(sse="openai/final_text.sse"))
    command = shlex.join([sys.executable, str(MCP_SERVERS), "calc"])
    argv = ["--model", "gpt-4o-mini", "--base-url", server.url + "/v1", "--no-tools"]
    code, out, err = run_chat(monkeypatch, capsys, [*argv, "--mcp", command], "What is 2 + 3?\n")
    assert (code, err) == (0, "")
    assert out == (
        '[tool] calculator {"expression": "2 + 3"}\n'
        "[result] 5\n"
        "2 + 3 = 5.\n"
        "[usage] 132 input (+128 cached), 18 output tokens, $0.000040\n"
    )
    first, second = server.requests
    assert [t["function"] for t in first.body["tools"]] == [
        {
            "name": "calculator",
            "description": "Add numbers.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        }
    ]
    assert second.body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_calc_1",
        "content": "5",
    }


def test_mcp_servers_that_cannot_be_used(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    argv = ["--model", "gpt-4o-mini", "--mcp", "/no/such/mcp-server --flag"]
    code, out, err = run_chat(monkeypatch, capsys, argv, "never read\n")
    assert (code, out) == (2, "")
    assert err == (
        'agentcore-fsm chat: MCP server "mcp-server --flag" could not be started: '
        "FileNotFoundError: [Errno 2] No such file or directory: '/no/such/mcp-server'\n"
    )
    with pytest.raises(SystemExit) as info:
        main(["--model", "gpt-4o-mini", "--mcp", "python 'unclosed"])
    assert info.value.code == 2
    assert 'argument --mcp: cannot split "python \'unclosed" into words: No closing quotation' in (
        capsys.readouterr().err
    )


# --- --approve ------------------------------------------------------------------------------

ASKED = '[approve?] calculator {"expression": "2 + 3"} [y/N] '
DENIED = 'Tool call "calculator" was denied: denied at the terminal'


def approve_argv(server: ScriptedServer) -> list[str]:
    return ["--model", "gpt-4o-mini", "--base-url", server.url + "/v1", "--approve"]


def test_approve_asks_before_a_tool_call_runs(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.queue(Reply(sse="openai/chat_calculator.sse"), Reply(sse="openai/final_text.sse"))
    code, out, err = run_chat(monkeypatch, capsys, approve_argv(server), "What is 2 + 3?\ny\n")
    assert (code, err) == (0, "")
    assert out == (
        '[tool] calculator {"expression": "2 + 3"}\n'
        f"{ASKED}y\n"
        "[approved] calculator\n"
        "[result] 5\n"
        "2 + 3 = 5.\n"
        "[usage] 132 input (+128 cached), 18 output tokens, $0.000040\n"
    )
    assert server.requests[1].body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_calc_1",
        "content": "5",
    }


@pytest.mark.parametrize("answer", ["n\n", "yes please\n", "\n", ""])
def test_approve_denies_on_anything_but_y(
    server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: str,
) -> None:
    # "" is the end of input at the question: a denial, then the session ends
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.queue(Reply(sse="openai/chat_calculator.sse"), Reply(sse="openai/final_text.sse"))
    stdin = "What is 2 + 3?\n" + answer
    code, out, err = run_chat(monkeypatch, capsys, approve_argv(server), stdin)
    assert (code, err) == (0, "")
    assert out == (
        '[tool] calculator {"expression": "2 + 3"}\n'
        f"{ASKED}{answer.strip()}\n"
        "[denied] calculator: denied at the terminal\n"
        f"[error] {DENIED}\n"
        "2 + 3 = 5.\n"
        "[usage] 132 input (+128 cached), 18 output tokens, $0.000040\n"
    )
    # the model reads the denial as the call's result
    assert server.requests[1].body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_calc_1",
        "content": DENIED,
    }


def test_without_approve_no_call_asks(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.queue(Reply(sse="openai/chat_calculator.sse"), Reply(sse="openai/final_text.sse"))
    argv = approve_argv(server)[:-1]
    code, out, err = run_chat(monkeypatch, capsys, argv, "What is 2 + 3?\n")
    assert (code, err) == (0, "")
    assert out == (
        '[tool] calculator {"expression": "2 + 3"}\n'
        "[result] 5\n"
        "2 + 3 = 5.\n"
        "[usage] 132 input (+128 cached), 18 output tokens, $0.000040\n"
    )
    assert "--approve" in main_help(capsys)


def main_help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main(["--help"])
    return capsys.readouterr().out


def test_ctrl_c_at_the_question_aborts_the_reply_and_keeps_the_next_line(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.queue(Reply(sse="openai/chat_calculator.sse"), Reply(sse="openai/final_text.sse"))
    asked, aborted = threading.Event(), threading.Event()

    class Watched:
        """stdout that notes when the question and the abort have been printed."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def write(self, text: str) -> int:
            written: int = self.inner.write(text)
            if "[approve?]" in text:
                asked.set()
            if "[aborted]" in text:
                aborted.set()
            return written

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "r", encoding="utf-8")
    writer = os.fdopen(write_fd, "w", encoding="utf-8")
    writer.write("What is 2 + 3?\n")
    writer.flush()

    def press_ctrl_c_then_type() -> None:
        # Ctrl-C while the question waits for its answer; the line typed after the abort is
        # the next prompt (the read the question started must not swallow it)
        if asked.wait(20):
            os.kill(os.getpid(), signal.SIGINT)
            if aborted.wait(20):
                writer.write("What now?\n")
        writer.close()

    monkeypatch.setattr(sys, "stdout", Watched(sys.stdout))
    monkeypatch.setattr(sys, "stdin", reader)
    typist = threading.Thread(target=press_ctrl_c_then_type, daemon=True)
    typist.start()
    try:
        code = main(approve_argv(server))
    finally:
        typist.join(5)
        reader.close()
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert out == (
        '[tool] calculator {"expression": "2 + 3"}\n'
        f"{ASKED}\n"
        "[error] Operation aborted\n"
        "[aborted] calculator: Operation aborted\n"
        "[usage] 100 input, 10 output tokens, $0.000021\n"
        "2 + 3 = 5.\n"
        "[usage] 32 input (+128 cached), 8 output tokens, $0.000019\n"
    )
    assert server.bodies()[1]["messages"][-1] == {"role": "user", "content": "What now?"}


def test_resolve_model() -> None:
    known = resolve_model("openai", "gpt-4o-mini", None, "off")
    assert known.provider == "openai" and known.cost.input == 0.15
    proxied = resolve_model("openai", "gpt-4o-mini", "http://proxy/v1", "off")
    assert proxied.base_url == "http://proxy/v1" and proxied.cost == known.cost
    local = resolve_model("openai", "llama3.2", "http://localhost:11434/v1", "low")
    assert local.provider == "openai-compatible" and local.reasoning
    assert local.base_url == "http://localhost:11434/v1"
    other = resolve_model("anthropic", "claude-future-9", None, "off")
    assert other.api == "anthropic-messages" and other.reasoning
    assert other.base_url == "https://api.anthropic.com"


# --- the built-in tools ---------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("expression", "text"),
    [("2 + 3", "5"), ("0.1 + 0.2", "0.3"), ("2 ** 10", "1024"), ("1 / 4", "0.25")],
)
async def test_calculator_tool_answers_exactly(expression: str, text: str) -> None:
    # the calculator shared with the demo (tests/test_calculator.py): exact decimal arithmetic
    calculator = builtin_tools()[1]
    assert (calculator.name, calculator.label) == ("calculator", "Calculator")
    assert calculator.description.startswith("Evaluate an arithmetic expression exactly")
    result = await calculator.execute("c1", CalculatorArgs(expression=expression), None, None)  # type: ignore[misc]
    (block,) = result.content
    assert isinstance(block, TextContent) and block.text == text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("sqrt(16)", "unsupported element"),
        ("pi * 2", "unsupported element"),
        ("2 ^ 10", "unsupported element"),
        ("1 / 0", "division by zero"),
        ("2 ** 100000", "exponent larger than 100"),
    ],
)
async def test_calculator_tool_refuses(expression: str, message: str) -> None:
    calculator = builtin_tools()[1]
    with pytest.raises(CalculatorError, match=re.escape(message)):
        await calculator.execute("c1", CalculatorArgs(expression=expression), None, None)  # type: ignore[misc]


@pytest.mark.anyio
async def test_time_tool() -> None:
    time_tool = builtin_tools()[0]
    result = await time_tool.execute("c1", {"timezone": "Asia/Tokyo"}, None, None)  # type: ignore[misc]
    (block,) = result.content
    assert isinstance(block, TextContent)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+09:00 \(\w+day, Asia/Tokyo\)", block.text)
    result = await time_tool.execute("c1", {}, None, None)  # type: ignore[misc]
    assert result.content[0].text.endswith(", UTC)")  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="Unknown time zone 'Mars/Olympus'"):
        await time_tool.execute("c1", {"timezone": "Mars/Olympus"}, None, None)  # type: ignore[misc]


def test_mcp_tools_keeps_only_the_named_tools(
    server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # tests/mcp_servers.py "stdio" serves many tools (echo, weather, picture, ...): the model is
    # offered only the two asked for
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.queue(Reply(sse="openai/final_text.sse"))
    command = shlex.join([sys.executable, str(MCP_SERVERS), "stdio", str(tmp_path)])
    argv = ["--model", "gpt-4o-mini", "--base-url", server.url + "/v1", "--no-tools"]
    argv += ["--mcp", command, "--mcp-tools", "weather, echo"]
    code, out, err = run_chat(monkeypatch, capsys, argv, "hi\n")
    assert (code, err) == (0, "")
    assert out.strip()  # the model's answer was printed
    (request,) = server.requests
    assert sorted(t["function"]["name"] for t in request.body["tools"]) == ["echo", "weather"]


def test_mcp_tools_that_no_server_offers_are_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    command = shlex.join([sys.executable, str(MCP_SERVERS), "calc"])
    argv = ["--model", "gpt-4o-mini", "--mcp", command, "--mcp-tools", "calculator,nope"]
    code, out, err = run_chat(monkeypatch, capsys, argv, "hi\n")
    assert code == 2 and out == ""
    assert err == (
        "agentcore-fsm chat: error: --mcp-tools: no MCP server offers 'nope' (offered: "
        "calculator)\n"
    )


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["--mcp-tools", "echo"], "--mcp-tools only goes with --mcp"),
        (["--mcp", "server", "--mcp-tools", " , "], "expected tool names separated by commas"),
    ],
)
def test_bad_mcp_tools_arguments(
    argv: list[str], text: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    with pytest.raises(SystemExit) as info:
        main(["--model", "gpt-4o-mini", *argv])
    assert info.value.code == 2
    assert text in capsys.readouterr().err
