"""Consumer lag: how many records of guardtrace's topics a consumer group has not committed.

Two readers, one reading of the log end (:func:`~.kafka_workarounds.true_log_end`):
:func:`read_consumer_lag` asks the broker about a group, so it is right whether the
consumers run inside ``guardtrace up`` or on other machines (the dashboard's health
page); :func:`assignment_lag` is a running consumer's own count over its partitions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..schemas.kafka_tls_check import check_tls_handshake
from ..schemas.transport_security import KafkaSecurity, kafka_connection_settings
from .kafka_workarounds import true_log_end

__all__ = ["ConsumerLag", "assignment_lag", "read_consumer_lag"]

_TIMEOUTS = {"request_timeout_ms": 3_000, "bootstrap_timeout_ms": 3_000}


@dataclass(frozen=True)
class ConsumerLag:
    bootstrap: str
    group: str
    total: int = 0
    partitions: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def assignment_lag(consumer: Any) -> int:
    """Records between a running consumer's positions and the log ends of its partitions."""
    assignment = consumer.assignment()
    if not assignment:
        return 0
    listed = consumer.end_offsets(list(assignment))
    return sum(max(0, true_log_end(listed[tp], consumer.highwater(tp)) - consumer.position(tp))
               for tp in assignment)


def read_consumer_lag(bootstrap: str, group: str, topics: Sequence[str],
                      security: KafkaSecurity | None = None) -> ConsumerLag:
    """Lag of ``group`` on ``topics``: log end offset minus committed offset, per partition.

    A partition with records but no committed offset counts from the log start, since a
    new group reads from the earliest offset. Never raises: a failure (an unusable
    security setting included) is the result's ``error``, for the page to show as is.

    Args:
        security: TLS and SASL of the clients (default: read from the environment).
    """
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    admin = consumer = None
    try:
        security = KafkaSecurity.resolve() if security is None else security
        settings = {**kafka_connection_settings(bootstrap, security),
                    "client_id": "guardtrace-dashboard", **_TIMEOUTS}
        check_tls_handshake(settings)  # kafka-python would wait forever on a silent TLS peer
        admin = KafkaAdminClient(**settings)
        committed = admin.list_group_offsets(group).get(group, {})
        consumer = KafkaConsumer(group_id=None, **settings)
        partitions = [TopicPartition(topic, p) for topic in topics
                      for p in sorted(consumer.partitions_for_topic(topic) or ())]
        ends = consumer.end_offsets(partitions) if partitions else {}
        starts = consumer.beginning_offsets(partitions) if partitions else {}
        positions = {}
        for tp in partitions:
            meta = committed.get(tp)
            positions[tp] = meta.offset if meta is not None and meta.offset >= 0 else starts[tp]
        ends = _fetched_log_ends(consumer, positions, ends)
        rows = []
        for tp in partitions:
            meta = committed.get(tp)
            position = positions[tp]
            rows.append({"topic": tp.topic, "partition": tp.partition,
                         "committed": meta.offset if meta is not None else None,
                         "log end": ends[tp], "lag": max(0, ends[tp] - position)})
        return ConsumerLag(bootstrap, group, sum(r["lag"] for r in rows), rows)
    except Exception as exc:  # noqa: BLE001 - shown on the page, with the address
        return ConsumerLag(bootstrap, group, error=_describe(exc, security))
    finally:
        for client in (consumer, admin):
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001 - closing a broken client
                    pass


def _describe(exc: Exception, security: KafkaSecurity | None) -> str:
    # kafka-python's errors already start with their class name; say it once.
    text, name = str(exc), type(exc).__name__
    text = text if text.startswith(name) else f"{name}: {text}"
    # A TLS or SASL mismatch shows only as a timeout in kafka-python's error: say how.
    if security is not None and security.protocol != "PLAINTEXT":
        text += f" (connecting over {security.describe()})"
    return text


def _fetched_log_ends(consumer: Any, positions: dict[Any, int],
                      listed: dict[Any, int]) -> dict[Any, int]:
    """Log ends confirmed by a fetch: one small fetch per partition gets its watermark."""
    if not positions:
        return listed
    consumer.assign(list(positions))
    for tp, position in positions.items():
        consumer.seek(tp, position)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        consumer.poll(timeout_ms=200, max_records=1, update_offsets=False)
        if all(consumer.highwater(tp) is not None for tp in positions):
            break
    return {tp: true_log_end(listed.get(tp), consumer.highwater(tp)) for tp in positions}
