"""The read side: every query the CLI and the dashboard run, parameterised.

No user text is ever formatted into SQL: values travel as query parameters
(``{name:Type}``); only the database name, validated as an identifier at configuration
time, is interpolated.
"""

from __future__ import annotations

from typing import Any

__all__ = ["event_counts", "table_counts"]

COUNTED_TABLES = ("spans", "span_events", "metric_points", "payloads", "requests",
                  "dead_letters")


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
        counts[table] = int(client.query(sql).result_rows[0][0])
    return counts


def event_counts(client: Any, database: str) -> dict[str, int]:
    """Span events per event name, deduplicated."""
    rows = client.query(
        f"SELECT name, count() FROM {database}.span_events FINAL GROUP BY name ORDER BY name"
    ).result_rows
    return {str(name): int(count) for name, count in rows}
