"""guardtrace's hook package: what an agent imports.

Guards decide whether an LLM hallucinated (an invented tool in a plan, a claimed action
that never ran, a question that must be verified) and act on it; every decision emits
the same telemetry (span event, capped counter, structured log, debug payload). Nothing
here needs ``configure()``: unconfigured, guards decide and emit into the OTel no-op API.

    from guardtrace import collectors
    collectors.configure(kafka_bootstrap="kafka:9092", service_name="travel-agent")
"""

from guardtrace.collectors.cardinality import AgentLabelLimiter
from guardtrace.collectors.config import CollectorConfig
from guardtrace.collectors.errors import GuardInputError
from guardtrace.collectors.kafka_exporters import KafkaMetricExporter, KafkaSpanExporter
from guardtrace.collectors.payload_sink import KafkaPayloadSink
from guardtrace.collectors.redaction import Redactor
from guardtrace.collectors.setup import Telemetry, configure, force_flush, shutdown
from guardtrace.collectors.telemetry import GuardTelemetry, new_request_id, record_payload

__all__ = [
    "AgentLabelLimiter",
    "CollectorConfig",
    "GuardInputError",
    "GuardTelemetry",
    "KafkaMetricExporter",
    "KafkaPayloadSink",
    "KafkaSpanExporter",
    "Redactor",
    "Telemetry",
    "configure",
    "force_flush",
    "new_request_id",
    "record_payload",
    "shutdown",
]
