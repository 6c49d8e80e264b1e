"""consumers/dead_letters.py: a failed dead-letter send is sent again, a slow one is not.

The producer is a stand-in that hands out kafka-python's own futures and lets the test
resolve them, so "the broker refused it", "the broker has not answered yet" and "send()
raised" are each one line. The consumer's side (commit held back, health) is tested
against the real broker in tests/reliability/test_dead_letter_failures.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaConnectionError, KafkaTimeoutError
from kafka.producer.future import FutureProduceResult, FutureRecordMetadata

from guardtrace.consumers.dead_letters import (
    DeadLetter,
    DeadLetterNotDelivered,
    await_dead_letters,
    send_dead_letters,
)
from guardtrace.schemas import names

TOPIC = "guardtrace-dead-letters"
SOURCE = TopicPartition("guardtrace-spans", 3)


class StandInProducer:
    """Keeps every send; ``raising`` makes send() itself raise, like a metadata timeout."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any], FutureRecordMetadata]] = []
        self.raising: Exception | None = None

    def send(self, topic: str, **kwargs: Any) -> FutureRecordMetadata:
        if self.raising is not None:
            raise self.raising
        future = FutureRecordMetadata(FutureProduceResult(TopicPartition(topic, 0)), 0,
                                      None, None, -1, -1, -1)
        self.sent.append((topic, kwargs, future))
        return future

    def last(self) -> FutureRecordMetadata:
        return self.sent[-1][2]


def letter(offset: int = 41) -> DeadLetter:
    record = ConsumerRecord(
        topic=SOURCE.topic, partition=SOURCE.partition, leader_epoch=None, offset=offset,
        timestamp=0, timestamp_type=0, key=b"key", value=b"\xff garbage",
        headers=[("trace", b"1")], checksum=None, serialized_key_size=3,
        serialized_value_size=10, serialized_header_size=-1)
    return DeadLetter(SOURCE, record, "not an OTLP trace request (protobuf decode failed)")


def acknowledge(future: FutureRecordMetadata) -> None:
    future._produce_future.success((7, 0, None))  # base offset, log append time, error
    assert future.succeeded()


def test_a_letter_carries_the_record_its_reason_and_its_source() -> None:
    producer, dead = StandInProducer(), letter()
    send_dead_letters(producer, TOPIC, [dead])
    topic, sent, _ = producer.sent[0]
    headers = dict(sent["headers"])
    assert topic == TOPIC
    assert (sent["key"], sent["value"]) == (b"key", b"\xff garbage")
    assert headers["trace"] == b"1"
    assert headers[names.HEADER_DLQ_ERROR].startswith(b"not an OTLP trace request")
    assert headers[names.HEADER_DLQ_SOURCE_TOPIC] == SOURCE.topic.encode()
    assert headers[names.HEADER_DLQ_SOURCE_PARTITION] == b"3"
    assert headers[names.HEADER_DLQ_SOURCE_OFFSET] == b"41"


def test_a_send_the_broker_refused_is_sent_again() -> None:
    producer, dead = StandInProducer(), letter()
    send_dead_letters(producer, TOPIC, [dead])
    producer.last().failure(KafkaConnectionError("refused"))
    with pytest.raises(DeadLetterNotDelivered, match=r"guardtrace-spans\[3\]@41"):
        await_dead_letters([dead], timeout_s=1)

    send_dead_letters(producer, TOPIC, [dead])
    assert len(producer.sent) == 2, "the failed send was only checked again, not repeated"
    acknowledge(producer.last())
    await_dead_letters([dead], timeout_s=1)
    assert dead.acked


def test_a_send_that_raised_is_sent_again() -> None:
    producer, dead = StandInProducer(), letter()
    producer.raising = KafkaTimeoutError("no metadata for the dead-letter topic")
    send_dead_letters(producer, TOPIC, [dead])
    with pytest.raises(DeadLetterNotDelivered, match="not sent.*no metadata"):
        await_dead_letters([dead], timeout_s=1)

    producer.raising = None
    send_dead_letters(producer, TOPIC, [dead])
    acknowledge(producer.last())
    await_dead_letters([dead], timeout_s=1)
    assert len(producer.sent) == 1 and dead.acked


def test_an_unanswered_send_is_waited_for_again_not_repeated() -> None:
    producer, dead = StandInProducer(), letter()
    send_dead_letters(producer, TOPIC, [dead])
    with pytest.raises(DeadLetterNotDelivered, match="not acknowledged"):
        await_dead_letters([dead], timeout_s=0)
    # Still on its way: sending it again would put it in the topic twice.
    send_dead_letters(producer, TOPIC, [dead])
    assert len(producer.sent) == 1
    acknowledge(producer.last())
    await_dead_letters([dead], timeout_s=1)
    assert dead.acked


def test_acknowledged_letters_are_not_sent_again() -> None:
    producer = StandInProducer()
    first, second = letter(1), letter(2)
    send_dead_letters(producer, TOPIC, [first, second])
    acknowledge(producer.sent[0][2])
    producer.sent[1][2].failure(KafkaConnectionError("refused"))
    with pytest.raises(DeadLetterNotDelivered, match=r"@2 not acknowledged"):
        await_dead_letters([first, second], timeout_s=1)
    assert first.acked and not second.acked

    send_dead_letters(producer, TOPIC, [first, second])
    assert [dict(kw["headers"])[names.HEADER_DLQ_SOURCE_OFFSET]
            for _, kw, _ in producer.sent] == [b"1", b"2", b"2"]
