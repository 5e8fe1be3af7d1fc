"""The display a run diff and a replay's divergence share (see :mod:`agentcore_fsm.devtools.diff`
and :mod:`agentcore_fsm.devtools.replay_compare`): the first difference between two JSON values,
values shown short, a step of a record in one line, and two columns side by side."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentcore_fsm.core.messages import clip

__all__ = [
    "DIFFERENT",
    "SAME",
    "first_difference",
    "show",
    "side_by_side",
    "step_summary",
]

SAME = "="
"""The mark of a row whose two sides are the same."""
DIFFERENT = "≠"
"""The mark of a row whose two sides differ (or of which one side is missing)."""


def show(value: Any, limit: int = 60) -> str:
    """``value`` as short JSON text (at most ``limit`` characters), safe to print."""
    text = clip(json.dumps(value, ensure_ascii=False, default=repr), limit)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def first_difference(
    want: Any, got: Any, path: str = "", names: tuple[str, str] = ("expected", "got")
) -> str | None:
    """Where two JSON values first differ, as ``path: expected X, got Y`` (``names`` are the
    two words: ``("A", "B")`` gives ``path: A X, B Y``); None when they are equal. Keys are
    visited in ``want``'s order, then ``got``'s new ones; a list's items in order, then its
    length."""
    first, second = names
    where = path or "the whole value"
    if isinstance(want, dict) and isinstance(got, dict):
        for key in [*want, *(k for k in got if k not in want)]:
            sub = f"{path}.{key}" if path else str(key)
            if key not in got:
                return f"{sub}: {first} {show(want[key])}, {second} nothing"
            if key not in want:
                return f"{sub}: {first} nothing, {second} {show(got[key])}"
            found = first_difference(want[key], got[key], sub, names)
            if found is not None:
                return found
        return None
    if isinstance(want, list) and isinstance(got, list):
        for i, (a, b) in enumerate(zip(want, got, strict=False)):
            found = first_difference(a, b, f"{path}[{i}]", names)
            if found is not None:
                return found
        if len(want) != len(got):
            return f"{where}: {first} {len(want)} items, {second} {len(got)}"
        return None
    if want == got:
        return None
    return f"{where}: {first} {show(want)}, {second} {show(got)}"


def _text_of(message: Any) -> str:
    inner = message.get("message") if isinstance(message, dict) else None
    content = inner.get("content") if isinstance(inner, dict) else None
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or ():
        if isinstance(block, dict):
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "toolCall":
                args = json.dumps(block.get("arguments"), ensure_ascii=False, default=repr)
                parts.append(f"{block.get('name')}({clip(args, 24)})")
    return " ".join(p for p in parts if p)


def step_summary(entry: dict[str, Any], limit: int = 44) -> str:
    """One step of a record (an entry) in a line: its input and what it holds, in short
    (``tool_finished #0: "3"``, ``stream_done: adding add({"a": 1})``; a model answer's stop
    reason is shown unless it is ``stop`` or ``toolUse``)."""
    kind = str(entry.get("input", "?"))
    index = entry.get("index")
    at = f" #{index}" if isinstance(index, int) else ""
    what = ""
    if kind in ("stream_done", "stream_error"):
        reason = entry.get("reason")
        shown = f" ({reason})" if reason not in ("stop", "toolUse") else ""
        what = f"{shown}: {_text_of(entry.get('message'))}"
    elif kind == "tool_finished":
        result = entry.get("result")
        content = result.get("content") if isinstance(result, dict) else None
        texts = [b.get("text", "") for b in content or () if isinstance(b, dict)]
        error = " error" if isinstance(result, dict) and result.get("is_error") else ""
        what = f"{error}: {show(' '.join(map(str, texts)), 30)}"
    elif kind in ("steering_polled", "follow_up_polled"):
        polled = entry.get("messages")
        items = polled.get("items") if isinstance(polled, dict) else None
        count = len(items) if isinstance(items, list) else 0
        what = f": {count} message{'s' if count != 1 else ''}"
    elif kind == "approval_decided":
        what = f": {'approved' if entry.get('approved') else 'denied'}"
    elif kind in ("hook_returned", "hook_failed"):
        what = f" {entry.get('name')}"
    elif kind == "fail":
        what = f": {entry.get('error')}"
    return clip(f"{kind}{at}{what}", limit)


def side_by_side(
    rows: Sequence[tuple[str, str | None, str | None]],
    names: tuple[str, str] = ("A", "B"),
    width: int = 64,
    marks: Sequence[bool] | None = None,
    notes: Sequence[str | None] | None = None,
) -> list[str]:
    """Rows of two columns: each row is its label (a step or event number), its left and its
    right text (None: nothing there); each line is marked :data:`SAME` or :data:`DIFFERENT`
    (``marks``: whether each row is the same; default: whether its two texts are). ``notes``:
    a line to show under a row (what differs where the two texts look alike), or None."""
    label = max([len(r[0]) for r in rows] + [4])
    lines = [f"  {'':<{label}}    {names[0]:<{width}}  {names[1]}"]
    for i, (where, left, right) in enumerate(rows):
        same = marks[i] if marks is not None else left == right
        mark = SAME if same else DIFFERENT
        a = clip(left if left is not None else "(nothing)", width)
        b = right if right is not None else "(nothing)"
        lines.append(f"  {where:<{label}} {mark}  {a:<{width}}  {b}".rstrip())
        note = notes[i] if notes is not None else None
        if note:
            lines.append(f"  {'':<{label}}    ↳ {note}")
    return lines
