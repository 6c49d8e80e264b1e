"""The rows of one batch, per table: what the decoders build and the writer inserts.

It lives in the store, below both: the consumers import it to fill it, the writer to
insert it, and the store never imports the consumers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import tables

__all__ = ["DecodedRows"]


@dataclass
class DecodedRows:
    """Rows for each table decoded from one or more messages (columns as in
    :class:`guardtrace.store.tables.Columns`)."""

    spans: list[list[Any]] = field(default_factory=list)
    span_events: list[list[Any]] = field(default_factory=list)
    metric_points: list[list[Any]] = field(default_factory=list)
    payloads: list[list[Any]] = field(default_factory=list)
    log_records: list[list[Any]] = field(default_factory=list)
    dead_letters: list[list[Any]] = field(default_factory=list)

    def by_table(self) -> dict[str, list[list[Any]]]:
        """Each written table's rows, keyed by its name in :mod:`guardtrace.store.tables`."""
        return {tables.SPANS: self.spans, tables.SPAN_EVENTS: self.span_events,
                tables.METRIC_POINTS: self.metric_points, tables.PAYLOADS: self.payloads,
                tables.LOG_RECORDS: self.log_records, tables.DEAD_LETTERS: self.dead_letters}

    def extend(self, other: DecodedRows) -> None:
        self.spans.extend(other.spans)
        self.span_events.extend(other.span_events)
        self.metric_points.extend(other.metric_points)
        self.payloads.extend(other.payloads)
        self.log_records.extend(other.log_records)
        self.dead_letters.extend(other.dead_letters)

    def __len__(self) -> int:
        return (len(self.spans) + len(self.span_events) + len(self.metric_points)
                + len(self.payloads) + len(self.log_records) + len(self.dead_letters))

    def clear(self) -> None:
        """Empty every table's list in place (whoever still holds a list sees it empty)."""
        for rows in self.by_table().values():
            rows.clear()
