"""The debug-store record: one LLM interaction's full text, by request id.

On the wire a record is one zstd frame, one Kafka message per chunk. A body larger than
one message is split into ``chunk_count`` chunks that share ``payload_id``; the consumer
stores each chunk as a row and queries reassemble them in ``chunk_index`` order. A body
larger than the collector's payload limit is cut at the limit and marked ``truncated``
with its original size and sha256, so a reader always knows what is missing.

Inside the frame, two layouts are read (:func:`encode` writes version 2):

* version 2: a one-line JSON header (every field but the body, ``"v": 2``), a newline,
  then the body as raw UTF-8. The body, nearly all of the bytes, is neither escaped by
  the collector nor unescaped by the consumer.
* version 1: one JSON object holding every field, the body included, ``"v": 1``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import zstandard

__all__ = ["PayloadDecodeError", "PayloadRecord", "decode", "encode"]

WIRE_VERSION = 2
LEGACY_WIRE_VERSION = 1
_REQUIRED = ("v", "payload_id", "request_id", "kind", "body", "chunk_index", "chunk_count",
             "timestamp_ns")
_HEADER_FIELDS = ("payload_id", "request_id", "kind", "chunk_index", "chunk_count",
                  "timestamp_ns", "trace_id", "span_id", "body_bytes", "body_sha256",
                  "truncated", "redactions", "attributes")

# Level 1, not 3: on prompt text it compresses about twice as fast for a few percent more
# bytes on the wire (1.72 against 1.81 on the benchmark's text), and the compression ran
# on the payload worker for every byte shipped. Stored bodies are unaffected: ClickHouse
# compresses them with the column's own codec.
_compressor = zstandard.ZstdCompressor(level=1)
_decompressor = zstandard.ZstdDecompressor()
# Largest decompressed record accepted. ``max_output_size`` only bounds frames that do not
# declare their size; a frame header that declares one is allocated in full, so a small
# message declaring gigabytes would exhaust the consumer's memory: checked first.
_MAX_DECOMPRESSED = 64 * 1024 * 1024
# Largest value of each integer field's ClickHouse column (UInt32, DateTime64(9) in
# nanoseconds, UInt64): a record that decoded but could not be inserted would stall the
# consumer, which retries a failed insert until it succeeds.
_INT_LIMITS = {"chunk_index": 2**32 - 1, "chunk_count": 2**32 - 1, "redactions": 2**32 - 1,
               "timestamp_ns": 2**63 - 1, "body_bytes": 2**64 - 1}


class PayloadDecodeError(ValueError):
    """A payloads-topic message is not a guardtrace payload record."""


@dataclass(frozen=True)
class PayloadRecord:
    """One chunk of a debug payload (most payloads are a single chunk).

    Attributes:
        payload_id: Shared by all chunks of one payload; deterministic row identity.
        request_id: The request the interaction belongs to (the Kafka key).
        kind: What the payload is (``hallucination_detection``, ``plan_generation``, ...).
        body: This chunk's text (already redacted by the collector).
        chunk_index: Zero-based position of this chunk.
        chunk_count: How many chunks make up the body.
        timestamp_ns: When the collector recorded it (Unix epoch, nanoseconds).
        trace_id: Hex trace id of the span current at recording time, or "".
        span_id: Hex span id of that span, or "".
        body_bytes: Size in bytes of the whole (untruncated) body, UTF-8.
        body_sha256: sha256 hex of the whole (untruncated) body.
        truncated: True when the stored body was cut at the payload limit.
        redactions: How many secrets the collector replaced in the body.
        attributes: Free-form string attributes (model, retry number, ...).
    """

    payload_id: str
    request_id: str
    kind: str
    body: str
    chunk_index: int = 0
    chunk_count: int = 1
    timestamp_ns: int = 0
    trace_id: str = ""
    span_id: str = ""
    body_bytes: int = 0
    body_sha256: str = ""
    truncated: bool = False
    redactions: int = 0
    attributes: dict[str, str] = field(default_factory=dict)


def encode(record: PayloadRecord) -> bytes:
    """Serialise one record (chunk) to its wire form (version 2).

    Raises:
        UnicodeEncodeError: a text field holds a lone surrogate (not valid UTF-8).
    """
    header = {"v": WIRE_VERSION}
    for name in _HEADER_FIELDS:
        header[name] = getattr(record, name)
    # JSON without indentation has no raw newline (one in a string is escaped), so the
    # first newline of the frame ends the header.
    return _compressor.compress(b"".join((
        json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
        b"\n", record.body.encode("utf-8"))))


def decode(raw: bytes) -> PayloadRecord:
    """Parse a wire message back into a record.

    Raises:
        PayloadDecodeError: naming what is wrong (not zstd, not JSON, missing fields,
            wrong types), so the consumer can route the message to the dead-letter topic.
    """
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise PayloadDecodeError(f"payload message must be bytes, got {type(raw).__name__}")
    try:
        declared = zstandard.frame_content_size(bytes(raw))
        if declared > _MAX_DECOMPRESSED:
            raise PayloadDecodeError(f"payload declares {declared} bytes uncompressed, over "
                                     f"the {_MAX_DECOMPRESSED}-byte limit")
        text = _decompressor.decompress(bytes(raw), max_output_size=_MAX_DECOMPRESSED)
    except zstandard.ZstdError as exc:
        raise PayloadDecodeError(f"payload is not zstd-compressed: {exc}") from None
    data = _version_2(text)
    if data is None:
        data = _version_1(text)
    try:
        record = PayloadRecord(
            payload_id=_text(data, "payload_id", required=True),
            request_id=_text(data, "request_id", required=True),
            kind=_text(data, "kind", required=True),
            body=_text(data, "body"),
            chunk_index=_int(data, "chunk_index"),
            chunk_count=_int(data, "chunk_count"),
            timestamp_ns=_int(data, "timestamp_ns"),
            trace_id=_text(data, "trace_id"),
            span_id=_text(data, "span_id"),
            body_bytes=_int(data, "body_bytes"),
            body_sha256=_text(data, "body_sha256"),
            truncated=_bool(data, "truncated"),
            redactions=_int(data, "redactions"),
            attributes={_unicode(str(k), "attributes"): _unicode(str(v), "attributes")
                        for k, v in dict(data.get("attributes") or {}).items()},
        )
    except (TypeError, ValueError) as exc:
        raise PayloadDecodeError(f"payload has a field of the wrong type: {exc}") from None
    if not 0 <= record.chunk_index < record.chunk_count:
        raise PayloadDecodeError(
            f"chunk_index {record.chunk_index} out of range for chunk_count {record.chunk_count}")
    return record


def _version_2(text: bytes) -> dict[str, Any] | None:
    """The fields of a version 2 frame, or None if ``text`` is not one.

    Not one: no newline, or a first line that is not a JSON object with ``"v": 2``.
    Such text is left to :func:`_version_1`, which names what is wrong with it.
    """
    newline = text.find(b"\n")
    if newline == -1:
        return None
    try:
        header: Any = json.loads(text[:newline])
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(header, dict) or header.get("v") != WIRE_VERSION:
        return None
    if "body" in header:
        raise PayloadDecodeError("payload header must not hold a body (version 2 carries "
                                 "it after the header)")
    missing = [name for name in _REQUIRED if name != "body" and name not in header]
    if missing:
        raise PayloadDecodeError(f"payload is missing fields: {', '.join(missing)}")
    try:
        # Strict UTF-8: no lone surrogates either, so the body can always be stored.
        header["body"] = str(memoryview(text)[newline + 1:], "utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadDecodeError(f"payload body is not UTF-8: {exc}") from None
    return header


def _version_1(text: bytes) -> dict[str, Any]:
    """The fields of a version 1 frame (one JSON object), checked for presence and version."""
    try:
        data: Any = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PayloadDecodeError(f"payload is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise PayloadDecodeError("payload JSON must be an object")
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        raise PayloadDecodeError(f"payload is missing fields: {', '.join(missing)}")
    if data["v"] != LEGACY_WIRE_VERSION:
        raise PayloadDecodeError(f"unsupported payload wire version {data['v']!r}")
    return data


def _text(data: dict[str, Any], key: str, required: bool = False) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string")
    if required and not value:
        raise ValueError(f"{key} must not be empty")
    return _unicode(value, key)


def _unicode(value: str, key: str) -> str:
    """``value`` if it can be stored as UTF-8; JSON escapes can carry lone surrogates."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{key} is not valid Unicode (a lone surrogate)") from None
    return value


def _bool(data: dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise TypeError(f"{key} must be true or false")
    return value


def _int(data: dict[str, Any], key: str) -> int:
    value = data.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"{key} must be a non-negative integer")
    if value > _INT_LIMITS[key]:
        raise ValueError(f"{key} {value} is larger than its column allows ({_INT_LIMITS[key]})")
    return value
