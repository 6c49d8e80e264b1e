"""Read back what a test put on a topic, without waiting out a fixed timeout.

A ``KafkaConsumer`` iterated with ``consumer_timeout_ms`` ends only after that long
without a message, so a test that reads a finished topic that way always waits the
whole timeout after the last record. :func:`read_records` ends once the records the test
expects have come and then none for a short quiet window: a surplus record (a second
dead letter, a duplicate) still arrives within it, since everything was on the broker
before the read began.
"""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaConsumer

__all__ = ["read_records"]


def read_records(topic: str, expected: int, *, quiet_s: float = 1.0,
                 timeout_s: float = 30.0, **consumer_settings: Any) -> list[Any]:
    """Every record of ``topic`` from its start.

    Args:
        topic: The topic, written completely before this is called.
        expected: Read at least this many before the quiet window may end the read.
        quiet_s: Then stop once no record came for this long.
        timeout_s: Give up after this long in all, returning what came (so the
            caller's assertion shows what is missing).
        **consumer_settings: For ``KafkaConsumer`` (``bootstrap_servers``, security).

    Returns:
        The records, in the order they were fetched.
    """
    reader = KafkaConsumer(topic, auto_offset_reset="earliest", **consumer_settings)
    records: list[Any] = []
    deadline = time.monotonic() + timeout_s
    last_record = time.monotonic()
    try:
        while time.monotonic() < deadline:
            fetched = [record for batch in reader.poll(timeout_ms=100).values()
                       for record in batch]
            now = time.monotonic()
            if fetched:
                records += fetched
                last_record = now
            elif len(records) >= expected and now - last_record >= quiet_s:
                break
        return records
    finally:
        reader.close()
