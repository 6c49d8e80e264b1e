"""Running a simulation: pacing, stopping, flushing, and the summary.

:func:`run_simulation` is the library entry point (``guardtrace simulate`` and
``guardtrace up --demo`` use it). It emits through whatever telemetry is current: the
configuration :func:`guardtrace.collectors.configure` installed, or the in-memory one of
:func:`guardtrace.collectors.testing.capture`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from opentelemetry import trace

from .. import __version__
from ..collectors import force_flush as collectors_force_flush
from ..collectors.emit import state as _state
from ..schemas import names
from .agent import SimulatedAgent
from .defaults import (
    DEFAULT_AGENTS,
    DEFAULT_MODULES,
    DEFAULT_RATE,
    DEFAULT_REQUESTS,
    DEFAULT_SEED,
)
from .fleet import Fleet
from .observe import EventCounter, count_payloads, drop_totals

__all__ = [
    "Pacer",
    "SimulationConfig",
    "SimulationSummary",
    "run_simulation",
]

# Stop reasons reported in the summary.
STOPPED_REQUESTS = "requests"
STOPPED_DURATION = "duration"
STOPPED_SIGNAL = "signal"
STOPPED_TELEMETRY = "telemetry_lost"

_FLUSH_TIMEOUT_S = 30.0
_PROGRESS_INTERVAL_S = 0.1
# A run that falls further behind its schedule than this restarts the schedule instead
# of bursting to catch up.
_MAX_LAG_S = 1.0


@dataclass(frozen=True)
class SimulationConfig:
    """What to simulate.

    Attributes:
        requests: Requests to send; 0 means no limit (stop by duration or signal).
        duration_s: Stop after this many seconds; None means no limit. With both
            limits, whichever comes first.
        rate: Requests per second; None means as fast as possible.
        seed: Seeds the traffic model: the same seed gives the same traffic.
        agents: Agents in the fleet.
        modules: Modules the agents are spread over (the ``module`` label).
        flush_every: Flush telemetry every this many requests. The span and payload
            queues drop when full (so agents never block); a generator must not drop.
        flush_queue_bytes: Also flush once this many payload bytes were queued since
            the last flush (keep it well below ``GUARDTRACE_PAYLOAD_QUEUE_BYTES``).
        run_id: Makes request ids unique per run (``sim-<run_id>-<n>``); random if None.

    Raises:
        ValueError: A value out of range.
    """

    requests: int = DEFAULT_REQUESTS
    duration_s: float | None = None
    rate: float | None = DEFAULT_RATE
    seed: int = DEFAULT_SEED
    agents: int = DEFAULT_AGENTS
    modules: int = DEFAULT_MODULES
    flush_every: int = 100
    flush_queue_bytes: int = 16 * 1024 * 1024
    run_id: str | None = None

    def __post_init__(self) -> None:
        if self.requests < 0:
            raise ValueError(f"requests must be 0 (no limit) or more, got {self.requests}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise ValueError(f"duration must be positive, got {self.duration_s}")
        if self.rate is not None and not self.rate > 0:
            raise ValueError(f"rate must be positive or None (unlimited), got {self.rate}")
        if self.agents < 1:
            raise ValueError(f"agents must be at least 1, got {self.agents}")
        if not 1 <= self.modules <= self.agents:
            raise ValueError(f"modules must be between 1 and the agent count "
                             f"({self.agents}), got {self.modules}")
        if self.flush_every < 1 or self.flush_queue_bytes < 1:
            raise ValueError("flush_every and flush_queue_bytes must be at least 1")


@dataclass(frozen=True)
class SimulationSummary:
    """What a simulation emitted.

    Attributes:
        requests: Requests simulated.
        events: Span events emitted, by event name (as the hooks emitted them).
        payloads: Debug payloads accepted by the payload sink (hooks' and agents').
        payload_bytes: Their total size in UTF-8 bytes (before redaction).
        outcomes: Requests by outcome (the :class:`~guardtrace.simulator.fleet.Scenario`
            values, as the hooks decided them).
        dropped: Telemetry dropped during the run, ``metric{reason}`` -> count (empty
            when nothing was lost).
        flushed: The final flush completed in time.
        seed: The traffic seed.
        duration_s: Wall time of the run.
        request_id_prefix: Every request id of the run starts with it.
        stopped_by: Why the run ended before its limits, or that it reached one:
            ``requests``, ``duration``, ``signal``, or ``telemetry_lost`` (a periodic
            flush failed or telemetry was dropped, so going on would only lose more).
    """

    requests: int
    events: dict[str, int]
    payloads: int
    payload_bytes: int
    outcomes: dict[str, int]
    dropped: dict[str, int]
    flushed: bool
    seed: int
    duration_s: float
    request_id_prefix: str
    stopped_by: str

    @property
    def ok(self) -> bool:
        """True when nothing was dropped and the final flush completed."""
        return self.flushed and not self.dropped

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready data."""
        return asdict(self)


class Pacer:
    """Spaces requests ``1/rate`` seconds apart on an injectable clock.

    Args:
        rate: Requests per second; None paces nothing.
        clock: Monotonic seconds.
        sleep: Waits up to the given seconds; may return early (a stop signal).
    """

    def __init__(self, rate: float | None, clock: Callable[[], float],
                 sleep: Callable[[float], Any]) -> None:
        self._interval = 1.0 / rate if rate else 0.0
        self._clock = clock
        self._sleep = sleep
        self._due: float | None = None

    def wait(self, stop: threading.Event, deadline: float | None = None) -> None:
        """Return when the next request is due, ``stop`` is set or ``deadline`` passed."""
        if not self._interval:
            return
        now = self._clock()
        if self._due is None or now - self._due > _MAX_LAG_S:
            self._due = now
        while not stop.is_set():
            now = self._clock()
            until = self._due if deadline is None else min(self._due, deadline)
            if now >= until:
                break
            self._sleep(until - now)
        self._due += self._interval


def _tracer_provider() -> Any:
    # The provider the hooks emit through (see collectors.telemetry._Instruments).
    return _state.current().tracer_provider or trace.get_tracer_provider()


def run_simulation(config: SimulationConfig, stop_event: threading.Event | None = None,
                   on_progress: Callable[[int, int | None], None] | None = None, *,
                   flush: Callable[[], bool] | None = None,
                   tracer_provider: Any = None,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], Any] | None = None) -> SimulationSummary:
    """Simulate a fleet of agents through the real guard hooks and summarise the run.

    A traffic generator for demos and tests; nothing in the hooks uses it.

    Args:
        config: What to simulate.
        stop_event: Set it (from a signal handler or another thread) to stop after the
            current request; the run still flushes and summarises.
        on_progress: Called with (requests done, request limit or None), at most ten
            times a second and once at the end.
        flush: Flushes telemetry, True when everything was delivered; by default the
            active configuration's ``force_flush`` (a no-op when nothing is configured).
            A flush that fails, or drops counted by guardtrace, stop the run.
        tracer_provider: An SDK ``TracerProvider``; by default the one the hooks emit
            through. An event counter is added to it.
        clock: Monotonic seconds (injectable for tests).
        sleep: Pacing sleep, may return early; by default ``stop_event.wait``.

    Returns:
        The summary, also when the run stopped early.

    Raises:
        ValueError: No SDK tracer provider to emit through (telemetry not configured,
            or ``GUARDTRACE_EXPORTER=none``).
    """
    stop = stop_event or threading.Event()
    provider = tracer_provider or _tracer_provider()
    if not hasattr(provider, "add_span_processor"):
        raise ValueError("no OpenTelemetry SDK tracer provider to emit through: call "
                         "guardtrace.collectors.configure() with the kafka or otlp exporter")
    flush = flush or (lambda: collectors_force_flush(_FLUSH_TIMEOUT_S))
    events = EventCounter()
    provider.add_span_processor(events)
    fleet = Fleet(config.seed, agents=config.agents, modules=config.modules)
    agent = SimulatedAgent(provider.get_tracer(names.INSTRUMENTATION_NAME + ".simulator",
                                               __version__))
    pacer = Pacer(config.rate, clock, sleep or stop.wait)
    prefix = f"sim-{config.run_id or uuid.uuid4().hex[:12]}-"
    drops_before = drop_totals()
    outcomes: Counter[str] = Counter()
    started = clock()
    deadline = None if config.duration_s is None else started + config.duration_s
    done, last_progress, stopped_by, flushed = 0, started, "", True

    def stop_reason() -> str:
        if stop.is_set():
            return STOPPED_SIGNAL
        if config.requests and done >= config.requests:
            return STOPPED_REQUESTS
        if deadline is not None and clock() >= deadline:
            return STOPPED_DURATION
        return ""

    def lost() -> bool:
        return bool(_delta(drop_totals(), drops_before))

    try:
        with count_payloads() as payloads:
            while not (stopped_by := stop_reason()):
                pacer.wait(stop, deadline)
                if stopped_by := stop_reason():
                    break
                outcomes[agent.run(fleet.next_request(), f"{prefix}{done}")] += 1
                done += 1
                if done % config.flush_every == 0 \
                        or payloads.queued_bytes >= config.flush_queue_bytes:
                    flushed = flush()
                    payloads.reset_queued()
                    if not flushed or lost():
                        stopped_by = STOPPED_TELEMETRY
                        break
                if on_progress and clock() - last_progress >= _PROGRESS_INTERVAL_S:
                    last_progress = clock()
                    on_progress(done, config.requests or None)
            if flushed:
                flushed = flush()
    finally:
        events.close()
    if on_progress:
        on_progress(done, config.requests or None)
    return SimulationSummary(
        requests=done, events=events.counts(), payloads=payloads.payloads,
        payload_bytes=payloads.payload_bytes, outcomes=dict(sorted(outcomes.items())),
        dropped=_delta(drop_totals(), drops_before), flushed=flushed, seed=config.seed,
        duration_s=round(clock() - started, 3), request_id_prefix=prefix,
        stopped_by=stopped_by)


def _delta(now: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {key: value - before.get(key, 0) for key, value in sorted(now.items())
            if value - before.get(key, 0)}
