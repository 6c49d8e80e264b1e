"""Kafka messages -> ClickHouse rows, with a named reason for everything rejected.

Decoders are pure functions of the message bytes, so a replayed message yields the same
rows with the same ids (span id, deterministic event and point ids, payload id + chunk):
that is what makes at-least-once delivery safe. A message that does not decode raises
:class:`PoisonRecord` with a reason that goes into the dead-letter topic's headers.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ..schemas import names
from ..schemas.payload_record import PayloadDecodeError, decode as decode_payload

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

    def clear(self) -> None:
        """Empty every table's list in place (whoever still holds a list sees it empty)."""
        for rows in (self.spans, self.span_events, self.metric_points, self.payloads,
                     self.dead_letters):
            rows.clear()


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


# DateTime64(9) holds nanoseconds in an Int64, so times end at 2262-04-11. A later one
# (OTLP times are uint64) decodes, but ClickHouse refuses the row, and the consumer retries
# a batch it cannot write forever: such a message is poison, named here.
_MAX_TIME_NS = 2**63 - 1
_TIME_COLUMNS = (
    ("spans", [Columns.SPANS.index("start_time"), Columns.SPANS.index("end_time")]),
    ("span_events", [Columns.SPAN_EVENTS.index("timestamp")]),
    ("metric_points", [Columns.METRIC_POINTS.index("start_time"),
                       Columns.METRIC_POINTS.index("timestamp")]),
)


def _times_in_range(rows: DecodedRows) -> DecodedRows:
    """``rows``, or PoisonRecord if a time is past what ClickHouse can store."""
    for table, indexes in _TIME_COLUMNS:
        for row in getattr(rows, table):
            for index in indexes:
                if row[index] > _MAX_TIME_NS:
                    raise PoisonRecord(f"time out of range: {table} time {row[index]} ns is "
                                       "after 2262-04-11, the last time ClickHouse stores")
    return rows


def decode_spans(raw: bytes) -> DecodedRows:
    """Rows for ``spans`` and ``span_events`` from one ExportTraceServiceRequest."""
    request = _parse(ExportTraceServiceRequest, raw, "trace")
    try:
        # The parse above validated the message; rows come from its bytes (see below).
        rows = _spans_from_wire(bytes(raw))
    except _Irregular:
        rows = _spans_from_objects(request)
    return _times_in_range(rows)


def _spans_from_objects(request: ExportTraceServiceRequest) -> DecodedRows:
    """The reference decoder over protobuf objects; :func:`_spans_from_wire` equals it."""
    rows = DecodedRows()
    for resource_spans in request.resource_spans:
        resource = attributes_map(resource_spans.resource.attributes)
        service = resource.get("service.name", "")
        for scope_spans in resource_spans.scope_spans:
            scope_name = scope_spans.scope.name
            for span in scope_spans.spans:
                if len(span.trace_id) != 16 or len(span.span_id) != 8:
                    raise _invalid_ids(len(span.trace_id), len(span.span_id))
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


def _invalid_ids(trace_len: int, span_len: int) -> PoisonRecord:
    return PoisonRecord(f"span with invalid ids (trace_id {trace_len} bytes, span_id "
                        f"{span_len} bytes; expected 16 and 8): not an OTLP trace request")


# --- the fast path: spans straight from the wire bytes --------------------------------
#
# Reading attributes through protobuf objects costs about a microsecond per attribute
# (a wrapper object per KeyValue and AnyValue), and it was most of the consumer's CPU.
# Yet nearly every attribute repeats byte for byte (module, tier, agent, the request id
# on the span and on each of its events), so the wire walker below finds each KeyValue's
# bytes and converts each distinct one once (with the same ``any_value_text``), through
# a bounded cache; resources, scopes and statuses likewise. Only messages that upb has
# already parsed (validated) reach it, and anything it does not expect (a singular
# message field given twice, which protobuf merges) raises ``_Irregular`` and the
# reference decoder takes over, so the rows are always exactly those of
# :func:`_spans_from_objects`.

class _Irregular(Exception):
    """The wire walker met something it leaves to the reference decoder."""


_CACHE_ENTRIES = 8192
_CACHE_MAX_KEY_BYTES = 512
_kv_cache: dict[bytes, tuple[str, str]] = {}
_resource_cache: dict[bytes, tuple[dict[str, str], str]] = {}
_scope_cache: dict[bytes, str] = {}
_status_cache: dict[bytes, tuple[str, str]] = {}
_fixed64 = struct.Struct("<Q").unpack_from

# Wire tags (field number << 3 | wire type) of the fields the walker reads.
_TAG_LEN_1, _TAG_LEN_2 = 0x0A, 0x12       # field 1 / field 2, length-delimited
_SPAN_TRACE_ID, _SPAN_SPAN_ID, _SPAN_PARENT, _SPAN_NAME = 0x0A, 0x12, 0x22, 0x2A
_SPAN_KIND, _SPAN_START, _SPAN_END = 0x30, 0x39, 0x41
_SPAN_ATTRIBUTE, _SPAN_EVENT, _SPAN_STATUS = 0x4A, 0x5A, 0x7A
_EVENT_TIME, _EVENT_NAME, _EVENT_ATTRIBUTE = 0x09, 0x12, 0x1A


def _cached(cache: dict[bytes, Any], raw: bytes, convert: Callable[[bytes], Any]) -> Any:
    hit = cache.get(raw)
    if hit is None:
        hit = convert(raw)
        if len(raw) <= _CACHE_MAX_KEY_BYTES:
            if len(cache) >= _CACHE_ENTRIES:
                cache.clear()  # unique values (request ids) would otherwise pile up
            cache[raw] = hit
    return hit


def _key_value(raw: bytes) -> tuple[str, str]:
    kv = KeyValue.FromString(raw)
    return kv.key, any_value_text(kv.value)


def _resource(raw: bytes) -> tuple[dict[str, str], str]:
    attrs = attributes_map(Resource.FromString(raw).attributes)
    return attrs, attrs.get("service.name", "")


def _scope_name(raw: bytes) -> str:
    return str(InstrumentationScope.FromString(raw).name)


def _status(raw: bytes) -> tuple[str, str]:
    status = Status.FromString(raw)
    return _STATUS.get(status.code, str(status.code)), status.message


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7


def _field_end(data: bytes, i: int) -> tuple[int, int]:
    """(start, end) of the length-delimited value whose length varint is at ``i``."""
    length = data[i]
    if length < 0x80:
        return i + 1, i + 1 + length
    length, i = _varint(data, i)
    return i, i + length


def _skip_field(data: bytes, i: int) -> int:
    """The index after the field whose tag starts at ``i`` (a field the walker ignores)."""
    tag, i = _varint(data, i)
    wire = tag & 7
    if wire == 0:
        return _varint(data, i)[1]
    if wire == 1:
        return i + 8
    if wire == 2:
        return _field_end(data, i)[1]
    if wire == 5:
        return i + 4
    raise _Irregular(f"wire type {wire}")


def _children(data: bytes, start: int, end: int, first: str, second: str
              ) -> tuple[tuple[int, int] | None, list[tuple[int, int]]]:
    """Fields 1 (singular message ``first``) and 2 (repeated ``second``) of a message."""
    one: tuple[int, int] | None = None
    many: list[tuple[int, int]] = []
    i = start
    while i < end:
        tag = data[i]
        if tag == _TAG_LEN_1:
            if one is not None:
                raise _Irregular(f"{first} given twice")
            one = _field_end(data, i + 1)
            i = one[1]
        elif tag == _TAG_LEN_2:
            many.append(_field_end(data, i + 1))
            i = many[-1][1]
        else:
            i = _skip_field(data, i)
    return one, many


def _spans_from_wire(data: bytes) -> DecodedRows:
    rows = DecodedRows()
    spans_out, events_out = rows.spans, rows.span_events
    kv_cache = _kv_cache
    kv_get = kv_cache.get
    request_key, module_key = names.ATTR_REQUEST_ID, names.ATTR_MODULE
    agent_key, hallucinated_key = names.ATTR_AGENT, names.ATTR_HALLUCINATED_AGENT
    tier_key = names.ATTR_TIER
    # ExportTraceServiceRequest: repeated ResourceSpans resource_spans = 1.
    all_resource_spans: list[tuple[int, int]] = []
    i = 0
    while i < len(data):
        if data[i] == _TAG_LEN_1:
            all_resource_spans.append(_field_end(data, i + 1))
            i = all_resource_spans[-1][1]
        else:
            i = _skip_field(data, i)
    for rs_start, rs_end in all_resource_spans:
        resource_at, scope_spans = _children(data, rs_start, rs_end, "resource", "scope_spans")
        resource, service = (_cached(_resource_cache, data[resource_at[0]:resource_at[1]],
                                     _resource) if resource_at else ({}, ""))
        for ss_start, ss_end in scope_spans:
            scope_at, spans = _children(data, ss_start, ss_end, "scope", "spans")
            scope_name = (_cached(_scope_cache, data[scope_at[0]:scope_at[1]], _scope_name)
                          if scope_at else "")
            for span_start, span_end in spans:
                trace = span = parent = b""
                name = ""
                kind = start = end = 0
                status = ("unset", "")
                seen_status = False
                attrs: dict[str, str] = {}
                events: list[tuple[int, int]] = []
                i = span_start
                while i < span_end:
                    tag = data[i]
                    if tag == _SPAN_ATTRIBUTE:
                        a, i = _field_end(data, i + 1)
                        key, text = _cached(kv_cache, data[a:i], _key_value)
                        attrs[key] = text
                    elif tag == _SPAN_EVENT:
                        events.append(_field_end(data, i + 1))
                        i = events[-1][1]
                    elif tag == _SPAN_TRACE_ID:
                        a, i = _field_end(data, i + 1)
                        trace = data[a:i]
                    elif tag == _SPAN_SPAN_ID:
                        a, i = _field_end(data, i + 1)
                        span = data[a:i]
                    elif tag == _SPAN_PARENT:
                        a, i = _field_end(data, i + 1)
                        parent = data[a:i]
                    elif tag == _SPAN_NAME:
                        a, i = _field_end(data, i + 1)
                        name = data[a:i].decode("utf-8")
                    elif tag == _SPAN_KIND:
                        kind, i = _varint(data, i + 1)
                        if kind >= 1 << 31:
                            raise _Irregular("negative or oversized span kind")
                    elif tag == _SPAN_START:
                        start = _fixed64(data, i + 1)[0]
                        i += 9
                    elif tag == _SPAN_END:
                        end = _fixed64(data, i + 1)[0]
                        i += 9
                    elif tag == _SPAN_STATUS:
                        if seen_status:
                            raise _Irregular("status given twice")
                        seen_status = True
                        a, i = _field_end(data, i + 1)
                        status = _cached(_status_cache, data[a:i], _status)
                    else:
                        i = _skip_field(data, i)
                if len(trace) != 16 or len(span) != 8:
                    raise _invalid_ids(len(trace), len(span))
                trace_id, span_id = trace.hex(), span.hex()
                span_request_id = attrs.get(request_key, "")
                span_module = attrs.get(module_key, "")
                spans_out.append([
                    trace_id, span_id, parent.hex(), name, _SPAN_KINDS.get(kind, str(kind)),
                    service, scope_name, start, end, max(0, end - start), status[0],
                    status[1], span_request_id, attrs, resource])
                for index, (event_start, event_end) in enumerate(events):
                    event_attrs: dict[str, str] = {}
                    event_name = ""
                    event_time = 0
                    i = event_start
                    while i < event_end:
                        tag = data[i]
                        if tag == _EVENT_ATTRIBUTE:  # the hot loop: inlined _field_end
                            length = data[i + 1]
                            if length < 0x80:
                                a = i + 2
                            else:
                                length, a = _varint(data, i + 1)
                            i = a + length
                            raw_kv = data[a:i]
                            hit = kv_get(raw_kv)
                            if hit is None:
                                hit = _cached(kv_cache, raw_kv, _key_value)
                            event_attrs[hit[0]] = hit[1]
                        elif tag == _EVENT_TIME:
                            event_time = _fixed64(data, i + 1)[0]
                            i += 9
                        elif tag == _EVENT_NAME:
                            a, i = _field_end(data, i + 1)
                            event_name = data[a:i].decode("utf-8")
                        else:
                            i = _skip_field(data, i)
                    get = event_attrs.get
                    events_out.append([
                        event_id(trace_id, span_id, index, event_time, event_name),
                        event_time, event_name, trace_id, span_id,
                        get(request_key, span_request_id), get(module_key, span_module),
                        get(agent_key, get(hallucinated_key, "")), get(tier_key, ""),
                        service, event_attrs])
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
