"""Property-based tests (hypothesis) of every decoder and of ``guardtrace scan`` inputs.

Decoders (``consumers/decode.py`` and ``schemas/payload_record.py``) get arbitrary bytes,
real encoded messages mutated (bit flips, truncation, inserted and deleted bytes) and
well-formed messages with arbitrary field values. Each either decodes or raises its
poison type (``PoisonRecord``; ``PayloadDecodeError`` for ``payload_record.decode``),
never another exception and never slowly (hypothesis' deadline). What decodes must
also be storable: a record that decodes into rows ClickHouse refuses (a time past
2262, a number wider than its column, a lone surrogate) is worse than poison, because
the consumer retries a failed insert forever and the whole pipeline stalls behind it.
``tests/reliability/test_poison.py`` shows that on the real consumer.

``scan_lines`` gets arbitrary lines and JSON records of every shape for each kind: it
always returns, writes one line per record, and every record yields either a verdict or
``{"id", "error"}`` whose error says what is wrong (a ``GuardInputError`` message), never
the catch-all "could not be checked: <exception>" that an unexpected crash produces.

Sizes: 200 examples per property in CI; ``GUARDTRACE_RELIABILITY_FULL=1`` runs 3,000.

Long because every decoder and every scanner input gets strategies of its own.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from guardtrace.cli.scan import SCANNERS, scan_lines
from guardtrace.consumers.decode import (
    PoisonRecord,
    decode_metrics,
    decode_payload_message,
    decode_spans,
)
from guardtrace.schemas.payload_record import PayloadDecodeError, PayloadRecord
from guardtrace.schemas.payload_record import decode as decode_payload_record
from guardtrace.store.rows import DecodedRows
from guardtrace.store.tables import Columns

from .messages import (
    compress_document,
    metrics_request,
    payload_document,
    payload_message,
    trace_request,
)
from .scale import size

pytestmark = [pytest.mark.timeout(300)]

# No example database: runs must not leave files behind, and CI reruns from scratch.
# The deadline is generous (busy CI machines); a decoder that hangs still trips it.
PROPERTY = settings(max_examples=size(ci=200, full=3000), database=None,
                    deadline=timedelta(seconds=5), print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

U8, U32, U64 = 2**8 - 1, 2**32 - 1, 2**64 - 1
# DateTime64(9) holds nanoseconds in an Int64: up to 2262-04-11.
NS = 2**63 - 1

# Numeric columns of migrations 0001 and 0004 and their largest value; every other column
# is a String, a Float64, a Map of strings or an Array, checked by type below.
_NUMERIC_LIMITS: dict[str, dict[str, int]] = {
    "spans": {"start_time": NS, "end_time": NS, "duration_ns": U64},
    "span_events": {"timestamp": NS},
    "metric_points": {"start_time": NS, "timestamp": NS, "count": U64, "is_monotonic": U8},
    "payloads": {"chunk_index": U32, "chunk_count": U32, "timestamp": NS, "body_bytes": U64,
                 "truncated": U8, "redactions": U32},
}
_COLUMNS = {"spans": Columns.SPANS, "span_events": Columns.SPAN_EVENTS,
            "metric_points": Columns.METRIC_POINTS, "payloads": Columns.PAYLOADS}


def _storable_text(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise AssertionError(f"{where}: not storable as UTF-8 ({exc})") from None


def _check_value(value: Any, where: str) -> None:
    if isinstance(value, str):
        _storable_text(value, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            _storable_text(key, f"{where} key")
            _check_value(item, f"{where}[{key!r}]")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, int):
                assert 0 <= item <= U64, f"{where}: array item {item} outside UInt64"
            else:
                _check_value(item, where)


def assert_storable(rows: DecodedRows) -> None:
    """Fail if any decoded value cannot be inserted into its ClickHouse column.

    Mirrors the column types of the migrations (checked against the real engine by the
    regression tests in test_poison.py): unsigned integers and DateTime64(9) within
    range, text encodable as UTF-8 (clickhouse-connect encodes every string).
    """
    for table, columns in _COLUMNS.items():
        limits = _NUMERIC_LIMITS[table]
        for row in getattr(rows, table):
            assert len(row) == len(columns), f"{table}: row has {len(row)} columns"
            for column, value in zip(columns, row, strict=False):
                where = f"{table}.{column}"
                if column in limits:
                    assert isinstance(value, int) and 0 <= value <= limits[column], \
                        f"{where} = {value!r} does not fit the column"
                else:
                    _check_value(value, where)


def decodes_or_is_poison(decoder: Callable[[bytes], Any], raw: bytes,
                         poison: type[Exception] = PoisonRecord) -> Any:
    """Run ``decoder``; return its result, None for poison; any other exception fails."""
    try:
        result = decoder(raw)
    except poison as exc:
        assert str(exc), "poison without a reason"
        return None
    except Exception as exc:  # the property: nothing else escapes
        raise AssertionError(f"{decoder.__name__} raised {type(exc).__name__}: {exc} "
                             f"instead of {poison.__name__}") from exc
    if isinstance(result, DecodedRows):
        assert_storable(result)
    return result


# -- strategies: bytes ---------------------------------------------------------------------
_CORPUS = {"spans": trace_request, "metrics": metrics_request, "payloads": payload_message}


@st.composite
def mutated(draw: st.DrawFn, message: Callable[[], bytes]) -> bytes:
    """A real encoded message with a few random edits (flip, cut, insert, delete)."""
    data = bytearray(message())
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        edit = draw(st.sampled_from(("flip", "truncate", "insert", "delete", "byte")))
        if edit == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif edit == "truncate":
            del data[at:]
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif edit == "delete":
            del data[at:at + draw(st.integers(1, 16))]
        else:
            data[at] = draw(st.integers(0, 255))
    return bytes(data)


def wire_bytes(role: str) -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, or a real message of any topic (mutated or whole)."""
    return st.one_of(
        st.binary(max_size=1024),
        mutated(_CORPUS[role]),
        st.sampled_from(list(_CORPUS)).flatmap(lambda other: mutated(_CORPUS[other])),
        st.sampled_from([m() for m in _CORPUS.values()]))


# -- strategies: well-formed protobuf with arbitrary values -----------------------------
# Times near the edges of every range a timestamp passes through: 0, int64, uint64.
_times = st.one_of(st.integers(0, U64), st.sampled_from([0, 1, NS - 1, NS, NS + 1, U64]),
                   st.integers(1_700_000_000 * 10**9, 1_800_000_000 * 10**9))
_ids = st.one_of(st.binary(min_size=16, max_size=16), st.binary(max_size=20))
_span_ids = st.one_of(st.binary(min_size=8, max_size=8), st.binary(max_size=10))
_attribute_values = st.recursive(
    st.one_of(st.text(max_size=20).map(lambda s: ("string_value", s)),
              st.booleans().map(lambda b: ("bool_value", b)),
              st.integers(-(2**63), 2**63 - 1).map(lambda i: ("int_value", i)),
              st.floats().map(lambda f: ("double_value", f)),
              st.binary(max_size=8).map(lambda b: ("bytes_value", b))),
    lambda inner: st.one_of(st.lists(inner, max_size=3).map(lambda xs: ("array", xs)),
                            st.lists(st.tuples(st.text(max_size=8), inner), max_size=3)
                            .map(lambda kvs: ("kvlist", kvs))),
    max_leaves=6)
_attributes = st.lists(st.tuples(st.text(max_size=12), _attribute_values), max_size=4)


def _set_any_value(target: AnyValue, spec: tuple[str, Any]) -> None:
    kind, value = spec
    if kind == "array":
        target.array_value.SetInParent()
        for item in value:
            _set_any_value(target.array_value.values.add(), item)
    elif kind == "kvlist":
        target.kvlist_value.SetInParent()
        for key, item in value:
            entry = target.kvlist_value.values.add(key=key)
            _set_any_value(entry.value, item)
    else:
        setattr(target, kind, value)


def _fill_attributes(repeated: Any, attributes: Sequence[tuple[str, Any]]) -> None:
    for key, spec in attributes:
        _set_any_value(repeated.add(key=key).value, spec)


@st.composite
def trace_requests(draw: st.DrawFn) -> bytes:
    """A well-formed ExportTraceServiceRequest whose fields take arbitrary values."""
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        resource_spans = request.resource_spans.add()
        _fill_attributes(resource_spans.resource.attributes, draw(_attributes))
        scope_spans = resource_spans.scope_spans.add()
        scope_spans.scope.name = draw(st.text(max_size=10))
        for _ in range(draw(st.integers(0, 3))):
            span = scope_spans.spans.add(
                trace_id=draw(_ids), span_id=draw(_span_ids), parent_span_id=draw(_span_ids),
                name=draw(st.text(max_size=20)), kind=draw(st.integers(0, 10)),
                start_time_unix_nano=draw(_times), end_time_unix_nano=draw(_times))
            span.status.code = draw(st.integers(0, 5))
            span.status.message = draw(st.text(max_size=10))
            _fill_attributes(span.attributes, draw(_attributes))
            for _ in range(draw(st.integers(0, 3))):
                event = span.events.add(name=draw(st.text(max_size=20)),
                                        time_unix_nano=draw(_times))
                _fill_attributes(event.attributes, draw(_attributes))
    return request.SerializeToString()


@st.composite
def metrics_requests(draw: st.DrawFn) -> bytes:
    """A well-formed ExportMetricsServiceRequest whose fields take arbitrary values."""
    request = ExportMetricsServiceRequest()
    scope_metrics = request.resource_metrics.add().scope_metrics.add()
    for _ in range(draw(st.integers(0, 3))):
        metric = scope_metrics.metrics.add(name=draw(st.text(max_size=20)),
                                           unit=draw(st.text(max_size=5)))
        kind = draw(st.sampled_from(("sum", "gauge", "histogram", "summary",
                                     "exponential_histogram", None)))
        if kind is None:
            continue
        data = getattr(metric, kind)
        data.SetInParent()
        for _ in range(draw(st.integers(0, 3))):
            point = data.data_points.add(start_time_unix_nano=draw(_times),
                                         time_unix_nano=draw(_times))
            _fill_attributes(point.attributes, draw(_attributes))
            if kind in ("sum", "gauge"):
                if draw(st.booleans()):
                    point.as_int = draw(st.integers(-(2**63), 2**63 - 1))
                else:
                    point.as_double = draw(st.floats())
            else:
                point.count = draw(st.integers(0, U64))
                point.sum = draw(st.floats())
                if kind == "histogram":
                    point.bucket_counts.extend(draw(st.lists(st.integers(0, U64), max_size=4)))
                    point.explicit_bounds.extend(draw(st.lists(st.floats(), max_size=3)))
    return request.SerializeToString()


# -- strategies: payload records ----------------------------------------------------------
# Text with lone surrogates too: JSON can carry them as \ud800 escapes.
_any_text = st.text(alphabet=st.one_of(st.characters(),
                                       st.sampled_from(["\ud800", "\udfff", "\x00"])),
                    max_size=30)
_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                          st.floats(), _any_text)
_json_values = st.recursive(_json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(_any_text, inner, max_size=4)), max_leaves=10)
_ints = st.one_of(st.integers(0, 3), st.integers(-(2**70), 2**70),
                  st.sampled_from([U32, U32 + 1, NS, NS + 1, U64, U64 + 1]))


@st.composite
def payload_documents(draw: st.DrawFn) -> dict[str, Any]:
    """The JSON of a payload record: a valid one with some fields replaced or removed."""
    document: dict[str, Any] = payload_document()
    for key in draw(st.lists(st.sampled_from(sorted(document)), max_size=4, unique=True)):
        choice = draw(st.sampled_from(("int", "text", "json", "drop")))
        if choice == "drop":
            del document[key]
        else:
            document[key] = draw({"int": _ints, "text": _any_text, "json": _json_values}[choice])
    if draw(st.booleans()):
        document["attributes"] = draw(st.one_of(
            st.dictionaries(_any_text, _json_values, max_size=3), _json_values))
    return document


# -- decoder properties -------------------------------------------------------------------
@PROPERTY
@given(raw=wire_bytes("spans"))
def test_decode_spans_decodes_or_raises_poison(raw: bytes) -> None:
    decodes_or_is_poison(decode_spans, raw)


@PROPERTY
@given(raw=wire_bytes("metrics"))
def test_decode_metrics_decodes_or_raises_poison(raw: bytes) -> None:
    decodes_or_is_poison(decode_metrics, raw)


@PROPERTY
@given(raw=wire_bytes("payloads"))
def test_decode_payload_message_decodes_or_raises_poison(raw: bytes) -> None:
    decodes_or_is_poison(decode_payload_message, raw)


@PROPERTY
@given(raw=wire_bytes("payloads"))
def test_payload_record_decode_decodes_or_raises_its_error(raw: bytes) -> None:
    decodes_or_is_poison(decode_payload_record, raw, PayloadDecodeError)


@PROPERTY
@given(raw=trace_requests())
def test_well_formed_trace_requests_decode_to_storable_rows_or_poison(raw: bytes) -> None:
    decodes_or_is_poison(decode_spans, raw)


@PROPERTY
@given(raw=metrics_requests())
def test_well_formed_metrics_requests_decode_to_storable_rows_or_poison(raw: bytes) -> None:
    decodes_or_is_poison(decode_metrics, raw)


@PROPERTY
@given(document=payload_documents())
def test_payload_documents_decode_to_storable_rows_or_poison(document: dict[str, Any]) -> None:
    raw = compress_document(document)
    record = decodes_or_is_poison(decode_payload_record, raw, PayloadDecodeError)
    rows = decodes_or_is_poison(decode_payload_message, raw)
    assert (record is None) == (rows is None)
    if record is not None:
        assert isinstance(record, PayloadRecord)


# -- scan properties ----------------------------------------------------------------------
_HIT_FIELDS = {"fabrication": {"id", "flagged", "tiers", "matches", "similarity"},
               "questions": {"id", "should_reason", "depth", "trigger_pattern"},
               "plans": {"id", "valid", "errors"},
               "conversations": {"conv_id", "msg_index", "tiers", "evidence"}}
_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_ .ABC0123456789", max_size=16)
_steps = st.fixed_dictionaries({}, optional={
    "id": st.one_of(_names, _json_values), "step_id": _names,
    "tool": st.one_of(_names, _json_values), "agent_name": _names,
    "inputs": _json_values, "instruction": _any_text,
    "depends_on": st.one_of(st.lists(_names, max_size=3), _json_values),
    "metadata": st.one_of(st.fixed_dictionaries({}, optional={
        "capability": st.one_of(_names, _json_values), "parameters": _json_values}),
        _json_values)})
_plans = st.one_of(
    st.lists(_steps, max_size=4),
    st.fixed_dictionaries({"steps": st.one_of(st.lists(_steps, max_size=4), _json_values)},
                          optional={"plan_id": _json_values}),
    st.lists(_steps, max_size=3).map(json.dumps), _json_values)
_allowed = st.one_of(
    st.lists(_names, max_size=4),
    st.dictionaries(_names, st.one_of(st.lists(_names, max_size=3), _names,
                                      st.dictionaries(_names, _any_text, max_size=2),
                                      _json_values), max_size=3),
    st.lists(st.one_of(
        st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
            {"name": st.one_of(_names, _json_values)}, optional={"description": _json_values})}),
        st.fixed_dictionaries({"name": st.one_of(_names, _json_values),
                               "input_schema": _json_values})), max_size=3),
    st.lists(st.tuples(_names, st.lists(_names, max_size=2)), max_size=3).map(
        lambda agents: "".join(f"Agent: {a} (ID: {a})\n" + "".join(
            f"  - Capability: {c}\n" for c in caps) for a, caps in agents)),
    _json_values)
_replies = st.one_of(
    _any_text, st.sampled_from([
        "I'm deploying the fix now.", "Let me read the config file first.",
        "I've written the file.", "I'm running Claude Sonnet through OpenRouter."]),
    st.text(alphabet="I'm deploying now. let me read ", min_size=100, max_size=3000))
_records = {
    "fabrication": st.fixed_dictionaries({}, optional={
        "id": _json_values, "reply": st.one_of(_replies, _json_values),
        "tools_fired": st.one_of(st.lists(_names, max_size=3), _json_values),
        "history": st.one_of(st.lists(_replies, max_size=4), _json_values),
        "channel": _json_values}),
    "questions": st.fixed_dictionaries({}, optional={
        "id": _json_values, "question": st.one_of(_any_text, st.sampled_from([
            "How many r's are in strawberry?", "Which month is spelled with an X?",
            "Spell necessary backwards"]), _json_values)}),
    "plans": st.fixed_dictionaries({}, optional={
        "id": st.one_of(_names, st.integers(), _json_values),
        "allowed_tools": _allowed, "plan": _plans}),
    "conversations": st.fixed_dictionaries({}, optional={
        "id": _json_values, "tools": st.one_of(_allowed, _json_values),
        "system": st.one_of(_any_text, _json_values),
        "messages": st.one_of(st.lists(st.one_of(
            st.fixed_dictionaries({"role": st.sampled_from(
                ["system", "user", "assistant", "tool", "developer", "function"])}, optional={
                "content": st.one_of(_replies, _json_values, st.lists(st.one_of(
                    st.fixed_dictionaries({"type": st.sampled_from(
                        ["text", "tool_use", "tool_result", "image"])}, optional={
                        "text": st.one_of(_replies, _json_values), "name": _names,
                        "id": _names, "tool_use_id": _names, "input": _json_values,
                        "content": _json_values}), _json_values), max_size=3)),
                "tool_calls": st.one_of(st.lists(st.fixed_dictionaries({}, optional={
                    "id": _names, "function": st.one_of(st.fixed_dictionaries(
                        {"name": _names}, optional={"arguments": _json_values}),
                        _json_values)}), max_size=2), _json_values),
                "tool_call_id": _json_values, "x-canned": _json_values,
                "x-requestor": _json_values}),
            _json_values), max_size=6), _json_values)}),
}


def _line(value: Any) -> str:
    """One JSONL line: the record as JSON (lone surrogates escaped, as json.dumps does)."""
    return json.dumps(value)


def scan_lines_strategy(kind: str) -> st.SearchStrategy[list[str]]:
    """Lines for one scan: records of the kind, any JSON, or text that is not JSON."""
    not_json = st.text(max_size=80).filter(lambda s: "\n" not in s and "\r" not in s)
    return st.lists(st.one_of(_records[kind].map(_line), _json_values.map(_line), not_json),
                    min_size=1, max_size=5)


@pytest.mark.parametrize("kind", sorted(SCANNERS))
def test_scan_yields_a_verdict_or_a_clear_error_for_every_line(kind: str) -> None:
    @PROPERTY
    @given(lines=scan_lines_strategy(kind))
    def check(lines: list[str]) -> None:
        out = io.StringIO()
        summary = scan_lines(kind, lines, out)
        # JSONL lines end at "\n" only (str.splitlines would also cut at U+0085, U+2028).
        outputs = [json.loads(line) for line in out.getvalue().split("\n")[:-1]]
        records = [line for line in lines if line.strip()]
        id_field = "conv_id" if kind == "conversations" else "id"
        if kind == "conversations":
            # One line per assistant reply with text, or one error per bad record.
            assert len(records) == summary["lines"]
            pairs = [(None, output) for output in outputs]
        else:
            assert len(outputs) == len(records) == summary["lines"]
            pairs = list(zip(records, outputs, strict=True))
        assert summary["errors"] == sum("error" in o for o in outputs)
        for line, output in pairs:
            if "error" in output:
                assert set(output) == {id_field, "error"}
                assert isinstance(output["error"], str) and output["error"]
                # The catch-all branch means a scanner crashed on this input instead of
                # saying what is wrong with it.
                assert "could not be checked" not in output["error"], (line, output)
            else:
                assert set(output) == _HIT_FIELDS[kind], output

    check()


# -- examples the properties found ------------------------------------------------------
def test_a_payload_declaring_a_huge_size_is_poison_without_being_inflated() -> None:
    """A zstd frame header states the decompressed size, and zstandard allocates it whole
    (``max_output_size`` only bounds frames that do not state it): a 3 KB message
    declaring gigabytes exhausted the consumer's memory (found by mutated headers)."""
    import tracemalloc

    import zstandard

    bomb = zstandard.ZstdCompressor().compress(b" " * (100 * 1024 * 1024))  # 100 MiB
    assert len(bomb) < 10_000
    tracemalloc.start()
    try:
        with pytest.raises(PayloadDecodeError, match="declares 104857600 bytes"):
            decode_payload_record(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024
    # A forged header: 4 GiB declared by a frame of a few bytes.
    frame = bytearray(zstandard.ZstdCompressor().compress(b"x" * 70_000))
    assert frame[4] == 0xA0  # single segment, 4-byte content size follows
    frame[5:9] = (2**32 - 1).to_bytes(4, "little")
    with pytest.raises(PoisonRecord, match="declares 4294967295 bytes"):
        decode_payload_message(bytes(frame))


@pytest.mark.parametrize("changes", [
    {"chunk_index": 2**32, "chunk_count": 2**32 + 1}, {"redactions": 2**32},
    {"timestamp_ns": 2**63}, {"body_bytes": 2**64}, {"body": "half a pair: \ud800"},
    {"request_id": "\udfff"}, {"attributes": {"model": "\ud83d"}}])
def test_payload_values_clickhouse_cannot_store_are_poison(changes: dict[str, Any]) -> None:
    document = payload_document(**changes)
    with pytest.raises(PoisonRecord):
        decode_payload_message(compress_document(document))
