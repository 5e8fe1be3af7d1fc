"""Running a replay (see :mod:`agentcore_fsm.devtools.replay`): the loop is run again through
:func:`~agentcore_fsm.runtime.driver.run_agent_loop` with the recorded world played back, and
every event and transition is compared with the recording as it comes."""

from __future__ import annotations

import copy
import inspect
import os
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any, Literal, cast

import anyio

from agentcore_fsm.core.abort import AbortController
from agentcore_fsm.core.approval import ApprovalDecision
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, LlmContext, StreamOptions
from agentcore_fsm.core.events import StreamDone, StreamError
from agentcore_fsm.core.machine import TransitionRecord
from agentcore_fsm.core.messages import Model
from agentcore_fsm.core.tools import AgentTool, AgentToolResult, BeforeToolCallResult
from agentcore_fsm.devtools.replay_compare import (
    Divergence,
    ReplayResult,
    difference,
    left_out,
    plain_event,
    transition_key,
    transition_text,
)
from agentcore_fsm.devtools.replay_world import (
    FINAL_ERRORS,
    UNSET,
    ModelCall,
    Outcome,
    ReplayedFailure,
    ReplayError,
    ReplayScript,
    RunScript,
    ToolCallScript,
    replay_script,
)
from agentcore_fsm.persist.recording import RecordedRun, describe_event
from agentcore_fsm.runtime.driver import run_agent_loop

__all__ = [
    "CONTEXT_LINES",
    "DEFAULT_STALL_TIMEOUT",
    "Approver",
    "assert_replays",
    "replay_run",
    "replay_run_sync",
]

DEFAULT_STALL_TIMEOUT = 2.0
"""Seconds without a new event or transition after which a replay that still expects some is
reported as stalled (a replay performs no I/O and never sleeps: it only stalls when the
recording and the loop disagree)."""
CONTEXT_LINES = 4
"""How many records before a divergence its report shows."""
Approver = Callable[[Any, Any], Any]
"""A ``decide_approval(request, signal)`` (see
:class:`~agentcore_fsm.core.config.AgentLoopConfig`)."""


class _Replayer:
    """Plays a :class:`ReplayScript`'s outside world to the loop and compares what comes out."""

    def __init__(
        self,
        script: ReplayScript,
        stall_timeout: float,
        decide_approval: Approver | None = None,
    ) -> None:
        self.script = script
        self.stall_timeout = stall_timeout
        self.approver = decide_approval
        self.approvals = any(call.asked for call in script.tool_calls.values())
        self.expected = [plain_event(e) for e in script.events]
        self.expected_transitions = [transition_key(t) for t in script.transitions]
        self.position = {item: p for p, item in enumerate(script.order)}
        self.events: list[Any] = []
        self.transitions: list[TransitionRecord] = []
        self.divergence: Divergence | None = None
        self.stopped = False  # no more comparing: diverged, or the recording's end was reached
        self.controller: AbortController | None = None
        self.run: RunScript | None = None
        self.scope: anyio.CancelScope | None = None
        self.waiters: list[tuple[int, anyio.Event]] = []
        self.progress = time.monotonic()
        self.model_calls = 0
        self.counts: dict[str, int] = {}
        self.starts: dict[str, int] = {}
        self.last_started: tuple[str, int] | None = None
        self.abort_fired = False
        self.fail_fired = False
        self.tools = [
            AgentTool(
                name=spec.name,
                description=f"Replays the recorded results of {spec.name}.",
                parameters={},
                execute=self._execute,
                prepare_arguments=self._prepare if spec.prepare else None,
                execution_mode=spec.mode,
            )
            for spec in script.tool_specs
        ]

    # --- the whole replay ----------------------------------------------------------------

    async def replay(self) -> ReplayResult:
        error: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch)
            try:
                for number, run in enumerate(self.script.runs, 1):
                    if self.stopped:
                        break
                    await self._run_one(number, run)
            except Exception as exc:  # kept out of the task group's exception group
                error = exc
            finally:
                tg.cancel_scope.cancel()
        if error is not None:
            raise error
        if not self.stopped:
            missing = self._missing()
            if missing is not None:
                self.divergence = self._describe(*missing, None, "the replay ended here")
        return ReplayResult(
            events=self.events,
            transitions=self.transitions,
            divergence=self.divergence,
            recorded_events=len(self.script.events),
            recorded_transitions=len(self.script.transitions),
            notes=list(self.script.notes),
        )

    async def _run_one(self, number: int, run: RunScript) -> None:
        self.run = run
        self.controller = AbortController()
        self.counts = {}
        self.abort_fired = self.fail_fired = False
        config = AgentLoopConfig(model=run.model.model_copy(), tool_execution=run.tool_execution)
        if run.steering is not None:
            config.get_steering_messages = partial(self._outcome, "steering", run.steering)
        if run.follow_up is not None:
            config.get_follow_up_messages = partial(self._outcome, "follow_up", run.follow_up)
        if run.prepare_next_turn is not None:
            config.prepare_next_turn = partial(self._hook, "prepare", run.prepare_next_turn)
        if run.should_stop_after_turn is not None:
            config.should_stop_after_turn = partial(self._hook, "stop", run.should_stop_after_turn)
        if self.approvals:
            # before_tool_call asks for approval with the recorded reason (it emits nothing
            # itself); decide_approval gives the recorded decisions
            config.before_tool_call = self._before
            config.decide_approval = self._decide
        prompts = copy.deepcopy(run.prompts)
        self.progress = time.monotonic()
        try:
            with anyio.CancelScope() as scope:
                self.scope = scope
                await run_agent_loop(
                    prompts,
                    AgentContext(tools=list(self.tools)),
                    config,
                    self._emit,
                    signal=self.controller.signal,
                    stream_fn=self._stream,
                    on_transition=self._on_transition,
                )
        except (TypeError, ValueError) as exc:
            raise ReplayError(f"run {number} of the recording cannot be replayed: {exc}") from exc
        finally:
            self.scope = None
            self.run = None

    async def _watch(self) -> None:
        """Report a stall (nothing produced while the recording expects more), then, if the
        aborted replay still does not end, cancel it."""
        tick = max(0.01, min(0.1, self.stall_timeout / 4))
        while True:
            await anyio.sleep(tick)
            if self.run is None or time.monotonic() - self.progress < self.stall_timeout:
                continue
            self.progress = time.monotonic()
            if not self.stopped:
                missing = self._missing()
                if missing is not None:
                    why = f"nothing came for {self.stall_timeout:g} s: the replay stalled"
                    self.divergence = self._describe(*missing, None, why)
                self.stopped = True
                self._abort()
            elif self.scope is not None:
                self.scope.cancel()

    def _missing(self) -> tuple[Literal["event", "transition"], int] | None:
        """The first recorded record the replay has not produced."""
        produced = {"event": len(self.events), "transition": len(self.transitions)}
        for kind, i in self.script.order:
            if i >= produced[kind]:
                return ("event" if kind == "event" else "transition", i)
        return None

    def _abort(self) -> None:
        controller = self.controller
        if controller is not None and not controller.signal.aborted:
            controller.abort("replay")

    # --- what the loop produces ----------------------------------------------------------

    def _emit(self, event: Any) -> None:
        index = len(self.events)
        self.events.append(event)
        self.progress = time.monotonic()
        if event.type == "tool_execution_start":
            n = self.starts.get(event.tool_call_id, 0)
            self.starts[event.tool_call_id] = n + 1
            self.last_started = (event.tool_call_id, n)
        if not self.stopped:
            expected = self.expected
            if index >= len(expected) or plain_event(event) != expected[index]:
                self._diverge("event", index, event)
        self._wake()
        if self.stopped:
            return
        self._check_end()
        self._check_abort()
        run = self.run
        if run is not None and run.fail_at is not None and not self.fail_fired and not self.stopped:
            count, text, abort = run.fail_at
            if len(self.events) >= count:
                self.fail_fired = True
                if abort:
                    self._abort()
                raise ReplayedFailure(text)

    def _on_transition(self, record: Any) -> None:
        made = TransitionRecord(
            int(record.index), str(record.trigger), str(record.source), str(record.dest)
        )
        index = len(self.transitions)
        self.transitions.append(made)
        self.progress = time.monotonic()
        if self.stopped:
            return
        expected = self.expected_transitions
        if index >= len(expected) or transition_key(made) != expected[index]:
            self._diverge("transition", index, made)
            return
        self._check_end()
        self._check_abort()

    def _check_end(self) -> None:
        """A recording that stops mid-run: once all of it was produced, stop the replay."""
        if (
            not self.script.complete
            and len(self.events) >= len(self.expected)
            and len(self.transitions) >= len(self.expected_transitions)
        ):
            self.stopped = True
            self._abort()

    def _check_abort(self) -> None:
        run = self.run
        if self.stopped or run is None or run.abort_at is None or self.abort_fired:
            return
        events, transitions = run.abort_at
        if len(self.events) >= events and len(self.transitions) >= transitions:
            self.abort_fired = True
            self._abort()

    def _diverge(self, kind: Literal["event", "transition"], index: int, got: Any) -> None:
        self.divergence = self._describe(kind, index, got, None)
        self.stopped = True
        self._abort()

    def _describe(
        self, kind: Literal["event", "transition"], index: int, got: Any, why: str | None
    ) -> Divergence:
        script = self.script
        side: tuple[tuple[str, str | None, str | None], ...] = ()
        if kind == "event":
            want: Any = script.events[index] if index < len(script.events) else None
            expected = describe_event(want) if want is not None else None
            shown = describe_event(got) if got is not None else None
            if want is not None and got is not None:
                why = difference(self.expected[index], plain_event(got))
                if getattr(want, "type", None) != getattr(got, "type", None):
                    labels = [describe_event(e) for e in script.events]
                    side, why = left_out(kind, index, self.expected, plain_event(got), labels, why)
            recorded = len(script.events)
        else:
            want = script.transitions[index] if index < len(script.transitions) else None
            expected = transition_text(want) if want is not None else None
            shown = transition_text(got) if got is not None else None
            if want is not None and got is not None and want.index != got.index:
                why = f"index: expected {want.index}, got {got.index}"
                keys = self.expected_transitions
                labels = [transition_text(t) for t in script.transitions]
                side, why = left_out(kind, index, keys, transition_key(got), labels, why)
            recorded = len(script.transitions)
        at = self.position.get((kind, index), len(script.order))
        context = tuple(
            f"event #{i}: {describe_event(script.events[i])}"
            if what == "event"
            else f"transition #{i}: {transition_text(script.transitions[i])}"
            for what, i in script.order[max(0, at - CONTEXT_LINES) : at]
        )
        return Divergence(kind, index, expected, shown, why, context, recorded, side)

    def _wake(self) -> None:
        count = len(self.events)
        if not any(index <= count for index, _ in self.waiters):
            return
        ready = [event for index, event in self.waiters if index <= count]
        self.waiters = [(index, event) for index, event in self.waiters if index > count]
        for event in ready:
            event.set()

    async def _until(self, count: int) -> None:
        """Wait until ``count`` events have been produced."""
        if len(self.events) >= count:
            return
        event = anyio.Event()
        self.waiters.append((count, event))
        await event.wait()

    # --- the outside world, played back --------------------------------------------------

    def _stream(self, model: Model, context: LlmContext, options: StreamOptions) -> Any:
        index = self.model_calls
        self.model_calls += 1
        calls = self.script.model_calls
        return self._play(calls[index] if index < len(calls) else None)

    async def _play(self, call: ModelCall | None) -> AsyncIterator[Any]:
        if call is None:
            raise ReplayedFailure("replay: the recording holds no more model calls")
        for event in call.events:
            yield copy.deepcopy(event)
        if call.end == "done" and call.message is not None:
            message = copy.deepcopy(call.message)
            reason = message.stop_reason
            if reason in FINAL_ERRORS:
                yield StreamError(reason=cast(Any, reason), error=message)
            else:
                yield StreamDone(reason=cast(Any, reason), message=message)
        elif call.end == "raise":
            if call.abort:
                self._abort()
            raise ReplayedFailure(call.error or "replayed failure")
        else:  # aborted (the signal fires at the recorded point) or the recording stops here
            await anyio.sleep_forever()

    def _outcome(self, name: str, outcomes: list[Outcome]) -> Any:
        index = self.counts.get(name, 0)
        self.counts[name] = index + 1
        if index >= len(outcomes):
            return None
        outcome = outcomes[index]
        if outcome.abort:
            self._abort()
        if outcome.error is not None:
            raise ReplayedFailure(outcome.error)
        return copy.deepcopy(outcome.value)

    def _hook(self, name: str, outcomes: list[Outcome], ctx: Any, signal: Any) -> Any:
        return self._outcome(name, outcomes)

    def _current_call(self, key: tuple[str, int] | None) -> ToolCallScript | None:
        return self.script.tool_calls.get(key) if key is not None else None

    def _prepare(self, raw: dict[str, Any]) -> dict[str, Any]:
        # the call being prepared is the one whose tool_execution_start came last
        call = self._current_call(self.last_started)
        if call is None:
            return raw
        if call.rejected is not None:
            raise ReplayedFailure(call.rejected)
        if call.prepared is not UNSET:
            prepared: dict[str, Any] = copy.deepcopy(call.prepared)
            return prepared
        return raw

    def _before(self, ctx: Any, signal: Any) -> BeforeToolCallResult | None:
        call_id = ctx.tool_call.id
        call = self._current_call((call_id, self.starts.get(call_id, 0) - 1))
        if call is None or not call.asked:
            return None
        return BeforeToolCallResult(require_approval=True, reason=call.approval)

    async def _decide(self, request: Any, signal: Any) -> Any:
        call_id = request.tool_call_id
        call = self._current_call((call_id, self.starts.get(call_id, 0) - 1))
        if call is None or call.decision is None or call.decided_at is None:
            # undecided where the recording stops, or answered by the abort, which replays
            await anyio.sleep_forever()
            raise AssertionError("unreachable")  # pragma: no cover
        await self._until(call.decided_at)
        if self.approver is not None:  # replaying with another approver
            approver: Any = self.approver
            value = approver(request, signal)
            return await value if inspect.isawaitable(value) else value
        decision = call.decision
        return ApprovalDecision(
            approved=decision.approved,
            reason=decision.reason,
            decided_by=decision.decided_by,
            args=copy.deepcopy(decision.args),
        )

    async def _execute(
        self,
        tool_call_id: str,
        params: Any,
        signal: Any,
        on_update: Callable[[AgentToolResult], None],
    ) -> AgentToolResult:
        call = self._current_call((tool_call_id, self.starts.get(tool_call_id, 0) - 1))
        if call is None:
            raise ReplayedFailure(f"replay: the recording holds no call {tool_call_id}")
        for index, update in call.updates:
            await self._until(index)
            on_update(copy.deepcopy(update))
        if call.end is None or call.result is None:
            await anyio.sleep_forever()  # it was still running when the run was aborted
            raise AssertionError("unreachable")  # pragma: no cover
        await self._until(call.end)
        return copy.deepcopy(call.result)


async def replay_run(
    source: RecordedRun | ReplayScript | str | os.PathLike[str],
    *,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    decide_approval: Approver | None = None,
) -> ReplayResult:
    """Re-run a recording offline (a path, a :class:`~agentcore_fsm.persist.recorder.RecordedRun`
    or a
    :class:`ReplayScript`) and compare what comes out with it, event by event and transition by
    transition; see the module docstring. Runs on trio or asyncio.

    ``stall_timeout``: seconds without progress, while the recording expects more, after which
    the replay is reported as stalled. ``decide_approval``: decide the recorded approvals with
    this approver (sync or async, as ``AgentLoopConfig.decide_approval``) instead of giving the
    recorded decisions; it is asked at the point each recorded decision came, and the first
    decision that differs from the recorded one diverges at its ``approval_decided`` event (or
    at the transition it caused, recorded just before it). Raises as :func:`replay_script`
    does."""
    if not stall_timeout > 0:
        raise ValueError(f"stall_timeout must be a positive number of seconds, not {stall_timeout}")
    return await _Replayer(replay_script(source), stall_timeout, decide_approval).replay()


def replay_run_sync(
    source: RecordedRun | ReplayScript | str | os.PathLike[str],
    *,
    backend: Literal["trio", "asyncio"] = "trio",
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    decide_approval: Approver | None = None,
) -> ReplayResult:
    """:func:`replay_run` from synchronous code, on ``backend`` (not from inside a running
    event loop: there, ``await replay_run(...)``)."""
    script = replay_script(source)  # read errors raise here, bare
    run: Callable[[], Any] = partial(
        replay_run, script, stall_timeout=stall_timeout, decide_approval=decide_approval
    )
    result: ReplayResult = anyio.run(run, backend=backend)
    return result


def assert_replays(
    source: RecordedRun | ReplayScript | str | os.PathLike[str],
    *,
    backend: Literal["trio", "asyncio"] = "trio",
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    decide_approval: Approver | None = None,
) -> ReplayResult:
    """The regression test in one call: replay the recording and raise ``AssertionError``
    with the report of the first divergence, if any; return the :class:`ReplayResult` when
    the replay was identical. Synchronous (in async code: ``(await
    replay_run(path)).check()``)."""
    return replay_run_sync(
        source, backend=backend, stall_timeout=stall_timeout, decide_approval=decide_approval
    ).check()
