"""Can ClickHouse decode the OTLP bytes itself, fast enough? (issue 17, item 1)

    .venv/bin/python benchmarks/store_side_decoding.py            # 200,000 guard events
    .venv/bin/python benchmarks/store_side_decoding.py --quick    # 12,000 (smoke, ~35 s)
    .venv/bin/python benchmarks/store_side_decoding.py --batch-records 20000

A measurement to choose a design, before anyone builds it. The same OTLP trace requests
(request spans with 4 guard events each, recorded through GuardTelemetry by
pipeline_throughput.py's agent loop and encoded by the Kafka exporter's encoder) go, in
batches of the consumer's size (GUARDTRACE_BATCH_MAX_ROWS rows: 4,000 records), through
these paths into one embedded ClickHouse (chDB), round after round in alternating order,
each after one untimed batch:

(a) the bare loop: each record's raw bytes into one String column (clickhouse-connect's
    insert, as benchmarks/_consume.py's bare mode does);
(b) today's path: the consumer's spans decoder (pipeline detection over decode_spans)
    and the store's ClickHouseWriter, called as functions;
(c) ClickHouse decodes: records framed as length-delimited Envelopes
    (otlp_trace_bounded.proto), sent as they are with ``INSERT ... FORMAT Protobuf`` into
    a Null table whose materialized views write the span and event rows
    (_store_side_sql.py); the consumer's share is a byte search that keeps LLM spans in
    Python (pipeline detection needs them), the framing, one query per batch for the
    records the SQL refused, and Python decoding of those;
(w) today's insert alone: the rows (b) decodes, decoded before the clock starts.

No Kafka anywhere: the rates are decode + insert per guard event, and the CPU is the
process's (chDB works in-process). Then: row counts after every path and round, (c)'s
rows against (b)'s column by column, hard attribute values, each kind of poison record,
the fallback when one fails a block, and today's event ids in SQL.

Results (2 CPUs, shared with other work; the two runs below)
------------------------------------------------------------
Run 1, defaults (200,000 events, 50,000 records in 13 batches of 4,000, 3 rounds; load
average 0.95 at start, 1.14 at end; 141 s):

    path                            events/s  wall us/event  CPU us/event  ratio to (a)
    (a) bare loop                    608,600            1.6           2.1         1.000
    (b) today                         24,291           41.2          49.2         0.040
    (c) ClickHouse decodes            22,195           45.1          53.3         0.036
    (w) today's insert alone          45,883           21.8          28.4         0.075

Run 2, --batch-records 20000 (3 batches; load 1.21 -> 2.11; 147 s): (a) 707,143 events/s
(1.4 us CPU/event), (b) 27,081 (36.8), (c) 36,548 (26.5), (w) 59,823 (16.4); (c)/(a)
0.052, (b)/(a) 0.038. Zero lost and zero duplicated on every path in every round of both.

What (c) costs (CPU; a one-record insert for the fixed part): parsing alone (FORMAT
Protobuf into a Null table, no views) 12 ms per insert and 4.4 us/event (4.9 in run 2),
more than the whole bare loop; with all the views 325 ms and 22.6 us/event beyond that
(run 2: 365 ms, 17.0); the record view (verdict, texts, maps) and the event rows are most
of it. Wall time of a one-record insert: (a) 6 ms, (b) 38 ms, (w) 44 ms, (c) 239 ms: (c)'s
is mostly ClickHouse analysing the views' SQL again at every insert, so its share falls
with the batch (15 us/event at 4,000 records, 3.4 at 20,000: the run 2 gain).

So: ClickHouse can decode these bytes into exactly today's rows (below), but not fast
enough. At the consumer's batch it costs a little more CPU than Python decoding (53.3
against 49.2 us/event); at five times the batch, 28% less (26.5 against 36.8). Neither is
near 0.8 of the bare loop: in pipeline_throughput's terms (bare loop 119,347 events/s with
Kafka, 8.4 us/event, of which ~2 us is its insert) the target leaves ~4 us/event for
decode + insert, and (w), storing rows already decoded into today's tables and views,
costs 17-22 us/event by itself. The store's write (Map columns, the request and rollup
views) has to get cheaper before any place of decoding can reach 0.8.

The four obstacles
------------------
1. Event ids in SQL. Today's id is blake2b(digest 16) of "trace:span:index:time:name"
   (consumers/otlp_values.py). ClickHouse has no BLAKE2b, nor BLAKE3 in chDB's build
   (system.functions: MD5, SHA1 to SHA512_256, sipHash128, xxh3_128 ...). BLAKE2b written
   in SQL (_blake2b_sql.py) gives today's ids, 2,000 of 2,000 (texts of one 128-byte block:
   event names up to ~56 bytes), but ClickHouse takes ~2 s to analyse the query, for one
   text or for 2,000 (2.2 and 1.7 s): each G step names the one before, and the analyser
   expands aliases in place (tried and dropped: a subquery per half round still took
   2.7 s, and 11 GB of memory at 100,000 texts; the steps written out without aliases hit
   "Query tree is too big"). A view pays that at every insert. So the ids must change:
   the views use SHA-256/128 of the same text, which Python's hashlib gives too (1,208 of
   1,208 sampled events). Across the upgrade a record written with blake2b ids and
   replayed with the new ones would be stored twice (span_events' key holds event_id; the
   rollup counts uniq(event_id)). Only records past the committed offset are replayed, at
   most the two batches a consumer holds; so either upgrade with a clean stop (SIGTERM
   writes and commits what it holds), or let the new consumer decode its first
   2 x GUARDTRACE_BATCH_MAX_ROWS records per partition in Python with the old ids.
2. Recursive AnyValue. otlp_trace_bounded.proto unrolls one level (a value, or an array
   or kvlist of scalars: all the SDKs record) and declares deeper containers as bytes, so
   a deeper record still parses and the SQL marks it "too deep"; the consumer decodes it
   in Python (checked: [["a", "b"], ["c"]] refused by the SQL, decoded by Python). Each
   level unrolled repeats the scalar texts in SQL, which ClickHouse analyses per insert.
3. Attribute text. Equal: 0 of 450 hard values differ (every AnyValue kind, 24 edge and
   400 random doubles against Python's repr, JSON escapes, U+2028, keys given twice,
   kvlists, bytes, empty values; _otlp_edge_cases.py), and 0 of 1,510 sampled rows per
   table differ in any column but event_id. It takes SQL of its own: ClickHouse's
   toJSONString escapes '/' and U+2028 and writes \\u001B in capitals, toString(1e-05) is
   0.00001, leftPad cuts a 3-digit exponent (the random doubles caught that), and
   ClickHouse stores invalid UTF-8 where upb refuses the record, so the SQL checks it
   (only in the fields the bounded schema declares: invalid UTF-8 in, say, trace_state
   would be stored by (c) and dead-lettered by today's consumer).
4. Poison. A record ClickHouse cannot parse fails the whole insert, with no row number,
   and input_format_allow_errors_num does not make ClickHouse skip it; so does any record
   that makes a view's SQL throw (the empty record did, until the SQL was fixed). Records
   that parse but are poison (bad ids, times after 2262, no spans, invalid UTF-8) get a
   verdict and go to Python, which dead-letters them with today's reasons. One bad record
   in a block of 4,001: the failed insert 0.07 s; halving the block until the bad record
   stands alone 4.0 s (23 inserts, each paying the views' analysis; 7.9 s and 29 inserts
   for 20,001); parsing every record with upb first and inserting the rest once 0.74 s
   (2.7 s for 20,001). A record upb accepts and ClickHouse refuses (field 1 sent as a
   varint) still needs the halving.
A fifth, not in the issue: pipeline detection (on by default) runs in Python on LLM
spans, so records holding "gen_ai." or "openinference.span.kind" must stay on the Python
path (here none do; the byte search costs next to nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _otlp_edge_cases as edge
import _store_side_sql as store_side
from _blake2b_sql import MAX_TEXT_BYTES, blake2b_128_query
from _common import Report, log
from pipeline_throughput import SHAPES, _drive

from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names

TARGET_BARE_RATIO = 0.8  # issue 17: the consumer at >= 0.8 of the bare loop
BARE_TABLE = "bare_raw"
# Databases of the one embedded engine (chDB allows one store directory per process).
BARE_DB, TODAY_DB, STORE_SIDE_DB = "bare", "today", "store_side"
# Tables the paths write (the requests and rollup tables fill from span_events/spans).
WRITTEN_TABLES = ("spans", "span_events", "requests", "event_rollup_1m")
# A record holding any of these goes to pipeline detection in Python (read_exchange in
# schemas/genai_exchange.py looks for openinference.span.kind and gen_ai.* keys).
LLM_SPAN_MARKERS = (b"gen_ai.", b"openinference.span.kind")
SAMPLE_RECORDS = 300
# Records whose events' ids the SQL BLAKE2b computes (its cost is the query's planning).
EVENT_ID_RECORDS = 500
FIXED_COST_INSERTS = 5


# -- the records ---------------------------------------------------------------------------
def build_records(events: int, per_span: int, agents: int) -> list[bytes]:
    """OTLP trace requests, one per request span, as the Kafka exporter writes them: the
    spans and guard events of pipeline_throughput's agent loop, through the real
    GuardTelemetry (redaction, attribute order), into an in-memory exporter."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from guardtrace.collectors.emit.telemetry import GuardTelemetry
    from guardtrace.collectors.export.otlp_span_encoder import encode_trace_request
    from guardtrace.collectors.testing import capture

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "guardtrace-bench"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with capture():
        guards = {shape.module: GuardTelemetry(shape.module, "bench") for shape in SHAPES}

        def record(shape: Any, request_id: str, agent: str) -> None:
            guard = guards[shape.module]
            guard.event(shape.event, request_id, {**shape.attributes, names.ATTR_AGENT: agent})
            guard.count(shape.metric, agent=agent, labels=shape.labels)

        _drive(provider.get_tracer("bench-agent"), record, lambda: True, lambda: True,
               events, per_span, flush_every=1000, agents=agents)
    # One span per trace: the exporter's one message per trace.
    return [encode_trace_request([span]) for span in exporter.get_finished_spans()]


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def frame(records: Sequence[bytes], batch_id: int) -> bytes:
    """Length-delimited Envelopes: batch (field 1), index (field 2), the record as it
    came (field 3, an embedded message's encoding: no re-encoding)."""
    head = b"\x08" + _varint(batch_id) + b"\x10"
    parts: list[bytes] = []
    for index, raw in enumerate(records):
        envelope_head = head + _varint(index) + b"\x1a" + _varint(len(raw))
        parts += (_varint(len(envelope_head) + len(raw)), envelope_head, raw)
    return b"".join(parts)


def new_event_id(trace_id: str, span_id: str, index: int, time_ns: int, name: str) -> str:
    """What the views compute (_store_side_sql EVENT_ID_HASH): today's text, SHA-256/128."""
    text = f"{trace_id}:{span_id}:{index}:{time_ns}:{name}".encode()
    return hashlib.sha256(text).hexdigest()[:32]


# -- the store -----------------------------------------------------------------------------
@dataclass
class Store:
    """One embedded engine with a database per path."""

    client: Any
    directory: Path
    proto_text: str
    batch_ids: Iterator[int] = field(default_factory=lambda: iter(range(1, 1 << 62)))

    def insert_settings(self) -> dict[str, Any]:
        from guardtrace.store.writer import INSERT_SETTINGS

        return {**store_side.insert_settings(self.proto_text), **INSERT_SETTINGS}

    def migrate(self, database: str) -> None:
        """guardtrace's tables and views in ``database``, as `guardtrace consume` makes them."""
        from guardtrace.store.connection import StoreConfig
        from guardtrace.store.migrate import migrate

        migrate(self.client, StoreConfig.resolve(url=f"chdb://{self.directory}",
                                                 database=database))

    def add_store_side(self, database: str, views: Sequence[str] = store_side.VIEWS) -> None:
        """A migrated ``database`` with path (c)'s tables and ``views``."""
        self.migrate(database)
        for statement in store_side.view_statements(database, views):
            self.client.command(statement)

    def scalar(self, sql: str) -> Any:
        return self.client.query(sql).result_rows[0][0]

    def truncate(self, database: str) -> None:
        tables = ((BARE_TABLE,) if database == BARE_DB else
                  WRITTEN_TABLES + ((store_side.REJECTS_TABLE,)
                                    if database == STORE_SIDE_DB else ()))
        for table in tables:
            self.client.command(f"TRUNCATE TABLE {database}.{table}")


def open_store(directory: Path) -> Store:
    from guardtrace.store.connection import StoreConfig, open_client

    client = open_client(StoreConfig.resolve(url=f"chdb://{directory}", database=TODAY_DB))
    client.command(f"CREATE DATABASE {BARE_DB}")
    client.command(f"CREATE TABLE {BARE_DB}.{BARE_TABLE} (value String) "
                   "ENGINE = MergeTree ORDER BY tuple()")
    store = Store(client, directory, store_side.PROTO_PATH.read_text())
    store.migrate(TODAY_DB)
    for statement in store_side.function_statements():
        client.command(statement)
    store.add_store_side(STORE_SIDE_DB)
    return store


# -- the paths -----------------------------------------------------------------------------
def consumer_decoder() -> Callable[[bytes], Any]:
    """The consumer's spans decoder, as TelemetryConsumer builds it (detection on)."""
    from guardtrace.consumers.decode import decode_spans
    from guardtrace.consumers.pipeline_detection import PipelineDetection

    return PipelineDetection(decode_spans, {})


def run_bare(store: Store, batches: list[list[bytes]]) -> dict[str, Any]:
    table = f"{BARE_DB}.{BARE_TABLE}"
    for batch in batches:
        store.client.insert(table, [[raw] for raw in batch], column_names=["value"])
    return {}


def run_today(store: Store, batches: list[list[bytes]]) -> dict[str, Any]:
    from guardtrace.consumers.decode import PoisonRecord
    from guardtrace.store.rows import DecodedRows
    from guardtrace.store.writer import ClickHouseWriter

    decode = consumer_decoder()
    writer = ClickHouseWriter(store.client, TODAY_DB)
    poison = 0
    for batch in batches:
        rows = DecodedRows()
        for raw in batch:
            try:
                rows.extend(decode(raw))
            except PoisonRecord:
                poison += 1
        writer.write(rows)
    return {"poison": poison}


def decode_batches(batches: list[list[bytes]]) -> list[Any]:
    """Each batch's rows as today's decoder builds them (for path (w), off the clock)."""
    from guardtrace.store.rows import DecodedRows

    decode = consumer_decoder()
    out = []
    for batch in batches:
        rows = DecodedRows()
        for raw in batch:
            rows.extend(decode(raw))
        out.append(rows)
    return out


def run_insert_only(store: Store, batches: list[Any]) -> dict[str, Any]:
    """Today's insert alone: ClickHouseWriter with rows decoded before the clock started
    (what any design that stores these rows pays ClickHouse, tables and views alike)."""
    from guardtrace.store.writer import ClickHouseWriter

    writer = ClickHouseWriter(store.client, TODAY_DB)
    for rows in batches:
        writer.write(rows)
    return {}


class StoreSideInsertError(Exception):
    """ClickHouse refused a Protobuf insert (a record it cannot parse)."""


def insert_protobuf(store: Store, records: Sequence[bytes], batch_id: int,
                    database: str = STORE_SIDE_DB) -> None:
    try:
        store.client.raw_insert(f"{database}.{store_side.IN_TABLE}", None,
                                frame(records, batch_id), fmt="Protobuf",
                                settings=store.insert_settings())
    except Exception as exc:  # whatever the engine raised, the block failed
        raise StoreSideInsertError(str(exc)[:300]) from exc


def store_batch(store: Store, records: Sequence[bytes]) -> list[bytes]:
    """Send ``records`` to ClickHouse; return those left to the Python decoder: the ones
    ClickHouse cannot parse (found by halving a failing block) and the ones the SQL
    refused (its verdicts, read back per batch id)."""
    unparseable: list[bytes] = []
    inserted: list[tuple[int, Sequence[bytes]]] = []

    def insert(part: Sequence[bytes]) -> None:
        if not part:
            return
        batch_id = next(store.batch_ids)
        try:
            insert_protobuf(store, part, batch_id)
            inserted.append((batch_id, part))
        except StoreSideInsertError:
            if len(part) == 1:
                unparseable.append(part[0])
                return
            middle = len(part) // 2
            insert(part[:middle])
            insert(part[middle:])

    insert(records)
    by_id = dict(inserted)
    refused = store.client.query(
        f"SELECT batch, record FROM {STORE_SIDE_DB}.{store_side.REJECTS_TABLE} "
        f"WHERE batch IN ({', '.join(str(batch_id) for batch_id in by_id) or 0})").result_rows
    return unparseable + [by_id[batch_id][index] for batch_id, index in refused]


def run_store_side(store: Store, batches: list[list[bytes]]) -> dict[str, Any]:
    """Path (c), as a consumer would run it per batch: LLM spans to Python (pipeline
    detection needs them there), the rest to ClickHouse as bytes, then what ClickHouse
    left (too deep, poison) decoded in Python (here with today's event ids; a real
    design would give that decoder the views' ids too)."""
    from guardtrace.consumers.decode import PoisonRecord
    from guardtrace.store.rows import DecodedRows
    from guardtrace.store.writer import ClickHouseWriter

    decode = consumer_decoder()
    writer = ClickHouseWriter(store.client, STORE_SIDE_DB)
    stats = {"to_python_llm": 0, "to_python_left_by_clickhouse": 0, "poison": 0}
    for batch in batches:
        in_python: list[bytes] = []
        to_store: list[bytes] = []
        for raw in batch:
            (in_python if any(marker in raw for marker in LLM_SPAN_MARKERS)
             else to_store).append(raw)
        stats["to_python_llm"] += len(in_python)
        left = store_batch(store, to_store)
        stats["to_python_left_by_clickhouse"] += len(left)
        rows = DecodedRows()
        for raw in in_python + left:
            try:
                rows.extend(decode(raw))
            except PoisonRecord:
                stats["poison"] += 1  # a consumer sends it to the dead-letter topic
        if len(rows):
            writer.write(rows)
    return stats


PATHS: dict[str, tuple[str, str, Callable[[Store, list[list[bytes]]], dict[str, Any]]]] = {
    "a": ("bare loop: raw bytes -> one String column", BARE_DB, run_bare),
    "b": ("today: Python decode + ClickHouseWriter", TODAY_DB, run_today),
    "c": ("ClickHouse decodes: FORMAT Protobuf -> Null -> views", STORE_SIDE_DB,
          run_store_side),
    "w": ("today's insert alone (rows decoded off the clock)", TODAY_DB, run_insert_only),
}


@contextmanager
def consumer_gc() -> Iterator[None]:
    """The cyclic GC as the consumer's loop sets it (consumer.py _fewer_gc_passes)."""
    from guardtrace.consumers.consumer import _fewer_gc_passes

    gc.collect()
    with _fewer_gc_passes():
        yield


def counts(store: Store, database: str) -> dict[str, int]:
    if database == BARE_DB:
        return {"records": int(store.scalar(f"SELECT count() FROM {BARE_DB}.{BARE_TABLE}"))}
    rows, distinct = store.client.query(
        f"SELECT count(), uniqExact(event_id) FROM {database}.span_events").result_rows[0]
    spans = store.scalar(f"SELECT uniqExact(trace_id, span_id) FROM {database}.spans")
    return {"event_rows": int(rows), "distinct_events": int(distinct), "spans": int(spans)}


@dataclass
class Timing:
    """Wall and CPU seconds (this process's, every thread: chDB works in-process) of each
    path, one entry per round."""

    wall: dict[str, list[float]] = field(default_factory=lambda: {key: [] for key in PATHS})
    cpu: dict[str, list[float]] = field(default_factory=lambda: {key: [] for key in PATHS})
    problems: list[str] = field(default_factory=list)
    store_side_stats: dict[str, Any] = field(default_factory=dict)


def run_rounds(store: Store, batches: list[list[bytes]], rounds: int, events: int,
               records: int) -> Timing:
    """Each path over every batch, ``rounds`` times, in alternating order, after one
    untimed batch of each (first-use costs: imports, schema caches)."""
    inputs: dict[str, list[Any]] = dict.fromkeys(PATHS, batches)
    inputs["w"] = decode_batches(batches)
    for key, (_, database, run) in PATHS.items():
        run(store, inputs[key][:1])
        store.truncate(database)
    timing = Timing()
    for round_no in range(rounds):
        order = list(PATHS) if round_no % 2 == 0 else list(PATHS)[::-1]
        for key in order:
            title, database, run = PATHS[key]
            store.truncate(database)
            with consumer_gc():
                cpu_started = time.process_time()
                started = time.perf_counter()
                result = run(store, inputs[key])
                elapsed = time.perf_counter() - started
                cpu = time.process_time() - cpu_started
            timing.wall[key].append(elapsed)
            timing.cpu[key].append(cpu)
            if key == "c":
                timing.store_side_stats = result
            found = counts(store, database)
            log(f"round {round_no + 1}: ({key}) {title}: {events / elapsed:,.0f} events/s, "
                f"{cpu / events * 1e6:.1f} us CPU/event {found}")
            expected = ({"records": records} if key == "a" else
                        {"event_rows": events, "distinct_events": events, "spans": records})
            if found != expected:
                timing.problems.append(
                    f"round {round_no + 1} ({key}): {found}, expected {expected}")
    return timing


# -- rows: (c) against (b) -----------------------------------------------------------------
def _select(columns: Sequence[str], time_columns: Sequence[str]) -> str:
    return ", ".join(f"toUnixTimestamp64Nano({c}) AS {c}" if c in time_columns else c
                     for c in columns)


def _comparable(value: Any) -> Any:
    return list(value.items()) if isinstance(value, dict) else value


def compare_rows(store: Store, trace_ids: Sequence[str], event_ids: dict[tuple, str]
                 ) -> tuple[list[list[Any]], int]:
    """(b)'s and (c)'s rows of ``trace_ids``, column by column (maps in their order).
    ``event_ids``: (trace, span, time, name) -> the id (c) should have written. Returns
    the table rows and the number of rows compared."""
    from guardtrace.store.tables import Columns

    wanted = ", ".join(f"'{t}'" for t in trace_ids)
    out: list[list[Any]] = []
    compared = 0
    for table, columns, times, key_of in (
            ("spans", Columns.SPANS, ("start_time", "end_time"),
             lambda r: (r["trace_id"], r["span_id"])),
            ("span_events", Columns.SPAN_EVENTS, ("timestamp",),
             lambda r: (r["trace_id"], r["span_id"], r["timestamp"], r["name"]))):
        sides = []
        for database in (TODAY_DB, STORE_SIDE_DB):
            result = store.client.query(f"SELECT {_select(columns, times)} FROM "
                                        f"{database}.{table} WHERE trace_id IN ({wanted})")
            rows = [dict(zip(result.column_names, row, strict=True))
                    for row in result.result_rows]
            sides.append({key_of(row): row for row in rows})
        today, ours = sides
        compared += len(today)
        missing = len(today.keys() - ours.keys()) + len(ours.keys() - today.keys())
        out.append([table, "(row present on one side only)", len(today), missing, ""])
        for column in columns:
            differing = [(key, today[key][column], ours[key][column])
                         for key in today.keys() & ours.keys()
                         if _comparable(today[key][column]) != _comparable(ours[key][column])]
            note = ""
            if column == "event_id":
                wrong = sum(ours[key]["event_id"] != event_ids.get(key) for key in ours)
                note = (f"by design (new ids); (c)'s equal {store_side.EVENT_ID_HASH} of "
                        f"today's text in {len(ours) - wrong}/{len(ours)}")
            elif differing:
                note = f"e.g. {differing[0][0]}: {differing[0][1]!r:.80} vs {differing[0][2]!r:.80}"
            out.append([table, column, len(today), len(differing), note])
    return out, compared


def sample_and_compare(store: Store, records: list[bytes], report: Report) -> None:
    """Every SAMPLE_RECORDS-th record's rows as the last round left them: (c)'s, and in
    the today database (b)'s (or (w)'s, the very rows (b) decodes)."""
    step = max(1, len(records) // SAMPLE_RECORDS)
    trace_ids: list[str] = []
    event_ids: dict[tuple, str] = {}
    for raw in records[::step]:
        ids = _new_ids(raw)
        trace_ids += {trace_id for trace_id, *_ in ids}
        event_ids.update(ids)
    rows, compared = compare_rows(store, trace_ids, event_ids)
    report.table(f"(c) against (b): the rows of {len(trace_ids)} sampled records "
                 f"({compared} rows per side and table)",
                 ["table", "column", "rows", "differ", "note"], rows)
    report.figures["sample_rows_compared"] = compared
    report.figures["sample_columns_differing"] = {
        f"{r[0]}.{r[1]}": r[3] for r in rows if r[3] and r[1] != "event_id"}


def _new_ids(raw: bytes) -> dict[tuple, str]:
    """(trace, span, time, name) -> the new-scheme id of each event of ``raw``."""
    out = {}
    for _, (trace_id, span_id, index, time_ns, name) in _event_texts(raw):
        out[(trace_id, span_id, time_ns, name)] = new_event_id(trace_id, span_id, index,
                                                               time_ns, name)
    return out


# -- obstacle 3: attribute text ------------------------------------------------------------
def attribute_text(store: Store, report: Report) -> None:
    """The edge-value record through (b) and (c): every attribute's stored text."""
    trace = bytes.fromhex("e1" * 16)
    raw = edge.edge_value_request(trace)
    for run in (run_today, run_store_side):
        run(store, [[raw]])
    differing: list[list[Any]] = []
    total = 0
    for table, column in (("spans", "attributes"), ("span_events", "attributes"),
                          ("spans", "resource_attributes")):
        maps = [store.client.query(f"SELECT {column} FROM {db}.{table} WHERE trace_id = "
                                   f"'{trace.hex()}'").result_rows[0][0]
                for db in (TODAY_DB, STORE_SIDE_DB)]
        today, ours = maps
        total += len(today)
        if list(today) != list(ours):
            differing.append([f"{table}.{column}", "(key order)", list(today)[:6], list(ours)[:6]])
        for key in today:
            if today[key] != ours.get(key):
                differing.append([f"{table}.{column}", key, today[key], ours.get(key)])
    random_wrong = sum(row[1].startswith("random_double_") for row in differing)
    report.figures["attribute_texts_compared"] = total
    report.figures["attribute_texts_differing"] = len(differing)
    report.figures["random_doubles_differing"] = random_wrong
    report.table(f"attribute text: {total} attributes of every kind (_otlp_edge_cases.py, "
                 f"{edge.RANDOM_DOUBLES} random doubles among them) through (b) and (c); "
                 f"{len(differing)} differ",
                 ["map", "key", "(b) today", "(c) ClickHouse"],
                 [[m, k, f"{b!r:.60}", f"{c!r:.60}"] for m, k, b, c in differing[:20]])


# -- obstacle 2 and 4: depth, poison -------------------------------------------------------
def verdicts(store: Store, good: bytes, report: Report) -> None:
    """What each kind of refused record does: in Python, and in ClickHouse (alone in a
    block; poison_fallback puts one in a full block)."""
    from guardtrace.consumers.decode import PoisonRecord, decode_spans

    trace = bytes.fromhex("d1" * 16)
    cases = {"nested deeper than the schema": edge.too_deep_request(trace),
             **edge.poison_records(bytes.fromhex("d2" * 16), good)}
    rows = []
    for name, raw in cases.items():
        try:
            decode_spans(raw)
            python = "decoded"
        except PoisonRecord as exc:
            python = f"poison: {str(exc)[:60]}"
        batch_id = next(store.batch_ids)
        try:
            insert_protobuf(store, [raw], batch_id)
            verdict = store.client.query(
                f"SELECT verdict FROM {STORE_SIDE_DB}.{store_side.REJECTS_TABLE} "
                f"WHERE batch = {batch_id}").result_rows
            sql = f"refused: {verdict[0][0]}" if verdict else "WRITTEN (no verdict)"
        except StoreSideInsertError as exc:
            sql = f"insert fails: {str(exc).split('DB::Exception: ')[-1][:60]}"
        rows.append([name, python, sql])
    report.table("records the Python decoder refuses or cannot store whole, alone in a "
                 "block of (c)", ["record", "today (Python)", "(c) ClickHouse"], rows)


def poison_fallback(store: Store, records: list[bytes], batch_size: int,
                    report: Report) -> None:
    """One unparseable record in the middle of a batch: the failed insert, then two ways
    to find it (halving the block; parsing each record in Python first)."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    batch = list(records[:batch_size])
    good_events = sum(1 for raw in batch for _ in _event_texts(raw))
    batch.insert(len(batch) // 2, b"\xff\xff\xff\xff\xff")
    rows = []
    store.truncate(STORE_SIDE_DB)
    started = time.perf_counter()
    try:
        insert_protobuf(store, batch, next(store.batch_ids))
        failed = "the insert succeeded"
    except StoreSideInsertError as exc:
        failed = str(exc).split("DB::Exception: ")[-1][:90]
    rows.append(["the block's insert (fails whole)", time.perf_counter() - started, "-",
                 failed])
    for title, find in (
            ("fallback: halve the failing block", lambda: store_batch(store, batch)),
            ("fallback: parse each record in Python (upb), re-insert the rest",
             lambda: _screened_insert(store, batch, ExportTraceServiceRequest, DecodeError))):
        store.truncate(STORE_SIDE_DB)
        inserts_before = next(store.batch_ids)
        started = time.perf_counter()
        refused = find()
        elapsed = time.perf_counter() - started
        inserts = next(store.batch_ids) - inserts_before - 1
        found = counts(store, STORE_SIDE_DB)
        ok = found["distinct_events"] == good_events == found["event_rows"]
        rows.append([title, elapsed, inserts,
                     f"{len(refused)} refused; {found['distinct_events']:,} of {good_events:,} "
                     f"events stored{'' if ok else ' (WRONG)'}"])
    report.table(f"a poison record in a block of {len(batch):,} records (c)",
                 ["step", "seconds", "inserts", "result"], rows)
    report.figures["poison_block_seconds"] = {r[0]: round(r[1], 3) for r in rows}


def _screened_insert(store: Store, batch: list[bytes], message: Any, error: type) -> list[bytes]:
    good, refused = [], []
    for raw in batch:
        try:
            message.FromString(raw)
            good.append(raw)
        except error:
            refused.append(raw)
    return refused + store_batch(store, good)


# -- obstacle 1: event ids -----------------------------------------------------------------
def event_ids_in_sql(store: Store, records: list[bytes], report: Report) -> None:
    """Today's ids by BLAKE2b written in SQL (_blake2b_sql.py): right? how fast?"""
    from guardtrace.consumers.otlp_values import event_id

    texts = [(text, event_id(*key)) for raw in records[:EVENT_ID_RECORDS]
             for text, key in _event_texts(raw)]
    table = f"{BARE_DB}.event_texts"
    client = store.client
    client.command(f"CREATE TABLE IF NOT EXISTS {table} (text String) ENGINE = Memory")
    timings = {}
    got: dict[str, str] = {}
    for label, rows in (("1 text", texts[:1]), (f"{len(texts):,} texts", texts)):
        client.command(f"TRUNCATE TABLE {table}")
        client.insert(table, [[text] for text, _ in rows], column_names=["text"])
        started = time.perf_counter()
        got = dict(client.query(blake2b_128_query(table, "text")).result_rows)
        timings[label] = time.perf_counter() - started
    right = sum(got.get(text) == today for text, today in texts)
    longest = max(len(text.encode()) for text, _ in texts)
    report.figures["blake2b_sql_seconds"] = {k: round(v, 3) for k, v in timings.items()}
    report.figures["blake2b_sql_ids_right"] = f"{right}/{len(texts)}"
    report.table("today's event ids computed in SQL (BLAKE2b-128 unrolled, _blake2b_sql.py)",
                 ["query over", "seconds", "ids equal to today's", "longest text (limit)"],
                 [[label, seconds, f"{right}/{len(texts)}" if label != "1 text" else "-",
                   f"{longest} ({MAX_TEXT_BYTES}) bytes"] for label, seconds in timings.items()])


def _event_texts(raw: bytes) -> Iterator[tuple[str, tuple[str, str, int, int, str]]]:
    """(text hashed for the id, event_id's arguments) of each event of ``raw``."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    for resource_spans in ExportTraceServiceRequest.FromString(raw).resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
                for index, event in enumerate(span.events):
                    key = (trace_id, span_id, index, event.time_unix_nano, event.name)
                    yield ":".join(str(part) for part in key), key


# -- where (c)'s time goes -----------------------------------------------------------------
BREAKDOWN = (
    ("parse only: Null table, no views", ()),
    ("+ record view (verdict, texts, maps) into a Null table",
     (store_side.FLATTEN_VIEW,)),
    ("+ verdicts read back (rejects view)", (store_side.FLATTEN_VIEW, store_side.REJECTS_VIEW)),
    ("+ span rows (spans view)", (store_side.FLATTEN_VIEW, store_side.REJECTS_VIEW,
                                  store_side.SPANS_VIEW)),
    ("+ event rows: all of (c)", store_side.VIEWS),
)
BREAKDOWN_REPEATS = 3


def store_side_breakdown(store: Store, batch: list[bytes], events: int, report: Report) -> None:
    """(c)'s insert with more and more of its views: the CPU of a one-record insert (its
    fixed cost, median of FIXED_COST_INSERTS) and of a full batch (best of
    BREAKDOWN_REPEATS), after one untimed insert, and the cost per event beyond the
    fixed one. Background merges of the tables make single inserts noisy."""
    rows = []
    for number, (title, views) in enumerate(BREAKDOWN):
        database = f"store_side_part_{number}"
        store.add_store_side(database, views)
        insert_protobuf(store, [batch[0]], next(store.batch_ids), database)  # first use
        cpu: dict[int, list[float]] = {}
        for records, repeats in (([batch[0]], FIXED_COST_INSERTS), (batch, BREAKDOWN_REPEATS)):
            for _ in range(repeats):
                started = time.process_time()
                insert_protobuf(store, records, next(store.batch_ids), database)
                cpu.setdefault(len(records), []).append(time.process_time() - started)
        fixed, full = statistics.median(cpu[1]), min(cpu[len(batch)])
        rows.append([title, fixed * 1000, full * 1000, (full - fixed) / events * 1e6])
    report.table("where (c)'s CPU goes: the insert with more and more of its views",
                 ["views", "CPU ms, 1 record", f"CPU ms, {len(batch):,} records",
                  "CPU us/event beyond the fixed"], rows)
    report.figures["store_side_breakdown"] = {r[0]: [round(r[1], 1), round(r[2], 1),
                                                     round(r[3], 2)] for r in rows}


# -- per-insert cost -----------------------------------------------------------------------
def fixed_costs(store: Store, record: bytes, report: Report) -> dict[str, float]:
    """Median seconds of a one-record batch on each path: what every insert pays."""
    out = {}
    for key, (_, _, run) in PATHS.items():
        batch = decode_batches([[record]]) if key == "w" else [[record]]
        samples = []
        for _ in range(FIXED_COST_INSERTS):
            started = time.perf_counter()
            run(store, batch)
            samples.append(time.perf_counter() - started)
        out[key] = statistics.median(samples)
    report.table("one record per batch: the fixed cost of each insert (median of "
                 f"{FIXED_COST_INSERTS})", ["path", "ms per insert"],
                 [[f"({key}) {PATHS[key][0]}", seconds * 1000] for key, seconds in out.items()])
    report.figures["fixed_ms_per_insert"] = {k: round(v * 1000, 1) for k, v in out.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="smoke size: 12,000 events")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events-per-span", type=int, default=4)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--batch-records", type=int, default=None,
                        help="records per batch (default: the consumer's batch, "
                             "GUARDTRACE_BATCH_MAX_ROWS rows, each record one span row "
                             "and its event rows)")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.rounds = min(args.events, 12_000), min(args.rounds, 2)
    if args.rounds < 1 or args.events < args.events_per_span:
        parser.error("--rounds must be at least 1 and --events at least --events-per-span")
    batch_rows = env.read_int(env.BATCH_MAX_ROWS, minimum=1)
    batch_records = args.batch_records or max(1, batch_rows // (1 + args.events_per_span))
    report = Report("store_side_decoding", {
        "events": args.events, "events_per_span": args.events_per_span,
        "rounds": args.rounds, "batch_records": batch_records})

    log(f"building {args.events:,} guard events")
    records = build_records(args.events, args.events_per_span, args.agents)
    events = args.events
    batches = [records[i:i + batch_records] for i in range(0, len(records), batch_records)]
    with tempfile.TemporaryDirectory(prefix="guardtrace-store-side-") as tmp, \
            contextlib.chdir(tmp):
        # ClickHouse writes a schema given inline (format_schema_source = 'string') to
        # __cache__/ in the working directory: the temporary one, not the checkout.
        store = open_store(Path(tmp) / "store")
        timing = run_rounds(store, batches, args.rounds, events, len(records))
        sample_and_compare(store, records, report)
        fixed_costs(store, records[0], report)
        store_side_breakdown(store, batches[0], len(batches[0]) * args.events_per_span, report)
        attribute_text(store, report)
        verdicts(store, records[0], report)
        poison_fallback(store, records, batch_records, report)
        event_ids_in_sql(store, records, report)
        store.client.close()

    rates = {key: [events / s for s in runs] for key, runs in timing.wall.items()}
    median = {key: statistics.median(values) for key, values in rates.items()}
    cpu_us = {key: statistics.median(values) / events * 1e6 for key, values in timing.cpu.items()}
    report.table(f"{events:,} guard events ({len(records):,} records, {len(batches)} batches "
                 f"of {batch_records:,}), {args.rounds} rounds in alternating order",
                 ["path", "events/s (median)", "wall us/event", "CPU us/event",
                  "rounds (events/s)", "ratio to (a)"],
                 [[f"({key}) {PATHS[key][0]}", median[key], 1e6 / median[key], cpu_us[key],
                   " ".join(f"{r:,.0f}" for r in rates[key]), median[key] / median["a"]]
                  for key in PATHS])
    report.figures.update({
        "events_per_s": {key: round(value) for key, value in median.items()},
        "events_per_s_rounds": {key: [round(r) for r in values] for key, values in rates.items()},
        "cpu_us_per_event": {key: round(value, 2) for key, value in cpu_us.items()},
        "ratio_to_bare": {key: round(median[key] / median["a"], 3) for key in PATHS},
        "store_side_stats": timing.store_side_stats, "count_problems": timing.problems})
    report.target("(c) ClickHouse decodes / bare loop", median["c"] / median["a"], ">=",
                  TARGET_BARE_RATIO)
    report.target("(b) today / bare loop", median["b"] / median["a"], ">=", TARGET_BARE_RATIO)
    report.target("rows lost or duplicated (every round, every path)", len(timing.problems),
                  "==", 0)
    if args.quick:
        report.notes.append("--quick size: a smoke run, not the benchmark's figures")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
