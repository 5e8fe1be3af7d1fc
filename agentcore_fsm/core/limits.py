"""Usage limits of a run: the settings (:class:`UsageLimits`), the counters a run keeps
(:class:`RunUsage`), and the checks the loop machine makes at its declared points (see
docs/policies.md#usage-limits).

A run given ``AgentLoopConfig(limits=UsageLimits(...))`` counts, in the declared variable
``usage`` of ``states/agent_loop.toml``, its model requests, turns, tool calls, tokens and cost,
and checks them

* before each model request (the auto transition ``limit_reached`` out of ``streaming``): would
  this request go over the request, turn, token or cost budget, or is the deadline past? The
  request's input tokens are estimated as the input the provider reported for the last response
  plus a quarter of the characters of every message added since (a quarter of the characters
  of the whole request when nothing was reported yet);
* after each response that asks for tools, before its tool batch (``model_finished`` into
  ``stopped``): is a budget used up, or would the batch go over the tool-call limit? The batch
  then does not run; each of its calls is answered with :data:`NOT_RUN_TEXT`;
* while anything is in flight, for the deadline (``seconds``): the driver fires the run's abort
  when it passes, and the run ends as an abort does, with the deadline as its reason.

A run that reaches a limit ends with ``agent_end(reason="limit")`` whose ``limit`` field is a
:class:`LimitReached` naming the setting and the figures. Everything here is pure: no clock (the
time comes in with the machine's inputs), no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from agentcore_fsm.core.data import Data
from agentcore_fsm.core.messages import AgentMessage, AssistantMessage, Model, Usage

__all__ = [
    "DEFAULT_LAST_TURN_INSTRUCTION",
    "LIMIT_NAMES",
    "NOT_RUN_TEXT",
    "LimitReached",
    "RunUsage",
    "UsageLimits",
    "estimate_tokens",
]

DEFAULT_LAST_TURN_INSTRUCTION = (
    "This is your last turn: tools are no longer available. Answer now with what you have, "
    "and say briefly what is left undone."
)
"""What the last request says when :attr:`UsageLimits.last_turn_without_tools` is set."""

NOT_RUN_TEXT = 'Tool call "{name}" was not executed: the run reached its usage limit ({limit}).'
"""The error result of each tool call of a batch that a limit kept from running."""

LIMIT_NAMES = (
    "requests",
    "turns",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cost_usd",
    "seconds",
)
"""The limits of :class:`UsageLimits`, in the order a check looks at them."""

_COUNTS = ("requests", "turns", "input_tokens", "output_tokens", "total_tokens")


def _kind(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def _int_limit(name: str, value: Any, minimum: int) -> None:
    expected = f"an int >= {minimum} or None"
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"UsageLimits: {name} must be {expected}, not {_kind(value)} ({value!r:.60})"
        )
    if value < minimum:
        raise ValueError(f"UsageLimits: {name} must be {expected}, not {value}")


def _positive_number(name: str, value: Any, unit: str) -> None:
    expected = f"a finite number of {unit} > 0 or None"
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"UsageLimits: {name} must be {expected}, not {_kind(value)} ({value!r:.60})"
        )
    if math.isnan(value) or math.isinf(value) or value <= 0:
        raise ValueError(f"UsageLimits: {name} must be {expected}, not {value}")


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageLimits:
    """Limits on one run (``AgentLoopConfig(limits=...)``), or on an Agent's prompt or session
    (``Agent(limits=...)``, ``agent.prompt(..., limits=...)``). Every limit is optional (None:
    no limit). See docs/policies.md#usage-limits for when each is checked and by how much a run
    may go over it.

    * ``requests``: model requests (an int >= 1); ``turns``: turns (an int >= 1; a turn is one
      model request and the tool calls it asks for, so the two count alike unless a turn makes
      more than one request).
    * ``tool_calls``: tool calls run (an int >= 0: 0 lets the model answer but never run a tool).
    * ``input_tokens``, ``output_tokens``, ``total_tokens``: tokens as the provider reports them
      (input counts cache reads and writes too; total is input plus output), ints >= 1.
    * ``cost_usd``: dollars, from the model's price table (``Model.cost``, as the providers
      compute ``Usage.cost``), a finite number > 0.
    * ``seconds``: wall-clock time from the run's start, a finite number > 0.
    * ``last_turn_without_tools``: when the request or turn limit is one away, make the last
      request without tools and with ``last_turn_instruction`` appended to the system prompt,
      so that the run ends with an answer rather than a cut.
    * ``used_before``: usage counted before the run (a :class:`RunUsage`): the run's counters
      start from it, so its limits bound everything counted since. An Agent sets it to its
      session's usage so far (docs/policies.md#an-agents-limits); None: the run starts at zero.

    Every value is checked when the object is made: a negative, NaN or infinite limit, a bool
    where an int belongs, a zero request, turn, token, cost or time limit (which would end every
    run before it began) is refused with a ``TypeError`` or ``ValueError`` naming the setting.
    The object is frozen: ``dataclasses.replace`` makes a changed copy (checked again)."""

    requests: int | None = None
    turns: int | None = None
    tool_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    seconds: float | None = None
    last_turn_without_tools: bool = False
    last_turn_instruction: str = DEFAULT_LAST_TURN_INSTRUCTION
    used_before: RunUsage | None = None

    def __post_init__(self) -> None:
        for name in _COUNTS:
            _int_limit(name, getattr(self, name), 1)
        _int_limit("tool_calls", self.tool_calls, 0)
        _positive_number("cost_usd", self.cost_usd, "dollars")
        _positive_number("seconds", self.seconds, "seconds")
        if not isinstance(self.last_turn_without_tools, bool):
            raise TypeError(
                f"UsageLimits: last_turn_without_tools must be a bool, not "
                f"{_kind(self.last_turn_without_tools)}"
            )
        instruction = self.last_turn_instruction
        if not isinstance(instruction, str) or not instruction.strip():
            raise (TypeError if not isinstance(instruction, str) else ValueError)(
                f"UsageLimits: last_turn_instruction must be a non-empty str, not "
                f"{instruction!r:.60}"
            )
        if self.used_before is not None and not isinstance(self.used_before, RunUsage):
            raise TypeError(
                f"UsageLimits: used_before must be a RunUsage or None, not "
                f"{_kind(self.used_before)}"
            )

    def tighter(self, other: UsageLimits | None) -> UsageLimits:
        """The limits of both: for each limit the smaller one (None counts as no limit);
        ``last_turn_without_tools`` if either asks for it, with ``other``'s instruction when it
        does."""
        if other is None:
            return self
        values: dict[str, Any] = {}
        for name in LIMIT_NAMES:
            mine, theirs = getattr(self, name), getattr(other, name)
            values[name] = mine if theirs is None else theirs if mine is None else min(mine, theirs)
        graceful = self.last_turn_without_tools or other.last_turn_without_tools
        instruction = (
            other.last_turn_instruction
            if other.last_turn_without_tools
            else self.last_turn_instruction
        )
        return UsageLimits(
            **values,
            last_turn_without_tools=graceful,
            last_turn_instruction=instruction,
            used_before=self.used_before if self.used_before is not None else other.used_before,
        )


@dataclass(slots=True, kw_only=True, repr=False, eq=False)
class LimitReached(Data):
    """Which limit ended a run, and the figures: ``limit`` is the setting's name (a field of
    :class:`UsageLimits`), ``maximum`` its value, ``used`` the usage counted so far, and
    ``needed`` what the next step would have brought it to (a request's estimated tokens, a
    tool batch's calls; None when ``used`` itself reached the limit). ``where`` says at which
    check: "before_request", "before_tools" or "deadline"."""

    limit: str
    maximum: float
    used: float
    needed: float | None = None
    where: str = "before_request"

    def text(self) -> str:
        """One line for people: ``requests: 3 of 3 used`` (and what was needed)."""
        shown = f"{self.limit}: {_figure(self.used)} of {_figure(self.maximum)} used"
        if self.needed is not None:
            shown += f", {_figure(self.needed)} needed"
        return shown


def _figure(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.6g}"
    return str(int(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class RunUsage:
    """What a run (or an Agent's session) has used so far: model ``requests`` made (each
    counted when its response ends, or when it is cut), ``turns``
    begun, ``tool_calls`` let run, tokens and ``cost_usd`` as the responses reported them;
    ``context_tokens`` (the input the last response reported: its whole request) and
    ``context_messages`` (how many messages that request held) feed the estimate of the next
    request; ``started_at`` is the run's start (ms, from its start input). Immutable: each
    change is a new record, written through the declared variable ``usage``."""

    requests: int = 0
    turns: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    context_tokens: int | None = None
    context_messages: int = 0
    started_at: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def figures(self) -> dict[str, float]:
        """The figure each limit of :data:`LIMIT_NAMES` is compared with (``seconds``: 0)."""
        return {
            "requests": self.requests,
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": self.cost_usd,
            "seconds": 0,
        }

    def plus(self, other: RunUsage) -> RunUsage:
        """The sum of two runs' counts (an Agent's session total; ``started_at`` is kept)."""
        return replace(
            self,
            requests=self.requests + other.requests,
            turns=self.turns + other.turns,
            tool_calls=self.tool_calls + other.tool_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )

    def responded(self, message: AssistantMessage, context_messages: int) -> RunUsage:
        """After a response: its reported usage added (input counts cache reads and writes)."""
        usage: Usage = message.usage
        request_input = usage.input + usage.cache_read + usage.cache_write
        return replace(
            self,
            input_tokens=self.input_tokens + request_input,
            output_tokens=self.output_tokens + usage.output,
            cost_usd=self.cost_usd + usage.cost.total,
            context_tokens=request_input if request_input > 0 else self.context_tokens,
            context_messages=context_messages if request_input > 0 else self.context_messages,
        )


def estimate_tokens(messages: list[AgentMessage], system_prompt: str = "") -> int:
    """A rough token count of ``messages`` (and a system prompt): a quarter of the characters
    of their JSON form, rounded up. Used only where the provider has not reported a figure."""
    chars = len(system_prompt)
    for message in messages:
        dump = getattr(message, "model_dump_json", None)
        chars += len(dump()) if callable(dump) else len(str(message))
    return -(-chars // 4)


def request_estimate(
    usage: RunUsage, messages: list[AgentMessage], system_prompt: str
) -> tuple[int, bool]:
    """The estimated input tokens of the next request, and whether any of it was reported: the
    last reported request's input plus an estimate of the messages added since, else an
    estimate of the whole request."""
    if usage.context_tokens is None or usage.context_messages > len(messages):
        return estimate_tokens(messages, system_prompt), False
    added = messages[usage.context_messages :]
    return usage.context_tokens + estimate_tokens(added), True


def check_request(
    limits: UsageLimits,
    usage: RunUsage,
    messages: list[AgentMessage],
    system_prompt: str,
    model: Model,
    now: int,
) -> LimitReached | None:
    """The limit the next model request would go over (checked before it is made), or None.

    Requests: one more must fit. Turns: the current turn (counted at its ``turn_start``) must be
    within the limit. Input and total tokens: the request's estimated input must fit. Output
    tokens: some must be left. Cost: the estimated input's price must fit. Deadline: it must not
    have passed."""
    where = "before_request"
    if limits.requests is not None and usage.requests + 1 > limits.requests:
        return LimitReached(
            limit="requests",
            maximum=limits.requests,
            used=usage.requests,
            needed=usage.requests + 1,
            where=where,
        )
    if limits.turns is not None and usage.turns > limits.turns:
        return LimitReached(
            limit="turns",
            maximum=limits.turns,
            used=usage.turns - 1,
            needed=usage.turns,
            where=where,
        )
    if limits.output_tokens is not None and usage.output_tokens >= limits.output_tokens:
        return LimitReached(
            limit="output_tokens",
            maximum=limits.output_tokens,
            used=usage.output_tokens,
            where=where,
        )
    late = _deadline(limits, usage, now, where)
    if late is not None:
        return late
    if limits.input_tokens is None and limits.total_tokens is None and limits.cost_usd is None:
        return None
    estimate, _ = request_estimate(usage, messages, system_prompt)
    if limits.input_tokens is not None and usage.input_tokens + estimate > limits.input_tokens:
        return LimitReached(
            limit="input_tokens",
            maximum=limits.input_tokens,
            used=usage.input_tokens,
            needed=usage.input_tokens + estimate,
            where=where,
        )
    total = usage.total_tokens
    if limits.total_tokens is not None and total + estimate > limits.total_tokens:
        return LimitReached(
            limit="total_tokens",
            maximum=limits.total_tokens,
            used=total,
            needed=total + estimate,
            where=where,
        )
    if limits.cost_usd is not None:
        cost = usage.cost_usd + estimate * model.cost.input / 1_000_000
        if cost > limits.cost_usd:
            return LimitReached(
                limit="cost_usd",
                maximum=limits.cost_usd,
                used=usage.cost_usd,
                needed=cost,
                where=where,
            )
    return None


def check_batch(limits: UsageLimits, usage: RunUsage, batch: int, now: int) -> LimitReached | None:
    """The limit that keeps a response's tool batch of ``batch`` calls from running (checked
    after the response, whose usage and calls ``usage`` counts already), or None: the tool-call
    limit must hold the batch; no request or turn may be left for the model to see its results;
    a token or cost budget must not be used up; the deadline must not have passed."""
    where = "before_tools"
    if limits.tool_calls is not None and usage.tool_calls > limits.tool_calls:
        return LimitReached(
            limit="tool_calls",
            maximum=limits.tool_calls,
            used=usage.tool_calls - batch,
            needed=usage.tool_calls,
            where=where,
        )
    figures = usage.figures()
    for name in ("requests", "turns", "input_tokens", "output_tokens", "total_tokens", "cost_usd"):
        limit = getattr(limits, name)
        if limit is not None and figures[name] >= limit:
            return LimitReached(limit=name, maximum=limit, used=figures[name], where=where)
    return _deadline(limits, usage, now, where)


def _deadline(limits: UsageLimits, usage: RunUsage, now: int, where: str) -> LimitReached | None:
    if limits.seconds is None:
        return None
    elapsed = (now - usage.started_at) / 1000
    if elapsed >= limits.seconds:
        return LimitReached(limit="seconds", maximum=limits.seconds, used=elapsed, where=where)
    return None


def deadline_ms(limits: UsageLimits | None, usage: RunUsage | None) -> int | None:
    """The time (ms) the run's deadline passes at, or None without one."""
    if limits is None or limits.seconds is None or usage is None:
        return None
    return usage.started_at + math.ceil(limits.seconds * 1000)


def last_turn_due(limits: UsageLimits, usage: RunUsage) -> bool:
    """Whether the request about to be made is the last the request or turn limit allows (and
    the limits ask for a last turn without tools). ``usage`` counts the turn (at its
    ``turn_start``), not the request (counted with its response)."""
    if not limits.last_turn_without_tools:
        return False
    return (limits.requests is not None and usage.requests + 1 >= limits.requests) or (
        limits.turns is not None and usage.turns >= limits.turns
    )
