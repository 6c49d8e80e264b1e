"""A rebalance while a consumer holds an unwritten batch: kept rows stay, revoked ones go.

With kafka-python's cooperative-sticky assignor a joining member takes only some of the
partitions: the old member keeps the rest, and its fetch position on them keeps going.
kafka-python 3 does the same with the eager assignors (range, round robin): all
partitions are revoked, but those assigned again keep their position; nothing rewinds
them to the committed offset. So a consumer that drops its whole batch on revocation
loses the rows of the partitions it keeps: it has fetched past them, and its next commit
on those partitions passes them for good. It must drop exactly the rows of the
partitions it loses (their new owner reads them again from the committed offset) and
keep and later write the others.

Every partition of every topic carries records here (produced to each partition
explicitly), so whichever partitions the assignor moves, some are kept and some given
away. Afterwards: every record stored, and written exactly once across the members (the
revoked rows by their new owner only).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from guardtrace.consumers.config import ConsumerStats
from guardtrace.consumers.consumer import TelemetryConsumer
from guardtrace.store import tables
from guardtrace.store.rows import DecodedRows
from guardtrace.store.writer import ClickHouseWriter

from .conftest import Pipeline, wait_for
from .records import metrics_message, payload_message, span_message

# Incremental, and kafka-python's default (eager) assignors.
ASSIGNORS = {"cooperative": [CooperativeStickyAssignor],
             "eager": [RangePartitionAssignor, RoundRobinPartitionAssignor]}
# Records per partition in each of the two waves (before and after the second member).
PER_PARTITION = 40


class SerialWriter:
    """The real writer, one insert at a time: the members share one embedded client."""

    lock = threading.Lock()

    def __init__(self, inner: ClickHouseWriter) -> None:
        self.inner = inner

    def write(self, rows: DecodedRows) -> dict[str, int]:
        with self.lock:
            return self.inner.write(rows)


def produce_wave(pipeline: Pipeline, first: int) -> int:
    """PER_PARTITION records to every partition of every consumed topic; returns the next n."""
    config = pipeline.consumer_config
    encoders = {config.spans_topic: span_message, config.metrics_topic: metrics_message,
                config.payloads_topic: payload_message}
    producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap)
    n = first
    try:
        for topic, encoder in encoders.items():
            partitions = sorted(producer.partitions_for(topic))
            for partition in partitions:
                for _ in range(PER_PARTITION):
                    producer.send(topic, value=encoder(n, time.time_ns()), partition=partition)
                    n += 1
        producer.flush(timeout=60)
    finally:
        producer.close()
    return n


def run_in_thread(consumer: TelemetryConsumer) -> threading.Thread:
    thread = threading.Thread(target=consumer.run, daemon=True)
    thread.start()
    return thread


def settled(consumer: TelemetryConsumer, at_least: int, quiet_s: float = 0.5) -> None:
    """Wait until the consumer has taken in ``at_least`` records and then none for
    ``quiet_s`` (it caught up).

    The count is what its partitions hold, so the wait ends on the event; the short quiet
    after it lets a surplus (a record read twice) arrive and show in the counters. A
    quiet window alone had to outlast any stall (3 s, three times a test).
    """
    last = [consumer.stats.records, time.monotonic()]

    def quiet() -> bool:
        if consumer.stats.records != last[0]:
            last[:] = [consumer.stats.records, time.monotonic()]
        return (consumer.stats.records >= at_least
                and time.monotonic() - last[1] >= quiet_s)

    wait_for(quiet, timeout_s=90, interval_s=0.1,
             message=f"the consumer to catch up ({at_least} records)")


def records_on(consumer: TelemetryConsumer) -> int:
    """Records of one wave on the consumer's partitions (every partition of the waves'
    topics gets the same; the logs topic gets none)."""
    config = consumer.config
    waves = {config.spans_topic, config.metrics_topic, config.payloads_topic}
    return PER_PARTITION * sum(tp.topic in waves for tp in consumer._consumer.assignment())


def written(*runs: ConsumerStats) -> dict[str, int]:
    """Rows written per table, summed over the runs' counters."""
    total: dict[str, int] = {}
    for stats in runs:
        for table, count in stats.rows_written.items():
            total[table] = total.get(table, 0) + count
    return total


@pytest.mark.timeout(300)
@pytest.mark.parametrize("protocol", sorted(ASSIGNORS))
def test_a_rebalance_keeps_the_rows_of_the_partitions_still_owned(
        pipeline: Pipeline, protocol: str) -> None:
    assignors = {"partition_assignment_strategy": ASSIGNORS[protocol]}

    def member(**overrides: Any) -> TelemetryConsumer:
        writer = SerialWriter(ClickHouseWriter(pipeline.client, pipeline.database))
        config = dataclasses.replace(pipeline.consumer_config, **overrides)
        return TelemetryConsumer(config, writer, consumer_overrides=assignors)

    # The first member holds everything it reads in one batch: nothing is written before
    # the second member joins, so the rebalance meets a full unwritten batch.
    holding = member(batch_max_rows=1_000_000, batch_max_seconds=3600.0)
    joining = member()
    holding_thread = run_in_thread(holding)
    joining_thread: threading.Thread | None = None
    try:
        after_first = produce_wave(pipeline, 0)
        settled(holding, at_least=after_first)  # the only member: it reads them all
        assert holding.stats.batches == 0, "the holding member wrote before the rebalance"
        held = len(holding._consumer.assignment())

        joining_thread = run_in_thread(joining)
        # The holding member gives up some partitions and keeps the others.
        wait_for(lambda: 0 < len(holding._consumer.assignment()) < held
                 and joining._consumer.assignment(), timeout_s=90,
                 message="the partitions to be shared by the two members")
        total = produce_wave(pipeline, after_first)
        # Nothing was committed before the rebalance: the joining member reads both waves
        # of its partitions; the holding one has the first wave of all of them and now
        # reads the second of those it kept.
        settled(joining, at_least=2 * records_on(joining))
        settled(holding, at_least=after_first + records_on(holding))
    finally:
        # The joining member first: the holding one then writes and commits what it kept.
        joining.stop()
        if joining_thread is not None:
            joining_thread.join(timeout=60)
        holding.stop()
        holding_thread.join(timeout=60)
    assert not holding_thread.is_alive()

    per_topic = total // 3
    # Anything not committed is replayed here: what is still missing now is lost for good.
    catch_up = member().run(until_idle_s=3)
    stored = {
        tables.SPANS: pipeline.scalar("SELECT uniqExact(span_id) FROM {db}.spans"),
        tables.SPAN_EVENTS: pipeline.scalar("SELECT uniqExact(event_id) FROM {db}.span_events"),
        tables.METRIC_POINTS: pipeline.scalar(
            "SELECT uniqExact(point_id) FROM {db}.metric_points"),
        tables.PAYLOADS: pipeline.scalar("SELECT uniqExact(payload_id) FROM {db}.payloads"),
    }
    assert stored == dict.fromkeys(stored, per_topic), (
        f"records lost in the rebalance: {per_topic} per topic sent, stored {stored}")
    # Exactly once: the revoked rows were written by their new owner only, the kept rows
    # by the member that kept them, and nothing was left to replay.
    assert written(holding.stats, joining.stats, catch_up) == dict.fromkeys(stored, per_topic)
    assert sum(catch_up.rows_written.values()) == 0
