"""Consumer lag on the real broker counts every record not yet committed.

Tansu answers ListOffsets(latest) with the base offset of the last batch plus one, not
the log end (see :func:`guardtrace.transport.kafka_workarounds.true_log_end`): lag read
from ListOffsets alone comes out short as soon as a batch holds more than one record.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafka import KafkaProducer

from guardtrace.transport.lag import read_consumer_lag
from guardtrace.transport.topics import ensure_topics

BATCHES, PER_BATCH = 3, 5


def test_lag_of_a_group_that_committed_nothing_is_every_record(broker: Any) -> None:
    topic = f"lag-{uuid.uuid4().hex[:10]}"
    ensure_topics(broker.bootstrap, [topic], partitions=1)
    # linger lets each flush go out as one batch of PER_BATCH records.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=50)
    for batch in range(BATCHES):
        for i in range(PER_BATCH):
            producer.send(topic, value=f"{batch}-{i}".encode(), partition=0)
        producer.flush()
    producer.close()

    lag = read_consumer_lag(broker.bootstrap, f"group-{uuid.uuid4().hex[:8]}", [topic])

    assert lag.error is None, lag.error
    assert lag.total == BATCHES * PER_BATCH
    assert [(row["partition"], row["log end"], row["committed"]) for row in lag.partitions] \
        == [(0, BATCHES * PER_BATCH, None)]
