"""Poison mixed into real traffic: the good lands exactly once, the poison is accounted for.

One record in ten is poison, of every kind the consumer must survive: garbage bytes on
each topic, truncated protobuf and zstd, a metrics request on the spans topic and a
spans request on the metrics and payloads topics, a payload on the spans topic, a
tombstone, and one record just over the consumer's 16 MiB limit (Tansu carries it:
measured up to 17 MiB, so the real limit is tested, not a lowered one). Afterwards every
good event and payload is stored exactly once, every poison record is in the
dead-letter topic with its reason and source position in headers, and in the
``dead_letters`` table the dashboard's health page reads (asserted through
``dashboard.queries.dead_letter_summary`` too).

A second test sends records that decode but that ClickHouse cannot store (found by the
property tests): they must be dead-lettered too, not retried forever.

Sizes: 450 requests (900 good records, 100 poison) in CI; 4,500 requests (9,000 good,
1,000 poison) with ``GUARDTRACE_RELIABILITY_FULL=1``.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from guardtrace import collectors
from guardtrace.collectors.emit.telemetry import GuardTelemetry
from guardtrace.consumers.consumer import MAX_RECORD_BYTES
from guardtrace.schemas import names
from guardtrace.store.queries import dead_letter_summary
from guardtrace.store.writer import ClickHouseWriter

from .conftest import Pipeline
from .faults import GiveUpAfter, Stalled
from .messages import Poison, compress_document, payload_document, poison_kinds
from .scale import FULL, size

pytestmark = [pytest.mark.usefixtures("collectors_reset")]

REQUESTS = size(ci=450, full=4_500)
CHUNKS = 10


def read_topic(bootstrap: str, topic: str, expected: int) -> list[Any]:
    """Every record of ``topic`` (at least ``expected`` of them, or what came in 10 s)."""
    reader = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                           consumer_timeout_ms=10_000, fetch_max_bytes=64 * 1024 * 1024,
                           max_partition_fetch_bytes=16 * 1024 * 1024)
    records = []
    for record in reader:
        records.append(record)
        if len(records) >= expected:
            break
    reader.close()
    return records


@pytest.mark.timeout(600 if FULL else 180)
def test_ten_percent_poison_is_dead_lettered_and_the_good_lands_exactly_once(
        pipeline: Pipeline) -> None:
    config = pipeline.consumer_config
    topics = {"spans": config.spans_topic, "metrics": config.metrics_topic,
              "payloads": config.payloads_topic}
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    guard = GuardTelemetry(names.MODULE_REPLIES, "fabrication_detection")
    tracer = telemetry.tracer_provider.get_tracer("reliability")
    producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap,
                             max_request_size=MAX_RECORD_BYTES + 1024 * 1024)
    rng = random.Random(5)
    # Each request is two good records (a span message, a payload message): 1 in 10 is
    # poison when there are 2/9 as many poison records as requests.
    poison_total = round(REQUESTS * 2 / 9)
    kinds = [p for p in poison_kinds(rng, MAX_RECORD_BYTES + 1) if p.kind == "oversize"]
    while len(kinds) < poison_total:
        kinds += [p for p in poison_kinds(rng, 0) if p.kind != "oversize"]
    rng.shuffle(kinds)
    kinds = kinds[:poison_total]

    request_ids: list[str] = []
    sent: dict[tuple[str, int, int], Poison] = {}
    for chunk in range(CHUNKS):
        for i in range(chunk * REQUESTS // CHUNKS, (chunk + 1) * REQUESTS // CHUNKS):
            request_id = f"good-{i}"
            request_ids.append(request_id)
            with tracer.start_as_current_span(
                    "reply.check", attributes={names.ATTR_REQUEST_ID: request_id}):
                guard.event(names.EVENT_FABRICATION_DETECTED, request_id,
                            {names.ATTR_TIER: names.TIER_ACTION, names.ATTR_AGENT: "a"})
                guard.count(names.METRIC_FABRICATIONS, agent="a",
                            labels={names.ATTR_TIER: names.TIER_ACTION})
                assert guard.payload(request_id, names.PAYLOAD_KIND_FABRICATION,
                                     {"reply": f"I'm deploying {i} now."})
        assert telemetry.force_flush(30)
        # This chunk's share of the poison, between good records in every partition.
        for poison in kinds[chunk * poison_total // CHUNKS:(chunk + 1) * poison_total // CHUNKS]:
            metadata = producer.send(topics[poison.topic_role], key=b"poison",
                                     value=poison.value).get(timeout=60)
            sent[(metadata.topic, metadata.partition, metadata.offset)] = poison
    producer.close()
    collectors.shutdown()  # the final counter export
    assert len(sent) == poison_total

    stats = pipeline.consume_until_idle()  # everything was sent and acknowledged

    # Every good event, payload and counter, exactly once.
    assert pipeline.scalar("SELECT count() FROM {db}.span_events FINAL") == REQUESTS
    assert pipeline.scalar("SELECT uniqExact(event_id) FROM {db}.span_events FINAL") == REQUESTS
    stored = {r[0] for r in pipeline.rows("SELECT request_id FROM {db}.span_events FINAL")}
    assert stored == set(request_ids)
    assert pipeline.scalar("SELECT count() FROM {db}.payloads FINAL") == REQUESTS
    assert pipeline.scalar("SELECT uniqExact(request_id) FROM {db}.payloads FINAL") == REQUESTS
    assert pipeline.scalar(
        "SELECT max(value) FROM {db}.metric_points FINAL WHERE metric_name = {m:String}",
        m=names.METRIC_FABRICATIONS) == REQUESTS

    # Every poison record, and nothing else, dead-lettered.
    assert stats.dead_letters == poison_total
    letters = read_topic(pipeline.bootstrap, config.dead_letter_topic, poison_total)
    assert len(letters) == poison_total
    for letter in letters:
        headers = dict(letter.headers)
        source = (headers[names.HEADER_DLQ_SOURCE_TOPIC].decode(),
                  int(headers[names.HEADER_DLQ_SOURCE_PARTITION]),
                  int(headers[names.HEADER_DLQ_SOURCE_OFFSET]))
        poison = sent.pop(source)
        reason = headers[names.HEADER_DLQ_ERROR].decode()
        assert poison.reason_kind in reason, (poison.kind, reason)
        if poison.kind == "oversize":
            # Only a sample of an oversize record travels on.
            assert letter.value == poison.value[:1024] and reason.startswith("oversize record:")
        else:
            assert letter.value == poison.value, poison.kind
    assert not sent, f"not dead-lettered: {[p.kind for p in sent.values()]}"

    # The same facts as rows (what the health page counts), one per source position.
    rows = pipeline.rows("SELECT source_topic, reason_kind, value_bytes FROM "
                         "{db}.dead_letters FINAL")
    assert len(rows) == poison_total
    expected = Counter((topics[p.topic_role], p.reason_kind) for p in kinds)
    found = Counter()
    for topic, kind, _value_bytes in rows:
        match = [k for t, k in expected if t == topic and k in kind]
        assert match, (topic, kind)
        found[(topic, match[0])] += 1
    assert found == expected
    assert sorted(r[2] for r in rows) == sorted(len(p.value or b"") for p in kinds)
    summary = dead_letter_summary(pipeline.client, pipeline.database)
    assert sum(s["count"] for s in summary) == poison_total
    assert {(s["topic"], s["reason_kind"]) for s in summary} == {(t, k) for t, k, _ in rows}
    assert all(s["latest_reason"] for s in summary)


@pytest.mark.timeout(120)
def test_records_that_decode_but_cannot_be_stored_are_dead_lettered(pipeline: Pipeline) -> None:
    config = pipeline.consumer_config
    late = 2**64 - 1  # a uint64 time; DateTime64(9) ends at 2**63 - 1 ns (2262-04-11)
    spans = ExportTraceServiceRequest()
    span = spans.resource_spans.add().scope_spans.add().spans.add(
        trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="from the far future",
        start_time_unix_nano=late, end_time_unix_nano=late)
    span.events.add(name=names.EVENT_FABRICATION_DETECTED, time_unix_nano=late)
    metrics = ExportMetricsServiceRequest()
    metric = metrics.resource_metrics.add().scope_metrics.add().metrics.add(name="m")
    metric.sum.data_points.add(as_int=1, start_time_unix_nano=1, time_unix_nano=late)
    unstorable = [
        (config.spans_topic, spans.SerializeToString(), "time out of range"),
        (config.metrics_topic, metrics.SerializeToString(), "time out of range"),
        (config.payloads_topic, compress_document(payload_document(chunk_index=2**32,
                                                                   chunk_count=2**32 + 1)),
         "payload has a field of the wrong type"),
        (config.payloads_topic, compress_document(payload_document(body="half a pair \ud800")),
         "payload has a field of the wrong type"),
    ]
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    guard = GuardTelemetry(names.MODULE_REPLIES, "fabrication_detection")
    producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap)
    for topic, value, _ in unstorable:
        producer.send(topic, value=value)
    producer.flush()
    for i in range(100):
        guard.event(names.EVENT_FABRICATION_DETECTED, f"after-{i}", {names.ATTR_TIER: "action"})
    assert telemetry.force_flush(30)

    writer = GiveUpAfter(ClickHouseWriter(pipeline.client, pipeline.database), failures=2)
    try:
        stats = pipeline.consumer(writer=writer).run(until_idle_s=3)
    except Stalled as stalled:
        pytest.fail(f"a record that decoded could not be stored and the consumer would "
                    f"retry it forever: {stalled}")
    assert pipeline.scalar("SELECT count() FROM {db}.span_events FINAL") == 100
    assert stats.dead_letters == len(unstorable)
    kinds = sorted(r[0] for r in pipeline.rows("SELECT reason_kind FROM {db}.dead_letters FINAL"))
    assert kinds == sorted(kind for _, _, kind in unstorable)
