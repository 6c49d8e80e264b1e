"""collectors/export/payload_sink.py: a chunk whose send fails is sent again, or counted.

A large body travels as several chunk records. kafka-python's ``send()`` raises when it
gets no metadata or buffer space within ``max_block_ms``; before, the payload's
remaining chunks were then given up, leaving a payload that could never be whole. Now
the chunk is tried again (a bounded number of times); only when it still fails is the
payload counted as dropped, once, and readers find it incomplete.

No broker: the sink is given a LazyProducer whose ``get()`` hands out a scripted client
(the sink calls only ``send`` on it, and ``add_errback`` on what it returns).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.errors import IllegalStateError, KafkaConnectionError, KafkaTimeoutError
from kafka.producer.future import FutureProduceResult, FutureRecordMetadata

from guardtrace.collectors.config import CollectorConfig
from guardtrace.collectors.emit.redaction import Redactor
from guardtrace.collectors.emit.telemetry import internal_totals
from guardtrace.collectors.export import payload_sink as payload_sink_module
from guardtrace.collectors.export.kafka_producer import LazyProducer
from guardtrace.collectors.export.payload_sink import KafkaPayloadSink
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.schemas.payload_record import decode
from guardtrace.transport.broker import free_port

DROPPED = names.METRIC_PAYLOADS_DROPPED
BODY = "".join(random.Random(3).choice("abcdefghij \n\"{}") for _ in range(100_000))


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in env.ALL:
        monkeypatch.delenv(var.name, raising=False)
    # The backoff between tries is the sink's to choose; these tests count tries.
    monkeypatch.setattr(payload_sink_module, "_CHUNK_RETRY_BACKOFF_S", 0.0, raising=False)


def dropped(reason: str) -> int:
    return internal_totals(DROPPED).get(f"{DROPPED}{{{reason}}}", 0)


class ScriptedKafka:
    """A connected producer whose send() raises ``failures[i]`` on its i-th call.

    Args:
        failures: Send call number (from 0) -> what that call raises.
        fail_from: From this call on, every send raises ``failures[fail_from]``.
    """

    def __init__(self, failures: dict[int, Exception], fail_from: int | None = None) -> None:
        self.failures, self.fail_from = failures, fail_from
        self.calls = 0
        self.sent: list[bytes] = []
        self.futures: list[FutureRecordMetadata] = []

    def send(self, topic: str, key: bytes | None = None, value: bytes | None = None,
             headers: list[tuple[str, bytes]] | None = None) -> FutureRecordMetadata:
        call, self.calls = self.calls, self.calls + 1
        if self.fail_from is not None and call >= self.fail_from:
            raise self.failures[self.fail_from]
        if call in self.failures:
            raise self.failures[call]
        assert value is not None
        self.sent.append(value)
        future = FutureRecordMetadata(FutureProduceResult(TopicPartition(topic, 0)), 0, None,
                                      None, -1, -1, -1)
        self.futures.append(future)
        return future


class ScriptedProducer(LazyProducer):
    def __init__(self, config: CollectorConfig, kafka: ScriptedKafka) -> None:
        super().__init__(config.kafka_bootstrap, config.max_message_bytes)
        self.kafka = kafka

    def get(self, wait_s: float = 0.5, compressed_values: bool = False) -> Any:
        return self.kafka


@pytest.fixture
def sinks() -> Iterator[list[KafkaPayloadSink]]:
    made: list[KafkaPayloadSink] = []
    yield made
    for sink in made:
        sink.shutdown(timeout_s=2.0)


def sink_over(kafka: ScriptedKafka, sinks: list[KafkaPayloadSink]) -> KafkaPayloadSink:
    config = CollectorConfig.resolve(kafka_bootstrap=f"127.0.0.1:{free_port()}",
                                     max_message_bytes=32_768, payload_limit_bytes=1_000_000)
    sink = KafkaPayloadSink(config, ScriptedProducer(config, kafka), Redactor(enabled=False))
    sinks.append(sink)
    return sink


def ship(sink: KafkaPayloadSink, request_id: str = "req-chunks") -> None:
    assert sink.record(request_id, names.PAYLOAD_KIND_FABRICATION, BODY, {})
    assert sink.force_flush(timeout_s=30.0)


def reassembled(values: list[bytes]) -> tuple[list[int], str, str]:
    records = sorted((decode(v) for v in values), key=lambda r: r.chunk_index)
    return [r.chunk_index for r in records], "".join(r.body for r in records), \
        records[0].body_sha256


def test_a_chunk_whose_send_raised_is_sent_again_and_the_payload_arrives_whole(
        sinks: list) -> None:
    # The third chunk's send raises twice (no buffer space in time), then goes through.
    timeout = KafkaTimeoutError("Failed to allocate memory within the configured max blocking time")
    kafka = ScriptedKafka({2: timeout, 3: timeout})
    before = (dropped("send_failed"), dropped("error"))
    ship(sink_over(kafka, sinks))

    indexes, body, sha = reassembled(kafka.sent)
    count = decode(kafka.sent[0]).chunk_count
    assert count > 3
    assert indexes == list(range(count)), "a chunk is missing or was sent twice"
    assert body == BODY and sha == hashlib.sha256(BODY.encode()).hexdigest()
    assert (dropped("send_failed"), dropped("error")) == before


def test_a_chunk_that_keeps_failing_is_tried_a_bounded_number_of_times_and_counted_once(
        sinks: list) -> None:
    timeout = KafkaTimeoutError("metadata for the payloads topic not available")
    kafka = ScriptedKafka({2: timeout}, fail_from=2)
    before = dropped("send_failed")
    ship(sink_over(kafka, sinks))

    assert len(kafka.sent) == 2, "chunks after the one that failed are not sent"
    tries = kafka.calls - 2
    assert 1 < tries <= 10, f"the failing chunk was tried {tries} times"
    assert dropped("send_failed") - before == 1

    # The worker goes on: the next payload ships once Kafka takes sends again.
    kafka.fail_from, kafka.failures, kafka.sent = None, {}, []
    ship(sinks[0], "req-after")
    assert reassembled(kafka.sent)[1] == BODY


def test_a_send_that_cannot_succeed_is_not_tried_again(sinks: list) -> None:
    kafka = ScriptedKafka({1: IllegalStateError("KafkaProducer already closed!")}, fail_from=1)
    before = dropped("send_failed")
    ship(sink_over(kafka, sinks))
    assert kafka.calls == 2
    assert dropped("send_failed") - before == 1


def test_a_payload_whose_chunks_all_fail_in_delivery_is_counted_once(sinks: list) -> None:
    kafka = ScriptedKafka({})
    before = dropped("delivery_failed")
    ship(sink_over(kafka, sinks))
    assert len(kafka.futures) > 3
    for future in kafka.futures:  # the broker refuses every chunk, after its own retries
        future.failure(KafkaConnectionError("broker gone"))
    assert dropped("delivery_failed") - before == 1
