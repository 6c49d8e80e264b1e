"""Distinct records for each consumed topic, numbered: record ``n`` yields rows of its own.

Every message here decodes to rows no other number shares (span and trace id, metric
point attributes, payload id), so a test can count what was stored per table against
what was sent, and tell a lost record from a replayed one.
"""

from __future__ import annotations

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from guardtrace.schemas import names
from guardtrace.schemas.payload_record import PayloadRecord, encode


def span_message(n: int, now_ns: int) -> bytes:
    """A trace request: one span (ids from ``n``) with one guard event."""
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(
        trace_id=(n + 1).to_bytes(16, "big"), span_id=(n + 1).to_bytes(8, "big"),
        name="plan", start_time_unix_nano=now_ns, end_time_unix_nano=now_ns + 1000)
    span.attributes.add(key=names.ATTR_REQUEST_ID).value.string_value = f"req-{n}"
    span.events.add(name=names.EVENT_HALLUCINATION_DETECTED, time_unix_nano=now_ns)
    return request.SerializeToString()


def metrics_message(n: int, now_ns: int) -> bytes:
    """A metrics request: one counter point whose attributes carry ``n``."""
    request = ExportMetricsServiceRequest()
    metric = request.resource_metrics.add().scope_metrics.add().metrics.add(
        name=names.METRIC_HALLUCINATIONS)
    point = metric.sum.data_points.add(as_int=1, start_time_unix_nano=now_ns - 1000,
                                       time_unix_nano=now_ns)
    point.attributes.add(key="record").value.string_value = str(n)
    return request.SerializeToString()


def payload_message(n: int, now_ns: int) -> bytes:
    """A one-chunk payload record whose payload id is ``n``."""
    return encode(PayloadRecord(payload_id=f"{n:032x}", request_id=f"req-{n}",
                                kind=names.PAYLOAD_KIND_FABRICATION, body=f"body {n}",
                                timestamp_ns=now_ns))
