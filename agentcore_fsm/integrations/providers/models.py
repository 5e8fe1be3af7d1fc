"""A small table of well-known models, so that nobody has to hand-fill :class:`Model`.

::

    get_model("openai", "gpt-4o-mini")           # api, provider, base_url, prices, limits
    get_model("anthropic", "claude-sonnet-4-6")
    openai_compatible_model("llama3.2", "http://localhost:11434/v1")   # any compatible server

Prices are dollars per million tokens as published on each vendor's price list when this table
was written (OpenAI: its 2025 list; Anthropic: its late-2026 list, cache writes at the 5-minute
rate); they only feed
``Usage.cost``. Check the vendor's price list when cost matters, and build your own
:class:`Model` (``get_model(...).model_copy(update={...})``) to override. The table is not
exhaustive: vendors add and retire models faster than a library is released. A model missing
from the table can always be described by hand: ``Model(id=..., api=OPENAI_API,
provider="openai", ...)``.

The table needs neither SDK: it is plain data.
"""

from __future__ import annotations

from typing import Literal

from agentcore_fsm.core.messages import Model, ModelCost

__all__ = [
    "ANTHROPIC_API",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API",
    "OPENAI_BASE_URL",
    "get_model",
    "list_models",
    "openai_compatible_model",
]

OPENAI_API = "openai-completions"
ANTHROPIC_API = "anthropic-messages"
OPENAI_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"

_TEXT_IMAGE: list[Literal["text", "image"]] = ["text", "image"]
_TEXT: list[Literal["text", "image"]] = ["text"]

# id: (reasoning, input, (input, output, cache read, cache write) $/M, context window, max output)
_Row = tuple[bool, list[Literal["text", "image"]], tuple[float, float, float, float], int, int]

_OPENAI: dict[str, _Row] = {
    "gpt-4o-mini": (False, _TEXT_IMAGE, (0.15, 0.60, 0.075, 0.0), 128_000, 16_384),
    "gpt-4o": (False, _TEXT_IMAGE, (2.50, 10.00, 1.25, 0.0), 128_000, 16_384),
    "gpt-4.1": (False, _TEXT_IMAGE, (2.00, 8.00, 0.50, 0.0), 1_047_576, 32_768),
    "gpt-4.1-mini": (False, _TEXT_IMAGE, (0.40, 1.60, 0.10, 0.0), 1_047_576, 32_768),
    "gpt-4.1-nano": (False, _TEXT_IMAGE, (0.10, 0.40, 0.025, 0.0), 1_047_576, 32_768),
    "o3-mini": (True, _TEXT, (1.10, 4.40, 0.55, 0.0), 200_000, 100_000),
    "o4-mini": (True, _TEXT_IMAGE, (1.10, 4.40, 0.275, 0.0), 200_000, 100_000),
    "o3": (True, _TEXT_IMAGE, (2.00, 8.00, 0.50, 0.0), 200_000, 100_000),
    "gpt-5": (True, _TEXT_IMAGE, (1.25, 10.00, 0.125, 0.0), 400_000, 128_000),
    "gpt-5-mini": (True, _TEXT_IMAGE, (0.25, 2.00, 0.025, 0.0), 400_000, 128_000),
    "gpt-5-nano": (True, _TEXT_IMAGE, (0.05, 0.40, 0.005, 0.0), 400_000, 128_000),
}

_ANTHROPIC: dict[str, _Row] = {
    "claude-fable-5-1": (True, _TEXT_IMAGE, (10.00, 50.00, 0.25, 12.50), 1_000_000, 128_000),
    "claude-opus-5-5": (True, _TEXT_IMAGE, (4.00, 20.00, 0.20, 5.00), 1_000_000, 128_000),
    "claude-opus-5": (True, _TEXT_IMAGE, (5.00, 25.00, 0.50, 6.25), 1_000_000, 128_000),
    "claude-sonnet-5-5": (True, _TEXT_IMAGE, (2.00, 10.00, 0.10, 2.50), 1_000_000, 128_000),
    "claude-sonnet-5": (True, _TEXT_IMAGE, (2.00, 10.00, 0.20, 2.50), 1_000_000, 128_000),
    "claude-opus-4-6": (True, _TEXT_IMAGE, (5.00, 25.00, 0.50, 6.25), 1_000_000, 128_000),
    "claude-sonnet-4-6": (True, _TEXT_IMAGE, (3.00, 15.00, 0.30, 3.75), 1_000_000, 128_000),
    "claude-opus-4-5-20251101": (True, _TEXT_IMAGE, (5.00, 25.00, 0.50, 6.25), 200_000, 64_000),
    "claude-sonnet-4-5-20250929": (True, _TEXT_IMAGE, (3.00, 15.00, 0.30, 3.75), 200_000, 64_000),
    "claude-haiku-4-5-20251001": (True, _TEXT_IMAGE, (1.00, 5.00, 0.10, 1.25), 200_000, 64_000),
}
_ANTHROPIC_ALIASES = {
    "claude-opus-4-5": "claude-opus-4-5-20251101",
    "claude-sonnet-4-5": "claude-sonnet-4-5-20250929",
    "claude-haiku-4-5": "claude-haiku-4-5-20251001",
}

_TABLES: dict[str, tuple[dict[str, _Row], dict[str, str], str, str]] = {
    "openai": (_OPENAI, {}, OPENAI_API, OPENAI_BASE_URL),
    "anthropic": (_ANTHROPIC, _ANTHROPIC_ALIASES, ANTHROPIC_API, ANTHROPIC_BASE_URL),
}


def list_models(provider: str | None = None) -> list[str]:
    """The model ids (aliases included) known for ``provider``, or for every provider as
    ``"provider/id"``."""
    if provider is None:
        return [f"{p}/{m}" for p in _TABLES for m in list_models(p)]
    table, aliases, _, _ = _table(provider)
    return sorted([*table, *aliases])


def _table(provider: str) -> tuple[dict[str, _Row], dict[str, str], str, str]:
    try:
        return _TABLES[provider]
    except KeyError:
        known = ", ".join(sorted(_TABLES))
        raise KeyError(
            f"Unknown provider {provider!r} (known: {known}); for another OpenAI-compatible "
            "server use openai_compatible_model()"
        ) from None


def get_model(provider: str, model_id: str) -> Model:
    """The :class:`Model` for a known ``provider`` ("openai" or "anthropic") and model id.

    Raises :class:`KeyError` naming the known ids when the model is not in the table. An alias
    (``claude-haiku-4-5``) keeps the alias as the id sent to the API."""
    table, aliases, api, base_url = _table(provider)
    row = table.get(aliases.get(model_id, model_id))
    if row is None:
        raise KeyError(
            f"Unknown {provider} model {model_id!r}; known: {', '.join(list_models(provider))}. "
            "Describe other models with Model(...) or openai_compatible_model()."
        )
    reasoning, inputs, (p_in, p_out, p_read, p_write), context_window, max_tokens = row
    return Model(
        id=model_id,
        name=model_id,
        api=api,
        provider=provider,
        base_url=base_url,
        reasoning=reasoning,
        input=list(inputs),
        cost=ModelCost(input=p_in, output=p_out, cache_read=p_read, cache_write=p_write),
        context_window=context_window,
        max_tokens=max_tokens,
    )


def openai_compatible_model(
    model_id: str,
    base_url: str,
    *,
    provider: str = "openai-compatible",
    name: str | None = None,
    reasoning: bool = False,
    images: bool = False,
    context_window: int = 0,
    max_tokens: int = 0,
    cost: ModelCost | None = None,
    headers: dict[str, str] | None = None,
) -> Model:
    """Describe a model served by any OpenAI-compatible server (vLLM, Ollama, llama.cpp,
    LM Studio, OpenRouter, ...): ``openai_compatible_model("llama3.2",
    "http://localhost:11434/v1")``. Use it with
    :class:`~agentcore_fsm.integrations.providers.openai.
    OpenAIProvider`. ``reasoning=True`` lets ``options.reasoning`` be sent as
    ``reasoning_effort``; ``images=True`` lets images through. Costs default to zero."""
    return Model(
        id=model_id,
        name=name or model_id,
        api=OPENAI_API,
        provider=provider,
        base_url=base_url,
        reasoning=reasoning,
        input=list(_TEXT_IMAGE if images else _TEXT),
        cost=cost or ModelCost(),
        context_window=context_window,
        max_tokens=max_tokens,
        headers=headers,
    )
