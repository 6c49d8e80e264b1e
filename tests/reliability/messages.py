"""Real wire messages, and the poison made from them, for the fault-injection tests.

Valid messages are what the collectors produce: SDK spans and metric readings encoded by
opentelemetry-exporter-otlp-proto-common, payload records from ``schemas/payload_record``.
Poison is derived from them (truncated, sent to the wrong topic) or made from scratch
(garbage, oversize), so it looks like what really goes wrong.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from functools import cache

import zstandard
from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from guardtrace.schemas import names
from guardtrace.schemas.payload_record import PayloadRecord, encode

SERVICE = "reliability-agent"


@cache
def trace_request() -> bytes:
    """An ExportTraceServiceRequest with two spans, guard events and every attribute type."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(names.INSTRUMENTATION_NAME, "0.1.0")
    with tracer.start_as_current_span("agent.turn", attributes={
            names.ATTR_REQUEST_ID: "req-corpus", names.ATTR_MODULE: names.MODULE_PLANNING,
            "flag": True, "retries": 3, "score": 0.5, "tools": ["a", "b"], "ids": [1, 2]}), \
            tracer.start_as_current_span("reply.check") as child:
        child.add_event(names.EVENT_FABRICATION_DETECTED, {
            names.ATTR_REQUEST_ID: "req-corpus", names.ATTR_MODULE: names.MODULE_REPLIES,
            names.ATTR_AGENT: "booking", names.ATTR_TIER: names.TIER_ACTION,
            names.ATTR_TOOLS_FIRED: ["search"], names.ATTR_SIMILARITY: 0.25})
        child.set_status(Status(StatusCode.ERROR, "claimed a booking"))
    spans = exporter.get_finished_spans()
    provider.shutdown()
    return encode_spans(spans).SerializeToString()


@cache
def metrics_request() -> bytes:
    """An ExportMetricsServiceRequest with a labelled counter and a histogram."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader],
                             resource=Resource.create({"service.name": SERVICE}))
    meter = provider.get_meter(names.INSTRUMENTATION_NAME, "0.1.0")
    counter = meter.create_counter(names.METRIC_HALLUCINATIONS)
    counter.add(2, {names.ATTR_MODULE: names.MODULE_PLANNING, names.ATTR_AGENT: "time-tool-v1"})
    histogram = meter.create_histogram("guardtrace.latency", unit="ms")
    histogram.record(3.0, {names.ATTR_MODULE: names.MODULE_REPLIES})
    data = reader.get_metrics_data()
    provider.shutdown()
    return encode_metrics(data).SerializeToString()


def payload_record(**changes: object) -> PayloadRecord:
    """A realistic payload record (chunk 0 of 1), with ``changes`` applied."""
    fields: dict[str, object] = {
        "payload_id": "9f0c" * 8, "request_id": "req-corpus",
        "kind": names.PAYLOAD_KIND_FABRICATION,
        "body": '{"reply": "I\'m deploying the fix now.", "tiers": ["action"]}',
        "timestamp_ns": 1_763_000_000_000_000_000, "trace_id": "ab" * 16, "span_id": "cd" * 8,
        "body_bytes": 57, "body_sha256": "00" * 32, "redactions": 1,
        "attributes": {"agent": "stratam"}}
    fields.update(changes)
    return PayloadRecord(**fields)  # type: ignore[arg-type]


def payload_document(**changes: object) -> dict[str, object]:
    """The JSON object a payload message carries, with ``changes`` applied as is (any type)."""
    return {"v": 1, **asdict(payload_record()), **changes}


def compress_document(document: dict[str, object]) -> bytes:
    """A payloads-topic message carrying ``document`` (any JSON, valid record or not)."""
    # ensure_ascii: lone surrogates travel as \ud800 escapes, as any JSON encoder may send.
    return zstandard.ZstdCompressor().compress(json.dumps(document).encode("ascii"))


@cache
def payload_message() -> bytes:
    """One payloads-topic message, as the collector's payload sink encodes it."""
    return encode(payload_record())


@dataclass(frozen=True)
class Poison:
    """One poison record: where it goes and what the dead-letter reason must say.

    Attributes:
        kind: A short name of what is wrong with it (for messages and reports).
        topic_role: "spans", "metrics" or "payloads": the topic it is produced to.
        value: The record's bytes (None for a tombstone).
        reason_kind: The ``reason_kind`` the consumer must record for it.
    """

    kind: str
    topic_role: str
    value: bytes | None
    reason_kind: str


def poison_kinds(rng: random.Random, oversize_bytes: int) -> list[Poison]:
    """One record of every kind of poison the consumer must dead-letter.

    Args:
        rng: Source of the garbage bytes and cut points (seeded by the caller).
        oversize_bytes: Size of the oversize record (just over the consumer's limit).
    """
    spans, metrics, payload = trace_request(), metrics_request(), payload_message()

    def garbage() -> bytes:
        # 0xff first: never a valid protobuf tag nor a zstd frame magic number.
        return b"\xff" + rng.randbytes(rng.randint(1, 200))

    # Any cut strictly inside the request's first length-delimited field (which spans
    # nearly the whole message) leaves protobuf a field longer than what is left.
    cut_spans = rng.randint(3, len(spans) - 1)
    cut_metrics = rng.randint(3, len(metrics) - 1)
    cut_payload = rng.randint(1, len(payload) - 1)
    protobuf_failed = "not an OTLP trace request"
    return [
        Poison("garbage bytes", "spans", garbage(), protobuf_failed),
        Poison("garbage bytes", "metrics", garbage(), "not an OTLP metrics request"),
        Poison("garbage bytes", "payloads", garbage(), "payload is not zstd-compressed"),
        Poison("truncated protobuf", "spans", spans[:cut_spans], protobuf_failed),
        Poison("truncated protobuf", "metrics", metrics[:cut_metrics],
               "not an OTLP metrics request"),
        Poison("truncated payload", "payloads", payload[:cut_payload],
               "payload is not zstd-compressed"),
        Poison("metrics request on the spans topic", "spans", metrics, protobuf_failed),
        Poison("spans request on the metrics topic", "metrics", spans,
               "not an OTLP metrics request"),
        Poison("spans request on the payloads topic", "payloads", spans,
               "payload is not zstd-compressed"),
        Poison("payload on the spans topic", "spans", payload, protobuf_failed),
        Poison("tombstone", "spans", None, "record has no value"),
        Poison("oversize", "spans", b"\x0a" * oversize_bytes, "oversize record"),
    ]
