"""Generated runs with per-tool timeouts, retries and concurrency caps and a run-wide tool
policy, through the real driver on both backends (docs/policies-tools.md).

Each example scripts the model's batches and, per call, what each attempt does (return, return
an error result, raise a failure the policy lists, raise one it does not, hang until the
timeout). The oracle is a direct reading of the docs: how many times each call runs, which
calls are refused as repeats, how the run ends. Besides it: the grammar and transcript
invariants hold (``helpers.run`` checks them), every call gets exactly one result, results are
in source order, no non-idempotent call runs twice unless its policy opts in, the executions at
once never exceed a tool's or the run's cap (measured inside the tools), and a call whose last
attempt timed out has a result naming the timeout.

On trio the run's clock is trio's ``MockClock`` (autojump): timeouts and backoffs take no real
time. On asyncio the timeouts are 150 or 300 ms (fewer examples), long beside what a call that
does not hang does (a few checkpoints); backoffs are a millisecond or two.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import trio.testing
from helpers import MODEL, make_tool, run, text_of, text_result, user
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore_fsm import AgentContext, AgentLoopConfig
from agentcore_fsm.core.retry import RetryPolicy
from agentcore_fsm.core.tool_policy import ToolPolicy, call_key
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call

OUTCOMES = ("ok", "error_result", "listed", "unlisted", "hang")


@dataclass
class ToolSpec:
    name: str
    idempotent: bool
    timeout_s: float | None
    retry: RetryPolicy | None
    max_concurrency: int | None


@dataclass
class Scenario:
    tools: list[ToolSpec]
    batches: list[list[tuple[int, int]]]  # per batch: (tool index, argument)
    attempts: dict[str, list[str]]  # per call id: what each attempt does
    mode: str
    policy: ToolPolicy | None
    ids: list[list[str]] = field(default_factory=list)


retry_policies = st.builds(
    RetryPolicy,
    retry_on=st.just((ConnectionError,)),
    max_attempts=st.integers(1, 3),
    backoff_base_s=st.sampled_from([0.0, 0.0005, 0.001]),
    backoff_max_s=st.just(0.002),
    jitter=st.floats(0, 1),
    retry_timeouts=st.booleans(),
    retry_non_idempotent=st.booleans(),
)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    tools = [
        ToolSpec(
            name=f"t{i}",
            idempotent=draw(st.booleans()),
            timeout_s=draw(st.sampled_from([None, 0.03, 0.06])),
            retry=draw(st.none() | retry_policies),
            max_concurrency=draw(st.sampled_from([None, 1, 2])),
        )
        for i in range(draw(st.integers(1, 3)))
    ]
    batches = draw(
        st.lists(
            st.lists(st.tuples(st.integers(0, len(tools) - 1), st.integers(0, 1)), max_size=4),
            min_size=1,
            max_size=3,
        ).map(lambda bs: [b for b in bs if b] or [[(0, 0)]])
    )
    ids = [[f"b{b}c{i}" for i in range(len(batch))] for b, batch in enumerate(batches)]
    attempts: dict[str, list[str]] = {}
    for b, batch in enumerate(batches):
        for i, (t, _) in enumerate(batch):
            allowed = OUTCOMES if tools[t].timeout_s is not None else OUTCOMES[:-1]
            attempts[ids[b][i]] = draw(st.lists(st.sampled_from(allowed), min_size=3, max_size=3))
    policy = draw(
        st.none()
        | st.builds(
            ToolPolicy,
            max_parallel_calls=st.sampled_from([None, 1, 2]),
            repeat_limit=st.sampled_from([None, 2, 3]),
            on_repeat=st.sampled_from(["error", "stop"]),
        )
    )
    mode = draw(st.sampled_from(["parallel", "sequential"]))
    return Scenario(tools, batches, attempts, mode, policy, ids)


def expected(sc: Scenario) -> tuple[dict[str, int], set[str], str, int]:
    """The executions of each call made, the calls refused as repeats, the end reason and how
    many batches the model got to make, as docs/policies-tools.md says."""
    runs: dict[str, int] = {}
    refused: set[str] = set()
    key, count = None, 0
    policy = sc.policy
    for b, batch in enumerate(sc.batches):
        stop = False
        for i, (t, arg) in enumerate(batch):
            spec, call_id = sc.tools[t], sc.ids[b][i]
            this = call_key(spec.name, {"k": arg})
            count = count + 1 if this == key else 1
            key = this
            if policy is not None and policy.repeat_limit and count >= policy.repeat_limit:
                refused.add(call_id)
                runs[call_id] = 0
                stop = stop or policy.on_repeat == "stop"
                continue
            n = 0
            for outcome in sc.attempts[call_id]:
                n += 1
                retry = spec.retry
                if outcome in ("ok", "error_result", "unlisted") or retry is None:
                    break
                if not retry.applies_to(spec.idempotent) or n >= retry.max_attempts:
                    break
                if outcome == "hang" and not retry.retry_timeouts:
                    break
            runs[call_id] = n
        if stop:
            return runs, refused, "stopped", b + 1
    return runs, refused, "completed", len(sc.batches)


class Measured:
    """The tools of a scenario, counting executions and how many run at once."""

    def __init__(self, sc: Scenario, scale: float) -> None:
        self.sc = sc
        self.scale = scale
        self.runs: Counter[str] = Counter()
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()

    def tools(self) -> list[Any]:
        return [self._tool(spec) for spec in self.sc.tools]

    def _tool(self, spec: ToolSpec) -> Any:
        async def body(call_id: str, params: Any, signal: Any, on_update: Any) -> Any:
            self.runs[call_id] += 1
            outcome = self.sc.attempts[call_id][self.runs[call_id] - 1]
            self.now[spec.name] += 1
            self.now["*"] += 1
            for k in (spec.name, "*"):
                self.peak[k] = max(self.peak[k], self.now[k])
            try:
                for _ in range(3):
                    await anyio.lowlevel.checkpoint()
                if outcome == "hang":
                    await anyio.sleep_forever()
                if outcome == "listed":
                    raise ConnectionError(f"{call_id} refused")
                if outcome == "unlisted":
                    raise KeyError(call_id)
                return text_result(f"{call_id} {outcome}", is_error=outcome == "error_result")
            finally:
                self.now[spec.name] -= 1
                self.now["*"] -= 1

        return make_tool(
            spec.name,
            body,
            idempotent=spec.idempotent,
            timeout_s=None if spec.timeout_s is None else spec.timeout_s * self.scale,
            retry=spec.retry,
            max_concurrency=spec.max_concurrency,
        )


async def check(sc: Scenario, scale: float) -> None:
    measured = Measured(sc, scale)
    batches = [
        faux_response(
            tool_calls=[
                faux_tool_call(sc.tools[t].name, {"k": arg}, id=sc.ids[b][i])
                for i, (t, arg) in enumerate(batch)
            ]
        )
        for b, batch in enumerate(sc.batches)
    ]
    config = AgentLoopConfig(model=MODEL, tool_execution=sc.mode, tool_policy=sc.policy)  # type: ignore[arg-type]
    with anyio.fail_after(20):
        r = await run(
            [user("go")],
            AgentContext(tools=measured.tools()),
            config,
            FauxProvider([*batches, faux_response("done")]),
        )
    runs, refused, reason, made = expected(sc)
    assert r.events[-1].reason == reason
    made_ids = [i for ids in sc.ids[:made] for i in ids]
    # every call made gets exactly one start, one end, one result message, in source order
    for kind in ("tool_execution_start", "tool_execution_end"):
        assert sorted(e.tool_call_id for e in r.of_type(kind)) == sorted(made_ids), kind
    results = [m for m in r.messages if m.role == "toolResult"]
    assert [m.tool_call_id for m in results] == made_ids
    assert dict(measured.runs) == {c: n for c, n in runs.items() if n}
    by_id = {m.tool_call_id: m for m in results}
    spec_of = {
        sc.ids[b][i]: sc.tools[t]
        for b, batch in enumerate(sc.batches)
        for i, (t, _) in enumerate(batch)
    }
    for call_id in made_ids:
        spec, text = spec_of[call_id], text_of(by_id[call_id])
        n = measured.runs[call_id]
        opted = spec.retry is not None and spec.retry.retry_non_idempotent
        if not spec.idempotent and not opted:
            assert n <= 1, call_id  # never run twice
        if call_id in refused:
            assert n == 0 and by_id[call_id].is_error
            assert "with the same arguments" in text
            continue
        last = sc.attempts[call_id][n - 1]
        if spec.timeout_s is not None:
            timed_out = f'Tool "{spec.name}" timed out after {spec.timeout_s * scale:g} s'
            assert text.startswith(timed_out) == (last == "hang"), (call_id, text)
        else:
            assert "timed out" not in text and last != "hang"
        assert by_id[call_id].is_error == (last != "ok"), (call_id, text)
        updates = [e for e in r.of_type("tool_execution_update") if e.tool_call_id == call_id]
        assert len(updates) == n - 1  # one per attempt tried again
    for spec in sc.tools:
        if spec.max_concurrency is not None:
            assert measured.peak[spec.name] <= spec.max_concurrency
    if sc.policy is not None and sc.policy.max_parallel_calls is not None:
        assert measured.peak["*"] <= sc.policy.max_parallel_calls
    if sc.mode == "sequential":
        assert measured.peak["*"] <= 1


@settings(max_examples=60)
@given(sc=scenarios())
def test_generated_policy_runs_follow_the_docs_on_trio(sc: Scenario) -> None:
    # virtual time: a hang costs nothing, and a loaded machine times nothing out
    clock = trio.testing.MockClock(autojump_threshold=0)
    anyio.run(check, sc, 1.0, backend="trio", backend_options={"clock": clock})


@settings(max_examples=25)
@given(sc=scenarios())
def test_generated_policy_runs_follow_the_docs_on_asyncio(sc: Scenario) -> None:
    # real time: timeouts of 150 or 300 ms, long beside a call that does not hang (a few
    # checkpoints) even on a loaded machine
    anyio.run(check, sc, 5.0, backend="asyncio")
