"""ClickHouse failing under a running consumer: nothing committed, backoff, full recovery.

With the embedded engine there is no server to take down, so the fault is injected at
the consumer's only door to ClickHouse, the ``BatchWriter`` seam: for a period every
insert fails the way clickhouse-connect fails when a server is unreachable
(``OperationalError``), and every other failure first writes part of the batch (the
spans, not their events), as a server dying mid-batch does. Meanwhile more telemetry
arrives. Checked while it happens, from inside the writer (the consumer's writer
thread, then its own thread while it retries): the group's committed offsets never pass
what ClickHouse holds, nothing new is fetched once the consumer knows of the failure
(partitions paused), and the retries back off exponentially. Afterwards:
every event exactly once, everything committed.

Sizes: a 4 s outage over 3,000 + 1,000 events in CI; ``GUARDTRACE_RELIABILITY_FULL=1``
runs the 30 s outage of the design's reliability target over 20,000 + 10,000 events.
"""

from __future__ import annotations

import itertools
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.exceptions import OperationalError
from kafka import KafkaAdminClient, KafkaProducer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from guardtrace import collectors
from guardtrace.collectors.emit.telemetry import GuardTelemetry
from guardtrace.collectors.export import kafka_exporters
from guardtrace.consumers.consumer import ConsumerConfig, TelemetryConsumer
from guardtrace.schemas import names
from guardtrace.store.rows import DecodedRows
from guardtrace.store.writer import ClickHouseWriter

from .conftest import Pipeline, wait_for
from .faults import GiveUpAfter, Stalled
from .scale import FULL, seconds, size

pytestmark = [pytest.mark.usefixtures("collectors_reset")]


@pytest.fixture(autouse=True)
def one_trace_per_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each spans-topic record carries one trace, as the checks below count: committed
    records against stored events. (The exporter packs the traces bound for one
    partition into one message; that is tested on its own, not here.)"""
    monkeypatch.setattr(kafka_exporters, "_SPANS_PER_MESSAGE", 1)


BEFORE, DURING = size(ci=3_000, full=20_000), size(ci=1_000, full=10_000)
OUTAGE_S = seconds(ci=4.0, full=30.0)
# The consumer's backoff: 0.5 s doubling, at most 30 s (consumers/consumer.py).
BACKOFF_START_S, BACKOFF_MAX_S = 0.5, 30.0


def emit(telemetry: collectors.Telemetry, prefix: str, count: int) -> list[str]:
    """Emit ``count`` requests (one span, one guard event each) and flush them."""
    guard = GuardTelemetry(names.MODULE_PLANNING, "hallucination_detection")
    tracer = telemetry.tracer_provider.get_tracer("reliability")
    request_ids = [f"{prefix}-{i}" for i in range(count)]
    for i, request_id in enumerate(request_ids):
        with tracer.start_as_current_span("plan", attributes={names.ATTR_REQUEST_ID: request_id}):
            guard.event(names.EVENT_HALLUCINATION_DETECTED, request_id,
                        {names.ATTR_AGENT: f"tool-{i % 5}"})
        if (i + 1) % 500 == 0:
            assert telemetry.force_flush(30)
    assert telemetry.force_flush(30)
    return request_ids


def committed_span_records(admin: KafkaAdminClient, pipeline: Pipeline) -> int:
    """Spans-topic records the test's consumer group has committed (one event each)."""
    group = pipeline.consumer_config.group_id
    offsets = admin.list_group_offsets(group).get(group, {})
    return sum(m.offset for tp, m in offsets.items()
               if tp.topic == pipeline.consumer_config.spans_topic)


class ClickHouseOutage:
    """A ``BatchWriter`` whose ClickHouse is unavailable for ``outage_s`` seconds.

    The outage starts at the first write after ``healthy_writes`` successful ones.
    Before every write it checks that the consumer group has committed no offset past
    the rows ClickHouse holds (each spans-topic record carries exactly one span event).

    Args:
        inner: The real writer.
        pipeline: The test's pipeline (for reading ClickHouse).
        outage_s: How long inserts fail.
        healthy_writes: Successful writes before the outage.
        on_outage: Called once when the outage starts (starts more traffic).
    """

    def __init__(self, inner: ClickHouseWriter, pipeline: Pipeline, outage_s: float,
                 healthy_writes: int, on_outage: Any) -> None:
        self.inner, self.pipeline, self.outage_s = inner, pipeline, outage_s
        self.healthy_writes, self.on_outage = healthy_writes, on_outage
        self.consumer: TelemetryConsumer | None = None
        self.admin = KafkaAdminClient(bootstrap_servers=pipeline.bootstrap)
        self.writes = 0
        self.outage_started: float | None = None
        self.failures: list[float] = []  # monotonic time of each failed write
        self.records_seen: list[int] = []  # consumer's record count at each failure
        self.last_polls: list[float | None] = []  # consumer's last poll at each failure
        self.committed_at_outage: int | None = None
        self.checks = 0

    def committed(self) -> int:
        return committed_span_records(self.admin, self.pipeline)

    def check_nothing_committed_beyond_stored(self) -> int:
        committed = self.committed()
        stored = self.pipeline.scalar("SELECT count() FROM {db}.span_events FINAL")
        assert committed <= stored, (
            f"offsets committed for {committed} span records, ClickHouse holds {stored}")
        self.checks += 1
        return committed

    def write(self, rows: DecodedRows) -> dict[str, int]:
        committed = self.check_nothing_committed_beyond_stored()
        now = time.monotonic()
        if self.outage_started is None and self.writes >= self.healthy_writes:
            self.outage_started, self.committed_at_outage = now, committed
            self.on_outage()
        if self.outage_started is not None and now - self.outage_started < self.outage_s:
            self.failures.append(now)
            assert self.consumer is not None
            self.records_seen.append(self.consumer.stats.records)
            self.last_polls.append(self.consumer.last_poll_monotonic)
            assert committed == self.committed_at_outage, "an offset was committed mid-outage"
            if len(self.failures) % 2 == 0:
                # A server dying mid-batch: the spans are in, their events are not.
                self.inner.write(DecodedRows(spans=rows.spans))
            raise OperationalError("Error HTTPConnectionPool(host='clickhouse', port=8123): "
                                   "Connection refused (injected by the reliability suite)")
        self.writes += 1
        return self.inner.write(rows)


@pytest.mark.timeout(600 if FULL else 180)
def test_clickhouse_outage_commits_nothing_backs_off_and_recovers_everything(
        pipeline: Pipeline) -> None:
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    before = emit(telemetry, "before", BEFORE)
    during: list[str] = []

    def traffic_during_outage() -> None:
        during.extend(emit(telemetry, "during", DURING))

    sender = threading.Thread(target=traffic_during_outage, daemon=True)
    writer = ClickHouseOutage(ClickHouseWriter(pipeline.client, pipeline.database), pipeline,
                              OUTAGE_S, healthy_writes=2, on_outage=sender.start)
    consumer = pipeline.consumer(writer=writer, batch_max_rows=1000)
    writer.consumer = consumer
    stats = consumer.run(until_idle_s=3)
    sender.join(timeout=120)

    # Retried with exponential backoff: each wait at least the consumer's schedule
    # (0.5 s, 1 s, 2 s, ... capped at 30 s; a busy machine only makes them longer).
    failures = writer.failures
    assert len(failures) >= 3 and stats.write_retries == len(failures)
    gaps = [b - a for a, b in itertools.pairwise(failures)]
    for i, gap in enumerate(gaps):
        assert gap >= 0.9 * min(BACKOFF_START_S * 2**i, BACKOFF_MAX_S), gaps
    # Partitions were paused: the outage's new traffic was not fetched meanwhile. The
    # first failure happens on the writer thread, while the loop may be taking in one
    # more poll; from the first retry on (the loop knows), nothing more arrives.
    seen = writer.records_seen
    assert len(set(seen[1:])) == 1, seen
    one_poll = consumer._consumer.config["max_poll_records"]
    assert 0 <= seen[1] - seen[0] <= one_poll, seen
    assert writer.checks > len(failures)
    # ...yet the consumer kept polling through every backoff wait, so it stayed in its
    # group and its /healthz (which reads last_poll_monotonic) said it was alive.
    for failed, next_poll in zip(failures, writer.last_polls[1:], strict=False):
        assert next_poll is not None and next_poll > failed, (failures, writer.last_polls)

    # Recovery: everything stored exactly once, and all of it committed.
    total = len(before) + len(during)
    assert len(during) == DURING
    assert pipeline.scalar("SELECT count() FROM {db}.span_events FINAL") == total
    assert pipeline.scalar("SELECT uniqExact(event_id) FROM {db}.span_events FINAL") == total
    assert pipeline.scalar("SELECT count() FROM {db}.spans FINAL") == total
    stored_ids = {r[0] for r in pipeline.rows("SELECT request_id FROM {db}.span_events FINAL")}
    assert stored_ids == set(before) | set(during)
    # Every spans-topic record committed (one record per event). Not compared with the
    # broker's end offsets: Tansu answers "latest" with the last batch's base offset.
    assert writer.committed() == total
    assert stats.dead_letters == 0


class DownUntilStopped:
    """A ``BatchWriter`` whose ClickHouse is down from write ``healthy + 1`` until just
    after the consumer is told to stop: the first write after the stop still fails,
    every later one succeeds (the server comes back between two attempts)."""

    def __init__(self, inner: ClickHouseWriter, healthy: int) -> None:
        self.inner, self.healthy = inner, healthy
        self.consumer: TelemetryConsumer | None = None
        self.writes = self.failures = self.failures_after_stop = 0

    def write(self, rows: DecodedRows) -> dict[str, int]:
        assert self.consumer is not None
        stopping = self.consumer._stop.is_set()
        if self.writes >= self.healthy and not (stopping and self.failures_after_stop):
            self.failures += 1
            self.failures_after_stop += stopping
            raise OperationalError("Connection refused (injected by the reliability suite)")
        self.writes += 1
        return self.inner.write(rows)


@pytest.mark.timeout(120)
def test_stopping_during_an_outage_commits_nothing_past_what_clickhouse_holds(
        pipeline: Pipeline) -> None:
    # SIGTERM while a batch is being retried: that batch is given up uncommitted, and so
    # is every batch behind it, including the rest of the poll it was cut from. Found
    # while adding the writer thread: the rest of that poll went into a new batch, the
    # exit flush wrote it (ClickHouse back by then) and committed past the given-up one.
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    emitted = emit(telemetry, "stop", 3_000)
    writer = DownUntilStopped(ClickHouseWriter(pipeline.client, pipeline.database), healthy=1)
    # 100 records (a span and its event each) fill a batch, and a poll brings up to
    # 1,000: the batch that fails is cut from the middle of a poll.
    config = ConsumerConfig(**{**pipeline.consumer_config.__dict__, "batch_max_rows": 200})
    consumer = TelemetryConsumer(config, writer, consumer_overrides={"max_poll_records": 1000})
    writer.consumer = consumer
    thread = threading.Thread(target=consumer.run, daemon=True)
    thread.start()
    wait_for(lambda: writer.failures >= 2, 60, message="the consumer to be retrying")
    consumer.stop()
    thread.join(60)
    assert not thread.is_alive()

    admin = KafkaAdminClient(bootstrap_servers=pipeline.bootstrap)
    try:
        committed = committed_span_records(admin, pipeline)
    finally:
        admin.close()
    stored = pipeline.scalar("SELECT count() FROM {db}.span_events FINAL")
    assert 0 < committed <= stored, (committed, stored)

    # ClickHouse is back: the next run replays what was given up, and nothing is lost.
    pipeline.consume_until_idle()  # all on the broker already; the counts below are exact
    assert pipeline.scalar("SELECT count() FROM {db}.span_events FINAL") == len(emitted)
    assert pipeline.scalar("SELECT uniqExact(event_id) FROM {db}.span_events") == len(emitted)


@pytest.mark.timeout(120)
def test_spans_from_more_than_100_days_in_one_batch_do_not_stall_the_consumer(
        pipeline: Pipeline) -> None:
    # A backfill: one span per day over 101 days (future days: no TTL removes them).
    first_day = datetime.now(UTC) + timedelta(days=1)
    producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap)
    for day in range(101):
        request = ExportTraceServiceRequest()
        span = request.resource_spans.add().scope_spans.add().spans.add(
            trace_id=day.to_bytes(16, "big"), span_id=(day + 1).to_bytes(8, "big"),
            name="backfilled")
        start = int((first_day + timedelta(days=day)).timestamp()) * 10**9
        span.start_time_unix_nano, span.end_time_unix_nano = start, start + 1000
        # One partition, so all 101 spans are in one batch.
        producer.send(pipeline.consumer_config.spans_topic, value=request.SerializeToString(),
                      partition=0)
    producer.flush()
    producer.close()

    writer = GiveUpAfter(ClickHouseWriter(pipeline.client, pipeline.database), failures=2)
    try:
        pipeline.consumer(writer=writer).run(until_idle_s=3)
    except Stalled as stalled:
        pytest.fail(f"the consumer retried one batch {writer.failures + 1} times and would "
                    f"never stop: {stalled}")
    assert pipeline.scalar("SELECT count() FROM {db}.spans FINAL") + \
        pipeline.scalar("SELECT count() FROM {db}.dead_letters FINAL") == 101


class SharedOutage:
    """``BatchWriter`` for several consumers of one ClickHouse, down between two times.

    Writes are serialised (the consumers share one embedded client).

    Args:
        inner: The real writer.
        outage: Shared state; ``outage["until"]`` (monotonic) is set by the test.
    """

    lock = threading.Lock()

    def __init__(self, inner: ClickHouseWriter, outage: dict[str, float]) -> None:
        self.inner, self.outage = inner, outage
        self.writes = self.failures = 0

    def write(self, rows: DecodedRows) -> dict[str, int]:
        if time.monotonic() < self.outage.get("until", 0.0):
            self.failures += 1
            raise OperationalError("Connection refused (injected by the reliability suite)")
        with self.lock:
            written = self.inner.write(rows)
        self.writes += 1
        return written


def wait_until_settled(count: Any, expected: int, quiet_s: float = 4.0,
                       timeout_s: float = 60.0) -> int:
    """Poll ``count()`` until it reaches ``expected`` or stops changing for ``quiet_s``."""
    deadline = time.monotonic() + timeout_s
    last, changed = count(), time.monotonic()
    while last < expected and time.monotonic() < deadline:
        time.sleep(0.5)
        now = count()
        if now != last:
            last, changed = now, time.monotonic()
        elif time.monotonic() - changed >= quiet_s:
            break
    return last


@pytest.mark.timeout(180)
def test_a_consumer_leaving_during_an_outage_loses_nothing(pipeline: Pipeline) -> None:
    """Scaling in, or a member crashing, while ClickHouse is down.

    Two consumers share the partitions; ClickHouse goes down; one of them stops. The
    rebalance hands its partitions to the other in the middle of that one's retry loop.
    Whatever it fetches from them while it waits must be written later, not skipped.
    """
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    outage: dict[str, float] = {}

    def member() -> tuple[TelemetryConsumer, SharedOutage, threading.Thread]:
        writer = SharedOutage(ClickHouseWriter(pipeline.client, pipeline.database), outage)
        consumer = pipeline.consumer(writer=writer)
        thread = threading.Thread(target=consumer.run, daemon=True)
        thread.start()
        return consumer, writer, thread

    (staying, staying_writer, staying_thread), (leaving, leaving_writer, leaving_thread) = \
        member(), member()
    emitted: list[str] = []
    try:
        # Traffic until both members have written a batch: the group is settled.
        for round_ in range(60):
            emitted += emit(telemetry, f"warmup{round_}", 200)
            if staying_writer.writes and leaving_writer.writes:
                break
            time.sleep(0.5)
        assert staying_writer.writes and leaving_writer.writes, "the group never settled"

        # 7 s: the retry after the 0.5, 1, 2 and 4 s waits (7.5 s in) succeeds.
        outage["until"] = time.monotonic() + 7.0
        emitted += emit(telemetry, "during", 2_000)
        wait_for(lambda: staying_writer.failures and leaving_writer.failures,
                 message="both members to be retrying")
        leaving.stop()
        leaving_thread.join(timeout=60)
        wait_for(lambda: staying_writer.writes > 1 and time.monotonic() > outage["until"],
                 timeout_s=60, message="the surviving member to recover")
        # More traffic after recovery: the surviving member's next batches commit.
        emitted += emit(telemetry, "after", 1_000)
        wait_until_settled(
            lambda: pipeline.scalar("SELECT count() FROM {db}.span_events FINAL"), len(emitted))
    finally:
        staying.stop()
        leaving.stop()
        staying_thread.join(timeout=60)
        leaving_thread.join(timeout=60)

    stored = {r[0] for r in pipeline.rows("SELECT request_id FROM {db}.span_events FINAL")}
    lost = sorted(set(emitted) - stored)
    assert staying.stats.write_retries >= 2
    assert not lost, f"{len(lost)} of {len(emitted)} events lost, e.g. {lost[:5]}"
