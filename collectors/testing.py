"""Real OpenTelemetry SDK objects in memory, for testing code that uses guard hooks.

``capture()`` swaps the hooks' telemetry to an in-memory span exporter, an in-memory
metric reader and an in-memory payload sink, without touching the process-wide OTel
globals (which may be set only once), and restores the previous state on exit::

    with capture() as cap:
        validate_and_retry(...)
    assert cap.events("llm.hallucination_detected")[0].attributes["request_id"] == "r1"
    assert cap.counter_total("plan_generation.hallucinations", agent="time-tool-v1") == 1
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .emit import state as _state
from .emit.cardinality import AgentLabelLimiter
from .emit.payload_body import redact_body
from .emit.redaction import Redactor
from .emit.sdk_limits import cardinality_views

__all__ = ["Capture", "CapturedEvent", "CapturedPayload", "InMemoryPayloadSink", "capture"]


@dataclass(frozen=True)
class CapturedPayload:
    """A payload as the sink received it (after redaction)."""

    request_id: str
    kind: str
    body: str
    attributes: dict[str, str]


@dataclass(frozen=True)
class CapturedEvent:
    """A span event with the span it was recorded on."""

    name: str
    attributes: dict[str, Any]
    span_name: str
    trace_id: int


class InMemoryPayloadSink:
    """Keeps payloads in a list, redacting as the Kafka sink does."""

    def __init__(self, redactor: Redactor | None = None, capacity: int | None = None) -> None:
        self.redactor = redactor or Redactor()
        self.capacity = capacity
        self.payloads: list[CapturedPayload] = []
        self.dropped = 0
        self._lock = threading.Lock()

    def record(self, request_id: str, kind: str, body: str,
               attributes: dict[str, str]) -> bool:
        with self._lock:
            if self.capacity is not None and len(self.payloads) >= self.capacity:
                self.dropped += 1
                return False
            self.payloads.append(CapturedPayload(
                request_id, kind, redact_body(self.redactor, body)[0],
                {k: self.redactor.redact(v) for k, v in attributes.items()}))
            return True

    def force_flush(self, timeout_s: float = 10.0) -> bool:
        return True

    def shutdown(self, timeout_s: float = 10.0) -> None:
        return None


@dataclass
class Capture:
    """What the hooks emitted while :func:`capture` was active."""

    span_exporter: InMemorySpanExporter
    metric_reader: InMemoryMetricReader
    payload_sink: InMemoryPayloadSink
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def spans(self) -> list[Any]:
        """Finished spans, oldest first."""
        return list(self.span_exporter.get_finished_spans())

    def events(self, name: str | None = None) -> list[CapturedEvent]:
        """Span events (optionally only those named ``name``) in emission order."""
        out = []
        for span in self.spans():
            for event in span.events:
                if name is None or event.name == name:
                    out.append(CapturedEvent(event.name, dict(event.attributes or {}),
                                             span.name, span.context.trace_id))
        return out

    def metric_points(self, metric: str, /) -> list[tuple[dict[str, Any], float]]:
        """(attributes, value) of every data point of ``metric`` (cumulative sums)."""
        data = self.metric_reader.get_metrics_data()
        out: list[tuple[dict[str, Any], float]] = []
        if data is None:
            return out
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for m in scope_metrics.metrics:
                    if m.name == metric:
                        for point in m.data.data_points:
                            # Guard counters are sums, whose points carry a value.
                            value = point.value  # type: ignore[union-attr]
                            out.append((dict(point.attributes or {}), value))
        return out

    def counter_total(self, metric: str, /, **labels: Any) -> float:
        """Sum of ``metric`` over points whose attributes include every ``labels`` item."""
        return sum(value for attrs, value in self.metric_points(metric)
                   if all(attrs.get(k) == v for k, v in labels.items()))

    @property
    def payloads(self) -> list[CapturedPayload]:
        """Payloads recorded, in order."""
        return list(self.payload_sink.payloads)


@contextmanager
def capture(*, agent_label_cap: int = 1000, redactor: Redactor | None = None,
            payload_capacity: int | None = None) -> Iterator[Capture]:
    """Route guard telemetry to memory for the duration of the ``with`` block."""
    span_exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    metric_reader = InMemoryMetricReader()
    # The same series limit as configure(), so tests see what production keeps.
    meter_provider = MeterProvider(metric_readers=[metric_reader],
                                   views=cardinality_views(agent_label_cap))
    redactor = redactor or Redactor()
    sink = InMemoryPayloadSink(redactor, payload_capacity)
    previous = _state.install(_state.TelemetryState(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        payload_sink=sink,
        limiter=AgentLabelLimiter(agent_label_cap),
        redactor=redactor,
    ))
    try:
        yield Capture(span_exporter, metric_reader, sink, tracer_provider, meter_provider)
    finally:
        _state.install(previous)
        tracer_provider.shutdown()
        meter_provider.shutdown()
