"""/metrics of a real consumer: its counters move with the traffic it really consumes.

A consumer of the test's slice of the pipeline (the session's Tansu broker, the embedded
ClickHouse store) runs on a thread and serves its health endpoints; the test sends real
OTLP span records and a poison record, scrapes /metrics over HTTP as Prometheus would,
and parses the text with prometheus-client's text-format parser.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from guardtrace.consumers import consumer as consumer_module
from guardtrace.consumers import metrics as m
from guardtrace.consumers.consumer import TelemetryConsumer
from guardtrace.consumers.decode import decode_spans
from guardtrace.consumers.health import HealthServer
from guardtrace.schemas import names
from guardtrace.store import tables
from guardtrace.store.writer import ClickHouseWriter
from guardtrace.transport.broker import free_port

from .conftest import Pipeline, wait_for

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def span_records(count: int, prefix: str) -> list[bytes]:
    """``count`` OTLP trace requests, each one traced request with one guard event."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(names.INSTRUMENTATION_NAME)
    for i in range(count):
        request_id = f"{prefix}-{i}"
        with tracer.start_as_current_span("plan.validate", attributes={
                names.ATTR_REQUEST_ID: request_id}) as span:
            span.add_event(names.EVENT_HALLUCINATION_DETECTED, {
                names.ATTR_REQUEST_ID: request_id, names.ATTR_MODULE: names.MODULE_PLANNING,
                names.ATTR_AGENT: "planner"})
    provider.shutdown()
    return [encode_spans([span]).SerializeToString() for span in exporter.get_finished_spans()]


def send(pipeline: Pipeline, values: list[bytes], one_batch_each: bool = False) -> None:
    """Send to the spans topic, all to one partition (one key).

    Args:
        one_batch_each: One producer batch per record. Tansu answers ListOffsets(latest)
            with the last batch's base offset + 1, so the lag of a paused partition (no
            fetch, no high watermark) counts batches there, not records
            (transport/kafka_workarounds.py, true_log_end); Apache Kafka counts records.
    """
    producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap)
    for value in values:
        producer.send(pipeline.topics.spans, key=b"k", value=value)
        if one_batch_each:
            producer.flush()
    producer.flush()
    producer.close()


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name`` over every series whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, series), v in samples.items() if n == name and wanted <= series)


@contextmanager
def serving(consumer: TelemetryConsumer) -> Iterator[int]:
    """Run the consumer on a thread with its health server; yield the server's port."""
    health = HealthServer(consumer, port=free_port(), host="127.0.0.1").start()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            consumer.run()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failure.append(exc)

    thread = threading.Thread(target=run, name="metrics-test-consumer", daemon=True)
    thread.start()
    try:
        wait_for(consumer._assigned.is_set, timeout_s=30,
                 message="the consumer to be assigned partitions")
        yield health.port
    finally:
        consumer.stop()
        thread.join(30)
        health.stop()
    assert not failure, failure
    assert not thread.is_alive()


@pytest.fixture(autouse=True)
def quick_lag_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    # The loop reads its lag every 10 s; the tests would wait for that.
    monkeypatch.setattr(consumer_module, "LAG_REFRESH_S", 0.2)


def test_counters_move_with_the_traffic_consumed(pipeline: Pipeline) -> None:
    records = span_records(20, "metrics")
    per_record = {table: len(rows) for table, rows in decode_spans(records[0]).by_table().items()
                  if rows}
    assert per_record[tables.SPAN_EVENTS] >= 1
    consumer = pipeline.consumer()
    with serving(consumer) as port:
        before = scrape(port)
        assert total(before, m.RECORDS_CONSUMED, topic=pipeline.topics.spans) == 0
        assert total(before, m.LAST_COMMIT) == 0

        sent_at = time.time()
        send(pipeline, records)
        after = wait_for(
            lambda: (s := scrape(port)) and total(s, m.ROWS_WRITTEN, table=tables.SPAN_EVENTS)
            >= len(records) * per_record[tables.SPAN_EVENTS] and s,
            timeout_s=30, message="rows written to reach the records sent")
        for table, rows in per_record.items():
            assert total(after, m.ROWS_WRITTEN, table=table) == len(records) * rows, table
        assert total(after, m.RECORDS_CONSUMED, topic=pipeline.topics.spans) == len(records)
        assert total(after, m.BATCH_WRITE_SECONDS + "_count") >= 1
        assert total(after, m.BATCH_WRITE_SECONDS + "_sum") > 0
        assert sent_at - 1 <= total(after, m.LAST_COMMIT) <= time.time() + 1
        assert total(after, m.DEAD_LETTERS) == 0
        # The store holds what the counter says was written.
        assert pipeline.scalar("SELECT count() FROM {db}.span_events FINAL") == \
            total(after, m.ROWS_WRITTEN, table=tables.SPAN_EVENTS)
        # Lag is read per assigned partition, and everything sent has been consumed.
        settled = wait_for(
            lambda: (s := scrape(port)) and any(n == m.LAG_RECORDS for n, _ in s)
            and total(s, m.LAG_RECORDS) == 0 and s,
            timeout_s=15, message="the lag gauges to read 0")
        assert {dict(labels)["topic"] for n, labels in settled if n == m.LAG_RECORDS} \
            >= {pipeline.topics.spans}

        send(pipeline, [b"\x00\xffnot protobuf at all"])
        poisoned = wait_for(lambda: (s := scrape(port)) and total(s, m.DEAD_LETTERS) == 1 and s,
                            timeout_s=30, message="the dead-letter counter to move")
    # The label is the reason kind the store recorded for the same record.
    (kind,) = pipeline.rows("SELECT reason_kind FROM {db}.dead_letters FINAL")[0]
    assert total(poisoned, m.DEAD_LETTERS, reason_kind=kind) == 1
    assert total(poisoned, m.RECORDS_CONSUMED, topic=pipeline.topics.spans) == len(records) + 1
    assert consumer.stats.dead_letter_reasons == {kind: 1}


class Outage:
    """The real writer behind a switch: fails while ClickHouse is "down"."""

    def __init__(self, inner: ClickHouseWriter) -> None:
        self.inner = inner
        self.down = threading.Event()

    def write(self, rows: Any) -> dict[str, int]:
        if self.down.is_set():
            raise ConnectionError("ClickHouse unavailable (injected)")
        return self.inner.write(rows)


def test_an_outage_shows_as_failures_retries_and_growing_lag(
        pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    # Retries back off up to 30 s; the test does not wait that long once the outage ends.
    monkeypatch.setattr(consumer_module, "_BACKOFF_MAX_S", 1.0)
    writer = Outage(ClickHouseWriter(pipeline.client, pipeline.database))
    writer.down.set()
    consumer = pipeline.consumer(writer=writer)
    first, held_back = span_records(5, "before"), span_records(12, "during")
    with serving(consumer) as port:
        send(pipeline, first)
        wait_for(lambda: total(scrape(port), m.WRITE_RETRIES) >= 1, timeout_s=30,
                 message="a failed write to be retried")
        # Partitions are paused while the batch is retried: what arrives now is lag.
        send(pipeline, held_back, one_batch_each=True)
        during = wait_for(
            lambda: (s := scrape(port)) and total(s, m.LAG_RECORDS) == len(held_back) and s,
            timeout_s=30, message="the lag to count the records held back")
        assert total(during, m.WRITE_FAILURES, cause="store") >= 1
        assert total(during, m.WRITE_FAILURES, cause="dead_letters") == 0
        assert total(during, m.ROWS_WRITTEN) == 0
        assert total(during, m.LAST_COMMIT) == 0

        writer.down.clear()
        sent = len(first) + len(held_back)
        after = wait_for(
            lambda: (s := scrape(port)) and total(s, m.LAG_RECORDS) == 0
            and total(s, m.ROWS_WRITTEN, table=tables.SPANS) >= sent and s,
            timeout_s=30, message="the backlog to be written and the lag to return to 0")
    assert total(after, m.ROWS_WRITTEN, table=tables.SPANS) == sent
    assert total(after, m.RECORDS_CONSUMED) == sent
    assert total(after, m.LAST_COMMIT) > 0
    assert total(after, m.WRITE_RETRIES) == consumer.stats.write_retries >= 1
