"""guardtrace's agent cap is what binds (not the SDK's), and span-queue drops are counted."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from guardtrace.collectors.emit.sdk_limits import CountingBatchSpanProcessor, sdk_cardinality_limit
from guardtrace.collectors.emit.telemetry import GuardTelemetry, internal_totals
from guardtrace.collectors.testing import capture
from guardtrace.schemas import names

DROPS_KEY = f"{names.METRIC_EXPORT_DROPPED}{{queue_full}}"


def test_modules_times_agents_beyond_the_sdk_default_keep_their_labels() -> None:
    # 3 modules x 800 agents = 2400 series: above the SDK's default 2000 per metric,
    # within guardtrace's cap of 1000 per metric and module. Nothing may collapse into
    # the SDK's label-less overflow series.
    with capture(agent_label_cap=1000) as cap:
        for module in ("planning", "billing", "support"):
            guard = GuardTelemetry(module, "test")
            for i in range(800):
                guard.count(names.METRIC_HALLUCINATIONS, agent=f"tool-{i}")
        points = cap.metric_points(names.METRIC_HALLUCINATIONS)
    assert not [attrs for attrs, _ in points if attrs.get("otel.metric.overflow")]
    for module in ("planning", "billing", "support"):
        agents = {a[names.ATTR_AGENT] for a, _ in points if a[names.ATTR_MODULE] == module}
        assert len(agents) == 800


def test_guardtrace_cap_still_folds_beyond_it() -> None:
    with capture(agent_label_cap=5) as cap:
        guard = GuardTelemetry("planning", "test")
        for i in range(20):
            guard.count(names.METRIC_HALLUCINATIONS, agent=f"tool-{i}")
        points = cap.metric_points(names.METRIC_HALLUCINATIONS)
    labels = {a[names.ATTR_AGENT]: v for a, v in points}
    assert len(labels) == 6 and labels[names.OVERFLOW_LABEL] == 15


def test_the_sdk_limit_grows_with_the_cap() -> None:
    assert sdk_cardinality_limit(10) == 2000  # never below the SDK's own default
    assert sdk_cardinality_limit(1000) > 3 * 1001


class _BlockedExporter(SpanExporter):
    """Holds the first export until released, so the processor's queue fills up."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait(10)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


def test_span_queue_drops_are_counted_exactly() -> None:
    exporter = _BlockedExporter()
    processor = CountingBatchSpanProcessor(exporter, max_queue_size=8,
                                           max_export_batch_size=4, schedule_delay_millis=1)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    before = internal_totals(names.METRIC_EXPORT_DROPPED).get(DROPS_KEY, 0)
    # One batch first, and only once the worker holds it in the blocked export go on:
    # a pop racing the full-queue check could otherwise shift one span between the
    # two counts (the limit this test does not cover; see CountingBatchSpanProcessor).
    for i in range(4):
        with tracer.start_as_current_span(f"span-{i}"):
            pass
    assert exporter.entered.wait(10)
    for i in range(4, 100):
        with tracer.start_as_current_span(f"span-{i}"):
            pass
    exporter.release.set()
    assert processor.force_flush(10_000)
    dropped = internal_totals(names.METRIC_EXPORT_DROPPED).get(DROPS_KEY, 0) - before
    assert dropped > 0
    assert exporter.exported + dropped == 100
    provider.shutdown()
