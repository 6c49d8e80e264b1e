"""collectors/payload_sink.py: UTF-8 chunking, chunk encoding, truncation, drops.

No broker: "Kafka is down" is a bootstrap address nothing listens on. Where a test needs
to see what would be sent, the project's own seam is used: a LazyProducer whose get()
hands out a recording client (the sink only calls ``send`` and ``add_errback`` on it).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kafka.future import Future
from opentelemetry.sdk.trace import TracerProvider

from guardtrace.collectors.config import CollectorConfig
from guardtrace.collectors.emit import state as _state
from guardtrace.collectors.emit.payload_body import snapshot_body
from guardtrace.collectors.emit.redaction import SLICE_CHARS, Redactor
from guardtrace.collectors.emit.telemetry import internal_totals, record_payload
from guardtrace.collectors.export import payload_sink as payload_sink_module
from guardtrace.collectors.export.kafka_producer import LazyProducer
from guardtrace.collectors.export.payload_sink import KafkaPayloadSink, split_utf8
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.schemas.payload_record import PayloadRecord, decode
from guardtrace.transport.broker import free_port

MAX_MESSAGE = 32_768  # the smallest max_message_bytes CollectorConfig accepts
DROPPED = names.METRIC_PAYLOADS_DROPPED


@pytest.fixture(autouse=True)
def _no_guardtrace_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in env.ALL:
        monkeypatch.delenv(var.name, raising=False)


def _config(**settings: Any) -> CollectorConfig:
    settings.setdefault("kafka_bootstrap", f"127.0.0.1:{free_port()}")
    settings.setdefault("max_message_bytes", MAX_MESSAGE)
    return CollectorConfig.resolve(**settings)


def _dropped(reason: str) -> int:
    return internal_totals(DROPPED).get(f"{DROPPED}{{{reason}}}", 0)


class _RecordingKafka:
    """Stands in for a connected KafkaProducer: keeps what was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes, list[tuple[str, bytes]]]] = []

    def send(self, topic: str, key: bytes | None = None, value: bytes | None = None,
             headers: list[tuple[str, bytes]] | None = None) -> Future:
        assert key is not None and value is not None
        self.sent.append((topic, key, value, list(headers or [])))
        return Future()  # kafka-python's own future: errbacks registered, never failed


class _RecordingProducer(LazyProducer):
    def __init__(self, config: CollectorConfig) -> None:
        super().__init__(config.kafka_bootstrap, config.max_message_bytes)
        self.kafka = _RecordingKafka()
        self.compressed_values: list[bool] = []  # what each get() asked for

    def get(self, wait_s: float = 0.5, compressed_values: bool = False) -> Any:
        self.compressed_values.append(compressed_values)
        return self.kafka


@pytest.fixture
def sinks() -> Iterator[list[KafkaPayloadSink]]:
    """Sinks created by a test; their workers are shut down afterwards."""
    made: list[KafkaPayloadSink] = []
    yield made
    for sink in made:
        sink.shutdown(timeout_s=2.0)


def _recording_sink(sinks: list[KafkaPayloadSink], redactor: Redactor | None = None,
                    **settings: Any) -> tuple[KafkaPayloadSink, _RecordingKafka]:
    config = _config(**settings)
    producer = _RecordingProducer(config)
    sink = KafkaPayloadSink(config, producer, redactor or Redactor())
    sinks.append(sink)
    return sink, producer.kafka


def _down_sink(sinks: list[KafkaPayloadSink], bootstrap_timeout_ms: int = 100,
               **settings: Any) -> KafkaPayloadSink:
    """A sink whose producer points at a port nothing listens on (bootstrap kept short)."""
    config = _config(**settings)
    producer = LazyProducer(config.kafka_bootstrap, config.max_message_bytes,
                            bootstrap_timeout_ms=bootstrap_timeout_ms)
    sink = KafkaPayloadSink(config, producer, Redactor())
    sinks.append(sink)
    return sink


def _reassemble(messages: list[bytes]) -> tuple[list[PayloadRecord], str]:
    records = [decode(m) for m in messages]
    records.sort(key=lambda r: r.chunk_index)
    return records, "".join(r.body for r in records)


def _template(**changes: Any) -> PayloadRecord:
    base: dict[str, Any] = {"payload_id": "p" * 32, "request_id": "req-1",
                            "kind": names.PAYLOAD_KIND_HALLUCINATION, "body": "",
                            "body_bytes": 0, "body_sha256": ""}
    base.update(changes)
    return PayloadRecord(**base)


# -- split_utf8 --------------------------------------------------------------------------
_RANGES = [(0x20, 0x7E), (0xA0, 0x7FF), (0x800, 0xD7FF), (0xE000, 0xFFFD), (0x10000, 0x10FFFF)]


def _random_text(rng: random.Random, length: int) -> str:
    out = []
    for _ in range(length):
        low, high = rng.choice(_RANGES)
        out.append(chr(rng.randint(low, high)))
    return "".join(out)


def test_split_utf8_never_cuts_a_character() -> None:
    rng = random.Random(1234)
    for _ in range(1500):
        text = _random_text(rng, rng.randint(0, 120))
        size = rng.choice([4, 5, 6, 7, rng.randint(4, 40), rng.randint(40, 600)])
        data = text.encode("utf-8")
        chunks = split_utf8(data, size)
        assert "".join(chunks) == text
        for chunk in chunks:
            assert len(chunk.encode("utf-8")) <= size
        if text:
            assert all(chunks), "no empty chunks for a non-empty body"
            # Greedy: a chunk ends only where the next character would not have fitted.
            for chunk, following in zip(chunks, chunks[1:], strict=False):
                assert len(chunk.encode()) + len(following[0].encode()) > size
        else:
            assert chunks == [""]


def test_split_utf8_ascii_is_cut_exactly_at_the_size() -> None:
    data = bytes(range(0x41, 0x41 + 26)) * 4  # 104 bytes
    chunks = split_utf8(data, 10)
    assert [len(c) for c in chunks] == [10] * 10 + [4]


def test_split_utf8_backs_up_before_a_multibyte_character() -> None:
    chunks = split_utf8("ab€cd".encode(), 4)  # € is 3 bytes: a b | e2 82 ac
    assert chunks == ["ab", "€c", "d"]


def test_split_utf8_terminates_for_chunks_smaller_than_a_character() -> None:
    text, size = "aé", 1
    # Run the function's own source in a child process, so a hang is a timeout, not a
    # test run that eats memory until it dies.
    source = Path(payload_sink_module.__file__).read_text()
    function = next(node for node in ast.parse(source).body
                    if isinstance(node, ast.FunctionDef) and node.name == "split_utf8")
    program = (ast.unparse(function) + "\n"
               "try:\n"
               f"    print(repr(''.join(split_utf8({text!r}.encode(), {size}))))\n"
               "except ValueError as exc:\n"
               "    print('ValueError')\n")
    try:
        result = subprocess.run([sys.executable, "-I", "-S", "-c", program],
                                capture_output=True, text=True, timeout=0.3)
    except subprocess.TimeoutExpired:
        pytest.fail(f"split_utf8({text!r}, {size}) did not terminate")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() in ("ValueError", repr(text))


# -- chunk encoding ----------------------------------------------------------------------
def test_encode_chunks_of_escape_heavy_body_fit_and_reassemble(sinks: list) -> None:
    sink = _down_sink(sinks, payload_limit_bytes=8_000_000)
    rng = random.Random(7)
    # Quotes, backslashes, newlines and control characters all grow under JSON escaping
    # (up to 6 bytes each), and random order keeps zstd from hiding it.
    body = "".join(rng.choice('"\\\n\t\r\x00\x01\x08\x0c\x1b\x7f') for _ in range(200_000))
    data = body.encode()
    messages = sink._encode_chunks(data, False, _template())
    assert all(len(m) <= MAX_MESSAGE for m in messages)
    records, joined = _reassemble(messages)
    assert joined == body
    assert [r.chunk_index for r in records] == list(range(len(records)))
    assert {r.chunk_count for r in records} == {len(records)}
    assert {r.payload_id for r in records} == {"p" * 32}


def test_encode_chunks_of_plain_quotes_backslashes_newlines(sinks: list) -> None:
    sink = _down_sink(sinks, payload_limit_bytes=8_000_000)
    body = '"\\\n' * 40_000
    messages = sink._encode_chunks(body.encode(), False, _template())
    assert all(len(m) <= MAX_MESSAGE for m in messages)
    assert _reassemble(messages)[1] == body


def test_encode_chunks_shrinks_chunks_when_the_envelope_is_large(sinks: list) -> None:
    sink = _down_sink(sinks, payload_limit_bytes=8_000_000)
    rng = random.Random(99)
    # A large, incompressible attribute leaves less room for the body than the default
    # headroom assumes; chunks must get smaller rather than exceed the message limit.
    attributes = {"context": _random_text(rng, 9_000)}
    body = _random_text(rng, 20_000)
    data = body.encode()
    messages = sink._encode_chunks(data, False, _template(attributes=attributes))
    assert len(messages) > math.ceil(len(data) / sink._config.payload_chunk_bytes)
    assert all(len(m) <= MAX_MESSAGE for m in messages)
    records, joined = _reassemble(messages)
    assert joined == body
    assert all(r.attributes == attributes for r in records)


def test_encode_chunks_marks_only_the_last_chunk_truncated(sinks: list) -> None:
    sink = _down_sink(sinks, payload_limit_bytes=8_000_000)
    data = ("x" * 50_000).encode()
    messages = sink._encode_chunks(data, True, _template(truncated=True))
    records, joined = _reassemble(messages)
    assert len(records) > 1
    assert joined == "x" * 50_000 + names.TRUNCATION_MARKER
    assert records[-1].body.endswith(names.TRUNCATION_MARKER)
    assert not any(r.body.endswith(names.TRUNCATION_MARKER) for r in records[:-1])
    assert all(len(m) <= MAX_MESSAGE for m in messages)


# -- shipping (through the recording producer) -------------------------------------------
def test_shipped_payload_is_split_keyed_and_reassembles(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks, payload_limit_bytes=1_000_000)
    rng = random.Random(5)
    body = _random_text(rng, 30_000)  # ~ 90 kB of UTF-8: several chunks
    provider = TracerProvider()
    with provider.get_tracer("t").start_as_current_span("plan") as span:
        assert sink.record("req-77", names.PAYLOAD_KIND_FABRICATION, body, {"model": "m1"})
    context = span.get_span_context()
    assert sink.force_flush(timeout_s=5.0)
    assert len(kafka.sent) > 1
    topic, key, _, headers = kafka.sent[0]
    assert topic == names.PAYLOADS_TOPIC
    assert {k for _, k, _, _ in kafka.sent} == {b"req-77"}
    assert (names.HEADER_CONTENT_TYPE, names.CONTENT_TYPE_PAYLOAD) in headers
    assert all(len(value) <= MAX_MESSAGE for _, _, value, _ in kafka.sent)
    records, joined = _reassemble([value for _, _, value, _ in kafka.sent])
    assert joined == body
    first = records[0]
    assert len({r.payload_id for r in records}) == 1
    assert first.request_id == "req-77"
    assert first.kind == names.PAYLOAD_KIND_FABRICATION
    assert first.body_bytes == len(body.encode())
    assert first.body_sha256 == hashlib.sha256(body.encode()).hexdigest()
    assert not first.truncated
    assert first.trace_id == f"{context.trace_id:032x}"
    assert first.span_id == f"{context.span_id:016x}"
    assert first.attributes == {"model": "m1"}


def test_body_over_the_limit_is_truncated_with_original_size_and_hash(sinks: list) -> None:
    limit = 40_000
    sink, kafka = _recording_sink(sinks, payload_limit_bytes=limit)
    body = "".join(f"line {i}: tool output\n" for i in range(10_000))  # ASCII, ~ 230 kB
    assert len(body) > limit
    assert sink.record("req-big", "plan_generation", body, {})
    assert sink.force_flush(timeout_s=5.0)
    records, joined = _reassemble([value for _, _, value, _ in kafka.sent])
    assert all(r.truncated for r in records)
    assert joined == body[:limit] + names.TRUNCATION_MARKER
    assert records[0].body_bytes == len(body)
    assert records[0].body_sha256 == hashlib.sha256(body.encode()).hexdigest()


def test_non_ascii_body_over_the_limit_is_truncated_not_dropped(sinks: list) -> None:
    limit = 2_000
    sink, kafka = _recording_sink(sinks, payload_limit_bytes=limit)
    body = "€" * 1_000  # 3000 bytes; byte 2000 falls inside the 667th character
    assert sink.record("req-utf8", "plan_generation", body, {})
    assert sink.force_flush(timeout_s=5.0)
    assert kafka.sent, "the payload was dropped instead of truncated"
    records, joined = _reassemble([value for _, _, value, _ in kafka.sent])
    assert records[0].truncated
    assert joined.endswith(names.TRUNCATION_MARKER)
    kept = joined.removesuffix(names.TRUNCATION_MARKER)
    assert body.startswith(kept) and 0 < len(kept.encode()) <= limit


def test_redaction_is_applied_before_shipping(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks, payload_limit_bytes=1_000_000)
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    body = f"user pasted {key} and mailed ops@example.com"
    assert sink.record("req-r", "plan_generation", body, {"header": "Bearer abcdef123456789"})
    assert sink.force_flush(timeout_s=5.0)
    (_, _, value, _), = kafka.sent
    record = decode(value)
    assert key not in record.body and "ops@example.com" not in record.body
    assert "[REDACTED:api_key]" in record.body and "[REDACTED:email]" in record.body
    assert record.redactions == 2
    assert record.attributes == {"header": "Bearer [REDACTED:bearer_token]"}
    # Size and hash describe what was stored (the redacted text), never the secret.
    assert record.body_sha256 == hashlib.sha256(record.body.encode()).hexdigest()


def test_redaction_disabled_ships_the_body_verbatim(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks, redactor=Redactor(enabled=False),
                                  payload_limit_bytes=1_000_000)
    body = "key sk-proj-A1b2C3d4E5f6G7h8I9j0 mail ops@example.com"
    assert sink.record("req-v", "plan_generation", body, {})
    assert sink.force_flush(timeout_s=5.0)
    record = decode(kafka.sent[0][2])
    assert record.body == body
    assert record.redactions == 0


# -- drops -------------------------------------------------------------------------------
def test_kafka_down_record_is_quick_and_drop_is_counted(sinks: list) -> None:
    # Connecting takes 250 ms before it gives up; record() must not wait for that.
    sink = _down_sink(sinks, bootstrap_timeout_ms=250)
    before = _dropped("kafka_unavailable")
    started = time.monotonic()
    results = [sink.record(f"req-{i}", "plan_generation", "body " * 100, {}) for i in range(3)]
    elapsed = time.monotonic() - started
    assert results == [True, True, True]  # queued; the worker decides later
    assert elapsed < 0.1, f"record() blocked for {elapsed:.3f}s"
    assert sink.force_flush(timeout_s=5.0)
    assert _dropped("kafka_unavailable") - before == 3


def test_queue_full_drops_and_counts(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks, payload_queue_bytes=1024)
    before = _dropped("queue_full")
    assert sink.record("req-big", "k", "a" * 2_000, {}) is False
    # Non-ASCII is budgeted at 4 bytes a character: 300 characters > 1024 bytes.
    assert sink.record("req-utf", "k", "ü" * 300, {}) is False
    assert _dropped("queue_full") - before == 2
    assert sink.record("req-small", "k", "small", {}) is True
    assert sink.force_flush(timeout_s=5.0)
    assert [decode(v).request_id for _, _, v, _ in kafka.sent] == ["req-small"]


def test_record_after_shutdown_is_dropped(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks)
    sink.shutdown(timeout_s=2.0)
    before = _dropped("shutdown")
    assert sink.record("req-late", "k", "too late", {}) is False
    assert _dropped("shutdown") - before == 1
    assert kafka.sent == []


# -- record_payload through the Kafka sink: JSON encoded on the worker -------------------
@contextmanager
def _installed(sink: KafkaPayloadSink) -> Iterator[None]:
    """Make ``sink`` the payload sink record_payload() uses, for the ``with`` block."""
    previous = _state.install(_state.TelemetryState(payload_sink=sink))
    try:
        yield
    finally:
        _state.install(previous)


def _shipped(kafka: _RecordingKafka) -> list[PayloadRecord]:
    return [decode(value) for _, _, value, _ in kafka.sent]


class _Note:
    """Not JSON-serialisable: stored through default=str."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return f"note({self.text})"


class _GatedProducer(_RecordingProducer):
    """A recording producer the worker cannot use until ``gate`` is set."""

    def __init__(self, config: CollectorConfig) -> None:
        super().__init__(config)
        self.gate = threading.Event()

    def get(self, wait_s: float = 0.5, compressed_values: bool = False) -> Any:
        self.gate.wait(5.0)
        return self.kafka


def test_body_changed_after_the_call_is_shipped_as_it_was(sinks: list) -> None:
    config = _config()
    producer = _GatedProducer(config)
    sink = KafkaPayloadSink(config, producer, Redactor())
    sinks.append(sink)
    body: dict[str, Any] = {"reply": "I deployed it.", "tiers": ["action"],
                            "matches": [{"tier": "action", "phrase": "I deployed"}],
                            "pair": ("a", ["b"]), "n": 3, "x": 1.5, "ok": True, "none": None}
    expected = json.dumps(body, default=str, ensure_ascii=False)
    with _installed(sink):
        assert record_payload("req-m", "k", body)
    # Every level changed while the payload waits in the queue.
    body["reply"] = "changed"
    body["tiers"].append("read")
    body["matches"][0]["phrase"] = "changed"
    body["pair"][1].append("c")
    body["extra"] = 1
    producer.gate.set()
    assert sink.force_flush(timeout_s=5.0)
    (record,) = _shipped(producer.kafka)
    assert record.body == expected


def test_shipped_json_is_what_the_caller_would_have_encoded(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks)
    bodies: list[Any] = [
        {"reply": "ünïcødé 日本語 🚀", "quote": '"\\\n\t\x00'},
        {"list": [1, -2, 3.25, None]},
        ["a", ("b", "c"), {"d": [True, False]}],
        {"big": 2 ** 200, "nan": float("nan"), "inf": float("-inf"), "empty": {}},
        ("tuple", "body"),
        42,
        None,
    ]
    with _installed(sink):
        for body in bodies:
            assert record_payload("req-j", "k", body)
    assert sink.force_flush(timeout_s=5.0)
    assert [r.body for r in _shipped(kafka)] == [
        json.dumps(b, default=str, ensure_ascii=False) for b in bodies]


def test_body_that_is_not_json_ships_through_default_str_as_at_the_call(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks)
    note = _Note("before")

    class Tagged(str):
        pass

    bodies: list[Any] = [
        {"when": datetime(2024, 5, 1, 12, 30), "note": note},
        {Tagged("key"): "a str subclass key"},
        {1: "an int key", None: "a None key"},
        [{"nested": note}],
    ]
    expected = [json.dumps(b, default=str, ensure_ascii=False) for b in bodies]
    with _installed(sink):
        for body in bodies:
            assert record_payload("req-d", "k", body)
    note.text = "after"  # encoded on the caller: the shipped text does not see this
    assert sink.force_flush(timeout_s=5.0)
    assert [r.body for r in _shipped(kafka)] == expected
    assert "note(before)" in expected[0] and "note(before)" in expected[3]


@pytest.mark.expect_hook_errors
def test_body_json_rejects_is_refused_on_the_caller_as_before(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks)
    cycle: list[Any] = ["x"]
    cycle.append(cycle)
    with _installed(sink):
        assert record_payload("req-c", "k", cycle) is False
        assert record_payload("req-t", "k", {("tuple", "key"): 1}) is False
        assert record_payload("req-i", "k", {"n": 10 ** 5000}) is False
    assert sink.force_flush(timeout_s=5.0)
    assert kafka.sent == []


def test_attributes_ship_as_before(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks)
    note = _Note("a")
    tools = ["read_file"]
    with _installed(sink):
        assert record_payload("req-a", "k", "body", model="m", retry=2, ok=True,
                              score=0.5, tools=tools, note=note, absent=None)
    tools.append("later")
    note.text = "b"
    assert sink.force_flush(timeout_s=5.0)
    (record,) = _shipped(kafka)
    assert record.attributes == {"model": "m", "retry": "2", "ok": "true", "score": "0.5",
                                 "tools": '["read_file"]', "note": '"note(a)"'}


def test_record_payload_keeps_the_callers_trace_context(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks)
    with _installed(sink), TracerProvider().get_tracer("t").start_as_current_span("s") as span:
        assert record_payload("req-s", "k", {"a": "b"})
    assert record_payload("req-none", "k", {"a": "b"}) is False  # not installed any more
    assert sink.force_flush(timeout_s=5.0)
    (record,) = _shipped(kafka)
    assert record.trace_id == f"{span.get_span_context().trace_id:032x}"
    assert record.span_id == f"{span.get_span_context().span_id:016x}"


def test_redaction_covers_a_body_encoded_on_the_worker(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks)
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    with _installed(sink):
        assert record_payload("req-r", "k", {"prompt": f"use {key}", "nested": [key]},
                              header="Bearer abcdef123456789")
    assert sink.force_flush(timeout_s=5.0)
    (record,) = _shipped(kafka)
    assert key not in record.body and record.redactions == 2
    assert record.attributes == {"header": "Bearer [REDACTED:bearer_token]"}


def test_queue_bound_drops_and_counts_bodies_encoded_on_the_worker(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks, payload_queue_bytes=1024)
    before = _dropped("queue_full")
    with _installed(sink):
        assert record_payload("req-big", "k", {"reply": "a" * 2_000}) is False
        # Non-ASCII text is budgeted at 4 bytes a character, as for text bodies.
        assert record_payload("req-utf", "k", {"reply": ["ü" * 300]}) is False
        # Text spread over many values adds up, too.
        many = {f"k{i}": "a" * 100 for i in range(11)}
        assert record_payload("req-many", "k", many) is False
        assert _dropped("queue_full") - before == 3
        assert record_payload("req-small", "k", {"reply": "small"}) is True
    assert sink.force_flush(timeout_s=5.0)
    assert [r.request_id for r in _shipped(kafka)] == ["req-small"]


def test_snapshot_copies_containers_and_shares_text() -> None:
    text = "x" * 1000
    inner = ["a", 1]
    body = {"text": text, "inner": inner, "pair": ("b", inner)}
    copy, size = snapshot_body(body)  # type: ignore[misc]
    assert copy == {"text": text, "inner": ["a", 1], "pair": ["b", ["a", 1]]}
    assert copy["text"] is text
    assert copy["inner"] is not inner and copy["pair"][1] is not inner
    assert size >= len(json.dumps(body)) - 2 * 8  # quotes and separators, roughly
    assert snapshot_body({"t": "ü" * 100})[1] >= 400  # type: ignore[index]


@pytest.mark.parametrize("body", [
    {"k": datetime(2024, 1, 1)},
    {1: "int key"},
    [True, 10 ** 400],
    {"k": list(range(40))},  # more values than the snapshot walks
    [[[["x"] * 10] * 2] * 2],
    type("S", (str,), {})("str subclass"),
    type("D", (dict,), {})(a=1),
])
def test_snapshot_leaves_what_it_cannot_copy_to_the_caller(body: Any) -> None:
    assert snapshot_body(body) is None


# -- the worker: lingers after a drain, sleeps until woken when nothing comes ------------
def _wait_for(predicate: Any, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.001)
    return predicate()


def test_payloads_ship_unflushed_whether_the_worker_sleeps_or_lingers(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks)
    assert _wait_for(lambda: sink._sleeping)
    assert sink.record("req-1", "k", "first", {})  # wakes the sleeping worker
    assert _wait_for(lambda: len(kafka.sent) == 1)
    # Right after a drain the worker lingers: no wake-up, still shipped.
    assert sink.record("req-2", "k", "second", {})
    assert _wait_for(lambda: len(kafka.sent) == 2)
    assert _wait_for(lambda: sink._sleeping)
    assert sink.record("req-3", "k", "third", {})
    assert _wait_for(lambda: len(kafka.sent) == 3)
    assert [r.request_id for r in _shipped(kafka)] == ["req-1", "req-2", "req-3"]


def test_force_flush_returns_while_other_threads_keep_recording(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks)
    stop = threading.Event()

    def keep_recording() -> None:
        while not stop.is_set():
            sink.record("req-bg", "k", "background", {})
            time.sleep(0.0002)

    recorder = threading.Thread(target=keep_recording)
    recorder.start()
    try:
        time.sleep(0.05)
        assert sink.record("req-mine", "k", "mine", {})
        started = time.monotonic()
        assert sink.force_flush(timeout_s=5.0)
        assert time.monotonic() - started < 2.0
        assert "req-mine" in {decode(v).request_id for _, _, v, _ in list(kafka.sent)}
    finally:
        stop.set()
        recorder.join()


@pytest.mark.parametrize("asleep", [True, False])
def test_shutdown_ends_a_sleeping_or_lingering_worker(sinks: list, asleep: bool) -> None:
    sink, kafka = _recording_sink(sinks)
    assert sink.record("req-s", "k", "body", {})
    if asleep:
        assert _wait_for(lambda: sink._sleeping)
    sink.shutdown(timeout_s=2.0)
    sink._worker.join(2.0)
    assert not sink._worker.is_alive()
    assert [r.request_id for r in _shipped(kafka)] == ["req-s"]


def test_payload_records_are_sent_by_the_producer_for_compressed_values(sinks: list) -> None:
    # Records are zstd frames already: the producer that would compress batches again
    # is not the one used.
    config = _config()
    producer = _RecordingProducer(config)
    sink = KafkaPayloadSink(config, producer, Redactor())
    sinks.append(sink)
    assert sink.record("req-1", names.PAYLOAD_KIND_HALLUCINATION, "body text", {})
    assert sink.force_flush(5.0)
    assert producer.kafka.sent and producer.compressed_values
    assert all(producer.compressed_values)


# -- structured bodies: redacted string by string, before encoding -------------------------
_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2"


def test_secret_alone_on_a_line_of_a_reply_is_redacted(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks)
    body = {"reply": f"Here is the key:\n{_KEY}\nthanks", "model": "gpt-4o"}
    with _installed(sink):
        assert record_payload("req-s", "k", body)
    assert sink.force_flush(timeout_s=5.0)
    (record,) = _shipped(kafka)
    assert _KEY not in record.body and record.redactions == 1
    assert json.loads(record.body) == {"reply": "Here is the key:\n[REDACTED:api_key]\nthanks",
                                       "model": "gpt-4o"}


def test_body_encoded_on_the_caller_is_still_redacted_string_by_string(sinks: list) -> None:
    # More values than a snapshot copies: JSON-encoded on the caller, decoded again and
    # redacted per string on the worker.
    sink, kafka = _recording_sink(sinks, payload_limit_bytes=1_000_000)
    steps = [{"tool": f"tool-{i}", "args": {"q": f"step {i}"}} for i in range(40)]
    body = {"plan": steps, "reply": f"ok\n{_KEY}\n", "api_key": "Zq81mX0pLw7r",
            "ops@example.com": "owner", "ops2@example.com": "backup"}
    with _installed(sink):
        assert record_payload("req-s", "k", body)
    assert sink.force_flush(timeout_s=5.0)
    (record,) = _shipped(kafka)
    stored = json.loads(record.body)
    assert stored["plan"] == steps
    assert stored["reply"] == "ok\n[REDACTED:api_key]\n"
    assert stored["api_key"] == "[REDACTED:secret_assignment]"
    # Keys are redacted too; two that redact alike both keep their value.
    assert stored["[REDACTED:email]"] == "owner" and stored["[REDACTED:email]#2"] == "backup"
    assert record.redactions == 4


def test_long_text_body_is_redacted_across_its_slices(sinks: list) -> None:
    sink, kafka = _recording_sink(sinks, payload_limit_bytes=2_000_000)
    line = "an ordinary line of a long tool result, nothing secret in it at all\n"
    filler = line * (SLICE_CHARS // len(line))
    secrets = [f"{_KEY[:-2]}{i:02d}" for i in range(12)]
    body = "".join(filler[: SLICE_CHARS * (i % 3) // 4] + s + "\n" for i, s in enumerate(secrets))
    body += "-----BEGIN RSA PRIVATE KEY-----\n" + "QUJDRA==\n" * 3000 + "-----END RSA PRIVATE KEY-----"
    assert len(body) > 4 * SLICE_CHARS
    with _installed(sink):
        assert record_payload("req-s", "k", body)
    assert sink.force_flush(timeout_s=10.0)
    records, text = _reassemble([value for _, _, value, _ in kafka.sent])
    assert not any(s in text for s in secrets) and "QUJDRA==" not in text
    assert records[0].redactions == len(secrets) + 1
