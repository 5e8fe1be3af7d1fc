"""What the run viewer shows, as JSON data: each run's steps, transcript and flags, derived
from its record (see :mod:`agentcore_fsm.devtools.viewer`).

A **step** of the viewer is one entry of a run's record: one input the machine took (the
run's start, a model answer, a tool result, a decision ...). Its data are what that input
gave when the record is fed to the machine again (:func:`~agentcore_fsm.persist.journal.
derive_run`): the transitions it caused and the state the run stood in after it, the events
it produced, how many messages the transcript held then, the usage of the model calls so far
and the input's timestamp. Nothing is taken from a recording's ``event`` or ``transition``
lines: a run store's run and a recording of it give the same view.

**Flags** of a step, for the timeline's jumps:

* ``error``: the input is a failure (``fail``, ``stream_error``, ``stream_exhausted``,
  ``hook_failed``, ``tool_attempt_failed``, ``tool_timed_out``) or an ``abort``, or the step
  ended a tool call in error, ended an assistant message that stopped with ``error`` or
  ``aborted``, or ended the run with reason ``error`` or ``aborted``;
* ``tool``: a tool call began in the step (a ``tool_execution_start`` event);
* ``approval``: a call asked for approval or was decided (``approval_requested``,
  ``approval_decided``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentcore_fsm.core.declaration import Declaration, load_declaration
from agentcore_fsm.core.describe import describe_event
from agentcore_fsm.devtools.diagram_model import EXCEPTIONAL_TRIGGERS, arrow_groups
from agentcore_fsm.devtools.nested_records import without_parent
from agentcore_fsm.persist.codec import RecordError
from agentcore_fsm.persist.journal import derive_run

ERROR, TOOL, APPROVAL = 1, 2, 4
"""The bits of a step's ``f`` (flags) field."""
ERROR_INPUTS = frozenset(
    {
        "fail",
        "stream_error",
        "stream_exhausted",
        "hook_failed",
        "tool_attempt_failed",
        "tool_timed_out",
        "abort",
    }
)
"""The inputs that flag their step as an error."""
TEXT_LIMIT = 4000
"""The most characters of one message's text, or of one entry's JSON, the viewer keeps (the
rest is cut, marked with an ellipsis and the number of characters left out)."""


class ViewerError(ValueError):
    """A record the viewer cannot show: the text, one line, names what is wrong."""


@dataclass
class RunSource:
    """One run to show: its ``run_id``, ``header`` and ``entries`` (a record, as run stores and
    recordings keep it), its ``end_reason`` when it finished, and where it came from (``origin``,
    for error texts: a file and line, a store)."""

    run_id: str
    header: dict[str, Any]
    entries: list[dict[str, Any]]
    end_reason: str | None = None
    origin: str = ""
    children: list[tuple[int, RunSource]] = field(default_factory=list)
    """Nested runs: ``(step, run)``, the step of this run (counted from 0) during which each
    began. Filled by the caller (see :func:`~agentcore_fsm.devtools.viewer.viewer_html`'s
    ``nested``); the viewer draws each as a sub-timeline under its step."""


def clip(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text``, cut to ``limit`` characters (an ellipsis and how much was left out)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "thinking":
            parts.append(f"(thinking) {block.thinking}")
        elif kind == "image":
            parts.append(f"[image {block.mime_type}]")
    return "\n".join(parts)


def message_data(message: Any) -> dict[str, Any]:
    """A message as the viewer's transcript shows it: ``r`` its role, ``t`` its text, and as
    they apply ``c`` its tool calls (``[name, id, arguments as JSON]``), ``n`` the tool a
    result is of, ``x`` an error (a failed result, an assistant message's error text), ``s``
    an assistant message's stop reason."""
    role = str(getattr(message, "role", type(message).__name__))
    out: dict[str, Any] = {"r": role}
    content = getattr(message, "content", None)
    if role == "assistant":
        out["t"] = clip(_content_text([b for b in content or () if b.type != "toolCall"]))
        calls = [b for b in content or () if getattr(b, "type", None) == "toolCall"]
        if calls:
            out["c"] = [[c.name, c.id, clip(_json_text(c.arguments), 1000)] for c in calls]
        out["s"] = message.stop_reason
        if message.stop_reason in ("error", "aborted"):
            out["x"] = message.error_message or message.stop_reason
    elif role == "toolResult":
        out["t"] = clip(_content_text(content))
        out["n"] = message.tool_name
        if message.is_error:
            out["x"] = True
    elif content is not None:
        out["t"] = clip(_content_text(content))
    else:
        dump = getattr(message, "model_dump", None)
        out["t"] = clip(_json_text(dump(mode="json") if callable(dump) else repr(message)))
    return out


def _usage_of(message: Any) -> tuple[int, int, int, float]:
    usage = getattr(message, "usage", None)
    if usage is None:
        return 0, 0, 0, 0.0
    return usage.input, usage.output, usage.total_tokens, usage.cost.total


def _flags(entry: dict[str, Any], events: Sequence[Any]) -> int:
    flags = ERROR if entry.get("input") in ERROR_INPUTS else 0
    for event in events:
        kind = event.type
        if kind == "tool_execution_start":
            flags |= TOOL
        elif kind in ("approval_requested", "approval_decided"):
            flags |= APPROVAL
        elif kind == "tool_execution_end" and event.is_error:
            flags |= ERROR
        elif kind == "message_end" and getattr(event.message, "stop_reason", None) in (
            "error",
            "aborted",
        ):
            flags |= ERROR
        elif kind == "agent_end" and event.reason in ("error", "aborted"):
            flags |= ERROR
    return flags


def edge_ids(decl: Declaration) -> tuple[list[str], dict[tuple[str, str, bool], int]]:
    """The ids of the diagram's arrows (as :func:`~agentcore_fsm.devtools.dot.to_dot` names
    them: ``edge-SOURCE-DEST``, ``-x`` for an abort or failure arrow) and, for each arrow's
    ``(source, dest, exceptional)``, its position in that list."""
    ids: list[str] = []
    where: dict[tuple[str, str, bool], int] = {}
    for group in arrow_groups(decl, None):
        where[(group.source, group.dest, group.exceptional)] = len(ids)
        ids.append(f"edge-{group.source}-{group.dest}{'-x' if group.exceptional else ''}")
    return ids, where


def _zero(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_zero(v) for v in value.values())
    return value is None or (isinstance(value, int | float) and not value)


def _pruned(value: Any) -> Any:
    """``value`` (JSON data) without what says nothing: None fields, and usage that is all
    zeros."""
    kind = type(value)
    if kind is dict:
        return {
            k: _pruned(v)
            for k, v in value.items()
            if v is not None and not (k == "usage" and _zero(v))
        }
    if kind is list:
        return [_pruned(v) for v in value]
    return value


def _entry_text(entry: dict[str, Any]) -> str:
    """The entry's fields (not its kind and timestamp, shown apart) as JSON, without None
    fields and zero usage, clipped (:data:`TEXT_LIMIT`)."""
    shown = {k: v for k, v in entry.items() if k not in ("input", "timestamp")}
    if not shown:
        return ""
    return clip(json.dumps(_pruned(shown), ensure_ascii=False, separators=(", ", ": ")))


class _Interned:
    """Distinct values, each given a number the first time it is seen (the page keeps each
    once: a long run repeats the same transitions and event labels)."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.numbers: dict[Any, int] = {}

    def __call__(self, value: Any) -> int:
        key = tuple(value) if isinstance(value, list) else value
        number = self.numbers.get(key)
        if number is None:
            number = self.numbers[key] = len(self.values)
            self.values.append(value)
        return number


def run_data(run: RunSource) -> dict[str, Any]:
    """The viewer's data of one run (and its nested runs): derived from its record, which is
    validated on the way (a damaged record raises :class:`ViewerError` naming the run, the
    entry and what is wrong).

    The form (JSON data; what the page reads): ``id``, ``declaration``, ``initial``, ``final``,
    ``model`` (its id), ``end`` (the end reason, None when unfinished), ``state`` (where the
    run stands after its last step), ``earlier`` (how many messages the context held before
    the run), ``edges`` (the diagram's arrow ids, :func:`edge_ids`), ``transitions`` (each
    distinct transition taken: ``[trigger, source, dest, arrow]``, the arrow's index in
    ``edges`` or -1), ``labels`` (each distinct event label), ``messages`` (the transcript,
    :func:`message_data`, each with ``k``, the step it ended in), ``nested`` (``{"step",
    "run"}``), ``label`` (a nested run's agent and call, ``researcher (c1)``; else None)
    and ``steps``, one per entry: ``i`` the input's kind, ``e`` its fields as JSON text,
    ``ts`` its timestamp (ms, None when not recorded), ``s`` the state after it, ``tr`` its
    transitions (indexes into ``transitions``), ``ev`` its events (indexes into
    ``labels``), ``m`` how many messages the transcript held after it, ``u`` the usage so far
    (input, output and total tokens, cost) and ``f`` its flags (:data:`ERROR`, :data:`TOOL`,
    :data:`APPROVAL`)."""
    declaration = run.header.get("declaration")
    where = f"{run.origin}: " if run.origin else ""
    try:
        derived = derive_run(
            {
                "format": run.header.get("format"),
                "declaration": declaration,
                "declaration_hash": run.header.get("declaration_hash"),
                "header": without_parent(run.header),
                "entries": run.entries,
            },
            run_id=run.run_id,
        )
    except RecordError as exc:
        raise ViewerError(where + " ".join(str(exc).split())) from None
    decl = derived.machine.declaration
    edges, where_edge = edge_ids(decl)
    history = derived.machine.history
    events = derived.events
    messages: list[dict[str, Any]] = []
    context = run.header.get("context")
    earlier = context.get("messages") if isinstance(context, dict) else None
    steps: list[dict[str, Any]] = []
    transitions, labels = _Interned(), _Interned()
    t_done = e_done = 0
    usage = [0, 0, 0, 0.0]
    first_ts: int | None = None
    for k, entry in enumerate(run.entries):
        marks = derived.marks[k] if k < len(derived.marks) else []
        t_end, e_end = marks[-1] if marks else (t_done, e_done)
        mine = events[e_done:e_end]
        for event in mine:
            if event.type == "message_end":
                data = message_data(event.message)
                data["k"] = k
                messages.append(data)
                for i, amount in enumerate(_usage_of(event.message)):
                    usage[i] += amount
        trans = [
            transitions(
                [
                    t.trigger,
                    t.source,
                    t.dest,
                    where_edge.get((t.source, t.dest, t.trigger in EXCEPTIONAL_TRIGGERS), -1),
                ]
            )
            for t in history[t_done:t_end]
        ]
        ts = entry.get("timestamp")
        ts = ts if isinstance(ts, int) and not isinstance(ts, bool) and ts > 0 else None
        if ts is not None and first_ts is None:
            first_ts = ts
        steps.append(
            {
                "i": str(entry.get("input")),
                "e": _entry_text(entry),
                "ts": ts,
                "s": history[t_end - 1].dest if t_end else decl.initial,
                "tr": trans,
                "ev": [labels(describe_event(event)) for event in mine],
                "m": len(messages),
                "u": [usage[0], usage[1], usage[2], round(usage[3], 8)],
                "f": _flags(entry, mine),
            }
        )
        t_done, e_done = t_end, e_end
    model = run.header.get("model")
    parent = run.header.get("parent")
    label = None
    if isinstance(parent, dict) and parent.get("agents") and parent.get("call"):
        label = f"{parent['agents'][-1]} ({parent['call']})"
    return {
        "id": run.run_id,
        "label": label,
        "declaration": decl.name,
        "initial": decl.initial,
        "final": decl.final,
        "model": model.get("id") if isinstance(model, dict) else None,
        "end": run.end_reason,
        "state": derived.machine.state,
        "edges": edges,
        "earlier": len(earlier) if isinstance(earlier, list) else 0,
        "steps": steps,
        "transitions": transitions.values,
        "labels": labels.values,
        "messages": messages,
        "nested": [{"step": step, "run": run_data(child)} for step, child in run.children],
    }


def nest(
    runs: Sequence[RunSource], nested: Mapping[str, Sequence[tuple[int, str]]] | None
) -> list[RunSource]:
    """The top-level runs of ``runs``, with the runs ``nested`` names (parent run id: ``(step,
    child run id)`` pairs) moved under their parents. A name that is not among the runs, a step
    the parent does not have, a run nested twice, or runs nested in each other is a
    :class:`ViewerError`."""
    if not nested:
        return list(runs)
    by_id = {run.run_id: run for run in runs}
    placed: set[str] = set()
    for parent_id, children in nested.items():
        parent = by_id.get(parent_id)
        if parent is None:
            raise ViewerError(f"nested runs: no run {parent_id!r} to nest them under")
        for step, child_id in children:
            child = by_id.get(child_id)
            if child is None:
                raise ViewerError(f"nested runs: no run {child_id!r} (under {parent_id!r})")
            if child_id in placed or child_id == parent_id:
                raise ViewerError(f"nested runs: run {child_id!r} is nested twice or in itself")
            if not 0 <= step < len(parent.entries):
                raise ViewerError(
                    f"nested runs: run {parent_id!r} has no step {step} (it has "
                    f"{len(parent.entries)})"
                )
            placed.add(child_id)
            parent.children.append((step, child))
    tops = [run for run in runs if run.run_id not in placed]
    reached: set[str] = set()
    stack = list(tops)
    while stack:
        run = stack.pop()
        reached.add(run.run_id)
        stack.extend(child for _, child in run.children)
    if len(reached) < len(by_id):
        lost = sorted(set(by_id) - reached)
        raise ViewerError(f"nested runs: runs {', '.join(map(repr, lost))} nest in each other")
    return tops


def declaration_of(data: dict[str, Any]) -> Declaration:
    """The declaration a run's data was derived on."""
    return load_declaration(str(data["declaration"]))
