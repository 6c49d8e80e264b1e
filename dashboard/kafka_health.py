"""Consumer lag as Kafka sees it: the group's committed offsets against the log end.

Read from the broker rather than from a consumer process, so it is right whether the
consumers run inside ``guardtrace up`` or on other machines.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from ..schemas import environment_variables as env
__all__ = ["ConsumerLag", "consumer_lag", "read_consumer_lag"]

_TIMEOUTS = {"request_timeout_ms": 3_000, "bootstrap_timeout_ms": 3_000}


@dataclass(frozen=True)
class ConsumerLag:
    bootstrap: str
    group: str
    total: int = 0
    partitions: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def read_consumer_lag(bootstrap: str, group: str, topics: list[str]) -> ConsumerLag:
    """Lag of ``group`` on ``topics``: log end offset minus committed offset, per partition.

    A partition with records but no committed offset counts from the log start, since a
    new group reads from the earliest offset.
    """
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    admin = consumer = None
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="guardtrace-dashboard",
                                 **_TIMEOUTS)
        committed = admin.list_group_offsets(group).get(group, {})
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                 client_id="guardtrace-dashboard", **_TIMEOUTS)
        partitions = [TopicPartition(topic, p) for topic in topics
                      for p in sorted(consumer.partitions_for_topic(topic) or ())]
        ends = consumer.end_offsets(partitions) if partitions else {}
        starts = consumer.beginning_offsets(partitions) if partitions else {}
        positions = {}
        for tp in partitions:
            meta = committed.get(tp)
            positions[tp] = meta.offset if meta is not None and meta.offset >= 0 else starts[tp]
        ends = _fetched_high_watermarks(consumer, positions, ends)
        rows = []
        for tp in partitions:
            meta = committed.get(tp)
            position = positions[tp]
            rows.append({"topic": tp.topic, "partition": tp.partition,
                         "committed": meta.offset if meta is not None else None,
                         "log end": ends[tp], "lag": max(0, ends[tp] - position)})
        return ConsumerLag(bootstrap, group, sum(r["lag"] for r in rows), rows)
    except Exception as exc:  # noqa: BLE001 - shown on the page, with the address
        return ConsumerLag(bootstrap, group, error=_describe(exc))
    finally:
        for client in (consumer, admin):
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001, S110 - closing a broken client
                    pass


def _describe(exc: Exception) -> str:
    # kafka-python's errors already start with their class name; say it once.
    text, name = str(exc), type(exc).__name__
    return text if text.startswith(name) else f"{name}: {text}"


def _fetched_high_watermarks(consumer: Any, positions: dict[Any, int],
                             listed: dict[Any, int]) -> dict[Any, int]:
    """Log ends confirmed by a fetch: the larger of ListOffsets and the fetch's watermark.

    Tansu (the embedded broker) answers ListOffsets(latest) with the base offset of the
    last batch plus one, not the log end, so lag read that way is too small. A fetch
    response carries the true high watermark; one small fetch per partition gets it.
    """
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
    return {tp: max(listed.get(tp, 0), consumer.highwater(tp) or 0) for tp in positions}


@st.cache_data(ttl=5, show_spinner=False)
def _cached(bootstrap: str, group: str, topics: tuple[str, ...]) -> ConsumerLag:
    return read_consumer_lag(bootstrap, group, list(topics))


def consumer_lag() -> ConsumerLag:
    """The configured consumer group's lag (cached for a few seconds)."""
    return _cached(env.read_str(env.KAFKA_BOOTSTRAP), env.read_str(env.CONSUMER_GROUP),
                   (env.read_str(env.SPANS_TOPIC), env.read_str(env.METRICS_TOPIC),
                    env.read_str(env.PAYLOADS_TOPIC)))
