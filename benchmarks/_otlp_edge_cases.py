"""OTLP trace requests that a store-side decoder must treat exactly as guardtrace's does.

For store_side_decoding.py: values whose text is easy to get wrong (every AnyValue kind,
doubles in both notations, JSON escapes, keys given twice), a value nested deeper than
the bounded schema, and records the Python decoder refuses (poison), each built from
OTLP's own protobuf classes.
"""

from __future__ import annotations

import math
import random
import struct
import time
from collections.abc import Iterable
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

# A string that needs every JSON escape json.dumps(ensure_ascii=False) makes, and the
# characters other encoders escape but it does not ('/', U+2028, DEL, non-ASCII).
TRICKY_TEXT = 'q"b\\s/\x01\x1b\x1f\n\r\t\b\f\x7f\u2028 é中😀'
# Doubles at the edges of Python's repr: the switch to exponent notation (1e-05, 1e+16),
# integral values, signed zero, subnormals, extremes, and the non-finite ones.
EDGE_DOUBLES = (0.0, -0.0, 0.1, 0.30000000000000004, 1e-4, 1e-05, 1.5e-7, 123.456, 100.0,
                1e15, 9999999999999998.0, 1e16, 1.2345e16, 1e21, 1e22, 1.5e300, 5e-324,
                2.2250738585072014e-308, 1.7976931348623157e308, -2.5e-10, -1e16,
                math.nan, math.inf, -math.inf)
INT_EDGES = (0, -1, 2**63 - 1, -(2**63))
RANDOM_DOUBLES = 400


def any_value(value: Any) -> AnyValue:
    """An AnyValue holding ``value`` (str, bool, int, float, bytes, list, dict or None)."""
    if value is None:
        return AnyValue()
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[any_value(v) for v in value]))
    return AnyValue(kvlist_value=KeyValueList(values=key_values(value.items())))


def key_values(items: Iterable[tuple[str, Any]]) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in items]


def request(trace_id: bytes, span_attributes: list[tuple[str, Any]],
            event_attributes: list[tuple[str, Any]], name: str = "edge.span",
            start: int | None = None, span_id: bytes | None = None,
            resource: list[tuple[str, Any]] | None = None) -> ExportTraceServiceRequest:
    """One span with one event, carrying the attributes given (a list: keys may repeat),
    starting now unless ``start`` says otherwise (the tables' TTL drops old rows)."""
    start = time.time_ns() if start is None else start
    span = Span(trace_id=trace_id, span_id=span_id if span_id is not None else trace_id[:8],
                name=name, kind=Span.SPAN_KIND_CLIENT, start_time_unix_nano=start,
                end_time_unix_nano=start + 1000, attributes=key_values(span_attributes),
                events=[Span.Event(time_unix_nano=start + 500, name="edge.event",
                                   attributes=key_values(event_attributes))])
    span.status.code = 2
    span.status.message = "boom"
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=key_values(resource or [("service.name", "edge")])),
        scope_spans=[ScopeSpans(scope=InstrumentationScope(name="edge-scope"), spans=[span])])])


def random_doubles(count: int, seed: int = 17) -> list[float]:
    """Finite doubles from random bit patterns (every exponent, not only "nice" values)."""
    rng = random.Random(seed)
    out: list[float] = []
    while len(out) < count:
        value = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(value):
            out.append(value)
    return out


def edge_value_request(trace_id: bytes) -> bytes:
    """Every AnyValue kind as a span event's attributes (scalars, arrays, kvlists), the
    edge doubles and :data:`RANDOM_DOUBLES` random ones, and a key given twice."""
    event: list[tuple[str, Any]] = [
        ("request_id", "edge-request"), ("text", TRICKY_TEXT), ("empty_text", ""),
        ("true", True), ("false", False), ("bytes", b"\x00\xffab"), ("empty_value", None),
        ("texts", ["plain", TRICKY_TEXT, ""]), ("ints", list(INT_EDGES)),
        ("doubles", list(EDGE_DOUBLES)), ("bools", [True, False]),
        ("bytes_list", [b"\x01\x02", b""]), ("empty_list", []), ("mixed", [1, "a", None, 2.5]),
        ("kvlist", {"b": 1, "a": TRICKY_TEXT, "c": None, "d": 0.1}), ("empty_kvlist", {}),
        ("agent", "first"), ("agent", "second"),  # a key given twice: the last value wins
    ]
    event += [(f"int_{i}", value) for i, value in enumerate(INT_EDGES)]
    event += [(f"edge_double_{i}", value) for i, value in enumerate(EDGE_DOUBLES)]
    event += [(f"random_double_{i}", value)
              for i, value in enumerate(random_doubles(RANDOM_DOUBLES))]
    # A kvlist whose key repeats: json.dumps of the dict the decoder builds.
    span = [("request_id", "edge-request"), ("module", "edge"),
            ("dup_kvlist", {}), ("dup", 1), ("dup", 2)]
    message = request(trace_id, span, event)
    # KeyValueList with a repeated key cannot be built from a dict; set it by hand.
    dup = message.resource_spans[0].scope_spans[0].spans[0].attributes[2]
    dup.value.CopyFrom(AnyValue(kvlist_value=KeyValueList(values=key_values(
        [("k", 1), ("j", "x"), ("k", 2)]))))
    return bytes(message.SerializeToString())


def too_deep_request(trace_id: bytes) -> bytes:
    """A value nested one level deeper than otlp_trace_bounded.proto unrolls."""
    return bytes(request(trace_id, [("request_id", "deep-request")],
                         [("nested", [["a", "b"], ["c"]]), ("object", {"k": [1, 2]})])
                 .SerializeToString())


def poison_records(trace_id: bytes, good: bytes) -> dict[str, bytes]:
    """Records the Python decoder refuses, by what is wrong with them (``good``: a valid
    record, cut or altered for some of them)."""
    bad_utf8 = request(trace_id, [], [], name="NAME").SerializeToString().replace(
        b"NAME", b"N\xff\xfeE")
    return {
        "not protobuf": b"\xff\xff\xff\xff\xff",
        "truncated": good[: len(good) // 2],
        "empty": b"",
        "invalid UTF-8 in a span name": bytes(bad_utf8),
        "trace id of 3 bytes": bytes(request(b"abc", [], [], span_id=b"12345678")
                                     .SerializeToString()),
        "time after 2262": bytes(request(trace_id, [], [], start=2**64 - 10_000)
                                 .SerializeToString()),
        "no spans": bytes(ExportTraceServiceRequest(resource_spans=[ResourceSpans(
            resource=Resource(attributes=key_values([("service.name", "x")])))])
            .SerializeToString()),
        "field 1 as a varint": b"\x08\x01",
    }
