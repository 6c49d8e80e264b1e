"""collectors/export/otlp_span_encoder.py: the Kafka span exporter's requests are the
bytes the SDK's encoder gives for the same spans.

Every test encodes real SDK spans (or the redacted copies guardtrace exports) both ways
and compares the serialized requests byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

from guardtrace.collectors.emit.export_redaction import redact_span
from guardtrace.collectors.emit.redaction import Redactor
from guardtrace.collectors.export.otlp_span_encoder import encode_trace_request


def _sdk(spans: Sequence[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def _provider(resource: Resource | None = None,
              limits: SpanLimits | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=resource or Resource.create({"service.name": "svc"}),
                              span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.fixture
def recorded() -> Iterator[tuple[Any, InMemorySpanExporter]]:
    provider, exporter = _provider()
    yield provider.get_tracer("guardtrace", "0.1.0"), exporter
    provider.shutdown()


def _assert_same(spans: Sequence[ReadableSpan]) -> None:
    ours = encode_trace_request(spans)
    assert ours == _sdk(spans)
    # And it is a request a reader parses back to the spans given.
    request = ExportTraceServiceRequest.FromString(ours)
    assert sum(len(scope.spans) for resource in request.resource_spans
               for scope in resource.scope_spans) == len(spans)


GUARD_EVENTS = [
    ("guardtrace.fabrication_detected", {
        "request_id": "req-1", "module": "replies", "tier": "action",
        "matched_phrase": "I'm deploying", "tools_fired": ["read_file", "search_docs"],
        "channel": "c-17", "agent": "agent-3"}),
    ("guardtrace.hallucination_detected", {
        "request_id": "req-1", "module": "planning", "hallucinated_agent": "deploy_v2",
        "allowed_agent_count": 12, "hall_retry": 0, "max_hall_retries": 2,
        "suggested_tools": ("deploy", "rollback"), "agent": "agent-3"}),
    ("guardtrace.verification_required", {
        "request_id": "req-1", "module": "verification", "score": 0.9, "depth": "deep"}),
]


def test_guard_spans_are_the_sdk_bytes_every_time(recorded: Any) -> None:
    tracer, exporter = recorded
    for n in range(30):  # the second and later spans reuse remembered attributes
        with tracer.start_as_current_span("agent.turn", attributes={"request_id": f"r{n}"}):
            span = tracer.start_span("guard", kind=SpanKind.CLIENT)
            for name, attributes in GUARD_EVENTS:
                span.add_event(name, {**attributes, "request_id": f"r{n}"})
            span.end()
    spans = exporter.get_finished_spans()
    for span in spans:
        _assert_same([span])
    _assert_same(spans)


def test_every_field_of_a_span_is_written_as_the_sdk_writes_it(recorded: Any) -> None:
    tracer, exporter = recorded
    remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1),
                         trace_state=TraceState([("vendor", "v1"), ("other", "x=y")]))
    linked = SpanContext(0x1234, 0x5678, is_remote=False)
    for kind in SpanKind:
        with tracer.start_as_current_span(
                "", context=set_span_in_context(NonRecordingSpan(remote)), kind=kind,
                links=[Link(linked, {"link.attr": "v", "n": 3}),
                       Link(remote, None)]) as span:
            span.set_status(Status(StatusCode.ERROR, "failed: bad input"))
            span.add_event("no attributes")
            span.add_event("", {"empty": ""})
    with tracer.start_as_current_span("ok") as span:
        span.set_status(Status(StatusCode.OK))
    _assert_same(exporter.get_finished_spans())


@pytest.mark.parametrize("value", [
    True, False, 0, 1, -1, 127, 128, 300, 2**63 - 1, -(2**63), 0.0, -0.0, 1.5, -2.25e300,
    math.inf, -math.inf, "", "ascii", "ünïcödé ✓ 日本", "x" * 2000, b"", b"\x00\xff",
    (), ("a", "b"), (1, 2, 3), (True, False), (1.5, -0.0), ("a", None, "b"),
    {"nested": {"deeper": [1, "two", 3.0]}, "empty": {}}, ("a", 1, True, 2.5),
])
def test_each_attribute_type_matches(recorded: Any, value: Any) -> None:
    tracer, exporter = recorded
    for _ in range(2):  # the second time from memory, where a value is remembered
        with tracer.start_as_current_span("span", attributes={"key": value}) as span:
            span.add_event("event", {"key": value})
    _assert_same(exporter.get_finished_spans())


def test_values_equal_in_python_but_not_in_otlp_are_not_confused(recorded: Any) -> None:
    # True == 1 == 1.0 and 0.0 == -0.0 in Python; OTLP writes each differently.
    tracer, exporter = recorded
    for value in (1, True, 1.0, 0, False, 0.0, -0.0, ("1",), (1,), (True,)):
        with tracer.start_as_current_span("span") as span:
            span.add_event("event", {"key": value})
    spans = exporter.get_finished_spans()
    for span in spans:
        _assert_same([span])


def test_nan_matches(recorded: Any) -> None:
    tracer, exporter = recorded
    with tracer.start_as_current_span("span", attributes={"key": math.nan}):
        pass
    _assert_same(exporter.get_finished_spans())


def test_dropped_counts_are_written(recorded: Any) -> None:
    provider, exporter = _provider(limits=SpanLimits(
        max_span_attributes=2, max_events=2, max_links=1, max_event_attributes=1,
        max_link_attributes=1))
    tracer = provider.get_tracer("t")
    links = [Link(SpanContext(1, 2, False), {"a": 1, "b": 2}), Link(SpanContext(3, 4, False))]
    with tracer.start_as_current_span("s", attributes={"a": 1, "b": 2, "c": 3},
                                      links=links) as span:
        for n in range(4):
            span.add_event(f"e{n}", {"x": n, "y": n})
    spans = exporter.get_finished_spans()
    assert spans[0].dropped_attributes and spans[0].dropped_events and spans[0].dropped_links
    _assert_same(spans)


def test_resources_and_scopes_group_as_the_sdk_groups_them() -> None:
    # Two providers with equal resources (distinct objects) and one with another; scopes
    # with and without version, schema URL and attributes; interleaved.
    spans: list[ReadableSpan] = []
    providers = [_provider(Resource.create({"service.name": "a"}, schema_url="https://s/1")),
                 _provider(Resource.create({"service.name": "a"}, schema_url="https://s/1")),
                 _provider(Resource.create({"service.name": "b", "n": 2}))]
    for round_no in range(3):
        for index, (provider, exporter) in enumerate(providers):
            tracer = provider.get_tracer(f"scope{round_no % 2}", "1.0" if index else None,
                                         schema_url="https://scope" if round_no else None,
                                         attributes={"scope.attr": index} if index else None)
            with tracer.start_as_current_span(f"s{round_no}-{index}"):
                pass
            spans.extend(exporter.get_finished_spans())
            exporter.clear()
    _assert_same(spans)
    _assert_same(spans[::-1])


def test_a_span_without_a_scope_matches(recorded: Any) -> None:
    tracer, exporter = recorded
    with tracer.start_as_current_span("s"):
        pass
    original = exporter.get_finished_spans()[0]
    bare = ReadableSpan(name="bare", context=original.context, resource=original.resource,
                        attributes={"a": "b"}, events=(), links=(), status=original.status,
                        start_time=1, end_time=2, instrumentation_scope=None)
    _assert_same([bare, original])
    scope = InstrumentationScope("named", None, None, None)
    scoped = ReadableSpan(name="scoped", context=original.context, resource=original.resource,
                          instrumentation_scope=scope, start_time=3, end_time=4)
    _assert_same([scoped, bare, original])


class _OddSequence(Sequence[str]):
    """A Sequence that is neither a tuple nor a list: the SDK's encoder takes it."""

    def __init__(self, items: list[str]) -> None:
        self._items = items

    def __getitem__(self, index: Any) -> Any:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)


@pytest.mark.parametrize("value", [
    "lone surrogate \ud800 here",  # not UTF-8: the SDK logs and skips the attribute
    2**64,  # out of int64's range: the same
    _OddSequence(["a", "b"]),  # a Sequence of another type: encoded as an array
])
def test_what_this_writer_does_not_take_goes_out_as_the_sdk_sends_it(value: Any) -> None:
    provider, exporter = _provider()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("s") as span:
        span.add_event("e", {"ok": "kept"})
    original = exporter.get_finished_spans()[0]
    odd = ReadableSpan(name="odd", context=original.context, resource=original.resource,
                       attributes={"odd": value, "ok": "kept"}, events=original.events,
                       instrumentation_scope=original.instrumentation_scope,
                       start_time=5, end_time=6)
    _assert_same([original, odd])


def test_redacted_copies_are_encoded_as_the_sdk_encodes_them(recorded: Any) -> None:
    tracer, exporter = recorded
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
    with tracer.start_as_current_span("call", attributes={"api_key": secret}) as span:
        span.add_event("prompt", {"text": f"use {secret} now", "module": "replies"})
    original = exporter.get_finished_spans()[0]
    redacted = redact_span(original, Redactor())
    assert redacted is not original  # the secret was found, so this is a copy
    assert secret.encode() not in encode_trace_request([redacted])
    _assert_same([redacted])


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False) | st.text(max_size=20) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(min_size=1, max_size=5), inner, max_size=3),
    max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=8), st.dictionaries(
    st.text(min_size=1, max_size=8), _VALUES, max_size=5)), min_size=1, max_size=4))
def test_any_attributes_match(events: list[tuple[str, dict[str, Any]]]) -> None:
    provider, exporter = _provider()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("s", attributes=events[0][1]) as span:
        for name, attributes in events:
            span.add_event(name, attributes)
    _assert_same(exporter.get_finished_spans())
