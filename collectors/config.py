"""The collector's settings: explicit argument, then ``GUARDTRACE_*`` variable, then default."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..schemas import environment_variables as env

__all__ = ["CollectorConfig"]

EXPORTERS = ("kafka", "otlp", "none")
# Room left in a Kafka message for the JSON envelope around a payload chunk.
_ENVELOPE_HEADROOM = 16 * 1024


@dataclass(frozen=True)
class CollectorConfig:
    """Everything ``configure`` needs; build it with :meth:`resolve`.

    Attributes mirror the variables in :mod:`guardtrace.schemas.environment_variables`.
    """

    kafka_bootstrap: str
    exporter: str
    service_name: str
    spans_topic: str
    metrics_topic: str
    logs_topic: str
    payloads_topic: str
    max_message_bytes: int
    payload_limit_bytes: int
    capture_payloads: bool
    redact: bool
    redact_bare_ids: bool
    payload_queue_bytes: int
    agent_label_cap: int
    metric_export_interval_ms: int

    @classmethod
    def resolve(cls, **explicit: Any) -> CollectorConfig:
        """Resolve every setting; keyword arguments (not None) win over the environment.

        Raises:
            guardtrace.schemas.environment_variables.ConfigError: a value is unusable; the
                message names the variable and the value.
            TypeError: an unknown keyword argument.
        """
        unknown = set(explicit) - set(cls.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown collector setting(s): {', '.join(sorted(unknown))}")
        get = explicit.get
        config = cls(
            kafka_bootstrap=env.read_str(env.KAFKA_BOOTSTRAP, get("kafka_bootstrap")),
            exporter=env.read_choice(env.EXPORTER, EXPORTERS, get("exporter")),
            service_name=env.read_str(env.SERVICE_NAME, get("service_name")),
            spans_topic=env.read_str(env.SPANS_TOPIC, get("spans_topic")),
            metrics_topic=env.read_str(env.METRICS_TOPIC, get("metrics_topic")),
            logs_topic=env.read_str(env.LOGS_TOPIC, get("logs_topic")),
            payloads_topic=env.read_str(env.PAYLOADS_TOPIC, get("payloads_topic")),
            max_message_bytes=env.read_int(env.MAX_MESSAGE_BYTES, get("max_message_bytes"),
                                           minimum=_ENVELOPE_HEADROOM * 2),
            payload_limit_bytes=env.read_int(env.PAYLOAD_LIMIT_BYTES,
                                             get("payload_limit_bytes"), minimum=1024),
            capture_payloads=env.read_bool(env.CAPTURE_PAYLOADS, get("capture_payloads")),
            redact=env.read_bool(env.REDACT, get("redact")),
            redact_bare_ids=env.read_bool(env.REDACT_BARE_IDS, get("redact_bare_ids")),
            payload_queue_bytes=env.read_int(env.PAYLOAD_QUEUE_BYTES,
                                             get("payload_queue_bytes"), minimum=1024),
            agent_label_cap=env.read_int(env.AGENT_LABEL_CAP, get("agent_label_cap"), minimum=1),
            metric_export_interval_ms=env.read_int(env.METRIC_EXPORT_INTERVAL_MS,
                                                   get("metric_export_interval_ms"), minimum=100),
        )
        if not config.kafka_bootstrap.strip() and config.exporter == "kafka":
            raise env.ConfigError(f"{env.KAFKA_BOOTSTRAP.name} must name at least one broker")
        return config

    @property
    def payload_chunk_bytes(self) -> int:
        """Largest body slice per Kafka message, leaving room for the record envelope."""
        return self.max_message_bytes - _ENVELOPE_HEADROOM

    def with_changes(self, **changes: Any) -> CollectorConfig:
        """A copy with some fields replaced."""
        return replace(self, **changes)
