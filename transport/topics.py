"""guardtrace's Kafka topics: the set (defined once) and creating them when missing.

Every entry point that needs the topics (``broker``, ``consume``, ``up``, the dashboard's
lag panel, the tests, the benchmarks) takes them from a :class:`TopicSet`, so none can
forget one (the dead-letter topic was once left out of a hand-written list).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..schemas import environment_variables as env
from ..schemas.kafka_tls_check import check_tls_handshake
from ..schemas.transport_security import KafkaSecurity, kafka_connection_settings

__all__ = ["DEFAULT_PARTITIONS", "KafkaUnreachable", "TopicSet", "ensure_topics"]

logger = logging.getLogger("guardtrace.transport")

# Enough for a few consumers sharing the work; request ids spread by key hash.
DEFAULT_PARTITIONS = 4


class KafkaUnreachable(RuntimeError):
    """Kafka refused or did not answer the admin requests that create the topics.

    The message names the address and, when it is not PLAINTEXT, the security protocol
    (a TLS or SASL mismatch shows only as a timeout in kafka-python's own error).
    """

    def __init__(self, bootstrap: str, cause: BaseException,
                 security: KafkaSecurity | None = None) -> None:
        over = ""
        if security is not None and security.protocol != "PLAINTEXT":
            over = f" over {security.describe()}"
        super().__init__(f"cannot reach Kafka at {bootstrap}{over}: {cause!r}")
        self.bootstrap = bootstrap


@dataclass(frozen=True)
class TopicSet:
    """The five topics of one pipeline: four the consumers read, one they dead-letter to."""

    spans: str
    metrics: str
    payloads: str
    logs: str
    dead_letters: str

    @classmethod
    def resolve(cls, spans: str | None = None, metrics: str | None = None,
                payloads: str | None = None, dead_letters: str | None = None,
                environ: Mapping[str, str] | None = None, *,
                logs: str | None = None) -> TopicSet:
        """Resolve from arguments, then ``GUARDTRACE_*_TOPIC`` variables, then defaults."""
        return cls(spans=env.read_str(env.SPANS_TOPIC, spans, environ),
                   metrics=env.read_str(env.METRICS_TOPIC, metrics, environ),
                   payloads=env.read_str(env.PAYLOADS_TOPIC, payloads, environ),
                   logs=env.read_str(env.LOGS_TOPIC, logs, environ),
                   dead_letters=env.read_str(env.DEAD_LETTER_TOPIC, dead_letters, environ))

    @classmethod
    def named(cls, prefix: str, suffix: str) -> TopicSet:
        """Topics of their own (``{prefix}spans-{suffix}``, ...): a test's or a benchmark's."""
        return cls(spans=f"{prefix}spans-{suffix}", metrics=f"{prefix}metrics-{suffix}",
                   payloads=f"{prefix}payloads-{suffix}", logs=f"{prefix}logs-{suffix}",
                   dead_letters=f"{prefix}dlq-{suffix}")

    @property
    def consumed(self) -> tuple[str, str, str, str]:
        """The topics the consumers read: spans, metrics, payloads, logs."""
        return (self.spans, self.metrics, self.payloads, self.logs)

    def all(self) -> tuple[str, str, str, str, str]:
        """Every topic of the set, dead-letter topic included (what must exist)."""
        return (*self.consumed, self.dead_letters)

    def environment(self) -> dict[str, str]:
        """The ``GUARDTRACE_*_TOPIC`` variables that give a child process this set."""
        return {env.SPANS_TOPIC.name: self.spans, env.METRICS_TOPIC.name: self.metrics,
                env.PAYLOADS_TOPIC.name: self.payloads, env.LOGS_TOPIC.name: self.logs,
                env.DEAD_LETTER_TOPIC.name: self.dead_letters}


def ensure_topics(bootstrap: str, topics: TopicSet | Iterable[str],
                  partitions: int = DEFAULT_PARTITIONS,
                  replication_factor: int = 1,
                  security: KafkaSecurity | None = None) -> list[str]:
    """Create each topic that does not exist yet; return the ones created.

    Args:
        security: TLS and SASL of the admin client (default: read from the environment).

    Raises:
        ConfigError: a security setting is unusable (``security`` not given).
        KafkaUnreachable: the broker did not answer (the message names the address).
    """
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    names = topics.all() if isinstance(topics, TopicSet) else tuple(topics)
    security = KafkaSecurity.resolve() if security is None else security
    settings = {**kafka_connection_settings(bootstrap, security),
                "client_id": "guardtrace-admin", "request_timeout_ms": 10_000}
    try:
        check_tls_handshake(settings)  # kafka-python would wait forever on a silent TLS peer
        admin = KafkaAdminClient(**settings)
    except (KafkaError, OSError) as exc:
        raise KafkaUnreachable(bootstrap, exc, security) from None
    try:
        existing = set(admin.list_topics())
        missing = [t for t in dict.fromkeys(names) if t not in existing]
        if missing:
            try:
                admin.create_topics([NewTopic(t, partitions, replication_factor)
                                     for t in missing])
            except TopicAlreadyExistsError:
                pass  # another process created it between list and create
            logger.info("created topics: %s", ", ".join(missing))
        return missing
    except (KafkaError, OSError) as exc:
        raise KafkaUnreachable(bootstrap, exc, security) from None
    finally:
        admin.close()
