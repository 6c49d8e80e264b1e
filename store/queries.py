"""The read side: every query the CLI and the dashboard run, parameterised.

No user text is ever formatted into SQL: values travel as query parameters
(``{name:Type}``); only the database name, validated as an identifier at configuration
time, is interpolated. Reads that must be exact use FINAL (ReplacingMergeTree collapses
replayed rows at merge time, FINAL at read time).

What each view reads, so it stays fast at size:

* the overview reads the per-minute rollup ``event_rollup_1m`` (one row per minute, name,
  module, tier and agent), never the raw events;
* a request page first reads the request-id lookup ``requests`` (time range, trace ids),
  then only that request's rows: ``span_events`` and ``payloads`` are ordered by
  request id and ``spans`` by trace id, so each read is a primary-key range.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..schemas import names

__all__ = [
    "OUTCOMES", "AgentRanking", "Headline", "LabelUsage", "Payload", "RequestSummary",
    "Trace", "TraceEvent", "TraceSpan", "collector_drops", "dead_letter_summary",
    "event_counts", "event_rates", "event_totals", "find_request", "headline_rates",
    "label_usage", "modules", "recent_dead_letters", "recent_requests", "request_payloads",
    "request_trace", "requests_seen", "rows_written_per_minute", "table_counts", "top_agents",
    "validate_request_id",
]

COUNTED_TABLES = ("spans", "span_events", "metric_points", "payloads", "requests",
                  "dead_letters")

# Request ids are opaque to guardtrace, but a query box is an attack surface and a typo
# trap: accept what ids look like in practice (uuid, hex, slug, "sim-1a2b-000042") and
# name the problem otherwise. Parameters already make SQL injection impossible; this is
# about clear errors.
_REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+=-]{0,199}$")

# Which guard events mark a request as having an outcome worth listing.
OUTCOMES: dict[str, tuple[str, ...]] = {
    "unrecoverable": (names.EVENT_HALLUCINATION_UNRECOVERABLE,),
    "recovered": (names.EVENT_HALLUCINATION_RECOVERED,),
    "hallucination": (names.EVENT_HALLUCINATION_DETECTED,),
    "fabrication": (names.EVENT_FABRICATION_DETECTED,),
    "verification": (names.EVENT_VERIFICATION_REQUIRED,),
    "nudged": (names.EVENT_VERIFICATION_NUDGED,),
    "bypassed": (names.EVENT_VERIFICATION_BYPASSED,),
    # Anything a person should look at: a hallucination, a fabrication, a skipped check.
    "problems": (names.EVENT_HALLUCINATION_DETECTED, names.EVENT_HALLUCINATION_UNRECOVERABLE,
                 names.EVENT_FABRICATION_DETECTED, names.EVENT_VERIFICATION_BYPASSED,
                 names.EVENT_VERIFICATION_NUDGED),
}

# Collector self-observability counters shown on the health page.
DROP_METRICS = (names.METRIC_EXPORT_DROPPED, names.METRIC_PAYLOADS_DROPPED,
                names.METRIC_HOOK_ERRORS)
# Guard counters that carry a (capped) agent label.
AGENT_LABELLED_METRICS = (
    names.METRIC_HALLUCINATIONS, names.METRIC_HALLUCINATION_RECOVERED,
    names.METRIC_HALLUCINATION_UNRECOVERABLE, names.METRIC_FABRICATIONS,
    names.METRIC_VERIFICATION_REQUIRED, names.METRIC_VERIFICATION_NUDGED,
    names.METRIC_VERIFICATION_COMPLETED, names.METRIC_VERIFICATION_BYPASSED,
)


def validate_request_id(text: str) -> str:
    """Return ``text`` stripped, or raise ValueError saying what is wrong with it."""
    request_id = text.strip()
    if not request_id:
        raise ValueError("a request id is required")
    if len(request_id) > 200:
        raise ValueError(f"a request id is at most 200 characters, got {len(request_id)}")
    if not _REQUEST_ID.match(request_id):
        bad = sorted({c for c in request_id if not re.match(r"[A-Za-z0-9._:/@+=-]", c)})
        raise ValueError(f"not a request id: {request_id[:60]!r} (unexpected characters: "
                         f"{''.join(bad)[:20]!r}; ids are letters, digits and . _ : / @ + = -)")
    return request_id


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _rows(client: Any, sql: str, parameters: dict[str, Any] | None = None) -> list[Sequence[Any]]:
    return list(client.query(sql, parameters=parameters or {}).result_rows)


# -- counts (guardtrace stats) -----------------------------------------------------------
def table_counts(client: Any, database: str) -> dict[str, int]:
    """Rows per table after deduplication (FINAL), as a reader would see them."""
    counts = {}
    for table in COUNTED_TABLES:
        if table == "payloads":
            # A payload is one logical row however many chunks carry it.
            sql = f"SELECT uniqExact(payload_id) FROM {database}.payloads FINAL"
        elif table == "requests":
            sql = f"SELECT uniqExact(request_id) FROM {database}.requests"
        else:
            sql = f"SELECT count() FROM {database}.{table} FINAL"
        counts[table] = int(_rows(client, sql)[0][0])
    return counts


def event_counts(client: Any, database: str) -> dict[str, int]:
    """Span events per event name, deduplicated."""
    rows = _rows(client, f"SELECT name, count() FROM {database}.span_events FINAL "
                         "GROUP BY name ORDER BY name")
    return {str(name): int(count) for name, count in rows}


# -- one request ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RequestSummary:
    """One row of the request-id lookup: when, which traces, what happened."""

    request_id: str
    first_seen: datetime
    last_seen: datetime
    trace_ids: tuple[str, ...]
    event_names: tuple[str, ...]
    modules: tuple[str, ...]
    agents: tuple[str, ...]
    payload_kinds: tuple[str, ...]


@dataclass(frozen=True)
class TraceSpan:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    service: str
    start_time: datetime
    end_time: datetime
    duration_ms: float
    status_code: str
    status_message: str
    attributes: dict[str, str]


@dataclass(frozen=True)
class TraceEvent:
    event_id: str
    timestamp: datetime
    name: str
    trace_id: str
    span_id: str
    module: str
    agent: str
    tier: str
    service: str
    attributes: dict[str, str]


@dataclass(frozen=True)
class Trace:
    """A request's spans and span events, each in time order."""

    request: RequestSummary
    spans: tuple[TraceSpan, ...]
    events: tuple[TraceEvent, ...]

    def timeline(self) -> list[dict[str, Any]]:
        """Spans and events merged on one time axis (what `guardtrace trace` prints)."""
        items: list[dict[str, Any]] = []
        for span in self.spans:
            items.append({"time": span.start_time, "type": "span", "name": span.name,
                          "span_id": span.span_id, "parent_span_id": span.parent_span_id,
                          "duration_ms": span.duration_ms, "status": span.status_code,
                          "service": span.service, "attributes": span.attributes})
        for event in self.events:
            items.append({"time": event.timestamp, "type": "event", "name": event.name,
                          "span_id": event.span_id, "module": event.module,
                          "agent": event.agent, "tier": event.tier,
                          "attributes": event.attributes})
        items.sort(key=lambda item: (item["time"], item["type"] == "event"))
        return items


@dataclass(frozen=True)
class Payload:
    """One debug payload, its chunks reassembled."""

    payload_id: str
    request_id: str
    kind: str
    timestamp: datetime
    trace_id: str
    span_id: str
    body: str
    body_bytes: int
    body_sha256: str
    truncated: bool
    redactions: int
    attributes: dict[str, str]
    chunks_present: int
    chunk_count: int

    @property
    def complete(self) -> bool:
        """Every chunk has arrived (a payload still in flight has gaps)."""
        return self.chunks_present == self.chunk_count


def find_request(client: Any, database: str, request_id: str) -> RequestSummary | None:
    """The lookup row of ``request_id``, or None when nothing of it is stored."""
    rows = _rows(client, f"""
        SELECT request_id, min(first_seen), max(last_seen), groupUniqArrayArray(trace_ids),
               groupUniqArrayArray(event_names), groupUniqArrayArray(modules),
               groupUniqArrayArray(agents), groupUniqArrayArray(payload_kinds)
        FROM {database}.requests
        WHERE request_id = {{request_id:String}}
        GROUP BY request_id""", {"request_id": request_id})
    return _summary(rows[0]) if rows else None


def _summary(row: Sequence[Any]) -> RequestSummary:
    """A lookup row (request id, first, last, then the five arrays) as a summary."""
    rid, first, last, traces, events, modules, agents, kinds = row
    return RequestSummary(rid, _utc(first), _utc(last), tuple(sorted(t for t in traces if t)),
                          tuple(sorted(events)), tuple(sorted(modules)), tuple(sorted(agents)),
                          tuple(sorted(kinds)))


def request_trace(client: Any, database: str, request: RequestSummary) -> Trace:
    """The spans of the request's traces and the request's span events, in time order."""
    # Point reads on the primary key. Duplicates from a replayed batch are dropped with
    # LIMIT 1 BY the row identity (replayed rows are identical) rather than FINAL, and
    # without a partition (day) bound: measured on 10M events, both made these reads
    # slower, not faster (FINAL 5.1 vs 3.3 ms p50; a day bound 7.1 vs 5.1 ms).
    params = {"request_id": request.request_id, "trace_ids": list(request.trace_ids)}
    span_rows = _rows(client, f"""
        SELECT trace_id, span_id, parent_span_id, name, service, start_time, end_time,
               duration_ns, status_code, status_message, attributes
        FROM {database}.spans
        WHERE trace_id IN {{trace_ids:Array(String)}}
        ORDER BY start_time, span_id
        LIMIT 1 BY trace_id, span_id""", params) if request.trace_ids else []
    event_rows = _rows(client, f"""
        SELECT event_id, timestamp, name, trace_id, span_id, module, agent, tier, service,
               attributes
        FROM {database}.span_events
        WHERE request_id = {{request_id:String}}
        ORDER BY timestamp, event_id
        LIMIT 1 BY event_id""", params)
    spans = tuple(TraceSpan(t, s, p, n, svc, _utc(st), _utc(et), d / 1e6, sc, sm, dict(a))
                  for t, s, p, n, svc, st, et, d, sc, sm, a in span_rows)
    events = tuple(TraceEvent(e, _utc(ts), n, t, s, m, ag, tier, svc, dict(a))
                   for e, ts, n, t, s, m, ag, tier, svc, a in event_rows)
    return Trace(request, spans, events)


def request_payloads(client: Any, database: str, request_id: str,
                     kind: str | None = None) -> list[Payload]:
    """The request's debug payloads (optionally one kind), chunks joined, oldest first."""
    rows = _rows(client, f"""
        SELECT payload_id, kind, timestamp, trace_id, span_id, chunk_index, chunk_count, body,
               body_bytes, body_sha256, truncated, redactions, attributes
        FROM {database}.payloads
        WHERE request_id = {{request_id:String}}
          AND ({{kind:String}} = '' OR kind = {{kind:String}})
        ORDER BY timestamp, payload_id, chunk_index
        LIMIT 1 BY payload_id, chunk_index""",
        {"request_id": request_id, "kind": kind or ""})
    grouped: dict[str, list[Sequence[Any]]] = {}
    for row in rows:
        grouped.setdefault(row[0], []).append(row)
    payloads = []
    for payload_id, chunks in grouped.items():
        first = chunks[0]
        payloads.append(Payload(
            payload_id=payload_id, request_id=request_id, kind=first[1],
            timestamp=_utc(first[2]), trace_id=first[3], span_id=first[4],
            body="".join(chunk[7] for chunk in chunks), body_bytes=int(first[8]),
            body_sha256=first[9], truncated=bool(first[10]), redactions=int(first[11]),
            attributes=dict(first[12]), chunks_present=len(chunks), chunk_count=int(first[6])))
    return payloads


# -- request lists ----------------------------------------------------------------------
def recent_requests(client: Any, database: str, *, since: datetime,
                    until: datetime | None = None, outcome: str = "problems",
                    module: str | None = None, limit: int = 100) -> list[RequestSummary]:
    """Requests last seen in [since, until) with ``outcome``, newest first.

    Raises:
        ValueError: ``outcome`` is not one of :data:`OUTCOMES` (or ``all``).
    """
    if outcome != "all" and outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; choose one of "
                         f"{', '.join([*OUTCOMES, 'all'])}")
    rows = _rows(client, f"""
        SELECT request_id, min(first_seen) AS first, max(last_seen) AS last,
               groupUniqArrayArray(trace_ids), groupUniqArrayArray(event_names) AS events,
               groupUniqArrayArray(modules) AS mods, groupUniqArrayArray(agents),
               groupUniqArrayArray(payload_kinds)
        FROM {database}.requests
        WHERE request_id IN (SELECT request_id FROM {database}.requests
                             WHERE last_seen >= {{since:DateTime64(9, 'UTC')}}
                               AND last_seen < {{until:DateTime64(9, 'UTC')}})
        GROUP BY request_id
        HAVING ({{any_outcome:UInt8}} OR hasAny(events, {{events:Array(String)}}))
           AND ({{module:String}} = '' OR has(mods, {{module:String}}))
        ORDER BY last DESC, request_id
        LIMIT {{limit:UInt32}}""", {
            "since": _utc(since), "until": _utc(until or datetime.now(UTC) + timedelta(days=1)),
            "any_outcome": int(outcome == "all"), "events": list(OUTCOMES.get(outcome, ())),
            "module": module or "", "limit": limit})
    return [_summary(row) for row in rows]


# -- overview (rollups) ----------------------------------------------------------------
def _rollup_filter(module: str | None) -> str:
    return "AND ({module:String} = '' OR module = {module:String})"


def _window(start: datetime, end: datetime, module: str | None) -> dict[str, Any]:
    return {"start": _utc(start), "end": _utc(end), "module": module or ""}


def event_rates(client: Any, database: str, start: datetime, end: datetime,
                module: str | None = None,
                event_names: Iterable[str] = names.GUARD_EVENTS) -> list[tuple[datetime, str, str, int]]:
    """Guard events per minute: ``(minute, name, tier, count)`` in [start, end), from rollups."""
    rows = _rows(client, f"""
        SELECT minute, name, tier, uniqMerge(events)
        FROM {database}.event_rollup_1m
        WHERE minute >= toStartOfMinute({{start:DateTime('UTC')}})
          AND minute < {{end:DateTime('UTC')}}
          AND name IN {{names:Array(String)}} {_rollup_filter(module)}
        GROUP BY minute, name, tier
        ORDER BY minute, name, tier""",
        {**_window(start, end, module), "names": list(event_names)})
    return [(_utc(m), str(n), str(t), int(c)) for m, n, t, c in rows]


def event_totals(client: Any, database: str, start: datetime, end: datetime,
                 module: str | None = None) -> dict[str, int]:
    """Guard events per name in [start, end), from rollups."""
    rows = _rows(client, f"""
        SELECT name, uniqMerge(events)
        FROM {database}.event_rollup_1m
        WHERE minute >= toStartOfMinute({{start:DateTime('UTC')}})
          AND minute < {{end:DateTime('UTC')}} {_rollup_filter(module)}
        GROUP BY name""", _window(start, end, module))
    return {str(n): int(c) for n, c in rows}


def modules(client: Any, database: str, since: datetime) -> list[str]:
    """Modules that emitted guard events since ``since`` (for the module filter)."""
    rows = _rows(client, f"""
        SELECT DISTINCT module FROM {database}.event_rollup_1m
        WHERE minute >= toStartOfMinute({{since:DateTime('UTC')}}) AND module != ''
        ORDER BY module""", {"since": _utc(since)})
    return [str(r[0]) for r in rows]


def requests_seen(client: Any, database: str, start: datetime, end: datetime,
                  module: str | None = None) -> int:
    """Requests first seen in [start, end) (optionally in one module)."""
    # The inner filter narrows to requests with a lookup row starting in the window before
    # grouping (grouping all of a large table first took ~4x longer); the outer one keeps
    # only those whose *earliest* row is in the window.
    rows = _rows(client, f"""
        SELECT count() FROM (
            SELECT request_id, min(first_seen) AS first, groupUniqArrayArray(modules) AS mods
            FROM {database}.requests
            WHERE request_id IN (
                SELECT request_id FROM {database}.requests
                WHERE first_seen >= {{start:DateTime64(9, 'UTC')}}
                  AND first_seen < {{end:DateTime64(9, 'UTC')}})
            GROUP BY request_id)
        WHERE first >= {{start:DateTime64(9, 'UTC')}} AND first < {{end:DateTime64(9, 'UTC')}}
          AND ({{module:String}} = '' OR has(mods, {{module:String}}))""",
        _window(start, end, module))
    return int(rows[0][0])


@dataclass(frozen=True)
class Headline:
    """The overview's headline numbers for one period (None when undefined)."""

    recovery_rate: float | None  # recovered / (recovered + unrecoverable)
    unrecoverable_rate: float | None  # unrecoverable / requests seen
    recovered: int
    unrecoverable: int
    detected: int
    requests: int


def headline_rates(client: Any, database: str, start: datetime, end: datetime,
                   module: str | None = None) -> Headline:
    """Recovery and unrecoverable rates for [start, end)."""
    totals = event_totals(client, database, start, end, module)
    recovered = totals.get(names.EVENT_HALLUCINATION_RECOVERED, 0)
    unrecoverable = totals.get(names.EVENT_HALLUCINATION_UNRECOVERABLE, 0)
    requests = requests_seen(client, database, start, end, module)
    settled = recovered + unrecoverable
    return Headline(
        recovery_rate=recovered / settled if settled else None,
        unrecoverable_rate=unrecoverable / requests if requests else None,
        recovered=recovered, unrecoverable=unrecoverable,
        detected=totals.get(names.EVENT_HALLUCINATION_DETECTED, 0), requests=requests)


@dataclass(frozen=True)
class AgentRanking:
    """Top agents by hallucinations, the rest folded into ``__other__``."""

    top: tuple[tuple[str, int], ...]
    other_count: int  # events of the agents beyond the top N
    other_agents: int  # how many distinct agents were folded
    total_agents: int

    def rows(self) -> list[tuple[str, int]]:
        """The ranking as rows, ``__other__`` last when anything was folded."""
        rows = list(self.top)
        if self.other_agents:
            rows.append((names.OVERFLOW_LABEL, self.other_count))
        return rows


def top_agents(client: Any, database: str, start: datetime, end: datetime,
               module: str | None = None, top_n: int = 10,
               event_name: str = names.EVENT_HALLUCINATION_DETECTED) -> AgentRanking:
    """The ``top_n`` agents with the most ``event_name`` events in [start, end)."""
    params = {**_window(start, end, module), "name": event_name, "top_n": top_n}
    where = f"""FROM {database}.event_rollup_1m
        WHERE name = {{name:String}} AND agent != ''
          AND minute >= toStartOfMinute({{start:DateTime('UTC')}})
          AND minute < {{end:DateTime('UTC')}} {_rollup_filter(module)}"""
    top = _rows(client, f"""
        SELECT agent, uniqMerge(events) AS n {where}
        GROUP BY agent ORDER BY n DESC, agent LIMIT {{top_n:UInt32}}""", params)
    total_agents, total_events = _rows(client, f"""
        SELECT uniqExact(agent), uniqMerge(events) {where}""", params)[0]
    top_rows = tuple((str(a), int(n)) for a, n in top)
    return AgentRanking(top=top_rows,
                        other_count=max(0, int(total_events) - sum(n for _, n in top_rows)),
                        other_agents=max(0, int(total_agents) - len(top_rows)),
                        total_agents=int(total_agents))


# -- labels ------------------------------------------------------------------------------
@dataclass(frozen=True)
class LabelUsage:
    """Distinct agent label values a guard counter carries, against the collector cap."""

    metric: str
    module: str
    distinct_agents: int  # excluding __other__
    overflowed: bool  # __other__ appears: the cap was reached
    overflow_count: int  # label uses folded into __other__ (guardtrace.label_overflow)


def label_usage(client: Any, database: str, since: datetime) -> list[LabelUsage]:
    """Per guard counter and module: distinct agent labels and overflow, since ``since``."""
    usage = _rows(client, f"""
        SELECT metric_name, module, uniqExactIf(agent, agent != {{other:String}}),
               countIf(agent = {{other:String}}) > 0
        FROM {database}.metric_points FINAL
        WHERE metric_name IN {{metrics:Array(String)}} AND agent != ''
          AND timestamp >= {{since:DateTime64(9, 'UTC')}}
        GROUP BY metric_name, module
        ORDER BY metric_name, module""",
        {"metrics": list(AGENT_LABELLED_METRICS), "other": names.OVERFLOW_LABEL,
         "since": _utc(since)})
    # The overflow counter is cumulative per series (service + labels): its latest value
    # per series, summed, is the number of folded label uses.
    overflow = _rows(client, f"""
        SELECT metric, module, sum(latest) FROM (
            SELECT attributes[{{metric_key:String}}] AS metric, module, service,
                   argMax(value, timestamp) AS latest
            FROM {database}.metric_points FINAL
            WHERE metric_name = {{overflow_metric:String}}
              AND timestamp >= {{since:DateTime64(9, 'UTC')}}
            GROUP BY metric, module, service, attributes)
        GROUP BY metric, module""",
        {"metric_key": names.ATTR_METRIC, "overflow_metric": names.METRIC_LABEL_OVERFLOW,
         "since": _utc(since)})
    folded = {(str(m), str(mod)): int(v) for m, mod, v in overflow}
    return [LabelUsage(str(m), str(mod), int(d), bool(o), folded.get((str(m), str(mod)), 0))
            for m, mod, d, o in usage]


# -- pipeline health ----------------------------------------------------------------------
def rows_written_per_minute(client: Any, database: str,
                            since: datetime) -> list[tuple[datetime, str, int]]:
    """Rows the consumers wrote per minute and table since ``since`` (by insert time)."""
    parts = []
    for table, time_column in (("spans", "start_time"), ("span_events", "timestamp"),
                               ("metric_points", "timestamp"), ("payloads", "timestamp"),
                               ("dead_letters", "timestamp")):
        # The event-time bound lets ClickHouse skip old daily partitions; the insert-time
        # bound is the one that matters.
        parts.append(f"""
            SELECT toStartOfMinute(inserted_at) AS minute, '{table}' AS tbl, count() AS n
            FROM {database}.{table}
            WHERE inserted_at >= {{since:DateTime64(3, 'UTC')}}
              AND {time_column} >= {{since:DateTime64(9, 'UTC')}} - INTERVAL 1 DAY
            GROUP BY minute""")
    rows = _rows(client, " UNION ALL ".join(parts) + " ORDER BY minute, tbl",
                 {"since": _utc(since)})
    return [(_utc(m), str(t), int(n)) for m, t, n in rows]


def dead_letter_summary(client: Any, database: str,
                        since: datetime | None = None) -> list[dict[str, Any]]:
    """Dead letters per source topic and reason kind, with the latest reason."""
    rows = _rows(client, f"""
        SELECT source_topic, reason_kind, count(), max(timestamp), argMax(reason, timestamp)
        FROM {database}.dead_letters FINAL
        WHERE timestamp >= {{since:DateTime64(9, 'UTC')}}
        GROUP BY source_topic, reason_kind
        ORDER BY count() DESC, source_topic, reason_kind""",
        {"since": _utc(since or datetime(1970, 1, 1, tzinfo=UTC))})
    return [{"topic": str(t), "reason_kind": str(k), "count": int(n), "last_seen": _utc(last),
             "latest_reason": str(r)} for t, k, n, last, r in rows]


def recent_dead_letters(client: Any, database: str, limit: int = 50) -> list[dict[str, Any]]:
    """The newest dead letters, one row each, with where they came from and why."""
    rows = _rows(client, f"""
        SELECT timestamp, source_topic, source_partition, source_offset, reason, value_bytes,
               value_sample
        FROM {database}.dead_letters FINAL
        ORDER BY timestamp DESC, source_topic, source_partition, source_offset
        LIMIT {{limit:UInt32}}""", {"limit": limit})
    return [{"time": _utc(ts), "topic": str(t), "partition": int(p), "offset": int(o),
             "reason": str(r), "bytes": int(b), "first_bytes_hex": str(s)}
            for ts, t, p, o, r, b, s in rows]


def collector_drops(client: Any, database: str) -> dict[str, int]:
    """Telemetry the collectors dropped or failed on, per counter, from their own metrics.

    The counters are cumulative per agent process: the latest value of each series,
    summed, is what was dropped since those processes started.
    """
    rows = _rows(client, f"""
        SELECT metric_name, sum(latest) FROM (
            SELECT metric_name, service, attributes, resource_attributes,
                   argMax(value, timestamp) AS latest
            FROM {database}.metric_points FINAL
            WHERE metric_name IN {{metrics:Array(String)}}
            GROUP BY metric_name, service, attributes, resource_attributes)
        GROUP BY metric_name""", {"metrics": list(DROP_METRICS)})
    found = {str(m): int(v) for m, v in rows}
    return {metric: found.get(metric, 0) for metric in DROP_METRICS}
