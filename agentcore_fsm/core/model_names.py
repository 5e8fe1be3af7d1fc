"""Models named by a string, ``"provider:model-id"`` (``"openai:gpt-4o-mini"``,
``"anthropic:claude-sonnet-4-6"``), as users of other agent frameworks expect.

This is a port: the core knows no provider. A *model source* is registered per provider name
(:func:`register_model_source`) with two callables, one that describes a model id as a
:class:`~agentcore_fsm.core.messages.Model` and one that makes the provider's default stream
function. The package's front door registers the built-in ones (``openai`` and ``anthropic``,
described from the table in :mod:`agentcore_fsm.integrations.providers.models`); another
provider package may register its own.

* :func:`resolve_model` turns a name into a :class:`Model` (a ``Model`` passes as it is); a
  name without a provider, an unknown provider or an unknown model id is refused with an error
  that names the known ones.
* :func:`stream_fn_for` gives the stream function of a model whose provider has a registered
  source, made on first use: this is where a missing SDK is reported (``ImportError`` naming
  the extra to install), before a run starts. A run given a stream function, or a default one
  (``set_default_stream_fn``), never asks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentcore_fsm.core.messages import Model

__all__ = ["ModelSource", "register_model_source", "resolve_model", "stream_fn_for"]


@dataclass(frozen=True)
class ModelSource:
    """How one provider's models are described and streamed: ``describe(model_id)`` returns
    its :class:`Model` (raising :class:`KeyError` for an id it does not know, the message
    naming the known ones); ``stream_fn()`` returns the provider's default stream function
    (raising :class:`ImportError` naming the extra when its SDK is missing)."""

    describe: Callable[[str], Model]
    stream_fn: Callable[[], Any]


_SOURCES: dict[str, ModelSource] = {}


def register_model_source(provider: str, source: ModelSource) -> None:
    """Register (or replace) the source of ``provider``'s models."""
    if not isinstance(provider, str) or not provider or ":" in provider:
        raise ValueError(f"a model source needs a provider name without ':', not {provider!r}")
    _SOURCES[provider] = source


def _known() -> str:
    return ", ".join(sorted(_SOURCES)) or "none registered"


def resolve_model(value: Any, where: str = "model") -> Model:
    """``value`` as a :class:`Model`: a ``Model`` as it is, a str ``"provider:model-id"``
    described by the provider's registered source. Anything else is a :class:`TypeError`,
    a str that names no known provider or model a :class:`ValueError`; ``where`` names the
    argument in the message."""
    if isinstance(value, Model):
        return value
    if not isinstance(value, str):
        raise TypeError(
            f"{where} must be a Model or a str such as 'openai:gpt-4o-mini', not "
            f"{type(value).__name__} ({value!r:.60})"
        )
    provider, colon, model_id = value.partition(":")
    if not colon or not provider or not model_id:
        raise ValueError(
            f"{where} {value!r}: name a model as 'provider:model-id' (e.g. "
            f"'openai:gpt-4o-mini', 'anthropic:claude-sonnet-4-6'), or pass a Model; "
            f"providers: {_known()}"
        )
    source = _SOURCES.get(provider)
    if source is None:
        raise ValueError(
            f"{where} {value!r}: unknown provider {provider!r} (known: {_known()}); describe "
            f"other models with Model(...) or openai_compatible_model()"
        )
    try:
        return source.describe(model_id)
    except KeyError as exc:
        raise ValueError(f"{where} {value!r}: {exc.args[0] if exc.args else exc}") from None


def stream_fn_for(model: Model) -> Any:
    """The default stream function of ``model``'s provider when a source is registered for
    it (made now: ``ImportError`` naming the extra when its SDK is not installed); else
    None."""
    source = _SOURCES.get(model.provider)
    return None if source is None else source.stream_fn()
