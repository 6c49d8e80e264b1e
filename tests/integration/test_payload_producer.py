"""The agent's producers against a real broker: payload records are not compressed twice."""

from __future__ import annotations

import uuid

from guardtrace.collectors.export.kafka_producer import LazyProducer
from guardtrace.schemas.payload_record import PayloadRecord, decode, encode
from guardtrace.transport.broker import EmbeddedBroker
from guardtrace.transport.topics import ensure_topics
from tests.support.topic_reader import read_records


def test_payload_records_go_through_a_producer_that_does_not_recompress(
        broker: EmbeddedBroker) -> None:
    topic = f"payload-producer-{uuid.uuid4().hex[:10]}"
    ensure_topics(broker.bootstrap, [topic], partitions=1)
    lazy = LazyProducer(broker.bootstrap, 1_000_000)
    try:
        plain = lazy.get(wait_s=10)
        precompressed = lazy.get(wait_s=10, compressed_values=True)
        assert plain is not None and precompressed is not None
        assert plain is not precompressed
        assert plain.config["compression_type"] == "zstd"
        assert precompressed.config["compression_type"] is None
        # The same object on later calls: one producer of each kind per process.
        assert lazy.get(compressed_values=True) is precompressed

        record = PayloadRecord(payload_id="p" * 32, request_id="req-1", kind="k",
                               body="a prompt, a reply\n" * 5000)
        precompressed.send(topic, key=b"req-1", value=encode(record))
        plain.send(topic, key=b"span", value=b"not compressed by its sender " * 100)
        assert lazy.flush(10)  # flushes both
        values = {message.key: message.value for message in
                  read_records(topic, 2, bootstrap_servers=broker.bootstrap)}
        assert decode(values[b"req-1"]) == record
        assert values[b"span"] == b"not compressed by its sender " * 100
    finally:
        lazy.close(5)
    assert lazy.get() is None and lazy.get(compressed_values=True) is None
