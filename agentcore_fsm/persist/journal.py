"""Runs that survive: a run as its starting data plus the inputs it was fed, in JSON.

The loop machine is pure: feeding the same inputs to a fresh machine gives the same steps. So a
run is persisted by persisting its **header** (the prompts, the starting context, the model and
the few settings that shape the machine) and its **journal**: one JSON entry per input that
changed the run, each with the clock readings the machine took while handling it.
:class:`JournaledLoopMachine` is a :class:`~agentcore_fsm.core.machine.LoopMachine` that keeps both
as it goes; :meth:`~JournaledLoopMachine.snapshot` turns them into a versioned
:class:`RunSnapshot` at any step boundary, and :meth:`~JournaledLoopMachine.restore` rebuilds a
machine from one (given the live objects a snapshot cannot hold: the tools and the config's
callables) by feeding the journal again.

What an entry holds is the *outcome* of an effect as the machine took it, not the raw value:

* a model call is journaled once it ended: its final message (``done``/``error``), or the
  failure it caused; the deltas are not (a model call in flight at a crash is made again). When
  a model call is cut short (abort or failure while it streams), the partial message it had
  reached is kept with the entry;
* a tool's result as the machine normalised it (a raised exception becomes the error result
  with its text), a hook's value as its checker accepted it, or the text of why it was
  rejected; the arguments as ``before_tool_call`` left them (it may edit them in place);
* polls keep what they returned (strs, messages, dicts with a role);
* approval checks and decisions as they were fed (the decision's reason, who decided, the
  arguments an approver changed), so a run can wait for approval across processes;
* tool progress updates are not journaled: they change nothing in the run.

Values are stored as JSON. A tool result's ``details`` or a message's field that is not JSON is
stored as its ``repr`` (a resumed run sees that text, not the object). Messages of custom roles
must be pydantic models to be journaled; their class is imported again on restore.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from agentcore_fsm.core.boundary import (
    InvalidValueError,
    check_after_result,
    check_before_result,
    check_should_stop,
    check_turn_update,
    exc_text,
    is_message,
)
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, AgentLoopTurnUpdate
from agentcore_fsm.core.declared import MachineError
from agentcore_fsm.core.events import StreamDone, StreamError, StreamStart
from agentcore_fsm.core.machine import LoopMachine
from agentcore_fsm.core.messages import MESSAGE_ADAPTER, AssistantMessage, Model, now_ms
from agentcore_fsm.core.protocol import (
    Abort,
    ApprovalChecked,
    ApprovalDecided,
    ArgumentsPrepared,
    Effect,
    Fail,
    FollowUpPolled,
    HookFailed,
    HookReturned,
    Input,
    Proceeded,
    Start,
    SteeringPolled,
    Step,
    StreamEvent,
    StreamExhausted,
    ToolFinished,
)
from agentcore_fsm.core.tools import (
    AfterToolCallResult,
    AgentTool,
    AgentToolResult,
    BeforeToolCallResult,
)

__all__ = [
    "JOURNAL_FORMAT",
    "JournalError",
    "JournaledError",
    "JournaledLoopMachine",
    "RunSnapshot",
    "declaration_hash",
]

JOURNAL_FORMAT = 1
"""The version of the header/entry format this code writes and reads."""

HOOK_NAMES = (
    "transform_context",
    "convert_to_llm",
    "get_api_key",
    "before_tool_call",
    "after_tool_call",
    "prepare_next_turn",
    "should_stop_after_turn",
    "get_steering_messages",
    "get_follow_up_messages",
)
# the ones whose presence decides transitions: a resumed run must have the same set
_SHAPING_HOOKS = (
    "before_tool_call",
    "after_tool_call",
    "prepare_next_turn",
    "should_stop_after_turn",
    "get_steering_messages",
    "get_follow_up_messages",
)


class JournalError(MachineError):
    """A journal or snapshot that cannot be written or does not fit: a value that is not JSON,
    a snapshot of another declaration or format, tools or hooks that differ from the run's, an
    entry the machine refuses. The text names the run (when known) and what is wrong."""


class JournaledError(Exception):
    """An exception read back from a journal: only its text survives (``str()`` is that text,
    exactly as the run reported it)."""


class RunSnapshot(BaseModel):
    """A run at a step boundary, as JSON-able data: the format version, the declaration it was
    made with (name and hash), the run's header and its journal entries. Rebuild a machine from
    it with :meth:`JournaledLoopMachine.restore`."""

    format: int = JOURNAL_FORMAT
    declaration: str
    declaration_hash: str
    header: dict[str, Any]
    entries: list[dict[str, Any]]


def declaration_hash(machine: LoopMachine) -> str:
    """A hash of the declarations a loop machine runs (the loop's and the tool call's)."""
    digest = hashlib.sha256()
    for decl in (machine.declaration, machine._call_decl):
        digest.update(decl.name.encode())
        digest.update(b"\0")
        digest.update(decl.source_text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


# --- values <-> JSON ----------------------------------------------------------------------------


def _fallback(value: Any) -> Any:
    return repr(value)


def _dump_model(value: BaseModel) -> Any:
    return value.model_dump(mode="json", fallback=_fallback)


def encode_message(message: Any) -> dict[str, Any]:
    """A message as JSON: the standard roles by value, a custom pydantic message with its
    class; anything else raises :class:`JournalError`."""
    if not isinstance(message, BaseModel):
        raise JournalError(
            f"a message of type {type(message).__name__} cannot be journaled (messages of custom "
            f"roles must be pydantic models)"
        )
    data = _dump_model(message)
    cls = type(message)
    if cls.__module__ == "agentcore_fsm.core.messages":
        return {"message": data}
    return {"custom": f"{cls.__module__}:{cls.__qualname__}", "message": data}


def decode_message(data: dict[str, Any]) -> Any:
    custom = data.get("custom")
    if custom is None:
        return MESSAGE_ADAPTER.validate_python(data["message"])
    module, _, name = str(custom).partition(":")
    try:
        cls: Any = importlib.import_module(module)
        for part in name.split("."):
            cls = getattr(cls, part)
    except (ImportError, AttributeError) as exc:
        raise JournalError(f"the message class {custom} cannot be imported: {exc}") from None
    return cls.model_validate(data["message"])


def _encode_poll(messages: Any) -> Any:
    """What a poll returned, kept as it was given (strs, messages, dicts, a list of them)."""
    if messages is None:
        return None
    items = list(messages) if isinstance(messages, (list, tuple)) else [messages]
    out: list[Any] = []
    for item in items:
        if isinstance(item, str):
            out.append({"str": item})
        elif isinstance(item, dict):
            out.append({"dict": _json_value(item)})
        elif is_message(item):
            out.append(encode_message(item))
        else:
            return None  # cannot happen: the poll was accepted, so every item is one of those
    return {"items": out, "list": isinstance(messages, (list, tuple))}


def _decode_poll(data: Any) -> Any:
    if data is None:
        return None
    items: list[Any] = []
    for item in data["items"]:
        if "str" in item:
            items.append(item["str"])
        elif "dict" in item:
            items.append(item["dict"])
        else:
            items.append(decode_message(item))
    return items if data["list"] else items[0]


def _json_value(value: Any) -> Any:
    """``value`` as JSON-able data (pydantic's JSON mode; what is not JSON becomes its repr)."""
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, fallback=_fallback)


# --- encoding an input ----------------------------------------------------------------------


def _encode(
    machine: JournaledLoopMachine, item: Input, step: Step, partial: Any, failed_before: bool
) -> dict[str, Any] | None:
    """The journal entry of ``item`` (fed with result ``step``), or None when it changed
    nothing that a restore needs (a stream event that did not end the stream, an update)."""
    if isinstance(item, Start):
        return {"input": "start"}
    if isinstance(item, (SteeringPolled, FollowUpPolled)):
        name = "steering_polled" if isinstance(item, SteeringPolled) else "follow_up_polled"
        if machine._failure is not None and not failed_before:
            # the poll returned something unusable: the run failed with that text
            return {"input": "fail", "error": exc_text(machine._failure), "aborted": item.aborted}
        return {"input": name, "messages": _encode_poll(item.messages), "aborted": item.aborted}
    if isinstance(item, StreamEvent):
        if not step.stream_over:
            return None
        final = machine._final
        kind = getattr(item.event, "type", None)
        if kind in ("done", "error") and machine._failure is None and final is not None:
            return {
                "input": "stream_" + str(kind),
                "reason": getattr(item.event, "reason", final.stop_reason),
                "message": encode_message(final),
            }
        return _with_partial(_fail_entry(machine, False), partial)
    if isinstance(item, StreamExhausted):
        return _with_partial({"input": "stream_exhausted"}, partial)
    if isinstance(item, ArgumentsPrepared):
        if item.error is not None:
            return {
                "input": "arguments_prepared",
                "index": item.index,
                "error": exc_text(item.error),
            }
        return {
            "input": "arguments_prepared",
            "index": item.index,
            "value": _json_value(item.value),
        }
    if isinstance(item, ApprovalChecked):
        if item.error is not None:
            return {"input": "approval_checked", "index": item.index, "error": exc_text(item.error)}
        return {"input": "approval_checked", "index": item.index, "value": _json_value(item.needed)}
    if isinstance(item, ApprovalDecided):
        return {
            "input": "approval_decided",
            "index": item.index,
            "approved": item.approved,
            "reason": item.reason,
            "decided_by": item.decided_by,
            "args": _json_value(item.args),
        }
    if isinstance(item, HookReturned):
        return _encode_hook(machine, item)
    if isinstance(item, HookFailed):
        return {
            "input": "hook_failed",
            "name": item.name,
            "index": item.index,
            "error": exc_text(item.error),
            **_args_of(machine, item.name, item.index),
        }
    if isinstance(item, ToolFinished):
        c = machine._calls[item.index]
        assert c.result is not None
        return {
            "input": "tool_finished",
            "index": item.index,
            "result": _dump_model(c.result),
            "aborted": item.aborted,
        }
    if isinstance(item, Proceeded):
        return {"input": "proceeded"}
    if isinstance(item, Abort):
        return _with_partial({"input": "abort"}, partial)
    if isinstance(item, Fail):
        return _with_partial(_fail_entry(machine, item.aborted), partial)
    return None  # ToolUpdated: progress only


def _fail_entry(machine: JournaledLoopMachine, aborted: bool) -> dict[str, Any]:
    failure = machine._failure
    text = exc_text(failure) if failure is not None else "failed"
    return {"input": "fail", "error": text, "aborted": aborted or machine._aborted}


def _with_partial(entry: dict[str, Any], partial: Any) -> dict[str, Any]:
    if partial is not None:
        entry["partial"] = partial
    return entry


def _args_of(machine: JournaledLoopMachine, name: str, index: int | None) -> dict[str, Any]:
    """For ``before_tool_call``: the call's arguments as the hook left them."""
    if name != "before_tool_call" or index is None:
        return {}
    return {"args": _json_value(machine._calls[index].args)}


def _encode_hook(machine: JournaledLoopMachine, item: HookReturned) -> dict[str, Any]:
    name = item.name
    entry: dict[str, Any] = {"input": "hook_returned", "name": name, "index": item.index}
    entry.update(_args_of(machine, name, item.index))
    try:
        if name == "before_tool_call":
            before = check_before_result(item.value)
            entry["value"] = None if before is None else _dump_model(before)
        elif name == "after_tool_call":
            after = check_after_result(item.value)
            entry["value"] = None if after is None else _dump_model(after)
        elif name == "should_stop_after_turn":
            entry["value"] = check_should_stop(item.value)
        else:
            update = check_turn_update(item.value)
            entry["value"] = None if update is None else _encode_update(update)
    except (InvalidValueError, ValueError, TypeError) as exc:
        # the machine rejected the value with this text: replayed as the same rejection
        return {
            "input": "hook_failed",
            "name": name,
            "index": item.index,
            "error": str(exc) if name == "before_tool_call" else exc_text(exc),
            **_args_of(machine, name, item.index),
        }
    return entry


def _encode_update(update: AgentLoopTurnUpdate) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if update.context is not None:
        out["context"] = _encode_context(update.context)
    if update.model is not None:
        out["model"] = _dump_model(update.model)
    if update.thinking_level is not None:
        out["thinking_level"] = update.thinking_level
    return out


def _encode_context(context: AgentContext) -> dict[str, Any]:
    return {
        "system_prompt": context.system_prompt,
        "messages": [encode_message(m) for m in context.messages],
        "tools": [t.name for t in context.tools],
    }


def _decode_context(data: dict[str, Any], tools: dict[str, AgentTool]) -> AgentContext:
    return AgentContext(
        data["system_prompt"],
        [decode_message(m) for m in data["messages"]],
        [_tool(tools, name) for name in data["tools"]],
    )


def _tool(tools: dict[str, AgentTool], name: str) -> AgentTool:
    tool = tools.get(name)
    if tool is None:
        raise JournalError(
            f"the run used the tool {name!r}, which was not given again (tools given: "
            f"{', '.join(sorted(tools)) or 'none'})"
        )
    return tool


# --- decoding an entry ------------------------------------------------------------------------


def _decode(
    machine: JournaledLoopMachine, entry: dict[str, Any], tools: dict[str, AgentTool]
) -> Input:
    kind = entry["input"]
    if kind == "start":
        return Start()
    if kind in ("steering_polled", "follow_up_polled"):
        cls = SteeringPolled if kind == "steering_polled" else FollowUpPolled
        return cls(_decode_poll(entry["messages"]), bool(entry["aborted"]))
    if kind in ("stream_done", "stream_error"):
        message = decode_message(entry["message"])
        if kind == "stream_done":
            return StreamEvent(StreamDone(reason=entry["reason"], message=message))
        return StreamEvent(StreamError(reason=entry["reason"], error=message))
    if kind == "stream_exhausted":
        return StreamExhausted()
    if kind == "arguments_prepared":
        if "error" in entry:
            return ArgumentsPrepared(entry["index"], error=JournaledError(entry["error"]))
        return ArgumentsPrepared(entry["index"], entry["value"])
    if kind == "approval_checked":
        if "error" in entry:
            return ApprovalChecked(entry["index"], error=JournaledError(entry["error"]))
        return ApprovalChecked(entry["index"], entry["value"])
    if kind == "approval_decided":
        return ApprovalDecided(
            entry["index"],
            entry["approved"],
            entry["reason"],
            entry["decided_by"],
            entry["args"],
        )
    if kind == "hook_returned":
        _restore_args(machine, entry)
        return HookReturned(entry["name"], _decode_hook_value(entry, tools), entry["index"])
    if kind == "hook_failed":
        _restore_args(machine, entry)
        return HookFailed(entry["name"], JournaledError(entry["error"]), entry["index"])
    if kind == "tool_finished":
        result = AgentToolResult.model_validate(entry["result"])
        return ToolFinished(entry["index"], result, aborted=bool(entry["aborted"]))
    if kind == "proceeded":
        return Proceeded()
    if kind == "abort":
        return Abort()
    if kind == "fail":
        return Fail(JournaledError(entry["error"]), bool(entry["aborted"]))
    raise JournalError(f"unknown journal entry {kind!r}")


def _restore_args(machine: JournaledLoopMachine, entry: dict[str, Any]) -> None:
    """Redo what ``before_tool_call`` did to the arguments (it edits them in place)."""
    if "args" not in entry or entry.get("index") is None:
        return
    args = machine._calls[entry["index"]].args
    journaled = entry["args"]
    if isinstance(args, dict) and isinstance(journaled, dict):
        args.clear()
        args.update(journaled)


def _decode_hook_value(entry: dict[str, Any], tools: dict[str, AgentTool]) -> Any:
    value = entry["value"]
    if value is None:
        return None
    name = entry["name"]
    if name == "before_tool_call":
        return BeforeToolCallResult.model_validate(value)
    if name == "after_tool_call":
        return AfterToolCallResult.model_validate(value)
    if name == "should_stop_after_turn":
        return bool(value)
    return AgentLoopTurnUpdate(
        context=_decode_context(value["context"], tools) if "context" in value else None,
        model=Model.model_validate(value["model"]) if "model" in value else None,
        thinking_level=value.get("thinking_level"),
    )


# --- the clock ------------------------------------------------------------------------------


class _Clock:
    """The machine's clock: records each reading (live) or hands out recorded ones (replay)."""

    __slots__ = ("readings", "replay", "source")

    def __init__(self, source: Callable[[], int]) -> None:
        self.source = source
        self.readings: list[int] = []
        self.replay: list[int] | None = None

    def __call__(self) -> int:
        replay = self.replay
        value = replay.pop(0) if replay else self.source()
        self.readings.append(value)
        return value


# --- the machine ------------------------------------------------------------------------------


class JournaledLoopMachine(LoopMachine):
    """A :class:`~agentcore_fsm.core.machine.LoopMachine` that journals what it is fed.

    ``header`` is the run's starting data as JSON; ``entries`` the journal so far (one entry per
    input that changed the run). ``on_entry(entry)`` (if given) is called with each new entry as
    soon as it is made, before the step's events are delivered: a run store appends it there.
    Everything else is the loop machine's."""

    def __init__(
        self,
        prompts: Iterable[Any],
        context: AgentContext,
        config: AgentLoopConfig,
        *,
        on_entry: Callable[[dict[str, Any]], None] | None = None,
        continuing: bool = False,
        clock: Callable[[], int] = now_ms,
        **kwargs: Any,
    ) -> None:
        self._journal_clock = _Clock(clock)
        prompts = list(prompts)
        super().__init__(prompts, context, config, clock=self._journal_clock, **kwargs)
        self.on_entry = on_entry
        self.journal_error: Exception | None = None
        """Set when ``on_entry`` raised: journaling stopped there (a driver fails the run)."""
        self.entries: list[dict[str, Any]] = []
        self.header: dict[str, Any] = {
            "format": JOURNAL_FORMAT,
            "declaration": self.declaration.name,
            "declaration_hash": declaration_hash(self),
            "prompts": [encode_message(m) for m in prompts],
            "context": _encode_context(context),
            "model": _dump_model(config.model),
            "reasoning": config.reasoning,
            "tool_execution": config.tool_execution,
            "hooks": [name for name in HOOK_NAMES if getattr(config, name) is not None],
            "continuing": continuing,
        }

    def feed(self, input: Input) -> Step:
        """Feed ``input`` (see :meth:`LoopMachine.feed`) and journal it."""
        partial = None
        if self.state == "streaming" and self._message_started and self._partial is not None:
            if not isinstance(input, StreamEvent) or getattr(input.event, "type", None) not in (
                "done",
                "error",
            ):
                partial = encode_message(self._partial)
        clock = self._journal_clock
        clock.readings = []
        failed_before = self._failure is not None
        step = super().feed(input)
        entry = _encode(self, input, step, partial, failed_before)
        if entry is not None:
            entry["clock"] = clock.readings
            # the driver takes new entries from here after each step and writes them through
            # the run's journal (agentcore_fsm.runtime.recording): feed calls nobody
            self.entries.append(entry)
        return step

    def snapshot(self) -> RunSnapshot:
        """The run so far as a :class:`RunSnapshot` (take it between steps)."""
        return RunSnapshot(
            declaration=self.declaration.name,
            declaration_hash=self.header["declaration_hash"],
            header=dict(self.header),
            entries=[dict(e) for e in self.entries],
        )

    @classmethod
    def restore(
        cls,
        snapshot: RunSnapshot | dict[str, Any],
        config: AgentLoopConfig,
        *,
        tools: Sequence[AgentTool] = (),
        run_id: str | None = None,
        on_entry: Callable[[dict[str, Any]], None] | None = None,
        on_transition: Any = None,
    ) -> tuple[JournaledLoopMachine, list[Step]]:
        """Rebuild the machine of ``snapshot`` and feed it the journal again; return it and the
        steps the journal produced (their events are the run's history up to the snapshot).

        ``config`` gives the callables again (hooks, polls): the same ones must be configured
        as in the run (the machine's path depends on which are). ``tools`` are matched by name
        with the tools the run used. Raises :class:`JournalError` for a snapshot of another
        declaration or format, tools or hooks that differ, or entries the machine refuses."""
        where = f"run {run_id!r}: " if run_id else ""
        snap = snapshot if isinstance(snapshot, RunSnapshot) else RunSnapshot(**snapshot)
        header = snap.header
        if snap.format != JOURNAL_FORMAT or header.get("format") != JOURNAL_FORMAT:
            raise JournalError(
                f"{where}journal format {snap.format} is not the format this version reads "
                f"({JOURNAL_FORMAT})"
            )
        by_name = {t.name: t for t in tools}
        try:
            context = _decode_context(header["context"], by_name)
            prompts = [decode_message(m) for m in header["prompts"]]
            model = Model.model_validate(header["model"])
        except JournalError as exc:
            raise JournalError(f"{where}{exc}") from None
        hooks = [name for name in _SHAPING_HOOKS if getattr(config, name) is not None]
        recorded = [name for name in _SHAPING_HOOKS if name in header.get("hooks", ())]
        if hooks != recorded:
            raise JournalError(
                f"{where}the run was made with the hooks {recorded or 'none'}, the config given "
                f"has {hooks or 'none'}: give the same ones to resume it"
            )
        config = _with(config, model=model, reasoning=header.get("reasoning"))
        config.tool_execution = header.get("tool_execution", config.tool_execution)
        machine = cls(
            prompts,
            context,
            config,
            on_entry=None,
            continuing=bool(header.get("continuing")),
            on_transition=on_transition,
        )
        if snap.declaration != machine.declaration.name or (
            snap.declaration_hash != machine.header["declaration_hash"]
        ):
            raise JournalError(
                f"{where}the journal was made with the declaration {snap.declaration!r} "
                f"(hash {snap.declaration_hash}); this version runs {machine.declaration.name!r} "
                f"(hash {machine.header['declaration_hash']}): it cannot be replayed here"
            )
        machine.header = dict(header)
        steps: list[Step] = []
        clock = machine._journal_clock
        for number, entry in enumerate(snap.entries):
            try:
                if "partial" in entry:
                    start = StreamStart(partial=decode_message(entry["partial"]))
                    LoopMachine.feed(machine, StreamEvent(start))
                decoded = _decode(machine, entry, by_name)
                clock.replay = list(entry.get("clock", ()))
                steps.append(LoopMachine.feed(machine, decoded))
            except (MachineError, KeyError, TypeError, ValueError) as exc:
                raise JournalError(
                    f"{where}journal entry #{number} ({entry.get('input')!r}) does not fit the "
                    f"machine in state {machine.state!r}: {exc_text(exc)}"
                ) from None
            finally:
                clock.replay = None
            machine.entries.append(entry)
        machine.on_entry = on_entry
        return machine, steps


def _with(config: AgentLoopConfig, **changes: Any) -> AgentLoopConfig:
    import dataclasses

    return dataclasses.replace(config, **changes)


def pending_effects(machine: LoopMachine) -> list[Effect]:
    """The effects a machine at a step boundary is waiting for (see
    :meth:`~agentcore_fsm.core.machine.LoopMachine.pending_effects`)."""
    return machine.pending_effects()


def assistant_or_none(message: Any) -> AssistantMessage | None:
    return message if isinstance(message, AssistantMessage) else None
