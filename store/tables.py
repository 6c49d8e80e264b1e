"""Every ClickHouse table and column name guardtrace's Python code uses, defined once.

The numbered SQL files under ``schemas/migrations`` create these tables; they are data
and keep their literal DDL. ``tests/integration/test_store_tables.py`` migrates a
database and checks that every name here is a table or column it really has, so the two
cannot drift apart unnoticed.

The writer inserts :data:`WRITTEN` (columns in the order the decoders build rows), the
cluster renderer shards each table, the read queries name them through :func:`qualified`.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ALERT_EVENTS", "ALL", "Columns", "DEAD_LETTERS", "EVENT_ROLLUP_1M", "LOG_RECORDS",
           "METRIC_POINTS", "PAYLOADS", "REQUESTS", "SCHEMA_MIGRATIONS", "SPANS", "SPAN_EVENTS",
           "WRITTEN", "qualified"]

# Written by the consumers, one row per span, span event, metric point, payload chunk, OTLP
# log record and undecodable record.
SPANS: Final = "spans"
SPAN_EVENTS: Final = "span_events"
METRIC_POINTS: Final = "metric_points"
PAYLOADS: Final = "payloads"
LOG_RECORDS: Final = "log_records"
DEAD_LETTERS: Final = "dead_letters"
# Filled by materialized views only: the request-id lookup and the per-minute rollup.
REQUESTS: Final = "requests"
EVENT_ROLLUP_1M: Final = "event_rollup_1m"
# Written by the alert evaluator (store/alert_events.py), one row per state transition.
ALERT_EVENTS: Final = "alert_events"
# The migration runner's bookkeeping.
SCHEMA_MIGRATIONS: Final = "schema_migrations"

ALL: Final = (SPANS, SPAN_EVENTS, METRIC_POINTS, PAYLOADS, LOG_RECORDS, DEAD_LETTERS, REQUESTS,
              EVENT_ROLLUP_1M, ALERT_EVENTS, SCHEMA_MIGRATIONS)


class Columns:
    """Columns the Python code inserts into each table, in the order rows are built.

    Columns the tables fill themselves (``inserted_at``) are not listed.
    """

    SPANS: Final = ("trace_id", "span_id", "parent_span_id", "name", "kind", "service",
                    "scope_name", "start_time", "end_time", "duration_ns", "status_code",
                    "status_message", "request_id", "attributes", "resource_attributes")
    SPAN_EVENTS: Final = ("event_id", "timestamp", "name", "trace_id", "span_id", "request_id",
                          "module", "agent", "tier", "service", "attributes")
    METRIC_POINTS: Final = ("point_id", "metric_name", "metric_type", "unit", "service",
                            "module", "agent", "start_time", "timestamp", "value", "count",
                            "sum", "bucket_counts", "explicit_bounds", "is_monotonic",
                            "temporality", "attributes", "resource_attributes")
    PAYLOADS: Final = ("payload_id", "chunk_index", "chunk_count", "request_id", "kind",
                       "timestamp", "trace_id", "span_id", "body", "preview", "body_bytes",
                       "body_sha256", "truncated", "redactions", "attributes")
    LOG_RECORDS: Final = ("record_id", "timestamp", "observed_timestamp", "trace_id",
                          "span_id", "severity_number", "severity_text", "event_name", "body",
                          "request_id", "service", "scope_name", "attributes",
                          "resource_attributes")
    DEAD_LETTERS: Final = ("dead_letter_id", "timestamp", "source_topic", "source_partition",
                           "source_offset", "reason_kind", "reason", "value_bytes",
                           "value_sample")
    ALERT_EVENTS: Final = ("event_id", "timestamp", "rule", "labels", "state", "previous",
                           "metric", "condition", "value", "threshold", "volume",
                           "active_since", "message")
    SCHEMA_MIGRATIONS: Final = ("version", "name", "checksum")


# The tables the consumers write, with their columns, in insert order: spans before their
# events, so a reader never sees an event whose span is missing for longer than one insert.
WRITTEN: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    (SPANS, Columns.SPANS),
    (SPAN_EVENTS, Columns.SPAN_EVENTS),
    (METRIC_POINTS, Columns.METRIC_POINTS),
    (PAYLOADS, Columns.PAYLOADS),
    (LOG_RECORDS, Columns.LOG_RECORDS),
    (DEAD_LETTERS, Columns.DEAD_LETTERS),
)

# Placeholders the read queries' SQL templates use for each table ("FROM {spans}").
_PLACEHOLDERS: Final = {
    "spans": SPANS, "span_events": SPAN_EVENTS, "metric_points": METRIC_POINTS,
    "payloads": PAYLOADS, "log_records": LOG_RECORDS, "dead_letters": DEAD_LETTERS, "requests": REQUESTS,
    "event_rollup_1m": EVENT_ROLLUP_1M, "alert_events": ALERT_EVENTS,
    "schema_migrations": SCHEMA_MIGRATIONS,
}


def qualified(database: str) -> dict[str, str]:
    """``{placeholder: "database.table"}`` for filling a SQL template's table names."""
    return {key: f"{database}.{table}" for key, table in _PLACEHOLDERS.items()}
