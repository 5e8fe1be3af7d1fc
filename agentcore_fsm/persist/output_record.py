"""A run's structured output in its record (docs/record.md, docs/output.md).

The output type is part of a run's configuration, like its tools: the header keeps what the
machine reads of it (``"output"``: the type's name, the mode, the retries, the final tool's
name and description, the JSON schema, whether it is wrapped, how many validators there are).
The answers' validations are inputs (``output_checked``: the value as JSON data, or the
problem). A run without an output type has no ``"output"`` in its header.

A record keeps no Python type: a machine rebuilt from a record alone (``derive_run``, a replay)
drives the run with the recorded spec; a resumed run that must validate again is given the
output type, and its spec must be the recorded one.
"""

from __future__ import annotations

from typing import Any

from agentcore_fsm.core.output import OUTPUT_MODES, OutputSpec
from agentcore_fsm.persist.codec import RecordError

__all__ = ["encode_output", "output_for_restore", "read_output"]

_FIELDS = {
    "type": str,
    "mode": str,
    "retries": int,
    "tool_name": str,
    "description": str,
    "schema": dict,
    "wrapped": bool,
    "validators": int,
}


def encode_output(spec: OutputSpec | None) -> dict[str, Any] | None:
    """The header's ``"output"`` (None: the run has no output type). Raises
    :class:`RecordError` for a spec whose schema is not JSON data (it cannot be recorded)."""
    if spec is None:
        return None
    data = spec.to_record()
    from agentcore_fsm.core.boundary import json_data

    if json_data(data["schema"]) != data["schema"]:
        raise RecordError(
            f"the output type {spec.type_name}'s JSON schema is not JSON data: it cannot be "
            f"recorded"
        )
    return data


def read_output(header: dict[str, Any]) -> OutputSpec | None:
    """The recorded spec of a header (None without one); raises :class:`RecordError`."""
    data = header.get("output")
    if data is None:
        return None
    what = "the header's output"
    if not isinstance(data, dict):
        raise RecordError(f"{what} is {type(data).__name__}, not an object")
    for name, kind in _FIELDS.items():
        value = data.get(name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise RecordError(f"{what} has no valid {name!r} ({value!r})")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise RecordError(f"{what} has an unknown field {unknown[0]!r}")
    if data["mode"] not in OUTPUT_MODES or data["retries"] < 0:
        raise RecordError(f"{what}'s mode or retries are not valid ({data!r})")
    return OutputSpec.from_record(data)


def output_for_restore(
    live: OutputSpec | None, recorded: OutputSpec | None, where: str
) -> OutputSpec | None:
    """The spec a machine rebuilt from a record runs with: the live one (it can validate) when
    it is the recorded one, the recorded one when none is given. Raises ``ValueError`` when
    the run was recorded without an output type and one is given, or with another one."""
    if recorded is None:
        if live is not None:
            raise ValueError(
                f"{where}the run was recorded without an output type; none may be given"
            )
        return None
    if live is None:
        return recorded
    mine = live.resolved(recorded.mode or "tool").to_record()
    if mine != recorded.to_record():
        raise ValueError(
            f"{where}the run was recorded with the output type {recorded.type_name} "
            f"({recorded.mode}, {recorded.retries} retries), not the one given "
            f"({live.type_name}): give the same one to resume it"
        )
    return live.resolved(recorded.mode or "tool")
