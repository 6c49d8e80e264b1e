"""collectors/otlp_split.py: OTLP requests split below a Kafka message size limit.

Requests are built the way the Kafka exporters build them: real SDK spans and metrics
encoded by opentelemetry-exporter-otlp-proto-common.
"""

from __future__ import annotations

import random
import string
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardtrace.collectors.export.otlp_split import split_metrics_request, split_trace_request

_rng = random.Random(20240611)


def _text(size: int) -> str:
    """Incompressible-ish text of ``size`` characters (sizes matter, content does not)."""
    return "".join(_rng.choices(string.ascii_letters + string.digits, k=size))


def _make_spans(specs: list[tuple[str, str, list[int]]]) -> list[ReadableSpan]:
    """Finished SDK spans: for each (service, scope, sizes), one span per attribute size."""
    spans: list[ReadableSpan] = []
    providers: dict[str, tuple[TracerProvider, InMemorySpanExporter]] = {}
    for service, scope, sizes in specs:
        if service not in providers:
            exporter = InMemorySpanExporter()
            provider = TracerProvider(resource=Resource.create({"service.name": service}))
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            providers[service] = (provider, exporter)
        provider, exporter = providers[service]
        tracer = provider.get_tracer(scope, "1.2.3")
        exporter.clear()
        for index, size in enumerate(sizes):
            with tracer.start_as_current_span(f"{scope}.span{index}", attributes={
                "request_id": f"req-{service}-{index}",
                "llm.prompt": _text(size),
            }) as span:
                span.add_event("llm.hallucination_detected",
                               {"request_id": f"req-{service}-{index}", "agent": "x"})
        spans.extend(exporter.get_finished_spans())
    for provider, _ in providers.values():
        provider.shutdown()
    return spans


def _spans_in(request: ExportTraceServiceRequest) -> Iterator[tuple[Any, Any, Any]]:
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield resource_spans, scope_spans, span


def _metrics_in(request: ExportMetricsServiceRequest) -> Iterator[tuple[Any, Any, Any]]:
    for resource_metrics in request.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                yield resource_metrics, scope_metrics, metric


def _assert_trace_split(request: ExportTraceServiceRequest, limit: int,
                        expected_oversize: set[bytes] | None = None) -> list[bytes]:
    """Check every invariant of a trace split; return the messages."""
    expected_oversize = expected_oversize or set()
    result = split_trace_request(request, limit)
    # Where each input span came from (span ids are unique in these fixtures).
    origin = {span.span_id: (resource_spans.resource, resource_spans.schema_url,
                             scope_spans.scope, scope_spans.schema_url, span)
              for resource_spans, scope_spans, span in _spans_in(request)}
    assert len(origin) == sum(1 for _ in _spans_in(request))
    assert len(result.messages) == len(result.item_counts)
    seen: Counter[bytes] = Counter()
    for message, count in zip(result.messages, result.item_counts, strict=True):
        assert len(message) <= limit
        piece = ExportTraceServiceRequest()
        piece.ParseFromString(message)
        spans_here = list(_spans_in(piece))
        assert count == len(spans_here)
        for resource_spans, scope_spans, span in spans_here:
            resource, resource_schema, scope, scope_schema, original = origin[span.span_id]
            assert resource_spans.resource == resource
            assert resource_spans.schema_url == resource_schema
            assert scope_spans.scope == scope
            assert scope_spans.schema_url == scope_schema
            assert span == original
            seen[span.span_id] += 1
    assert result.oversize_items == len(expected_oversize)
    assert sum(result.item_counts) == len(origin) - len(expected_oversize)
    assert set(seen) == set(origin) - expected_oversize
    assert all(n == 1 for n in seen.values()), "a span was sent twice"
    return result.messages


# -- traces ------------------------------------------------------------------------------
def test_trace_request_under_limit_is_one_identical_message() -> None:
    request = encode_spans(_make_spans([("svc-a", "planner", [200, 300, 400])]))
    serialized = request.SerializeToString()
    result = split_trace_request(request, len(serialized) + 1000)
    assert result.messages == [serialized]
    assert result.item_counts == [3]
    assert result.oversize_items == 0


def test_trace_request_exactly_at_limit_is_not_split() -> None:
    request = encode_spans(_make_spans([("svc-a", "planner", [500, 500])]))
    serialized = request.SerializeToString()
    at_limit = split_trace_request(request, len(serialized))
    assert at_limit.messages == [serialized]
    one_below = split_trace_request(request, len(serialized) - 1)
    assert len(one_below.messages) == 2
    assert one_below.item_counts == [1, 1]


def test_trace_request_over_limit_splits_keeping_resource_and_scope() -> None:
    spans = _make_spans([
        ("svc-a", "planner", [3000] * 12),
        ("svc-a", "replies", [2500] * 9),
        ("svc-b", "planner", [4000] * 7),
    ])
    request = encode_spans(spans)
    assert len(request.resource_spans) == 2
    limit = 16_000
    assert request.ByteSize() > 4 * limit
    messages = _assert_trace_split(request, limit)
    assert len(messages) >= request.ByteSize() // limit
    # Every (service, scope) group is represented in the pieces.
    groups = set()
    for message in messages:
        piece = ExportTraceServiceRequest.FromString(message)
        assert len(piece.resource_spans) == 1
        assert len(piece.resource_spans[0].scope_spans) == 1
        service = {kv.key: kv.value.string_value
                   for kv in piece.resource_spans[0].resource.attributes}["service.name"]
        groups.add((service, piece.resource_spans[0].scope_spans[0].scope.name))
    assert groups == {("svc-a", "planner"), ("svc-a", "replies"), ("svc-b", "planner")}


@pytest.mark.parametrize("limit", [4_000, 4_097, 8_191, 12_345, 16_384, 20_000, 30_001])
def test_trace_split_invariants_hold_for_many_limits(limit: int) -> None:
    # Attribute sizes straddle the 1- and 2-byte length-prefix boundary (127/128) and
    # pack unevenly, so size accounting is exercised, not just the common case. Every
    # span fits on its own (the largest is about 3 kB).
    sizes = [60, 126, 127, 128, 129, 700, 1500, 2200, 2800, 90, 2600, 1000] * 2
    request = encode_spans(_make_spans([("svc", "s1", sizes), ("svc", "s2", sizes[::-1])]))
    assert request.ByteSize() > limit
    _assert_trace_split(request, limit)


def test_span_larger_than_limit_is_counted_and_not_sent() -> None:
    spans = _make_spans([("svc", "planner", [1000, 40_000, 1000, 1000, 50_000, 1000])])
    request = encode_spans(spans)
    big = {span.span_id for _, _, span in _spans_in(request) if span.ByteSize() > 20_000}
    assert len(big) == 2
    messages = _assert_trace_split(request, 20_000, expected_oversize=big)
    assert messages, "the spans that fit must still be sent"


def test_only_oversize_spans_gives_no_messages() -> None:
    request = encode_spans(_make_spans([("svc", "planner", [30_000, 30_000])]))
    result = split_trace_request(request, 10_000)
    assert result.messages == []
    assert result.item_counts == []
    assert result.oversize_items == 2


# -- metrics -----------------------------------------------------------------------------
def _metrics_request(metric_count: int, points_per_metric: int, label_size: int,
                     histogram_points: int | None = None) -> ExportMetricsServiceRequest:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader],
                             resource=Resource.create({"service.name": "metric-svc"}))
    counters = provider.get_meter("guardtrace", "0.1.0")
    histograms = provider.get_meter("guardtrace.latency", "0.1.0")
    for m in range(metric_count):
        counter = counters.create_counter(f"plan_generation.metric_{m}")
        histogram = histograms.create_histogram(f"latency_{m}", unit="ms")
        for p in range(max(points_per_metric, histogram_points or 0)):
            attrs = {"module": "planning", "agent": f"agent-{p}-{_text(label_size)}"}
            if p < points_per_metric:
                counter.add(p + 1, attrs)
            if p < (points_per_metric if histogram_points is None else histogram_points):
                histogram.record(float(p * 7), attrs)
    data = reader.get_metrics_data()
    provider.shutdown()
    return encode_metrics(data)


def _assert_metrics_split(request: ExportMetricsServiceRequest, limit: int,
                          expected_oversize: set[str] | None = None) -> list[bytes]:
    expected_oversize = expected_oversize or set()
    result = split_metrics_request(request, limit)
    origin = {metric.name: (rm.resource, sm.scope, metric)
              for rm, sm, metric in _metrics_in(request)}
    seen: Counter[str] = Counter()
    assert len(result.messages) == len(result.item_counts)
    for message, count in zip(result.messages, result.item_counts, strict=True):
        assert len(message) <= limit
        piece = ExportMetricsServiceRequest.FromString(message)
        metrics_here = list(_metrics_in(piece))
        assert count == len(metrics_here)
        for rm, sm, metric in metrics_here:
            resource, scope, original = origin[metric.name]
            assert rm.resource == resource
            assert sm.scope == scope
            assert metric == original
            seen[metric.name] += 1
    assert result.oversize_items == len(expected_oversize)
    assert sum(result.item_counts) == len(origin) - len(expected_oversize)
    assert set(seen) == set(origin) - expected_oversize
    assert all(n == 1 for n in seen.values())
    return result.messages


def test_metrics_request_under_limit_is_one_identical_message() -> None:
    request = _metrics_request(metric_count=3, points_per_metric=2, label_size=10)
    serialized = request.SerializeToString()
    result = split_metrics_request(request, len(serialized))
    assert result.messages == [serialized]
    assert result.item_counts == [6]  # 3 counters + 3 histograms
    assert result.oversize_items == 0


@pytest.mark.parametrize("limit", [6_000, 9_999, 25_000])
def test_metrics_request_over_limit_splits_by_metric(limit: int) -> None:
    request = _metrics_request(metric_count=15, points_per_metric=8, label_size=40)
    assert request.ByteSize() > 2 * limit
    messages = _assert_metrics_split(request, limit)
    assert len(messages) > 1
    scopes = {sm.scope.name for message in messages
              for _, sm, _ in _metrics_in(ExportMetricsServiceRequest.FromString(message))}
    assert scopes == {"guardtrace", "guardtrace.latency"}


def test_metric_larger_than_limit_is_counted_as_oversize() -> None:
    # Counters of 3 points (well under 1 kB) and histograms of 40 points (over 10 kB).
    request = _metrics_request(metric_count=4, points_per_metric=3, label_size=120,
                               histogram_points=40)
    limit = 6_000
    sizes = {metric.name: metric.ByteSize() for _, _, metric in _metrics_in(request)}
    big = {name for name, size in sizes.items() if size > limit}
    assert big == {f"latency_{m}" for m in range(4)}
    assert all(size < limit // 4 for name, size in sizes.items() if name not in big)
    _assert_metrics_split(request, limit, expected_oversize=big)
