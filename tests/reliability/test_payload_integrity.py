"""Large payloads through the real pipeline when chunk sends fail: whole, or said not to be.

A payload body larger than one Kafka message travels as several chunk records. Here the
collector's real payload sink sends to the real broker through a producer whose
``send()`` raises for chosen chunks (what kafka-python does when it gets no metadata or
buffer space within ``max_block_ms``): for one payload twice (the sink tries again and
the payload arrives whole), for another every time (the sink gives up, counts the loss,
and the chunks before it are stored alone). A third payload's chunks are stored intact
but do not add up to the body the agent hashed. After the real consumer has stored them
all, the readers (``request_payloads``, which the dashboard's request page also uses,
and ``guardtrace payload``) must return the whole ones verified and say of the others
"payload incomplete" or "checksum mismatch"; before, they returned partial or corrupt
text as if it were the body.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError
from streamlit.testing.v1 import AppTest

from guardtrace import cli
from guardtrace.collectors.config import CollectorConfig
from guardtrace.collectors.emit.redaction import Redactor
from guardtrace.collectors.emit.telemetry import internal_totals
from guardtrace.collectors.export.kafka_producer import LazyProducer
from guardtrace.collectors.export.payload_sink import KafkaPayloadSink, split_utf8
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.schemas.payload_record import PayloadRecord, decode, encode
from guardtrace.store.queries import Payload, PayloadIntegrity, request_payloads

from .conftest import Pipeline

KIND = names.PAYLOAD_KIND_FABRICATION
DASHBOARD_APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
MESSAGE_BYTES = 32_768  # the smallest max_message_bytes the collector accepts: many chunks
SEND_FAILED = f"{names.METRIC_PAYLOADS_DROPPED}{{send_failed}}"


def text(seed: int, size: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("abcdefghij klmnop\n\"{}é€") for _ in range(size))


class FailingSends:
    """A real KafkaProducer whose send() raises for chosen (request id, chunk index) pairs.

    Args:
        inner: The real producer.
        failures: (request id, chunk index) -> how many sends of that chunk raise (-1: all).
    """

    def __init__(self, inner: KafkaProducer, failures: dict[tuple[str, int], int]) -> None:
        self.inner, self.failures = inner, dict(failures)
        self.raised: dict[tuple[str, int], int] = {}

    def send(self, topic: str, **kwargs: Any) -> Any:
        record = decode(kwargs["value"])
        chunk = (record.request_id, record.chunk_index)
        left = self.failures.get(chunk, 0)
        if left:
            self.failures[chunk] = left - 1
            self.raised[chunk] = self.raised.get(chunk, 0) + 1
            raise KafkaTimeoutError("Failed to update metadata after 0.5 secs. (injected)")
        return self.inner.send(topic, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FaultyLazyProducer(LazyProducer):
    """The collector's LazyProducer, handing out the real producer behind a fault layer."""

    def __init__(self, config: CollectorConfig, wrap: Callable[[KafkaProducer], Any]) -> None:
        super().__init__(config.kafka_bootstrap, config.max_message_bytes)
        self._wrap = wrap
        self.wrapped: Any = None

    def get(self, wait_s: float = 0.5, compressed_values: bool = False) -> Any:
        producer = super().get(wait_s, compressed_values)
        if producer is not None and self.wrapped is None:
            self.wrapped = self._wrap(producer)
        return self.wrapped if producer is not None else None


def corrupt_payload_messages(request_id: str, body: str) -> list[bytes]:
    """Chunk records of ``body`` with its size and sha256, one chunk's text changed."""
    data = body.encode("utf-8")
    chunks = split_utf8(data, 8_000)
    chunks[1] = chunks[1][::-1]  # same length, other text: only the checksum can tell
    template = PayloadRecord(payload_id="c0ffee" * 5 + "00", request_id=request_id, kind=KIND,
                             body="", timestamp_ns=time.time_ns(),
                             body_bytes=len(data),
                             body_sha256=hashlib.sha256(data).hexdigest())
    return [encode(PayloadRecord(**{**template.__dict__, "body": chunk, "chunk_index": i,
                                    "chunk_count": len(chunks)}))
            for i, chunk in enumerate(chunks)]


def only(payloads: list[Payload]) -> Payload:
    assert len(payloads) == 1, payloads
    return payloads[0]


@pytest.mark.timeout(180)
def test_readers_return_a_payload_whole_and_verified_or_say_what_is_wrong(
        pipeline: Pipeline, chdb_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bodies = {"req-whole": text(1, 120_000), "req-retried": text(2, 120_000),
              "req-lost": text(3, 120_000), "req-corrupt": text(4, 30_000)}
    config = CollectorConfig.resolve(kafka_bootstrap=pipeline.bootstrap,
                                     payloads_topic=pipeline.topics.payloads,
                                     max_message_bytes=MESSAGE_BYTES)
    fail = {("req-retried", 2): 2, ("req-lost", 2): -1}
    producer = FaultyLazyProducer(config, lambda inner: FailingSends(inner, fail))
    sink = KafkaPayloadSink(config, producer, Redactor(enabled=False))
    send_failed_before = internal_totals(names.METRIC_PAYLOADS_DROPPED).get(SEND_FAILED, 0)
    try:
        for request_id in ("req-whole", "req-retried", "req-lost"):
            assert sink.record(request_id, KIND, bodies[request_id], {"model": "m1"})
        assert sink.force_flush(timeout_s=60)
    finally:
        sink.shutdown(timeout_s=10)
        producer.close(timeout_s=10)
    assert producer.wrapped.raised[("req-retried", 2)] == 2
    assert producer.wrapped.raised[("req-lost", 2)] > 1, "the failing chunk was not retried"
    send_failed = internal_totals(names.METRIC_PAYLOADS_DROPPED).get(SEND_FAILED, 0)
    assert send_failed - send_failed_before == 1, "the lost payload was not counted once"

    raw = KafkaProducer(bootstrap_servers=pipeline.bootstrap)
    for message in corrupt_payload_messages("req-corrupt", bodies["req-corrupt"]):
        raw.send(pipeline.topics.payloads, key=b"req-corrupt", value=message)
    raw.close()
    assert pipeline.consume_until_idle().dead_letters == 0  # all of it sent and flushed

    def read(request_id: str) -> Payload:
        return only(request_payloads(pipeline.client, pipeline.database, request_id))

    for request_id in ("req-whole", "req-retried"):
        payload = read(request_id)
        assert payload.integrity is PayloadIntegrity.VERIFIED, (request_id, payload.problem)
        assert payload.complete and payload.problem is None
        assert payload.body == bodies[request_id]

    lost = read("req-lost")
    assert lost.integrity is PayloadIntegrity.INCOMPLETE
    assert lost.chunks_present == 2 < lost.chunk_count
    assert lost.problem is not None and lost.problem.startswith(
        f"payload incomplete: 2 of {lost.chunk_count} chunks stored")
    assert bodies["req-lost"].startswith(lost.body) and lost.body != bodies["req-lost"]

    corrupt = read("req-corrupt")
    assert corrupt.complete, "every chunk of the corrupt payload is stored"
    assert corrupt.integrity is PayloadIntegrity.CHECKSUM_MISMATCH
    assert corrupt.problem is not None and corrupt.problem.startswith("checksum mismatch")

    # `guardtrace payload` says the same, in JSON and in text.
    store = ["--clickhouse-url", f"chdb://{chdb_dir}", "--database", pipeline.database]
    expected = {"req-whole": ("verified", None), "req-lost": ("incomplete", lost.problem),
                "req-corrupt": ("checksum mismatch", corrupt.problem)}
    for request_id, (integrity, problem) in expected.items():
        assert cli.main(["payload", request_id, "--json", *store]) == 0
        (shown,) = json.loads(capsys.readouterr().out)
        assert (shown["integrity"], shown["problem"]) == (integrity, problem)
    assert cli.main(["payload", "req-corrupt", *store]) == 0
    assert "CHECKSUM MISMATCH" in capsys.readouterr().out.splitlines()[0]
    assert cli.main(["payload", "req-lost", *store]) == 0
    assert f"INCOMPLETE (2/{lost.chunk_count} chunks)" in capsys.readouterr().out


def test_the_request_page_says_a_body_is_not_the_one_sent(
        pipeline: Pipeline, chdb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = KafkaProducer(bootstrap_servers=pipeline.bootstrap)
    for message in corrupt_payload_messages("req-corrupt-page", text(5, 30_000)):
        raw.send(pipeline.topics.payloads, key=b"req-corrupt-page", value=message)
    raw.close()
    assert pipeline.consume_until_idle().dead_letters == 0  # all of it sent and flushed
    monkeypatch.setenv(env.CLICKHOUSE_URL.name, f"chdb://{chdb_dir}")
    monkeypatch.setenv(env.CLICKHOUSE_DATABASE.name, pipeline.database)
    monkeypatch.delenv(env.DASHBOARD_CLICKHOUSE_URL.name, raising=False)
    app = AppTest.from_file(str(DASHBOARD_APP), default_timeout=60)
    app.query_params["request_id"] = "req-corrupt-page"
    at = app.switch_page("views/requests.py").run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert any(e.startswith("Checksum mismatch") for e in errors), errors
    assert any(t.value.startswith("checksum mismatch") for t in at.text)
