"""consumers/decode.py: Kafka message bytes -> ClickHouse rows, or a named PoisonRecord.

Inputs are what the collectors really produce: SDK spans and metric readings encoded by
opentelemetry-exporter-otlp-proto-common, and payload records from schemas/payload_record.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from guardtrace.consumers.decode import (
    PREVIEW_CHARS,
    PoisonRecord,
    decode_metrics,
    decode_payload_message,
    decode_spans,
    event_id,
)
from guardtrace.consumers.otlp_values import any_value_text
from guardtrace.schemas import names
from guardtrace.schemas.payload_record import PayloadRecord, encode
from guardtrace.store.tables import Columns
from tests.support.payload_wire import encode_v1

SERVICE = "travel-agent"


def _row(columns: tuple[str, ...], row: list[Any]) -> dict[str, Any]:
    assert len(columns) == len(row)
    return dict(zip(columns, row, strict=False))


@pytest.fixture(scope="module")
def traced() -> dict[str, Any]:
    """Two real spans (parent and child) with guard events, encoded as one request."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("guardtrace", "0.1.0")
    with tracer.start_as_current_span("agent.turn", kind=SpanKind.SERVER, attributes={
        names.ATTR_REQUEST_ID: "req-span", names.ATTR_MODULE: "planning",
        "flag": True, "retries": 3, "score": 0.75, "tools": ["a", "b"],
        "ids": [1, 2], "raw": b"\x00\xff",
    }) as parent:
        parent.add_event(names.EVENT_HALLUCINATION_DETECTED, {
            names.ATTR_REQUEST_ID: "req-event", names.ATTR_MODULE: "planning",
            names.ATTR_HALLUCINATED_AGENT: "time-tool-v1", names.ATTR_HALL_RETRY: 1,
        })
        parent.add_event(names.EVENT_HALLUCINATION_DETECTED, {
            names.ATTR_HALLUCINATED_AGENT: "weather-v9",
        })
        with tracer.start_as_current_span("reply.check") as child:
            child.add_event(names.EVENT_FABRICATION_DETECTED, {
                names.ATTR_REQUEST_ID: "req-child", names.ATTR_MODULE: "replies",
                names.ATTR_AGENT: "booking", names.ATTR_HALLUCINATED_AGENT: "ignored",
                names.ATTR_TIER: names.TIER_ACTION,
            })
            child.set_status(Status(StatusCode.ERROR, "claimed a booking"))
    spans = exporter.get_finished_spans()
    provider.shutdown()
    raw = encode_spans(spans).SerializeToString()
    return {"raw": raw, "child": spans[0], "parent": spans[1]}


# -- spans -------------------------------------------------------------------------------
def test_span_rows(traced: dict[str, Any]) -> None:
    rows = decode_spans(traced["raw"])
    assert len(rows.spans) == 2
    by_name = {row[3]: _row(Columns.SPANS, row) for row in rows.spans}
    parent, child = traced["parent"], traced["child"]
    p, c = by_name["agent.turn"], by_name["reply.check"]
    assert p["trace_id"] == f"{parent.context.trace_id:032x}"
    assert p["span_id"] == f"{parent.context.span_id:016x}"
    assert p["parent_span_id"] == ""
    assert c["parent_span_id"] == p["span_id"]
    assert c["span_id"] == f"{child.context.span_id:016x}"
    assert c["trace_id"] == p["trace_id"]
    assert p["kind"] == "server" and c["kind"] == "internal"
    assert p["service"] == SERVICE and p["scope_name"] == "guardtrace"
    assert p["start_time"] == parent.start_time and p["end_time"] == parent.end_time
    assert p["duration_ns"] == parent.end_time - parent.start_time > 0
    assert p["status_code"] == "unset"
    assert (c["status_code"], c["status_message"]) == ("error", "claimed a booking")
    assert p["request_id"] == "req-span" and c["request_id"] == ""
    assert p["resource_attributes"]["service.name"] == SERVICE


def test_attribute_values_become_text(traced: dict[str, Any]) -> None:
    rows = decode_spans(traced["raw"])
    attrs = next(_row(Columns.SPANS, r) for r in rows.spans if r[3] == "agent.turn")["attributes"]
    assert attrs["flag"] == "true"
    assert attrs["retries"] == "3"
    assert attrs["score"] == "0.75"
    assert json.loads(attrs["tools"]) == ["a", "b"]
    assert json.loads(attrs["ids"]) == [1, 2]
    assert attrs["raw"] == "00ff"
    assert all(isinstance(v, str) for v in attrs.values())


@pytest.mark.parametrize(("value", "text"), [
    (AnyValue(string_value="ünï"), "ünï"),
    (AnyValue(bool_value=False), "false"),
    (AnyValue(int_value=-7), "-7"),
    (AnyValue(double_value=1e-9), "1e-09"),
    (AnyValue(bytes_value=b"\x01\xab"), "01ab"),
    (AnyValue(), "null"),
])
def test_any_value_text_scalars(value: AnyValue, text: str) -> None:
    assert any_value_text(value) == text


def test_any_value_text_nested_array_and_kvlist() -> None:
    value = AnyValue(kvlist_value=KeyValueList(values=[
        KeyValue(key="xs", value=AnyValue(array_value=ArrayValue(values=[
            AnyValue(int_value=1), AnyValue(bool_value=True), AnyValue(string_value="é"),
            AnyValue(bytes_value=b"\xff"), AnyValue(double_value=2.5)]))),
    ]))
    text = any_value_text(value)
    assert json.loads(text) == {"xs": [1, True, "é", "ff", 2.5]}
    assert "é" in text  # not \\u escaped


def test_span_event_rows(traced: dict[str, Any]) -> None:
    rows = decode_spans(traced["raw"])
    assert len(rows.span_events) == 3
    events = [_row(Columns.SPAN_EVENTS, r) for r in rows.span_events]
    parent_span_id = f"{traced['parent'].context.span_id:016x}"
    child_span_id = f"{traced['child'].context.span_id:016x}"
    first, second = [e for e in events if e["span_id"] == parent_span_id]
    (third,) = [e for e in events if e["span_id"] == child_span_id]

    assert first["name"] == names.EVENT_HALLUCINATION_DETECTED
    assert first["request_id"] == "req-event"
    assert first["module"] == "planning"
    assert first["agent"] == "time-tool-v1"  # hallucinated_agent fallback
    assert first["tier"] == ""
    assert first["service"] == SERVICE
    assert first["attributes"][names.ATTR_HALL_RETRY] == "1"
    assert first["timestamp"] == traced["parent"].events[0].timestamp

    # No request_id or module on the event: both come from the span.
    assert second["request_id"] == "req-span"
    assert second["module"] == "planning"
    assert second["agent"] == "weather-v9"

    # An explicit agent wins over hallucinated_agent; tier is a column.
    assert third["request_id"] == "req-child"
    assert third["module"] == "replies"
    assert third["agent"] == "booking"
    assert third["tier"] == names.TIER_ACTION
    assert third["trace_id"] == first["trace_id"]


def test_event_ids_are_deterministic_and_distinct(traced: dict[str, Any]) -> None:
    ids_once = [r[0] for r in decode_spans(traced["raw"]).span_events]
    ids_twice = [r[0] for r in decode_spans(traced["raw"]).span_events]
    assert ids_once == ids_twice
    assert len(set(ids_once)) == len(ids_once)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids_once)


def test_event_id_depends_on_every_input() -> None:
    base = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", 0, 1000, "e")
    ids = {event_id(*base)}
    for position, other in enumerate(("1" * 32, "2" * 16, 1, 1001, "f")):
        changed = list(base)
        changed[position] = other
        ids.add(event_id(*changed))  # type: ignore[arg-type]
    assert len(ids) == 6
    assert event_id(*base) == event_id(*base)


# -- metrics -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def metered() -> bytes:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader],
                             resource=Resource.create({"service.name": SERVICE}))
    meter = provider.get_meter("guardtrace", "0.1.0")
    counter = meter.create_counter(names.METRIC_HALLUCINATIONS)
    counter.add(2, {names.ATTR_MODULE: "planning", names.ATTR_AGENT: "time-tool-v1"})
    counter.add(5, {names.ATTR_MODULE: "planning", names.ATTR_AGENT: "weather-v9"})
    histogram = meter.create_histogram("guardtrace.latency", unit="ms")
    histogram.record(3.0, {names.ATTR_MODULE: "replies"})
    histogram.record(30.0, {names.ATTR_MODULE: "replies"})
    data = reader.get_metrics_data()
    provider.shutdown()
    return encode_metrics(data).SerializeToString()


def test_metric_point_rows(metered: bytes) -> None:
    rows = decode_metrics(metered)
    assert rows.spans == [] and rows.span_events == []
    points = [_row(Columns.METRIC_POINTS, r) for r in rows.metric_points]
    sums = {p["agent"]: p for p in points if p["metric_name"] == names.METRIC_HALLUCINATIONS}
    assert set(sums) == {"time-tool-v1", "weather-v9"}
    s = sums["weather-v9"]
    assert (s["metric_type"], s["value"], s["module"]) == ("sum", 5.0, "planning")
    assert (s["is_monotonic"], s["temporality"]) == (1, "cumulative")
    assert s["service"] == SERVICE
    assert s["attributes"] == {"module": "planning", "agent": "weather-v9"}
    assert s["timestamp"] >= s["start_time"] > 0
    (h,) = [p for p in points if p["metric_name"] == "guardtrace.latency"]
    assert (h["metric_type"], h["unit"], h["module"], h["agent"]) == (
        "histogram", "ms", "replies", "")
    assert (h["count"], h["sum"]) == (2, 33.0)
    assert len(h["bucket_counts"]) == len(h["explicit_bounds"]) + 1
    assert sum(h["bucket_counts"]) == 2
    assert h["is_monotonic"] == 0


def test_metric_point_ids_are_deterministic_and_distinct(metered: bytes) -> None:
    first = [r[0] for r in decode_metrics(metered).metric_points]
    assert first == [r[0] for r in decode_metrics(metered).metric_points]
    assert len(set(first)) == len(first) == 3


# -- poison records ----------------------------------------------------------------------
@pytest.mark.parametrize("decoder", [decode_spans, decode_metrics])
def test_empty_message_is_poison(decoder: Any) -> None:
    with pytest.raises(PoisonRecord, match="empty"):
        decoder(b"")


@pytest.mark.parametrize("garbage", [
    b"\xff\xff\xff\xff\xff\xff",
    b"hello world, definitely not protobuf",
    b"\x0a\xff\xff\xff\xff\x0f",  # field 1, absurd length
    bytes(range(256)),
])
@pytest.mark.parametrize("decoder", [decode_spans, decode_metrics])
def test_garbage_is_poison(decoder: Any, garbage: bytes) -> None:
    with pytest.raises(PoisonRecord):
        decoder(garbage)


def test_truncated_trace_message_is_poison(traced: dict[str, Any]) -> None:
    raw = traced["raw"]
    for cut in (len(raw) // 3, len(raw) // 2, len(raw) - 1):
        with pytest.raises(PoisonRecord, match="protobuf decode failed"):
            decode_spans(raw[:cut])


def test_truncated_metrics_message_is_poison(metered: bytes) -> None:
    with pytest.raises(PoisonRecord, match="protobuf decode failed"):
        decode_metrics(metered[: len(metered) // 2])


def test_metrics_request_on_the_spans_topic_is_poison(metered: bytes) -> None:
    with pytest.raises(PoisonRecord, match="not an OTLP trace request"):
        decode_spans(metered)


def test_trace_request_on_the_metrics_topic_is_poison(traced: dict[str, Any]) -> None:
    with pytest.raises(PoisonRecord, match="not an OTLP metrics request"):
        decode_metrics(traced["raw"])


def test_trace_request_without_spans_is_poison() -> None:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.add(key="service.name").value.string_value = SERVICE
    resource_spans.scope_spans.add().scope.name = "guardtrace"
    with pytest.raises(PoisonRecord, match="no spans"):
        decode_spans(request.SerializeToString())


def test_span_with_malformed_ids_is_poison(traced: dict[str, Any]) -> None:
    request = ExportTraceServiceRequest.FromString(traced["raw"])
    request.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x01\x02"
    with pytest.raises(PoisonRecord, match="invalid ids"):
        decode_spans(request.SerializeToString())


def test_metrics_request_without_metrics_is_poison() -> None:
    request = ExportMetricsServiceRequest()
    resource_metrics = request.resource_metrics.add()
    resource_metrics.resource.attributes.add(key="service.name").value.string_value = SERVICE
    resource_metrics.scope_metrics.add().scope.name = "guardtrace"
    with pytest.raises(PoisonRecord, match="no metrics"):
        decode_metrics(request.SerializeToString())


# -- payloads ----------------------------------------------------------------------------
def _payload(index: int, count: int, body: str, wire: Any = encode) -> bytes:
    return wire(PayloadRecord(
        payload_id="a" * 32, request_id="req-p", kind=names.PAYLOAD_KIND_VERIFICATION,
        body=body, chunk_index=index, chunk_count=count, timestamp_ns=123,
        trace_id="0af7651916cd43dd8448eb211c80319c", span_id="b7ad6b7169203331",
        body_bytes=9_999, body_sha256="cd" * 32, truncated=True, redactions=4,
        attributes={"model": "m"}))


@pytest.mark.parametrize("wire", [encode, encode_v1], ids=["v2", "v1"])
def test_payload_row_first_chunk_has_a_preview(wire: Any) -> None:
    body = "ü" * (PREVIEW_CHARS + 50)
    rows = decode_payload_message(_payload(0, 2, body, wire))
    assert len(rows) == 1 and rows.spans == [] and rows.metric_points == []
    row = _row(Columns.PAYLOADS, rows.payloads[0])
    assert row["body"] == body
    assert row["preview"] == body[:PREVIEW_CHARS]
    assert (row["payload_id"], row["chunk_index"], row["chunk_count"]) == ("a" * 32, 0, 2)
    assert (row["request_id"], row["kind"]) == ("req-p", names.PAYLOAD_KIND_VERIFICATION)
    assert (row["timestamp"], row["body_bytes"], row["body_sha256"]) == (123, 9_999, "cd" * 32)
    assert (row["truncated"], row["redactions"]) == (1, 4)
    assert row["attributes"] == {"model": "m"}
    assert row["trace_id"] == "0af7651916cd43dd8448eb211c80319c"


@pytest.mark.parametrize("wire", [encode, encode_v1], ids=["v2", "v1"])
def test_payload_row_later_chunk_has_no_preview(wire: Any) -> None:
    row = _row(Columns.PAYLOADS,
               decode_payload_message(_payload(1, 2, "tail text", wire)).payloads[0])
    assert row["body"] == "tail text"
    assert row["preview"] == ""
    assert row["chunk_index"] == 1


@pytest.mark.parametrize(("raw", "reason"), [
    (b"garbage", "not zstd"),
    (b"", "not zstd"),
])
def test_payload_garbage_is_poison(raw: bytes, reason: str) -> None:
    with pytest.raises(PoisonRecord, match=reason):
        decode_payload_message(raw)


@pytest.mark.parametrize("wire", [encode, encode_v1], ids=["v2", "v1"])
def test_payload_poison_keeps_the_decode_reason(wire: Any) -> None:
    with pytest.raises(PoisonRecord, match="chunk_index 2 out of range"):
        decode_payload_message(_payload(2, 2, "x", wire))


def test_payload_rows_are_the_same_from_either_wire_version() -> None:
    body = "line one\n\"quoted\" \\ ü 🚀\n" * 50
    assert decode_payload_message(_payload(0, 1, body)).payloads \
        == decode_payload_message(_payload(0, 1, body, encode_v1)).payloads
