"""Kafka messages -> ClickHouse rows, with a named reason for everything rejected.

Decoders are pure functions of the message bytes, so a replayed message yields the same
rows with the same ids (span id, deterministic event and point ids, payload id + chunk):
that is what makes at-least-once delivery safe. A message that does not decode raises
:class:`PoisonRecord` with a reason that goes into the dead-letter topic's headers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from guardtrace.schemas import names
from guardtrace.schemas.payload_record import PayloadDecodeError, decode as decode_payload

__all__ = ["Columns", "DecodedRows", "PoisonRecord", "decode_metrics", "decode_payload_message",
           "decode_spans", "event_id"]

PREVIEW_CHARS = 256


class PoisonRecord(ValueError):
    """A message that can never be decoded; ``str(exc)`` is the reason."""


class Columns:
    """Column names of each table, in the order decoders build rows."""

    SPANS = ("trace_id", "span_id", "parent_span_id", "name", "kind", "service", "scope_name",
             "start_time", "end_time", "duration_ns", "status_code", "status_message",
             "request_id", "attributes", "resource_attributes")
    SPAN_EVENTS = ("event_id", "timestamp", "name", "trace_id", "span_id", "request_id",
                   "module", "agent", "tier", "service", "attributes")
    METRIC_POINTS = ("point_id", "metric_name", "metric_type", "unit", "service", "module",
                     "agent", "start_time", "timestamp", "value", "count", "sum",
                     "bucket_counts", "explicit_bounds", "is_monotonic", "temporality",
                     "attributes", "resource_attributes")
    PAYLOADS = ("payload_id", "chunk_index", "chunk_count", "request_id", "kind", "timestamp",
                "trace_id", "span_id", "body", "preview", "body_bytes", "body_sha256",
                "truncated", "redactions", "attributes")
    DEAD_LETTERS = ("dead_letter_id", "timestamp", "source_topic", "source_partition",
                    "source_offset", "reason_kind", "reason", "value_bytes", "value_sample")


@dataclass
class DecodedRows:
    """Rows for each table decoded from one or more messages."""

    spans: list[list[Any]] = field(default_factory=list)
    span_events: list[list[Any]] = field(default_factory=list)
    metric_points: list[list[Any]] = field(default_factory=list)
    payloads: list[list[Any]] = field(default_factory=list)
    dead_letters: list[list[Any]] = field(default_factory=list)

    def extend(self, other: DecodedRows) -> None:
        self.spans.extend(other.spans)
        self.span_events.extend(other.span_events)
        self.metric_points.extend(other.metric_points)
        self.payloads.extend(other.payloads)
        self.dead_letters.extend(other.dead_letters)

    def __len__(self) -> int:
        return (len(self.spans) + len(self.span_events) + len(self.metric_points)
                + len(self.payloads) + len(self.dead_letters))


_SPAN_KINDS = {v: k.removeprefix("SPAN_KIND_").lower() for k, v in Span.SpanKind.items()}
_STATUS = {v: k.removeprefix("STATUS_CODE_").lower() for k, v in Status.StatusCode.items()}


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


def _parse(message_type: type, raw: bytes, what: str) -> Any:
    if not raw:
        raise PoisonRecord(f"empty {what} message")
    request = message_type()
    try:
        request.ParseFromString(raw)
    except (DecodeError, ValueError, TypeError) as exc:
        raise PoisonRecord(f"not an OTLP {what} request (protobuf decode failed: {exc})") \
            from None
    return request


def decode_spans(raw: bytes) -> DecodedRows:
    """Rows for ``spans`` and ``span_events`` from one ExportTraceServiceRequest."""
    request = _parse(ExportTraceServiceRequest, raw, "trace")
    rows = DecodedRows()
    for resource_spans in request.resource_spans:
        resource = attributes_map(resource_spans.resource.attributes)
        service = resource.get("service.name", "")
        for scope_spans in resource_spans.scope_spans:
            scope_name = scope_spans.scope.name
            for span in scope_spans.spans:
                if len(span.trace_id) != 16 or len(span.span_id) != 8:
                    raise PoisonRecord(
                        f"span with invalid ids (trace_id {len(span.trace_id)} bytes, "
                        f"span_id {len(span.span_id)} bytes; expected 16 and 8): "
                        "not an OTLP trace request")
                trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
                attrs = attributes_map(span.attributes)
                span_request_id = attrs.get(names.ATTR_REQUEST_ID, "")
                rows.spans.append([
                    trace_id, span_id, span.parent_span_id.hex(), span.name,
                    _SPAN_KINDS.get(span.kind, str(span.kind)), service, scope_name,
                    span.start_time_unix_nano, span.end_time_unix_nano,
                    max(0, span.end_time_unix_nano - span.start_time_unix_nano),
                    _STATUS.get(span.status.code, str(span.status.code)), span.status.message,
                    span_request_id, attrs, resource])
                for index, event in enumerate(span.events):
                    event_attrs = attributes_map(event.attributes)
                    rows.span_events.append([
                        event_id(trace_id, span_id, index, event.time_unix_nano, event.name),
                        event.time_unix_nano, event.name, trace_id, span_id,
                        event_attrs.get(names.ATTR_REQUEST_ID, span_request_id),
                        event_attrs.get(names.ATTR_MODULE, attrs.get(names.ATTR_MODULE, "")),
                        event_attrs.get(names.ATTR_AGENT,
                                        event_attrs.get(names.ATTR_HALLUCINATED_AGENT, "")),
                        event_attrs.get(names.ATTR_TIER, ""), service, event_attrs])
    if not rows.spans:
        raise PoisonRecord("OTLP trace request with no spans")
    return rows


def _point_id(metric: str, resource: dict[str, str], attrs: dict[str, str],
              start: int, time: int) -> str:
    raw = json.dumps([metric, sorted(resource.items()), sorted(attrs.items()), start, time])
    return hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()


def decode_metrics(raw: bytes) -> DecodedRows:
    """Rows for ``metric_points`` from one ExportMetricsServiceRequest."""
    request = _parse(ExportMetricsServiceRequest, raw, "metrics")
    rows = DecodedRows()
    seen_metric = False
    for resource_metrics in request.resource_metrics:
        resource = attributes_map(resource_metrics.resource.attributes)
        service = resource.get("service.name", "")
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if not metric.name or kind is None:
                    raise PoisonRecord("metric without a name or data: not an OTLP metrics "
                                       "request")
                seen_metric = True
                data = getattr(metric, kind)
                monotonic = int(getattr(data, "is_monotonic", False))
                temporality = getattr(data, "aggregation_temporality", 0)
                temporality_name = {1: "delta", 2: "cumulative"}.get(temporality, "")
                for point in data.data_points:
                    attrs = attributes_map(point.attributes)
                    value = count = 0
                    total = 0.0
                    buckets: list[int] = []
                    bounds: list[float] = []
                    if kind in ("sum", "gauge"):
                        which = point.WhichOneof("value")
                        value = point.as_int if which == "as_int" else point.as_double
                    else:  # histogram, exponential_histogram, summary
                        count, total = point.count, point.sum
                        if kind == "histogram":
                            buckets = list(point.bucket_counts)
                            bounds = list(point.explicit_bounds)
                    rows.metric_points.append([
                        _point_id(metric.name, resource, attrs, point.start_time_unix_nano,
                                  point.time_unix_nano),
                        metric.name, kind, metric.unit, service,
                        attrs.get(names.ATTR_MODULE, ""), attrs.get(names.ATTR_AGENT, ""),
                        point.start_time_unix_nano, point.time_unix_nano, float(value), count,
                        float(total), buckets, bounds, monotonic, temporality_name, attrs,
                        resource])
    if not seen_metric:
        raise PoisonRecord("OTLP metrics request with no metrics")
    return rows


def decode_payload_message(raw: bytes) -> DecodedRows:
    """One ``payloads`` row (a chunk) from a payloads-topic message."""
    try:
        record = decode_payload(raw)
    except PayloadDecodeError as exc:
        raise PoisonRecord(str(exc)) from None
    preview = record.body[:PREVIEW_CHARS] if record.chunk_index == 0 else ""
    rows = DecodedRows()
    rows.payloads.append([
        record.payload_id, record.chunk_index, record.chunk_count, record.request_id,
        record.kind, record.timestamp_ns, record.trace_id, record.span_id, record.body, preview,
        record.body_bytes, record.body_sha256, int(record.truncated), record.redactions,
        record.attributes])
    return rows
