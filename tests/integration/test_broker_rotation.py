"""The embedded broker replaced under load: nothing lost, nothing stored twice.

Telemetry is produced through the proxy's public port (as agents send it) while the
broker behind it is replaced (transport/broker_rotation.py); the consumer reads the
brokers directly and is reopened on the new one, as ``guardtrace up`` does.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from guardtrace import collectors
from guardtrace.consumers.consumer import TelemetryConsumer
from guardtrace.consumers.decode import decode_spans
from guardtrace.consumers.pipeline import OpenPipeline, PipelineConfig, open_pipeline
from guardtrace.transport.broker import free_port, port_in_use
from guardtrace.transport.broker_rotation import RotatingBroker, read_rss_bytes
from guardtrace.transport.topics import TopicSet

from .conftest import wait_for

pytestmark = [pytest.mark.usefixtures("collectors_reset")]

# A bare kafka-python producer is idempotent by default, and an idempotent producer
# cannot move between Tansu brokers (see broker_rotation.py); the collectors' is not.
_MOVABLE_PRODUCER = {"enable_idempotence": False}


class ConsumerOnAThread:
    """One running consumer of the pipeline, reopened on another broker as up does."""

    def __init__(self, opened: OpenPipeline) -> None:
        self.opened = opened
        self.consumer: TelemetryConsumer | None = None
        self.thread: threading.Thread | None = None
        self.records = 0

    def start(self, bootstrap: str) -> None:
        self.consumer = self.opened.consumer(bootstrap=bootstrap)
        self.thread = threading.Thread(target=self.consumer.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.consumer is not None and self.thread is not None:
            self.consumer.stop()
            self.thread.join(60)
            assert not self.thread.is_alive()
            self.records += self.consumer.stats.records
        self.consumer = self.thread = None

    def reopen(self, bootstrap: str) -> None:
        self.stop()
        self.start(bootstrap)


class Agent:
    """Guard checks sent through the collectors on a thread, one request id each."""

    def __init__(self, bootstrap: str, topics: TopicSet) -> None:
        collectors.configure(
            set_global=False, kafka_bootstrap=bootstrap, spans_topic=topics.spans,
            metrics_topic=topics.metrics, payloads_topic=topics.payloads,
            logs_topic=topics.logs, metric_export_interval_ms=60_000)
        self.sent: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        guard = collectors.FabricationGuard()
        while not self._stop.is_set():
            request_id = f"rot-{len(self.sent)}"
            guard.check("I've written the file to disk.", [], request_id=request_id,
                        agent="writer")
            self.sent.append(request_id)
            time.sleep(0.01)

    def __enter__(self) -> Agent:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        collectors.shutdown()  # flushes what is queued


@pytest.fixture
def rotating(tmp_path: Path) -> Iterator[RotatingBroker]:
    topics = TopicSet.named("", uuid.uuid4().hex[:10])
    broker = RotatingBroker(free_port(), topics, rss_limit_bytes=0, partitions=2,
                            log_path=tmp_path / "broker.log").start()
    yield broker
    broker.stop()


def _pipeline(rotating: RotatingBroker, ch_client: Any) -> OpenPipeline:
    suffix = uuid.uuid4().hex[:10]
    topics = rotating.topics
    config = PipelineConfig.resolve(
        clickhouse_url="chdb://unused", database=f"gt_{suffix}",
        bootstrap=rotating.bootstrap, group_id=f"group-{suffix}",
        spans_topic=topics.spans, metrics_topic=topics.metrics,
        payloads_topic=topics.payloads, logs_topic=topics.logs,
        dead_letter_topic=topics.dead_letters, batch_max_rows=500, batch_max_seconds=0.3,
        session_timeout_ms=3000, heartbeat_interval_ms=1000)
    return open_pipeline(config, client=ch_client, partitions=2)


def _raw_spans_records(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first ``count`` records of the spans topic, read as they are stored."""
    reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        partitions = [TopicPartition(topic, p) for p in (0, 1)]
        reader.assign(partitions)
        reader.seek_to_beginning(*partitions)
        values: list[bytes] = []

        def read() -> bool:
            for records in reader.poll(timeout_ms=500).values():
                values.extend(record.value for record in records)
            return len(values) >= count
        wait_for(read, 20, interval_s=0, message=f"{count} records of {topic}")
        return values[:count]
    finally:
        reader.close()


@pytest.mark.timeout(120)
def test_a_replaced_broker_loses_nothing_and_the_store_keeps_each_record_once(
        rotating: RotatingBroker, ch_client: Any) -> None:
    opened = _pipeline(rotating, ch_client)
    db = opened.database
    consumer = ConsumerOnAThread(opened)
    consumer.start(rotating.internal_bootstrap)

    def stored(sql: str) -> Any:
        return ch_client.query(sql.replace("{db}", db)).result_rows[0][0]

    try:
        with Agent(rotating.bootstrap, rotating.topics) as agent:
            wait_for(lambda: stored("SELECT count() FROM {db}.payloads") >= 20, 30,
                     interval_s=0.2, message="the first requests to be stored")
            # Resent batches the old broker had already stored arrive again at the new
            # one: send a few such copies through the proxy after the rotation.
            copies = _raw_spans_records(rotating.internal_bootstrap, rotating.topics.spans, 3)
            old = rotating.current
            assert old is not None and old.pid is not None
            old_pid, old_port = old.pid, old.port

            rotation = rotating.rotate(opened.config.consumer.group_id,
                                       opened.config.consumer.topics, consumer.reopen,
                                       drain_timeout_s=20)

            assert rotation is not None
            assert rotation.old_port == old_port != rotation.new_port == rotating.current.port
            assert rotation.records_drained > 0
            assert rotating.retiring is None and rotating.rotations == [rotation]
            wait_for(lambda: read_rss_bytes(old_pid) is None, 10, message="the old broker exit")
            assert not port_in_use(old_port)
            sent_before = len(agent.sent)
            resend = KafkaProducer(bootstrap_servers=rotating.bootstrap, **_MOVABLE_PRODUCER)
            for value in copies:
                resend.send(rotating.topics.spans, value)
            resend.close(10)
            # Producing goes on through the same public port, to the new broker.
            wait_for(lambda: len(agent.sent) >= sent_before + 50, 20,
                     message="requests sent after the rotation")
        sent = set(agent.sent)
        after = f"rot-{len(agent.sent) - 1}"

        # Every request is stored once, those sent after the rotation included.
        def all_stored() -> bool:
            return stored("SELECT uniqExact(request_id) FROM {db}.payloads") == len(sent)
        wait_for(all_stored, 30, interval_s=0.3, message="every request to be stored")
        consumer.stop()
        assert stored(f"SELECT count() FROM {{db}}.payloads WHERE request_id = '{after}'") == 1
        assert stored("SELECT count() FROM {db}.payloads FINAL") == len(sent)
        stored_ids = {row[0] for row in ch_client.query(
            f"SELECT DISTINCT request_id FROM {db}.payloads").result_rows}
        assert stored_ids == sent
        assert stored("SELECT uniqExact(request_id) FROM {db}.span_events") == len(sent)
        assert stored("SELECT count() FROM {db}.span_events FINAL") == stored(
            "SELECT uniqExact(event_id) FROM {db}.span_events")
        assert stored("SELECT count() FROM {db}.spans FINAL") == stored(
            "SELECT uniqExact(trace_id, span_id) FROM {db}.spans")
        # The copies were consumed again, and collapsed onto the rows already stored.
        copied = [row[:2] for value in copies for row in decode_spans(value).spans]
        assert copied
        for trace_id, span_id in copied:
            assert stored(f"SELECT count() FROM {{db}}.spans FINAL WHERE trace_id = "
                          f"'{trace_id}' AND span_id = '{span_id}'") == 1
        assert consumer.records >= rotation.records_drained + len(copies)
    finally:
        consumer.stop()
