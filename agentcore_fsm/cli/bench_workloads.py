"""The bench's workloads (``agentcore-fsm bench``): W1 and W2 as scripts both sides play, and the
number of events a run of one must emit. See :mod:`agentcore_fsm.cli.bench`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = [
    "PROMPT",
    "BenchError",
    "Turn",
    "Workload",
    "expected_event_count",
    "workload_w1",
    "workload_w2",
]

PROMPT = "Run the benchmark workload."
"""The prompt of every run."""


# --- workloads --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One model response: ``deltas`` text chunks, then one ``echo`` call per entry of ``calls``
    (each entry is the call's raw JSON arguments)."""

    deltas: tuple[str, ...]
    calls: tuple[tuple[str, str], ...]  # (tool call id, arguments as JSON)


@dataclass(frozen=True)
class Workload:
    """A named script of model responses (:class:`Turn`), played by both loops alike."""

    name: str
    turns: tuple[Turn, ...]

    @property
    def text(self) -> str:
        """All streamed text, every turn joined (what a consumer must have seen)."""
        return "".join("".join(t.deltas) for t in self.turns)

    @property
    def echo_values(self) -> list[str]:
        """The text of every tool result, in source order."""
        return [str(json.loads(args)["x"]) for t in self.turns for _, args in t.calls]


def _deltas(n: int, start: int = 0) -> tuple[str, ...]:
    # eight characters each, so that the faux provider (chunk_size=8) streams the same deltas
    return tuple(f"word{i % 1000:03d} " for i in range(start, start + n))


def _calls(turn: int, n: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"call_{turn}_{i}", json.dumps({"x": i})) for i in range(n))


def workload_w1(deltas: int = 50) -> Workload:
    """W1: one turn of ``deltas`` text deltas, no tools."""
    return Workload("W1", (Turn(_deltas(deltas), ()),))


def workload_w2(deltas: int = 10, calls: int = 4, final_deltas: int = 20) -> Workload:
    """W2: two turns of ``deltas`` text deltas and ``calls`` parallel ``echo`` calls, then
    ``final_deltas`` deltas and stop."""
    return Workload(
        "W2",
        (
            Turn(_deltas(deltas), _calls(1, calls)),
            Turn(_deltas(deltas, deltas), _calls(2, calls)),
            Turn(_deltas(final_deltas, 2 * deltas), ()),
        ),
    )


def expected_event_count(w: Workload) -> int:
    """agent_start/end, per turn turn_start/end, prompt start/end, assistant start/end, one
    update per stream event, and per tool call start/end plus its result message start/end."""
    total = 2 + 2  # agent_start, agent_end, prompt message_start/end
    for t in w.turns:
        total += 2 + 2  # turn_start/end, assistant message_start/end
        if t.deltas:
            total += len(t.deltas) + 2  # text_start, deltas, text_end
        total += 3 * len(t.calls)  # toolcall_start, one toolcall_delta, toolcall_end
        total += 4 * len(t.calls)  # tool_execution_start/end, result message_start/end
    return total


class BenchError(RuntimeError):
    """A run did not do the workload's work: the bench stops rather than print a number."""
