"""Nested runs that survive a crash (docs/multi-agent.md#runs-that-survive).

A nested run started by an agent used as a tool (:mod:`agentcore_fsm.agent.nested`) of a run
journaled in a run store (``run_agent_loop(..., store=, run_id=)``, an Agent with a store, a
:class:`~agentcore_fsm.RunRecorder`'s store) is journaled in the same store, as a run of its
own:

* its run id is ``"<outer run id>/<n>.<call id>"``, where ``n`` is the index, in the outer
  run's transcript, of the assistant message that holds the call (call ids alone may repeat
  from one turn to the next); a run nested deeper nests the id again
  (``"run-1/1.c1/1.c7"``);
* its header is a run's header plus ``"parent"``: ``{"run": <outer run id>, "call": <call id>,
  "path": [call ids from the outermost run down], "agents": [the agents of that path]}``; it
  belongs to no session (an Agent's session lists its own runs only).

When the outer run is resumed (:func:`~agentcore_fsm.resume_run`), a call of an agent tool
that had started and has no journaled result runs again (``resumes_nested``), and finds its
nested run's record:

* unfinished: the nested run is resumed from its record (what it journaled is not done again:
  its completed model calls and tools are not called, a tool of it that was running is
  answered as interrupted unless idempotent, as for any resumed run), and goes on live;
* finished (the process stopped after the nested run ended and before the outer run journaled
  the call's result): its answer is read from its record, and nothing is called;
* missing (the process stopped before the nested run was created): it starts afresh.

What is not journaled so: a nested run of a run that is not journaled in a run store (a plain
run, or one whose journal is a durable engine's: docs/durable.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from agentcore_fsm.core.abort import AbortSignal
from agentcore_fsm.core.config import AgentContext, AgentLoopConfig, StreamFn
from agentcore_fsm.core.events import AgentEndEvent
from agentcore_fsm.core.limits import RunUsage
from agentcore_fsm.core.messages import AgentMessage
from agentcore_fsm.core.nesting import Nesting
from agentcore_fsm.core.output import OutputSpec
from agentcore_fsm.core.run_context import RunScope, bind_run
from agentcore_fsm.runtime.driver import run_agent_loop
from agentcore_fsm.runtime.output_run import run_output

__all__ = ["ChildRecord", "child_id", "child_record", "observed_by", "run_recorded"]


@dataclass(frozen=True, slots=True)
class ChildRecord:
    """Where a nested run is journaled: the outer run's store, its run id there and its
    header's ``parent``."""

    store: Any
    run_id: str
    parent: dict[str, Any]


def child_id(outer_run_id: str, messages: list[AgentMessage], call_id: str) -> str:
    """The run id of the nested run started by the call ``call_id`` of the run
    ``outer_run_id`` whose transcript is ``messages``."""
    return f"{outer_run_id}/{_message_index(messages, call_id)}.{call_id}"


def _message_index(messages: list[AgentMessage], call_id: str) -> int:
    """The index of the last assistant message holding the call ``call_id`` (the length of
    the transcript when none does)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if getattr(message, "role", None) != "assistant":
            continue
        for block in message.content:
            if getattr(block, "type", None) == "toolCall" and getattr(block, "id", None) == call_id:
                return index
    return len(messages)


def observed_by(scope: RunScope | None) -> dict[str, Any]:
    """The run-function arguments that give a nested run the observers of the run whose tool
    starts it (``scope``): exactly those (a traced run's nested runs are traced in its trace;
    an untraced run's are not traced); none outside a run (the registered ones then)."""
    if scope is None or scope.observers is None:
        return {}
    return {"instrument": False, "observers": scope.observers}


def child_record(scope: RunScope, position: Nesting) -> ChildRecord | None:
    """Where the nested run at ``position`` is journaled: None unless the run whose tool
    starts it (``scope``) is journaled in a run store."""
    journal = scope.journal
    if journal is None or scope.machine is None:
        return None
    from agentcore_fsm.persist.run_journal import StoreJournal  # journaled runs only

    if not isinstance(journal, StoreJournal):
        return None
    call_id = position.path[-1]
    parent = {
        "run": journal.run_id,
        "call": call_id,
        "path": list(position.path),
        "agents": list(position.agents),
    }
    run_id = child_id(journal.run_id, scope.machine.context.messages, call_id)
    return ChildRecord(journal.store, run_id, parent)


async def run_recorded(
    record: ChildRecord,
    prompt: list[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    deliver: Any,
    signal: AbortSignal,
    stream_fn: StreamFn | None,
    deps: Any,
    spec: OutputSpec | None,
    ended: list[Any],
    finals: list[RunUsage],
    observing: dict[str, Any],
) -> list[AgentMessage]:
    """Run the nested run journaled at ``record``: afresh, resumed from its record, or read
    from it when it has finished (see the module's documentation). ``ended`` gets its
    ``agent_end`` when it is read from the record (``deliver`` gets it otherwise), ``finals``
    its usage counters then (a run with usage limits); ``observing``: :func:`observed_by`."""
    from agentcore_fsm.persist.store import UnknownRunError
    from agentcore_fsm.runtime.resume import load_run_state, resume_run

    store, run_id = record.store, record.run_id
    try:
        stored = store.load(run_id)
    except UnknownRunError:
        return await run_agent_loop(
            prompt,
            context,
            config,
            deliver,
            signal=signal,
            stream_fn=stream_fn,
            deps=deps,
            output_type=spec,
            store=store,
            run_id=run_id,
            parent=record.parent,
            **observing,
        )
    if stored.header.get("parent") != record.parent:
        raise RuntimeError(
            f"the store holds a run {run_id!r} that is not the nested run of this call (its "
            f"header's parent is {stored.header.get('parent')!r}, this call's {record.parent!r})"
        )
    if spec is not None:
        config = dataclasses.replace(config, output=spec)
    tools = context.tools
    if stored.status == "finished":
        machine, steps = load_run_state(store, run_id, config, tools=tools)
        for step in steps:
            ended.extend(e for e in step.events if type(e) is AgentEndEvent)
        usage = getattr(machine, "usage", None)
        if isinstance(usage, RunUsage):
            finals.append(usage)
        messages: list[AgentMessage] = list(machine.new_messages)
    else:
        with bind_run(deps) as scope:
            messages = await resume_run(
                run_id,
                store,
                config,
                scope.watch(deliver, tools),
                tools=tools,
                signal=signal,
                stream_fn=stream_fn,
                **observing,
            )
    if spec is None:
        return messages
    return run_output(messages, spec, ended[0] if ended else None)
