"""One lazily created, never-blocking-for-long Kafka producer per agent process.

The producer is created on first use from a background thread (span/metric export
workers, the payload worker), never in ``configure``: kafka-python's constructor probes
the broker and would stall an agent starting while Kafka is down. When creation fails,
it is retried after a backoff instead of on every call.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kafka import KafkaProducer

from guardtrace.collectors.telemetry import log_rate_limited

__all__ = ["LazyProducer"]

logger = logging.getLogger("guardtrace.collectors")

# send() may wait for metadata or buffer space this long before giving up; it runs on
# background threads only, but a short bound keeps flush/shutdown prompt when Kafka is down.
_MAX_BLOCK_MS = 500
_RETRY_BACKOFF_S = 5.0


class LazyProducer:
    """Creates the KafkaProducer on a background thread, retrying after a backoff.

    Connecting can take up to ``bootstrap_timeout_ms`` when Kafka is down; no caller
    waits longer than it asks to (:meth:`get`'s ``wait_s``), and attempts after a
    failure are spaced by a backoff instead of made on every call.

    Args:
        bootstrap: Comma-separated bootstrap servers.
        max_message_bytes: The producer's max request size.
        **overrides: Extra KafkaProducer settings (tests shorten timeouts).
    """

    def __init__(self, bootstrap: str, max_message_bytes: int, **overrides: Any) -> None:
        self._settings: dict[str, Any] = {
            "bootstrap_servers": [s.strip() for s in bootstrap.split(",") if s.strip()],
            "client_id": "guardtrace-collector",
            "acks": "all",
            "compression_type": "zstd",
            "linger_ms": 20,
            "batch_size": 256 * 1024,
            "max_request_size": max_message_bytes + 64 * 1024,
            "max_block_ms": _MAX_BLOCK_MS,
            "request_timeout_ms": 10_000,
            "retries": 5,
            "reconnect_backoff_max_ms": 2_000,
            # Creating the producer waits this long for a broker, on its own thread.
            "bootstrap_timeout_ms": 3_000,
        }
        self._settings.update(overrides)
        self._producer: KafkaProducer | None = None
        self._next_attempt = 0.0
        self._lock = threading.Lock()
        self._attempt: threading.Event | None = None  # set when the running attempt ends
        self._closed = False

    def get(self, wait_s: float = 0.5) -> KafkaProducer | None:
        """The producer, or None if it is not connected within ``wait_s`` seconds.

        Starts a connection attempt when none is running and the backoff has passed.
        """
        producer = self._producer
        if producer is not None or self._closed:
            return producer
        with self._lock:
            if self._producer is not None or self._closed:
                return self._producer
            attempt = self._attempt
            if attempt is None and time.monotonic() >= self._next_attempt:
                attempt = self._attempt = threading.Event()
                threading.Thread(target=self._connect, args=(attempt,), daemon=True,
                                 name="guardtrace-kafka-connect").start()
        if attempt is not None:
            attempt.wait(wait_s)
        return self._producer

    def _connect(self, attempt: threading.Event) -> None:
        try:
            producer = KafkaProducer(**self._settings)
        except Exception as exc:  # noqa: BLE001 - any failure means "not now"
            with self._lock:
                self._next_attempt = time.monotonic() + _RETRY_BACKOFF_S
                self._attempt = None
            log_rate_limited("kafka-connect", "guardtrace cannot reach Kafka at %s: %r; "
                             "telemetry is dropped and counted until it is back",
                             ",".join(self._settings["bootstrap_servers"]), exc)
        else:
            with self._lock:
                closed = self._closed
                if not closed:
                    self._producer = producer
                self._attempt = None
            if closed:
                producer.close(timeout=0)
        finally:
            attempt.set()

    def flush(self, timeout_s: float) -> bool:
        """Wait for queued sends; False if the timeout ran out or Kafka is unreachable."""
        producer = self._producer
        if producer is None:
            return True
        try:
            producer.flush(timeout=timeout_s)
            return True
        except Exception as exc:  # noqa: BLE001
            log_rate_limited("kafka-flush", "guardtrace flush did not complete: %r", exc)
            return False

    def close(self, timeout_s: float) -> None:
        """Flush and close; later :meth:`get` calls return None."""
        with self._lock:
            self._closed = True
            producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=timeout_s)
            except Exception as exc:  # noqa: BLE001
                log_rate_limited("kafka-close", "guardtrace producer close failed: %r", exc)
