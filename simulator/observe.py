"""Counting what the hooks really emitted, without changing how it is emitted.

The summary of a simulation reports span events and payloads as they left the hooks, not
as the simulator expected them: events are counted by an extra span processor on the
tracer provider the hooks use, payloads by a pass-through wrapper around the payload
sink. Both only look; the spans and payloads go on to the real exporters unchanged.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

# The simulator is part of guardtrace: it may swap the hooks' payload sink the way the
# `collectors.testing.capture` fixture does, through the same private state module.
from ..collectors.emit import state as _state
from ..collectors.emit.telemetry import internal_totals
from ..schemas import names

__all__ = ["EventCounter", "PayloadCounter", "count_payloads", "drop_totals"]


class EventCounter(SpanProcessor):
    """A span processor that counts the events of every span that ends, by event name.

    Add it to the tracer provider the hooks emit through; :meth:`close` stops counting
    (a provider cannot remove a processor, so a finished run just goes quiet).
    """

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._active = True

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if not self._active or not span.events:
            return
        with self._lock:
            self._counts.update(event.name for event in span.events)

    def counts(self) -> dict[str, int]:
        """Events counted so far, by name, sorted by name."""
        with self._lock:
            return dict(sorted(self._counts.items()))

    def close(self) -> None:
        """Stop counting."""
        self._active = False

    def shutdown(self) -> None:
        self.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class PayloadCounter:
    """Wraps a payload sink; counts the payloads it accepted and their size.

    Attributes:
        payloads: Payloads the sink accepted.
        payload_bytes: Their total size in UTF-8 bytes, before redaction.
        queued_bytes: Their size as the Kafka sink accounts it against its queue bound
            (4 bytes a character for non-ASCII text); reset by :meth:`reset_queued`.
    """

    def __init__(self, sink: _state.PayloadSink) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        self.payloads = 0
        self.payload_bytes = 0
        self.queued_bytes = 0

    def record(self, request_id: str, kind: str, body: str,
               attributes: dict[str, str]) -> bool:
        accepted = self._sink.record(request_id, kind, body, attributes)
        if accepted:
            ascii_only = body.isascii()
            with self._lock:
                self.payloads += 1
                self.payload_bytes += len(body) if ascii_only else len(body.encode("utf-8"))
                self.queued_bytes += len(body) if ascii_only else len(body) * 4
        return accepted

    def reset_queued(self) -> None:
        """Start counting ``queued_bytes`` afresh (after a flush emptied the queue)."""
        with self._lock:
            self.queued_bytes = 0

    def force_flush(self, timeout_s: float = 10.0) -> bool:
        return self._sink.force_flush(timeout_s)

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self._sink.shutdown(timeout_s)


@contextmanager
def count_payloads() -> Iterator[PayloadCounter]:
    """Count payloads recorded through the current telemetry state while in the block."""
    previous = _state.current()
    counter = PayloadCounter(previous.payload_sink)
    _state.install(replace(previous, payload_sink=counter))
    try:
        yield counter
    finally:
        _state.install(previous)


def drop_totals() -> dict[str, int]:
    """Process-lifetime totals of dropped spans, metrics and payloads (see emit-test)."""
    return {**internal_totals(names.METRIC_EXPORT_DROPPED),
            **internal_totals(names.METRIC_PAYLOADS_DROPPED)}
