"""Kafka messages -> ClickHouse rows, with a named reason for everything rejected.

Decoders are pure functions of the message bytes, so a replayed message yields the same
rows with the same ids (span id, deterministic event and point ids, payload id + chunk):
that is what makes at-least-once delivery safe. A message that does not decode raises
:class:`PoisonRecord` with a reason that goes into the dead-letter topic's headers.

Spans are read from the wire bytes by :mod:`.span_wire` (the fast path); the protobuf
decoder here is the reference it must equal, and takes over for what the walker leaves.
Logs are decoded by :mod:`.log_decode` (re-exported here with the others).
"""

from __future__ import annotations

import hashlib
import json

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..schemas import names
from ..schemas.payload_record import PayloadDecodeError
from ..schemas.payload_record import decode as decode_payload
from ..store import tables
from ..store.rows import DecodedRows
from ..store.tables import Columns
from .log_decode import decode_logs
from .otlp_values import (
    MAX_TIME_NS,
    SPAN_KINDS,
    STATUS,
    PoisonRecord,
    attributes_map,
    event_id,
    invalid_ids,
    parse_request,
)
from .span_wire import Irregular, spans_from_wire

__all__ = ["DecodedRows", "PoisonRecord", "decode_logs", "decode_metrics",
           "decode_payload_message", "decode_spans", "event_id"]

PREVIEW_CHARS = 256

# The time columns each table's rows carry, checked against MAX_TIME_NS.
_TIME_COLUMNS = (
    (tables.SPANS, [Columns.SPANS.index("start_time"), Columns.SPANS.index("end_time")]),
    (tables.SPAN_EVENTS, [Columns.SPAN_EVENTS.index("timestamp")]),
    (tables.METRIC_POINTS, [Columns.METRIC_POINTS.index("start_time"),
                            Columns.METRIC_POINTS.index("timestamp")]),
)


def _times_in_range(rows: DecodedRows) -> DecodedRows:
    """``rows``, or PoisonRecord if a time is past what ClickHouse can store."""
    by_table = rows.by_table()
    for table, indexes in _TIME_COLUMNS:
        for row in by_table[table]:
            for index in indexes:
                if row[index] > MAX_TIME_NS:
                    raise PoisonRecord(f"time out of range: {table} time {row[index]} ns is "
                                       "after 2262-04-11, the last time ClickHouse stores")
    return rows


def decode_spans(raw: bytes) -> DecodedRows:
    """Rows for ``spans`` and ``span_events`` from one ExportTraceServiceRequest."""
    request = parse_request(ExportTraceServiceRequest, raw, "trace")
    try:
        # The parse above validated the message; rows come from its bytes (see below).
        rows = spans_from_wire(bytes(raw))
    except Irregular:
        rows = _spans_from_objects(request)
    return _times_in_range(rows)


def _spans_from_objects(request: ExportTraceServiceRequest) -> DecodedRows:
    """The reference decoder over protobuf objects; :func:`.span_wire.spans_from_wire` equals it."""
    rows = DecodedRows()
    for resource_spans in request.resource_spans:
        resource = attributes_map(resource_spans.resource.attributes)
        service = resource.get("service.name", "")
        for scope_spans in resource_spans.scope_spans:
            scope_name = scope_spans.scope.name
            for span in scope_spans.spans:
                if len(span.trace_id) != 16 or len(span.span_id) != 8:
                    raise invalid_ids(len(span.trace_id), len(span.span_id))
                trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
                attrs = attributes_map(span.attributes)
                span_request_id = attrs.get(names.ATTR_REQUEST_ID, "")
                rows.spans.append([
                    trace_id, span_id, span.parent_span_id.hex(), span.name,
                    SPAN_KINDS.get(span.kind, str(span.kind)), service, scope_name,
                    span.start_time_unix_nano, span.end_time_unix_nano,
                    max(0, span.end_time_unix_nano - span.start_time_unix_nano),
                    STATUS.get(span.status.code, str(span.status.code)), span.status.message,
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
    request = parse_request(ExportMetricsServiceRequest, raw, "metrics")
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
    return _times_in_range(rows)


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
