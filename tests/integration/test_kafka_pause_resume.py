"""Pause and resume on the real broker: a resumed partition is read to its end.

The consumer pauses every partition while ClickHouse is down and resumes them after.
kafka-python 3.0.12 can stall a resumed partition for good (see
:func:`guardtrace.transport.kafka_workarounds.release_parked_records`); without that
workaround this test stops at the first ten records.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from guardtrace.transport.kafka_workarounds import release_parked_records
from guardtrace.transport.topics import ensure_topics

RECORDS = 30


def poll_offsets(consumer: KafkaConsumer, tp: TopicPartition) -> list[int]:
    release_parked_records(consumer)
    return [record.offset for record in consumer.poll(timeout_ms=200).get(tp, [])]


def test_a_partition_resumed_after_a_pause_is_read_to_its_end(broker: Any) -> None:
    topic = f"pause-{uuid.uuid4().hex[:10]}"
    ensure_topics(broker.bootstrap, [topic], partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(RECORDS):
        producer.send(topic, value=str(i).encode(), partition=0)
    producer.flush()
    producer.close()

    paused, other = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", max_poll_records=10)
    try:
        consumer.assign([paused, other])
        # One fetch brings all 30 records; a poll hands out 10 and keeps the rest.
        seen: list[int] = []
        deadline = time.monotonic() + 15
        while not seen and time.monotonic() < deadline:
            seen += poll_offsets(consumer, paused)
        assert seen == list(range(10))

        consumer.pause(paused)
        # While it is paused, the other partition's (empty) fetches pass through.
        for _ in range(5):
            assert poll_offsets(consumer, paused) == []
        consumer.resume(paused)

        deadline = time.monotonic() + 15
        while len(seen) < RECORDS and time.monotonic() < deadline:
            seen += poll_offsets(consumer, paused)
    finally:
        consumer.close()
    assert seen == list(range(RECORDS)), f"read {len(seen)} of {RECORDS} after the resume"
