"""collectors/export/kafka_partition.py: the partition of a keyed message is the one
Kafka's default partitioner (kafka-python's, and the Java client's) picks."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from guardtrace.collectors.export.kafka_exporters import _send_all
from guardtrace.collectors.export.kafka_partition import murmur2, partition_for
from guardtrace.collectors.export.otlp_split import SplitResult


# What Kafka's Java client (org.apache.kafka.clients.producer.Partitioner) gives among
# 1000 partitions, as kafka-python's own tests record it.
@pytest.mark.parametrize("key, partition", [
    (b"", 681), (b"a", 524), (b"ab", 434), (b"abc", 107), (b"123456789", 566),
    (b"\x00 ", 742),
])
def test_the_java_clients_partitions(key: bytes, partition: int) -> None:
    assert partition_for(key, list(range(1000))) == partition


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80))
def test_murmur2_is_kafka_pythons(data: bytes) -> None:
    assert murmur2(data) == kafka_python_murmur2(data)


class _Cluster:
    def __init__(self, partitions: set[int]) -> None:
        self._partitions = partitions

    def topics(self) -> set[str]:
        return {"spans"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self._partitions

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self._partitions


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=40), st.sets(st.integers(0, 64), min_size=1))
def test_the_same_partition_as_the_default_partitioner(key: bytes, partitions: set[int]) -> None:
    expected = DefaultPartitioner().partition("spans", key, key, b"v", b"v",
                                              _Cluster(partitions))
    assert partition_for(key, sorted(partitions)) == expected


class _Kafka:
    """A connected producer that records what ``send`` was given."""

    def __init__(self, partitions: set[int] | None) -> None:
        self.partitions = partitions
        self.sent: list[dict[str, Any]] = []

    def partitions_for(self, topic: str) -> set[int] | None:
        if self.partitions is None:
            raise TimeoutError("no metadata")  # what a broker without metadata does
        return self.partitions

    def send(self, topic: str, **kwargs: Any) -> Future[None]:
        self.sent.append(kwargs)
        future: Future[None] = Future()
        future.add_errback = lambda *args: None  # type: ignore[attr-defined]
        return future


class _Producer:
    def __init__(self, kafka: _Kafka) -> None:
        self.kafka = kafka

    def get(self, wait_s: float = 0.5, compressed_values: bool = False) -> _Kafka:
        return self.kafka


@pytest.mark.parametrize("partitions, key, expected", [
    ({0, 1, 2, 3}, b"0af7651916cd43dd8448eb211c80319c",
     partition_for(b"0af7651916cd43dd8448eb211c80319c", [0, 1, 2, 3])),
    ({0, 1, 2, 3}, None, None),  # no key: the producer spreads them itself
    (None, b"0af7651916cd43dd8448eb211c80319c", None),  # no metadata yet: send() waits
])
def test_each_message_is_sent_to_its_keys_partition(
        partitions: set[int] | None, key: bytes | None, expected: int | None) -> None:
    kafka = _Kafka(partitions)
    split = SplitResult([b"one", b"two"], [1, 1], 0)
    assert _send_all(_Producer(kafka), "spans", key, split, "spans")  # type: ignore[arg-type]
    assert [sent.get("partition") for sent in kafka.sent] == [expected, expected]
    assert [sent["value"] for sent in kafka.sent] == [b"one", b"two"]


def _spans_of_traces(traces: int, spans_per_trace: int) -> list[Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    for _ in range(traces):
        with tracer.start_as_current_span("turn"):
            for _ in range(spans_per_trace - 1):
                with tracer.start_as_current_span("step"):
                    pass
    return list(memory.get_finished_spans())


def _traces_in(message: bytes) -> dict[str, int]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest.FromString(message)
    counts: dict[str, int] = {}
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                counts[span.trace_id.hex()] = counts.get(span.trace_id.hex(), 0) + 1
    return counts


def test_the_traces_bound_for_one_partition_share_messages_each_in_its_ids_partition(
        ) -> None:
    from guardtrace.collectors.export.kafka_exporters import _SPANS_PER_MESSAGE, KafkaSpanExporter

    kafka = _Kafka({0, 1, 2, 3, 4, 5})
    spans = _spans_of_traces(traces=100, spans_per_trace=3)
    exporter = KafkaSpanExporter(_Producer(kafka), "spans")  # type: ignore[arg-type]
    assert exporter.export(spans).name == "SUCCESS"
    # 300 spans over 6 partitions, at most 32 spans (10 traces) a message: about 12
    # messages, not 100.
    assert 6 <= len(kafka.sent) <= 20
    seen: dict[str, int] = {}
    for sent in kafka.sent:
        traces = _traces_in(sent["value"])
        assert sum(traces.values()) <= _SPANS_PER_MESSAGE
        assert sent["key"].decode() in traces  # keyed by one of its traces
        for trace_id, count in traces.items():
            assert partition_for(trace_id.encode(), [0, 1, 2, 3, 4, 5]) == sent["partition"]
            assert trace_id not in seen  # a trace is never split over messages
            seen[trace_id] = count
    assert len(seen) == 100 and set(seen.values()) == {3}


def test_a_trace_larger_than_a_message_of_traces_travels_alone() -> None:
    from guardtrace.collectors.export.kafka_exporters import _SPANS_PER_MESSAGE, KafkaSpanExporter

    kafka = _Kafka({0})
    spans = _spans_of_traces(traces=3, spans_per_trace=_SPANS_PER_MESSAGE + 8)
    KafkaSpanExporter(_Producer(kafka), "spans").export(spans)  # type: ignore[arg-type]
    assert [sum(_traces_in(sent["value"]).values()) for sent in kafka.sent] == [
        _SPANS_PER_MESSAGE + 8] * 3


def test_without_partition_metadata_each_trace_is_its_own_keyed_message() -> None:
    from guardtrace.collectors.export.kafka_exporters import KafkaSpanExporter

    kafka = _Kafka(None)
    spans = _spans_of_traces(traces=5, spans_per_trace=2)
    KafkaSpanExporter(_Producer(kafka), "spans").export(spans)  # type: ignore[arg-type]
    assert len(kafka.sent) == 5
    for sent in kafka.sent:
        assert list(_traces_in(sent["value"])) == [sent["key"].decode()]
        assert sent.get("partition") is None  # send() places it when metadata comes
