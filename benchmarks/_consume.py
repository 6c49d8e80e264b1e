"""The consumer side of the throughput benchmarks, run in its own process.

Two modes over the same topics:

* ``guardtrace``: the real consumer (:class:`TelemetryConsumer` + :class:`ClickHouseWriter`)
  into a freshly migrated store, then verification queries (distinct event ids,
  payload ids and bytes).
* ``bare``: the baseline a consumer is compared with: kafka-python consumes the same
  topics and inserts each record's raw value into a ``(value String)`` table with
  clickhouse-connect, in batches of the same size, committing after each insert.

The store is the embedded engine in this process (``--store DIR``: ``chdb://DIR``) or a
server reached over HTTP (``--clickhouse-url``), which leaves only clickhouse-connect's
HTTP client in this process.

Run by ``pipeline_throughput.py`` and ``payload_throughput.py``; prints one JSON line.
Peak RSS is measured by the parent from /proc; this process reports ``ru_maxrss`` too.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _common import HEARTBEAT_INTERVAL_MS, SESSION_TIMEOUT_MS


class TimedWriter:
    """Wraps the real writer to record when each batch was written and how long it took."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes: list[tuple[float, float, dict[str, int]]] = []

    def write(self, rows: Any) -> dict[str, int]:
        started = time.time()
        written = self.inner.write(rows)
        self.writes.append((started, time.time(), dict(written)))
        return written


def _store_url(args: argparse.Namespace) -> str:
    return str(args.clickhouse_url or f"chdb://{args.store}")


def _bare_store(args: argparse.Namespace) -> tuple[Any, Any]:
    from guardtrace.store.connection import StoreConfig, open_client

    config = StoreConfig.resolve(url=_store_url(args), database=args.database)
    return open_client(config), config


def _profiler(args: argparse.Namespace) -> Any:
    if not args.profile:
        return None
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.001)
    profiler.start()
    return profiler


def _stop_profiler(profiler: Any, args: argparse.Namespace) -> None:
    if profiler is None:
        return
    profiler.stop()
    Path(args.profile).write_text(profiler.output_text(unicode=True, color=False,
                                                       show_all=False))


def run_guardtrace(args: argparse.Namespace) -> dict[str, Any]:
    from guardtrace.consumers.pipeline import PipelineConfig, open_pipeline

    # Opened as `guardtrace consume --migrate` opens it (the topics exist already).
    config = PipelineConfig.resolve(
        clickhouse_url=_store_url(args), database=args.database,
        bootstrap=args.bootstrap, group_id=args.group, spans_topic=args.spans_topic,
        metrics_topic=args.metrics_topic, payloads_topic=args.payloads_topic,
        logs_topic=args.logs_topic, dead_letter_topic=args.dead_letter_topic, batch_max_rows=args.batch_rows,
        batch_max_seconds=args.batch_seconds, session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS)
    pipeline = open_pipeline(config)
    client, store = pipeline.client, config.store
    writer = TimedWriter(pipeline.writer())
    consumer = pipeline.consumer(writer)
    assigned_at: list[float] = []

    def watch_assignment() -> None:
        # The consumer's own "partitions assigned" event: the consume phase starts there
        # (the records are already in Kafka; the group join before it is Tansu's wait).
        consumer._assigned.wait()
        assigned_at.append(time.time())
        print("assigned", file=sys.stderr, flush=True)

    threading.Thread(target=watch_assignment, daemon=True).start()
    print("ready", file=sys.stderr, flush=True)
    profiler = _profiler(args)
    started = time.time()
    stats = consumer.run(until_idle_s=args.idle_s)
    ended = time.time()
    _stop_profiler(profiler, args)

    db = store.database

    def scalar(sql: str) -> Any:
        return client.query(sql.replace("{db}", db)).result_rows[0]

    distinct_events, event_rows = scalar(
        "SELECT uniqExact(event_id), count() FROM {db}.span_events")
    distinct_spans, = scalar("SELECT uniqExact(trace_id, span_id) FROM {db}.spans")
    payloads, payload_bytes, chunk_rows = scalar(
        "SELECT uniqExact(payload_id), sum(b), sum(c) FROM (SELECT payload_id, "
        "any(body_bytes) AS b, uniqExact(chunk_index) AS c FROM {db}.payloads "
        "GROUP BY payload_id)")
    stored_body_bytes, = scalar("SELECT sum(length(body)) FROM "
                                "(SELECT DISTINCT payload_id, chunk_index, body FROM {db}.payloads)")
    metric_points, = scalar("SELECT count() FROM {db}.metric_points")
    dead_letters, = scalar("SELECT count() FROM {db}.dead_letters")
    return {
        "mode": "guardtrace", "started_at": started, "ended_at": ended,
        "assigned_at": assigned_at[0] if assigned_at else started,
        "writes": [[round(s, 6), round(e, 6), w] for s, e, w in writer.writes],
        "stats": stats.as_dict(),
        "verify": {"distinct_event_ids": int(distinct_events), "event_rows": int(event_rows),
                   "distinct_spans": int(distinct_spans), "payloads": int(payloads),
                   "payload_body_bytes": int(payload_bytes or 0),
                   "payload_chunks": int(chunk_rows or 0),
                   "stored_body_bytes": int(stored_body_bytes or 0),
                   "metric_points": int(metric_points), "dead_letters": int(dead_letters)},
    }


def run_bare(args: argparse.Namespace) -> dict[str, Any]:
    from kafka import KafkaConsumer

    client, store = _bare_store(args)
    table = f"{store.database}.bare_raw"
    client.command(f"CREATE DATABASE IF NOT EXISTS {store.database}")
    client.command(f"CREATE TABLE IF NOT EXISTS {table} (value String) "
                   "ENGINE = MergeTree ORDER BY tuple()")
    # The same consumer settings as TelemetryConsumer uses, so only the work differs.
    consumer = KafkaConsumer(
        bootstrap_servers=[args.bootstrap], group_id=args.group, client_id="bench-bare",
        enable_auto_commit=False, auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        max_poll_records=min(args.batch_rows, 5000), max_poll_interval_ms=600_000,
        fetch_max_bytes=64 * 1024 * 1024, max_partition_fetch_bytes=16 * 1024 * 1024)
    consumer.subscribe([args.spans_topic, args.metrics_topic, args.payloads_topic,
                        args.logs_topic])
    print("ready", file=sys.stderr, flush=True)
    profiler = _profiler(args)
    started = time.time()
    assigned_at = None
    last_activity = time.monotonic()
    batch: list[list[bytes]] = []
    batch_started = time.monotonic()
    writes: list[tuple[float, float, dict[str, int]]] = []
    records = 0
    join_deadline = time.monotonic() + 2 * SESSION_TIMEOUT_MS / 1000

    def flush() -> None:
        nonlocal batch
        if not batch:
            return
        write_start = time.time()
        client.insert(table, batch, column_names=["value"])
        consumer.commit()
        writes.append((write_start, time.time(), {"bare_raw": len(batch)}))
        batch = []

    while True:
        polled = consumer.poll(timeout_ms=500)
        if assigned_at is None and consumer.assignment():
            assigned_at = time.time()
            print("assigned", file=sys.stderr, flush=True)
            last_activity = time.monotonic()
        got = 0
        for records_of_tp in polled.values():
            for record in records_of_tp:
                batch.append([record.value])
                got += 1
        records += got
        now = time.monotonic()
        if got:
            last_activity = now
        if batch and (len(batch) >= args.batch_rows or now - batch_started >= args.batch_seconds):
            flush()
            batch_started = time.monotonic()
        elif not batch:
            batch_started = now
        if not got and not batch and (assigned_at is not None or now > join_deadline) \
                and now - last_activity >= args.idle_s:
            break
    flush()
    ended = time.time()
    _stop_profiler(profiler, args)
    consumer.close(autocommit=False)
    stored, stored_bytes = client.query(
        f"SELECT count(), sum(length(value)) FROM {table}").result_rows[0]
    return {"mode": "bare", "started_at": started, "ended_at": ended,
            "assigned_at": assigned_at or started,
            "writes": [[round(s, 6), round(e, 6), w] for s, e, w in writes],
            "stats": {"records": records},
            "verify": {"stored_records": int(stored), "stored_bytes": int(stored_bytes or 0)}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("guardtrace", "bare"), required=True)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", type=Path, help="an embedded store: chdb://STORE")
    where.add_argument("--clickhouse-url", help="a server: http://host:port")
    parser.add_argument("--database", default="guardtrace_bench")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--spans-topic", required=True)
    parser.add_argument("--metrics-topic", required=True)
    parser.add_argument("--payloads-topic", required=True)
    parser.add_argument("--logs-topic", required=True)
    parser.add_argument("--dead-letter-topic", required=True)
    parser.add_argument("--batch-rows", type=int, default=20000)
    parser.add_argument("--batch-seconds", type=float, default=1.0)
    parser.add_argument("--idle-s", type=float, default=3.0)
    parser.add_argument("--profile", default=None,
                        help="write a pyinstrument profile of the consume loop to this file")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("kafka").setLevel(logging.ERROR)
    result = run_guardtrace(args) if args.mode == "guardtrace" else run_bare(args)
    result["ru_maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
