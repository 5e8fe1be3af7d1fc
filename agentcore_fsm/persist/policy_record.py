"""A run's model fallback and compaction settings in its record (docs/policies-models.md).

Like the tools and the output type, they decide the machine's path, so the header keeps what the
machine reads of them: ``"policies"``: ``{"fallback": {"models": [...], "on": [...]},
"compaction": {"max_context_tokens": N, "hook": bool}}`` (each only when configured; a run with
neither has no ``"policies"``, so its header is what it was before they existed). A machine
rebuilt from a record alone (``derive_run``, a replay) runs with the recorded settings: the
compaction hook itself is never called there (its answers are in the record), so the built-in
stands in for it.
"""

from __future__ import annotations

from typing import Any

from agentcore_fsm.core.compaction import Compaction
from agentcore_fsm.core.config import AgentLoopConfig
from agentcore_fsm.core.fallback import ModelFallback
from agentcore_fsm.persist.codec import RecordError, decode_model, encode_model

__all__ = ["encode_policies", "policies_differ", "policies_for_reader"]


def encode_policies(config: AgentLoopConfig) -> dict[str, Any] | None:
    """The header's ``"policies"`` (None: neither is configured)."""
    out: dict[str, Any] = {}
    fallback = config.fallback
    if fallback is not None:
        out["fallback"] = {
            "models": [encode_model(m) for m in fallback.models],
            "on": list(fallback.on),
        }
    compaction = config.compaction
    if compaction is not None:
        out["compaction"] = {
            "max_context_tokens": compaction.max_context_tokens,
            "hook": compaction.compact is not None,
        }
    return out or None


def policies_for_reader(header: dict[str, Any]) -> dict[str, Any]:
    """The ``fallback`` and ``compaction`` settings of a recorded header, as
    ``AgentLoopConfig`` fields, for a machine rebuilt without the live objects. Raises
    :class:`RecordError` for settings that are not ones a run could have had."""
    data = header.get("policies")
    if data is None:
        return {}
    what = "the header's policies"
    if not isinstance(data, dict):
        raise RecordError(f"{what} is {type(data).__name__}, not an object")
    out: dict[str, Any] = {}
    try:
        fallback = data.get("fallback")
        if fallback is not None:
            if not isinstance(fallback, dict) or not isinstance(fallback.get("models"), list):
                raise RecordError(f"{what}: the fallback has no list of models")
            models = [decode_model(m, f"{what}' fallback model") for m in fallback["models"]]
            out["fallback"] = ModelFallback(models, on=fallback.get("on") or ())
        compaction = data.get("compaction")
        if compaction is not None:
            if not isinstance(compaction, dict):
                raise RecordError(f"{what}: the compaction is not an object")
            out["compaction"] = Compaction(max_context_tokens=compaction.get("max_context_tokens"))
    except RecordError:
        raise
    except (TypeError, ValueError) as exc:
        raise RecordError(f"{what}: {exc}") from None
    return out


def _shape(policies: Any) -> Any:
    """What of the recorded settings decides the path (whether the compaction has a hook of its
    own does not: its answers are entries)."""
    if not isinstance(policies, dict):
        return policies
    out = dict(policies)
    compaction = out.get("compaction")
    if isinstance(compaction, dict):
        out["compaction"] = {k: v for k, v in compaction.items() if k != "hook"}
    return out


def policies_differ(header: dict[str, Any], config: AgentLoopConfig) -> str | None:
    """Why ``config`` cannot resume the run of ``header`` (a fallback or a compaction that is
    not the recorded one: the machine would take another path), or None."""
    recorded = _shape(header.get("policies"))
    given = _shape(encode_policies(config))
    if recorded == given:
        return None
    return (
        f"the header says the run was made with the fallback and compaction settings "
        f"{recorded or 'none'}, the config given has {given or 'none'}: give the same ones to "
        f"resume it"
    )
