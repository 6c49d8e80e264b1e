"""``guardtrace consume``: Kafka -> ClickHouse, at least once, idempotent, never stuck.

The loop, and why it is shaped this way:

* Poll records from the spans, metrics, payloads and logs topics; decode each into rows.
  A record that cannot be decoded goes to the dead-letter topic with the reason in its
  headers, and the partition moves on (one bad record must not stop a partition).
* Flush when the batch reaches ``batch_max_rows``, ``batch_max_bytes`` of record values
  or ``batch_max_seconds``: insert into ClickHouse, make sure the dead letters are
  acknowledged, and only then commit the offsets of every record in the batch. A crash
  anywhere before the commit replays the batch; deterministic row ids plus
  ReplacingMergeTree make the replay invisible.
* A dead letter whose send failed is sent again with the batch's retry (never only
  re-checked: a failed send stays failed), the rows already inserted are not inserted
  again, and the batch commits once the broker has acknowledged every letter. While
  dead letters keep failing the consumer reports a :class:`~.health.Stall`, which turns
  ``/healthz`` red: polling goes on, so nothing else would show that it is stuck.
* One batch is inserted on a writer thread while the loop fetches and decodes the next
  (ClickHouse works outside the GIL, so the two overlap). Commits stay on the loop's
  thread and in batch order; at most two batches are held.
* ClickHouse failing: keep the batch, retry with capped exponential backoff, commit
  nothing; partitions are paused meanwhile so polling (which keeps the group membership
  alive) fetches nothing new. A failure on the writer thread is taken up by the loop
  before it polls again, so at most one poll's records arrive after the first failure.
* Partitions a rebalance takes away: their rows leave the batch (their new owner reads
  them again from the committed offset), and no offset of theirs is committed by this
  member any more, not even by the batch being written. The rows of partitions this
  member keeps stay: kafka-python 3 keeps a kept partition's fetch position, with
  incremental (cooperative) rebalancing and with eager rebalancing alike (an eagerly
  revoked partition that comes back is kept, not reset to its committed offset), so
  dropping those rows would lose them once a later commit passed them. Writing the
  revoked rows before letting go is not an option: kafka-python 3 calls the listener on
  its IO thread, where a commit cannot run and an insert would hold up heartbeats.
* SIGTERM/SIGINT: stop polling, try the pending batch once, commit only if it was
  written, exit.
"""

from __future__ import annotations

import functools
import gc
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.structs import OffsetAndMetadata

from ..store.rows import DecodedRows
from ..store.writer import BatchWriter
from ..transport.kafka_workarounds import release_parked_records
from .config import MAX_RECORD_BYTES, ConsumerConfig, ConsumerStats
from .dead_letters import (
    DeadLetter,
    DeadLetterNotDelivered,
    await_dead_letters,
    dead_letter_row,
    reason_kind,
    send_dead_letters,
)
from .decode import (
    PoisonRecord,
    decode_logs,
    decode_metrics,
    decode_payload_message,
    decode_spans,
)
from .health import Stall
from .metrics import (
    DROP_ABANDONED,
    DROP_REVOKED,
    LAG_REFRESH_S,
    ConsumerMetrics,
    partition_lag,
)
from .pipeline_detection import DetectionCounts, PipelineDetection

__all__ = ["MAX_RECORD_BYTES", "ConsumerConfig", "ConsumerStats", "TelemetryConsumer"]

logger = logging.getLogger("guardtrace.consumers")

_BACKOFF_START_S, _BACKOFF_MAX_S = 0.5, 30.0  # a failed write is retried between these
# How long one write attempt waits for the broker to acknowledge the batch's dead letters.
_DEAD_LETTER_ACK_TIMEOUT_S = 30.0
# How long one dead-letter send may wait for topic metadata or buffer space (kafka-python's
# default is 60 s). Retries run on the loop's thread, which meanwhile does not poll.
_DEAD_LETTER_MAX_BLOCK_MS = 10_000
# The most records one poll returns (see the consumer's settings).
_MAX_POLL_RECORDS = 250
# How often a running consumer logs its counters (rows, batches, retries, dead letters, lag).
STATS_LOG_INTERVAL_S = 30.0
# Decoding allocates about ten containers per event; at the default threshold (700) the
# cyclic GC runs every few dozen events and cost the consume loop about 8% of its
# throughput (pipeline_throughput). Refcounting frees the rows; the GC still runs.
_GC_GEN0_THRESHOLD = 20_000


@contextmanager
def _fewer_gc_passes() -> Iterator[None]:
    """Raise the cyclic GC's first threshold while the loop runs; restore it after."""
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], _GC_GEN0_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


class _Part:
    """What a batch holds of one partition: rows, dead letters, the last offset taken."""

    __slots__ = ("bytes", "dead_letters", "last_offset", "records", "rows")

    def __init__(self) -> None:
        self.rows = DecodedRows()
        self.dead_letters: list[DeadLetter] = []
        self.last_offset = -1
        self.records = 0
        self.bytes = 0


class _Batch:
    """Records taken in since the last hand-off, kept per partition.

    Per partition, so that a rebalance can take out exactly the partitions it revokes.
    """

    def __init__(self) -> None:
        self.parts: dict[TopicPartition, _Part] = {}
        self.records = 0
        self.row_count = 0
        self.bytes = 0  # record values held (payload chunks reach ~1 MB each)
        self.started = time.monotonic()
        # Revoked while this batch was being written: its rows of them are written, but
        # their offsets are no longer this member's to commit.
        self.disowned: set[TopicPartition] = set()
        # Rows written per table, once ClickHouse has taken them (a retry that only waits
        # for dead letters does not insert them again).
        self.written: dict[str, int] | None = None
        self._rows: DecodedRows | None = None

    def part(self, tp: TopicPartition) -> _Part:
        part = self.parts.get(tp)
        if part is None:
            part = self.parts[tp] = _Part()
        return part

    def drop(self, revoked: set[TopicPartition]) -> int:
        """Take the revoked partitions' records out of the batch; return how many."""
        dropped = 0
        for tp in revoked & self.parts.keys():
            part = self.parts.pop(tp)
            dropped += part.records
            self.records -= part.records
            self.row_count -= len(part.rows)
            self.bytes -= part.bytes
        return dropped

    def dead_letters(self) -> list[DeadLetter]:
        return [letter for part in self.parts.values() for letter in part.dead_letters]

    def rows(self) -> DecodedRows:
        """Every partition's rows in one set of lists (built once; the parts let go)."""
        if self._rows is None:
            parts = list(self.parts.values())
            if len(parts) == 1:
                self._rows = parts[0].rows
            else:
                self._rows = DecodedRows()
                for part in parts:
                    self._rows.extend(part.rows)
            for part in parts:
                part.rows = DecodedRows()
        return self._rows

    def offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """What to commit: past the last record taken of every partition still owned."""
        return {tp: OffsetAndMetadata(part.last_offset + 1, "", -1)
                for tp, part in self.parts.items() if tp not in self.disowned}


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, owner: TelemetryConsumer) -> None:
        self._owner = owner

    # kafka-python 3 runs these on its IO thread, while the loop's thread waits in poll()
    # (or close()): the batches are not being changed meanwhile.
    def on_partitions_revoked(self, revoked: Any) -> None:
        self._owner._revoking(set(revoked))  # noqa: SLF001 - the listener is the consumer's own part

    def on_partitions_lost(self, lost: Any) -> None:
        # Evicted from the group: every partition's position is dropped, and whoever owns
        # it next (maybe this member) starts from the committed offset.
        self._owner._release(set(lost))  # noqa: SLF001

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._owner._settle_revocations()  # noqa: SLF001
        self._owner._assigned.set()  # noqa: SLF001
        # The idle clock of --until-idle starts at the (first) assignment.
        self._owner._last_activity = time.monotonic()  # noqa: SLF001
        logger.info("assigned partitions: %s",
                    ", ".join(f"{tp.topic}[{tp.partition}]" for tp in sorted(assigned)))


class TelemetryConsumer:
    """One consumer-group member that persists guardtrace topics into ClickHouse.

    Args:
        config: Kafka settings.
        writer: Where rows go (a :class:`~guardtrace.store.writer.ClickHouseWriter`).
        consumer_overrides: Extra kafka-python consumer settings.
    """

    def __init__(self, config: ConsumerConfig, writer: BatchWriter,
                 consumer_overrides: dict[str, Any] | None = None) -> None:
        self.config = config
        self.writer = writer
        self.stats = ConsumerStats()
        self._stop = threading.Event()
        self._assigned = threading.Event()
        self._batch = _Batch()
        # Partitions let go since the last poll of the loop: the rest of that poll's
        # records of theirs are not taken in (their new owner reads them).
        self._released: set[TopicPartition] = set()
        # Revoked by an eager rebalance that has not assigned partitions again yet.
        self._revoked_pending: set[TopicPartition] = set()
        # The batch being inserted on the writer thread, and its write.
        self._in_flight: tuple[_Batch, Future[dict[str, int]]] | None = None
        self._write_thread = ThreadPoolExecutor(max_workers=1,
                                                thread_name_prefix="guardtrace-writer")
        # Set when a batch is given up on the way out: no later batch of this run may be
        # written or committed then, or its commit would pass the unwritten records.
        self._abandoned = False
        self._last_activity = self._last_report = time.monotonic()
        # When the loop last polled Kafka (also while backing off); read by consumers/health.py.
        self.last_poll_monotonic: float | None = None
        # Set while dead letters keep failing (nothing can be committed); read by health.py.
        self.stall: Stall | None = None
        # Served at /metrics by health.py; counted per poll and per batch, not per record.
        self.metrics = ConsumerMetrics()
        self.metrics.topics(config.topics)
        self._lag_read_at = 0.0  # when the loop last read its lag (time.monotonic())
        # Zero-code detection: spans decoded, then the detectors run on the LLM spans.
        spans_decoder: Callable[[bytes], DecodedRows] = (
            PipelineDetection(decode_spans, self.stats.pipeline_detection)
            if config.pipeline_detection else decode_spans)
        self._decoders: dict[str, Callable[[bytes], DecodedRows]] = {
            config.spans_topic: spans_decoder,
            config.metrics_topic: decode_metrics,
            config.payloads_topic: decode_payload_message,
            # GenAI log events are judged like LLM spans, counted in the same stats.
            config.logs_topic: functools.partial(
                decode_logs, counts=DetectionCounts(self.stats.pipeline_detection),
                detect=config.pipeline_detection),
        }
        settings: dict[str, Any] = {
            **config.kafka_settings(),  # bootstrap servers, TLS and SASL
            "group_id": config.group_id,
            "client_id": "guardtrace-consumer",
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "session_timeout_ms": config.session_timeout_ms,
            "heartbeat_interval_ms": config.heartbeat_interval_ms,
            # A poll's records are all held until the loop has taken them: bounded by
            # count, since a record may carry dozens of spans (the collectors pack the
            # traces bound for one partition, a Collector sends whole batches).
            "max_poll_records": min(config.batch_max_rows, _MAX_POLL_RECORDS),
            "max_poll_interval_ms": 600_000,
            "fetch_max_bytes": 64 * 1024 * 1024,
            "max_partition_fetch_bytes": 16 * 1024 * 1024,
        }
        settings.update(consumer_overrides or {})
        self._consumer = KafkaConsumer(**settings)
        self._producer = KafkaProducer(
            **config.kafka_settings(), client_id="guardtrace-dlq",
            acks="all", linger_ms=5, max_request_size=MAX_RECORD_BYTES + 1024 * 1024,
            max_block_ms=_DEAD_LETTER_MAX_BLOCK_MS)
        self._consumer.subscribe(list(config.topics), listener=_Rebalance(self))

    # -- control -----------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the loop to finish (safe from a signal handler or another thread)."""
        self._stop.set()

    def run(self, until_idle_s: float | None = None) -> ConsumerStats:
        """Consume until :meth:`stop`, or until ``until_idle_s`` pass with nothing new.

        The idle clock starts when partitions are first assigned (a new group's first
        join takes seconds), or after twice the session timeout if none ever are.
        """
        self._last_activity = self._last_report = time.monotonic()
        # If no partition is ever assigned (e.g. more members than partitions), stop
        # waiting for one after two session timeouts and let the idle clock run.
        join_deadline = self._last_activity + 2 * self.config.session_timeout_ms / 1000
        try:
            with _fewer_gc_passes():
                while not self._stop.is_set():
                    if self._in_flight is not None and self._in_flight[1].done():
                        # Commit it now, or take up its failure before fetching more.
                        self._finish_in_flight(retry=True)
                    wait_s = max(0.0, self.config.batch_max_seconds
                                 - (time.monotonic() - self._batch.started))
                    self._released.clear()
                    polled = self._poll(timeout_ms=int(min(wait_s, 0.5) * 1000) or 1)
                    got = 0
                    for tp, records in polled.items():
                        taken = 0
                        for record in records:
                            if tp in self._released:
                                break  # revoked while a hand-off polled (see _release)
                            self._accept(tp, record)
                            taken += 1
                            if self._batch_full():
                                # Mid-poll is fine: the commit covers only records accepted.
                                self._hand_off()
                        got += taken
                        self.metrics.consumed(tp.topic, taken)
                        self.metrics.dropped(DROP_REVOKED, len(records) - taken)
                    now = time.monotonic()
                    if got:
                        self._last_activity = now
                    if self._batch.records and (
                            self._batch_full()
                            or now - self._batch.started >= self.config.batch_max_seconds):
                        self._hand_off()
                    elif not self._batch.records:
                        self._batch.started = now
                    if (until_idle_s is not None and not got and not self._batch.records
                            and self._in_flight is None
                            and (self._assigned.is_set() or now > join_deadline)
                            and now - self._last_activity >= until_idle_s):
                        break
                self._flush(retry=False)
        except BaseException:
            # Dying (a bug, or a crash in a test): abandon both batches uncommitted, so
            # nothing on the way out commits them; they are replayed later.
            self._batch = _Batch()
            self._in_flight = None
            raise
        finally:
            self._update_lag()
            self._close()
        return self.stats

    def _batch_full(self) -> bool:
        return (self._batch.row_count >= self.config.batch_max_rows
                or self._batch.bytes >= self.config.batch_max_bytes)

    # -- per record --------------------------------------------------------------------
    def _accept(self, tp: TopicPartition, record: Any) -> None:
        self.stats.records += 1
        batch = self._batch
        part = batch.parts.get(tp) or batch.part(tp)  # the lookup inline: once per record
        batch.records += 1
        part.records += 1
        part.last_offset = max(part.last_offset, record.offset)
        value = record.value
        size = len(value or b"")
        batch.bytes += size
        part.bytes += size
        try:
            if value is None:
                raise PoisonRecord("record has no value (tombstone)")
            if len(value) > MAX_RECORD_BYTES:
                # The kind ("oversize record") comes first: the health page groups by it.
                raise PoisonRecord(f"oversize record: {len(value)} bytes exceeds the "
                                   f"{MAX_RECORD_BYTES}-byte limit")
            decoder = self._decoders.get(tp.topic)
            if decoder is None:
                raise PoisonRecord(f"no decoder for topic {tp.topic}")
            rows = decoder(value)
            part.rows.extend(rows)
            batch.row_count += len(rows)
        except PoisonRecord as exc:
            self._dead_letter(tp, part, record, str(exc))
        except Exception as exc:  # noqa: BLE001 - an unexpected decoder bug is poison too
            self._dead_letter(tp, part, record,
                              f"decoder error: {type(exc).__name__}: {exc}")

    def _dead_letter(self, tp: TopicPartition, part: _Part, record: Any, reason: str) -> None:
        logger.warning("dead-lettering %s[%d]@%d: %s", tp.topic, tp.partition, record.offset,
                       reason)
        # Sent when the batch is written, off this thread (a send can wait for metadata).
        part.dead_letters.append(DeadLetter(tp, record, reason))
        # The same fact as a row, so the health page can count and show it; written with
        # the batch, before the commit.
        part.rows.dead_letters.append(dead_letter_row(tp, record, reason))
        self._batch.row_count += 1
        kind = reason_kind(reason)
        self.stats.dead_letters += 1
        self.stats.dead_letter_reasons[kind] = self.stats.dead_letter_reasons.get(kind, 0) + 1
        self.metrics.dead_letter(kind)

    # -- per batch ---------------------------------------------------------------------
    def _hand_off(self) -> None:
        """Finish the batch in flight, then start inserting the current one."""
        if not self._finish_in_flight(retry=True):
            return
        batch, self._batch = self._batch, _Batch()
        self._in_flight = (batch, self._write_thread.submit(self._write, batch))

    def _flush(self, retry: bool) -> bool:
        """Write and commit the batch in flight and then the current one, in that order."""
        if not self._finish_in_flight(retry):
            return False
        if self._batch.records:
            self._hand_off()
        return self._finish_in_flight(retry)

    def _write(self, batch: _Batch) -> dict[str, int]:
        """Insert the batch and see its dead letters acknowledged; raise on any failure.

        Called again for a batch that failed: dead letters whose send failed are sent
        again, and rows ClickHouse has taken are not inserted again.
        """
        with self.metrics.timed_write():
            letters = batch.dead_letters()
            # Sent first, so the broker acknowledges them while ClickHouse inserts.
            send_dead_letters(self._producer, self.config.dead_letter_topic, letters)
            if batch.written is None:
                rows = batch.rows()
                batch.written = self.writer.write(rows) if len(rows) else {}
                # Written: the commit needs only the offsets. Empty the row lists now, because
                # clickhouse-connect's insert context keeps the list it was given in a
                # reference cycle (it stores a bound method of itself), so each batch, payload
                # bodies and all, would otherwise live on until the cyclic GC came round
                # (found measuring payload_throughput: the Python heap held about three
                # batches of bodies).
                rows.clear()
            await_dead_letters(letters, _DEAD_LETTER_ACK_TIMEOUT_S)
        return batch.written

    def _finish_in_flight(self, retry: bool) -> bool:
        """Wait for the batch in flight, retrying it here if it failed, and commit it.

        False once a batch has been abandoned (``retry`` off, or stopping), now or
        earlier in the run: the current batch is then dropped too, since committing it
        would pass the unwritten records.
        """
        if self._in_flight is not None:
            batch, write = self._in_flight
            try:
                written: dict[str, int] | None = write.result()
            except Exception as exc:  # noqa: BLE001 - any failure: keep and retry
                # Still in flight meanwhile: a rebalance during the retry disowns it too.
                written = self._write_with_retry(batch, retry, exc)
            self._in_flight = None
            if written is None:
                self._abandoned = True
                self.metrics.dropped(DROP_ABANDONED, batch.records)
            else:
                self.stall = None
                self._commit(batch, written)
        if self._abandoned:
            self.metrics.dropped(DROP_ABANDONED, self._batch.records)
            self._batch = _Batch()
        return not self._abandoned

    def _write_with_retry(self, batch: _Batch, retry: bool,
                          failure: Exception) -> dict[str, int] | None:
        """Retry a batch whose write failed until it is written; None if abandoned."""
        backoff = _BACKOFF_START_S
        paused = False
        try:
            while True:
                self._note_stall(failure)
                if not retry or self._stop.is_set():
                    logger.error("batch of %d records not written (%r); abandoned "
                                 "uncommitted, it will be replayed", batch.records, failure)
                    return None
                self.stats.write_retries += 1
                self.metrics.write_retry()
                logger.warning("writing batch failed (%r); retrying in %.1fs, nothing "
                               "committed", failure, backoff)
                if not paused:
                    self._consumer.pause(*self._consumer.assignment())
                    paused = True
                self._wait(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX_S)
                try:
                    return self._write(batch)
                except Exception as exc:  # noqa: BLE001
                    failure = exc
        finally:
            if paused:
                self._consumer.resume(*self._consumer.paused())

    def _note_stall(self, failure: Exception) -> None:
        """Report a stall while dead letters fail; a ClickHouse outage is not one."""
        if not isinstance(failure, DeadLetterNotDelivered):
            self.stall = None
            return
        since = self.stall.since_monotonic if self.stall is not None else time.monotonic()
        self.stall = Stall(f"dead letters to {self.config.dead_letter_topic} are not "
                           f"acknowledged, so no offset is committed: {failure}"[:1000], since)

    def _revoking(self, revoked: set[TopicPartition]) -> None:
        """A rebalance revokes partitions: let go of those already gone, note the others.

        Cooperative rebalancing calls this once the partitions are gone. Eager
        rebalancing calls it with every partition, before the new assignment: those it
        assigns again keep their fetch position (and so their rows), only the others go.
        """
        still_assigned = revoked & self._consumer.assignment()
        self._revoked_pending |= still_assigned
        self._release(revoked - still_assigned)

    def _settle_revocations(self) -> None:
        """Partitions assigned: let go of the revoked ones that did not come back."""
        if self._revoked_pending:
            gone = self._revoked_pending - self._consumer.assignment()
            self._revoked_pending = set()
            self._release(gone)

    def _release(self, gone: set[TopicPartition]) -> None:
        """Partitions no longer this member's: forget their records, commit none of theirs.

        Their owner fetches them from the committed offset, so the rows dropped here are
        read again, not lost, and not written twice.
        """
        if not gone:
            return
        self._released |= gone
        dropped = self._batch.drop(gone)
        self.metrics.dropped(DROP_REVOKED, dropped)
        if self._in_flight is not None:
            self._in_flight[0].disowned |= gone
        if dropped:
            logger.info("partitions revoked: %d unwritten records of theirs left to their "
                        "new owner", dropped)

    def _commit(self, batch: _Batch, written: dict[str, int]) -> None:
        # Empty when every partition of the batch was revoked while it was written.
        offsets = batch.offsets()
        try:
            if offsets:
                self._consumer.commit(offsets)
        except Exception as exc:  # noqa: BLE001 - e.g. partitions moved during the write
            logger.warning("rows written but offsets not committed (%r); the next owner of "
                           "these partitions replays them, and the replay is deduplicated",
                           exc)
        else:
            self.stats.commits += bool(offsets)
            if offsets:
                self.metrics.committed()
        self.stats.batches += 1
        for table, count in written.items():
            self.stats.rows_written[table] = self.stats.rows_written.get(table, 0) + count
        self.metrics.rows_written(written)
        now = time.monotonic()
        if now - self._last_report >= STATS_LOG_INTERVAL_S:
            self._last_report = now
            logger.info("consumer stats %s", self.summary_json())

    def _wait(self, seconds: float) -> None:
        """Sleep while polling, so group membership stays alive during an outage.

        Nothing fetched here is accepted, so nothing may be fetched: partitions a
        rebalance hands over during the outage arrive unpaused, and records of a
        partition assigned within a poll can come back from that same poll. Pause
        everything before each poll and rewind whatever still came back; otherwise those
        records would be skipped and later committed past (found by the reliability
        suite: a member leaving during a ClickHouse outage lost a quarter of the events).
        """
        deadline = time.monotonic() + seconds
        while not self._stop.is_set() and time.monotonic() < deadline:
            self._consumer.pause(*self._consumer.assignment())
            polled = self._poll(timeout_ms=200)
            for tp, records in polled.items():
                if records:
                    self._consumer.seek(tp, records[0].offset)
                    self._consumer.pause(tp)

    def _poll(self, timeout_ms: int) -> dict[TopicPartition, list[Any]]:
        # Partitions resumed after a retry would otherwise stall (a kafka-python bug).
        release_parked_records(self._consumer)
        polled = self._consumer.poll(timeout_ms=timeout_ms)
        self.last_poll_monotonic = time.monotonic()
        # Here, not per commit: lag matters most when nothing commits (ClickHouse down).
        if self.last_poll_monotonic - self._lag_read_at >= LAG_REFRESH_S:
            self._update_lag()
        return polled

    def _update_lag(self) -> None:
        self._lag_read_at = time.monotonic()
        try:
            lag = partition_lag(self._consumer)
        except Exception as exc:  # noqa: BLE001 - lag is informational
            logger.debug("could not compute lag: %r", exc)
            return
        self.stats.lag = sum(lag.values())
        self.metrics.set_lag(lag)

    def _close(self) -> None:
        # A write still running (only when dying) finishes on its own; it is never
        # committed.
        self._write_thread.shutdown(wait=False, cancel_futures=True)
        try:
            self._producer.close(timeout=10)
        finally:
            self._consumer.close(autocommit=False)

    def summary_json(self) -> str:
        return json.dumps(self.stats.as_dict(), sort_keys=True)
