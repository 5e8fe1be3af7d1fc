"""What a run hands its tools and hooks besides their arguments: its dependencies, its usage so
far, and (for a tool) a :class:`RunContext` with the call's id, the abort signal and a progress
reporter.

A run binds a :class:`RunScope` to a :class:`contextvars.ContextVar` where it starts
(``run_agent_loop(..., deps=...)``, ``agent_loop``, an ``Agent(deps=...)``; see
:func:`bind_run`). anyio copies the context into the tasks a run starts and into the worker
threads that run plain-function tools, so every tool and hook of the run sees that scope, and
two runs at once (or a run inside a tool of another run) each see their own:

* a function tool (:func:`agentcore_fsm.core.function_tools.tool`) whose first parameter is
  typed ``RunContext[Deps]`` receives a :class:`RunContext` made for the call;
* any other code running inside the run (a hook, a hand-written ``execute``) calls
  :func:`current_run` for the scope: ``current_run().deps``, ``current_run().usage``.

Usage so far is the sum of the ``usage`` of the assistant messages the run has completed
(their ``message_end`` events): when a tool runs, that includes the response that called it.
The scope sees the events the run delivers (:meth:`RunScope.watch`), and counts them only in a
run that has ``deps`` or a tool taking a ``RunContext`` (so that other runs pay nothing); a run
resumed from a journal counts only the responses since it resumed.

:func:`to_tool_result` is the one conversion of what a function tool returns (or reports as
progress) into an :class:`~agentcore_fsm.core.tools.AgentToolResult`; see its documentation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar, Token
from typing import Any, Generic, TypeVar

from pydantic_core import PydanticSerializationError, to_jsonable_python

from agentcore_fsm.core.abort import AbortController, AbortSignal
from agentcore_fsm.core.events import MessageEndEvent
from agentcore_fsm.core.limits import RunUsage
from agentcore_fsm.core.messages import Cost, ImageContent, TextContent, Usage
from agentcore_fsm.core.tools import AgentToolResult, ToolUpdateCallback

__all__ = [
    "RunContext",
    "RunScope",
    "bind_run",
    "current_run",
    "current_scope",
    "own_scope",
    "to_tool_result",
]

DepsT = TypeVar("DepsT")

_CURRENT: ContextVar[RunScope | None] = ContextVar("agentcore_fsm_run", default=None)

_USAGE_FIELDS = ("input", "output", "cache_read", "cache_write", "total_tokens")
_COST_FIELDS = ("input", "output", "cache_read", "cache_write", "total")


class RunScope:
    """One run as its tools and hooks see it: ``deps`` (what was given to the run) and
    ``usage`` (the usage of the model responses the run has completed so far, or None when
    the run does not count it; see :meth:`watch`)."""

    __slots__ = ("_run_usage", "_usages", "config", "deps", "journal", "machine", "observers")

    def __init__(self, deps: Any = None) -> None:
        self.deps = deps
        self.config: Any = None
        """The run's ``AgentLoopConfig`` once the run has started (None before): what a nested
        run started by one of its tools inherits (its approver and limits; agent/nested.py)."""
        self.machine: Any = None
        """The run's machine once the run has started (None before): a nested run reads the
        transcript that holds its call (agent/nested.py)."""
        self.journal: Any = None
        """The journal the run's record is written through (None for a run not journaled): a
        nested run of a run journaled in a run store is journaled in the same store
        (agent/nested.py)."""
        self.observers: Any = None
        """The run's observers once the run has started (None before): its nested runs get the
        same ones (agent/nested.py), so that a traced run's nested runs are traced with it."""
        self._usages: list[Usage] | None = None
        self._run_usage: Callable[[], RunUsage | None] | None = None

    @property
    def run_usage(self) -> RunUsage | None:
        """A run with usage limits (``config.limits``, docs/policies.md#usage-limits): its
        counters at this moment (requests, turns, tool calls, tokens, cost, as its limits
        count them); None in a run without limits."""
        read = self._run_usage
        return read() if read is not None else None

    def follow_usage(self, read: Callable[[], RunUsage | None]) -> None:
        """Read :attr:`run_usage` through ``read`` (the driver of a run with limits)."""
        self._run_usage = read

    @property
    def usage(self) -> Usage | None:
        """The sum of the usage of every assistant message the run completed so far (a new
        :class:`~agentcore_fsm.core.messages.Usage`, cost included); None when the run does
        not count usage."""
        return None if self._usages is None else _sum_usage(self._usages)

    def watch(
        self, emit: Callable[[Any], Any] | None, tools: Iterable[Any] = ()
    ) -> Callable[[Any], Any] | None:
        """What the run should use as its ``emit``: ``emit`` that also counts the usage of
        each assistant ``message_end`` it sees (returning what ``emit`` returns, so an async
        ``emit`` stays awaited), when the run has ``deps`` or one of its ``tools`` takes a
        :class:`RunContext`; else ``emit`` itself, unchanged.

        Counting costs a call per event (a few percent of a run that streams many deltas), so
        only the runs that can read the count pay for it: a run whose tools cannot see a
        ``RunContext`` and that has no deps keeps its listener as it is (its
        ``current_run().usage`` is None)."""
        wanted = self.deps is not None or any(
            getattr(tool, "context_parameter", None) is not None for tool in tools
        )
        if not wanted:
            return emit
        usages: list[Usage] = []
        self._usages = usages
        end = MessageEndEvent

        if emit is None:

            def count(event: Any) -> None:
                if event.__class__ is end and getattr(event.message, "role", None) == "assistant":
                    usages.append(event.message.usage)

            return count
        deliver = emit

        def watched(event: Any) -> Any:
            if event.__class__ is end and getattr(event.message, "role", None) == "assistant":
                usages.append(event.message.usage)
            return deliver(event)

        return watched


class bind_run:  # named as the function it replaces: ``with bind_run(deps) as scope``
    """Bind a new :class:`RunScope` with ``deps`` for the code inside the block (and the
    tasks and threads it starts); the previous binding comes back on leaving. (A class, not a
    generator-based context manager: every run enters one, and this costs a third as much.)"""

    __slots__ = ("scope", "token")

    def __init__(self, deps: Any = None) -> None:
        self.scope = RunScope(deps)
        self.token: Token[RunScope | None] | None = None

    def __enter__(self) -> RunScope:
        self.token = _CURRENT.set(self.scope)
        return self.scope

    def __exit__(self, *exc: object) -> None:
        token, self.token = self.token, None
        if token is not None:
            _CURRENT.reset(token)


def own_scope() -> AbstractContextManager[Any]:
    """The scope a run continued from a record (resumed, forked) runs in: the caller's when it
    has bound one for it (an Agent binds its deps and watch first); else a new one (none is
    bound, or the one bound is the scope of a run under way: a nested run resumed inside the
    tool of another run), so that two runs' scopes stay apart and the run's nested runs are
    journaled with it (agent/nested_record.py)."""
    scope = _CURRENT.get()
    if scope is None or scope.machine is not None:
        return bind_run()
    return nullcontext()


def current_scope() -> RunScope | None:
    """The scope of the run this code is part of, or None outside a run."""
    return _CURRENT.get()


def current_run() -> RunScope:
    """The scope of the run this code is part of (a hook, a tool, a stream function).

    Raises ``RuntimeError`` outside a run."""
    scope = _CURRENT.get()
    if scope is None:
        raise RuntimeError(
            "current_run() was called outside a run: only code that a run calls (a tool, a "
            "hook, a stream function) has one"
        )
    return scope


class RunContext(Generic[DepsT]):
    """What a function tool receives in its first parameter when that is typed
    ``RunContext[Deps]`` (the model never sees it).

    ``deps`` is the dependencies object given to the run (``run_agent_loop(..., deps=...)``
    or ``Agent(deps=...)``; None when none was given), ``tool_call_id`` the id of this call,
    ``tool_name`` the name the tool was made with, ``signal`` the run's
    :class:`~agentcore_fsm.core.abort.AbortSignal`, ``usage`` the usage of the run so far;
    :meth:`report` sends progress.

    To test a tool function directly, make one yourself: ``RunContext(deps=...)`` (the other
    arguments default to an empty id, a signal that never fires, no progress listener and no
    usage).
    """

    __slots__ = ("_on_update", "_scope", "deps", "signal", "tool_call_id", "tool_name")

    def __init__(
        self,
        deps: DepsT,
        *,
        tool_call_id: str = "",
        tool_name: str = "",
        signal: AbortSignal | None = None,
        on_update: ToolUpdateCallback | None = None,
        scope: RunScope | None = None,
    ) -> None:
        self.deps = deps
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.signal = signal if signal is not None else AbortController().signal
        self._on_update = on_update
        self._scope = scope

    @classmethod
    def for_call(
        cls,
        tool_call_id: str,
        tool_name: str,
        signal: AbortSignal | None,
        on_update: ToolUpdateCallback | None,
    ) -> RunContext[Any]:
        """The context of one call, with the deps and usage of the run it is part of (none
        outside a run)."""
        scope = _CURRENT.get()
        deps: Any = scope.deps if scope is not None else None
        return cls(
            deps,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            signal=signal,
            on_update=on_update,
            scope=scope,
        )

    @property
    def usage(self) -> Usage:
        """The usage of the run so far (see :class:`RunScope`); zero outside a run, or in a
        run that does not count it (a tool added during a run that had no deps and no tool
        taking a ``RunContext`` when it started)."""
        counted = self._scope.usage if self._scope is not None else None
        return counted if counted is not None else Usage()

    @property
    def run_usage(self) -> RunUsage | None:
        """The counters of a run with usage limits (see :attr:`RunScope.run_usage`); None
        outside a run or in a run without limits."""
        return self._scope.run_usage if self._scope is not None else None

    def report(self, partial: Any) -> None:
        """Report progress: ``partial`` (anything a function tool may return, see
        :func:`to_tool_result`) becomes a ``tool_execution_update`` event. Safe to call from
        the worker thread of a plain-function tool; does nothing outside a run."""
        if self._on_update is not None:
            self._on_update(to_tool_result(partial))

    def __repr__(self) -> str:
        return (
            f"RunContext(deps={self.deps!r}, tool_call_id={self.tool_call_id!r}, "
            f"tool_name={self.tool_name!r})"
        )


def to_tool_result(value: Any, tool_name: str = "") -> AgentToolResult:
    """What a function tool returned, as the result the model reads.

    * an :class:`~agentcore_fsm.core.tools.AgentToolResult`: itself (full control);
    * a ``str``: one text block, no ``details``;
    * a text or image block, or a non-empty list or tuple of them: those blocks, no
      ``details``;
    * anything else that pydantic can turn into JSON (a pydantic model, a dataclass, a dict, a
      list, a number, None …): its JSON as one text block, and the same JSON-able data as
      ``details``. A dict is data here, not the fields of a result.

    Raises ``TypeError`` for a value that cannot be turned into JSON, naming ``tool_name`` if
    given (the call then gets an error result saying so).
    """
    if isinstance(value, AgentToolResult):
        return value
    if isinstance(value, str):
        return AgentToolResult(content=[TextContent(text=value)])
    if isinstance(value, (TextContent, ImageContent)):
        return AgentToolResult(content=[value])
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(block, (TextContent, ImageContent)) for block in value)
    ):
        return AgentToolResult(content=list(value))
    try:
        data = to_jsonable_python(value)
    except PydanticSerializationError as exc:
        who = f"tool {tool_name!r}" if tool_name else "a tool"
        raise TypeError(
            f"{who} returned a {type(value).__name__}, which cannot be turned into a result: "
            f"return a str, content blocks, an AgentToolResult or a value pydantic can turn "
            f"into JSON ({exc})"
        ) from None
    text = json.dumps(data, ensure_ascii=False)
    return AgentToolResult(content=[TextContent(text=text)], details=data)


def _sum_usage(usages: list[Usage]) -> Usage:
    counts = dict.fromkeys(_USAGE_FIELDS, 0)
    costs = dict.fromkeys(_COST_FIELDS, 0.0)
    for usage in usages:
        for name in _USAGE_FIELDS:
            counts[name] += getattr(usage, name)
        for name in _COST_FIELDS:
            costs[name] += getattr(usage.cost, name)
    return Usage(**counts, cost=Cost(**costs))
