"""OTLP logs -> ``log_records`` rows, with a named reason for every message rejected.

A logs-topic message is one serialized ``ExportLogsServiceRequest``, as guardtrace's
:class:`~guardtrace.collectors.export.kafka_exporters.KafkaLogExporter` and the
OpenTelemetry Collector's Kafka exporter (``encoding: otlp_proto``) write it. Like the
other decoders this is a pure function of the message bytes: a replayed message yields
the same rows with the same record ids, which is what lets ReplacingMergeTree collapse a
replay. Values are stored as the span decoders store them (:mod:`.otlp_values`): an
attribute or body that is a map or an array becomes JSON text.

GenAI log events (``gen_ai.client.inference.operation.details``) carry the messages of
one LLM call. Once decoded, each is handed as a :class:`GenAILogEvent` to
:func:`detect_in_genai_log_events`, the one place where pipeline detection will look at
them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from ..schemas import names
from ..store.rows import DecodedRows
from .otlp_values import PoisonRecord, any_value_text, attributes_map

__all__ = ["GenAILogEvent", "decode_logs", "detect_in_genai_log_events"]

# DateTime64(9) holds nanoseconds in an Int64 (times end at 2262-04-11). ClickHouse would
# refuse a later time, and the consumer would retry the batch forever: poison instead.
_MAX_TIME_NS = 2**63 - 1


@dataclass(frozen=True)
class GenAILogEvent:
    """One GenAI log event as pipeline detection reads it: its ids and plain attributes.

    Attributes:
        record_id: The ``log_records`` row's id (deterministic: a replay gives the same).
        trace_id: Hex trace id, or "" when the record names no trace.
        span_id: Hex span id, or "".
        request_id: The record's ``request_id`` attribute, or "".
        timestamp_ns: The row's time (the record's, else its observed time).
        service: The resource's ``service.name``.
        event_name: The event's name (``gen_ai.client.inference.operation.details``).
        attributes: The record's attributes as stored (maps and arrays as JSON text).
        body: The record's body as stored.
    """

    record_id: str
    trace_id: str
    span_id: str
    request_id: str
    timestamp_ns: int
    service: str
    event_name: str
    attributes: Mapping[str, str]
    body: str


def detect_in_genai_log_events(events: list[GenAILogEvent], rows: DecodedRows) -> None:
    """Where pipeline detection meets the GenAI log events of one message.

    Called once per message, after its ``log_records`` rows are built, with the GenAI log
    events among them (possibly none). Detection will run its detectors on each event's
    ``attributes`` and add the guard events it finds to ``rows``, so they are written in
    the same batch and replayed with it. Until it is wired in, nothing is added.
    """
    return None


def _record_id(index: int, resource: Mapping[str, str], scope_name: str,
               stored: list[Any], attributes: Mapping[str, str]) -> str:
    """Deterministic id of the ``index``-th log record of a message.

    Records have no id of their own. The hash covers the record's position in its message
    (two identical records in one message stay two rows) and everything stored of it, so
    the same message always gives the same ids.
    """
    raw = json.dumps([index, sorted(resource.items()), scope_name, stored,
                      sorted(attributes.items())], ensure_ascii=False)
    return hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()


def decode_logs(raw: bytes) -> DecodedRows:
    """Rows for ``log_records`` from one ExportLogsServiceRequest.

    Raises:
        PoisonRecord: the message is empty, not an OTLP logs request, holds no log
            record, or holds one with ids of the wrong length, no time at all, or a
            time ClickHouse cannot store.
    """
    if not raw:
        raise PoisonRecord("empty logs message")
    request = ExportLogsServiceRequest()
    try:
        request.ParseFromString(raw)
    except (DecodeError, ValueError, TypeError) as exc:
        raise PoisonRecord(f"not an OTLP logs request (protobuf decode failed: {exc})") \
            from None
    rows = DecodedRows()
    genai_events: list[GenAILogEvent] = []
    index = 0
    for resource_logs in request.resource_logs:
        resource = attributes_map(resource_logs.resource.attributes)
        service = resource.get("service.name", "")
        for scope_logs in resource_logs.scope_logs:
            scope_name = scope_logs.scope.name
            for record in scope_logs.log_records:
                trace_id = _hex_id(record.trace_id, 16)
                span_id = _hex_id(record.span_id, 8)
                if trace_id is None or span_id is None:
                    raise PoisonRecord(
                        f"log record with invalid ids (trace_id {len(record.trace_id)} bytes, "
                        f"span_id {len(record.span_id)} bytes; expected 16 and 8, or none): "
                        "not an OTLP logs request")
                observed = record.observed_time_unix_nano
                timestamp = record.time_unix_nano or observed
                if not timestamp:
                    raise PoisonRecord("log record without a time (time_unix_nano and "
                                       "observed_time_unix_nano are both 0)")
                if max(timestamp, observed) > _MAX_TIME_NS:
                    raise PoisonRecord(
                        f"time out of range: log record time {max(timestamp, observed)} ns "
                        "is after 2262-04-11, the last time ClickHouse stores")
                attrs = attributes_map(record.attributes)
                event_name = record.event_name or attrs.get(names.ATTR_EVENT_NAME, "")
                request_id = attrs.get(names.ATTR_REQUEST_ID, "")
                body = _body_text(record.body)
                stored = [timestamp, observed, trace_id, span_id, record.severity_number,
                          record.severity_text, event_name, body]
                record_id = _record_id(index, resource, scope_name, stored, attrs)
                index += 1
                rows.log_records.append([record_id, *stored, request_id, service, scope_name,
                                         attrs, resource])
                if event_name == names.EVENT_GENAI_OPERATION_DETAILS:
                    genai_events.append(GenAILogEvent(
                        record_id=record_id, trace_id=trace_id, span_id=span_id,
                        request_id=request_id, timestamp_ns=timestamp, service=service,
                        event_name=event_name, attributes=attrs, body=body))
    if not rows.log_records:
        raise PoisonRecord("OTLP logs request with no log records")
    detect_in_genai_log_events(genai_events, rows)
    return rows


def _hex_id(raw: bytes, size: int) -> str | None:
    """The id as hex; "" for none (absent or all zero, OTLP's "invalid" id); None if the
    length is wrong."""
    if not raw or raw.count(0) == len(raw):
        return "" if len(raw) in (0, size) else None
    return raw.hex() if len(raw) == size else None


def _body_text(body: AnyValue) -> str:
    """The body as stored: a string as it is, a map or array as JSON, none as ""."""
    if body.WhichOneof("value") is None:
        return ""
    return any_value_text(body)
