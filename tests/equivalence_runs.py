"""Generated runs for the equivalence properties (tests/persist/test_equivalence_properties.py and
tests/integrations/test_dbos_equivalence.py): one run, whatever engine runs it, gives the same
events and the same transcript.

A :class:`Plan` is plain frozen data (hypothesis shrinks and prints it): the model's answers
turn by turn (text, tool calls), what each call's tool and hooks do, and what the turn hooks
return per turn. :class:`Rig` turns a plan into the stream function, the tools and the config
of one run. Everything the run asks of the outside world is a pure function of what it is
handed (a call's id, a turn's number counted from the messages): so a run resumed from a journal
or replayed by DBOS, whose hooks and tools are called again or not at all, meets the same
answers as the uninterrupted run. The one piece of state is the rig's abort controller, which a
tool or a hook may fire (a deterministic abort); each run gets its own.

Events are compared as :func:`snapshot` s taken when each is delivered, timestamps stripped
(each engine reads its own clock), in the form :func:`plain_events` gives; messages as
:func:`plain_messages` gives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import anyio.lowlevel
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from agentcore_fsm import (
    AbortController,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    ApprovalDecision,
    BeforeToolCallResult,
    Model,
    TextContent,
    run_agent_loop,
)
from agentcore_fsm.core.config import AgentLoopTurnUpdate
from agentcore_fsm.integrations.providers.faux import FauxProvider, faux_response, faux_tool_call
from agentcore_fsm.runtime.resume import load_run_state, resume_run

MODEL = Model(id="faux-eq", provider="faux", api="faux-api")
OTHER_MODEL = {"id": "faux-other", "provider": "faux", "api": "faux-api"}
PAIR = "\ud83d\ude00"  # the two halves of an emoji, kept as two code points
LONE = "half \ud83d of it"  # a lone high surrogate
SCHEMA: dict[str, Any] = {"type": "object"}

# --- the data -----------------------------------------------------------------------------------

# what a tool's execute does: return a plain result, one with surrogates in its text, one whose
# details JSON cannot hold (bytes, a set and a tuple, an object), a dict that validates as a
# result, raise, return something that is no result, or fire the abort and return
TOOL_OUTCOMES = ("text", "pair", "lone", "bytes", "set", "object", "dict", "raise", "bad", "abort")
# what before_tool_call returns: None, an empty result, a block (object or dict), None after
# editing the arguments in place, a request for approval, an invalid value; or it raises, or
# fires the abort
BEFORE = ("none", "pass", "block", "dict", "mutate", "ask", "junk", "raise", "abort")
# what after_tool_call returns: None, a result replacing fields (object or dict), an invalid
# value; or it raises
AFTER = ("none", "replace", "dict", "junk", "raise")
# what the tool "check"'s requires_approval callable says: yes, no, a non-bool, it raises
CHECKS = ("yes", "no", "junk", "raise")
# how the approver answers: approve, deny with a reason, approve with other arguments
DECISIONS = ("approve", "deny", "args")
# what should_stop_after_turn returns per turn: a bool, None, a non-bool; it raises; it fires
# the abort and returns False
STOPS = ("false", "true", "none", "junk", "raise", "abort")
# what prepare_next_turn returns per turn: None, an AgentLoopTurnUpdate, a dict (a thinking
# level, a model as a dict), an invalid value, a dict with an unknown field; it raises; it fires
# the abort and returns None
PREPARES = ("none", "update", "dict", "model", "junk", "unknown", "raise", "abort")
TEXTS = ("ok", "", f"pair {PAIR}", LONE, "a longer answer spread over several chunks")

ABORTING = {"abort"}


@dataclass(frozen=True)
class Call:
    """One tool call the model makes, and what its tool and the tool hooks do with it. ``tool``:
    ``probe`` (no approval), ``ask`` (``requires_approval=True``) or ``check``
    (``requires_approval`` a callable answering as ``check`` says)."""

    tool: str = "probe"
    out: str = "text"
    before: str = "none"
    after: str = "none"
    check: str = "yes"
    decision: str = "approve"


@dataclass(frozen=True)
class Turn:
    text: str = "ok"
    calls: tuple[Call, ...] = ()


@dataclass(frozen=True)
class Plan:
    """A run: ``turns`` are the model's answers with tool calls, then ``final`` (an answer
    without calls) for every later model call. ``stop`` and ``prepare`` (None: the hook is not
    configured) give the turn hooks' answers, turn n taking item ``n % len``."""

    turns: tuple[Turn, ...] = ()
    final: str = "done"
    before_hook: bool = False
    after_hook: bool = False
    stop: tuple[str, ...] | None = None
    prepare: tuple[str, ...] | None = None
    mode: str = "sequential"

    def calls(self) -> dict[str, Call]:
        return {
            call_id(t, i): c for t, turn in enumerate(self.turns) for i, c in enumerate(turn.calls)
        }

    def aborts(self) -> bool:
        """Whether some tool or hook may fire the abort."""
        hooked = [c.before for c in self.calls().values() if self.before_hook]
        return bool(
            {c.out for c in self.calls().values()} & ABORTING
            or set(hooked) & ABORTING
            or set(self.stop or ()) & ABORTING
            or set(self.prepare or ()) & ABORTING
        )

    def features(self) -> set[str]:
        """Tags of what the run exercises (to pick a few runs that cover much)."""
        tags: set[str] = {f"mode:{self.mode}"}
        for c in self.calls().values():
            tags |= {f"tool:{c.tool}", f"out:{c.out}"}
            if self.before_hook:
                tags.add(f"before:{c.before}")
            if self.after_hook:
                tags.add(f"after:{c.after}")
            if c.tool == "check":
                tags.add(f"check:{c.check}")
            if c.tool != "probe" or (self.before_hook and c.before == "ask"):
                tags.add(f"decision:{c.decision}")
        tags |= {f"stop:{s}" for s in self.stop or ()}
        tags |= {f"prepare:{p}" for p in self.prepare or ()}
        return tags


def call_id(turn: int, index: int) -> str:
    return f"t{turn}c{index}"


# --- generating ---------------------------------------------------------------------------------


@st.composite
def calls(draw: st.DrawFn, *, aborts: bool = True) -> Call:
    outcomes = TOOL_OUTCOMES if aborts else tuple(o for o in TOOL_OUTCOMES if o not in ABORTING)
    befores = BEFORE if aborts else tuple(b for b in BEFORE if b not in ABORTING)
    return Call(
        tool=draw(st.sampled_from(("probe", "probe", "ask", "check"))),
        out=draw(st.sampled_from(outcomes)),
        before=draw(st.sampled_from(befores)),
        after=draw(st.sampled_from(AFTER)),
        check=draw(st.sampled_from(CHECKS)),
        decision=draw(st.sampled_from(DECISIONS)),
    )


@st.composite
def plans(draw: st.DrawFn, *, aborts: bool = True, parallel: bool = True) -> Plan:
    """Runs of up to three turns with tool calls (one or two calls each) and a final answer,
    with or without each hook. ``aborts=False``: nothing fires the abort (a durable run has no
    abort signal); ``parallel=False``: sequential tool execution only (a durable run forces
    it)."""
    turns = draw(
        st.lists(
            st.builds(
                Turn,
                text=st.sampled_from(TEXTS),
                calls=st.lists(calls(aborts=aborts), min_size=1, max_size=2).map(tuple),
            ),
            max_size=3,
        ).map(tuple)
    )
    stops = STOPS if aborts else tuple(s for s in STOPS if s not in ABORTING)
    prepares = PREPARES if aborts else tuple(p for p in PREPARES if p not in ABORTING)
    plan = Plan(
        turns=turns,
        final=draw(st.sampled_from(TEXTS)),
        before_hook=draw(st.booleans()),
        after_hook=draw(st.booleans()),
        stop=draw(st.none() | st.lists(st.sampled_from(stops), min_size=1, max_size=3).map(tuple)),
        prepare=draw(
            st.none() | st.lists(st.sampled_from(prepares), min_size=1, max_size=3).map(tuple)
        ),
    )
    if parallel and not plan.aborts() and draw(st.booleans()):
        # parallel calls only where nothing aborts: which of the calls running at once finish
        # before an abort is the scheduler's choice, in any engine
        plan = replace(plan, mode="parallel")
    return plan


def drawn(count: int, strategy: st.SearchStrategy[Plan]) -> list[Plan]:
    """``count`` runs drawn from ``strategy``, derandomized (the same ones for the same
    hypothesis version and settings profile)."""
    found: list[Plan] = []

    @settings(
        max_examples=count,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(plan: Plan) -> None:
        found.append(plan)

    collect()
    return found


def covering(candidates: list[Plan], size: int) -> list[Plan]:
    """``size`` of ``candidates`` (fewer only if there are fewer): each chosen for the most
    features not yet covered, then, once everything is, the first ones not chosen yet."""
    chosen: list[Plan] = []
    covered: set[str] = set()
    for _ in range(size):
        best = max(candidates, key=lambda p: len(p.features() - covered))
        if not best.features() - covered:
            break
        chosen.append(best)
        covered |= best.features()
    rest = [p for p in candidates if p not in chosen]
    return chosen + rest[: size - len(chosen)]


# --- running ------------------------------------------------------------------------------------


class Opaque:
    """A value JSON cannot hold: its repr is what a run keeps."""

    def __repr__(self) -> str:
        return "<Opaque>"


class Boom(RuntimeError):
    pass


def _turn_of(messages: list[Any]) -> int:
    """The number of the turn (0-based) given the messages so far: the assistant messages."""
    return sum(1 for m in messages if getattr(m, "role", None) == "assistant")


def _text(value: str) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=value)])


@dataclass
class Rig:
    """The callables of one run of ``plan``. ``controller``: the abort controller of the run
    (a tool or a hook that fires the abort fires it); give each run its own."""

    plan: Plan
    controller: AbortController = field(default_factory=AbortController)

    def __post_init__(self) -> None:
        self.by_call = self.plan.calls()

    # --- the model ---

    def stream_fn(self, model: Any, context: Any, options: Any) -> AsyncIterator[Any]:
        return self._stream(model, context, options)

    async def _stream(self, model: Any, context: Any, options: Any) -> AsyncIterator[Any]:
        turn = _turn_of(context.messages)
        plan = self.plan
        if turn < len(plan.turns):
            spec = plan.turns[turn]
            calls_ = [
                faux_tool_call(c.tool, {"n": i, "check": c.check}, id=call_id(turn, i))
                for i, c in enumerate(spec.calls)
            ]
            answer = faux_response(spec.text, tool_calls=calls_)
        else:
            answer = faux_response(plan.final)
        async for event in FauxProvider([answer], chunk_size=5)(model, context, options):
            yield event

    # --- tools ---

    def tools(self) -> list[AgentTool]:
        def requires(args: Any) -> Any:
            check = args.get("check") if isinstance(args, dict) else None
            if check == "raise":
                raise Boom(f"cannot tell {PAIR}")
            return {"yes": True, "no": False}.get(str(check), "maybe")

        return [
            AgentTool("probe", "probe", SCHEMA, self._execute, idempotent=True),
            AgentTool(
                "ask", "ask first", SCHEMA, self._execute, requires_approval=True, idempotent=True
            ),
            AgentTool(
                "check",
                "maybe ask",
                SCHEMA,
                self._execute,
                requires_approval=requires,
                idempotent=True,
            ),
        ]

    async def _execute(self, call: str, args: Any, signal: Any, on_update: Any) -> Any:
        await anyio.lowlevel.checkpoint()
        out = self.by_call[call].out
        n = args.get("n") if isinstance(args, dict) else None
        if out == "pair":
            return _text(f"{call} {PAIR} n={n}")
        if out == "lone":
            return _text(f"{call} {LONE} n={n}")
        if out == "bytes":
            return AgentToolResult(content=[TextContent(text=call)], details=b"\xff\x00\xfe")
        if out == "set":
            return AgentToolResult(content=[], details={"tags": {"b", "a"}, "t": (1, PAIR)})
        if out == "object":
            return AgentToolResult(content=[TextContent(text=call)], details={"o": Opaque()})
        if out == "dict":
            return {"content": [{"type": "text", "text": f"{call} as a dict"}], "details": [n]}
        if out == "raise":
            raise Boom(f"tool {call} failed {LONE}")
        if out == "bad":
            return 42
        if out == "abort":
            self.controller.abort()
        return _text(f"{call} ran n={n}")

    # --- hooks ---

    def before(self, ctx: Any, signal: Any) -> Any:
        kind = self.by_call[ctx.tool_call.id].before
        if kind == "pass":
            return BeforeToolCallResult()
        if kind == "block":
            return BeforeToolCallResult(block=True, reason=f"blocked {PAIR}")
        if kind == "dict":
            return {"block": True}
        if kind == "mutate":
            ctx.args["n"] = 100
            ctx.args["edited"] = LONE
        elif kind == "ask":
            return BeforeToolCallResult(require_approval=True, reason="look at this")
        elif kind == "junk":
            return "nope"
        elif kind == "raise":
            raise Boom("before failed")
        elif kind == "abort":
            self.controller.abort()
        return None

    def after(self, ctx: Any, signal: Any) -> Any:
        kind = self.by_call[ctx.tool_call.id].after
        if kind == "replace":
            return AfterToolCallResult(
                content=[TextContent(text=f"replaced {PAIR}")],
                details={"raw": b"\x01", "s": {2, 1}},
                is_error=True,
            )
        if kind == "dict":
            return {"is_error": False, "details": {"t": (1,), "o": Opaque()}}
        if kind == "junk":
            return 3.5
        if kind == "raise":
            raise Boom(f"after failed {PAIR}")
        return None

    def should_stop(self, ctx: Any, signal: Any) -> Any:
        stops = self.plan.stop or ("false",)
        kind = stops[(_turn_of(ctx.new_messages) - 1) % len(stops)]
        if kind == "raise":
            raise Boom("stop failed")
        if kind == "abort":
            self.controller.abort()
        return {"true": True, "none": None, "junk": "yes"}.get(kind, False)

    def prepare(self, ctx: Any, signal: Any) -> Any:
        prepares = self.plan.prepare or ("none",)
        kind = prepares[(_turn_of(ctx.new_messages) - 1) % len(prepares)]
        if kind == "update":
            return AgentLoopTurnUpdate(thinking_level="low")
        if kind == "dict":
            return {"thinking_level": "high"}
        if kind == "model":
            return {"model": dict(OTHER_MODEL)}
        if kind == "junk":
            return 42
        if kind == "unknown":
            return {"bogus": 1}
        if kind == "raise":
            raise Boom(f"prepare failed {LONE}")
        if kind == "abort":
            self.controller.abort()
        return None

    def decision(self, call: str) -> ApprovalDecision:
        """What the approver decides for the call ``call``."""
        kind = self.by_call[call].decision
        if kind == "deny":
            return ApprovalDecision(approved=False, reason=f"not now {PAIR}", decided_by="eq")
        if kind == "args":
            return ApprovalDecision(approved=True, args={"n": 7, "by": LONE}, decided_by="eq")
        return ApprovalDecision(approved=True, decided_by="eq")

    def decide(self, request: Any, signal: Any) -> ApprovalDecision:
        return self.decision(request.tool_call_id)

    def config(self) -> AgentLoopConfig:
        plan = self.plan
        return AgentLoopConfig(
            model=MODEL,
            tool_execution="parallel" if plan.mode == "parallel" else "sequential",
            decide_approval=self.decide,
            before_tool_call=self.before if plan.before_hook else None,
            after_tool_call=self.after if plan.after_hook else None,
            should_stop_after_turn=None if plan.stop is None else self.should_stop,
            prepare_next_turn=None if plan.prepare is None else self.prepare,
        )

    def context(self) -> AgentContext:
        return AgentContext(tools=self.tools())


PROMPTS = [f"go {PAIR}"]

# --- comparing ----------------------------------------------------------------------------------


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def snapshot(event: Any) -> dict[str, Any]:
    """``event`` as plain data at the time it is delivered, without timestamps.

    Taken when the event is delivered, as anything that writes events out does (a recording,
    the DBOS event stream, a UI over the wire): a stream's partial message is one object that
    the provider fills in as the answer streams (docs/reference.md: ``message_start`` carries
    "the partial message"), so an event kept as an object shows it as it is later, not as it
    was."""
    plain: dict[str, Any] = _strip(event.model_dump(mode="python", by_alias=True))
    return plain


class Snapshots:
    """A listener keeping a :func:`snapshot` of every event it gets."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.raw: list[Any] = []  # the events themselves (for the grammar checker)

    def __call__(self, event: Any) -> None:
        self.events.append(snapshot(event))
        self.raw.append(event)


def plain_events(
    events: list[dict[str, Any]], *, updates: bool = True, mode: str = "sequential"
) -> Any:
    """Snapshots of events (``updates=False``: without the ``message_update`` deltas), in the
    form they are compared in.

    With ``mode="parallel"``: the events of the run outside its tool calls in order, and for
    each tool call its own events in order (``tool_execution_*``, ``approval_*``). How the
    events of calls running at the same time interleave is the scheduler's choice (trio even
    shuffles its run queue on purpose), in memory as in any engine; each call's course and
    everything around the batch are the run's."""
    plain = [e for e in events if updates or e["type"] != "message_update"]
    if mode != "parallel":
        return plain
    outside = [e for e in plain if "toolCallId" not in e]
    per_call: dict[str, list[Any]] = {}
    for e in plain:
        if "toolCallId" in e:
            per_call.setdefault(e["toolCallId"], []).append(e)
    return outside, per_call


def as_regenerated(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Snapshots with the message of each assistant ``message_start`` reduced to its role: the
    events regenerated from a journal carry there the answer as it ended (the journal keeps no
    beginning of a stream), a live run the partial message as it began. The ``message_end``
    that follows carries the answer in both."""
    return [
        {**e, "message": {"role": "assistant"}}
        if e["type"] == "message_start" and e["message"].get("role") == "assistant"
        else e
        for e in events
    ]


def plain_messages(messages: list[Any]) -> list[Any]:
    return [_strip(m.model_dump(mode="python")) for m in messages]


# --- the engines --------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one engine's run gave: snapshots of the events its listener got, and the messages
    returned."""

    events: list[dict[str, Any]]
    messages: list[Any]
    raw: list[Any] = field(default_factory=list)


async def run_plan(plan: Plan, *, store: Any = None, run_id: str | None = None) -> Outcome:
    """Run ``plan`` with ``run_agent_loop``: in memory, or journaled in ``store``."""
    rig = Rig(plan)
    events = Snapshots()
    extra: dict[str, Any] = {} if store is None else {"store": store, "run_id": run_id}
    messages = await run_agent_loop(
        PROMPTS,
        rig.context(),
        rig.config(),
        events,
        signal=rig.controller.signal,
        stream_fn=rig.stream_fn,
        **extra,
    )
    return Outcome(events.events, messages, events.raw)


def load_back(plan: Plan, store: Any, run_id: str) -> Outcome:
    """What ``store`` holds of the run ``run_id``: the events of its journaled steps and its
    transcript, rebuilt from the journal."""
    rig = Rig(plan)
    machine, steps = load_run_state(store, run_id, rig.config(), tools=rig.tools())
    return Outcome([snapshot(e) for s in steps for e in s.events], list(machine.new_messages))


CRASHED_OWNER = "elsewhere.example:1:dead"  # a process of another host, whose lease expired


def cut(store: Any, run_id: str, k: int, into: Any, new_id: str) -> None:
    """Write into ``into`` the run ``run_id`` of ``store`` as a crash after its first ``k``
    journal entries leaves it: running, leased by a process that is gone."""
    stored = store.load(run_id)
    into.create_run(new_id, stored.header, session_id=None, owner=CRASHED_OWNER, lease_s=-1.0)
    if k:
        into.append_many(new_id, 0, stored.entries[:k], owner=CRASHED_OWNER, lease_s=-1.0)


async def resume_plan(plan: Plan, store: Any, run_id: str) -> Outcome:
    """Resume the crashed run ``run_id`` of ``plan`` with fresh callables (a new process)."""
    rig = Rig(plan)
    events = Snapshots()
    messages = await resume_run(
        run_id,
        store,
        rig.config(),
        events,
        tools=rig.tools(),
        signal=rig.controller.signal,
        stream_fn=rig.stream_fn,
    )
    return Outcome(events.events, messages)
