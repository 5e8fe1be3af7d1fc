"""Temporal payloads in the JSON text of the run record (split from
:mod:`agentcore_fsm.integrations.temporal`): every string kept code point for code point."""

from __future__ import annotations

import dataclasses
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    AdvancedJSONEncoder,
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    value_to_type,
)

from agentcore_fsm.persist.json_text import dumps, loads

__all__ = ["DATA_CONVERTER", "RecordJSONPayloadConverter", "RecordPayloadConverter"]


class RecordJSONPayloadConverter(JSONPlainPayloadConverter):
    """Temporal's ``json/plain`` payloads written in the JSON text of the run record
    (:mod:`agentcore_fsm.persist.json_text`): every string kept code point for code point (a
    pair of surrogates stays two code points, as in memory and in every store), where a plain
    JSON reader would join it into one character. Other values are converted as Temporal's own
    JSON converter does."""

    def to_payload(self, value: Any) -> Payload | None:
        encoder = AdvancedJSONEncoder()
        text = dumps(value, default=encoder.default)
        return Payload(metadata={"encoding": self.encoding.encode()}, data=text.encode("utf-8"))

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        value = loads(payload.data.decode("utf-8"))
        if type_hint is None or value is None:
            return value
        return value_to_type(type_hint, value)


class RecordPayloadConverter(CompositePayloadConverter):
    """Temporal's default payload converters, ``json/plain`` by
    :class:`RecordJSONPayloadConverter`."""

    def __init__(self) -> None:
        super().__init__(
            *(
                RecordJSONPayloadConverter()
                if isinstance(converter, JSONPlainPayloadConverter)
                else converter
                for converter in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


DATA_CONVERTER = dataclasses.replace(
    DataConverter.default, payload_converter_class=RecordPayloadConverter
)
"""The data converter of every client, worker and replayer of runs (:func:`connect` uses it;
give it to a :class:`temporalio.worker.Replayer`)."""
