"""How the HTTP stand-in reads a request: chunked bodies, encodings, the statement, and
a clear error for what it cannot read. (Serving them: tests/integration/test_consume_over_http.py.)"""

from __future__ import annotations

import io
import zlib

import pytest

from tests.support.clickhouse_http_standin import (
    RequestError,
    Statement,
    decompress,
    read_chunked,
    split_insert,
    trailing_format,
)


def _chunked(raw: bytes, limit: int = 1 << 20) -> bytes:
    stream = io.BytesIO(raw)
    return read_chunked(stream.read, stream.readline, limit)


def test_a_chunked_body_is_joined_and_its_trailers_skipped() -> None:
    assert _chunked(b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n") == b"hello world"


@pytest.mark.parametrize(("raw", "reason"), [
    (b"zz\r\nhello\r\n0\r\n\r\n", "bad chunk size"),
    (b"a\r\nhello\r\n0\r\n\r\n", "cut short"),
    (b"5\r\nhello", "cut short"),
    (b"f" * 2000 + b"\r\n", "too long"),
    (b"100001\r\n", "body over"),
])
def test_a_broken_chunked_body_is_refused_saying_why(raw: bytes, reason: str) -> None:
    with pytest.raises(RequestError, match=reason):
        _chunked(raw)


def test_concatenated_frames_are_all_decompressed() -> None:
    import lz4.frame

    frames = b"".join(lz4.frame.compress(part) for part in (b"first ", b"second"))
    assert decompress(frames, "lz4") == b"first second"
    assert decompress(zlib.compress(b"deflated"), "deflate") == b"deflated"
    assert decompress(b"plain", None) == b"plain"


def test_an_unknown_or_broken_encoding_is_refused_saying_why() -> None:
    with pytest.raises(RequestError, match="'br' is not supported"):
        decompress(b"x", "br")
    with pytest.raises(RequestError, match="does not decompress"):
        decompress(b"not gzip", "gzip")
    import lz4.frame

    with pytest.raises(RequestError, match="ends inside a frame"):
        decompress(lz4.frame.compress(b"x" * 100)[:-6], "lz4")


def test_an_insert_with_rows_is_split_at_its_format_clause() -> None:
    head, fmt, rows = split_insert(b"INSERT INTO db.t (`a`, `b`) FORMAT Native\n\x00\x01\n\xff")
    assert (head, fmt, rows) == ("INSERT INTO db.t (`a`, `b`)", "Native", b"\x00\x01\n\xff")


@pytest.mark.parametrize("sql", [b"SELECT 1\n FORMAT Native", b"INSERT INTO t SELECT 1",
                                 b"INSERT INTO t VALUES (1)\n"])
def test_other_statements_stay_text(sql: bytes) -> None:
    assert split_insert(sql) == (sql.decode(), None, None)


def test_a_statement_that_is_not_text_is_refused() -> None:
    with pytest.raises(RequestError, match="not UTF-8"):
        split_insert(b"SELECT '\xff'")
    with pytest.raises(RequestError, match="not a format name"):
        split_insert(b"INSERT INTO t FORMAT Na-tive\nrows")


def test_parameters_are_sorted_into_settings_query_parameters_and_transport() -> None:
    statement = Statement.parse(
        {"query": "SELECT {x:UInt8}", "database": "db", "session_id": "s", "query_id": "q",
         "wait_end_of_query": "1", "param_x": "7", "date_time_input_format": "best_effort"},
        b"")
    assert statement.sql == "SELECT {x:UInt8}"
    assert statement.database == "db" and statement.query_id == "q"
    assert statement.parameters == {"x": "7"}
    assert statement.settings == {"date_time_input_format": "best_effort"}


def test_the_query_parameter_comes_before_the_body() -> None:
    statement = Statement.parse({"query": "INSERT INTO t FORMAT TSV"}, b"1\n2\n")
    assert (statement.sql, statement.insert_format, statement.insert_rows) == (
        "INSERT INTO t", "TSV", b"1\n2\n")


@pytest.mark.parametrize(("params", "reason"), [
    ({}, "no query"),
    ({"query": "SELECT 1", "readonly": "1"}, "does not take the setting 'readonly'"),
    ({"query": "SELECT 1", "max threads": "1"}, "is not a setting name"),
])
def test_what_the_stand_in_cannot_do_is_refused_saying_why(params: dict[str, str],
                                                            reason: str) -> None:
    with pytest.raises(RequestError, match=reason):
        Statement.parse(params, b"")


def test_the_format_a_statement_names_itself_is_found() -> None:
    assert trailing_format("SELECT 1\n FORMAT JSON;") == "JSON"
    assert trailing_format("SELECT format") is None
