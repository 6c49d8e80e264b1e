"""The version 1 payload wire form, as collectors wrote it before version 2.

Records in that form can still be in Kafka after an upgrade, so the consumer must keep
decoding them; tests build them with :func:`encode_v1`.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import zstandard

from guardtrace.schemas.payload_record import PayloadRecord

__all__ = ["encode_v1"]


def encode_v1(record: PayloadRecord) -> bytes:
    """``record`` byte for byte as the version 1 encoder wrote it (body inside the JSON)."""
    data = asdict(record)
    data["v"] = 1
    return zstandard.ZstdCompressor(level=3).compress(
        json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
