"""schemas/payload_record.py: the debug-store wire record (zstd-compressed JSON)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any

import pytest
import zstandard

from guardtrace.schemas.payload_record import (
    WIRE_VERSION,
    PayloadDecodeError,
    PayloadRecord,
    decode,
    encode,
)

RECORD = PayloadRecord(
    payload_id="5f0c2a9e4b1d4c3e8a7f6b5c4d3e2f1a",
    request_id="req-ünïcødé-42",
    kind="hallucination_detection",
    body="Plan uses «time-tool-v1» — not registered. 日本語テキスト 🚀 \"quoted\" \\ \n\t end",
    chunk_index=1,
    chunk_count=3,
    timestamp_ns=1_718_000_000_123_456_789,
    trace_id="0af7651916cd43dd8448eb211c80319c",
    span_id="b7ad6b7169203331",
    body_bytes=123_456,
    body_sha256="ab" * 32,
    truncated=True,
    redactions=2,
    attributes={"model": "gpt-4o", "retry": "2", "note": "ü → 🚀"},
)


def _wire(data: Any) -> bytes:
    """Compress arbitrary JSON the way encode() does, to build malformed records."""
    return zstandard.ZstdCompressor().compress(json.dumps(data).encode("utf-8"))


def _valid_dict(**changes: Any) -> dict[str, Any]:
    data = asdict(RECORD)
    data["v"] = WIRE_VERSION
    data.update(changes)
    return data


# -- round trip --------------------------------------------------------------------------
def test_round_trip_preserves_every_field() -> None:
    assert decode(encode(RECORD)) == RECORD


def test_round_trip_of_defaults() -> None:
    record = PayloadRecord(payload_id="p", request_id="r", kind="k", body="")
    decoded = decode(encode(record))
    assert decoded == record
    assert decoded.attributes == {}
    assert (decoded.chunk_index, decoded.chunk_count) == (0, 1)


def test_wire_form_is_zstd_json_with_version_and_raw_unicode() -> None:
    raw = encode(RECORD)
    assert raw[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic
    text = zstandard.ZstdDecompressor().decompress(raw, max_output_size=1 << 20)
    data = json.loads(text)
    assert data["v"] == WIRE_VERSION
    assert data["body"] == RECORD.body
    # ensure_ascii=False: non-ASCII travels as UTF-8, not \\u escapes.
    assert "日本語".encode() in text


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_decode_accepts_bytes_like(wrap: Any) -> None:
    assert decode(wrap(encode(RECORD))) == RECORD


def test_attribute_values_come_back_as_strings() -> None:
    decoded = decode(_wire(_valid_dict(attributes={"retry": 3, "ok": True})))
    assert decoded.attributes == {"retry": "3", "ok": "True"}


# -- decode errors -----------------------------------------------------------------------
def test_non_bytes_input_is_rejected_with_its_type() -> None:
    with pytest.raises(PayloadDecodeError, match="must be bytes, got str"):
        decode("not bytes")  # type: ignore[arg-type]


def test_not_zstd() -> None:
    with pytest.raises(PayloadDecodeError, match="not zstd-compressed"):
        decode(b'{"v": 1, "payload_id": "x"}')


def test_truncated_zstd_frame() -> None:
    with pytest.raises(PayloadDecodeError, match="not zstd-compressed"):
        decode(encode(RECORD)[:-8])


def test_zstd_of_non_json() -> None:
    raw = zstandard.ZstdCompressor().compress(b"hello, this is not JSON")
    with pytest.raises(PayloadDecodeError, match="not JSON"):
        decode(raw)


def test_zstd_of_invalid_utf8() -> None:
    raw = zstandard.ZstdCompressor().compress(b'{"body": "\xff\xfe\xfd"}')
    with pytest.raises(PayloadDecodeError, match="not JSON"):
        decode(raw)


@pytest.mark.parametrize("value", [[1, 2, 3], "a string", 42, None])
def test_json_that_is_not_an_object(value: Any) -> None:
    with pytest.raises(PayloadDecodeError, match="must be an object"):
        decode(_wire(value))


def test_missing_fields_are_named() -> None:
    data = _valid_dict()
    del data["request_id"], data["chunk_count"]
    with pytest.raises(PayloadDecodeError, match="missing fields") as info:
        decode(_wire(data))
    message = str(info.value)
    assert "request_id" in message and "chunk_count" in message
    assert "payload_id" not in message  # only the missing ones are named


@pytest.mark.parametrize("version", [0, 2, "1", None])
def test_wrong_wire_version(version: Any) -> None:
    with pytest.raises(PayloadDecodeError, match="wire version") as info:
        decode(_wire(_valid_dict(v=version)))
    assert repr(version) in str(info.value)


@pytest.mark.parametrize(("field", "value"), [
    ("chunk_index", "0"),
    ("chunk_count", 1.5),
    ("timestamp_ns", -1),
    ("body_bytes", True),
    ("redactions", None),
    ("body", 12),
    ("request_id", ["r"]),
    ("kind", {"k": 1}),
    ("trace_id", 7),
])
def test_wrong_types_name_the_field(field: str, value: Any) -> None:
    with pytest.raises(PayloadDecodeError, match="wrong type") as info:
        decode(_wire(_valid_dict(**{field: value})))
    assert field in str(info.value)


@pytest.mark.parametrize("field", ["payload_id", "request_id", "kind"])
def test_required_identity_fields_must_not_be_empty(field: str) -> None:
    with pytest.raises(PayloadDecodeError, match=f"{field} must not be empty"):
        decode(_wire(_valid_dict(**{field: ""})))


def test_attributes_that_are_not_a_mapping() -> None:
    with pytest.raises(PayloadDecodeError, match="wrong type"):
        decode(_wire(_valid_dict(attributes=[1, 2])))


@pytest.mark.parametrize(("index", "count"), [(3, 3), (5, 2), (0, 0)])
def test_chunk_index_out_of_range(index: int, count: int) -> None:
    with pytest.raises(PayloadDecodeError, match="out of range") as info:
        decode(encode(replace(RECORD, chunk_index=index, chunk_count=count)))
    assert f"chunk_index {index}" in str(info.value)
    assert f"chunk_count {count}" in str(info.value)


def test_decode_error_is_a_value_error() -> None:
    # Callers that only know ValueError still catch it.
    with pytest.raises(ValueError):
        decode(b"\x00")


@pytest.mark.parametrize("value", ["false", "no"])
def test_truncated_must_be_a_boolean(value: Any) -> None:
    with pytest.raises(PayloadDecodeError, match="truncated"):
        decode(_wire(_valid_dict(truncated=value)))
