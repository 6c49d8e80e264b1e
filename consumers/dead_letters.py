"""What a record the consumer cannot decode becomes: a dead-letter record and a row.

The record goes to the dead-letter topic with the reason and its source position in
headers (for replay); the same fact becomes a ``dead_letters`` row (for the health page
and ``guardtrace stats``), keyed by source position so a replayed batch collapses into
the row already written.
"""

from __future__ import annotations

import time
from typing import Any

from ..schemas import names
from .config import MAX_RECORD_BYTES

__all__ = ["dead_letter_headers", "dead_letter_row", "dead_letter_value", "reason_kind"]

# Reasons are cut here in headers and rows: a decoder's message can quote a lot of input.
_REASON_BYTES = 4096


def reason_kind(reason: str) -> str:
    """The short class of a dead-letter reason ("oversize", "truncated protobuf", ...)."""
    return reason.split(":")[0].split("(")[0].strip()[:60]


def dead_letter_headers(tp: Any, record: Any, reason: str) -> list[tuple[str, bytes]]:
    """The record's own headers plus the reason and where it came from."""
    return list(record.headers or []) + [
        (names.HEADER_DLQ_ERROR, reason.encode("utf-8", "replace")[:_REASON_BYTES]),
        (names.HEADER_DLQ_SOURCE_TOPIC, tp.topic.encode()),
        (names.HEADER_DLQ_SOURCE_PARTITION, str(tp.partition).encode()),
        (names.HEADER_DLQ_SOURCE_OFFSET, str(record.offset).encode()),
    ]


def dead_letter_value(record: Any) -> bytes | None:
    """The value to dead-letter: the record's, or a sample of an oversize one."""
    value = record.value
    if value is not None and len(value) > MAX_RECORD_BYTES:
        return value[:1024]  # keep a sample of an oversize record, not all of it
    return value


def dead_letter_row(tp: Any, record: Any, reason: str) -> list[Any]:
    """The ``dead_letters`` row (columns as in ``store.tables.Columns.DEAD_LETTERS``)."""
    value = record.value or b""
    return [f"{tp.topic}:{tp.partition}:{record.offset}", _record_time_ns(record), tp.topic,
            tp.partition, record.offset, reason_kind(reason), reason[:_REASON_BYTES],
            len(value), value[:64].hex()]


def _record_time_ns(record: Any) -> int:
    """The record's Kafka timestamp in ns, or now when the broker gave none."""
    timestamp_ms = getattr(record, "timestamp", None)
    if isinstance(timestamp_ms, int) and timestamp_ms > 0:
        return timestamp_ms * 1_000_000
    return time.time_ns()
