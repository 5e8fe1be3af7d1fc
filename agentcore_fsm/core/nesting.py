"""Nested runs (docs/multi-agent.md): the path of calls that leads to a run started by a tool,
the depth rule, and the tags an inner run's events carry to the outer run's listeners. Pure
data and one context variable; the sub-run itself is :mod:`agentcore_fsm.agent.nested`.

The words:

* a **path** is the tuple of tool call ids from the outermost run down to a nested run: the
  run started by the outer run's call ``"c1"`` has the path ``("c1",)``, a run started inside
  it by its call ``"c7"`` has ``("c1", "c7")``; the outermost run has ``()``.
* the **agents** of a path are the names of the tools (the agents as tools) of those calls,
  one per call id: ``("researcher", "searcher")``.
* the **depth** of a nested run is the length of its path; a call that would start a run
  deeper than its tool's ``max_depth`` is answered with an error result naming the path of
  agents (:func:`depth_error_text`), and no run starts.

Every event of a nested run reaches the listeners of the run that started it as the
``details`` of a ``tool_execution_update`` of the starting call (so it is enclosed in that
call's ``tool_execution_start``/``tool_execution_end``, and the outer run's own grammar is
untouched): a :class:`NestedEvent` with the path and agents relative to the receiving run. A
run that receives a nested event from one of its own nested runs passes it up with its own call
id in front, so the outermost listeners get every event of the tree exactly once, tagged with
its full path. :func:`levels` splits such a stream back into one stream per run.
:func:`event_data` and :func:`event_from_data` are an event's form in a recording, a nested
event in its JSON form (docs/record.md#nested-runs).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any

from agentcore_fsm.core.approval import ApprovalRequest
from agentcore_fsm.core.events import AGENT_EVENT_ADAPTER

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "NestedApprovalRequest",
    "NestedEvent",
    "Nesting",
    "current_nesting",
    "depth_error_text",
    "enter_nesting",
    "event_data",
    "event_from_data",
    "levels",
    "nested_event_from_data",
    "nested_event_of",
]

DEFAULT_MAX_DEPTH = 3
"""How deep runs nest by default: an agent called by an agent called by an agent (the outermost
run is depth 0). A tool's ``max_depth`` changes it for the calls of that tool."""

DEPTH_TEXT = (
    "agent {agent!r} was not called: the call would nest runs {depth} deep, deeper than its "
    "max_depth {max_depth} (path of agents: {path})"
)
"""The error result of a call beyond the depth limit."""


def agents_text(agents: Iterable[str]) -> str:
    """A path of agents for people: ``outer > researcher > searcher``."""
    return " > ".join(("outer", *agents))


def depth_error_text(agents: tuple[str, ...], max_depth: int) -> str:
    """The text of the error result of a call refused by the depth rule; ``agents`` includes
    the agent that was called (the last one)."""
    return DEPTH_TEXT.format(
        agent=agents[-1], depth=len(agents), max_depth=max_depth, path=agents_text(agents)
    )


@dataclass(frozen=True, slots=True)
class Nesting:
    """Where a run stands in a tree of runs: the call ids and agents that led to it (both
    empty for the outermost run)."""

    path: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()

    @property
    def depth(self) -> int:
        """How many runs enclose this one (0: the outermost run)."""
        return len(self.path)

    def child(self, call_id: str, agent: str) -> Nesting:
        """The position of the run started by this run's call ``call_id`` of ``agent``."""
        return Nesting((*self.path, call_id), (*self.agents, agent))


ROOT = Nesting()

_CURRENT: ContextVar[Nesting] = ContextVar("agentcore_fsm_nesting", default=ROOT)


def current_nesting() -> Nesting:
    """The position of the run this code is part of (:data:`ROOT` outside nested runs)."""
    return _CURRENT.get()


class enter_nesting:  # named as a function: ``with enter_nesting(position):``
    """Bind ``position`` as the current nesting for the code inside the block (a nested run
    and the tasks it starts); the previous one comes back on leaving."""

    __slots__ = ("position", "token")

    def __init__(self, position: Nesting) -> None:
        self.position = position
        self.token: Token[Nesting] | None = None

    def __enter__(self) -> Nesting:
        self.token = _CURRENT.set(self.position)
        return self.position

    def __exit__(self, *exc: object) -> None:
        token, self.token = self.token, None
        if token is not None:
            _CURRENT.reset(token)


@dataclass(frozen=True, slots=True)
class NestedEvent:
    """An event of a nested run, as the run that started it (directly or through others)
    delivers it: ``path`` (the call ids from the receiving run down to the run that emitted
    ``event``), ``agents`` (the names of the tools of those calls), ``event`` (the inner event,
    unchanged). It travels as the ``details`` of a ``tool_execution_update`` of the call
    ``path[0]``."""

    path: tuple[str, ...]
    agents: tuple[str, ...]
    event: Any

    @property
    def type(self) -> str:
        """The inner event's type (``"message_update"``, ``"agent_end"``, ...)."""
        return str(self.event.type)

    @property
    def depth(self) -> int:
        """How deep the emitting run is below the receiving one (1: started by its call)."""
        return len(self.path)

    def under(self, call_id: str, agent: str) -> NestedEvent:
        """This event as the run one level up delivers it (its call ``call_id`` of ``agent``
        started the run that delivered this one)."""
        return NestedEvent((call_id, *self.path), (agent, *self.agents), self.event)

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """The JSON form: the path, the agents and the inner event's own JSON form."""
        dump = getattr(self.event, "model_dump", None)
        return {
            "path": list(self.path),
            "agents": list(self.agents),
            "event": dump(**kwargs) if callable(dump) else self.event,
        }


NESTED_KEYS = frozenset({"path", "agents", "event"})
"""The keys of a :class:`NestedEvent`'s JSON form (:meth:`NestedEvent.model_dump`)."""


def nested_event_from_data(data: Any) -> NestedEvent:
    """A :class:`NestedEvent` from its JSON form (``{"path": [...], "agents": [...], "event":
    {...}}``, the event in its camelCase JSON form, as a recording holds it), the event
    validated as an agent event. Raises ``ValueError`` naming what is wrong."""
    if not isinstance(data, dict) or set(data) != NESTED_KEYS:
        keys = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"a nested event needs exactly 'path', 'agents' and 'event', not {keys}")
    path, agents = data["path"], data["agents"]
    for name, value in (("path", path), ("agents", agents)):
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise ValueError(f"a nested event's {name!r} must be a non-empty list of strings")
    if len(path) != len(agents):
        raise ValueError(f"a nested event's path has {len(path)} call ids but {len(agents)} agents")
    try:
        event = AGENT_EVENT_ADAPTER.validate_python(data["event"])
    except ValueError as exc:
        raise ValueError(f"a nested event's event is not an agent event: {exc}") from None
    return NestedEvent(tuple(path), tuple(agents), event)


def nested_event_of(event: Any) -> NestedEvent | None:
    """The :class:`NestedEvent` an outer run's event carries (a ``tool_execution_update``
    whose partial result's ``details`` is one), or None."""
    if getattr(event, "type", None) != "tool_execution_update":
        return None
    details = getattr(event.partial_result, "details", None)
    return details if isinstance(details, NestedEvent) else None


def levels(events: Iterable[Any]) -> dict[tuple[str, ...], list[Any]]:
    """One stream per run of a tree: the outermost run's own events under ``()`` (without the
    updates that carry nested events), each nested run's events under its path, in the order
    they were delivered."""
    split: dict[tuple[str, ...], list[Any]] = {(): []}
    for event in events:
        nested = nested_event_of(event)
        if nested is None:
            split[()].append(event)
        else:
            split.setdefault(nested.path, []).append(nested.event)
    return split


class NestedApprovalRequest(ApprovalRequest):
    """An approval request of a nested run, as the outer run's approver receives it: the
    inner call's id, tool, arguments and reason, with ``path`` (the call ids from the receiving
    run down to the run whose call waits) and ``agents`` (the names of those calls' tools). A
    decision about it is taken back to the inner run that asked."""

    path: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()

    def under(self, call_id: str, agent: str) -> NestedApprovalRequest:
        """This request as the run one level up passes it to its approver."""
        return NestedApprovalRequest(
            tool_call_id=self.tool_call_id,
            tool_name=self.tool_name,
            args=self.args,
            reason=self.reason,
            path=(call_id, *self.path),
            agents=(agent, *self.agents),
        )


def nested_request(request: ApprovalRequest, call_id: str, agent: str) -> NestedApprovalRequest:
    """``request`` (of the run started by the call ``call_id`` of ``agent``) as the starting
    run's approver receives it."""
    if isinstance(request, NestedApprovalRequest):
        return request.under(call_id, agent)
    return NestedApprovalRequest(
        tool_call_id=request.tool_call_id,
        tool_name=request.tool_name,
        args=request.args,
        reason=request.reason,
        path=(call_id,),
        agents=(agent,),
    )


# --- events as a recording holds them (docs/record.md#nested-runs) ---------------------------


def event_data(event: Any) -> dict[str, Any]:
    """An agent event as an ``event`` line holds it: its camelCase data (not pydantic's JSON
    mode, which loses text that is not valid Unicode; the writer makes the rest JSON data),
    taken when it is emitted (a streamed partial message is mutated in place afterwards). A
    ``tool_execution_update`` that carries a nested run's event
    (:class:`~agentcore_fsm.core.nesting.NestedEvent`) holds it in its JSON form as its
    ``partialResult.details``: ``path``, ``agents`` and the inner event's own camelCase data."""
    data: dict[str, Any] = event.model_dump(mode="python", by_alias=True)
    nested = nested_event_of(event)
    if nested is not None:
        data["partialResult"]["details"] = nested.model_dump(mode="python", by_alias=True)
    return data


def event_from_data(data: Any, nested: bool = False) -> Any:
    """An agent event from an ``event`` line's data, validated (a ``ValueError`` says what is
    wrong). ``nested``: the line says its ``partialResult.details`` is a nested run's event
    (the line's ``"nested": true``): it is read back as a
    :class:`~agentcore_fsm.core.nesting.NestedEvent`, or refused. A line without the mark
    (written before recordings marked them) whose update's details have exactly the keys of a
    nested event, each valid, is read back the same way; any other details stay as they are."""
    event = AGENT_EVENT_ADAPTER.validate_python(data)
    if getattr(event, "type", None) != "tool_execution_update":
        if nested:
            raise ValueError(f"'nested' marks a {event.type} event, not a tool_execution_update")
        return event
    details = event.partial_result.details
    if nested:
        event.partial_result.details = nested_event_from_data(details)
    elif isinstance(details, dict) and set(details) == NESTED_KEYS:
        try:
            event.partial_result.details = nested_event_from_data(details)
        except ValueError:
            pass  # a tool's own details that happen to have these keys
    return event
