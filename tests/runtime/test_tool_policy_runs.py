"""Per-tool timeout, retry and concurrency, and the run's tool policy, through the public async
API on trio and asyncio (docs/policies-tools.md). Durations are milliseconds; the backoff's
sleep is replaced where its length matters."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from helpers import MODEL, make_tool, run, text_of, text_result, user

from agentcore_fsm import AbortController, AgentContext, AgentLoopConfig
from agentcore_fsm.core.retry import RetryPolicy
from agentcore_fsm.core.tool_policy import ToolPolicy
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.runtime import tool_policies

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_attempts=3, backoff_base_s=0.001, backoff_max_s=0.002)


def config(**kwargs: Any) -> AgentLoopConfig:
    return AgentLoopConfig(model=MODEL, **kwargs)


def turns(*batches: list[Any]) -> FauxProvider:
    return FauxProvider([faux_response(tool_calls=b) for b in batches] + [faux_response("done")])


def results(r: Any) -> dict[str, Any]:
    return {m.tool_call_id: m for m in r.messages if m.role == "toolResult"}


class Flaky:
    """A tool body failing its first ``failures`` executions per call, counting executions."""

    def __init__(self, failures: int, error: type[Exception] = RuntimeError) -> None:
        self.failures = failures
        self.error = error
        self.runs: Counter[str] = Counter()

    async def __call__(self, call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        self.runs[call_id] += 1
        await anyio.lowlevel.checkpoint()
        if self.runs[call_id] <= self.failures:
            raise self.error(f"failure {self.runs[call_id]}")
        return text_result(f"ok after {self.runs[call_id]}")


async def test_an_idempotent_tool_is_retried_and_each_attempt_is_an_update() -> None:
    body = Flaky(2)
    tools = [make_tool("t", body, idempotent=True, retry=FAST)]
    r = await run(
        [user("go")], AgentContext(tools=tools), config(), turns([faux_tool_call("t", id="c1")])
    )
    assert body.runs == {"c1": 3}
    assert text_of(results(r)["c1"]) == "ok after 3" and not results(r)["c1"].is_error
    updates = [text_of(e.partial_result) for e in r.of_type("tool_execution_update")]
    assert updates == [
        "Attempt 1 of 3 failed: failure 1; retrying",
        "Attempt 2 of 3 failed: failure 2; retrying",
    ]


async def test_the_last_failed_attempt_is_the_calls_error_result() -> None:
    body = Flaky(5)
    tools = [make_tool("t", body, idempotent=True, retry=FAST)]
    r = await run(
        [user("go")], AgentContext(tools=tools), config(), turns([faux_tool_call("t", id="c1")])
    )
    assert body.runs == {"c1": 3}
    result = results(r)["c1"]
    assert result.is_error and text_of(result) == "failure 3 (attempt 3, the last)"


async def test_a_failure_the_policy_does_not_list_is_not_retried() -> None:
    body = Flaky(1, KeyError)
    policy = RetryPolicy(retry_on=(ConnectionError,), backoff_base_s=0, backoff_max_s=0)
    tools = [make_tool("t", body, idempotent=True, retry=policy)]
    r = await run(
        [user("go")], AgentContext(tools=tools), config(), turns([faux_tool_call("t", id="c1")])
    )
    assert body.runs == {"c1": 1}
    assert results(r)["c1"].is_error
    assert r.of_type("tool_execution_update") == []


async def test_a_non_idempotent_tool_runs_once_unless_its_policy_opts_in() -> None:
    body = Flaky(1)
    tools = [make_tool("t", body, retry=FAST)]
    r = await run(
        [user("go")], AgentContext(tools=tools), config(), turns([faux_tool_call("t", id="c1")])
    )
    assert body.runs == {"c1": 1}
    assert text_of(results(r)["c1"]) == "failure 1"

    body = Flaky(1)
    opted = RetryPolicy(backoff_base_s=0.001, backoff_max_s=0.001, retry_non_idempotent=True)
    tools = [make_tool("t", body, retry=opted)]
    r = await run(
        [user("go")], AgentContext(tools=tools), config(), turns([faux_tool_call("t", id="c1")])
    )
    assert body.runs == {"c1": 2}
    assert text_of(results(r)["c1"]) == "ok after 2"


async def test_the_backoff_waits_the_policys_delay_with_the_drivers_draw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)
        await anyio.lowlevel.checkpoint()

    monkeypatch.setattr(tool_policies, "sleep", sleep)
    monkeypatch.setattr(tool_policies, "draw", lambda: 0.5)
    policy = RetryPolicy(max_attempts=4, backoff_base_s=10.0, backoff_max_s=25.0, jitter=0.2)
    body = Flaky(3)
    tools = [make_tool("t", body, idempotent=True, retry=policy)]
    with anyio.fail_after(5):  # the 10 s waits were never slept
        await run([user("go")], AgentContext(tools=tools), config(), turns([faux_tool_call("t")]))
    assert waited == pytest.approx([9.0, 18.0, 22.5])


async def test_a_hanging_tool_is_cancelled_and_answered_with_its_timeout() -> None:
    cancelled = []

    async def hang(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append(call_id)

    tools = [make_tool("hang", hang, timeout_s=0.01), make_tool("quick")]
    batch = [faux_tool_call("hang", id="c1"), faux_tool_call("quick", id="c2")]
    with anyio.fail_after(5):
        r = await run([user("go")], AgentContext(tools=tools), config(), turns(batch))
    assert cancelled == ["c1"]
    result = results(r)["c1"]
    assert result.is_error and text_of(result) == 'Tool "hang" timed out after 0.01 s'
    assert text_of(results(r)["c2"]) == "quick done"
    assert [m.tool_call_id for m in r.messages if m.role == "toolResult"] == ["c1", "c2"]


async def test_a_hanging_thread_tool_is_abandoned_at_its_timeout() -> None:
    release = threading.Event()

    def stuck(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        release.wait(5)
        on_update(text_result("too late"))
        return text_result("too late")

    tools = [make_tool("stuck", stuck, timeout_s=0.02)]
    try:
        with anyio.fail_after(5):
            r = await run(
                [user("go")],
                AgentContext(tools=tools),
                config(),
                turns([faux_tool_call("stuck", id="c1")]),
            )
    finally:
        release.set()
    assert text_of(results(r)["c1"]) == 'Tool "stuck" timed out after 0.02 s'
    assert r.of_type("tool_execution_update") == []


async def test_a_timed_out_attempt_is_retried_when_the_policy_says_so() -> None:
    runs: Counter[str] = Counter()

    async def slow_once(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        runs[call_id] += 1
        if runs[call_id] == 1:
            await anyio.sleep_forever()
        return text_result("second time lucky")

    tools = [make_tool("t", slow_once, timeout_s=0.01, idempotent=True, retry=FAST)]
    with anyio.fail_after(5):
        r = await run(
            [user("go")], AgentContext(tools=tools), config(), turns([faux_tool_call("t", id="c1")])
        )
    assert runs == {"c1": 2}
    assert text_of(results(r)["c1"]) == "second time lucky"
    (update,) = r.of_type("tool_execution_update")
    assert text_of(update.partial_result) == (
        'Attempt 1 of 3 failed: Tool "t" timed out after 0.01 s; retrying'
    )


class Gauge:
    """Counts the executions running at once, per tool and in all."""

    def __init__(self) -> None:
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()

    def tool(self, name: str, **kwargs: Any) -> Any:
        async def body(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
            self.now[name] += 1
            self.now["*"] += 1
            for key in (name, "*"):
                self.peak[key] = max(self.peak[key], self.now[key])
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            self.now[name] -= 1
            self.now["*"] -= 1
            return text_result(f"{call_id} done")

        return make_tool(name, body, **kwargs)


async def test_max_concurrency_caps_a_tools_executions_and_results_stay_in_order() -> None:
    gauge = Gauge()
    tools = [gauge.tool("capped", max_concurrency=2), gauge.tool("free")]
    batch = [faux_tool_call("capped", {"n": i}, id=f"c{i}") for i in range(5)]
    batch += [faux_tool_call("free", {"n": i}, id=f"f{i}") for i in range(3)]
    r = await run([user("go")], AgentContext(tools=tools), config(), turns(batch))
    assert gauge.peak["capped"] == 2
    assert gauge.peak["free"] == 3  # not capped: all three at once
    order = [m.tool_call_id for m in r.messages if m.role == "toolResult"]
    assert order == [c.id for c in r.messages[1].tool_calls()]
    assert order == [*(f"c{i}" for i in range(5)), *(f"f{i}" for i in range(3))]


async def test_the_runs_max_parallel_calls_caps_every_tool_together() -> None:
    gauge = Gauge()
    tools = [gauge.tool("a"), gauge.tool("b", max_concurrency=5)]
    batch = [faux_tool_call("a" if i % 2 else "b", {"n": i}, id=f"c{i}") for i in range(6)]
    policy = ToolPolicy(max_parallel_calls=2)
    r = await run([user("go")], AgentContext(tools=tools), config(tool_policy=policy), turns(batch))
    assert gauge.peak["*"] == 2
    assert [m.tool_call_id for m in r.messages if m.role == "toolResult"] == [
        f"c{i}" for i in range(6)
    ]


async def test_repeated_identical_calls_are_refused_with_an_error_result() -> None:
    body = Flaky(0)
    tools = [make_tool("t", body)]
    same = {"q": "weather"}
    faux = turns(
        [faux_tool_call("t", same, id="c1")],
        [faux_tool_call("t", same, id="c2")],
        [faux_tool_call("t", same, id="c3")],
        [faux_tool_call("t", {"q": "other"}, id="c4")],
    )
    r = await run(
        [user("go")],
        AgentContext(tools=tools),
        config(tool_policy=ToolPolicy(repeat_limit=2)),
        faux,
    )
    assert body.runs == {"c1": 1, "c4": 1}
    res = results(r)
    for refused, count in (("c2", 2), ("c3", 3)):
        assert res[refused].is_error
        assert text_of(res[refused]).startswith(
            f'Tool "t" was not executed: it was called with the same arguments {count} times'
        )
    assert r.events[-1].reason == "completed"


async def test_on_repeat_stop_ends_the_run_after_the_turn() -> None:
    tools = [make_tool("t")]
    faux = turns([faux_tool_call("t", id="c1")], [faux_tool_call("t", id="c2")])
    policy = ToolPolicy(repeat_limit=2, on_repeat="stop")
    r = await run([user("go")], AgentContext(tools=tools), config(tool_policy=policy), faux)
    assert r.events[-1].type == "agent_end" and r.events[-1].reason == "stopped"
    assert text_of(results(r)["c2"]).endswith("The run stops.")
    assert len(faux.calls) == 2  # no model request after the refused call's turn


async def test_an_abort_during_the_backoff_answers_the_call_aborted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    controller = AbortController()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await anyio.sleep_forever()

    monkeypatch.setattr(tool_policies, "sleep", sleep)
    body = Flaky(1)
    tools = [make_tool("t", body, idempotent=True, retry=FAST)]

    async def on_event(event: Any) -> None:
        if event.type == "tool_execution_update":
            controller.abort()

    with anyio.fail_after(5):
        r = await run(
            [user("go")],
            AgentContext(tools=tools),
            config(),
            turns([faux_tool_call("t", id="c1")]),
            signal=controller.signal,
            on_event=on_event,
        )
    assert body.runs == {"c1": 1}
    assert len(slept) <= 1  # the backoff may not have started before the abort
    assert text_of(results(r)["c1"]) == "Operation aborted"
    assert r.events[-1].reason == "aborted"


async def test_an_abort_while_a_timed_and_capped_tool_runs_ends_the_run_at_once() -> None:
    controller = AbortController()

    async def hang(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
        controller.abort()  # the run is aborted while this execution runs
        await anyio.sleep_forever()

    tools = [make_tool("hang", hang, timeout_s=30, max_concurrency=1)]
    with anyio.fail_after(5):  # the 30 s timeout is not waited for
        r = await run(
            [user("go")],
            AgentContext(tools=tools),
            config(tool_policy=ToolPolicy(max_parallel_calls=1)),
            turns([faux_tool_call("hang", id="c1")]),
            signal=controller.signal,
        )
    assert text_of(results(r)["c1"]) == "Operation aborted"
    assert r.events[-1].reason == "aborted"
