"""decode_spans' wire walker yields exactly the rows of the reference (object) decoder.

The walker reads span fields straight from the message bytes and converts each distinct
attribute once (consumers/span_wire.py, "the fast path"); the reference walks protobuf
objects. They must agree on everything the SDK writes, on every attribute type, on
fields the walker skips, and on irregular encodings it hands back to the reference.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from guardtrace.consumers import decode, span_wire
from guardtrace.consumers.decode import PoisonRecord, decode_spans


def _reference(raw: bytes) -> decode.DecodedRows:
    request = ExportTraceServiceRequest()
    request.ParseFromString(raw)
    return decode._spans_from_objects(request)


def _assert_same(raw: bytes) -> None:
    fast, slow = decode_spans(raw), _reference(raw)
    assert fast.spans == slow.spans
    assert fast.span_events == slow.span_events


def _values(rng: random.Random) -> Any:
    return rng.choice([
        "text", "", "ünïcødé ✓", "x" * 700, True, False, 0, -7, 2**62, 0.5, -0.0, 1e300,
        ["a", "b"], [1, 2, 3], [True], [0.25, 1.5], [], f"request-{rng.randrange(5)}"])


def _sdk_request(seed: int, spans: int = 6) -> bytes:
    rng = random.Random(seed)
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": f"svc-{seed % 3}",
                                                        "host.cores": 2}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(f"scope-{seed % 2}", "1.0")
    kinds = list(SpanKind)
    for n in range(spans):
        attrs = {f"k{j}": _values(rng) for j in range(rng.randrange(0, 6))}
        if rng.random() < 0.7:
            attrs["request_id"] = f"req-{seed}-{n}"
        links = []
        if rng.random() < 0.3:
            other = tracer.start_span("linked")
            other.end()
            links = [Link(other.get_span_context(), {"why": "retry"})]
        with tracer.start_as_current_span(f"span-{n}", kind=rng.choice(kinds), attributes=attrs,
                                          links=links) as span:
            for e in range(rng.randrange(0, 5)):
                event_attrs = {f"e{j}": _values(rng) for j in range(rng.randrange(0, 8))}
                for key in ("request_id", "module", "agent", "hallucinated_agent", "tier"):
                    if rng.random() < 0.4:
                        event_attrs[key] = f"{key}-{rng.randrange(3)}"
                span.add_event(f"llm.event_{e}", event_attrs)
            if rng.random() < 0.3:
                span.set_status(Status(StatusCode.ERROR, "it broke ✗"))
            elif rng.random() < 0.3:
                span.set_status(Status(StatusCode.OK))
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


@pytest.mark.parametrize("seed", range(40))
def test_sdk_encoded_requests_decode_identically(seed: int) -> None:
    _assert_same(_sdk_request(seed))


def test_nested_values_unknown_fields_and_repeats_decode_identically() -> None:
    request = ExportTraceServiceRequest.FromString(_sdk_request(1, spans=3))
    span = request.resource_spans[0].scope_spans[0].spans[0]
    nested = AnyValue(kvlist_value=KeyValueList(values=[
        KeyValue(key="inner", value=AnyValue(array_value=ArrayValue(values=[
            AnyValue(string_value="x"), AnyValue(bytes_value=b"\x01"), AnyValue()])))]))
    span.attributes.append(KeyValue(key="nested", value=nested))
    span.attributes.append(KeyValue(key="empty", value=AnyValue()))
    span.attributes.append(KeyValue(key="nested", value=AnyValue(int_value=1)))  # last wins
    span.events.add(time_unix_nano=5, name="bare")  # no attributes
    span.trace_state = "vendor=1"
    span.dropped_attributes_count = 3
    raw = request.SerializeToString()
    # An unknown field (number 99, varint) on the request and fields given twice: the
    # trace id repeated (last wins) and the span name repeated.
    raw += b"\x98\x06\x01"
    _assert_same(raw)


def test_irregular_encodings_fall_back_to_the_reference() -> None:
    request = ExportTraceServiceRequest.FromString(_sdk_request(2, spans=2))
    resource_spans = request.resource_spans[0]
    # A singular message field given twice is merged by protobuf: the walker declines.
    extra = resource_spans.resource.SerializeToString()
    part = resource_spans.SerializeToString() + b"\x0a" + _varint(len(extra)) + extra
    raw = b"\x0a" + _varint(len(part)) + part
    _assert_same(raw)
    status = ExportTraceServiceRequest.FromString(_sdk_request(3, spans=1))
    span = status.resource_spans[0].scope_spans[0].spans[0]
    span.kind = -1  # type: ignore[assignment] - an out-of-range (negative) enum value
    _assert_same(status.SerializeToString())


def test_invalid_ids_are_poison_on_both_paths() -> None:
    request = ExportTraceServiceRequest.FromString(_sdk_request(4, spans=1))
    request.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x01\x02"
    with pytest.raises(PoisonRecord, match="invalid ids"):
        decode_spans(request.SerializeToString())
    with pytest.raises(PoisonRecord, match="invalid ids"):
        _reference(request.SerializeToString())


def test_caches_stay_bounded() -> None:
    for seed in range(3):
        decode_spans(_sdk_request(seed, spans=2))
    for cache in (span_wire._kv_cache, span_wire._resource_cache, span_wire._scope_cache,
                  span_wire._status_cache):
        assert len(cache) <= span_wire._CACHE_ENTRIES
        assert all(len(key) <= span_wire._CACHE_MAX_KEY_BYTES for key in cache)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
