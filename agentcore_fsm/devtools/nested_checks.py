"""The check of a tree of runs (docs/multi-agent.md): the events an outer run delivered, with
the events of its nested runs inside (``tool_execution_update`` events carrying a
:class:`~agentcore_fsm.core.nesting.NestedEvent`), checked level by level.

:func:`check_nested_run` checks

* the grammar of every run of the tree on its own (the outermost run's events without the
  updates that carry nested events; each nested run's events, by path), with the
  :class:`~agentcore_fsm.devtools.checker.GrammarChecker`;
* the enclosure: every event of a nested run comes while the call that started it is running
  (after that call's ``tool_execution_start`` and before its ``tool_execution_end``, in the
  run one level up), at every depth;
* that a nested run whose events stop before its ``agent_end`` is one whose starting call was
  cut (it ended with an error result, as an aborted outer run answers it, or it never ended
  because the run above was cut too): its events are then checked as the prefix of a run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agentcore_fsm.core.messages import AgentMessage
from agentcore_fsm.core.nesting import nested_event_of
from agentcore_fsm.devtools.checker import GrammarChecker
from agentcore_fsm.devtools.grammar import GrammarViolation, RunSummary

__all__ = ["NestedRunViolation", "check_nested_run"]

Path = tuple[str, ...]


class NestedRunViolation(AssertionError):
    """A tree of runs broke a rule: ``path`` names the run (``()``: the outermost), ``rule``
    the rule (a grammar rule's id, or ``N1.enclosure`` / ``N2.cut``), ``detail`` what was
    wrong."""

    def __init__(self, path: Path, rule: str, detail: str) -> None:
        self.path = path
        self.rule = rule
        self.detail = detail
        super().__init__(f"run {'/'.join(path) or '(outermost)'}: {rule}: {detail}")


def check_nested_run(
    events: Iterable[Any], messages: Sequence[AgentMessage] | None = None
) -> dict[Path, RunSummary | None]:
    """Check the events an outer run delivered (and, when given, the messages it returned)
    as a tree of runs (see the module's documentation). Returns each run's summary by path
    (None for a nested run that was cut). Raises :class:`NestedRunViolation`."""
    checkers: dict[Path, GrammarChecker] = {(): GrammarChecker()}
    running: dict[Path, set[str]] = {(): set()}
    ended: dict[Path, Any] = {}  # a call's path -> its tool_execution_end
    for index, event in enumerate(events):
        nested = nested_event_of(event)
        path: Path = () if nested is None else nested.path
        inner = event if nested is None else nested.event
        if path:
            parent, call = path[:-1], path[-1]
            if call not in running.get(parent, ()):
                raise NestedRunViolation(
                    path,
                    "N1.enclosure",
                    f"event {index} ({inner.type}) came while call {call!r} was not running",
                )
        checker = checkers.get(path)
        if checker is None:
            checker = checkers[path] = GrammarChecker()
            running[path] = set()
        try:
            checker.feed(inner)
        except GrammarViolation as exc:
            raise NestedRunViolation(path, exc.rule, str(exc)) from None
        kind = inner.type
        if kind == "tool_execution_start":
            running[path].add(inner.tool_call_id)
        elif kind == "tool_execution_end":
            running[path].discard(inner.tool_call_id)
            ended[(*path, inner.tool_call_id)] = inner
    summaries: dict[Path, RunSummary | None] = {}
    for path, checker in sorted(checkers.items(), key=lambda item: len(item[0])):
        if not path or checker.finished:
            try:
                summaries[path] = checker.close(messages if not path else None)
            except GrammarViolation as exc:
                raise NestedRunViolation(path, exc.rule, str(exc)) from None
            continue
        end = ended.get(path)
        # cut: its call ended with an error (the abort's), or the run above was cut too
        if (end is None and summaries.get(path[:-1], False) is not None) or (
            end is not None and not end.is_error
        ):
            raise NestedRunViolation(
                path,
                "N2.cut",
                "the run's events stop before its agent_end, but the call that started it "
                + ("never ended" if end is None else "ended without an error"),
            )
        summaries[path] = None
    return summaries
