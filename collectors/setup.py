"""``configure()``: wire the guard hooks' telemetry to Kafka (or an OTLP Collector).

Modelled on the OTel API's global providers: everything is a no-op until configured,
configuration happens once per process, and a second call warns and changes nothing
(replacing providers under running hooks would lose what they hold).
"""

from __future__ import annotations

import logging
import threading
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..schemas import environment_variables as env
from .config import CollectorConfig
from .emit import state as _state
from .emit.cardinality import AgentLabelLimiter
from .emit.redaction import Redactor

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import LogRecordExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from .export.kafka_producer import LazyProducer

__all__ = ["Telemetry", "configure", "force_flush", "shutdown"]

# The OTLP/gRPC export mode needs grpc, which the core install leaves out (pyproject.toml).
OTLP_GRPC_INSTALL = "pip install 'guardtrace[otlp-grpc]'"

logger = logging.getLogger("guardtrace.collectors")

_lock = threading.Lock()
_active: Telemetry | None = None


@dataclass
class Telemetry:
    """The providers and sinks ``configure`` created; flush and shut them down here."""

    config: CollectorConfig
    tracer_provider: TracerProvider | None
    meter_provider: MeterProvider | None
    payload_sink: _state.PayloadSink
    producer: LazyProducer | None
    # Other instrumentations' log records (GenAI log events) go out through this one.
    logger_provider: LoggerProvider | None = None

    def force_flush(self, timeout_s: float = 10.0) -> bool:
        """Export everything queued (spans, metrics, logs, payloads); False on timeout."""
        ok = True
        if self.tracer_provider is not None:
            ok = self.tracer_provider.force_flush(int(timeout_s * 1000)) and ok
        if self.meter_provider is not None:
            ok = self.meter_provider.force_flush(int(timeout_s * 1000)) and ok
        if self.logger_provider is not None:
            ok = self.logger_provider.force_flush(int(timeout_s * 1000)) and ok
        ok = self.payload_sink.force_flush(timeout_s) and ok
        if self.producer is not None:
            ok = self.producer.flush(timeout_s) and ok
        return ok

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Flush, stop the background threads and close the producer."""
        self.force_flush(timeout_s)
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
        if self.meter_provider is not None:
            self.meter_provider.shutdown(timeout_millis=timeout_s * 1000)
        if self.logger_provider is not None:
            self.logger_provider.shutdown()
        self.payload_sink.shutdown(timeout_s)
        if self.producer is not None:
            self.producer.close(timeout_s)


def configure(*, set_global: bool = True, producer_overrides: dict[str, Any] | None = None,
              redaction_rules: dict[str, str] | None = None,
              **settings: Any) -> Telemetry:
    """Wire guard telemetry; call once at agent start-up.

    Every setting resolves from the keyword argument, then its ``GUARDTRACE_*``
    environment variable, then the default (see :class:`CollectorConfig` and the
    README's configuration table).

    Args:
        set_global: Also install the providers as the OTel global providers, so spans the
            agent creates itself carry the guard events and travel the same way, and so do
            other instrumentations' log records (GenAI log events, on the logs topic).
        producer_overrides: Extra kafka-python producer settings.
        redaction_rules: Extra redaction rules, name -> regular expression.
        **settings: Any :class:`CollectorConfig` field, e.g. ``kafka_bootstrap``.

    Returns:
        The :class:`Telemetry` handle. A second call warns and returns the first handle.

    Raises:
        guardtrace.schemas.environment_variables.ConfigError: a setting is unusable.
    """
    # The SDK and the export path are imported here, not at module level: an agent that
    # imports the hooks and never configures them loads no Kafka client and no SDK.
    from opentelemetry import _logs, metrics, trace
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider

    from .emit.export_redaction import redacting_exporters, redacting_log_exporter
    from .emit.sdk_limits import (
        CountingBatchLogRecordProcessor,
        CountingBatchSpanProcessor,
        cardinality_views,
    )
    from .export.kafka_producer import LazyProducer
    from .export.payload_sink import KafkaPayloadSink

    global _active
    with _lock:
        if _active is not None:
            warnings.warn("guardtrace.collectors.configure() was already called; the first "
                          "configuration stays in effect", RuntimeWarning, stacklevel=2)
            return _active
        config = CollectorConfig.resolve(**settings)
        if config.exporter == "otlp":
            _otlp_grpc_exporters()  # a missing extra fails here, before anything starts
            _otlp_grpc_log_exporter()
        redactor = Redactor(extra_rules=redaction_rules or {}, enabled=config.redact,
                            bare_ids=config.redact_bare_ids)
        resource = Resource.create(
            {SERVICE_NAME: config.service_name} if config.service_name else {})

        producer = None
        if config.exporter == "kafka" or config.capture_payloads:
            producer = LazyProducer(config.kafka_bootstrap, config.max_message_bytes,
                                    **(producer_overrides or {}))
        span_exporter, metric_exporter = _exporters(config, producer, resource)

        tracer_provider = meter_provider = None
        if span_exporter is not None and metric_exporter is not None:
            # Every span and point leaves redacted, whoever recorded it (with set_global,
            # other instrumentations' too): on the export threads, under the same switch
            # as payloads (config.redact, through the redactor).
            span_exporter, metric_exporter = redacting_exporters(
                span_exporter, metric_exporter, redactor)
            tracer_provider = TracerProvider(resource=resource)
            tracer_provider.add_span_processor(CountingBatchSpanProcessor(span_exporter))
            meter_provider = MeterProvider(
                resource=resource, views=cardinality_views(config.agent_label_cap),
                metric_readers=[PeriodicExportingMetricReader(
                    metric_exporter,
                    export_interval_millis=config.metric_export_interval_ms)])
            if set_global:
                trace.set_tracer_provider(tracer_provider)
                metrics.set_meter_provider(meter_provider)

        logger_provider = None
        log_exporter = _log_exporter(config, producer, resource)
        if log_exporter is not None:
            # Redacted on the batch worker, as spans are; the processor counts what it drops
            # and never raises into whoever emitted the record.
            logger_provider = LoggerProvider(resource=resource)
            logger_provider.add_log_record_processor(CountingBatchLogRecordProcessor(
                redacting_log_exporter(log_exporter, redactor)))
            if set_global:
                _logs.set_logger_provider(logger_provider)

        payload_sink: _state.PayloadSink = _state.NullPayloadSink()
        if config.capture_payloads and producer is not None:
            payload_sink = KafkaPayloadSink(config, producer, redactor)

        _state.install(_state.TelemetryState(
            tracer_provider=tracer_provider, meter_provider=meter_provider,
            payload_sink=payload_sink, limiter=AgentLabelLimiter(config.agent_label_cap),
            redactor=redactor))
        _active = Telemetry(config, tracer_provider, meter_provider, payload_sink, producer,
                            logger_provider)
        logger.info("guardtrace telemetry configured: exporter=%s bootstrap=%s",
                    config.exporter, config.kafka_bootstrap)
        return _active


def _exporters(config: CollectorConfig, producer: LazyProducer | None,
               resource: Resource) -> tuple[SpanExporter | None, MetricExporter | None]:
    from opentelemetry.sdk.resources import SERVICE_NAME

    if config.exporter == "kafka":
        from .export.kafka_exporters import KafkaMetricExporter, KafkaSpanExporter

        assert producer is not None
        service = str(resource.attributes.get(SERVICE_NAME, ""))
        return (KafkaSpanExporter(producer, config.spans_topic, config.max_message_bytes),
                KafkaMetricExporter(producer, config.metrics_topic, config.max_message_bytes,
                                    service_key=service))
    if config.exporter == "otlp":
        span_exporter, metric_exporter = _otlp_grpc_exporters()
        # Endpoint, headers and TLS come from the standard OTEL_EXPORTER_OTLP_* variables.
        return span_exporter(), metric_exporter()
    return None, None


def _log_exporter(config: CollectorConfig, producer: LazyProducer | None,
                  resource: Resource) -> LogRecordExporter | None:
    """The log exporter of the configured mode; None when nothing is exported."""
    from opentelemetry.sdk.resources import SERVICE_NAME

    if config.exporter == "kafka":
        from .export.kafka_exporters import KafkaLogExporter

        assert producer is not None
        return KafkaLogExporter(producer, config.logs_topic, config.max_message_bytes,
                                service_key=str(resource.attributes.get(SERVICE_NAME, "")))
    if config.exporter == "otlp":
        return _otlp_grpc_log_exporter()()
    return None


def _otlp_grpc_exporters() -> tuple[type[SpanExporter], type[MetricExporter]]:
    """The OTLP/gRPC exporter classes, imported only in that mode (Kafka agents never
    load grpc); without the ``otlp-grpc`` extra, a ConfigError that says how to get it."""
    try:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise env.ConfigError(
            f"{env.EXPORTER.name}=otlp exports over OTLP/gRPC, which this install lacks "
            f"({exc.name or exc} is missing): {OTLP_GRPC_INSTALL}") from exc
    return OTLPSpanExporter, OTLPMetricExporter


def _otlp_grpc_log_exporter() -> type[LogRecordExporter]:
    """The OTLP/gRPC log exporter class, as :func:`_otlp_grpc_exporters` gives the others."""
    try:
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    except ImportError as exc:
        raise env.ConfigError(
            f"{env.EXPORTER.name}=otlp exports over OTLP/gRPC, which this install lacks "
            f"({exc.name or exc} is missing): {OTLP_GRPC_INSTALL}") from exc
    return OTLPLogExporter


def force_flush(timeout_s: float = 10.0) -> bool:
    """Flush the active configuration; True when nothing is configured."""
    active = _active
    return True if active is None else active.force_flush(timeout_s)


def shutdown(timeout_s: float = 10.0) -> None:
    """Shut the active configuration down and return the hooks to no-op telemetry."""
    global _active
    with _lock:
        active, _active = _active, None
        if active is None:
            return
        _state.install(_state.TelemetryState())
    active.shutdown(timeout_s)
