"""The debug store's agent side: payloads queued in memory, shipped to Kafka by a thread.

The caller's cost is a deque append: JSON encoding, redaction, chunking, compression and
the send all happen on a daemon worker (the shape of the OTel SDK's ``BatchProcessor``).
The queue is bounded in bytes; when it is full, or Kafka is unreachable, payloads are
dropped and counted in ``guardtrace.payloads_dropped{reason}``, never waited for.

Size policy (also in the README): a body up to ``payload_limit_bytes`` is kept whole and
split into chunks of at most one Kafka message each, which the consumer stores as rows
and queries reassemble. A larger body is cut at the limit and marked truncated with its
original size and sha256.

A chunk whose ``send()`` raises (kafka-python found no metadata or buffer space within
its ``max_block_ms``) is tried again a few times: giving up on chunk k leaves the chunks
before it stored as a payload that can never be whole. When it still fails the payload
is counted as dropped (``send_failed``), once, and readers report it incomplete; a
payload whose chunks fail in delivery is likewise counted once (``delivery_failed``).
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import threading
import time
import uuid
from dataclasses import replace
from typing import Any, NamedTuple

from kafka.errors import KafkaError
from opentelemetry import context as otel_context
from opentelemetry import trace

from ...schemas import names
from ...schemas.payload_record import PayloadRecord, encode
from ..config import CollectorConfig
from ..emit.internal import count_internal, log_rate_limited
from ..emit.payload_body import redact_body, text_bytes
from ..emit.redaction import Redactor
from .kafka_producer import LazyProducer

__all__ = ["KafkaPayloadSink", "split_utf8"]

_HEADERS = [(names.HEADER_CONTENT_TYPE, names.CONTENT_TYPE_PAYLOAD)]

# Once the queue is empty, the worker waits this long for more before it sleeps until
# woken. A payload queued meanwhile is picked up without the caller waking the thread:
# that wake-up (a futex syscall under Event.set) cost the caller 4 to 8 us a payload on
# the benchmark's VM, more than the rest of the enqueue. It is also the most a payload
# waits for the worker to notice it while payloads keep coming.
_LINGER_S = 0.005
# A chunk send that raises a retriable error is tried this many times in all, waiting
# _CHUNK_RETRY_BACKOFF_S, then twice that, ... between tries (0.25 + 0.5 + 1 s), on top
# of the producer's own max_block_ms each time: long enough for a leader election or a
# full buffer to pass, short enough that the queue behind it only fills meanwhile.
_CHUNK_SEND_ATTEMPTS = 4
_CHUNK_RETRY_BACKOFF_S = 0.25


class _Pending(NamedTuple):
    # A NamedTuple, not a dataclass: building it is on the agent's hot path (where it is
    # built with tuple.__new__, skipping the generated __new__'s Python frame).
    request_id: str
    kind: str
    body: Any  # text, or a private snapshot of JSON data (encoded on the worker)
    attributes: dict[str, Any]  # text, or int/float/bool (formatted on the worker)
    timestamp_ns: int
    # The caller's context, not its span's SpanContext: the span is looked up, and its
    # hex ids formatted, on the worker (a span's ids never change, so nothing is lost).
    context: otel_context.Context
    size: int


_new_pending = tuple.__new__


def split_utf8(data: bytes, chunk_bytes: int) -> list[str]:
    """Split UTF-8 ``data`` into strings of at most ``chunk_bytes`` bytes each.

    Cuts never fall inside a multi-byte character, so every chunk decodes on its own.

    Raises:
        ValueError: ``chunk_bytes`` is smaller than 4, the longest UTF-8 character (a
            smaller chunk could not always hold one, and the split would not progress).
    """
    if chunk_bytes < 4:
        raise ValueError(f"chunk_bytes must be at least 4, got {chunk_bytes}")
    chunks: list[str] = []
    start = 0
    while start < len(data):
        end = min(start + chunk_bytes, len(data))
        # Back up over continuation bytes (10xxxxxx) so the cut is on a boundary.
        while end < len(data) and end > start and (data[end] & 0xC0) == 0x80:
            end -= 1
        chunks.append(data[start:end].decode("utf-8"))
        start = end
    return chunks or [""]


def _cut_on_boundary(data: bytes, limit: int) -> bytes:
    """The longest prefix of UTF-8 ``data`` of at most ``limit`` bytes that is whole text."""
    end = min(limit, len(data))
    while 0 < end < len(data) and (data[end] & 0xC0) == 0x80:
        end -= 1
    return data[:end]


class KafkaPayloadSink:
    """Ships debug payloads to the payloads topic, keyed by request id.

    Args:
        config: Topic, size limits, queue bound and redaction switch.
        producer: The shared lazy producer.
        redactor: Applied to bodies and attributes on the worker thread.
    """

    def __init__(self, config: CollectorConfig, producer: LazyProducer,
                 redactor: Redactor) -> None:
        self._config = config
        self._producer = producer
        self._redactor = redactor
        self._init_worker()
        # A forked child inherits the deque but not the thread: start over there.
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._init_worker)

    def _init_worker(self) -> None:
        self._queue: collections.deque[_Pending] = collections.deque()
        self._queued_bytes = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        # Payloads queued, and payloads the worker is done with (shipped or dropped):
        # force_flush waits on _done for the count queued when it was called. Counters
        # under the lock the caller holds anyway, not an "idle" Event it must clear.
        self._enqueued = 0
        self._finished = 0
        self._done = threading.Condition(self._lock)
        # Set, under the lock, by a worker about to wait for _wake with no timeout: only
        # then must a caller wake it.
        self._sleeping = True
        self._shutdown = False
        self._worker = threading.Thread(target=self._run, name="guardtrace-payloads",
                                        daemon=True)
        self._worker.start()

    # -- caller side -------------------------------------------------------------------
    def record(self, request_id: str, kind: str, body: str,
               attributes: dict[str, str]) -> bool:
        """Queue a payload; returns False (and counts) when it had to be dropped."""
        return self.record_snapshot(request_id, kind, body, text_bytes(body), attributes)

    def record_snapshot(self, request_id: str, kind: str, body: Any, size: int,
                        attributes: dict[str, Any]) -> bool:
        """Queue a payload whose JSON encoding is left to the worker.

        :func:`~guardtrace.collectors.emit.telemetry.record_payload` calls this instead of
        :meth:`record`, so the agent's thread does not pay for the encoding.

        Args:
            request_id: The request the payload belongs to.
            kind: The payload kind.
            body: Text, or JSON data no caller can still change (see
                :func:`~guardtrace.collectors.emit.payload_body.snapshot_body`); it must encode
                without error.
            size: What ``body`` costs the queue's byte bound.
            attributes: Text values, or ``int``/``float``/``bool`` values shipped as
                their JSON text.

        Returns:
            False (and counted) when the payload had to be dropped.
        """
        if self._shutdown:
            self._dropped("shutdown")
            return False
        with self._lock:
            if self._queued_bytes + size > self._config.payload_queue_bytes:
                full = True
            else:
                full = False
                self._queue.append(_new_pending(_Pending, (
                    request_id, kind, body, attributes, time.time_ns(),
                    otel_context.get_current(), size)))
                self._queued_bytes += size
                self._enqueued += 1
                wake, self._sleeping = self._sleeping, False
        if full:
            self._dropped("queue_full")
            return False
        if wake:  # else the worker is busy or lingering, and looks at the queue again
            self._wake.set()
        return True

    def force_flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until the queue is shipped and the producer flushed."""
        deadline = time.monotonic() + timeout_s
        with self._done:
            target = self._enqueued
            self._wake.set()
            if not self._done.wait_for(lambda: self._finished >= target, timeout_s):
                return False
        return self._producer.flush(max(0.0, deadline - time.monotonic()))

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Ship what is queued (within the timeout); later records are dropped."""
        self.force_flush(timeout_s)
        self._shutdown = True
        self._wake.set()

    # -- worker side -------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while True:
                self._drain()
                if self._shutdown:
                    return
                # Linger (force_flush and shutdown cut it short), then sleep only if
                # nothing came: see _LINGER_S.
                if self._wake.wait(_LINGER_S):
                    self._wake.clear()
                with self._lock:
                    if not self._queue:
                        self._sleeping = True
                        break
            if self._shutdown:
                return

    def _drain(self) -> None:
        """Ship queued payloads until the queue is empty."""
        while True:
            with self._lock:
                if not self._queue:
                    return
                item = self._queue.popleft()
            try:
                self._ship(item)
            except Exception as exc:  # noqa: BLE001 - the worker must survive
                log_rate_limited("payload-ship", "guardtrace payload not shipped: %s: %s",
                                 type(exc).__name__, str(exc)[:200])
                self._dropped("error")
            finally:
                with self._lock:
                    self._queued_bytes -= item.size
                    self._finished += 1
                    self._done.notify_all()

    def _ship(self, item: _Pending) -> None:
        # The worker is a background thread: it may wait for a first connection.
        # Records are zstd frames: sent by the producer that does not compress batches.
        kafka = self._producer.get(wait_s=5.0, compressed_values=True)
        if kafka is None:
            self._dropped("kafka_unavailable")
            return
        # Redaction runs here, on the worker, never on the agent's thread; a long body
        # is redacted in slices (Redactor.SLICE_CHARS), so no one regex call holds the
        # GIL long enough to stall the agent's threads.
        body, redactions = redact_body(self._redactor, item.body)
        attributes = {k: self._redactor.redact(v if isinstance(v, str) else json.dumps(v))
                      for k, v in item.attributes.items()}
        data = body.encode("utf-8")
        body_bytes, sha = len(data), hashlib.sha256(data).hexdigest()
        truncated = body_bytes > self._config.payload_limit_bytes
        if truncated:
            data = _cut_on_boundary(data, self._config.payload_limit_bytes)
        payload_id = uuid.uuid4().hex
        context = trace.get_current_span(item.context).get_span_context()
        messages = self._encode_chunks(data, truncated, PayloadRecord(
            payload_id=payload_id, request_id=item.request_id, kind=item.kind, body="",
            timestamp_ns=item.timestamp_ns,
            trace_id=f"{context.trace_id:032x}" if context.is_valid else "",
            span_id=f"{context.span_id:016x}" if context.is_valid else "",
            body_bytes=body_bytes, body_sha256=sha, truncated=truncated,
            redactions=redactions, attributes=attributes))
        key = item.request_id.encode("utf-8")
        delivery = _Delivery()
        for index, message in enumerate(messages):
            try:
                future = self._send_chunk(kafka, key, message)
            except Exception as exc:  # noqa: BLE001
                # The chunks before this one are on their way: the payload is stored
                # incomplete, which its readers report (store/request_queries.py).
                log_rate_limited("payload-send", "guardtrace payload chunk %d of %d not "
                                 "queued for Kafka: %r; the payload is incomplete",
                                 index + 1, len(messages), exc)
                self._dropped("send_failed")
                return
            future.add_errback(delivery.failed)
        count_internal(names.METRIC_PAYLOADS_SENT, 1, {})

    def _send_chunk(self, kafka: Any, key: bytes, message: bytes) -> Any:
        """Send one chunk record, trying again while ``send()`` raises a retriable error.

        Raises:
            Exception: the last error, when the tries ran out or the error is final.
        """
        attempt, backoff = 1, _CHUNK_RETRY_BACKOFF_S
        while True:
            try:
                return kafka.send(self._config.payloads_topic, key=key, value=message,
                                  headers=_HEADERS)
            except KafkaError as exc:
                if not exc.retriable or attempt >= _CHUNK_SEND_ATTEMPTS or self._shutdown:
                    raise
            time.sleep(backoff)  # the worker's own thread: no caller waits on it
            attempt, backoff = attempt + 1, backoff * 2

    def _encode_chunks(self, data: bytes, truncated: bool, template: PayloadRecord) -> list[bytes]:
        """Encode ``data`` as chunk records that each fit in one Kafka message.

        JSON escaping can grow a chunk past the envelope headroom (a body of quotes and
        newlines); when an encoded chunk is too large, the chunk size is halved and the
        body re-split, so the broker's message limit is never what drops a payload.
        """
        chunk_bytes = self._config.payload_chunk_bytes
        while True:
            chunks = split_utf8(data, chunk_bytes)
            if truncated:
                chunks[-1] += names.TRUNCATION_MARKER
            messages = [encode(replace(template, body=chunk, chunk_index=index,
                                       chunk_count=len(chunks)))
                        for index, chunk in enumerate(chunks)]
            if max(map(len, messages)) <= self._config.max_message_bytes:
                return messages
            if chunk_bytes < 1024:
                # Even tiny chunks do not fit: the attributes alone are too large.
                raise ValueError(f"payload attributes exceed the {self._config.max_message_bytes}"
                                 "-byte message limit")
            chunk_bytes //= 2

    @staticmethod
    def _dropped(reason: str) -> None:
        _count_dropped(reason)


def _count_dropped(reason: str) -> None:
    count_internal(names.METRIC_PAYLOADS_DROPPED, 1, {names.ATTR_REASON: reason})


class _Delivery:
    """Counts a payload lost in delivery once, however many of its chunks fail.

    The errback of every chunk's future; kafka-python calls them on its sender thread,
    one at a time.
    """

    __slots__ = ("_failed",)

    def __init__(self) -> None:
        self._failed = False

    def failed(self, exc: BaseException) -> None:
        if self._failed:
            return
        self._failed = True
        log_rate_limited("payload-deliver", "guardtrace payload chunk not delivered: %r; "
                         "the payload is incomplete", exc)
        _count_dropped("delivery_failed")
