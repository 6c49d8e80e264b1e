"""OTLP values as the store keeps them: attribute text, span kinds and statuses, event ids.

Shared by both span decoders (the protobuf reference in :mod:`.decode` and the wire walker
in :mod:`.span_wire`), which must produce identical rows, so each conversion exists once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

__all__ = ["MAX_TIME_NS", "SPAN_KINDS", "STATUS", "PoisonRecord", "any_value_text",
           "attributes_map", "event_id", "invalid_ids", "parse_request"]


class PoisonRecord(ValueError):
    """A message that can never be decoded; ``str(exc)`` is the reason."""


# DateTime64(9) holds nanoseconds in an Int64, so times end at 2262-04-11. A later one
# (OTLP times are uint64) decodes, but ClickHouse refuses the row, and the consumer would
# retry a batch it cannot write forever: the decoders name such a message poison.
MAX_TIME_NS = 2**63 - 1


def parse_request(message_type: type, raw: bytes, what: str) -> Any:
    """``raw`` parsed as the OTLP export request ``message_type`` (``what``: "trace",
    "metrics", "logs", for the reason), or PoisonRecord naming why it is not one."""
    if not raw:
        raise PoisonRecord(f"empty {what} message")
    request = message_type()
    try:
        request.ParseFromString(raw)
    except (DecodeError, ValueError, TypeError) as exc:
        raise PoisonRecord(f"not an OTLP {what} request (protobuf decode failed: {exc})") \
            from None
    return request


SPAN_KINDS = {v: k.removeprefix("SPAN_KIND_").lower() for k, v in Span.SpanKind.items()}
STATUS = {v: k.removeprefix("STATUS_CODE_").lower() for k, v in Status.StatusCode.items()}


def any_value_text(value: AnyValue) -> str:
    """An OTLP AnyValue as the string stored in a ClickHouse Map(String, String)."""
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "bool_value":
        return "true" if value.bool_value else "false"
    if which == "int_value":
        return str(value.int_value)
    if which == "double_value":
        return repr(value.double_value)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return json.dumps(_any_value_json(value), ensure_ascii=False)


def _any_value_json(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_any_value_json(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _any_value_json(kv.value) for kv in value.kvlist_value.values}
    if which is None:
        return None
    return getattr(value, which) if which != "bytes_value" else value.bytes_value.hex()


def attributes_map(attributes: Iterable[KeyValue]) -> dict[str, str]:
    return {kv.key: any_value_text(kv.value) for kv in attributes}


def event_id(trace_id: str, span_id: str, index: int, time_unix_nano: int, name: str) -> str:
    """Deterministic id of a span event: the same event always gets the same id."""
    raw = f"{trace_id}:{span_id}:{index}:{time_unix_nano}:{name}".encode()
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def invalid_ids(trace_len: int, span_len: int) -> PoisonRecord:
    return PoisonRecord(f"span with invalid ids (trace_id {trace_len} bytes, span_id "
                        f"{span_len} bytes; expected 16 and 8): not an OTLP trace request")

