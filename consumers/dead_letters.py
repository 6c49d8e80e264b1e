"""What a record the consumer cannot decode becomes: a dead-letter record and a row.

The record goes to the dead-letter topic with the reason and its source position in
headers (for replay); the same fact becomes a ``dead_letters`` row (for the health page
and ``guardtrace stats``), keyed by source position so a replayed batch collapses into
the row already written.

A dead letter is the only copy of its record once the source offset is committed, so
the batch holding it commits only after the broker acknowledged it. A send that failed
is sent again on the next attempt (:func:`send_dead_letters`); checking the same failed
future again would fail forever and stall every partition of the consumer.
"""

from __future__ import annotations

import time
from typing import Any

from ..schemas import names
from .config import MAX_RECORD_BYTES

__all__ = ["DeadLetter", "DeadLetterNotDelivered", "await_dead_letters", "dead_letter_headers",
           "dead_letter_row", "dead_letter_value", "reason_kind", "send_dead_letters"]

# Reasons are cut here in headers and rows: a decoder's message can quote a lot of input.
_REASON_BYTES = 4096


class DeadLetterNotDelivered(Exception):
    """A dead letter was not acknowledged by the broker: its batch must not be committed."""


class DeadLetter:
    """One record bound for the dead-letter topic, and the state of its send.

    Args:
        tp: The record's source partition.
        record: The record (a kafka-python ``ConsumerRecord``).
        reason: Why it could not be decoded.
    """

    __slots__ = ("acked", "error", "future", "headers", "key", "source", "value")

    def __init__(self, tp: Any, record: Any, reason: str) -> None:
        self.key: bytes | None = record.key
        self.value = dead_letter_value(record)
        self.headers = dead_letter_headers(tp, record, reason)
        self.source = f"{tp.topic}[{tp.partition}]@{record.offset}"
        self.future: Any = None  # the send on its way; None: to be sent (again)
        self.error: BaseException | None = None  # why the last send failed
        self.acked = False

    def due(self) -> bool:
        """Not acknowledged, and no send on its way: never sent, or its send failed."""
        return not self.acked and (self.future is None or self.future.failed())


def send_dead_letters(producer: Any, topic: str, letters: list[DeadLetter]) -> None:
    """Send every letter that is due; a send that raises is left due, with its error."""
    for letter in letters:
        if not letter.due():
            continue
        try:
            letter.future = producer.send(topic, key=letter.key, value=letter.value,
                                          headers=letter.headers)
        except Exception as exc:  # noqa: BLE001 - e.g. no metadata within max_block_ms
            letter.future, letter.error = None, exc


def await_dead_letters(letters: list[DeadLetter], timeout_s: float) -> None:
    """Wait until the broker has acknowledged every letter.

    Raises:
        DeadLetterNotDelivered: a letter was not sent, its send failed (it is sent again
            by the next :func:`send_dead_letters`), or it is still unanswered after
            ``timeout_s`` (then the same send is waited for again, not repeated).
    """
    deadline = time.monotonic() + timeout_s
    for letter in letters:
        if letter.acked:
            continue
        if letter.future is None:
            raise DeadLetterNotDelivered(f"dead letter of {letter.source} not sent: "
                                         f"{letter.error!r}")
        try:
            letter.future.get(timeout=max(0.0, deadline - time.monotonic()))
        except Exception as exc:  # any failure holds the commit back
            letter.error = exc
            raise DeadLetterNotDelivered(f"dead letter of {letter.source} not acknowledged: "
                                         f"{exc!r}") from exc
        letter.acked = True


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
