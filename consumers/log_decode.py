"""OTLP logs -> ``log_records`` rows, with a named reason for every message rejected.

A logs-topic message is one serialized ``ExportLogsServiceRequest``, as guardtrace's
:class:`~guardtrace.collectors.export.kafka_exporters.KafkaLogExporter` and the
OpenTelemetry Collector's Kafka exporter (``encoding: otlp_proto``) write it. Like the
other decoders this is a pure function of the message bytes: a replayed message yields
the same rows with the same record ids, which is what lets ReplacingMergeTree collapse a
replay. Values are stored as the span decoders store them (:mod:`.otlp_values`): an
attribute or body that is a map or an array becomes JSON text.

GenAI log events (``gen_ai.client.inference.operation.details``) carry the messages of
one LLM call. Once decoded, each is handed as a :class:`GenAILogEvent` to
:func:`detect_in_genai_log_events`, which judges it as pipeline detection judges an LLM
span (:func:`~.pipeline_detection.detection_rows`) and adds what it finds to the same
rows, as ``span_events`` of the call's span: written in the same batch, replayed with it,
with the same ids on a replay.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from ..schemas import names
from ..store.rows import DecodedRows
from .otlp_values import (
    MAX_TIME_NS,
    PoisonRecord,
    any_value_text,
    attributes_map,
    parse_request,
)
from .pipeline_detection import PROBLEM_DETECTOR_ERROR, DetectionCounts, detection_rows

__all__ = ["GenAILogEvent", "decode_logs", "detect_in_genai_log_events"]

# Where detection counts when the caller gives no counts (a consumer gives its stats).
_DEFAULT_COUNTS = DetectionCounts()


@dataclass(frozen=True)
class GenAILogEvent:
    """One GenAI log event as pipeline detection reads it: its ids and plain attributes.

    Attributes:
        record_id: The ``log_records`` row's id (deterministic: a replay gives the same).
        trace_id: Hex trace id, or "" when the record names no trace.
        span_id: Hex span id, or "".
        request_id: The record's ``request_id`` attribute, or "".
        timestamp_ns: The row's time (the record's, else its observed time).
        service: The resource's ``service.name``.
        event_name: The event's name (``gen_ai.client.inference.operation.details``).
        attributes: The record's attributes as stored (maps and arrays as JSON text).
        body: The record's body as stored.
        resource: The resource's attributes as stored.
    """

    record_id: str
    trace_id: str
    span_id: str
    request_id: str
    timestamp_ns: int
    service: str
    event_name: str
    attributes: Mapping[str, str]
    body: str
    resource: Mapping[str, str]


def detect_in_genai_log_events(events: list[GenAILogEvent], rows: DecodedRows,
                               counts: DetectionCounts | None = None) -> None:
    """Judge the GenAI log events of one message; add what is found to ``rows.span_events``.

    Called once per message, after its ``log_records`` rows are built, with the GenAI log
    events among them (possibly none). Each event is judged on its own attributes, as the
    call's span would be: rows on the event's trace and span, at the event's time, under
    its ``request_id`` attribute, else its trace id, else its record id. Never raises: a
    detector that fails on an event is counted (``detector_error``) and the message's
    rows are kept.

    An event and its span can both carry the same call (openai-v2 with
    ``span_and_event`` content capture), and neither record says whether the other does:
    skipping one of them would need the other first, which is state across topics. So
    both are judged, and a finding gets the id the span's would
    (:func:`~.pipeline_detection.pipeline_event_id` of trace id, span id, event and
    finding): the rollup counts distinct ids (``uniqMerge``) and the request reads keep
    one row per id, so the call's finding counts once. The two rows stay two in
    ``span_events`` (the event's time is not the span's end); an event with no span id
    gets ids of its own, from its record id.

    Args:
        events: The message's GenAI log events.
        rows: The message's rows; detection rows are appended to ``span_events``.
        counts: Where to count what was read and what could not be (a module-wide
            default when None).
    """
    counts = counts if counts is not None else _DEFAULT_COUNTS
    for event in events:
        with_span = bool(event.trace_id and event.span_id)
        try:
            rows.span_events.extend(detection_rows(
                event.attributes, trace_id=event.trace_id, span_id=event.span_id,
                time_ns=event.timestamp_ns, service=event.service, resource=event.resource,
                request_id=event.request_id or event.trace_id or event.record_id,
                counts=counts, id_key=None if with_span else f"log-{event.record_id}"))
        except Exception as exc:  # noqa: BLE001 - the log record is kept whatever happens
            counts.problem(PROBLEM_DETECTOR_ERROR,
                           f"GenAI log event: {type(exc).__name__}: {exc}")


def _record_id(index: int, resource: Mapping[str, str], scope_name: str,
               stored: list[Any], attributes: Mapping[str, str]) -> str:
    """Deterministic id of the ``index``-th log record of a message.

    Records have no id of their own. The hash covers the record's position in its message
    (two identical records in one message stay two rows) and everything stored of it, so
    the same message always gives the same ids.
    """
    raw = json.dumps([index, sorted(resource.items()), scope_name, stored,
                      sorted(attributes.items())], ensure_ascii=False)
    return hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()


def decode_logs(raw: bytes, counts: DetectionCounts | None = None, *,
                detect: bool = True) -> DecodedRows:
    """Rows for ``log_records`` from one ExportLogsServiceRequest, and what the detectors
    find in its GenAI log events (:func:`detect_in_genai_log_events`).

    Args:
        raw: The message's bytes.
        counts: Where pipeline detection counts (the consumer's
            ``stats.pipeline_detection``; a module-wide default when None).
        detect: Judge the GenAI log events (False: ``GUARDTRACE_PIPELINE_DETECTION=off``,
            the records are stored and nothing more).

    Raises:
        PoisonRecord: the message is empty, not an OTLP logs request, holds no log
            record, or holds one with ids of the wrong length, no time at all, or a
            time ClickHouse cannot store.
    """
    request = parse_request(ExportLogsServiceRequest, raw, "logs")
    rows = DecodedRows()
    genai_events: list[GenAILogEvent] = []
    index = 0
    for resource_logs in request.resource_logs:
        resource = attributes_map(resource_logs.resource.attributes)
        service = resource.get("service.name", "")
        for scope_logs in resource_logs.scope_logs:
            scope_name = scope_logs.scope.name
            for record in scope_logs.log_records:
                trace_id = _hex_id(record.trace_id, 16)
                span_id = _hex_id(record.span_id, 8)
                if trace_id is None or span_id is None:
                    raise PoisonRecord(
                        f"log record with invalid ids (trace_id {len(record.trace_id)} bytes, "
                        f"span_id {len(record.span_id)} bytes; expected 16 and 8, or none): "
                        "not an OTLP logs request")
                observed = record.observed_time_unix_nano
                timestamp = record.time_unix_nano or observed
                if not timestamp:
                    raise PoisonRecord("log record without a time (time_unix_nano and "
                                       "observed_time_unix_nano are both 0)")
                if max(timestamp, observed) > MAX_TIME_NS:
                    raise PoisonRecord(
                        f"time out of range: log record time {max(timestamp, observed)} ns "
                        "is after 2262-04-11, the last time ClickHouse stores")
                attrs = attributes_map(record.attributes)
                event_name = record.event_name or attrs.get(names.ATTR_EVENT_NAME, "")
                request_id = attrs.get(names.ATTR_REQUEST_ID, "")
                body = _body_text(record.body)
                stored = [timestamp, observed, trace_id, span_id, record.severity_number,
                          record.severity_text, event_name, body]
                record_id = _record_id(index, resource, scope_name, stored, attrs)
                index += 1
                rows.log_records.append([record_id, *stored, request_id, service, scope_name,
                                         attrs, resource])
                if event_name == names.EVENT_GENAI_OPERATION_DETAILS:
                    genai_events.append(GenAILogEvent(
                        record_id=record_id, trace_id=trace_id, span_id=span_id,
                        request_id=request_id, timestamp_ns=timestamp, service=service,
                        event_name=event_name, attributes=attrs, body=body,
                        resource=resource))
    if not rows.log_records:
        raise PoisonRecord("OTLP logs request with no log records")
    if detect:
        detect_in_genai_log_events(genai_events, rows, counts)
    return rows


def _hex_id(raw: bytes, size: int) -> str | None:
    """The id as hex; "" for none (absent or all zero, OTLP's "invalid" id); None if the
    length is wrong."""
    if not raw or raw.count(0) == len(raw):
        return "" if len(raw) in (0, size) else None
    return raw.hex() if len(raw) == size else None


def _body_text(body: AnyValue) -> str:
    """The body as stored: a string as it is, a map or array as JSON, none as ""."""
    if body.WhichOneof("value") is None:
        return ""
    return any_value_text(body)
