"""consumers/log_decode.py: logs-topic message bytes -> log_records rows, or a named
PoisonRecord.

Inputs are what the collectors really produce: log records emitted through the
OpenTelemetry SDK's LoggerProvider (in a span, as an instrumentation emits its GenAI
events) and encoded by opentelemetry-exporter-otlp-proto-common's ``encode_logs``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardtrace.consumers import log_decode
from guardtrace.consumers.decode import PoisonRecord, decode_logs, decode_spans
from guardtrace.consumers.log_decode import GenAILogEvent
from guardtrace.consumers.pipeline_detection import (
    COUNT_LLM_SPANS,
    PROBLEM_DETECTOR_ERROR,
    DetectionCounts,
    detection_rows,
)
from guardtrace.schemas import names
from guardtrace.store.tables import Columns

SERVICE = "travel-agent"
SCOPE = "opentelemetry.instrumentation.openai_v2"
MESSAGES = [{"role": "user", "parts": [{"type": "text", "content": "Book me a flight"}]}]


def _emitted(emit: Any) -> list[ReadableLogRecord]:
    """The records ``emit(logger, tracer)`` emits through a real LoggerProvider."""
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource.create({"service.name": SERVICE}),
                              shutdown_on_exit=False)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    tracer = TracerProvider().get_tracer("agent")
    emit(provider.get_logger(SCOPE, "2.4b0"), tracer)
    provider.shutdown()
    return list(exporter.get_finished_logs())


def _raw(records: list[ReadableLogRecord]) -> bytes:
    return encode_logs(records).SerializeToString()


def _rows(raw: bytes) -> list[dict[str, Any]]:
    """The decoded rows, each as {column: value}."""
    rows = decode_logs(raw).log_records
    assert all(len(row) == len(Columns.LOG_RECORDS) for row in rows)
    return [dict(zip(Columns.LOG_RECORDS, row, strict=True)) for row in rows]


@pytest.fixture(scope="module")
def genai_event() -> dict[str, Any]:
    """A GenAI operation-details event inside an LLM span, as openai-v2 emits it."""
    found: dict[str, Any] = {}

    def emit(logger: Any, tracer: Any) -> None:
        with tracer.start_as_current_span("chat gpt-4o") as span:
            found["trace_id"] = f"{span.get_span_context().trace_id:032x}"
            found["span_id"] = f"{span.get_span_context().span_id:016x}"
            logger.emit(LogRecord(
                event_name=names.EVENT_GENAI_OPERATION_DETAILS,
                severity_number=SeverityNumber.INFO, severity_text="INFO",
                attributes={"gen_ai.operation.name": "chat", names.ATTR_REQUEST_ID: "req-7",
                            "gen_ai.input.messages": MESSAGES,
                            "gen_ai.usage.input_tokens": 12}))

    records = _emitted(emit)
    found["raw"] = _raw(records)
    found["record"] = records[0]
    return found


def test_a_genai_event_becomes_one_row_with_its_ids_and_attributes(
        genai_event: dict[str, Any]) -> None:
    (row,) = _rows(genai_event["raw"])
    record = genai_event["record"].log_record
    assert (row["trace_id"], row["span_id"]) == (genai_event["trace_id"],
                                                 genai_event["span_id"])
    assert row["event_name"] == names.EVENT_GENAI_OPERATION_DETAILS
    assert (row["severity_number"], row["severity_text"]) == (SeverityNumber.INFO.value, "INFO")
    assert row["request_id"] == "req-7"
    assert (row["service"], row["scope_name"]) == (SERVICE, SCOPE)
    assert row["resource_attributes"]["service.name"] == SERVICE
    # The SDK stamps only the observed time: the row's time falls back to it.
    assert record.timestamp is None
    assert row["timestamp"] == row["observed_timestamp"] == record.observed_timestamp
    assert json.loads(row["attributes"]["gen_ai.input.messages"]) == MESSAGES
    assert row["attributes"]["gen_ai.usage.input_tokens"] == "12"
    assert row["body"] == ""
    assert len(row["record_id"]) == 32


def test_a_replayed_message_gives_the_same_record_ids(genai_event: dict[str, Any]) -> None:
    assert decode_logs(genai_event["raw"]).log_records == \
        decode_logs(bytes(genai_event["raw"])).log_records


def test_identical_records_in_one_message_stay_two_rows_and_content_changes_the_id() -> None:
    def emit(logger: Any, tracer: Any) -> None:
        for body in ("same", "same", "other"):
            logger.emit(LogRecord(timestamp=1_700_000_000_000_000_000,
                                  observed_timestamp=1_700_000_000_000_000_001, body=body))

    rows = _rows(_raw(_emitted(emit)))
    assert [r["body"] for r in rows] == ["same", "same", "other"]
    assert len({r["record_id"] for r in rows}) == 3
    # A record's time wins over its observed time.
    assert {r["timestamp"] for r in rows} == {1_700_000_000_000_000_000}


@pytest.mark.parametrize(("body", "stored"), [
    ("a plain line", "a plain line"),
    ({"answer": "Paris", "sources": [1, 2]}, '{"answer": "Paris", "sources": [1, 2]}'),
    (["a", True, 3.5], '["a", true, 3.5]'),
    (42, "42"),
    (None, ""),
])
def test_the_body_is_stored_as_text(body: Any, stored: str) -> None:
    (row,) = _rows(_raw(_emitted(lambda logger, _: logger.emit(LogRecord(body=body)))))
    assert row["body"] == stored


def test_the_event_name_falls_back_to_the_event_name_attribute() -> None:
    request = ExportLogsServiceRequest()
    record = request.resource_logs.add().scope_logs.add().log_records.add(
        observed_time_unix_nano=5)
    record.attributes.add(key=names.ATTR_EVENT_NAME).value.string_value = "legacy.event"
    (row,) = _rows(request.SerializeToString())
    assert row["event_name"] == "legacy.event"
    assert (row["trace_id"], row["span_id"], row["service"]) == ("", "", "")


def test_genai_events_reach_the_detection_seam_with_ids_and_attributes(
        genai_event: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[GenAILogEvent]] = []
    monkeypatch.setattr(log_decode, "detect_in_genai_log_events",
                        lambda events, rows, counts: seen.append(list(events)))
    rows = decode_logs(genai_event["raw"])
    ((event,),) = seen
    (row,) = rows.log_records
    assert event.record_id == row[0]
    assert (event.trace_id, event.span_id, event.request_id) == (
        genai_event["trace_id"], genai_event["span_id"], "req-7")
    assert json.loads(event.attributes["gen_ai.input.messages"]) == MESSAGES
    assert event.resource["service.name"] == SERVICE

    # Other log records are stored, and not handed to detection.
    seen.clear()
    decode_logs(_raw(_emitted(lambda logger, _: logger.emit(LogRecord(body="plain")))))
    assert seen == [[]]


# --- pipeline detection on GenAI log events ------------------------------------------------

CLAIM = "I've booked AF123 for you and sent the confirmation."
# As openai-v2 emits the event with event_only capture: structured messages, no tools.
CLAIMED_CALL = {
    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1",
    "gen_ai.response.id": "chatcmpl-7",
    "gen_ai.input.messages": [
        {"role": "user", "parts": [{"type": "text", "content": "Book AF123 to Paris"}]}],
    "gen_ai.output.messages": [
        {"role": "assistant", "finish_reason": "stop",
         "parts": [{"type": "text", "content": CLAIM}]}],
}


def _claims(attributes: dict[str, Any], *, in_span: bool = True) -> bytes:
    """A message with one GenAI event carrying ``attributes`` (in an LLM span, or not)."""
    def emit(logger: Any, tracer: Any) -> None:
        def record() -> LogRecord:  # takes the span context current when it is made
            return LogRecord(event_name=names.EVENT_GENAI_OPERATION_DETAILS,
                             attributes=attributes)

        if in_span:
            with tracer.start_as_current_span("chat gpt-4.1"):
                logger.emit(record())
        else:
            logger.emit(record())
            logger.emit(record())

    return _raw(_emitted(emit))


def _events(rows: Any) -> list[dict[str, Any]]:
    return [dict(zip(Columns.SPAN_EVENTS, row, strict=True)) for row in rows.span_events]


def test_a_genai_event_is_judged_as_its_span_would_be() -> None:
    counts = DetectionCounts()
    raw = _claims({**CLAIMED_CALL, names.ATTR_REQUEST_ID: "trip-9"})
    rows = decode_logs(raw, counts)
    (record,) = [dict(zip(Columns.LOG_RECORDS, row, strict=True)) for row in rows.log_records]
    found = _events(rows)

    assert record["trace_id"] and record["span_id"]
    assert [(e["name"], e["tier"]) for e in found] == [
        (names.EVENT_FABRICATION_DETECTED, names.TIER_ACTION),
        (names.EVENT_EVALUATION_RESULT, "")]
    for event in found:
        assert (event["trace_id"], event["span_id"]) == (record["trace_id"],
                                                         record["span_id"])
        assert event["request_id"] == event["attributes"][names.ATTR_REQUEST_ID] == "trip-9"
        assert event["timestamp"] == record["timestamp"]
        assert (event["service"], event["agent"]) == (SERVICE, SERVICE)
        assert event["attributes"][names.ATTR_FOUND_IN] == names.FOUND_IN_PIPELINE
    assert counts.counts[COUNT_LLM_SPANS] == 1
    # The ids the same call gets when judged on its span (content on both: counted once).
    on_span = detection_rows(record["attributes"], trace_id=record["trace_id"],
                             span_id=record["span_id"], time_ns=1, service=SERVICE,
                             resource={}, request_id="trip-9")
    assert [e["event_id"] for e in found] == [row[0] for row in on_span]
    # A replay gives the same rows.
    assert decode_logs(raw, DetectionCounts()).span_events == rows.span_events


def test_an_event_without_a_request_id_is_filed_under_its_trace_id() -> None:
    rows = decode_logs(_claims(CLAIMED_CALL), DetectionCounts())
    trace_id = rows.log_records[0][Columns.LOG_RECORDS.index("trace_id")]
    assert {e["request_id"] for e in _events(rows)} == {trace_id}


def test_events_naming_no_span_get_ids_of_their_own_from_the_record() -> None:
    rows = decode_logs(_claims(CLAIMED_CALL, in_span=False), DetectionCounts())
    record_ids = [row[0] for row in rows.log_records]
    found = _events(rows)
    claims = [e for e in found if e["name"] == names.EVENT_FABRICATION_DETECTED]
    # Two identical records: two findings, each under its record's id.
    assert sorted(e["request_id"] for e in claims) == sorted(record_ids)
    assert len({e["event_id"] for e in found}) == len(found) == 4
    assert {(e["trace_id"], e["span_id"]) for e in found} == {("", "")}


def test_with_detection_off_the_records_are_stored_and_nothing_is_judged() -> None:
    counts = DetectionCounts()
    raw = _claims(CLAIMED_CALL)
    rows = decode_logs(raw, counts, detect=False)
    assert rows.span_events == [] and counts.counts == {}
    assert rows.log_records == decode_logs(raw, DetectionCounts()).log_records


def test_a_failing_detector_is_counted_and_the_records_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("detector bug")

    monkeypatch.setattr(log_decode, "detection_rows", explode)
    counts = DetectionCounts()
    rows = decode_logs(_claims(CLAIMED_CALL), counts)
    assert len(rows.log_records) == 1 and rows.span_events == []
    assert counts.counts == {PROBLEM_DETECTOR_ERROR: 1}


def _request_with_no_records() -> bytes:
    """A resource and a scope, and not one record in them."""
    request = ExportLogsServiceRequest()
    request.resource_logs.add().scope_logs.add()
    return request.SerializeToString()


def _request_with(**fields: Any) -> bytes:
    request = ExportLogsServiceRequest()
    request.resource_logs.add().scope_logs.add().log_records.add(**fields)
    return request.SerializeToString()


@pytest.mark.parametrize(("raw", "reason"), [
    (b"", "empty logs message"),
    (b"\x00\xffnot protobuf at all", "not an OTLP logs request"),
    (_request_with_no_records(), "OTLP logs request with no log records"),
    (_request_with(observed_time_unix_nano=5, trace_id=b"\x01" * 15),
     r"log record with invalid ids \(trace_id 15 bytes"),
    (_request_with(observed_time_unix_nano=5, span_id=b"\x01" * 4),
     r"invalid ids \(trace_id 0 bytes, span_id 4 bytes"),
    (_request_with(body={"string_value": "no time"}), "log record without a time"),
    (_request_with(time_unix_nano=2**63), "time out of range: log record time"),
])
def test_poison_messages_are_named(raw: bytes, reason: str) -> None:
    with pytest.raises(PoisonRecord, match=reason):
        decode_logs(raw)


def test_all_zero_ids_mean_no_trace() -> None:
    (row,) = _rows(_request_with(observed_time_unix_nano=5, trace_id=bytes(16),
                                 span_id=bytes(8)))
    assert (row["trace_id"], row["span_id"]) == ("", "")


def test_a_trace_request_on_the_logs_topic_and_logs_on_the_spans_topic_are_poison(
        genai_event: dict[str, Any]) -> None:
    tracer_provider = TracerProvider()
    memory = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(memory))
    with tracer_provider.get_tracer("agent").start_as_current_span(
            "plan", attributes={names.ATTR_REQUEST_ID: "req-1"}):
        pass
    traced = encode_spans(memory.get_finished_spans()).SerializeToString()
    with pytest.raises(PoisonRecord, match="not an OTLP logs request"):
        decode_logs(traced)
    with pytest.raises(PoisonRecord, match="not an OTLP trace request"):
        decode_spans(genai_event["raw"])
