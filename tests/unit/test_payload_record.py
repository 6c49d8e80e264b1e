"""schemas/payload_record.py: the debug-store wire record (zstd: JSON header, raw body).

Version 2 is what the collector writes; version 1 (one JSON object, body included) is
what earlier collectors wrote, still in Kafka after an upgrade, and must keep decoding.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any

import pytest
import zstandard

from guardtrace.schemas.payload_record import (
    LEGACY_WIRE_VERSION,
    WIRE_VERSION,
    PayloadDecodeError,
    PayloadRecord,
    decode,
    encode,
)
from tests.support.payload_wire import encode_v1

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
    """Compress arbitrary JSON as a version 1 frame, to build malformed records."""
    return zstandard.ZstdCompressor().compress(json.dumps(data).encode("utf-8"))


def _valid_dict(**changes: Any) -> dict[str, Any]:
    """A version 1 document (every field in one object)."""
    data = asdict(RECORD)
    data["v"] = LEGACY_WIRE_VERSION
    data.update(changes)
    return data


def _wire_v2(header: Any, body: bytes = b"text") -> bytes:
    """A version 2 frame from any header (JSON-encoded unless bytes) and body bytes."""
    line = header if isinstance(header, bytes) else json.dumps(header).encode("utf-8")
    return zstandard.ZstdCompressor().compress(line + b"\n" + body)


def _valid_header(**changes: Any) -> dict[str, Any]:
    """A version 2 header: every field but the body."""
    data = asdict(RECORD)
    del data["body"]
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


def test_wire_form_is_zstd_of_a_json_header_line_then_the_raw_body() -> None:
    raw = encode(RECORD)
    assert raw[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic
    text = zstandard.ZstdDecompressor().decompress(raw, max_output_size=1 << 20)
    header_line, body = text.split(b"\n", 1)
    header = json.loads(header_line)
    assert header == {"v": WIRE_VERSION, **{k: v for k, v in asdict(RECORD).items()
                                            if k != "body"}}
    # The body is its UTF-8 bytes, not a JSON string: no escaping either way.
    assert body == RECORD.body.encode("utf-8")
    # ensure_ascii=False: non-ASCII header values travel as UTF-8, not \\u escapes.
    assert "ü → 🚀".encode() in header_line


@pytest.mark.parametrize("record", [
    RECORD,
    PayloadRecord(payload_id="p", request_id="r", kind="k", body=""),
    replace(RECORD, body="\n\n{\"v\": 2}\n"),  # newlines and a header look-alike in the body
    replace(RECORD, request_id="line\nbreak", attributes={"k\n": "v\n"}),
])
def test_version_1_and_2_decode_to_the_same_record(record: PayloadRecord) -> None:
    assert decode(encode(record)) == record
    assert decode(encode_v1(record)) == record


def test_version_1_wire_form_is_what_earlier_collectors_wrote() -> None:
    text = zstandard.ZstdDecompressor().decompress(encode_v1(RECORD), max_output_size=1 << 20)
    assert b"\n" not in text  # one JSON object, body escaped inside it
    assert json.loads(text) == {"v": LEGACY_WIRE_VERSION, **asdict(RECORD)}


def test_a_body_with_a_lone_surrogate_is_not_encoded() -> None:
    # The collector never builds one (its chunks are decoded UTF-8), but encode must
    # not ship bytes the consumer would reject.
    with pytest.raises(UnicodeEncodeError):
        encode(replace(RECORD, body="half a pair: \ud800"))


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
    with pytest.raises(PayloadDecodeError, match="truncated"):
        decode(_wire_v2(_valid_header(truncated=value)))


# -- version 2 decode errors -------------------------------------------------------------
def test_version_2_header_fields_are_checked_like_version_1() -> None:
    with pytest.raises(PayloadDecodeError, match="wrong type") as info:
        decode(_wire_v2(_valid_header(chunk_count=1.5)))
    assert "chunk_count" in str(info.value)
    with pytest.raises(PayloadDecodeError, match="out of range"):
        decode(_wire_v2(_valid_header(chunk_index=3, chunk_count=3)))
    with pytest.raises(PayloadDecodeError, match="request_id must not be empty"):
        decode(_wire_v2(_valid_header(request_id="")))
    with pytest.raises(PayloadDecodeError, match="wrong type"):
        decode(_wire_v2(_valid_header(attributes=[1, 2])))


def test_version_2_missing_fields_are_named() -> None:
    header = _valid_header()
    del header["kind"], header["timestamp_ns"]
    with pytest.raises(PayloadDecodeError, match="missing fields") as info:
        decode(_wire_v2(header))
    message = str(info.value)
    assert "kind" in message and "timestamp_ns" in message and "body" not in message


def test_version_2_header_must_not_hold_a_body() -> None:
    with pytest.raises(PayloadDecodeError, match="must not hold a body"):
        decode(_wire_v2(_valid_header(body="which one?")))


@pytest.mark.parametrize("body", [
    b"\xff\xfe\xfd",            # not UTF-8 at all
    b"half a pair: \xed\xa0\x80",  # an encoded lone surrogate: ClickHouse-safe text only
    "日本".encode()[:-1],       # cut inside a character
])
def test_version_2_body_must_be_utf8(body: bytes) -> None:
    with pytest.raises(PayloadDecodeError, match="body is not UTF-8"):
        decode(_wire_v2(_valid_header(), body))


def test_version_2_attribute_values_come_back_as_strings() -> None:
    decoded = decode(_wire_v2(_valid_header(attributes={"retry": 3, "ok": True})))
    assert decoded.attributes == {"retry": "3", "ok": "True"}


@pytest.mark.parametrize("header", [
    b"not json",
    b"[1, 2]",
    b'{"v": 3}',
])
def test_a_first_line_that_is_not_a_version_2_header_is_read_as_version_1(header: bytes
                                                                          ) -> None:
    # Left to the version 1 reader, which names what is wrong with the whole text.
    with pytest.raises(PayloadDecodeError, match="not JSON"):
        decode(_wire_v2(header))
