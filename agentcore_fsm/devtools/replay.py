"""Exact replay of a recorded run: a JSONL recording becomes a regression test in one call.

A recording written by :class:`~agentcore_fsm.persist.recorder.RunRecorder` (events *and*
transitions)
holds everything the world outside the loop did during the run: what the model streamed, what
each tool returned, what the polls and hooks answered, when the signal fired and where something
raised. :func:`replay_script` turns it into a script that plays the world's part again, offline:

* the prompts: the messages of the run's start (see docs/reference.md#control-flow-of-a-run);
* the model: each model call streams the recorded stream events again (the ``start`` event and
  every ``message_update``'s stream event, partial messages included, so that the same deltas
  come out), then ends as it ended: its recorded final message (``done``, or ``error`` for a
  message that stopped with "error" or "aborted"), a raise with the recorded error text (a
  failure of the model call), or nothing (an abort ends it);
* the tools: one stub :class:`~agentcore_fsm.core.tools.AgentTool` per tool name seen, accepting any
  arguments, whose ``execute`` replays the call's recorded ``tool_execution_update`` events
  through ``on_update`` and returns its recorded result (content, details, ``is_error``,
  ``terminate``...); a call rejected before it ran (unknown tool, invalid arguments, blocked,
  ``prepare_arguments`` raised) is rejected again with the recorded text, through the stub's
  ``prepare_arguments``; a call that was still running when the run was aborted never returns;
* the approvals: a call that waited for approval (``approval_requested``) asks for it again,
  with the recorded reason, and ``decide_approval`` gives the recorded decision (approved or
  not, reason, who decided, the arguments the approver changed) once the events recorded
  before its ``approval_decided`` have been produced again; a denial for want of an approver,
  by a timeout or by an error is given as recorded, and a call the abort answered waits until
  the abort replays;
* the polls and hooks that were configured (the transitions say which): the steering and
  follow-up polls return the recorded injected messages at the same points,
  ``prepare_next_turn`` returns nothing, ``should_stop_after_turn`` the recorded decision, and
  each raises the recorded error text where the run failed there;
* aborts and the other failures: the signal fires once the replay has produced what the
  recording holds before the ``abort`` transition (a poll that returned after the signal fired
  fires it itself); a failure that no component above accounts for (a listener that raised) is
  raised from the replay's own ``emit`` at the same point.

The tools run concurrently as they did: each update and each result is handed to the loop only
once the events recorded before it have been produced again, so that parallel tools interleave
exactly as recorded.

:func:`replay_run` (async) runs the script through
:func:`~agentcore_fsm.runtime.driver.run_agent_loop`
and compares, as they come, every event (their JSON form, ``timestamp`` fields left out) and
every transition (index, trigger, source, dest) with the recording. The first mismatch is a
:class:`Divergence`: where, what was expected, what came, the first differing field and the
records just before it; the replay is then aborted. A replay that stops producing anything
while the recording expects more (for ``stall_timeout`` seconds) diverges there too.
:func:`assert_replays` is the regression test in one call; :func:`replay_run_sync` the same from
synchronous code; ``agentcore-fsm replay RUN.jsonl`` the same from a terminal (:func:`main`).
``replay_run(..., decide_approval=policy)`` replays the approvals with another approver instead
of the recorded decisions: the first decision that differs from the recorded one diverges at its
``approval_decided`` event, or at the transition it caused when it sends the loop another way
at once (recorded just before the event): a policy checked against what people decided.

What a recording does not hold cannot be replayed: the system prompt and the earlier context
(the model is not asked anything, so they do not matter to the events), the tools' parameters,
``before_tool_call``/``after_tool_call`` (their effect is in the recorded results), and what
``prepare_next_turn`` changed. See docs/replay.md for the full list of what is reproduced and
what is not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentcore_fsm.devtools.replay_compare import Divergence, ReplayResult
from agentcore_fsm.devtools.replay_runner import (
    DEFAULT_STALL_TIMEOUT,
    assert_replays,
    replay_run,
    replay_run_sync,
)
from agentcore_fsm.devtools.replay_world import (
    Outcome,
    ReplayedFailure,
    ReplayError,
    ReplayScript,
    RunScript,
    replay_script,
)
from agentcore_fsm.persist.recording import RunFileError

__all__ = [
    "DEFAULT_STALL_TIMEOUT",
    "Divergence",
    "Outcome",
    "ReplayError",
    "ReplayResult",
    "ReplayScript",
    "ReplayedFailure",
    "RunScript",
    "assert_replays",
    "main",
    "replay_run",
    "replay_run_sync",
    "replay_script",
]


# --- the command --------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentcore-fsm replay",
        description="Re-run a run recorded by RunRecorder offline: the recorded model answers, "
        "tool results, polls and aborts are played back, and every event and transition is "
        "compared with the recording. Exit status 0 when identical, 1 at the first divergence "
        "(which is printed) or when the file cannot be replayed.",
    )
    parser.add_argument("run", metavar="RUN.jsonl", help="a recording (events and transitions)")
    parser.add_argument(
        "--backend",
        choices=("trio", "asyncio"),
        default="trio",
        help="the event loop to replay on (default: trio)",
    )
    parser.add_argument(
        "--stall-timeout",
        type=float,
        default=DEFAULT_STALL_TIMEOUT,
        metavar="SECONDS",
        help="report a stall after this long without progress (default: "
        f"{DEFAULT_STALL_TIMEOUT:g})",
    )
    return parser


def _error(message: str, status: int = 1) -> int:
    print(f"agentcore-fsm replay: error: {message}", file=sys.stderr)
    return status


def main(argv: list[str]) -> int:
    """``agentcore-fsm replay RUN.jsonl [--backend trio|asyncio]``: returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.run:
        parser.error("RUN.jsonl needs a file name")
    if not args.stall_timeout > 0:
        parser.error("--stall-timeout must be a positive number of seconds")
    try:
        result = replay_run_sync(
            Path(args.run), backend=args.backend, stall_timeout=args.stall_timeout
        )
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return _error(f"cannot read {args.run}: {reason}")
    except RunFileError as exc:
        return _error(str(exc))
    except ReplayError as exc:
        return _error(f"cannot replay {args.run}: {exc}")
    for note in result.notes:
        print(f"note: {note}")
    print(result.summary())
    return 0 if result.ok else 1
