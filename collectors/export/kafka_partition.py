"""The partition Kafka's default partitioner picks for a keyed message, computed here.

kafka-python's partitioner hashes each key with a pure-Python murmur2 that masks every
intermediate to 32 bits, after rebuilding the topic's partition list twice: some 19 us of
a span message's 64 on the export thread. :func:`partition_for` is the same function
(the Java client's murmur2, positive, modulo the sorted partition ids), so a trace's
messages land where the OpenTelemetry Collector's Kafka exporter or any Java producer
would put them; the exporters look the partitions up once per export and pass each
message's partition to ``send``. tests/unit/test_kafka_partition.py compares the two.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache

__all__ = ["murmur2", "partition_for"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


@lru_cache(maxsize=64)
def _words(count: int) -> struct.Struct:
    return struct.Struct(f"<{count}I")


def murmur2(data: bytes) -> int:
    """MurmurHash2 of ``data`` as Kafka's Java client computes it (unsigned 32 bits)."""
    length = len(data)
    h = _SEED ^ length
    whole = length & ~3
    for k in _words(length >> 2).unpack_from(data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    rest = length & 3
    if rest:
        if rest == 3:
            h ^= data[whole + 2] << 16
        if rest >= 2:
            h ^= data[whole + 1] << 8
        h = ((h ^ data[whole]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def partition_for(key: bytes, partitions: Sequence[int]) -> int:
    """The partition of ``key`` among ``partitions`` (sorted, as the partitioner sorts)."""
    return partitions[(murmur2(key) & 0x7FFFFFFF) % len(partitions)]
