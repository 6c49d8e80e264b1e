"""Request-id lookup and dashboard overview latency with 10 million events stored.

    .venv/bin/python benchmarks/lookup_latency.py            # 10,000,000 span events
    .venv/bin/python benchmarks/lookup_latency.py --quick    # 200,000 (smoke)

A fresh database is migrated with ``guardtrace.store.migrate.migrate`` and seeded
with ClickHouse ``INSERT ... SELECT FROM numbers()``: span events (4 per request, over
the last 24 hours, 50 agents, 2 services, every guard event name), one span per
request, a 2 KB debug payload for one request in 50. The materialized views fill the
request-id lookup (``requests``) and the per-minute rollup (``event_rollup_1m``) as
they would from the consumer. Then the dashboard's own read functions
(``guardtrace.store.queries``) are timed, in this process, on the embedded engine:

* request page: ``find_request`` + ``request_trace`` + ``request_payloads`` for random
  request ids (half of them with a payload). Target: p99 < 50 ms.
* overview page ("last hour", all modules): every query the page runs: ``modules``,
  ``headline_rates`` (this period and the previous one), ``event_totals``,
  ``event_rates``, ``top_agents``. Target: each < 200 ms at p99.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import Report, log, percentile

from guardtrace.schemas import names

TARGET_LOOKUP_P99_MS = 50.0
TARGET_OVERVIEW_MS = 200.0

EVENTS_PER_REQUEST = 4
PAYLOAD_EVERY = 50
AGENTS = 50
SPREAD = timedelta(hours=24)
# Guard events and the module that emits each (collectors/*: planning, replies, verification).
EVENT_MODULES = [
    (names.EVENT_HALLUCINATION_DETECTED, names.MODULE_PLANNING),
    (names.EVENT_HALLUCINATION_REGENERATION_COMPLETE, names.MODULE_PLANNING),
    (names.EVENT_HALLUCINATION_REGENERATION_FAILED, names.MODULE_PLANNING),
    (names.EVENT_HALLUCINATION_RECOVERED, names.MODULE_PLANNING),
    (names.EVENT_HALLUCINATION_UNRECOVERABLE, names.MODULE_PLANNING),
    (names.EVENT_FABRICATION_DETECTED, names.MODULE_REPLIES),
    (names.EVENT_VERIFICATION_REQUIRED, names.MODULE_VERIFICATION),
    (names.EVENT_VERIFICATION_NUDGED, names.MODULE_VERIFICATION),
    (names.EVENT_VERIFICATION_COMPLETED, names.MODULE_VERIFICATION),
    (names.EVENT_VERIFICATION_BYPASSED, names.MODULE_VERIFICATION),
]


def _array(values: list[str]) -> str:
    return "[" + ", ".join("'" + v.replace("'", "\\'") + "'" for v in values) + "]"


def seed(client: Any, db: str, events: int, start_ns: int, chunk: int) -> dict[str, float]:
    """Fill ``db`` with ``events`` span events and their spans, payloads and rollups."""
    requests = events // EVENTS_PER_REQUEST
    step_ns = SPREAD.total_seconds() * 1e9 / max(1, requests)
    event_names = _array([n for n, _ in EVENT_MODULES])
    event_modules = _array([m for _, m in EVENT_MODULES])
    timings = {}
    started = time.perf_counter()
    # Request r's events: k = 0..3, names cycling through the guard events.
    for offset in range(0, events, chunk):
        count = min(chunk, events - offset)
        client.command(f"""
            INSERT INTO {db}.span_events (event_id, timestamp, name, trace_id, span_id,
                request_id, module, agent, tier, service, attributes)
            SELECT lower(hex(MD5(toString(number)))) AS event_id,
                   fromUnixTimestamp64Nano(toInt64({start_ns} + intDiv(number, {EVENTS_PER_REQUEST}) * {step_ns:.0f}
                                                   + (number % {EVENTS_PER_REQUEST}) * 1000000)) AS ts,
                   {event_names}[(number + intDiv(number, 7)) % 10 + 1] AS event_name,
                   lower(hex(MD5(concat('t', toString(intDiv(number, {EVENTS_PER_REQUEST})))))) AS trace,
                   substring(lower(hex(MD5(concat('s', toString(intDiv(number, {EVENTS_PER_REQUEST})))))), 1, 16),
                   concat('req-', toString(intDiv(number, {EVENTS_PER_REQUEST}))) AS rid,
                   {event_modules}[(number + intDiv(number, 7)) % 10 + 1] AS mod,
                   concat('agent-', toString(intDiv(number, {EVENTS_PER_REQUEST}) % {AGENTS})) AS agent,
                   if(event_name = '{names.EVENT_FABRICATION_DETECTED}',
                      ['action', 'read', 'repetition'][number % 3 + 1], '') AS tier,
                   ['travel-agent', 'support-agent'][intDiv(number, {EVENTS_PER_REQUEST}) % 2 + 1],
                   map('request_id', rid, 'module', mod, 'agent', agent, 'tier', tier,
                       'matched_phrase', 'I''m deploying', 'tools_fired', '["read_file"]')
            FROM numbers({offset}, {count})""")
        log(f"seeded {offset + count:,} / {events:,} span events")
    timings["seed_events_s"] = time.perf_counter() - started
    started = time.perf_counter()
    for offset in range(0, requests, chunk):
        count = min(chunk, requests - offset)
        client.command(f"""
            INSERT INTO {db}.spans (trace_id, span_id, parent_span_id, name, kind, service,
                scope_name, start_time, end_time, duration_ns, status_code, status_message,
                request_id, attributes, resource_attributes)
            SELECT lower(hex(MD5(concat('t', toString(number))))),
                   substring(lower(hex(MD5(concat('s', toString(number))))), 1, 16), '',
                   'agent.turn', 'internal',
                   ['travel-agent', 'support-agent'][number % 2 + 1], 'guardtrace',
                   fromUnixTimestamp64Nano(toInt64({start_ns} + number * {step_ns:.0f} - 1000000)),
                   fromUnixTimestamp64Nano(toInt64({start_ns} + number * {step_ns:.0f} + 5000000)),
                   6000000, 'unset', '', concat('req-', toString(number)),
                   map('request_id', concat('req-', toString(number))),
                   map('service.name', ['travel-agent', 'support-agent'][number % 2 + 1])
            FROM numbers({offset}, {count})""")
    timings["seed_spans_s"] = time.perf_counter() - started
    started = time.perf_counter()
    client.command(f"""
        INSERT INTO {db}.payloads (payload_id, chunk_index, chunk_count, request_id, kind,
            timestamp, trace_id, span_id, body, preview, body_bytes, body_sha256, truncated,
            redactions, attributes)
        SELECT lower(hex(MD5(concat('p', toString(number))))), 0, 1,
               concat('req-', toString(number * {PAYLOAD_EVERY})), 'fabrication_detection',
               fromUnixTimestamp64Nano(toInt64({start_ns} + number * {PAYLOAD_EVERY} * {step_ns:.0f})),
               lower(hex(MD5(concat('t', toString(number * {PAYLOAD_EVERY}))))), '',
               concat('{{"reply": "', repeat(concat('word ', toString(number % 997), ' '), 200), '"}}') AS b,
               substring(b, 1, 256), length(b), lower(hex(SHA256(b))), 0, 0,
               map('model', 'bench-model')
        FROM numbers({requests // PAYLOAD_EVERY})""")
    timings["seed_payloads_s"] = time.perf_counter() - started
    return timings


def settle_merges(client: Any, db: str, limit_s: float) -> float:
    """Wait until no merge runs in ``db`` for 3 s in a row (at most ``limit_s``)."""
    started = time.perf_counter()
    quiet_since = None
    while time.perf_counter() - started < limit_s:
        running = int(client.query("SELECT count() FROM system.merges WHERE database = "
                                   "{db:String}", parameters={"db": db}).result_rows[0][0])
        now = time.perf_counter()
        if running:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= 3:
            break
        time.sleep(0.5)
    return time.perf_counter() - started


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return (time.perf_counter() - started) * 1000, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--quick", action="store_true", help="smoke size: 200,000 events")
    parser.add_argument("--lookups", type=int, default=300, help="request ids looked up")
    parser.add_argument("--overview-runs", type=int, default=30, help="overview page loads")
    parser.add_argument("--chunk", type=int, default=2_000_000, help="rows per seeding INSERT")
    parser.add_argument("--settle-s", type=float, default=300,
                        help="wait at most this long for background merges after seeding")
    parser.add_argument("--store", type=Path, default=None,
                        help="chDB directory (default: a temporary one, removed after)")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.lookups, args.overview_runs = min(args.events, 200_000), 60, 10
    report = Report("lookup_latency", {"events": args.events, "lookups": args.lookups,
                                       "overview_runs": args.overview_runs,
                                       "events_per_request": EVENTS_PER_REQUEST,
                                       "spread_hours": SPREAD.total_seconds() / 3600})

    from guardtrace.store import queries
    from guardtrace.store.connection import StoreConfig, open_client
    from guardtrace.store.migrate import migrate
    tmp = Path(tempfile.mkdtemp(prefix="guardtrace-bench-lookup-"))
    store_dir = args.store or tmp / "store"
    try:
        config = StoreConfig.resolve(url=f"chdb://{store_dir}", database="guardtrace_lookup")
        client = open_client(config)
        client.command(f"DROP DATABASE IF EXISTS {config.database}")
        migrate(client, config)
        db = config.database
        now = datetime.now(UTC).replace(microsecond=0)
        start_ns = int((now - SPREAD).timestamp() * 1e9)
        log(f"seeding {args.events:,} span events into {db}")
        seeding = seed(client, db, args.events, start_ns, args.chunk)
        # A store that took 24 hours to fill has merged its parts (the lookup table's
        # partial rows collapse in merges); time it so, not straight after a bulk load.
        seeding["settle_merges_s"] = settle_merges(client, db, args.settle_s)
        counts = {table: int(client.query(f"SELECT count() FROM {db}.{table}").result_rows[0][0])
                  for table in ("span_events", "spans", "payloads", "requests",
                                "event_rollup_1m")}
        parts = int(client.query(f"SELECT count() FROM system.parts WHERE database = '{db}' "
                                 "AND active").result_rows[0][0])
        log(f"stored {counts}; {parts} active parts")

        requests = args.events // EVENTS_PER_REQUEST
        rng = random.Random(42)
        # Half the ids have a payload (every 50th request), half are random requests.
        ids = [f"req-{rng.randrange(requests // PAYLOAD_EVERY) * PAYLOAD_EVERY}"
               if i % 2 else f"req-{rng.randrange(requests)}" for i in range(args.lookups)]
        lookup_ms: list[float] = []
        parts_ms: dict[str, list[float]] = {"find_request": [], "request_trace": [],
                                            "request_payloads": []}
        found_events = found_payloads = 0
        for warm in ids[:5]:  # first queries load marks and caches
            queries.find_request(client, db, warm)
        for request_id in ids:
            t1, summary = timed(lambda rid=request_id: queries.find_request(client, db, rid))
            assert summary is not None, f"{request_id} not found"
            t2, trace = timed(lambda s=summary: queries.request_trace(client, db, s))
            t3, payloads = timed(lambda rid=request_id: queries.request_payloads(client, db, rid))
            parts_ms["find_request"].append(t1)
            parts_ms["request_trace"].append(t2)
            parts_ms["request_payloads"].append(t3)
            lookup_ms.append(t1 + t2 + t3)
            found_events += len(trace.events)
            found_payloads += len(payloads)

        # The overview page's queries, in the order the page runs them ("last hour").
        end = datetime.now(UTC)
        start = end - timedelta(hours=1)
        previous = (start - timedelta(hours=1), start)
        overview: dict[str, Callable[[], Any]] = {
            "modules": lambda: queries.modules(client, db, start - timedelta(hours=1)),
            "headline_rates (this hour)": lambda: queries.headline_rates(client, db, start, end),
            "headline_rates (previous hour)":
                lambda: queries.headline_rates(client, db, *previous),
            "event_totals": lambda: queries.event_totals(client, db, start, end),
            "event_rates": lambda: queries.event_rates(client, db, start, end),
            "top_agents": lambda: queries.top_agents(client, db, start, end, top_n=10),
        }
        overview_ms: dict[str, list[float]] = {name: [] for name in overview}
        page_ms: list[float] = []
        for call in overview.values():
            call()  # warm
        for _ in range(args.overview_runs):
            total = 0.0
            for name, call in overview.items():
                elapsed, _ = timed(call)
                overview_ms[name].append(elapsed)
                total += elapsed
            page_ms.append(total)
        totals = queries.event_totals(client, db, start, end)
    finally:
        if args.store is None:
            shutil.rmtree(tmp, ignore_errors=True)

    def stats(values: list[float]) -> dict[str, float]:
        return {"p50_ms": round(percentile(values, 50), 2), "p99_ms": round(percentile(values, 99), 2),
                "max_ms": round(max(values), 2), "n": len(values)}

    lookup = stats(lookup_ms)
    fig = report.figures
    fig.update({"stored": counts, "active_parts": parts,
                "seed_seconds": {k: round(v, 1) for k, v in seeding.items()},
                "lookup": lookup, "lookup_parts": {k: stats(v) for k, v in parts_ms.items()},
                "events_per_lookup": round(found_events / len(ids), 2),
                "payloads_found": found_payloads,
                "overview": {k: stats(v) for k, v in overview_ms.items()},
                "overview_page": stats(page_ms),
                "events_in_last_hour": sum(totals.values())})
    rows = [["request lookup (find + trace + payloads)", *_cells(lookup)]]
    rows += [[f"  {name}", *_cells(stats(v))] for name, v in parts_ms.items()]
    rows += [[f"overview: {name}", *_cells(stats(v))] for name, v in overview_ms.items()]
    rows.append(["overview page, all queries", *_cells(stats(page_ms))])
    report.table(f"lookup_latency: {counts['span_events']:,} span events, "
                 f"{counts['requests']:,} lookup rows, {counts['event_rollup_1m']:,} rollup rows",
                 ["query", "p50 ms", "p99 ms", "max ms", "runs"], rows)
    report.target("request lookup p99", lookup["p99_ms"], "<", TARGET_LOOKUP_P99_MS, "ms")
    for name, values in overview_ms.items():
        report.target(f"overview {name} p99", percentile(values, 99), "<", TARGET_OVERVIEW_MS,
                      "ms")
    if args.quick:
        report.notes.append("--quick size: a smoke run, not the benchmark's figures")
    return report.finish()


def _cells(summary: dict[str, float]) -> list[Any]:
    return [summary["p50_ms"], summary["p99_ms"], summary["max_ms"], summary["n"]]


if __name__ == "__main__":
    sys.exit(main())
