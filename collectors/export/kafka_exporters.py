"""OpenTelemetry SDK exporters that write OTLP protobuf to Kafka.

The message format is exactly what the OpenTelemetry Collector's Kafka exporter writes
with ``encoding: otlp_proto``: one serialized ``ExportTraceServiceRequest``,
``ExportMetricsServiceRequest`` or ``ExportLogsServiceRequest`` per message. Spans are
placed by trace id (the partition Kafka's default partitioner gives the id, as with the
Collector's ``partition_traces_by_id``), so one trace stays in one partition and one
consumer sees all of it in order; the traces of an export bound for the same partition
share messages of a few dozen spans (each keyed by its first trace), since a message's
fixed cost in the producer is most of what a small trace costs to send. Log records of
a trace are keyed by its id, so a GenAI log event lands in the partition of its span.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ...schemas import names
from ..emit.internal import count_internal, log_rate_limited
from .kafka_partition import partition_for
from .kafka_producer import LazyProducer
from .otlp_span_encoder import encode_trace_request
from .otlp_split import (
    SplitResult,
    split_logs_request,
    split_metrics_request,
    split_trace_request,
)

__all__ = ["KafkaLogExporter", "KafkaMetricExporter", "KafkaSpanExporter"]

_HEADERS = [(names.HEADER_CONTENT_TYPE, names.CONTENT_TYPE_OTLP_PROTO)]
_CONNECT_WAIT_S = 5.0
# The most spans of several traces sent in one message (see KafkaSpanExporter.export).
_SPANS_PER_MESSAGE = 32


def _count_dropped(signal: str, reason: str, count: int) -> None:
    if count:
        count_internal(names.METRIC_EXPORT_DROPPED, count,
                       {"signal": signal, names.ATTR_REASON: reason})


def _send_all(producer: LazyProducer, topic: str, key: bytes | None, split: SplitResult,
              signal: str, partition: int | None = None) -> bool:
    """Queue every message of ``split``; count what could not be queued or delivered."""
    _count_dropped(signal, "oversize", split.oversize_items)
    # Export threads are background threads: waiting for a first connection here costs
    # the agent nothing, and saves the first batches after start-up.
    kafka = producer.get(wait_s=_CONNECT_WAIT_S)
    if kafka is None:
        _count_dropped(signal, "kafka_unavailable", sum(split.item_counts))
        return False
    if partition is None:
        partition = _partition(kafka, topic, key)
    ok = True
    for message, items in zip(split.messages, split.item_counts, strict=True):
        try:
            if partition is None:
                future = kafka.send(topic, key=key, value=message, headers=_HEADERS)
            else:
                future = kafka.send(topic, key=key, value=message, headers=_HEADERS,
                                    partition=partition)
        except Exception as exc:  # noqa: BLE001 - KafkaTimeoutError, buffer full, closed
            log_rate_limited(f"send-{signal}", "guardtrace could not queue %s for Kafka: %r",
                             signal, exc)
            _count_dropped(signal, "send_failed", items)
            ok = False
            continue
        future.add_errback(_delivery_failed, signal, items)
    return ok


def _partition(kafka: Any, topic: str, key: bytes | None) -> int | None:
    """The default partitioner's choice for ``key`` (kafka_partition.py says why it is
    computed here); None leaves it to ``send``: no key, or no partitions known yet."""
    if key is None:
        return None
    partitions = _known_partitions(kafka, topic)
    return partition_for(key, partitions) if partitions else None


def _known_partitions(kafka: Any, topic: str) -> list[int] | None:
    """``topic``'s partitions, sorted as the partitioner sorts them; None before the
    producer has their metadata (send() then waits for it)."""
    try:
        partitions = kafka.partitions_for(topic)
    except Exception:  # noqa: BLE001 - no metadata yet
        return None
    return sorted(partitions) if partitions else None


def _delivery_failed(exc: BaseException, signal: str, items: int) -> None:
    log_rate_limited(f"deliver-{signal}", "guardtrace %s were not delivered to Kafka: %r",
                     signal, exc)
    _count_dropped(signal, "delivery_failed", items)


class KafkaSpanExporter(SpanExporter):
    """Writes spans as OTLP protobuf to a Kafka topic: whole traces, packed by the
    partition of their ids into messages of a few dozen spans (split if larger than
    ``max_message_bytes``).

    Args:
        producer: The shared lazy producer.
        topic: The spans topic (default ``otlp_spans``).
        max_message_bytes: No message is larger; bigger traces are split.
    """

    def __init__(self, producer: LazyProducer, topic: str = names.SPANS_TOPIC,
                 max_message_bytes: int = 1_000_000) -> None:
        self._producer = producer
        self._topic = topic
        self._max_message_bytes = max_message_bytes
        self._shutdown = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
        for span in spans:
            by_trace[span.context.trace_id].append(span)
        keys = {trace_id: f"{trace_id:032x}".encode() for trace_id in by_trace}
        partitions = self._partitions()
        ok = True
        if partitions is None:  # no metadata yet: one message per trace, send() places it
            for trace_id, group in by_trace.items():
                split = _trace_messages(group, self._max_message_bytes)
                ok = _send_all(self._producer, self._topic, keys[trace_id], split,
                               "spans") and ok
            return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE
        # The traces bound for one partition share messages: each trace still lands in
        # the partition of its id, and a message's fixed cost in the producer (most of a
        # small trace's export) is shared. A message holds whole traces, up to
        # _SPANS_PER_MESSAGE spans unless one trace alone has more: large enough to share
        # that cost among dozens of spans, small enough to keep a consumer's poll small.
        packing: dict[int, tuple[bytes, list[ReadableSpan]]] = {}
        for trace_id, group in by_trace.items():
            partition = partition_for(keys[trace_id], partitions)
            packed = packing.get(partition)
            if packed is not None and len(packed[1]) + len(group) > _SPANS_PER_MESSAGE:
                ok = self._send(partition, *packed) and ok
                packed = None
            if packed is None:
                packed = packing[partition] = (keys[trace_id], [])
            packed[1].extend(group)
        for partition, packed in packing.items():
            ok = self._send(partition, *packed) and ok
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def _send(self, partition: int, key: bytes, spans: list[ReadableSpan]) -> bool:
        split = _trace_messages(spans, self._max_message_bytes)
        return _send_all(self._producer, self._topic, key, split, "spans",
                         partition=partition)

    def _partitions(self) -> list[int] | None:
        kafka = self._producer.get(wait_s=_CONNECT_WAIT_S)
        return None if kafka is None else _known_partitions(kafka, self._topic)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._producer.flush(timeout_millis / 1000)

    def shutdown(self) -> None:
        # The producer is shared and closed by the owner of the configuration.
        self._shutdown = True


def _trace_messages(spans: list[ReadableSpan], max_bytes: int) -> SplitResult:
    """One trace's spans as messages of at most ``max_bytes``: usually the one request;
    a bigger trace is parsed back and split by span (rare, and exact either way)."""
    request = encode_trace_request(spans)
    if len(request) <= max_bytes:
        return SplitResult([request], [len(spans)], 0)
    return split_trace_request(ExportTraceServiceRequest.FromString(request), max_bytes)


class KafkaMetricExporter(MetricExporter):
    """Writes metrics as OTLP protobuf to a Kafka topic (cumulative temporality).

    Args:
        producer: The shared lazy producer.
        topic: The metrics topic (default ``otlp_metrics``).
        max_message_bytes: No message is larger; big exports are split by metric.
        service_key: Message key, so one service's points stay ordered in a partition.
    """

    def __init__(self, producer: LazyProducer, topic: str = names.METRICS_TOPIC,
                 max_message_bytes: int = 1_000_000, service_key: str = "") -> None:
        super().__init__(preferred_temporality=None, preferred_aggregation=None)
        self._producer = producer
        self._topic = topic
        self._max_message_bytes = max_message_bytes
        self._key = service_key.encode() or None

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        split = split_metrics_request(encode_metrics(metrics_data), self._max_message_bytes)
        ok = _send_all(self._producer, self._topic, self._key, split, "metrics")
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._producer.flush(timeout_millis / 1000)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


class KafkaLogExporter(LogRecordExporter):
    """Writes log records as OTLP protobuf to a Kafka topic, one message per trace (or less).

    Records of a trace are keyed by its id, as spans are; records outside any trace by
    ``service_key``.

    Args:
        producer: The shared lazy producer.
        topic: The logs topic (default ``otlp_logs``).
        max_message_bytes: No message is larger; bigger batches are split by record.
        service_key: Message key of records that belong to no trace.
    """

    def __init__(self, producer: LazyProducer, topic: str = names.LOGS_TOPIC,
                 max_message_bytes: int = 1_000_000, service_key: str = "") -> None:
        self._producer = producer
        self._topic = topic
        self._max_message_bytes = max_message_bytes
        self._key = service_key.encode() or None
        self._shutdown = False

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        if self._shutdown:
            return LogRecordExportResult.FAILURE
        by_trace: dict[int, list[ReadableLogRecord]] = defaultdict(list)
        for record in batch:
            by_trace[record.log_record.trace_id or 0].append(record)
        ok = True
        for trace_id, group in by_trace.items():
            request = _encode_logs_counting_failures(group)
            if request is None:
                ok = False
                continue
            split = split_logs_request(request, self._max_message_bytes)
            key = f"{trace_id:032x}".encode() if trace_id else self._key
            ok = _send_all(self._producer, self._topic, key, split, "logs") and ok
        return LogRecordExportResult.SUCCESS if ok else LogRecordExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._producer.flush(timeout_millis / 1000)

    def shutdown(self) -> None:
        # The producer is shared and closed by the owner of the configuration.
        self._shutdown = True


def _encode_logs_counting_failures(
        records: list[ReadableLogRecord]) -> ExportLogsServiceRequest | None:
    """The records' OTLP request, leaving out (and counting) any the encoder refuses.

    The SDK passes a log body on as the caller gave it, and the encoder raises on a type
    OTLP has no value for; one such record would otherwise lose its whole batch.
    """
    try:
        return encode_logs(records)
    except Exception as exc:  # noqa: BLE001 - find the records at fault, keep the rest
        log_rate_limited("encode-logs", "guardtrace could not encode a log record: %r", exc)
    encodable = []
    for record in records:
        try:
            encode_logs([record])
        except Exception:  # noqa: BLE001 - counted below
            continue
        encodable.append(record)
    _count_dropped("logs", "encode_failed", len(records) - len(encodable))
    return encode_logs(encodable) if encodable else None
