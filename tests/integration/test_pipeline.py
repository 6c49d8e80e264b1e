"""Exporter -> Kafka (Tansu) -> consumer -> ClickHouse (chDB), with the real components."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import pytest
from kafka import KafkaProducer
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardtrace import collectors
from guardtrace.collectors.emit.telemetry import GuardTelemetry
from guardtrace.schemas import names
from guardtrace.store.writer import ClickHouseWriter
from tests.support.agent_thread import watch_kafka_waits
from tests.support.topic_reader import read_records

from .conftest import Pipeline, wait_for

pytestmark = [pytest.mark.usefixtures("collectors_reset")]


def emit_requests(telemetry: collectors.Telemetry, count: int, *, payloads: bool = True,
                  prefix: str = "req") -> list[str]:
    """Emit ``count`` requests: a span with a guard event, a counter, maybe a payload."""
    guard = GuardTelemetry(names.MODULE_PLANNING, "hallucination_detection")
    tracer = telemetry.tracer_provider.get_tracer("test")
    request_ids = []
    for i in range(count):
        request_id = f"{prefix}-{i}"
        request_ids.append(request_id)
        with tracer.start_as_current_span("plan", attributes={names.ATTR_REQUEST_ID: request_id}):
            guard.event(names.EVENT_HALLUCINATION_DETECTED, request_id, {
                names.ATTR_AGENT: f"tool-{i % 5}", names.ATTR_HALL_RETRY: 1})
            guard.count(names.METRIC_HALLUCINATIONS, agent=f"tool-{i % 5}")
            if payloads:
                guard.payload(request_id, names.PAYLOAD_KIND_HALLUCINATION,
                              {"prompt": f"plan request {i}", "response": "time-tool-v1"})
    assert telemetry.force_flush(30)
    return request_ids


def test_spans_events_metrics_payloads_land_row_for_row(pipeline: Pipeline) -> None:
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    memory = InMemorySpanExporter()
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(memory))
    request_ids = emit_requests(telemetry, 300)

    stats = pipeline.consume_until_idle()

    assert stats.dead_letters == 0
    sent = {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}", s.name,
             s.attributes[names.ATTR_REQUEST_ID]) for s in memory.get_finished_spans()}
    stored = set(pipeline.rows(
        "SELECT trace_id, span_id, name, request_id FROM {db}.spans FINAL"))
    assert stored == sent
    events = pipeline.rows(
        "SELECT request_id, name, module, agent, attributes['hall_retry'] "
        "FROM {db}.span_events FINAL ORDER BY request_id")
    assert sorted(e[0] for e in events) == sorted(request_ids)
    assert {e[1] for e in events} == {names.EVENT_HALLUCINATION_DETECTED}
    assert {e[2] for e in events} == {names.MODULE_PLANNING}
    assert {e[3] for e in events} == {f"tool-{i}" for i in range(5)}
    assert {e[4] for e in events} == {"1"}
    bodies = pipeline.rows(
        "SELECT request_id, body FROM {db}.payloads FINAL WHERE request_id = {rid:String}",
        rid="req-7")
    assert len(bodies) == 1 and json.loads(bodies[0][1])["prompt"] == "plan request 7"
    # Counters arrive as cumulative points labelled with module and agent.
    collectors.shutdown()  # final metric export
    pipeline.consume_until_idle()
    totals = dict(pipeline.rows(
        "SELECT agent, max(value) FROM {db}.metric_points FINAL "
        "WHERE metric_name = {m:String} GROUP BY agent", m=names.METRIC_HALLUCINATIONS))
    assert totals == {f"tool-{i}": 60.0 for i in range(5)}
    # The lookup table knows every request and its trace.
    lookup = pipeline.rows(
        "SELECT request_id, trace_ids, event_names, payload_kinds FROM {db}.requests FINAL "
        "WHERE request_id = {rid:String}", rid="req-7")
    assert lookup[0][2] == [names.EVENT_HALLUCINATION_DETECTED]
    assert lookup[0][3] == [names.PAYLOAD_KIND_HALLUCINATION]
    assert len(lookup[0][1]) == 1


class SimulatedCrash(BaseException):
    """Stands for the process dying: not an Exception, so nothing in the loop catches it."""


class CrashAfterWrite:
    """Writes batches for real, then dies after the Nth write, before the commit."""

    def __init__(self, inner: ClickHouseWriter, crash_on: int) -> None:
        self.inner = inner
        self.crash_on = crash_on
        self.writes = 0

    @property
    def rows_written(self) -> int:
        return self._rows

    _rows = 0

    def write(self, rows: Any) -> dict[str, int]:
        written = self.inner.write(rows)
        self._rows += written.get("span_events", 0)
        self.writes += 1
        if self.writes == self.crash_on:
            raise SimulatedCrash()
        return written


def test_consumer_crash_between_write_and_commit_loses_and_duplicates_nothing(
        pipeline: Pipeline) -> None:
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    request_ids = emit_requests(telemetry, 1500, payloads=False)

    writer = CrashAfterWrite(ClickHouseWriter(pipeline.client, pipeline.database), crash_on=2)
    with pytest.raises(SimulatedCrash):
        pipeline.consumer(writer=writer, batch_max_rows=200).run(until_idle_s=5)
    raw_after_crash = pipeline.scalar("SELECT count() FROM {db}.span_events")
    assert 0 < raw_after_crash < len(request_ids)

    stats = pipeline.consume_until_idle(batch_max_rows=200)

    # The uncommitted second batch was replayed: more rows were written than emitted...
    assert writer.rows_written + stats.rows_written["span_events"] > len(request_ids)
    # ...yet no reader sees a duplicate: every event exactly once.
    assert pipeline.scalar("SELECT count() FROM {db}.span_events FINAL") == len(request_ids)
    assert pipeline.scalar(
        "SELECT uniqExact(request_id) FROM {db}.span_events FINAL") == len(request_ids)
    # The per-minute rollup counts distinct event ids, so the replay did not inflate it.
    assert pipeline.scalar(
        "SELECT uniqMerge(events) FROM {db}.event_rollup_1m") == len(request_ids)


def test_poison_records_go_to_dead_letters_and_good_records_land(pipeline: Pipeline) -> None:
    config = pipeline.consumer_config
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    emit_requests(telemetry, 50)
    metrics_like = bytes.fromhex("0a0a120812060a0474657374")  # a metrics-shaped request
    producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap)
    poison = [
        (config.spans_topic, b"\x00\xffnot protobuf at all"),
        (config.spans_topic, metrics_like),
        (config.metrics_topic, b"garbage"),
        (config.payloads_topic, b"{\"not\": \"zstd\"}"),
    ]
    for topic, value in poison:
        producer.send(topic, key=b"poison", value=value)
    producer.flush()
    emit_requests(telemetry, 50, prefix="after")

    stats = pipeline.consume_until_idle()

    assert stats.dead_letters == len(poison)
    assert pipeline.scalar("SELECT count() FROM {db}.span_events FINAL") == 100
    assert pipeline.scalar("SELECT uniqExact(payload_id) FROM {db}.payloads FINAL") == 100
    letters = read_records(config.dead_letter_topic, len(poison),
                           bootstrap_servers=pipeline.bootstrap)
    assert sorted(r.value for r in letters) == sorted(v for _, v in poison)
    for record in letters:
        headers = dict(record.headers)
        assert headers[names.HEADER_DLQ_ERROR]
        assert headers[names.HEADER_DLQ_SOURCE_TOPIC].decode() in config.topics
        assert int(headers[names.HEADER_DLQ_SOURCE_OFFSET]) >= 0
    # The same dead letters are rows in ClickHouse (what the health page counts), one per
    # source position, with the reason and a hex sample of the bytes.
    rows = pipeline.client.query(
        "SELECT source_topic, reason_kind, reason, value_bytes, value_sample "
        "FROM {db}.dead_letters FINAL ORDER BY value_sample".replace("{db}", pipeline.database)
    ).result_rows
    assert sorted((topic, bytes.fromhex(sample)) for topic, _, _, _, sample in rows) == \
        sorted(poison)
    assert all(reason and kind and size > 0 for _, kind, reason, size, _ in rows)


def test_clickhouse_failure_is_retried_without_commit_then_recovers(pipeline: Pipeline) -> None:
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    request_ids = emit_requests(telemetry, 200, payloads=False)

    class FailingFirst:
        def __init__(self, inner: ClickHouseWriter, failures: int) -> None:
            self.inner, self.failures, self.calls = inner, failures, 0

        def write(self, rows: Any) -> dict[str, int]:
            self.calls += 1
            if self.calls <= self.failures:
                raise ConnectionError("ClickHouse unavailable (injected)")
            return self.inner.write(rows)

    writer = FailingFirst(ClickHouseWriter(pipeline.client, pipeline.database), failures=2)
    stats = pipeline.consumer(writer=writer).run(until_idle_s=3)

    assert stats.write_retries == 2
    assert pipeline.scalar("SELECT count() FROM {db}.span_events FINAL") == len(request_ids)


def test_kafka_down_hooks_return_promptly_and_drops_are_counted(
        broker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from guardtrace.collectors.emit.telemetry import internal_totals
    from guardtrace.transport.broker import EmbeddedBroker, free_port

    own = EmbeddedBroker(free_port()).start()
    telemetry = collectors.configure(set_global=False, kafka_bootstrap=own.bootstrap,
                                     metric_export_interval_ms=60_000)
    guard = GuardTelemetry(names.MODULE_REPLIES, "fabrication_detection")
    before = internal_totals(names.METRIC_PAYLOADS_DROPPED)
    own.stop()

    # Promptly: nothing that can wait for Kafka (asking for the producer waits for a
    # connection, a send up to max_block_ms) runs on the caller's thread. A wall-clock
    # bound would let a busy machine decide instead.
    waited_on = watch_kafka_waits(monkeypatch)
    for i in range(500):
        guard.event(names.EVENT_FABRICATION_DETECTED, f"r{i}", {names.ATTR_TIER: "action"})
        guard.count(names.METRIC_FABRICATIONS, agent="a", labels={names.ATTR_TIER: "action"})
        guard.payload(f"r{i}", names.PAYLOAD_KIND_FABRICATION, "x" * 1000)
    assert waited_on == [], "a hook asked Kafka for something on the caller's thread"

    def payload_drops() -> int:
        after = internal_totals(names.METRIC_PAYLOADS_DROPPED)
        return sum(after.values()) - sum(before.values())

    telemetry.force_flush(5)
    assert wait_for(lambda: payload_drops() >= 1, timeout_s=30, message="payload drops")
    threading.Thread(target=collectors.shutdown, daemon=True).start()


def test_running_consumer_logs_its_counters(pipeline: Pipeline, caplog: pytest.LogCaptureFixture,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from guardtrace.consumers import consumer as consumer_module

    monkeypatch.setattr(consumer_module, "STATS_LOG_INTERVAL_S", 0.0)
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    emit_requests(telemetry, 100, payloads=False)
    with caplog.at_level("INFO", logger="guardtrace.consumers"):
        pipeline.consume_until_idle()
    reports = [json.loads(r.getMessage().removeprefix("consumer stats "))
               for r in caplog.records if r.getMessage().startswith("consumer stats ")]
    assert reports, "no periodic stats line was logged"
    assert reports[-1]["rows_written"]["span_events"] >= 1
    assert {"batches", "write_retries", "dead_letters", "lag"} <= set(reports[-1])


def test_batches_are_bounded_by_bytes_not_only_rows(pipeline: Pipeline) -> None:
    # 12 payloads of ~150 KB (random hex, so zstd cannot shrink them below half, in words
    # of lower-case hex that redaction leaves alone as ids: one long random token would be
    # redacted whole), a row limit and an age the run never reaches: only the byte bound
    # can split the batches, and nothing may be lost across the splits.
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    for i in range(12):
        digits = os.urandom(75_000).hex()
        collectors.record_payload(f"big-{i}", names.PAYLOAD_KIND_HALLUCINATION,
                                  " ".join(digits[k:k + 64] for k in range(0, len(digits), 64)))
    assert telemetry.force_flush(30)
    stats = pipeline.consume_until_idle(batch_max_rows=100_000, batch_max_seconds=60.0,
                                        batch_max_bytes=250_000)
    # ~75 KB per record after zstd, so at most 4 records fit under the bound per batch.
    assert stats.batches >= 3
    assert pipeline.scalar("SELECT uniqExact(payload_id) FROM {db}.payloads FINAL") == 12


class KeepsWhatItWrote:
    """A ``BatchWriter`` that, like clickhouse-connect's insert context, keeps a reference
    to every batch of rows it inserted."""

    def __init__(self, inner: ClickHouseWriter) -> None:
        self.inner = inner
        self.kept: list[Any] = []

    def write(self, rows: Any) -> dict[str, int]:
        written = self.inner.write(rows)
        self.kept.append(rows)
        return written


def test_written_batches_are_released_even_where_the_writer_keeps_them(
        pipeline: Pipeline) -> None:
    # clickhouse-connect's InsertContext holds the list it inserted in a reference cycle,
    # so a written batch lived until the cyclic GC ran; with payloads that was about three
    # batches of bodies on the heap. The consumer empties a batch's rows once written.
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    request_ids = emit_requests(telemetry, 200)
    writer = KeepsWhatItWrote(ClickHouseWriter(pipeline.client, pipeline.database))
    stats = pipeline.consumer(writer=writer, batch_max_rows=100).run(until_idle_s=2)
    assert len(writer.kept) >= 2 and stats.batches == len(writer.kept)
    assert [len(rows) for rows in writer.kept] == [0] * len(writer.kept)
    assert stats.rows_written["span_events"] == len(request_ids)
    assert stats.rows_written["payloads"] == len(request_ids)
    assert pipeline.scalar("SELECT uniqExact(event_id) FROM {db}.span_events") == len(request_ids)
