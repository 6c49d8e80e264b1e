"""Workarounds for kafka-python and broker bugs the pipeline depends on not hitting.

Each function names the bug, the version it was found in, and how to tell when it can go.
"""

from __future__ import annotations

from typing import Any

__all__ = ["release_parked_records", "true_log_end"]


def release_parked_records(consumer: Any) -> None:
    """Let the fetcher hand back records it parked for a partition that has been resumed.

    kafka-python 3.0.12 (KAFKA-7548, "retain fetched data for paused partitions", added
    by dpkp/kafka-python pull request 2981) parks the unread rest of a fetch when its
    partition is paused, and restores it on a later poll only while no other fetch result
    is "in line". But a fully read fetch result stays in line as an empty object, never
    ``None``, so after any other partition's fetch the parked rest is never restored; the
    fetcher also never fetches a partition that has parked records. The resumed partition
    then stalls for good while its lag grows (found by the reliability suite: after a
    ClickHouse outage and a rebalance the surviving consumer stopped reading one
    partition).

    Clearing the empty slot before each poll lets the restore run. It touches private
    attributes, so it does nothing when they are not there (a kafka-python whose fetcher
    works differently). Whether it is still needed: without this call,
    ``tests/integration/test_kafka_pause_resume.py`` fails on an affected version.
    """
    fetcher = getattr(consumer, "_fetcher", None)
    if fetcher is None or not getattr(fetcher, "_paused_partition_records", None):
        return
    in_line = getattr(fetcher, "_next_partition_records", None)
    if in_line is not None and not in_line:  # read to the end: nothing in line
        fetcher._next_partition_records = None  # noqa: SLF001 - the workaround itself


def true_log_end(listed: int | None, fetched_high_watermark: int | None) -> int:
    """A partition's log end: the larger of ListOffsets(latest) and a fetch's high watermark.

    Tansu (the embedded broker) answers ListOffsets(latest) with the base offset of the
    last batch plus one, not the log end, so lag read that way is too small. A fetch
    response carries the true high watermark on every broker; Apache Kafka's two answers
    agree, so taking the larger is right on both. Whether it is still needed:
    ``tests/integration/test_consumer_lag.py`` fails on ``listed`` alone while Tansu
    answers this way.
    """
    return max(listed or 0, fetched_high_watermark or 0)
