"""Model fallback: the models a run moves on to when a request fails with a retryable error
(``AgentLoopConfig.fallback``; docs/policies-models.md).

The run's ``model`` is tried first; a request that ends with an error whose
:data:`~agentcore_fsm.core.messages.ErrorKind` is in :attr:`ModelFallback.on` (after the
provider's own retries) is made again, at once, with the next model of
:attr:`ModelFallback.models`. The failed attempt stays in the transcript as the error message it
is (a turn of its own, with the model that failed and its ``error_kind``); the next attempt is a
new turn. The run keeps the model it reached for its later requests (a rate-limited or
overloaded model is likely to stay so for a while; a resumed run continues with it too); the
list is walked once per run. When a request fails with a kind that is not in ``on``, or with
the last model, the run ends as any provider failure (``agent_end`` reason "error"), and when
some model was fallen back from for that request, the last message's ``error_message`` names
each model's error.

Declared in ``states/agent_loop.toml`` (the guards ``fallback_left`` and ``fell_back``, the
variables ``model_index`` and ``model_errors``); the machine reaches the same model on a replay
of its journal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, get_args

from agentcore_fsm.core.messages import ErrorKind, Model

__all__ = ["DEFAULT_FALLBACK_KINDS", "ERROR_KINDS", "ModelFallback", "failures_text"]

ERROR_KINDS: tuple[ErrorKind, ...] = get_args(ErrorKind)
"""Every :data:`~agentcore_fsm.core.messages.ErrorKind`."""

DEFAULT_FALLBACK_KINDS: tuple[ErrorKind, ...] = (
    "rate_limit",
    "overloaded",
    "server_error",
    "timeout",
)
"""The kinds a fallback moves on for unless told otherwise: those another model may answer."""


@dataclass(frozen=True, slots=True, init=False)
class ModelFallback:
    """The models to fall back to, in order, and the error kinds that make a run move on.

    ``ModelFallback(models=[backup, last_resort])`` (any iterable of
    :class:`~agentcore_fsm.core.messages.Model`; kept as a tuple), ``on`` the kinds (default
    :data:`DEFAULT_FALLBACK_KINDS`). Refused at construction, naming the setting: an empty
    ``models``, an item that is not a ``Model``, an empty ``on`` or an unknown kind."""

    models: tuple[Model, ...]
    on: tuple[ErrorKind, ...]

    def __init__(
        self, models: Iterable[Model], on: Iterable[ErrorKind] = DEFAULT_FALLBACK_KINDS
    ) -> None:
        object.__setattr__(self, "models", _models(models))
        object.__setattr__(self, "on", _kinds(on))

    def moves_on(self, kind: str | None) -> bool:
        """Whether an error of ``kind`` makes the run try the next model."""
        return kind in self.on


def _models(value: Any) -> tuple[Model, ...]:
    if isinstance(value, (str, bytes, Model)) or not isinstance(value, Iterable):
        raise TypeError(
            f"ModelFallback: models must be a list of Model, not {type(value).__name__}"
        )
    models = tuple(value)
    if not models:
        raise ValueError("ModelFallback: models must name at least one Model (got an empty list)")
    for i, model in enumerate(models):
        if not isinstance(model, Model):
            raise TypeError(
                f"ModelFallback: models[{i}] must be a Model, not {type(model).__name__} "
                f"({model!r:.60})"
            )
    return models


def _kinds(value: Any) -> tuple[ErrorKind, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(
            f"ModelFallback: on must be a list of error kinds, not {type(value).__name__}"
        )
    kinds = tuple(value)
    if not kinds:
        raise ValueError("ModelFallback: on must name at least one error kind (got none)")
    for kind in kinds:
        if kind not in ERROR_KINDS:
            raise ValueError(
                f"ModelFallback: on holds {kind!r}, which is not an error kind (one of "
                f"{', '.join(ERROR_KINDS)})"
            )
    return kinds


def failures_text(errors: Iterable[str]) -> str:
    """The ``error_message`` of a request that failed with every model it reached: each
    model's error, in the order they were tried."""
    return "Every model failed: " + "; ".join(errors)
