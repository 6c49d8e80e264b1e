"""One lazily created, never-blocking-for-long Kafka producer per agent process.

The producer is created on first use from a background thread (span/metric export
workers, the payload worker), never in ``configure``: kafka-python's constructor probes
the broker and would stall an agent starting while Kafka is down. When creation fails,
it is retried after a backoff instead of on every call.

Values that are compressed already (payload records are zstd frames) go through a second
producer that does not compress its batches: zstd over zstd gains nothing, and
kafka-python then sends the batch uncompressed anyway, having spent a copy and a
compression pass on it (~0.1 ms per 100 KB payload, on the agent's CPU).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kafka import KafkaProducer

from ...schemas.kafka_tls_check import check_tls_handshake
from ...schemas.transport_security import KafkaSecurity, kafka_connection_settings
from ..emit.internal import log_rate_limited

__all__ = ["LazyProducer"]

logger = logging.getLogger("guardtrace.collectors")

# send() may wait for metadata or buffer space this long before giving up; it runs on
# background threads only, but a short bound keeps flush/shutdown prompt when Kafka is down.
_MAX_BLOCK_MS = 500
_RETRY_BACKOFF_S = 5.0


class _Slot:
    """One KafkaProducer being created, or created, with its retry state."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.producer: KafkaProducer | None = None
        self.next_attempt = 0.0
        self.attempt: threading.Event | None = None  # set when the running attempt ends


class LazyProducer:
    """Creates the KafkaProducer on a background thread, retrying after a backoff.

    Connecting can take up to ``bootstrap_timeout_ms`` when Kafka is down; no caller
    waits longer than it asks to (:meth:`get`'s ``wait_s``), and attempts after a
    failure are spaced by a backoff instead of made on every call.

    Args:
        bootstrap: Comma-separated bootstrap servers.
        max_message_bytes: The producer's max request size.
        security: TLS and SASL settings (default: read from the environment).
        **overrides: Extra KafkaProducer settings (tests shorten timeouts).

    Raises:
        ConfigError: a security setting is unusable (checked here, in ``configure``).
    """

    def __init__(self, bootstrap: str, max_message_bytes: int,
                 security: KafkaSecurity | None = None, **overrides: Any) -> None:
        settings: dict[str, Any] = {
            **kafka_connection_settings(bootstrap, security),  # servers, TLS and SASL
            "client_id": "guardtrace-collector",
            "acks": "all",
            "compression_type": "zstd",
            "linger_ms": 20,
            "batch_size": 256 * 1024,
            "max_request_size": max_message_bytes + 64 * 1024,
            "max_block_ms": _MAX_BLOCK_MS,
            "request_timeout_ms": 10_000,
            "retries": 5,
            # Not idempotent: the store collapses a batch sent twice (rows have fixed
            # identities; readers use FINAL), and an idempotent producer cannot follow
            # `guardtrace up` to a fresh embedded broker (its producer id is refused).
            "enable_idempotence": False,
            "reconnect_backoff_max_ms": 2_000,
            # Creating the producer waits this long for a broker, on its own thread.
            "bootstrap_timeout_ms": 3_000,
        }
        settings.update(overrides)
        self._settings = settings
        # Keyed by ``compressed_values``; the second producer only exists once asked for.
        self._slots = {
            False: _Slot(settings),
            True: _Slot({**settings, "compression_type": None,
                         "client_id": f"{settings['client_id']}-compressed"}),
        }
        self._lock = threading.Lock()
        self._closed = False

    def get(self, wait_s: float = 0.5, compressed_values: bool = False
            ) -> KafkaProducer | None:
        """The producer, or None if it is not connected within ``wait_s`` seconds.

        Starts a connection attempt when none is running and the backoff has passed.

        Args:
            wait_s: How long to wait for a connection being made.
            compressed_values: The caller sends values compressed already: the producer
                returned does not compress batches again.
        """
        slot = self._slots[compressed_values]
        producer = slot.producer
        if producer is not None or self._closed:
            return producer
        with self._lock:
            if slot.producer is not None or self._closed:
                return slot.producer
            attempt = slot.attempt
            if attempt is None and time.monotonic() >= slot.next_attempt:
                attempt = slot.attempt = threading.Event()
                threading.Thread(target=self._connect, args=(slot, attempt), daemon=True,
                                 name="guardtrace-kafka-connect").start()
        if attempt is not None:
            attempt.wait(wait_s)
        return slot.producer

    def _connect(self, slot: _Slot, attempt: threading.Event) -> None:
        try:
            # kafka-python would wait forever on a TLS peer that never answers.
            check_tls_handshake(slot.settings)
            producer = KafkaProducer(**slot.settings)
        except Exception as exc:  # noqa: BLE001 - any failure means "not now"
            with self._lock:
                slot.next_attempt = time.monotonic() + _RETRY_BACKOFF_S
                slot.attempt = None
            log_rate_limited("kafka-connect", "guardtrace cannot reach Kafka at %s: %r; "
                             "telemetry is dropped and counted until it is back",
                             ",".join(slot.settings["bootstrap_servers"]), exc)
        else:
            with self._lock:
                closed = self._closed
                if not closed:
                    slot.producer = producer
                slot.attempt = None
            if closed:
                producer.close(timeout=0)
        finally:
            attempt.set()

    def _producers(self) -> list[KafkaProducer]:
        return [slot.producer for slot in self._slots.values() if slot.producer is not None]

    def flush(self, timeout_s: float) -> bool:
        """Wait for queued sends; False if the timeout ran out or Kafka is unreachable."""
        deadline = time.monotonic() + timeout_s
        ok = True
        for producer in self._producers():
            try:
                producer.flush(timeout=max(0.0, deadline - time.monotonic()))
            except Exception as exc:  # noqa: BLE001
                log_rate_limited("kafka-flush", "guardtrace flush did not complete: %r", exc)
                ok = False
        return ok

    def close(self, timeout_s: float) -> None:
        """Flush and close; later :meth:`get` calls return None."""
        with self._lock:
            self._closed = True
            producers = self._producers()
            for slot in self._slots.values():
                slot.producer = None
        deadline = time.monotonic() + timeout_s
        for producer in producers:
            try:
                producer.close(timeout=max(0.0, deadline - time.monotonic()))
            except Exception as exc:  # noqa: BLE001
                log_rate_limited("kafka-close", "guardtrace producer close failed: %r", exc)
