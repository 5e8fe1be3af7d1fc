"""The inputs of a run as record entries, and back (docs/record.md#the-recording-line-by-line).

An entry is one JSON object per input that changed the run, ``{"input": KIND, ...}``, with the
input's ``"timestamp"`` (ms; left out when it is 0, an input stepped by hand). An entry of an
older record holds instead the clock readings the machine then took (``"clock"``, a list): it
is read back with its first reading as its timestamp (every message it makes gets that one), or
0 when it has none; an entry with neither is read back with timestamp 0. It holds the
*outcome* of an effect as the machine took it, by the codec's rules
(:mod:`agentcore_fsm.persist.codec`):

* a model call once it ended: its final message (``stream_done``/``stream_error``), or the
  failure it caused (``fail``); the deltas are not recorded. A model call cut short (abort or
  failure while it streams) keeps the partial message it had reached (``"partial"``);
* a tool's result as the machine normalised it, a hook's value as its checker accepted it or
  the text of why it was rejected, the arguments as ``before_tool_call`` left them;
* polls as they were given (or the failure an unusable one caused), approval checks and
  decisions as they were fed, aborts and failures (their text);
* tool progress updates are not recorded: they change nothing in the run.

:func:`encode_input` makes the entry of an input the machine just took; :func:`decode_entry`
validates an entry (its fields' types, its indexes against the calls the machine has) and gives
the inputs to feed again. Both raise :class:`~agentcore_fsm.persist.codec.RecordError`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from agentcore_fsm.core.boundary import exc_text, json_data
from agentcore_fsm.core.events import StreamDone, StreamError, StreamStart
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.protocol import (
    Abort,
    ApprovalChecked,
    ApprovalDecided,
    ArgumentsPrepared,
    Fail,
    FollowUpPolled,
    HookFailed,
    HookReturned,
    Input,
    OutputChecked,
    Proceeded,
    RetryDue,
    Start,
    SteeringPolled,
    Step,
    StreamEvent,
    StreamExhausted,
    ToolAttemptFailed,
    ToolFinished,
    ToolTimedOut,
)
from agentcore_fsm.persist.codec import (
    HOOK_NAMES,
    JournaledError,
    RecordError,
    ToolResolver,
    decode_message,
    dump,
    encode_hook_value,
    encode_message,
    hook_value,
    need,
    poll_data,
    poll_value,
    tool_result,
)

__all__ = ["ENTRY_KINDS", "DecodedEntry", "decode_entry", "encode_input", "partial_of"]

_TOOL_HOOKS = ("before_tool_call", "after_tool_call")
_STOP_REASONS = ("stop", "length", "toolUse", "error", "aborted")

# every kind of entry and the fields it may hold (besides "input", "timestamp" and "clock")
ENTRY_KINDS: dict[str, frozenset[str]] = {
    "start": frozenset(),
    "steering_polled": frozenset({"messages", "aborted"}),
    "follow_up_polled": frozenset({"messages", "aborted"}),
    "stream_done": frozenset({"reason", "message"}),
    "stream_error": frozenset({"reason", "message"}),
    "stream_exhausted": frozenset({"partial"}),
    "arguments_prepared": frozenset({"index", "value", "error"}),
    "approval_checked": frozenset({"index", "value", "error"}),
    "approval_decided": frozenset({"index", "approved", "reason", "decided_by", "args"}),
    "hook_returned": frozenset({"name", "index", "value", "args"}),
    "hook_failed": frozenset({"name", "index", "error", "args"}),
    "tool_finished": frozenset({"index", "result", "aborted"}),
    "proceeded": frozenset(),
    "output_checked": frozenset({"value", "error"}),
    "abort": frozenset({"partial"}),
    "fail": frozenset({"error", "aborted", "partial"}),
    "tool_attempt_failed": frozenset({"index", "error"}),
    "tool_timed_out": frozenset({"index"}),
    "retry_due": frozenset({"index"}),
}
"""The kinds of entries, with the fields each may hold besides ``input``, ``timestamp`` and
``clock``."""


# --- encoding -----------------------------------------------------------------------------------


def partial_of(machine: LoopMachine, item: Input) -> Any:
    """Before ``item`` is fed: the partial message of a model call that ``item`` may cut short
    (recorded with its entry, so that the cut-short message is the same when read back)."""
    if machine.state != "streaming" or not machine.message_started:
        return None
    partial = machine.partial_message
    if partial is None:
        return None
    if isinstance(item, StreamEvent) and getattr(item.event, "type", None) in ("done", "error"):
        return None
    return encode_message(partial)


def encode_input(
    machine: LoopMachine, item: Input, step: Step, partial: Any, failed_before: bool
) -> dict[str, Any] | None:
    """The entry of ``item``, which ``machine`` just took with result ``step`` (``partial``:
    :func:`partial_of` before it was fed; ``failed_before``: the machine had a failure
    before). None when it changed nothing that reading the run back needs (a stream event that
    did not end the stream, a progress update). Raises :class:`RecordError` for a value that
    cannot be recorded."""
    # (the most frequent kinds first; no class here is another's subclass)
    if isinstance(item, StreamEvent):
        if not step.stream_over:
            return None
        final = machine.assistant_message
        kind = getattr(item.event, "type", None)
        if kind in ("done", "error") and machine.failure is None and final is not None:
            return {
                "input": "stream_" + str(kind),
                "reason": getattr(item.event, "reason", final.stop_reason),
                "message": encode_message(final),
            }
        return _with_partial(_fail_entry(machine, False), partial)
    if isinstance(item, ToolFinished):
        result = machine.calls[item.index].result
        assert result is not None
        return {
            "input": "tool_finished",
            "index": item.index,
            "result": dump(result),
            "aborted": item.aborted,
        }
    if isinstance(item, Proceeded):
        return {"input": "proceeded"}
    if isinstance(item, Start):
        return {"input": "start"}
    if isinstance(item, (SteeringPolled, FollowUpPolled)):
        name = "steering_polled" if isinstance(item, SteeringPolled) else "follow_up_polled"
        failure = machine.failure
        if failure is not None and not failed_before:
            # the poll returned something unusable: the run failed with that text
            return {"input": "fail", "error": exc_text(failure), "aborted": item.aborted}
        return {"input": name, "messages": poll_data(item.messages), "aborted": item.aborted}
    if isinstance(item, StreamExhausted):
        return _with_partial({"input": "stream_exhausted"}, partial)
    if isinstance(item, (ArgumentsPrepared, ApprovalChecked)):
        kind = "arguments_prepared" if isinstance(item, ArgumentsPrepared) else "approval_checked"
        if item.error is not None:
            return {"input": kind, "index": item.index, "error": exc_text(item.error)}
        value = item.value if isinstance(item, ArgumentsPrepared) else item.needed
        return {"input": kind, "index": item.index, "value": json_data(value)}
    if isinstance(item, ApprovalDecided):
        return {
            "input": "approval_decided",
            "index": item.index,
            "approved": item.approved,
            "reason": item.reason,
            "decided_by": item.decided_by,
            "args": json_data(item.args),
        }
    if isinstance(item, HookReturned):
        entry: dict[str, Any] = {"input": "hook_returned", "name": item.name, "index": item.index}
        entry.update(_args_of(machine, item.name, item.index))
        outcome = encode_hook_value(item.name, item.value)
        if "error" in outcome:  # the machine rejected the value: read back as that rejection
            entry["input"] = "hook_failed"
            entry["error"] = outcome["error"]
        else:
            entry["value"] = outcome["value"]
        return entry
    if isinstance(item, HookFailed):
        return {
            "input": "hook_failed",
            "name": item.name,
            "index": item.index,
            "error": exc_text(item.error),
            **_args_of(machine, item.name, item.index),
        }
    if isinstance(item, OutputChecked):  # structured output: the answer's value or problem
        if item.error is not None:
            return {"input": "output_checked", "error": item.error}
        return {"input": "output_checked", "value": json_data(item.value)}
    if isinstance(item, Abort):
        return _with_partial({"input": "abort"}, partial)
    if isinstance(item, Fail):
        return _with_partial(_fail_entry(machine, item.aborted), partial)
    if isinstance(item, ToolAttemptFailed):  # a tool's retry policy (docs/policies-tools.md)
        return {"input": "tool_attempt_failed", "index": item.index, "error": exc_text(item.error)}
    if isinstance(item, ToolTimedOut):
        return {"input": "tool_timed_out", "index": item.index}
    if isinstance(item, RetryDue):
        return {"input": "retry_due", "index": item.index}
    return None  # ToolUpdated: progress only


def _fail_entry(machine: LoopMachine, aborted: bool) -> dict[str, Any]:
    failure = machine.failure
    text = exc_text(failure) if failure is not None else "failed"
    return {"input": "fail", "error": text, "aborted": aborted or machine.aborted}


def _with_partial(entry: dict[str, Any], partial: Any) -> dict[str, Any]:
    if partial is not None:
        entry["partial"] = partial
    return entry


def _args_of(machine: LoopMachine, name: str, index: int | None) -> dict[str, Any]:
    """For ``before_tool_call``: the call's arguments as the hook left them (it may edit
    them in place)."""
    if name != "before_tool_call" or index is None:
        return {}
    return {"args": json_data(machine.calls[index].args)}


# --- decoding -----------------------------------------------------------------------------------


@dataclass
class DecodedEntry:
    """An entry read back: the ``inputs`` to feed (a model call's message first, as a ``start``
    stream event: the partial one of a call cut short, the final one of a call that ended), the
    arguments ``before_tool_call`` left (``args``:
    call index and dict, to put back before feeding), and the ``timestamp`` every input of it
    carries."""

    kind: str
    inputs: list[Input]
    timestamp: int = 0
    args: tuple[int, dict[str, Any]] | None = None


def decode_entry(entry: Any, calls: int, tools: ToolResolver) -> DecodedEntry:
    """Validate ``entry`` and give its inputs. ``calls``: how many tool calls the machine has
    (indexes must name one); ``tools``: the tools of recorded names (a ``prepare_next_turn``
    context names them). Raises :class:`RecordError` saying what is wrong."""
    if not isinstance(entry, dict):
        raise RecordError(f"the entry is {type(entry).__name__}, not an object")
    kind = need(entry, "input", str)
    allowed = ENTRY_KINDS.get(kind)
    if allowed is None:
        raise RecordError(f"unknown kind of entry {kind!r}")
    what = f"the {kind} entry"
    for key in entry:
        if key not in allowed and key not in ("input", "timestamp", "clock"):
            raise RecordError(f"{what} has an unknown field {key!r}")
    clock = entry.get("clock", [])
    if not isinstance(clock, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in clock
    ):
        raise RecordError(f"{what}'s clock must be a list of ints (milliseconds)")
    timestamp = entry.get("timestamp", clock[0] if clock else 0)
    if not isinstance(timestamp, int) or isinstance(timestamp, bool):
        raise RecordError(f"{what}'s timestamp must be an int (milliseconds)")
    inputs: list[Input] = []
    if "partial" in entry:
        partial = decode_message(entry["partial"], f"{what}'s partial message")
        inputs.append(StreamEvent(StreamStart(partial=partial), timestamp=timestamp))
    decoded = DecodedEntry(kind, inputs, timestamp)
    item = _input(kind, entry, what, calls, tools, decoded)
    if not inputs and isinstance(item, StreamEvent):
        # the answer's start, as the stream gave it before its end (its deltas are not
        # recorded): its message_start comes before the end's transitions, as it did
        ended = item.event
        message = ended.message if isinstance(ended, StreamDone) else ended.error
        inputs.append(StreamEvent(StreamStart(partial=message), timestamp=timestamp))
    inputs.append(replace(item, timestamp=timestamp) if timestamp else item)
    return decoded


def _index(entry: dict[str, Any], what: str, calls: int, optional: bool = False) -> Any:
    if optional and entry.get("index") is None:
        if "index" not in entry:
            raise RecordError(f"{what} has no 'index'")
        return None
    index = need(entry, "index", int, what)
    if not 0 <= index < calls:
        having = f"the calls are #0 to #{calls - 1}" if calls else "there are no tool calls"
        raise RecordError(f"{what}'s index {index} names no tool call ({having})")
    return index


def _error(entry: dict[str, Any], what: str) -> JournaledError:
    return JournaledError(need(entry, "error", str, what))


def _input(
    kind: str,
    entry: dict[str, Any],
    what: str,
    calls: int,
    tools: ToolResolver,
    decoded: DecodedEntry,
) -> Input:
    if kind == "start":
        return Start()
    if kind == "proceeded":
        return Proceeded()
    if kind == "output_checked":
        if "error" in entry:
            return OutputChecked(error=need(entry, "error", str, what))
        if "value" not in entry:
            raise RecordError(f"{what} has neither 'value' nor 'error'")
        return OutputChecked(value=entry["value"])
    if kind == "abort":
        return Abort()
    if kind == "stream_exhausted":
        return StreamExhausted()
    if kind == "fail":
        return Fail(_error(entry, what), need(entry, "aborted", bool, what))
    if kind in ("steering_polled", "follow_up_polled"):
        if "messages" not in entry:
            raise RecordError(f"{what} has no 'messages'")
        messages = poll_value(entry["messages"])
        aborted = need(entry, "aborted", bool, what)
        cls = SteeringPolled if kind == "steering_polled" else FollowUpPolled
        return cls(messages, aborted)
    if kind in ("stream_done", "stream_error"):
        reason = need(entry, "reason", str, what)
        if reason not in _STOP_REASONS:
            raise RecordError(f"{what}'s reason {reason!r} is not a stop reason")
        if "message" not in entry:
            raise RecordError(f"{what} has no 'message'")
        message = decode_message(entry["message"], f"{what}'s message")
        try:
            if kind == "stream_done":
                return StreamEvent(StreamDone(reason=reason, message=message))
            return StreamEvent(StreamError(reason=reason, error=message))
        except ValueError as exc:
            raise RecordError(f"{what} is not a valid end of a stream: {exc_text(exc)}") from None
    index = _index(entry, what, calls, optional=kind in ("hook_returned", "hook_failed"))
    if kind in ("arguments_prepared", "approval_checked"):
        cls2 = ArgumentsPrepared if kind == "arguments_prepared" else ApprovalChecked
        if "error" in entry:
            if "value" in entry:
                raise RecordError(f"{what} holds both a value and an error")
            return cls2(index, error=_error(entry, what))
        if "value" not in entry:
            raise RecordError(f"{what} has neither 'value' nor 'error'")
        return cls2(index, entry["value"])
    if kind == "approval_decided":
        args = entry.get("args")
        if "args" not in entry or (args is not None and not isinstance(args, dict)):
            raise RecordError(f"{what}'s args must be an object or null")
        reason = entry.get("reason")
        if "reason" not in entry or (reason is not None and not isinstance(reason, str)):
            raise RecordError(f"{what}'s reason must be a str or null")
        return ApprovalDecided(
            index,
            need(entry, "approved", bool, what),
            reason,
            need(entry, "decided_by", str, what),
            args,
        )
    if kind == "tool_attempt_failed":
        return ToolAttemptFailed(index, _error(entry, what))
    if kind == "tool_timed_out":
        return ToolTimedOut(index)
    if kind == "retry_due":
        return RetryDue(index)
    if kind == "tool_finished":
        result = tool_result(entry.get("result"), f"{what}'s result")
        return ToolFinished(index, result, aborted=need(entry, "aborted", bool, what))
    # hook_returned / hook_failed
    name = need(entry, "name", str, what)
    if name not in HOOK_NAMES:
        raise RecordError(f"{what} names the hook {name!r}, which has no recorded value")
    if (name in _TOOL_HOOKS) != (index is not None):
        raise RecordError(
            f"{what} for {name} must "
            + ("name a tool call (index)" if name in _TOOL_HOOKS else "have a null index")
        )
    if "args" in entry:
        args = entry["args"]
        if name != "before_tool_call" or not isinstance(args, dict) or index is None:
            raise RecordError(f"{what}'s args must be an object, for before_tool_call only")
        decoded.args = (index, args)
    if kind == "hook_failed":
        if "value" in entry:
            raise RecordError(f"{what} holds a value")
        return HookFailed(name, _error(entry, what), index)
    if "value" not in entry:
        raise RecordError(f"{what} has no 'value'")
    return HookReturned(name, hook_value(name, entry["value"], tools), index)
