"""The run-wide tool policy: :class:`ToolPolicy` (``AgentLoopConfig.tool_policy``).

Two settings, both off by default (a run without a policy pays a None check per batch):

* ``max_parallel_calls``: at most this many tool executions of the run at once (the driver
  waits for a free slot before it executes a call; results still go out in source order);
* ``repeat_limit`` / ``on_repeat``: the same tool called with the same arguments
  ``repeat_limit`` times in a row is refused. "In a row" means consecutive tool calls as the
  model made them, in source order over the whole run, across turns: a call of another tool,
  or of the same tool with other arguments, starts the count again; every call the model
  makes counts (also one later rejected, e.g. with invalid arguments, or refused as a repeat);
  calls of a message cut by the output token limit (never made) do not. ``on_repeat="error"``
  answers the refused call with an error result telling the model so (the tool does not run);
  ``"stop"`` does that too and ends the run after the turn (``agent_end`` reason
  ``"stopped"``; the refused call's result says why).

See docs/policies-tools.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["REPEAT_STOP_TEXT", "REPEAT_TEXT", "ToolPolicy", "call_key"]

REPEAT_TEXT = (
    'Tool "{name}" was not executed: it was called with the same arguments {count} times in a '
    "row (the limit is {limit}). Do not repeat the call; use its earlier result or try "
    "something else."
)
REPEAT_STOP_TEXT = (
    'Tool "{name}" was not executed: it was called with the same arguments {count} times in a '
    "row (the limit is {limit}). The run stops."
)


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """The run-wide tool settings (see the module's documentation). ``ValueError``/
    ``TypeError`` naming the setting for ``max_parallel_calls`` < 1, ``repeat_limit`` < 2 (a
    call cannot repeat itself once), an ``on_repeat`` other than ``"error"`` or ``"stop"``."""

    max_parallel_calls: int | None = None
    repeat_limit: int | None = None
    on_repeat: Literal["error", "stop"] = "error"

    def __post_init__(self) -> None:
        for name, minimum in (("max_parallel_calls", 1), ("repeat_limit", 2)):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(
                    f"ToolPolicy: {name} must be an int >= {minimum} or None, not {value!r}"
                )
            if value < minimum:
                raise ValueError(
                    f"ToolPolicy: {name} must be an int >= {minimum} or None, not {value!r}"
                )
        if self.on_repeat not in ("error", "stop"):
            raise ValueError(
                f"ToolPolicy: on_repeat must be 'error' or 'stop', not {self.on_repeat!r}"
            )

    def repeat_text(self, name: str, count: int) -> str:
        """The error result's text for the ``count``-th identical call of tool ``name``."""
        template = REPEAT_STOP_TEXT if self.on_repeat == "stop" else REPEAT_TEXT
        return template.format(name=name, count=count, limit=self.repeat_limit)


def call_key(name: str, arguments: Any) -> str:
    """What makes two calls "the same": the tool's name and its arguments as canonical JSON
    (keys sorted; what is not JSON compared by its ``repr``)."""
    try:
        args = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):  # e.g. keys of mixed types
        args = repr(arguments)
    return f"{name}\x00{args}"
