"""The consumer's own metrics, for Prometheus: served at ``/metrics`` beside ``/healthz``.

One :class:`ConsumerMetrics` per consumer, in a registry of its own (never
prometheus-client's global one), so two consumers in one process, or one per test, count
apart. The consumer loop reports what it already knows, and at the grain it knows it:
records per partition per poll, rows per table per batch, one timing per batch write.
Nothing here runs per record except a dead letter, which is rare by nature.

The HTTP thread of :class:`~.health.HealthServer` renders the registry when scraped;
prometheus-client's metrics are thread-safe, so it never waits for the loop. Lag is read
on the loop's thread (a Kafka client is not thread-safe) with :func:`partition_lag`, at
most every :data:`LAG_REFRESH_S`, and served as last read.

The metric names below are what Prometheus stores and what ``deploy/grafana``'s dashboard
and the README name; ``tests/unit/test_consumer_metrics.py`` checks that they agree.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder

from ..transport.kafka_workarounds import true_log_end
from .dead_letters import DeadLetterNotDelivered

__all__ = ["BATCH_WRITE_SECONDS", "DEAD_LETTERS", "DROP_ABANDONED", "DROP_REVOKED",
           "LAG_REFRESH_S", "LAG_RECORDS", "LAST_COMMIT", "MAX_REASON_KINDS", "METRIC_NAMES",
           "OTHER_REASON_KIND", "RECORDS_CONSUMED", "RECORDS_DROPPED", "ROWS_WRITTEN",
           "WRITE_FAILURES", "WRITE_RETRIES", "ConsumerMetrics", "partition_lag"]

# Counters are named as Prometheus stores them (with ``_total``); the histogram by its base
# name (``_bucket``, ``_sum`` and ``_count`` follow it).
RECORDS_CONSUMED: Final = "guardtrace_consumer_records_consumed_total"
ROWS_WRITTEN: Final = "guardtrace_consumer_rows_written_total"
DEAD_LETTERS: Final = "guardtrace_consumer_dead_letters_total"
RECORDS_DROPPED: Final = "guardtrace_consumer_records_dropped_total"
WRITE_RETRIES: Final = "guardtrace_consumer_write_retries_total"
WRITE_FAILURES: Final = "guardtrace_consumer_write_failures_total"
BATCH_WRITE_SECONDS: Final = "guardtrace_consumer_batch_write_seconds"
LAG_RECORDS: Final = "guardtrace_consumer_lag_records"
LAST_COMMIT: Final = "guardtrace_consumer_last_commit_timestamp_seconds"
METRIC_NAMES: Final = (RECORDS_CONSUMED, ROWS_WRITTEN, DEAD_LETTERS, RECORDS_DROPPED,
                       WRITE_RETRIES, WRITE_FAILURES, BATCH_WRITE_SECONDS, LAG_RECORDS,
                       LAST_COMMIT)

# Why records were let go unwritten (the ``reason`` label). Neither loses anything: the
# records stay in Kafka past the committed offset and are read again.
DROP_REVOKED: Final = "revoked"  # a rebalance gave the partition to another member
DROP_ABANDONED: Final = "abandoned"  # a batch given up on the way out, replayed on restart

# What failed in a write attempt (the ``cause`` label).
_CAUSE_STORE = "store"  # ClickHouse refused or was unreachable
_CAUSE_DEAD_LETTERS = "dead_letters"  # the broker did not acknowledge the dead letters

# Dead-letter reason kinds come from decoder messages, some of which carry a number or a
# name from the record: past this many distinct kinds, the rest count as OTHER_REASON_KIND,
# so a stream of odd records cannot grow the scrape without bound.
MAX_REASON_KINDS: Final = 32
OTHER_REASON_KIND: Final = "other"

# How often the loop reads its lag (one ListOffsets request to the broker). Prometheus
# scrapes every 15 s by default; reading more often would only load the broker.
LAG_REFRESH_S: Final = 10.0
# A lag read waits at most this long for the broker: the loop's thread makes it, and a
# broker that does not answer must not stop the loop (kafka-python waits 305 s by default).
_LAG_TIMEOUT_MS = 2_000

# Batch writes take from milliseconds (a few rows) to seconds (20,000 rows, or 64 MiB of
# payloads), and a retried one up to the dead-letter acknowledgement timeout (30 s).
_WRITE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ConsumerMetrics:
    """One consumer's counters, gauges and write timings, in a registry of its own.

    Args:
        registry: Where the metrics are registered (default: a new, private registry).
        clock: Wall clock for the last commit time, replaceable in tests.
    """

    def __init__(self, registry: CollectorRegistry | None = None,
                 clock: Any = time.time) -> None:
        self.registry = CollectorRegistry() if registry is None else registry
        self._clock = clock
        reg = self.registry
        self._consumed = Counter(RECORDS_CONSUMED, "Records taken in from Kafka, per topic.",
                                 ["topic"], registry=reg)
        self._rows = Counter(ROWS_WRITTEN, "Rows ClickHouse accepted, per table.", ["table"],
                             registry=reg)
        self._dead_letters = Counter(
            DEAD_LETTERS, "Records that could not be decoded and went to the dead-letter "
            f"topic, per reason kind (at most {MAX_REASON_KINDS} kinds, the rest "
            f"'{OTHER_REASON_KIND}').", ["reason_kind"], registry=reg)
        self._dropped = Counter(
            RECORDS_DROPPED, "Records let go unwritten and uncommitted, per reason "
            f"('{DROP_REVOKED}': the partition went to another member; '{DROP_ABANDONED}': "
            "a batch given up on stopping). Kafka delivers them again.", ["reason"],
            registry=reg)
        self._retries = Counter(WRITE_RETRIES, "Batch writes tried again after a failure.",
                                registry=reg)
        self._failures = Counter(
            WRITE_FAILURES, f"Failed batch write attempts, per cause ('{_CAUSE_STORE}': "
            f"ClickHouse; '{_CAUSE_DEAD_LETTERS}': dead letters not acknowledged).",
            ["cause"], registry=reg)
        self._write_seconds = Histogram(
            BATCH_WRITE_SECONDS, "Seconds one successful batch write took (inserts and the "
            "dead letters' acknowledgement).", buckets=_WRITE_BUCKETS, registry=reg)
        self._lag = Gauge(LAG_RECORDS, "Records between this consumer's position and the log "
                          "end, per assigned partition (as last read).",
                          ["topic", "partition"], registry=reg)
        self._last_commit = Gauge(LAST_COMMIT, "Unix time of the last successful offset "
                                  "commit (0 before the first).", registry=reg)
        self._reason_kinds: set[str] = set()
        self._lag_partitions: set[tuple[str, str]] = set()
        # Known before any traffic, so a first scrape already shows every series a query
        # or an alert rule expects (at zero), not "no data".
        for cause in (_CAUSE_STORE, _CAUSE_DEAD_LETTERS):
            self._failures.labels(cause)
        for reason in (DROP_REVOKED, DROP_ABANDONED):
            self._dropped.labels(reason)

    # -- what the consumer reports -----------------------------------------------------
    def topics(self, topics: tuple[str, ...] | list[str]) -> None:
        """Show the consumed topics at zero before their first record."""
        for topic in topics:
            self._consumed.labels(topic)

    def consumed(self, topic: str, records: int) -> None:
        """``records`` records of ``topic`` were taken into a batch."""
        if records:
            self._consumed.labels(topic).inc(records)

    def rows_written(self, written: Mapping[str, int]) -> None:
        """A batch was written: rows per table."""
        for table, count in written.items():
            self._rows.labels(table).inc(count)

    def committed(self) -> None:
        """Offsets were committed just now."""
        self._last_commit.set(self._clock())

    def dead_letter(self, kind: str) -> None:
        """One record went to the dead-letter topic, for a reason of this kind."""
        if kind not in self._reason_kinds:
            if len(self._reason_kinds) >= MAX_REASON_KINDS:
                kind = OTHER_REASON_KIND
            else:
                self._reason_kinds.add(kind)
        self._dead_letters.labels(kind).inc()

    def dropped(self, reason: str, records: int) -> None:
        """``records`` records were let go unwritten (``DROP_REVOKED``, ``DROP_ABANDONED``)."""
        if records:
            self._dropped.labels(reason).inc(records)

    def write_retry(self) -> None:
        """A failed batch write is about to be tried again."""
        self._retries.inc()

    @contextmanager
    def timed_write(self) -> Iterator[None]:
        """Around one batch write attempt: time it if it succeeds, count it if it fails.

        The failure is re-raised; the consumer decides what to do with it.
        """
        started = time.perf_counter()
        try:
            yield
        except DeadLetterNotDelivered:
            self._failures.labels(_CAUSE_DEAD_LETTERS).inc()
            raise
        except Exception:
            self._failures.labels(_CAUSE_STORE).inc()
            raise
        self._write_seconds.observe(time.perf_counter() - started)

    def set_lag(self, lag: Mapping[Any, int]) -> None:
        """The lag of every assigned partition (keys have ``topic`` and ``partition``).

        Partitions no longer in ``lag`` (revoked) are removed, not left at their last value:
        a member that lost a partition must not keep reporting its lag.
        """
        current = {(tp.topic, str(tp.partition)): count for tp, count in lag.items()}
        for gone in self._lag_partitions - current.keys():
            self._lag.remove(*gone)
        for labels, count in current.items():
            self._lag.labels(*labels).set(count)
        self._lag_partitions = set(current)

    # -- what /metrics serves ----------------------------------------------------------
    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The scrape body and its content type.

        Args:
            accept: The scraper's ``Accept`` header. The Prometheus text format unless it
                asks for OpenMetrics (as prometheus-client's own handler decides).
        """
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


def partition_lag(consumer: Any) -> dict[Any, int]:
    """Records between a running consumer's position and the log end, per assigned partition.

    The per-partition form of :func:`guardtrace.transport.lag.assignment_lag`, with both
    broker reads bounded by a short timeout (a timeout raises; the caller keeps the last
    reading). A partition whose position is not known yet is left out.

    Args:
        consumer: A kafka-python ``KafkaConsumer`` with an assignment.
    """
    assignment = list(consumer.assignment())
    if not assignment:
        return {}
    listed = consumer.end_offsets(assignment, timeout_ms=_LAG_TIMEOUT_MS)
    lag = {}
    for tp in assignment:
        position = consumer.position(tp, timeout_ms=_LAG_TIMEOUT_MS)
        if position is None:
            continue  # just assigned, its position not known yet: the next reading has it
        lag[tp] = max(0, true_log_end(listed.get(tp), consumer.highwater(tp)) - position)
    return lag
