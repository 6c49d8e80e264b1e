"""GUARDTRACE_EXPORTER=otlp wires opentelemetry-exporter-otlp instead of Kafka."""

from __future__ import annotations

import sys

import pytest
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource

from guardtrace import collectors
from guardtrace.collectors import setup as collector_setup
from guardtrace.collectors.config import CollectorConfig
from guardtrace.collectors.export.kafka_exporters import KafkaMetricExporter, KafkaSpanExporter
from guardtrace.collectors.setup import OTLP_GRPC_INSTALL, _exporters
from guardtrace.schemas.environment_variables import ConfigError


def test_exporter_choice_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GUARDTRACE_EXPORTER", "otlp")
    spans, metrics = _exporters(CollectorConfig.resolve(), None, Resource.create({}))
    assert isinstance(spans, OTLPSpanExporter) and isinstance(metrics, OTLPMetricExporter)
    spans.shutdown()
    metrics.shutdown()

    monkeypatch.setenv("GUARDTRACE_EXPORTER", "kafka")
    from guardtrace.collectors.export.kafka_producer import LazyProducer

    producer = LazyProducer("127.0.0.1:1", 1_000_000)
    spans, metrics = _exporters(CollectorConfig.resolve(), producer, Resource.create({}))
    assert isinstance(spans, KafkaSpanExporter) and isinstance(metrics, KafkaMetricExporter)


def test_configure_in_otlp_mode_builds_providers_without_blocking(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    collectors.shutdown()
    try:
        telemetry = collectors.configure(set_global=False, exporter="otlp",
                                         capture_payloads=False)
        assert telemetry.tracer_provider is not None and telemetry.meter_provider is not None
        assert telemetry.producer is None  # nothing of Kafka is created in OTLP mode
    finally:
        collectors.shutdown(timeout_s=1)


def test_otlp_mode_without_the_grpc_extra_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes importing that module fail, as if not installed.
    for module in ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
                   "opentelemetry.exporter.otlp.proto.grpc.metric_exporter"):
        monkeypatch.setitem(sys.modules, module, None)
    collectors.shutdown()
    with pytest.raises(ConfigError, match="GUARDTRACE_EXPORTER=otlp") as raised:
        collectors.configure(set_global=False, exporter="otlp", capture_payloads=False)
    assert OTLP_GRPC_INSTALL in str(raised.value)
    assert "guardtrace[otlp-grpc]" in OTLP_GRPC_INSTALL
    assert collector_setup._active is None  # nothing half-configured is left behind
