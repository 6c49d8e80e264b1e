"""Reads about the pipeline itself: row counts, label usage against the cap, rows written
per minute, dead letters and what the collectors dropped (``guardtrace stats``, the
dashboard's Labels and Pipeline health pages)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..schemas import names
from . import tables
from .query_sql import rows, sql, utc

__all__ = ["AGENT_LABELLED_METRICS", "COUNTED_TABLES", "DROP_METRICS", "LabelUsage",
           "collector_drops", "dead_letter_summary", "event_counts", "label_usage",
           "recent_dead_letters", "rows_written_per_minute", "table_counts"]

COUNTED_TABLES = (tables.SPANS, tables.SPAN_EVENTS, tables.METRIC_POINTS, tables.PAYLOADS,
                  tables.REQUESTS, tables.DEAD_LETTERS)

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

# Rows as a reader sees them (deduplicated). A payload is one logical row however many
# chunks carry it; the request lookup holds partial rows per request.
_COUNTS = {
    tables.PAYLOADS: "SELECT uniqExact(payload_id) FROM {payloads} FINAL",
    tables.REQUESTS: "SELECT uniqExact(request_id) FROM {requests}",
}
_COUNT_ROWS = "SELECT count() FROM {database}.{table} FINAL"
_EVENT_COUNTS = "SELECT name, count() FROM {span_events} FINAL GROUP BY name ORDER BY name"
_LABEL_USAGE = """
    SELECT metric_name, module, uniqExactIf(agent, agent != {{other:String}}),
           countIf(agent = {{other:String}}) > 0
    FROM {metric_points} FINAL
    WHERE metric_name IN {{metrics:Array(String)}} AND agent != ''
      AND timestamp >= {{since:DateTime64(9, 'UTC')}}
    GROUP BY metric_name, module
    ORDER BY metric_name, module"""
# The overflow counter is cumulative per series (service + labels): its latest value
# per series, summed, is the number of folded label uses.
_LABEL_OVERFLOW = """
    SELECT metric, module, sum(latest) FROM (
        SELECT attributes[{{metric_key:String}}] AS metric, module, service,
               argMax(value, timestamp) AS latest
        FROM {metric_points} FINAL
        WHERE metric_name = {{overflow_metric:String}}
          AND timestamp >= {{since:DateTime64(9, 'UTC')}}
        GROUP BY metric, module, service, attributes)
    GROUP BY metric, module"""
# Per written table, the column of its event time: the event-time bound lets ClickHouse
# skip old daily partitions; the insert-time bound is the one that matters.
_WRITTEN_TIME_COLUMNS = ((tables.SPANS, "start_time"), (tables.SPAN_EVENTS, "timestamp"),
                         (tables.METRIC_POINTS, "timestamp"), (tables.PAYLOADS, "timestamp"),
                         (tables.LOG_RECORDS, "timestamp"), (tables.DEAD_LETTERS, "timestamp"))
_ROWS_WRITTEN_PART = """
    SELECT toStartOfMinute(inserted_at) AS minute, '{table}' AS tbl, count() AS n
    FROM {database}.{table}
    WHERE inserted_at >= {{since:DateTime64(3, 'UTC')}}
      AND {time_column} >= {{since:DateTime64(9, 'UTC')}} - INTERVAL 1 DAY
    GROUP BY minute"""
_DEAD_LETTER_SUMMARY = """
    SELECT source_topic, reason_kind, count(), max(timestamp), argMax(reason, timestamp)
    FROM {dead_letters} FINAL
    WHERE timestamp >= {{since:DateTime64(9, 'UTC')}}
    GROUP BY source_topic, reason_kind
    ORDER BY count() DESC, source_topic, reason_kind"""
_RECENT_DEAD_LETTERS = """
    SELECT timestamp, source_topic, source_partition, source_offset, reason, value_bytes,
           value_sample
    FROM {dead_letters} FINAL
    ORDER BY timestamp DESC, source_topic, source_partition, source_offset
    LIMIT {{limit:UInt32}}"""
# The counters are cumulative per agent process: the latest value of each series,
# summed, is what was dropped since those processes started.
_COLLECTOR_DROPS = """
    SELECT metric_name, sum(latest) FROM (
        SELECT metric_name, service, attributes, resource_attributes,
               argMax(value, timestamp) AS latest
        FROM {metric_points} FINAL
        WHERE metric_name IN {{metrics:Array(String)}}
        GROUP BY metric_name, service, attributes, resource_attributes)
    GROUP BY metric_name"""


# -- counts (guardtrace stats) -----------------------------------------------------------
def table_counts(client: Any, database: str) -> dict[str, int]:
    """Rows per table after deduplication (FINAL), as a reader would see them."""
    counts = {}
    for table in COUNTED_TABLES:
        query = (sql(_COUNTS[table], database) if table in _COUNTS
                 else _COUNT_ROWS.format(database=database, table=table))
        counts[table] = int(rows(client, query)[0][0])
    return counts


def event_counts(client: Any, database: str) -> dict[str, int]:
    """Span events per event name, deduplicated."""
    return {str(name): int(count)
            for name, count in rows(client, sql(_EVENT_COUNTS, database))}


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
    usage = rows(client, sql(_LABEL_USAGE, database),
                 {"metrics": list(AGENT_LABELLED_METRICS), "other": names.OVERFLOW_LABEL,
                  "since": utc(since)})
    overflow = rows(client, sql(_LABEL_OVERFLOW, database),
                    {"metric_key": names.ATTR_METRIC,
                     "overflow_metric": names.METRIC_LABEL_OVERFLOW, "since": utc(since)})
    folded = {(str(m), str(mod)): int(v) for m, mod, v in overflow}
    return [LabelUsage(str(m), str(mod), int(d), bool(o), folded.get((str(m), str(mod)), 0))
            for m, mod, d, o in usage]


# -- pipeline health ----------------------------------------------------------------------
def rows_written_per_minute(client: Any, database: str,
                            since: datetime) -> list[tuple[datetime, str, int]]:
    """Rows the consumers wrote per minute and table since ``since`` (by insert time)."""
    parts = [_ROWS_WRITTEN_PART.format(database=database, table=table, time_column=column)
             for table, column in _WRITTEN_TIME_COLUMNS]
    found = rows(client, " UNION ALL ".join(parts) + " ORDER BY minute, tbl",
                 {"since": utc(since)})
    return [(utc(m), str(t), int(n)) for m, t, n in found]


def dead_letter_summary(client: Any, database: str,
                        since: datetime | None = None) -> list[dict[str, Any]]:
    """Dead letters per source topic and reason kind, with the latest reason."""
    found = rows(client, sql(_DEAD_LETTER_SUMMARY, database),
                 {"since": utc(since or datetime(1970, 1, 1, tzinfo=UTC))})
    return [{"topic": str(t), "reason_kind": str(k), "count": int(n), "last_seen": utc(last),
             "latest_reason": str(r)} for t, k, n, last, r in found]


def recent_dead_letters(client: Any, database: str, limit: int = 50) -> list[dict[str, Any]]:
    """The newest dead letters, one row each, with where they came from and why."""
    found = rows(client, sql(_RECENT_DEAD_LETTERS, database), {"limit": limit})
    return [{"time": utc(ts), "topic": str(t), "partition": int(p), "offset": int(o),
             "reason": str(r), "bytes": int(b), "first_bytes_hex": str(s)}
            for ts, t, p, o, r, b, s in found]


def collector_drops(client: Any, database: str) -> dict[str, int]:
    """Telemetry the collectors dropped or failed on, per counter, from their own metrics."""
    found = {str(m): int(v) for m, v in rows(client, sql(_COLLECTOR_DROPS, database),
                                               {"metrics": list(DROP_METRICS)})}
    return {metric: found.get(metric, 0) for metric in DROP_METRICS}
