"""The collector's logs path: KafkaLogExporter, log redaction, and configure()'s wiring.

Log records are emitted through the real SDK (LoggerProvider, BatchLogRecordProcessor)
and the real OTLP encoder; only the connected KafkaProducer is a stand-in that keeps what
it was sent, so what is checked is the bytes Kafka would have received, read back with
the consumers' own decoder.
"""

from __future__ import annotations

import json
import random
import string
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.future import Future
from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs import (
    LoggerProvider,
    LogRecordDroppedAttributesWarning,
    LogRecordLimits,
    ReadableLogRecord,
)
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from guardtrace import collectors
from guardtrace.collectors import setup
from guardtrace.collectors.config import CollectorConfig
from guardtrace.collectors.emit.export_redaction import RedactingLogExporter
from guardtrace.collectors.emit.internal import internal_totals
from guardtrace.collectors.emit.redaction import Redactor
from guardtrace.collectors.emit.sdk_limits import CountingBatchLogRecordProcessor
from guardtrace.collectors.export.kafka_exporters import KafkaLogExporter
from guardtrace.collectors.export.kafka_producer import LazyProducer
from guardtrace.consumers.decode import decode_logs
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.store.tables import Columns
from guardtrace.transport.broker import free_port

DROPPED = names.METRIC_EXPORT_DROPPED
SERVICE = "travel-agent"
MARKER = "[REDACTED:api_key]"
KEY = "sk-proj-" + "".join(random.Random(11).choice(string.ascii_letters + string.digits)
                           for _ in range(40))


def _dropped(reason: str) -> int:
    return internal_totals(DROPPED).get(f"{DROPPED}{{{reason}}}", 0)


class RecordingKafka:
    """Stands in for a connected KafkaProducer: keeps what was sent, or raises."""

    def __init__(self, fail_with: Exception | None = None) -> None:
        self.sent: list[tuple[str, bytes | None, bytes, list[tuple[str, bytes]]]] = []
        self.fail_with = fail_with

    def send(self, topic: str, key: bytes | None = None, value: bytes | None = None,
             headers: list[tuple[str, bytes]] | None = None) -> Future:
        if self.fail_with is not None:
            raise self.fail_with
        assert value is not None
        self.sent.append((topic, key, value, list(headers or [])))
        return Future()

    def rows(self) -> list[dict[str, Any]]:
        """Every log_records row the consumers would decode from what was sent."""
        return [dict(zip(Columns.LOG_RECORDS, row, strict=True))
                for _, _, value, _ in self.sent for row in decode_logs(value).log_records]


class StandInProducer(LazyProducer):
    """The shared producer, connected to ``kafka`` (None: Kafka is unreachable)."""

    def __init__(self, kafka: RecordingKafka | None) -> None:
        super().__init__(f"127.0.0.1:{free_port()}", 1_000_000)
        self.kafka = kafka

    def get(self, wait_s: float = 0.5, compressed_values: bool = False) -> Any:
        return self.kafka

    def flush(self, timeout_s: float = 10.0) -> bool:
        return True


def _records(emit: Any, limits: LogRecordLimits | None = None) -> list[ReadableLogRecord]:
    """What ``emit(logger, tracer)`` emits, as the SDK hands it to an exporter."""
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource.create({"service.name": SERVICE}),
                              shutdown_on_exit=False, log_record_limits=limits)
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    emit(provider.get_logger("other.instrumentation"), TracerProvider().get_tracer("agent"))
    provider.shutdown()
    return list(memory.get_finished_logs())


# -- KafkaLogExporter ------------------------------------------------------------------
def test_records_go_out_as_otlp_logs_keyed_by_trace_or_service() -> None:
    trace_ids: list[str] = []

    def emit(logger: Any, tracer: Any) -> None:
        for n in range(2):
            with tracer.start_as_current_span("chat") as span:
                trace_ids.append(f"{span.get_span_context().trace_id:032x}")
                logger.emit(LogRecord(event_name=names.EVENT_GENAI_OPERATION_DETAILS,
                                      attributes={"turn": n}))
        logger.emit(LogRecord(body="outside any trace"))

    kafka = RecordingKafka()
    exporter = KafkaLogExporter(StandInProducer(kafka), "logs-topic", service_key=SERVICE)
    assert exporter.export(_records(emit)).name == "SUCCESS"

    assert {topic for topic, *_ in kafka.sent} == {"logs-topic"}
    assert sorted(key for _, key, *_ in kafka.sent) == sorted(
        [t.encode() for t in trace_ids] + [SERVICE.encode()])
    assert all(headers == [(names.HEADER_CONTENT_TYPE, names.CONTENT_TYPE_OTLP_PROTO)]
               for *_, headers in kafka.sent)
    rows = {row["trace_id"]: row for row in kafka.rows()}
    assert [rows[t]["attributes"]["turn"] for t in trace_ids] == ["0", "1"]
    assert rows[""]["body"] == "outside any trace"
    assert {row["service"] for row in rows.values()} == {SERVICE}


def test_a_batch_above_the_message_limit_is_split_and_every_record_arrives_once() -> None:
    def emit(logger: Any, _: Any) -> None:
        for n in range(40):
            logger.emit(LogRecord(body=f"{n:03d} " + "x" * 2_000))

    kafka = RecordingKafka()
    exporter = KafkaLogExporter(StandInProducer(kafka), max_message_bytes=16_384)
    assert exporter.export(_records(emit)).name == "SUCCESS"
    assert len(kafka.sent) > 1
    assert all(len(value) <= 16_384 for _, _, value, _ in kafka.sent)
    for _, _, value, _ in kafka.sent:  # each piece keeps its resource and scope
        request = ExportLogsServiceRequest.FromString(value)
        assert request.resource_logs[0].scope_logs[0].scope.name == "other.instrumentation"
    assert sorted(row["body"][:3] for row in kafka.rows()) == [f"{n:03d}" for n in range(40)]


def test_a_record_above_the_limit_is_dropped_and_counted_the_rest_sent() -> None:
    def emit(logger: Any, _: Any) -> None:
        logger.emit(LogRecord(body="small"))
        logger.emit(LogRecord(body="y" * 50_000))

    kafka = RecordingKafka()
    before = _dropped("oversize")
    KafkaLogExporter(StandInProducer(kafka), max_message_bytes=16_384).export(_records(emit))
    assert _dropped("oversize") == before + 1
    assert [row["body"] for row in kafka.rows()] == ["small"]


def test_kafka_down_or_a_failing_send_drops_and_counts_every_record() -> None:
    records = _records(lambda logger, _: [logger.emit(LogRecord(body=f"r{n}"))
                                          for n in range(3)])
    before = _dropped("kafka_unavailable")
    result = KafkaLogExporter(StandInProducer(None)).export(records)
    assert result.name == "FAILURE" and _dropped("kafka_unavailable") == before + 3

    before = _dropped("send_failed")
    failing = RecordingKafka(fail_with=BufferError("buffer full"))
    result = KafkaLogExporter(StandInProducer(failing)).export(records)
    assert result.name == "FAILURE" and _dropped("send_failed") == before + 3


def test_a_body_the_encoder_refuses_drops_that_record_only() -> None:
    def emit(logger: Any, _: Any) -> None:
        logger.emit(LogRecord(body="fine"))
        logger.emit(LogRecord(body=object()))  # type: ignore[arg-type]
        logger.emit(LogRecord(body="also fine"))

    kafka = RecordingKafka()
    before = _dropped("encode_failed")
    KafkaLogExporter(StandInProducer(kafka)).export(_records(emit))
    assert _dropped("encode_failed") == before + 1
    assert sorted(row["body"] for row in kafka.rows()) == ["also fine", "fine"]


def test_after_shutdown_nothing_is_sent() -> None:
    kafka = RecordingKafka()
    exporter = KafkaLogExporter(StandInProducer(kafka))
    exporter.shutdown()
    records = _records(lambda logger, _: logger.emit(LogRecord(body="late")))
    assert exporter.export(records).name == "FAILURE" and kafka.sent == []


# -- redaction -------------------------------------------------------------------------
def _redacted(records: list[ReadableLogRecord],
              redactor: Redactor | None = None) -> list[ReadableLogRecord]:
    memory = InMemoryLogRecordExporter()
    RedactingLogExporter(memory, redactor or Redactor()).export(records)
    return list(memory.get_finished_logs())


def test_bodies_and_attributes_leave_redacted_whatever_their_shape() -> None:
    def emit(logger: Any, _: Any) -> None:
        logger.emit(LogRecord(body=f"Use my key {KEY}", attributes={"prompt": f"key {KEY}"}))
        logger.emit(LogRecord(event_name=names.EVENT_GENAI_OPERATION_DETAILS, attributes={
            "gen_ai.input.messages": [{"role": "user", "content": f"my key is {KEY}"}],
            "gen_ai.usage.input_tokens": 12}))
        logger.emit(LogRecord(body={"messages": [{"content": f"{KEY}"}], "n": 1}))

    text, event, structured = _redacted(_records(emit))
    assert text.log_record.body == f"Use my key {MARKER}"
    assert text.log_record.attributes["prompt"] == f"key {MARKER}"
    messages = event.log_record.attributes["gen_ai.input.messages"]
    assert messages[0]["content"] == f"my key is {MARKER}"
    assert event.log_record.attributes["gen_ai.usage.input_tokens"] == 12
    assert event.log_record.event_name == names.EVENT_GENAI_OPERATION_DETAILS
    assert structured.log_record.body == {"messages": [{"content": MARKER}], "n": 1}


def test_a_record_without_secrets_goes_on_as_it_came_and_a_copy_keeps_drop_counts() -> None:
    def emit(logger: Any, _: Any) -> None:
        logger.emit(LogRecord(body="nothing secret", attributes={"a": "b"}))
        # Over the limit of two: the SDK drops the oldest, "b", and counts it.
        logger.emit(LogRecord(body="x", attributes={"b": 1, "c": 2, "a": f"{KEY}"}))

    with pytest.warns(LogRecordDroppedAttributesWarning):
        clean, secret = _records(emit, LogRecordLimits(max_attributes=2))
    out_clean, out_secret = _redacted([clean, secret])
    assert out_clean is clean
    assert out_secret is not secret and secret.log_record.attributes["a"] == KEY
    assert secret.dropped_attributes == 1
    assert out_secret.dropped_attributes == 1
    assert dict(out_secret.log_record.attributes) == {"c": 2, "a": MARKER}


def test_a_mapping_body_of_another_type_is_redacted_too() -> None:
    from types import MappingProxyType

    records = _records(lambda logger, _: logger.emit(LogRecord(
        body=MappingProxyType({"inner": MappingProxyType({"k": f"key {KEY}"})}))))
    (out,) = _redacted(records)
    assert out.log_record.body == {"inner": {"k": f"key {MARKER}"}}


def test_a_record_whose_redaction_fails_is_dropped_and_counted() -> None:
    class Broken(Redactor):
        def redact_counted(self, text: str) -> tuple[str, int]:
            raise RuntimeError("rule blew up")

    before = _dropped("redaction_failed")
    records = _records(lambda logger, _: logger.emit(LogRecord(body=f"key {KEY}")))
    assert _redacted(records, Broken()) == []
    assert _dropped("redaction_failed") == before + 1


# -- hook safety -----------------------------------------------------------------------
def test_a_failing_log_processor_never_raises_into_the_emitting_code(
        monkeypatch: pytest.MonkeyPatch) -> None:
    processor = CountingBatchLogRecordProcessor(InMemoryLogRecordExporter())

    def broken(_record: Any) -> None:
        raise RuntimeError("queue broke")

    monkeypatch.setattr(processor._batch_processor, "emit", broken)
    provider = LoggerProvider(shutdown_on_exit=False)
    provider.add_log_record_processor(processor)
    before = _dropped("emit_failed")
    provider.get_logger("host").emit(LogRecord(body="the host's own log call"))
    assert _dropped("emit_failed") == before + 1
    provider.shutdown()


class BlockedExporter(InMemoryLogRecordExporter):
    """Holds the export worker in its first export until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def export(self, batch: Any) -> Any:
        self.release.wait(30)
        return super().export(batch)


def test_a_full_log_queue_counts_what_it_drops() -> None:
    exporter = BlockedExporter()
    processor = CountingBatchLogRecordProcessor(exporter, max_queue_size=2,
                                                max_export_batch_size=2,
                                                schedule_delay_millis=60_000)
    provider = LoggerProvider(shutdown_on_exit=False)
    provider.add_log_record_processor(processor)
    before = _dropped("queue_full")
    logger = provider.get_logger("host")
    # Room for four: two in the export the worker is held in, two in the queue.
    for n in range(5):
        logger.emit(LogRecord(body=f"r{n}"))
    dropped = _dropped("queue_full") - before
    exporter.release.set()
    provider.shutdown()
    exported = len(exporter.get_finished_logs())
    assert exported <= 4
    # Every record lost is counted (the count may include one the worker made room for
    # at the same moment: the race CountingBatchLogRecordProcessor's docstring names).
    assert dropped >= 5 - exported >= 1


# -- configure() -----------------------------------------------------------------------
@pytest.fixture
def unconfigured(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in env.ALL:
        monkeypatch.delenv(var.name, raising=False)
    collectors.shutdown(timeout_s=2.0)
    yield
    collectors.shutdown(timeout_s=2.0)


def test_configure_exports_other_instrumentations_log_records_redacted(
        unconfigured: None, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = InMemoryLogRecordExporter()
    monkeypatch.setattr(setup, "_log_exporter", lambda config, producer, resource: memory)
    telemetry = collectors.configure(set_global=False, capture_payloads=False,
                                     kafka_bootstrap=f"127.0.0.1:{free_port()}",
                                     service_name=SERVICE)
    assert telemetry.logger_provider is not None
    telemetry.logger_provider.get_logger("openai.instrumentation").emit(LogRecord(
        event_name=names.EVENT_GENAI_OPERATION_DETAILS,
        attributes={"gen_ai.input.messages": json.dumps([{"content": f"key {KEY}"}])}))
    assert collectors.force_flush(timeout_s=5.0)
    (record,) = memory.get_finished_logs()
    assert KEY not in record.log_record.attributes["gen_ai.input.messages"]
    assert MARKER in record.log_record.attributes["gen_ai.input.messages"]
    assert record.resource.attributes["service.name"] == SERVICE

    collectors.shutdown(timeout_s=2.0)
    telemetry.logger_provider.get_logger("late").emit(LogRecord(body="after shutdown"))
    assert len(memory.get_finished_logs()) == 1


def test_with_redaction_off_log_records_leave_as_they_are(
        unconfigured: None, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = InMemoryLogRecordExporter()
    monkeypatch.setattr(setup, "_log_exporter", lambda config, producer, resource: memory)
    telemetry = collectors.configure(set_global=False, capture_payloads=False, redact=False,
                                     kafka_bootstrap=f"127.0.0.1:{free_port()}")
    assert telemetry.logger_provider is not None
    telemetry.logger_provider.get_logger("x").emit(LogRecord(body=f"key {KEY}"))
    assert collectors.force_flush(timeout_s=5.0)
    assert [r.log_record.body for r in memory.get_finished_logs()] == [f"key {KEY}"]


def test_each_export_mode_gets_its_log_exporter(unconfigured: None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    resource = Resource.create({"service.name": SERVICE})
    kafka = RecordingKafka()
    config = CollectorConfig.resolve(logs_topic="my-logs")
    exporter = setup._log_exporter(config, StandInProducer(kafka), resource)
    assert isinstance(exporter, KafkaLogExporter)
    exporter.export(_records(lambda logger, _: logger.emit(LogRecord(body="b"))))
    assert [(topic, key) for topic, key, *_ in kafka.sent] == [("my-logs", SERVICE.encode())]

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    otlp = setup._log_exporter(CollectorConfig.resolve(exporter="otlp"), None, resource)
    assert isinstance(otlp, OTLPLogExporter)
    otlp.shutdown()

    none = collectors.configure(set_global=False, exporter="none", capture_payloads=False)
    assert none.logger_provider is None
