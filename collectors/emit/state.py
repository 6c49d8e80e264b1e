"""The telemetry the guard hooks currently emit through.

Until :func:`guardtrace.collectors.configure` runs, hooks emit through the OpenTelemetry
global API (a no-op unless the host application set providers itself), drop payloads,
and still make every decision. ``configure`` and the testing fixture swap the state
atomically; emitters notice through ``generation`` and rebuild their cached instruments.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from .cardinality import AgentLabelLimiter
from .redaction import Redactor


class PayloadSink(Protocol):
    """Where debug payloads go. Implementations never block and never raise."""

    def record(self, request_id: str, kind: str, body: str,
               attributes: dict[str, str]) -> bool:
        """Queue one payload; return False when it was dropped."""
        ...

    def force_flush(self, timeout_s: float = 10.0) -> bool:
        """Deliver what is queued; return False if the timeout ran out."""
        ...

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Flush and release resources; later records are dropped."""
        ...


class NullPayloadSink:
    """Drops every payload: the state before ``configure`` and with capture off."""

    def record(self, request_id: str, kind: str, body: str,
               attributes: dict[str, str]) -> bool:
        return False

    def force_flush(self, timeout_s: float = 10.0) -> bool:
        return True

    def shutdown(self, timeout_s: float = 10.0) -> None:
        return None


@dataclass(frozen=True)
class TelemetryState:
    """Providers and helpers the hooks use; None providers mean the OTel global API."""

    tracer_provider: Any = None
    meter_provider: Any = None
    payload_sink: PayloadSink = field(default_factory=NullPayloadSink)
    limiter: AgentLabelLimiter = field(default_factory=AgentLabelLimiter)
    redactor: Redactor = field(default_factory=Redactor)
    generation: int = 0


_lock = threading.Lock()
_state = TelemetryState()


def current() -> TelemetryState:
    """The state hooks emit through right now."""
    return _state


def install(state: TelemetryState) -> TelemetryState:
    """Make ``state`` current (with a fresh generation) and return the previous one."""
    global _state
    with _lock:
        previous = _state
        _state = TelemetryState(
            tracer_provider=state.tracer_provider,
            meter_provider=state.meter_provider,
            payload_sink=state.payload_sink,
            limiter=state.limiter,
            redactor=state.redactor,
            generation=previous.generation + 1,
        )
        return previous
