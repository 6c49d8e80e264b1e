"""The consumer's settings and counters.

:class:`ConsumerConfig` is the Kafka side of one consumer (bootstrap, transport security,
group, the topic set, batch bounds); :class:`ConsumerStats` is what it counted, printed
by ``guardtrace consume --until-idle`` and served by the health endpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..schemas import environment_variables as env
from ..schemas.transport_security import KafkaSecurity, kafka_connection_settings
from ..transport.topics import TopicSet

__all__ = ["MAX_RECORD_BYTES", "ConsumerConfig", "ConsumerStats"]

# Records larger than this are not decoded; they go to the dead-letter topic as oversize.
MAX_RECORD_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ConsumerConfig:
    """Kafka side of the consumer; build with :meth:`resolve`."""

    bootstrap: str
    group_id: str
    spans_topic: str
    metrics_topic: str
    payloads_topic: str
    logs_topic: str
    dead_letter_topic: str
    batch_max_rows: int
    batch_max_seconds: float
    # A row count alone does not bound memory: 20,000 payload chunks can be 20 GB.
    batch_max_bytes: int = 64 * 1024 * 1024
    # Tansu's first group join takes about half the session timeout; keep it short.
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 2000
    # TLS and SASL of every client the consumer builds (its own and the dead-letter producer).
    security: KafkaSecurity = KafkaSecurity()
    # Run the detectors on the GenAI LLM spans stored (consumers/pipeline_detection.py).
    pipeline_detection: bool = True

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None,
                **explicit: Any) -> ConsumerConfig:
        """Resolve from arguments, then ``GUARDTRACE_*`` variables, then defaults.

        Args:
            environ: Where variables are read (default: this process's environment).
            **explicit: Fields of this class; None means "not given".

        Raises:
            ConfigError: a setting is unusable (the message names it).
            TypeError: an unknown keyword argument.
        """
        unknown = set(explicit) - set(cls.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown consumer setting(s): {', '.join(sorted(unknown))}")
        get = explicit.get
        topics = TopicSet.resolve(get("spans_topic"), get("metrics_topic"),
                                  get("payloads_topic"), get("dead_letter_topic"), environ,
                                  logs=get("logs_topic"))
        return cls(
            bootstrap=env.read_str(env.KAFKA_BOOTSTRAP, get("bootstrap"), environ),
            group_id=env.read_str(env.CONSUMER_GROUP, get("group_id"), environ),
            spans_topic=topics.spans, metrics_topic=topics.metrics,
            payloads_topic=topics.payloads, logs_topic=topics.logs,
            dead_letter_topic=topics.dead_letters,
            batch_max_rows=env.read_int(env.BATCH_MAX_ROWS, get("batch_max_rows"), environ,
                                        minimum=1),
            batch_max_seconds=env.read_float(env.BATCH_MAX_SECONDS, get("batch_max_seconds"),
                                             environ, minimum=0.01),
            batch_max_bytes=env.read_int(env.BATCH_MAX_BYTES, get("batch_max_bytes"), environ,
                                         minimum=1024),
            security=get("security") or KafkaSecurity.resolve(environ),
            pipeline_detection=env.read_bool(env.PIPELINE_DETECTION,
                                             get("pipeline_detection"), environ),
            **{k: v for k, v in explicit.items()
               if k in ("session_timeout_ms", "heartbeat_interval_ms") and v is not None},
        )

    def kafka_settings(self) -> dict[str, Any]:
        """The kafka-python settings every client of this consumer starts from: the
        bootstrap servers and the transport security."""
        return kafka_connection_settings(self.bootstrap, self.security)

    @property
    def topic_set(self) -> TopicSet:
        """All five topics, dead-letter topic included (what must exist)."""
        return TopicSet(spans=self.spans_topic, metrics=self.metrics_topic,
                        payloads=self.payloads_topic, logs=self.logs_topic,
                        dead_letters=self.dead_letter_topic)

    @property
    def topics(self) -> tuple[str, str, str, str]:
        """The topics this consumer reads: spans, metrics, payloads, logs."""
        return self.topic_set.consumed


@dataclass
class ConsumerStats:
    """The consumer's own counters (also printed as the ``--until-idle`` summary)."""

    records: int = 0
    batches: int = 0
    rows_written: dict[str, int] = field(default_factory=dict)
    dead_letters: int = 0
    dead_letter_reasons: dict[str, int] = field(default_factory=dict)
    write_retries: int = 0
    commits: int = 0
    lag: int = 0
    # What pipeline detection read, found and could not read, by kind.
    pipeline_detection: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "records": self.records, "batches": self.batches,
            "rows_written": dict(sorted(self.rows_written.items())),
            "dead_letters": self.dead_letters,
            "dead_letter_reasons": dict(sorted(self.dead_letter_reasons.items())),
            "write_retries": self.write_retries, "commits": self.commits, "lag": self.lag,
            "pipeline_detection": dict(sorted(self.pipeline_detection.items())),
        }
