"""Hostile runs: every user-supplied callable misbehaves, and an independent invariant checker.

A :class:`Plan` is plain frozen data (so hypothesis can shrink and print it). It says which hooks
and polls are configured, how each user callable behaves (:class:`Behaviour`: normally, return
junk, raise, hang until rescued, fire the abort, or misbehave only on its n-th call), what the
model answers and how its stream misbehaves (:class:`Response`), and whether the run is aborted
or cancelled from outside at the k-th event.

:class:`Harness` runs a plan through ``run_agent_loop`` (or, :class:`AgentHarness`, through an
``Agent``) on the current anyio backend and records everything: the events, the model contexts,
when each callable was entered and whether the signal had fired by then, what the polls returned.
A hang is rescued deterministically (the harness fires the abort, or cancels the scope around the
run, a few checkpoints after the hang began), and every run sits under ``anyio.fail_after`` so
that a run that never ends is a failure with a message, not a stuck suite.

:func:`check_invariants`, :func:`check_transcript` and :func:`check_llm_context` restate the
transcript rules from scratch (they share no code with ``agentcore_fsm.devtools.testing``):

* ``agent_start`` first, ``agent_end`` exactly once and last; turns never nest, one assistant
  message per turn, and ``turn_end.message`` is it;
* every ``message_start``/``message_end`` carries a real message object (a pydantic message, or
  an object with a str ``role``), never a str, dict or None, and the two alternate;
* an assistant message ends with a final stop reason, and an "error"/"aborted" one carries a
  non-empty str ``error_message``;
* every tool call of an assistant message whose stop reason is "toolUse", "stop" or "length" is
  started, ended and answered by exactly one result message in its turn (matched by id, counted
  with multiplicity so that duplicate ids are covered), results in source order; calls of a
  failed message are never started or answered;
* in sequential mode each call's events are ``start, update*, end, result message pair`` before
  the next call starts, also when an abort or a failure answers the remaining calls;
* ``agent_end.messages`` is every message the run created (the ``message_end`` messages, in
  order), and equals what the run returned.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import sniffio
import trio
from hypothesis import strategies as st

from agentcore_fsm import (
    AbortController,
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
)
from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.config import LlmContext, default_convert_to_llm
from agentcore_fsm.core.events import (
    StreamDone,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCallEnd,
    ToolCallStart,
)
from agentcore_fsm.core.messages import Usage
from agentcore_fsm.devtools.testing import FauxProvider

HANG_TIMEOUT = 10.0
"""Seconds a single run may take before it counts as hung (a failure, never a pass)."""

MODEL = Model(id="adv-model", provider="adv", api="adv-api")
SYSTEM = "You are under attack."
SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}

FINAL_STOPS = frozenset({"stop", "length", "toolUse", "error", "aborted"})
ANSWERABLE = frozenset({"toolUse", "stop", "length"})
END_REASONS = frozenset({"completed", "stopped", "aborted", "error"})
MESSAGE_CLASSES = (UserMessage, AssistantMessage, ToolResultMessage)


# --- leaks --------------------------------------------------------------------------------


def registered_runs() -> int:
    """How many runs are registered on the compiled transitions machines right now.

    Runs are stepped through the compiled machines of their declarations and never registered
    on them, so this must stay 0 whatever happens (a change that registered runs without
    always removing them would show up here).
    """
    from agentcore_fsm.core.declaration import load_declaration

    return sum(
        len(compiled.machine.models)
        for name in ("agent_loop", "tool_call", "agent")
        for compiled in load_declaration(name).compiled.values()
    )


def live_tasks() -> int:
    """Every task alive in the current event loop (trio: the whole task tree)."""
    if sniffio.current_async_library() == "trio":

        def count(task: Any) -> int:
            return 1 + sum(count(c) for n in task.child_nurseries for c in n.child_tasks)

        return count(trio.lowlevel.current_root_task())
    return len(asyncio.all_tasks())


# --- junk ---------------------------------------------------------------------------------


class Nasty:
    """A value every coercion chokes on: truth, length, iteration, str and repr all raise."""

    def __bool__(self) -> bool:
        raise RuntimeError("Nasty.__bool__ raised")

    def __len__(self) -> int:
        raise RuntimeError("Nasty.__len__ raised")

    def __iter__(self) -> Iterator[Any]:
        raise RuntimeError("Nasty.__iter__ raised")

    def __str__(self) -> str:
        raise RuntimeError("Nasty.__str__ raised")

    def __repr__(self) -> str:
        raise RuntimeError("Nasty.__repr__ raised")


JUNK: tuple[tuple[str, Callable[[], Any]], ...] = (
    ("None", lambda: None),
    ("str", lambda: "hello"),
    ("int", lambda: 42),
    ("dict", lambda: {"a": 1}),
    ("junk list", lambda: [1, "x", None]),
    ("object", object),
    ("Model", lambda: Model(id="junk-model")),
    ("Usage", Usage),
    ("UserMessage", lambda: UserMessage(content="junk user message")),
    ("pending AssistantMessage", lambda: AssistantMessage(stop_reason="pending")),
    ("Nasty", Nasty),
    ("bytes", lambda: b"bytes"),
    ("nan", lambda: math.nan),
    ("True", lambda: True),
)
JUNK_LABELS = tuple(label for label, _ in JUNK)


def junk(index: int) -> Any:
    return JUNK[index % len(JUNK)][1]()


def junk_label(index: int) -> str:
    return JUNK[index % len(JUNK)][0]


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("BadStr.__str__ raised")


class BadStrType(Exception):
    def __str__(self) -> str:
        return 42  # type: ignore[return-value]


class BadStrRepr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("BadStrRepr.__str__ raised")

    def __repr__(self) -> str:
        raise RuntimeError("BadStrRepr.__repr__ raised")


CLASS_NAME = object()  # expectation: the text names the exception's class
ANY_TEXT = object()  # expectation: only a non-empty str

EXCEPTIONS: tuple[tuple[str, Callable[[], BaseException], Any], ...] = (
    ("RuntimeError", lambda: RuntimeError("boom"), "boom"),
    ("empty ValueError", lambda: ValueError(""), CLASS_NAME),
    ("BadStr", BadStr, CLASS_NAME),
    ("BadStrType", BadStrType, CLASS_NAME),
    ("BadStrRepr", BadStrRepr, CLASS_NAME),
    (
        "ExceptionGroup",
        lambda: ExceptionGroup("grp", [ValueError("inner"), KeyError("k")]),
        "grp",
    ),
    ("KeyError", lambda: KeyError("k"), "k"),
    ("StopIteration", lambda: StopIteration("halt"), ANY_TEXT),
    ("surrogate", lambda: ValueError("bad \ud83d text"), "bad"),
    ("OSError", lambda: OSError(5, "io failed"), "io failed"),
)


def exception(index: int) -> BaseException:
    return EXCEPTIONS[index % len(EXCEPTIONS)][1]()


def exception_expectation(index: int) -> tuple[str, Any]:
    """(class name, what the error text must contain: a str, CLASS_NAME or ANY_TEXT)."""
    _, factory, expect = EXCEPTIONS[index % len(EXCEPTIONS)]
    return type(factory()).__name__, expect


def text_meets(text: Any, class_name: str, expect: Any) -> bool:
    """Whether an error text meets an exception's expectation (always a non-empty str)."""
    if not isinstance(text, str) or not text:
        return False
    if expect is ANY_TEXT:
        return True
    if expect is CLASS_NAME:
        return class_name in text
    return bool(expect in text)


class CustomBase(BaseException):
    """A BaseException that is neither KeyboardInterrupt nor SystemExit."""


BASE_EXCEPTIONS: tuple[Callable[[], BaseException], ...] = (
    KeyboardInterrupt,
    lambda: SystemExit(3),
    lambda: CustomBase("custom base"),
)

# done/error messages that are not assistant messages (or not final ones)
DONE_JUNK: tuple[Callable[[], Any], ...] = (
    lambda: {"role": "assistant", "content": [], "stop_reason": "stop"},
    lambda: UserMessage(content="not an answer"),
    lambda: None,
    lambda: AssistantMessage(stop_reason="pending"),
    lambda: Model(id="done-model"),
    lambda: "done",
)


# --- the data -----------------------------------------------------------------------------

TOOL_EXEC_SITES = ("execute", "execute_sync")
TOOL_HOOK_SITES = ("before_tool_call", "after_tool_call")
LOOP_HOOK_SITES = (
    "prepare_next_turn",
    "should_stop_after_turn",
    "transform_context",
    "convert_to_llm",
    "get_api_key",
)
POLL_SITES = ("get_steering_messages", "get_follow_up_messages")
HOOK_SITES = TOOL_HOOK_SITES + LOOP_HOOK_SITES + POLL_SITES  # configured or not
AGENT_HOOK_SITES = TOOL_HOOK_SITES + LOOP_HOOK_SITES  # the agent owns its polls
SIGNALLED = frozenset({*TOOL_HOOK_SITES, "prepare_next_turn", "should_stop_after_turn"})
TOOL_NAMES = ("calc", "calc_sync", "prep", "seq")
TOOL_OF_SITE = {"execute": "calc", "execute_sync": "calc_sync", "prepare_arguments": "prep"}


@dataclass(frozen=True)
class Behaviour:
    """How one user callable behaves. ``kind``: ok | junk (return ``JUNK[arg]``) | raise
    (``EXCEPTIONS[arg]``) | base (``BASE_EXCEPTIONS[arg]``) | hang (``arg`` 0: until the
    signal fires, else sleep forever; rescued by the harness) | abort (fire the abort, then
    behave) | update_junk (tools: pass ``JUNK[arg]`` to ``on_update``). ``nth``: misbehave only
    on that call (0-based); None: on every call."""

    kind: str = "ok"
    arg: int = 0
    nth: int | None = None

    def applies(self, n: int) -> bool:
        return self.kind != "ok" and (self.nth is None or self.nth == n)


@dataclass(frozen=True)
class CallSpec:
    """One tool call the model makes."""

    tool: str = "calc"  # calc | calc_sync | prep | seq | nope (not registered)
    ident: str = "ok"  # ok | dup | empty | none
    args: str = "ok"  # ok | bad | surrogate | not_a_dict


@dataclass(frozen=True)
class Response:
    """One model call's answer and how its stream (mis)behaves."""

    text: str | None = "ok"
    calls: tuple[CallSpec, ...] = ()
    stop: str | None = None  # None: "toolUse" with calls, else "stop"
    error_message: bool = True  # whether an "error"/"aborted" stop carries an error_message
    # faux | raw | nostart | async_fn | raise_before | raise_mid | junk_return | junk_event |
    # junk_done | junk_error | junk_partial | no_terminal | after_terminal | hang | abort_mid
    style: str = "faux"
    arg: int = 0
    cut: int = 0

    @property
    def stop_reason(self) -> str:
        return self.stop or ("toolUse" if self.calls else "stop")


NORMAL_STYLES = ("faux", "raw", "async_fn")
FAILING_STYLES = (
    "raise_before",
    "raise_mid",
    "junk_return",
    "junk_event",
    "junk_done",
    "junk_error",
    "junk_partial",
    "no_terminal",
    "after_terminal",
)
ODD_STYLES = (*FAILING_STYLES, "nostart", "hang", "abort_mid")


@dataclass(frozen=True)
class Plan:
    responses: tuple[Response, ...] = (Response(),)
    hooks: tuple[str, ...] = ()  # the configured hooks and polls
    behaviours: tuple[tuple[str, Behaviour], ...] = ()  # sites that misbehave (others: ok)
    asyncs: tuple[str, ...] = ()  # the sync-or-async callables written as async def
    mode: str = "parallel"
    abort_at: int | None = None  # the emit/listener fires the abort at this event index
    cancel_at: int | None = None  # ... or cancels the scope around the run
    steer_at: int | None = None  # (Agent) the listener steers JUNK[steer_arg] at this event
    steer_arg: int = 0
    rescue: str = "abort"  # what ends a hang: abort | cancel (the scope) | timer (move_on_after)
    prompt: str = "hi"
    history: bool = False

    def behaviour(self, site: str) -> Behaviour:
        for name, b in self.behaviours:
            if name == site:
                return b
        return Behaviour()


# --- strategies ---------------------------------------------------------------------------

call_specs = st.builds(
    CallSpec,
    tool=st.sampled_from(["calc", "calc", "calc", "calc_sync", "prep", "seq", "nope"]),
    ident=st.sampled_from(["ok"] * 8 + ["dup", "empty", "none"]),
    args=st.sampled_from(["ok"] * 6 + ["bad", "surrogate", "not_a_dict"]),
)


@st.composite
def responses(draw: st.DrawFn, *, odd: bool = True) -> Response:
    styles = list(NORMAL_STYLES) * 4 + (list(ODD_STYLES) if odd else [])
    return Response(
        text=draw(st.sampled_from([None, "", "ok", "text with a lone \ud83d surrogate"])),
        calls=tuple(draw(st.lists(call_specs, max_size=3))),
        stop=draw(st.sampled_from([None] * 8 + ["stop", "toolUse", "length", "error", "aborted"])),
        error_message=draw(st.sampled_from([True, True, False])),
        style=draw(st.sampled_from(styles)),
        arg=draw(st.integers(0, 20)),
        cut=draw(st.integers(0, 6)),
    )


@st.composite
def behaviours(draw: st.DrawFn, site: str, rescue: str) -> Behaviour:
    kinds = ["junk", "raise", "hang", "abort"]
    if site in TOOL_EXEC_SITES:
        kinds.append("update_junk")
    if site == "prepare_arguments":
        kinds.remove("hang")  # called synchronously: it cannot hang without blocking the loop
    if site in ("emit", "listener") and rescue != "abort":
        kinds.remove("hang")  # emit is never cancelled: it may only wait for the signal
    kind = draw(st.sampled_from(kinds))
    arg = draw(st.integers(0, 20))
    if kind == "hang" and site in ("emit", "listener"):
        arg = 0
    return Behaviour(kind, arg, draw(st.one_of(st.none(), st.integers(0, 3))))


@st.composite
def plans(draw: st.DrawFn, *, agent: bool = False, odd: bool = True) -> Plan:
    """Any plan: a few callables misbehave, aborts and outside cancellation at random events."""
    rescue = draw(st.sampled_from(["abort", "abort", "cancel"]))
    hook_sites = AGENT_HOOK_SITES if agent else HOOK_SITES
    hooks = tuple(site for site in hook_sites if draw(st.booleans()))
    emitter = "listener" if agent else "emit"
    candidates = [*hooks, "execute", "execute_sync", "prepare_arguments", emitter]
    n_bad = draw(st.sampled_from([0, 1, 1, 2, 2, 3]))
    chosen = draw(
        st.lists(st.sampled_from(candidates), min_size=n_bad, max_size=n_bad, unique=True)
    )
    chosen_behaviours = tuple((site, draw(behaviours(site, rescue))) for site in chosen)
    async_capable = [*hooks, emitter]
    asyncs = tuple(site for site in async_capable if draw(st.booleans()))
    script = draw(st.lists(responses(odd=odd), min_size=1, max_size=4))
    if draw(st.sampled_from([True, True, False])):
        script.append(Response(text="final answer"))
    events = st.one_of(st.none(), st.none(), st.integers(0, 60))
    return Plan(
        responses=tuple(script),
        hooks=hooks,
        behaviours=chosen_behaviours,
        asyncs=asyncs,
        mode=draw(st.sampled_from(["parallel", "parallel", "sequential"])),
        abort_at=draw(events),
        cancel_at=draw(st.one_of(st.none(), st.none(), st.none(), st.integers(0, 60))),
        steer_at=draw(st.one_of(st.none(), st.integers(0, 30))) if agent else None,
        steer_arg=draw(st.integers(0, 20)),
        rescue=rescue,
        prompt=draw(st.sampled_from(["hi", "lone \ud83d surrogate"])),
        history=draw(st.booleans()),
    )


# --- building model messages --------------------------------------------------------------


def call_block(response: int, index: int, spec: CallSpec) -> ToolCall:
    ident: Any = {
        "ok": f"r{response}c{index}",
        "dup": f"r{response}dup",
        "empty": "",
        "none": None,
    }[spec.ident]
    arguments: Any = {
        "ok": {"x": index},
        "bad": {"x": "not a number"},
        "surrogate": {"x": index, "note": "\ud83d"},
        "not_a_dict": [index],
    }[spec.args]
    if ident is None or not isinstance(arguments, dict):
        return ToolCall.model_construct(id=ident, name=spec.tool, arguments=arguments)
    return ToolCall(id=ident, name=spec.tool, arguments=arguments)


def odd_ids(response: Response) -> bool:
    return any(c.ident in ("none",) or c.args == "not_a_dict" for c in response.calls)


def assistant_for(k: int, r: Response, model: Model = MODEL) -> AssistantMessage:
    content: list[Any] = []
    if r.text is not None:
        content.append(TextContent(text=r.text))
    content.extend(call_block(k, i, c) for i, c in enumerate(r.calls))
    stop = r.stop_reason
    error = f"model {stop}" if stop in ("error", "aborted") and r.error_message else None
    return AssistantMessage(
        content=content,
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason=stop,  # type: ignore[arg-type]
        error_message=error,
    )


# --- safe helpers (junk must never crash the checker itself) ---------------------------------


def safe_role(message: Any) -> Any:
    if isinstance(message, dict):
        return None
    try:
        return getattr(message, "role", None)
    except Exception:
        return None


def is_real_message(message: Any) -> bool:
    """A pydantic message, or a custom object with a str ``role``; never str/dict/None/...."""
    if isinstance(message, MESSAGE_CLASSES):
        return True
    if message is None or isinstance(message, (str, bytes, dict, list, tuple, int, float)):
        return False
    return isinstance(safe_role(message), str)


def same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def label(message: Any) -> str:
    role = safe_role(message)
    if isinstance(message, AssistantMessage):
        return f"assistant/{message.stop_reason}"
    if isinstance(message, ToolResultMessage):
        return f"toolResult/{message.tool_call_id!r}"
    if role is not None:
        return str(role)
    return f"<{type(message).__name__}>"


def describe_event(event: Any) -> str:
    kind = getattr(event, "type", None)
    if kind in ("message_start", "message_end"):
        return f"{kind}({label(event.message)})"
    if kind in ("tool_execution_start", "tool_execution_update", "tool_execution_end"):
        return f"{kind}({event.tool_call_id!r})"
    if kind == "agent_end":
        return f"agent_end({getattr(event, 'reason', None)})"
    return str(kind) if kind is not None else f"<{type(event).__name__}>"


def tool_calls_of(message: Any) -> list[Any]:
    if isinstance(message, AssistantMessage):
        content = message.content
    else:
        try:
            content = getattr(message, "content", None)
        except Exception:
            content = None
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, ToolCall) or getattr(b, "type", None) == "toolCall"]


def stop_of(message: Any) -> Any:
    try:
        return getattr(message, "stop_reason", None)
    except Exception:
        return None


def result_text(message: Any) -> str:
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b.text for b in content if isinstance(b, TextContent))


def message_text(message: Any) -> str:
    return result_text(message)


# --- the independent invariant checker ----------------------------------------------------


class InvariantError(AssertionError):
    pass


@dataclass
class RunSummary:
    reason: str
    created: list[Any]
    turns: list[tuple[int, int]]
    assistants: list[Any]
    results: dict[int, list[Any]] = field(default_factory=dict)  # per turn


def _fail(events: list[Any], index: int, text: str) -> InvariantError:
    lo, hi = max(0, index - 5), min(len(events), index + 6)
    window = [
        f"{'>>' if i == index else '  '} #{i} {describe_event(events[i])}" for i in range(lo, hi)
    ]
    return InvariantError(f"{text} (event #{index})\n" + "\n".join(window))


def check_invariants(
    events: list[Any],
    *,
    returned: list[Any] | None = None,
    mode: str = "parallel",
    sequential_tools: frozenset[str] = frozenset({"seq"}),
) -> RunSummary:
    """Check one run's events (see the module docstring); raise :class:`InvariantError`."""
    if not events:
        raise InvariantError("the run emitted no events at all")
    kinds = [getattr(e, "type", None) for e in events]
    for i, kind in enumerate(kinds):
        if not isinstance(kind, str):
            raise _fail(events, i, f"an event without a str type: {type(events[i]).__name__}")
    if kinds[0] != "agent_start" or kinds.count("agent_start") != 1:
        raise _fail(events, 0, "agent_start must be first and occur once")
    if kinds.count("agent_end") != 1 or kinds[-1] != "agent_end":
        at = kinds.index("agent_end") if "agent_end" in kinds else len(events) - 1
        raise _fail(
            events, at, f"agent_end must occur exactly once, last ({kinds.count('agent_end')} seen)"
        )
    end = events[-1]
    reason = getattr(end, "reason", None)
    if reason not in END_REASONS:
        raise _fail(events, len(events) - 1, f"agent_end.reason {reason!r} is not a reason")

    created: list[Any] = []
    turns: list[tuple[int, int]] = []
    open_turn: int | None = None
    open_message: tuple[int, Any] | None = None
    for i, (event, kind) in enumerate(zip(events, kinds, strict=True)):
        if kind in ("agent_start", "agent_end"):
            if open_turn is not None and kind == "agent_end":
                raise _fail(events, i, "agent_end inside an open turn")
            continue
        if kind == "turn_start":
            if open_turn is not None:
                raise _fail(events, i, "turn_start inside an open turn")
            open_turn = i
            continue
        if open_turn is None:
            raise _fail(events, i, f"{kind} outside a turn")
        if kind == "turn_end":
            if open_message is not None:
                raise _fail(events, i, "turn_end while a message is open")
            turns.append((open_turn, i))
            open_turn = None
            continue
        if kind in ("message_start", "message_end"):
            message = getattr(event, "message", None)
            if not is_real_message(message):
                raise _fail(events, i, f"{kind} carries {type(message).__name__}, not a message")
            if kind == "message_start":
                if open_message is not None:
                    raise _fail(events, i, "message_start while another message is open")
                open_message = (i, message)
            else:
                if open_message is None:
                    raise _fail(events, i, "message_end without message_start")
                if safe_role(open_message[1]) != safe_role(message):
                    raise _fail(events, i, "message_end's role differs from its message_start")
                open_message = None
                created.append(message)
                if safe_role(message) == "assistant":
                    stop = stop_of(message)
                    if stop not in FINAL_STOPS:
                        raise _fail(events, i, f"assistant message ended with stop {stop!r}")
                    if stop in ("error", "aborted"):
                        err = getattr(message, "error_message", None)
                        if not isinstance(err, str) or not err:
                            raise _fail(events, i, f"{stop} message has error_message {err!r}")
            continue
        if kind == "message_update":
            if open_message is None or safe_role(open_message[1]) != "assistant":
                raise _fail(events, i, "message_update outside an assistant message")
            continue
        if open_message is not None:
            raise _fail(events, i, f"{kind} while a message is open")
        if kind not in ("tool_execution_start", "tool_execution_update", "tool_execution_end"):
            raise _fail(events, i, f"unknown event type {kind!r}")
    if open_turn is not None:
        raise _fail(events, len(events) - 1, "the run ended inside a turn")

    summary = RunSummary(str(reason), created, turns, [])
    for t, (lo, hi) in enumerate(turns):
        summary.results[t] = _check_turn(events, kinds, lo, hi, mode, sequential_tools, summary)

    end_messages = list(getattr(end, "messages", []) or [])
    if len(end_messages) != len(created) or not all(
        same(a, b) for a, b in zip(end_messages, created, strict=False)
    ):
        raise _fail(
            events,
            len(events) - 1,
            f"agent_end.messages ({len(end_messages)}) is not every message the run created "
            f"({len(created)}): {[label(m) for m in end_messages]} vs "
            f"{[label(m) for m in created]}",
        )
    if returned is not None:
        if not isinstance(returned, list):
            raise InvariantError(f"the run returned {type(returned).__name__}, not a list")
        if len(returned) != len(created) or not all(
            same(a, b) for a, b in zip(returned, created, strict=False)
        ):
            raise InvariantError(
                "the returned messages differ from agent_end.messages: "
                f"{[label(m) for m in returned]} vs {[label(m) for m in created]}"
            )
    return summary


def _check_turn(
    events: list[Any],
    kinds: list[str],
    lo: int,
    hi: int,
    mode: str,
    sequential_tools: frozenset[str],
    summary: RunSummary,
) -> list[Any]:
    ends = [i for i in range(lo + 1, hi) if kinds[i] == "message_end"]
    assistant_ends = [i for i in ends if safe_role(events[i].message) == "assistant"]
    if len(assistant_ends) != 1:
        raise _fail(events, hi, f"the turn has {len(assistant_ends)} assistant messages, not one")
    a_end = assistant_ends[0]
    assistant = events[a_end].message
    summary.assistants.append(assistant)
    if not same(getattr(events[hi], "message", None), assistant):
        raise _fail(events, hi, "turn_end.message is not the turn's assistant message")
    for i in range(lo + 1, a_end):
        if kinds[i].startswith("tool_execution"):
            raise _fail(events, i, "a tool event before the turn's assistant message ended")
    after = list(range(a_end + 1, hi))
    results: list[Any] = []
    for i in after:
        if kinds[i] in ("message_start", "message_end"):
            message = events[i].message
            if safe_role(message) != "toolResult":
                raise _fail(events, i, f"{label(message)} after the assistant message")
            if kinds[i] == "message_end":
                results.append((i, message))
    stop = stop_of(assistant)
    calls = tool_calls_of(assistant)
    turn_results = list(getattr(events[hi], "tool_results", []) or [])
    if stop not in ANSWERABLE:
        if after:
            raise _fail(events, after[0], f"a call of a {stop} message was started or answered")
        if turn_results:
            raise _fail(events, hi, f"turn_end of a {stop} message lists tool results")
        return []
    ids = [getattr(c, "id", None) for c in calls]
    starts = [(i, events[i].tool_call_id) for i in after if kinds[i] == "tool_execution_start"]
    tends = [(i, events[i]) for i in after if kinds[i] == "tool_execution_end"]
    want = Counter(ids)
    for what, got in (
        ("tool_execution_start", [s for _, s in starts]),
        ("tool_execution_end", [e.tool_call_id for _, e in tends]),
        ("result message", [getattr(m, "tool_call_id", None) for _, m in results]),
    ):
        if Counter(got) != want:
            raise _fail(
                events,
                hi,
                f"calls {ids!r} of a {stop} message got {what}s for {got!r} "
                "(each call needs exactly one, in its turn)",
            )
    if [s for _, s in starts] != ids:
        raise _fail(events, starts[0][0] if starts else hi, "tool calls did not start in order")
    if [getattr(m, "tool_call_id", None) for _, m in results] != ids:
        raise _fail(events, hi, "result messages are not in source order")
    # per call (by occurrence): start < end < result; updates only between start and end
    for n, call in enumerate(calls):
        occurrence = ids[:n].count(ids[n])
        s_at = [i for i, s in starts if s == ids[n]][occurrence]
        e_at = [i for i, e in tends if e.tool_call_id == ids[n]][occurrence]
        r_at, message = [(i, m) for i, m in results if m.tool_call_id == ids[n]][occurrence]
        if not s_at < e_at < r_at:
            raise _fail(events, r_at, f"call {ids[n]!r}: start, end and result are out of order")
        end_event = events[e_at]
        if not isinstance(message, ToolResultMessage):
            raise _fail(events, r_at, f"the result of {ids[n]!r} is {type(message).__name__}")
        if message.tool_name != getattr(call, "name", None):
            raise _fail(events, r_at, f"the result of {ids[n]!r} names {message.tool_name!r}")
        if not isinstance(end_event.result, AgentToolResult):
            raise _fail(events, e_at, f"tool_execution_end.result is {type(end_event.result)}")
        if not isinstance(end_event.is_error, bool) or end_event.is_error != message.is_error:
            raise _fail(events, r_at, "the result message's is_error differs from its end event")
        if message.is_error and not result_text(message):
            raise _fail(events, r_at, f"the error result of {ids[n]!r} has no text")
        if ids.count(ids[n]) == 1:
            for i in after:
                if (
                    kinds[i] == "tool_execution_update"
                    and events[i].tool_call_id == ids[n]
                    and not s_at < i < e_at
                ):
                    raise _fail(events, i, f"an update of {ids[n]!r} outside its start..end")
    if len(turn_results) != len(results) or not all(
        same(a, b) for a, (_, b) in zip(turn_results, results, strict=False)
    ):
        raise _fail(events, hi, "turn_end.tool_results is not the turn's results in order")
    sequential = mode == "sequential" or any(
        getattr(c, "name", None) in sequential_tools for c in calls
    )
    if sequential:
        _check_sequential(events, kinds, after, ids)
    return [m for _, m in results]


def _check_sequential(
    events: list[Any], kinds: list[str], after: list[int], ids: list[Any]
) -> None:
    """Each call: start, update*, end, message_start, message_end, before the next starts."""
    pos = 0
    for call_id in ids:
        expect = [("tool_execution_start", call_id)]
        for want, cid in expect:
            if pos >= len(after):
                raise _fail(events, after[-1], f"sequential: {call_id!r} never started")
            i = after[pos]
            if kinds[i] != want or events[i].tool_call_id != cid:
                raise _fail(events, i, f"sequential: expected {want} of {cid!r}")
            pos += 1
        while pos < len(after) and kinds[after[pos]] == "tool_execution_update":
            i = after[pos]
            if events[i].tool_call_id != call_id:
                raise _fail(events, i, f"sequential: an update of another call inside {call_id!r}")
            pos += 1
        for want in ("tool_execution_end", "message_start", "message_end"):
            if pos >= len(after):
                raise _fail(events, after[-1], f"sequential: {call_id!r} has no {want}")
            i = after[pos]
            got = events[i].tool_call_id if want == "tool_execution_end" else None
            if want != "tool_execution_end":
                got = getattr(events[i].message, "tool_call_id", None)
            if kinds[i] != want or got != call_id:
                raise _fail(
                    events,
                    i,
                    f"sequential: after the start of {call_id!r} expected its {want}, "
                    f"got {describe_event(events[i])}",
                )
            pos += 1
    if pos != len(after):
        raise _fail(events, after[pos], "sequential: events after the last call's result")


def check_transcript(messages: list[Any], *, what: str = "transcript") -> None:
    """Every message is real; every call of an answerable assistant message is answered by
    exactly one result right after it; a failed message's calls are not answered; no orphan
    results."""
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        if not is_real_message(message):
            raise InvariantError(f"{what}[{i}] is {type(message).__name__}, not a message")
        role = safe_role(message)
        if role == "toolResult":
            raise InvariantError(f"{what}[{i}] is a tool result that answers no call")
        if role != "assistant":
            i += 1
            continue
        j = i + 1
        answers = []
        while j < n and safe_role(messages[j]) == "toolResult":
            answers.append(getattr(messages[j], "tool_call_id", None))
            j += 1
        ids = [getattr(c, "id", None) for c in tool_calls_of(message)]
        if stop_of(message) in ANSWERABLE:
            if Counter(answers) != Counter(ids):
                raise InvariantError(
                    f"{what}[{i}] ({label(message)}) calls {ids!r} are answered by {answers!r}"
                )
        elif answers:
            raise InvariantError(f"{what}[{i}] ({label(message)}) has results {answers!r}")
        i = j


def check_llm_context(context: Any, *, call: int) -> None:
    """A context handed to the model holds only pydantic messages, in a well-formed order."""
    messages = context.messages if isinstance(context, LlmContext) else None
    if not isinstance(messages, list):
        raise InvariantError(f"model call {call}: context messages are {type(messages).__name__}")
    for i, message in enumerate(messages):
        if not isinstance(message, MESSAGE_CLASSES):
            raise InvariantError(
                f"model call {call}: message {i} is {type(message).__name__}, not a message"
            )
    check_transcript(messages, what=f"model call {call} context")


# --- the harness --------------------------------------------------------------------------


class Harness:
    """Runs a :class:`Plan` through ``run_agent_loop`` and records everything."""

    sequential_tools = frozenset({"seq"})

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.controller = AbortController()
        self.counts: Counter[str] = Counter()
        self.events: list[Any] = []
        self.problems: list[str] = []
        self.misbehaved: list[tuple[str, str, int]] = []
        self.trouble = 0  # misbehaviours that may fail the run (raise, junk, failing streams)
        self.abort_mark: int | None = None  # events seen when the abort fired
        self.trouble_at_abort = 0
        self.cancel_mark: int | None = None  # events seen when the outer scope was cancelled
        self.model_contexts: list[Any] = []
        self.created_at_call: list[int] = []
        self.ended = 0  # message_end events seen
        self.poll_values: list[tuple[str, Any]] = []
        self.released = False  # lets hung worker threads go once the run is over
        self.outer: anyio.CancelScope | None = None
        self.tg: Any = None
        self.history: list[Any] = []
        self.returned: list[Any] | None = None
        self.returned_normally = False
        self.raised: BaseException | None = None
        self.timed_out = False
        self.tasks_left = 0
        self.base: BaseException | None = None  # the BaseException raised by user code

    # --- bookkeeping ----------------------------------------------------------------------

    def run_signal(self) -> AbortSignal | None:
        return self.controller.signal

    def _abort_now(self, why: str) -> None:
        self.controller.abort(why)

    def fire(self, why: str) -> None:
        """Fire the abort (from the event loop's thread); records when it first fired."""
        signal = self.run_signal()
        before = signal.aborted if signal is not None else True
        events, trouble = len(self.events), self.trouble
        try:
            self._abort_now(why)
        except Exception as exc:
            self.problems.append(f"firing the abort raised {exc!r}")
        if signal is not None and not before and signal.aborted and self.abort_mark is None:
            self.abort_mark, self.trouble_at_abort = events, trouble

    def cancel_outer(self) -> None:
        if self.outer is not None and not self.outer.cancel_called:
            if self.cancel_mark is None:
                self.cancel_mark = len(self.events)
            self.outer.cancel()

    def enter(self, site: str, signal: Any = None) -> None:
        """A user callable starts: nothing may start once the run's signal has fired."""
        if signal is not None and not isinstance(signal, AbortSignal):
            self.problems.append(f"{site} was handed {type(signal).__name__}, not an AbortSignal")
        run_signal = self.run_signal()
        # (a sync tool is entered on a worker thread, which may begin running after the loop
        # dispatched it and then fired the abort: its entry time says nothing about the loop)
        if run_signal is not None and run_signal.aborted and site != "execute_sync":
            self.problems.append(f"{site} started after the abort had fired")

    def act(self, site: str, *, threaded: bool = False) -> Behaviour | None:
        """Count a call of ``site``; the behaviour to apply now (None: behave normally)."""
        n = self.counts[site]
        self.counts[site] += 1
        b = self.plan.behaviour(site)
        if not b.applies(n):
            return None
        self.misbehaved.append((site, b.kind, len(self.events)))
        if b.kind in ("raise", "update_junk") or (
            b.kind == "junk" and site not in ("emit", "listener")
        ):
            self.trouble += 1
        if b.kind == "base":
            self.base = BASE_EXCEPTIONS[b.arg % len(BASE_EXCEPTIONS)]()
            raise self.base
        if b.kind == "abort":
            if threaded:
                anyio.from_thread.run_sync(self.fire, site)
            else:
                self.fire(site)
            return None
        return b

    def on_hang(self, site: str) -> None:
        if self.tg is not None and self.plan.rescue in ("abort", "cancel"):
            self.tg.start_soon(self._rescue)

    async def _rescue(self) -> None:
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        if self.plan.rescue == "cancel":
            self.cancel_outer()
        else:
            self.fire("rescue")

    async def hang(self, site: str, style: int, signal: Any, normal: Callable[[], Any]) -> Any:
        """Hang until the harness rescues the run (abort or cancellation)."""
        self.on_hang(site)
        run_signal = signal if isinstance(signal, AbortSignal) else self.run_signal()
        if style == 0 and run_signal is not None:
            await run_signal.wait()
        elif not (self.plan.rescue == "abort" and run_signal is not None and run_signal.aborted):
            await anyio.sleep_forever()
        return normal()

    # --- callables ------------------------------------------------------------------------

    def callable(self, site: str, normal: Callable[..., Any]) -> Callable[..., Any]:
        """``site`` as a sync or async callable (per the plan) that misbehaves per the plan."""

        def sync_fn(*args: Any) -> Any:
            signal = args[-1] if site in SIGNALLED or site == "transform_context" else None
            self.enter(site, signal)
            b = self.act(site)
            if b is None:
                return normal(*args)
            if b.kind == "junk":
                return junk(b.arg)
            if b.kind == "raise":
                raise exception(b.arg)
            # hang: a sync callable hands back an awaitable that hangs (the loop awaits it)
            return self.hang(site, b.arg, signal, lambda: normal(*args))

        if site not in self.plan.asyncs:
            return sync_fn

        async def async_fn(*args: Any) -> Any:
            result = sync_fn(*args)
            if inspect.isawaitable(result):
                return await result
            await anyio.lowlevel.checkpoint()
            return result

        return async_fn

    def tools(self) -> list[AgentTool]:
        return [
            AgentTool("calc", "an async tool", SCHEMA, self._async_tool("calc")),
            AgentTool("calc_sync", "a sync tool", SCHEMA, self._sync_tool),
            AgentTool(
                "prep",
                "a tool preparing its arguments",
                SCHEMA,
                self._async_tool("prep"),
                prepare_arguments=self._prepare,
            ),
            AgentTool(
                "seq",
                "a sequential tool",
                SCHEMA,
                self._async_tool("seq"),
                execution_mode="sequential",
            ),
        ]

    @staticmethod
    def _result(name: str, args: Any) -> AgentToolResult:
        x = args.get("x") if isinstance(args, dict) else getattr(args, "x", None)
        return AgentToolResult(content=[TextContent(text=f"{name} x={x}")], details={"x": x})

    def _async_tool(self, name: str) -> Callable[..., Any]:
        async def execute(tool_call_id: Any, args: Any, signal: Any, on_update: Any) -> Any:
            self.enter("execute", signal)
            b = self.act("execute")
            await anyio.lowlevel.checkpoint()
            if b is None:
                on_update(AgentToolResult(content=[TextContent(text=f"{name} working")]))
                return self._result(name, args)
            if b.kind == "junk":
                return junk(b.arg)
            if b.kind == "raise":
                raise exception(b.arg)
            if b.kind == "update_junk":
                on_update(junk(b.arg))
                return self._result(name, args)
            return await self.hang("execute", b.arg, signal, lambda: self._result(name, args))

        return execute

    def _sync_tool(self, tool_call_id: Any, args: Any, signal: Any, on_update: Any) -> Any:
        self.enter("execute_sync", signal)
        b = self.act("execute_sync", threaded=True)
        if b is None:
            on_update(AgentToolResult(content=[TextContent(text="calc_sync working")]))
            return self._result("calc_sync", args)
        if b.kind == "junk":
            return junk(b.arg)
        if b.kind == "raise":
            raise exception(b.arg)
        if b.kind == "update_junk":
            on_update(junk(b.arg))
            return self._result("calc_sync", args)
        anyio.from_thread.run_sync(self.on_hang, "execute_sync")
        deadline = time.monotonic() + HANG_TIMEOUT
        while time.monotonic() < deadline and not self.released:
            if b.arg == 0 and signal is not None and signal.aborted:
                break
            time.sleep(0.002)
        return self._result("calc_sync", args)

    def _prepare(self, raw: Any) -> Any:
        self.enter("prepare_arguments")
        b = self.act("prepare_arguments")
        if b is None or b.kind == "hang":
            return dict(raw) if isinstance(raw, dict) else raw
        if b.kind == "junk":
            return junk(b.arg)
        if b.kind == "raise":
            raise exception(b.arg)
        return raw

    def _poll(self, site: str) -> Callable[[], Any]:
        def normal() -> Any:
            n = self.counts[site] - 1
            if site == "get_steering_messages" and n == 1:
                return [UserMessage(content="steered")]
            if site == "get_follow_up_messages" and n == 0:
                return [UserMessage(content="followed up")]
            return []

        inner = self.callable(site, normal)

        if inspect.iscoroutinefunction(inner):

            async def apoll() -> Any:
                value = await inner()
                self.poll_values.append((site, value))
                return value

            return apoll

        def poll() -> Any:
            value = inner()
            if not inspect.isawaitable(value):
                self.poll_values.append((site, value))
            return value

        return poll

    def hook_config(self) -> dict[str, Any]:
        plan = self.plan
        normals: dict[str, Callable[..., Any]] = {
            "before_tool_call": lambda ctx, signal: None,
            "after_tool_call": lambda ctx, signal: None,
            "prepare_next_turn": lambda ctx, signal: None,
            "should_stop_after_turn": lambda ctx, signal: False,
            "transform_context": lambda messages, signal: list(messages),
            "convert_to_llm": default_convert_to_llm,
            "get_api_key": lambda provider: "dynamic-key",
        }
        config: dict[str, Any] = {}
        for site, normal in normals.items():
            config[site] = self.callable(site, normal) if site in plan.hooks else None
        return config

    def emit_fn(self, site: str = "emit") -> Callable[..., Any]:
        def emit(event: Any, signal: Any = None) -> Any:
            i = len(self.events)
            self.events.append(event)
            if getattr(event, "type", None) == "message_end":
                self.ended += 1
            self.on_event(i, event)
            if i == self.plan.abort_at:
                self.fire(site)
            if i == self.plan.cancel_at:
                self.cancel_outer()
            b = self.act(site)
            if b is None:
                return None
            if b.kind == "junk":
                return junk(b.arg)
            if b.kind == "raise":
                raise exception(b.arg)
            return self.hang(site, 0, signal, lambda: None)

        if site not in self.plan.asyncs:
            return emit

        async def async_emit(event: Any, signal: Any = None) -> Any:
            result = emit(event, signal)
            if inspect.isawaitable(result):
                await result
            else:
                await anyio.lowlevel.checkpoint()

        return async_emit

    def on_event(self, index: int, event: Any) -> None:
        """Extension point (the Agent harness steers junk from here)."""

    # --- the model --------------------------------------------------------------------------

    def stream_fn(self, model: Model, context: LlmContext, options: Any) -> Any:
        k = len(self.model_contexts)
        self.enter("stream_fn", getattr(options, "signal", None))
        self.model_contexts.append(context)
        self.created_at_call.append(self.ended)
        script = self.plan.responses
        if k >= len(script):
            self.trouble += 1  # the script is exhausted: the call ends with an error
            return FauxProvider([])(model, context, options)
        r = script[k]
        if r.style in FAILING_STYLES or r.stop_reason == "error":
            self.trouble += 1
        if r.style == "raise_before":
            raise exception(r.arg)
        if r.style == "junk_return":
            return junk(r.arg)
        if r.style == "base_before":
            self.base = BASE_EXCEPTIONS[r.arg % len(BASE_EXCEPTIONS)]()
            raise self.base
        message = assistant_for(k, r, model if isinstance(model, Model) else MODEL)
        if r.style == "faux" and not odd_ids(r):
            return FauxProvider([message], chunk_size=3)(model, context, options)
        stream = self._play(r, message, getattr(options, "signal", None))
        if r.style == "async_fn":

            async def later() -> Any:
                await anyio.lowlevel.checkpoint()
                return stream

            return later()
        return stream

    @staticmethod
    def _normal_events(partial: AssistantMessage, final: AssistantMessage) -> Iterator[Any]:
        yield StreamStart(partial=partial)
        for block in final.content:
            index = len(partial.content)
            if isinstance(block, TextContent):
                part = TextContent(text="")
                partial.content.append(part)
                yield TextStart(content_index=index, partial=partial)
                part.text = block.text
                yield TextDelta(content_index=index, delta=block.text, partial=partial)
                yield TextEnd(content_index=index, content=block.text, partial=partial)
            else:
                partial.content.append(block)
                yield ToolCallStart(content_index=index, partial=partial)
                yield ToolCallEnd(content_index=index, tool_call=block, partial=partial)
        if final.stop_reason in ("error", "aborted"):
            yield StreamError(reason=final.stop_reason, error=final)
        else:
            yield StreamDone(reason=final.stop_reason, message=final)  # type: ignore[arg-type]

    async def _play(self, r: Response, final: AssistantMessage, signal: Any) -> Any:
        partial = AssistantMessage(
            api=final.api, provider=final.provider, model=final.model, stop_reason="pending"
        )
        style = r.style
        for i, event in enumerate(self._normal_events(partial, final)):
            terminal = event.type in ("done", "error")
            if isinstance(signal, AbortSignal) and signal.aborted:
                partial.stop_reason = "aborted"
                partial.error_message = "Request was aborted"
                yield StreamError(reason="aborted", error=partial)
                return
            if i == r.cut and not terminal:
                if style == "raise_mid":
                    raise exception(r.arg)
                if style == "base_mid":
                    self.base = BASE_EXCEPTIONS[r.arg % len(BASE_EXCEPTIONS)]()
                    raise self.base
                if style == "junk_event":
                    yield junk(r.arg)
                if style == "hang":
                    await self.hang("stream_fn", r.arg % 2, signal, lambda: None)
                if style == "abort_mid":
                    self.fire("stream")
                    await anyio.lowlevel.checkpoint()
                if style == "junk_partial" and hasattr(event, "partial"):
                    event = type(event)(
                        **{
                            name: (junk(r.arg) if name == "partial" else getattr(event, name))
                            for name in event.__dataclass_fields__
                            if name != "type"
                        }
                    )
            if style == "nostart" and event.type == "start":
                continue
            if terminal:
                if style == "no_terminal":
                    return
                if style == "junk_done":
                    event = StreamDone(reason="stop", message=DONE_JUNK[r.arg % len(DONE_JUNK)]())
                elif style == "junk_error":
                    event = StreamError(reason="error", error=DONE_JUNK[r.arg % len(DONE_JUNK)]())
            yield event
            await anyio.lowlevel.checkpoint()
        if style == "after_terminal":
            yield TextDelta(content_index=0, delta="late", partial=partial)
            yield StreamDone(reason="stop", message=AssistantMessage(content=[]))

    # --- running --------------------------------------------------------------------------

    def loop_config(self) -> AgentLoopConfig:
        hooks = self.hook_config()
        plan = self.plan
        return AgentLoopConfig(
            model=MODEL,
            api_key="static-key",
            tool_execution=plan.mode,  # type: ignore[arg-type]
            get_steering_messages=(
                self._poll("get_steering_messages")
                if "get_steering_messages" in plan.hooks
                else None
            ),
            get_follow_up_messages=(
                self._poll("get_follow_up_messages")
                if "get_follow_up_messages" in plan.hooks
                else None
            ),
            **hooks,
        )

    def history_messages(self) -> list[Any]:
        if not self.plan.history:
            return []
        call = ToolCall(id="h0", name="calc", arguments={"x": 0})
        return [
            UserMessage(content="earlier"),
            AssistantMessage(content=[call], stop_reason="toolUse"),
            ToolResultMessage(
                tool_call_id="h0", tool_name="calc", content=[TextContent(text="calc x=0")]
            ),
            AssistantMessage(content=[TextContent(text="earlier answer")]),
        ]

    async def guarded(self, body: Callable[[], Any]) -> None:
        """Run ``body()`` (the run) under the hang guard, inside a cancel scope the plan may
        cancel, with a task group for the rescuers; record how it ended."""
        before = live_tasks()
        try:
            with anyio.fail_after(HANG_TIMEOUT):
                async with anyio.create_task_group() as tg:
                    self.tg = tg
                    try:
                        scope = (
                            anyio.move_on_after(0.05)
                            if self.plan.rescue == "timer"
                            else anyio.CancelScope()
                        )
                        with scope as outer:
                            self.outer = outer
                            self.returned = await body()
                            self.returned_normally = True
                    except Exception as exc:
                        self.raised = exc
                    finally:
                        self.tg = None
                        tg.cancel_scope.cancel()
        except TimeoutError:
            self.timed_out = True
        finally:
            self.released = True
        self.tasks_left = live_tasks() - before

    async def run(self) -> None:
        self.history = self.history_messages()
        context = AgentContext(SYSTEM, list(self.history), self.tools())
        prompts = [UserMessage(content=self.plan.prompt)]
        config = self.loop_config()
        emit = self.emit_fn()

        async def body() -> Any:
            return await run_agent_loop(
                prompts,
                context,
                config,
                emit,
                signal=self.controller.signal,
                stream_fn=self.stream_fn,
            )

        await self.guarded(body)
        if context.messages != self.history:
            self.problems.append("the run mutated the caller's context")


def misbehaved_at(h: Harness, *sites: str) -> bool:
    return any(site in sites for site, _, _ in h.misbehaved)


def verify_run(h: Harness, *, events: list[Any] | None = None) -> RunSummary:
    """Everything that must hold after a hostile run (see the module docstring)."""
    events = h.events if events is None else events
    assert not h.timed_out, (
        f"the run hung: not finished after {HANG_TIMEOUT}s; events so far: "
        f"{[describe_event(e) for e in events[-12:]]}; misbehaved: {h.misbehaved}"
    )
    assert h.raised is None, f"the run raised {h.raised!r} ({type(h.raised).__name__})"
    assert h.tasks_left == 0, f"{h.tasks_left} task(s) left running after the run"
    cancelled = h.cancel_mark is not None or (h.plan.rescue == "timer" and not h.returned_normally)
    if not cancelled:
        assert h.returned_normally, "the run neither returned nor was cancelled"
    summary = check_invariants(
        events,
        returned=h.returned if h.returned_normally else None,
        mode=h.plan.mode,
        sequential_tools=h.sequential_tools,
    )
    from agentcore_fsm.devtools.testing import check_run

    check_run(events, h.returned if h.returned_normally else None)
    assert not h.problems, h.problems
    end_at = len(events) - 1
    # outside cancellation, requested before agent_end was emitted, propagates
    if h.cancel_mark is not None and h.cancel_mark <= end_at:
        assert not h.returned_normally, (
            "the scope around the run was cancelled before agent_end, yet the run returned"
        )
    # once the abort fired (before agent_end), the run ends "aborted" (or "error" after trouble)
    if h.abort_mark is not None and h.abort_mark <= end_at and h.cancel_mark is None:
        allowed = {"aborted", "error"} if h.trouble_at_abort else {"aborted"}
        assert summary.reason in allowed, (
            f"the abort fired at event {h.abort_mark} but the run ended {summary.reason!r}"
        )
    # what the model saw
    for k, context in enumerate(h.model_contexts):
        check_llm_context(context, call=k)
    if not misbehaved_at(h, "transform_context", "convert_to_llm"):
        for k, context in enumerate(h.model_contexts):
            want = default_convert_to_llm([*h.history, *summary.created[: h.created_at_call[k]]])
            got = context.messages
            assert len(got) == len(want) and all(
                same(a, b) for a, b in zip(got, want, strict=True)
            ), (
                f"model call {k} did not see the run's transcript: "
                f"{[label(m) for m in got]} vs {[label(m) for m in want]}"
            )
    # a poll's str is never split into several messages
    for site, value in h.poll_values:
        if isinstance(value, str):
            singles = [m for m in summary.created if message_text(m) in set(value)]
            assert not singles, f"{site} returned {value!r}; it was injected letter by letter"
    return summary


def failure_text(summary: RunSummary) -> str | None:
    """The error message of the run's last assistant message if it failed."""
    if not summary.assistants:
        return None
    last = summary.assistants[-1]
    if stop_of(last) in ("error", "aborted"):
        return getattr(last, "error_message", None)
    return None


# --- the Agent ----------------------------------------------------------------------------


class AgentHarness(Harness):
    """Runs a plan through an ``Agent``: hooks and tools as for the loop, and a listener (the
    ``listener`` site) between two recording listeners."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan)
        self.agent: Agent | None = None
        self.signals_seen: list[Any] = []

    def run_signal(self) -> AbortSignal | None:
        return self.agent.signal if self.agent is not None else None

    def _abort_now(self, why: str) -> None:
        assert self.agent is not None
        self.agent.abort()

    def on_event(self, index: int, event: Any) -> None:
        if index == self.plan.steer_at and self.agent is not None:
            for queue in (self.agent.steer, self.agent.follow_up):
                try:
                    queue(junk(self.plan.steer_arg))
                except TypeError:
                    pass  # refusing junk at the door is fine

    def make_agent(self) -> Agent:
        hooks = self.hook_config()
        self.history = self.history_messages()
        agent = Agent(
            system_prompt=SYSTEM,
            model=MODEL,
            tools=self.tools(),
            messages=self.history,
            stream_fn=self.stream_fn,
            tool_execution=self.plan.mode,  # type: ignore[arg-type]
            **hooks,
        )
        self.agent = agent
        return agent
