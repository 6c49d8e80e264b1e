"""Dead-letter sends failing under a running consumer: retried, nothing committed, unhealthy.

Tansu creates any topic it is asked for and takes any size of record, so the broker
cannot be made to refuse a dead letter; the fault is injected in the consumer's
dead-letter producer instead (a real KafkaProducer behind it): while the fault lasts,
every send comes back as a failed future, which is what kafka-python hands back when
the broker answers a produce with an error. Meanwhile good records and poison arrive.

While the fault lasts: nothing is committed past the poison record, and ``/healthz``
says the consumer is stuck and why (it keeps polling, so only this can tell). Once it
ends: the dead letter is sent again and acknowledged, ``/healthz`` is green again, every
offset is committed, every good record stored exactly once and every poison record in
the dead-letter topic once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.errors import KafkaConnectionError
from kafka.producer.future import FutureProduceResult, FutureRecordMetadata

from guardtrace.consumers import consumer as consumer_module
from guardtrace.consumers.health import HealthServer
from guardtrace.schemas import names
from guardtrace.transport.broker import free_port
from tests.support.health_http import get_json
from tests.support.topic_reader import read_records

from .conftest import Pipeline, wait_for
from .records import span_message

GOOD_PER_PARTITION = 50
POISON = b"\xff not a trace request"


class FailingDeadLetters:
    """A real KafkaProducer whose sends fail (as a failed future) while ``failing`` is set."""

    made: list[FailingDeadLetters] = []

    def __init__(self, **settings: Any) -> None:
        self.inner = KafkaProducer(**settings)
        self.failing = threading.Event()
        self.failing.set()
        self.failed_sends = 0
        self.made.append(self)

    def send(self, topic: str, **kwargs: Any) -> Any:
        if self.failing.is_set():
            self.failed_sends += 1
            error = KafkaConnectionError("dead-letter broker unreachable (injected)")
            # What KafkaProducer.send itself returns when the broker answers with an error.
            return FutureRecordMetadata(FutureProduceResult(TopicPartition(topic, -1)), -1,
                                        None, None, -1, -1, -1).failure(error)
        return self.inner.send(topic, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def healthz(server: HealthServer) -> tuple[int, dict[str, Any]]:
    return get_json(server.port, "/healthz", timeout_s=10)


def committed(admin: KafkaAdminClient, pipeline: Pipeline) -> dict[int, int]:
    """The group's committed offset per spans-topic partition."""
    group = pipeline.consumer_config.group_id
    offsets = admin.list_group_offsets(group).get(group, {})
    return {tp.partition: m.offset for tp, m in offsets.items()
            if tp.topic == pipeline.consumer_config.spans_topic and m.offset >= 0}


def dead_letters_in_topic(pipeline: Pipeline, expected: int) -> list[Any]:
    """The dead-letter topic's records: ``expected`` of them, and any surplus."""
    return read_records(pipeline.consumer_config.dead_letter_topic, expected,
                        bootstrap_servers=pipeline.bootstrap)


@pytest.mark.timeout(240)
def test_failed_dead_letter_sends_are_retried_and_hold_back_the_commit(
        pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FailingDeadLetters, "made", [])
    monkeypatch.setattr(consumer_module, "KafkaProducer", FailingDeadLetters)
    topic = pipeline.consumer_config.spans_topic
    producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap)
    ends: dict[int, int] = {}  # partition -> the offset after its last record
    poison_at: dict[int, int] = {}  # partition -> the poison record's offset
    n = 0
    for partition in sorted(producer.partitions_for(topic)):
        for i in range(GOOD_PER_PARTITION):
            if i == GOOD_PER_PARTITION // 2:
                poison_at[partition] = producer.send(
                    topic, value=POISON, partition=partition).get(timeout=60).offset
            metadata = producer.send(topic, value=span_message(n, time.time_ns()),
                                     partition=partition).get(timeout=60)
            ends[partition] = metadata.offset + 1
            n += 1
    producer.close()

    consumer = pipeline.consumer()
    dead_letter_producer = FailingDeadLetters.made[-1]
    health = HealthServer(consumer, port=free_port(), host="127.0.0.1").start()
    admin = KafkaAdminClient(bootstrap_servers=pipeline.bootstrap)
    thread = threading.Thread(target=consumer.run, daemon=True)
    thread.start()
    try:
        # The fault lasts: the consumer keeps polling, and yet must say it is stuck.
        def unhealthy() -> dict[str, Any] | None:
            code, body = healthz(health)
            return body if code == 503 else None

        body = wait_for(unhealthy, timeout_s=90,
                        message="/healthz to report the failing dead letters")
        assert body["status"] == "stalled", body
        assert "dead letter" in body["stalled"]["reason"], body
        assert dead_letter_producer.failed_sends >= 1
        wait_for(lambda: dead_letter_producer.failed_sends >= 3, timeout_s=90,
                 message="the dead letters to be sent again")
        for partition, offset in committed(admin, pipeline).items():
            assert offset <= poison_at[partition], (
                f"partition {partition} committed to {offset}, past the poison record at "
                f"{poison_at[partition]} whose dead letter was never acknowledged")
        assert healthz(health)[0] == 503

        # The fault ends: the dead letters go out, the batch commits, health is green.
        dead_letter_producer.failing.clear()
        wait_for(lambda: healthz(health)[0] == 200, timeout_s=90,
                 message="/healthz to recover")
        wait_for(lambda: committed(admin, pipeline) == ends, timeout_s=90,
                 message="every offset to be committed")
    finally:
        consumer.stop()
        thread.join(timeout=60)
        health.stop()
        admin.close()
    assert not thread.is_alive()

    assert pipeline.scalar("SELECT count() FROM {db}.span_events FINAL") == n
    assert pipeline.scalar("SELECT uniqExact(event_id) FROM {db}.span_events") == n
    letters = dead_letters_in_topic(pipeline, len(poison_at))
    sources = sorted((int(dict(r.headers)[names.HEADER_DLQ_SOURCE_PARTITION]),
                      int(dict(r.headers)[names.HEADER_DLQ_SOURCE_OFFSET])) for r in letters)
    assert sources == sorted(poison_at.items())
    assert all(r.value == POISON for r in letters)
    assert pipeline.scalar("SELECT count() FROM {db}.dead_letters FINAL") == len(poison_at)
