"""Retrying a tool call: :class:`RetryPolicy` (which failures, how many attempts, the backoff).

A tool's ``retry`` (:class:`~agentcore_fsm.core.tools.AgentTool`) says how a failed call is
tried again. The call's machine (``states/tool_call.toml``) counts the attempts and waits in its
state ``backing_off`` between them; the driver sleeps the delay this policy computes
(:meth:`RetryPolicy.delay_s`, jitter drawn by the driver: the machine has no clock and no
randomness) and feeds ``retry_due``. Pure: nothing here sleeps or draws a random number.

Only a tool marked ``idempotent=True`` is retried, unless the policy says
``retry_non_idempotent=True``: the user's statement that the listed failures leave nothing done
(e.g. a connection refused before the request was sent). See docs/policies-tools.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["RetryPolicy", "timeout_text"]

TIMEOUT_TEXT = 'Tool "{name}" timed out after {seconds:g} s'
"""The text of the error result of a call cancelled by its tool's ``timeout_s``."""


def timeout_text(name: str, seconds: float) -> str:
    """The error text of a call of tool ``name`` cancelled after ``seconds``."""
    return TIMEOUT_TEXT.format(name=name, seconds=seconds)


def _fail(name: str, expected: str, value: Any, kind: type[Exception] = ValueError) -> Exception:
    return kind(f"RetryPolicy: {name} must be {expected}, not {value!r}")


def _seconds(name: str, value: Any) -> float:
    expected = "a finite number of seconds >= 0"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(name, expected, value, TypeError)
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise _fail(name, expected, value)
    return float(value)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a tool's failed call is tried again.

    ``retry_on``: the exception classes a failed attempt is retried for (default: any
    ``Exception``; a tool's error *result*, ``is_error=True``, is an answer and never retried).
    ``max_attempts``: the attempts in all, the first included (1: never retried).
    ``backoff_base_s``, ``backoff_max_s``: the wait after failed attempt ``n`` is
    ``min(backoff_max_s, backoff_base_s * 2 ** (n - 1))``, shortened by up to ``jitter`` of it
    (``jitter`` in [0, 1]: 0 waits exactly that long, 1 anywhere in (0, that]).
    ``retry_timeouts``: an attempt cancelled by the tool's ``timeout_s`` is retried too.
    ``retry_non_idempotent``: retry even a tool not marked ``idempotent`` (by default such a
    tool is never run twice).

    Every field is checked here: ``ValueError``/``TypeError`` naming the field for zero
    attempts, a negative, NaN or infinite backoff, a jitter outside [0, 1], a ``retry_on`` that
    is not a tuple of exception classes."""

    retry_on: tuple[type[BaseException], ...] = (Exception,)
    max_attempts: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    jitter: float = 0.1
    retry_timeouts: bool = True
    retry_non_idempotent: bool = False

    def __post_init__(self) -> None:
        on = self.retry_on
        if isinstance(on, type):
            on = (on,)
            object.__setattr__(self, "retry_on", on)
        if not isinstance(on, tuple) or not on:
            raise _fail("retry_on", "a non-empty tuple of exception classes", on, TypeError)
        for cls in on:
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                raise _fail("retry_on", "a tuple of exception classes", on, TypeError)
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int):
            raise _fail("max_attempts", "an int >= 1", attempts, TypeError)
        if attempts < 1:
            raise _fail("max_attempts", "an int >= 1 (the first attempt counts)", attempts)
        base = _seconds("backoff_base_s", self.backoff_base_s)
        cap = _seconds("backoff_max_s", self.backoff_max_s)
        if cap < base:
            raise _fail("backoff_max_s", f"at least backoff_base_s ({base:g})", cap)
        jitter = self.jitter
        if isinstance(jitter, bool) or not isinstance(jitter, (int, float)):
            raise _fail("jitter", "a number in [0, 1]", jitter, TypeError)
        if not 0 <= jitter <= 1:  # NaN fails too
            raise _fail("jitter", "a number in [0, 1]", jitter)
        for flag in ("retry_timeouts", "retry_non_idempotent"):
            if not isinstance(getattr(self, flag), bool):
                raise _fail(flag, "a bool", getattr(self, flag), TypeError)

    def retries(self, error: BaseException) -> bool:
        """Whether a failed attempt that raised ``error`` is one this policy retries."""
        return isinstance(error, self.retry_on)

    def applies_to(self, idempotent: bool) -> bool:
        """Whether this policy retries a tool that is (or is not) ``idempotent``."""
        return idempotent or self.retry_non_idempotent

    def delay_s(self, attempt: int, draw: float) -> float:
        """The wait (s) after failed attempt ``attempt`` (1-based); ``draw`` a number in
        [0, 1) (the driver's random draw: the jitter's share taken off)."""
        full = min(self.backoff_max_s, self.backoff_base_s * 2.0 ** (attempt - 1))
        return full * (1.0 - self.jitter * draw)
