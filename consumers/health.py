"""Liveness, readiness and metrics over HTTP for ``guardtrace consume`` (probes, Prometheus).

``GET /healthz`` answers 200 while the consumer loop keeps polling Kafka and 503 once it
has not polled for ``stale_after_s`` seconds (a hung loop: restarting the process is the
cure). ``GET /readyz`` answers 200 once the first poll has finished. Both return a small
JSON body with the consumer's counters, so ``curl``-ing a pod also shows what it did.

``/healthz`` also answers 503 while the consumer reports a :class:`Stall`: it keeps
polling, but cannot commit, because its dead letters are not acknowledged. Polling alone
would look healthy while every partition stood still; the body says why it is stuck
(``"status": "stalled"`` and ``stalled.reason``). A probe's own failure threshold is the
grace period, so one failed send that the next retry fixes does not restart anything.

``GET /metrics`` serves the consumer's :class:`~.metrics.ConsumerMetrics` in the Prometheus
text format (OpenMetrics when the scraper asks for it), for Prometheus to scrape.

The server runs on a daemon thread of the consumer process and only reads attributes
of the consumer (``last_poll_monotonic``, ``stats``, ``stall``, ``metrics``); it never
calls into Kafka or ClickHouse, so a probe or a scrape cannot slow the loop down or fail
because ClickHouse is down. (A ClickHouse outage is not a liveness failure: the loop
keeps polling while it backs off, and a restart would not bring ClickHouse back.)
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from .metrics import ConsumerMetrics

__all__ = ["DEFAULT_STALE_AFTER_S", "PATHS", "HealthServer", "Observed", "Stall"]

logger = logging.getLogger("guardtrace.consumers")

# The loop polls at least every 0.5 s; a flush polls while it backs off. Two minutes
# without a poll means the loop is stuck (a hung insert, a deadlock), not merely busy.
DEFAULT_STALE_AFTER_S = 120.0
# What the server answers; anything else is a 404 that lists these.
PATHS = ("/healthz", "/readyz", "/metrics")


@dataclass(frozen=True)
class Stall:
    """Why a consumer that keeps polling cannot move on, and since when.

    Attributes:
        reason: What fails, for people (served as ``stalled.reason``).
        since_monotonic: When it first failed (``time.monotonic()``).
    """

    reason: str
    since_monotonic: float


class Observed(Protocol):
    """What the health server reads from the consumer (a TelemetryConsumer fits).

    Optional attributes are read too when present: ``stall`` (:class:`Stall` or None) and
    ``metrics`` (:class:`~.metrics.ConsumerMetrics`, served at ``/metrics``).
    """

    last_poll_monotonic: float | None
    stats: Any  # has ``as_dict()``


class HealthServer:
    """Serve ``/healthz``, ``/readyz`` and ``/metrics`` for one consumer on a daemon thread.

    Args:
        observed: The consumer (anything with ``last_poll_monotonic`` and ``stats``).
        port: TCP port; 0 binds a free one (see :attr:`port`).
        host: Address to bind; all interfaces by default, so kubelet and Docker can reach it.
        stale_after_s: Seconds without a poll after which ``/healthz`` answers 503. Before
            the first poll the same allowance counts from :meth:`start`.
        clock: Monotonic clock, replaceable in tests.
    """

    def __init__(self, observed: Observed, port: int, host: str = "0.0.0.0",
                 stale_after_s: float = DEFAULT_STALE_AFTER_S,
                 clock: Any = time.monotonic) -> None:
        self._observed = observed
        self._stale_after_s = stale_after_s
        self._clock = clock
        self._started = clock()
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (useful when constructed with port 0)."""
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        """Start serving on a daemon thread; return self."""
        self._started = self._clock()
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="guardtrace-health", daemon=True)
        self._thread.start()
        logger.info("health endpoints on port %d: %s", self.port, ", ".join(PATHS))
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    # -- the two answers ------------------------------------------------------------------
    def liveness(self) -> tuple[int, dict[str, Any]]:
        """HTTP status and body of ``/healthz``."""
        last = self._observed.last_poll_monotonic
        since = self._clock() - (self._started if last is None else last)
        alive = since <= self._stale_after_s
        stall = self._stall()
        if not alive:
            status = "stale"
        elif stall is not None:
            status = "stalled"
        else:
            status = "ok" if last is not None else "starting"
        healthy = alive and stall is None
        return (200 if healthy else 503), self._body(status, last, since, stall)

    def readiness(self) -> tuple[int, dict[str, Any]]:
        """HTTP status and body of ``/readyz``."""
        last = self._observed.last_poll_monotonic
        since = self._clock() - (self._started if last is None else last)
        ready = last is not None
        return (200 if ready else 503), self._body("ready" if ready else "starting", last, since,
                                                   self._stall())

    def metrics(self, accept: str | None = None) -> tuple[bytes, str] | None:
        """Body and content type of ``/metrics``; None when the consumer keeps no metrics.

        Args:
            accept: The scraper's ``Accept`` header (OpenMetrics if it asks for it).
        """
        metrics = getattr(self._observed, "metrics", None)
        if not isinstance(metrics, ConsumerMetrics):
            return None
        return metrics.exposition(accept)

    def _body(self, status: str, last: float | None, since: float,
              stall: Stall | None) -> dict[str, Any]:
        return {"status": status,
                "seconds_since_poll": None if last is None else round(since, 3),
                "stale_after_s": self._stale_after_s,
                "stalled": None if stall is None else {
                    "reason": stall.reason,
                    "seconds": round(self._clock() - stall.since_monotonic, 3)},
                "stats": self._stats()}

    def _stall(self) -> Stall | None:
        # One attribute read: the loop replaces the Stall, it never changes one.
        stall = getattr(self._observed, "stall", None)
        return stall if isinstance(stall, Stall) else None

    def _stats(self) -> dict[str, Any] | None:
        # The loop mutates the counters' dicts while we copy them; a copy that races a
        # new key raises RuntimeError. Try again rather than lock the hot loop.
        for _ in range(3):
            try:
                return dict(self._observed.stats.as_dict())
            except RuntimeError:
                continue
            except Exception:
                logger.debug("health: stats unavailable", exc_info=True)
                return None
        return None


def _handler_for(owner: HealthServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the name http.server dispatches GET to
            path = self.path.split("?", 1)[0]
            body: dict[str, Any]
            if path == "/metrics":
                exposed = owner.metrics(self.headers.get("Accept"))
                if exposed is not None:
                    self._send(200, *exposed)
                    return
                code, body = 404, {"status": "no metrics: this consumer keeps none"}
            elif path == "/healthz":
                code, body = owner.liveness()
            elif path == "/readyz":
                code, body = owner.readiness()
            else:
                code, body = 404, {"status": "not found", "paths": list(PATHS)}
            self._send(code, json.dumps(body, sort_keys=True).encode(), "application/json")

        def _send(self, code: int, payload: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            # Probes arrive every few seconds; the default handler would print each one
            # to stderr, drowning the consumer's own log.
            logger.debug("health: " + format, *args)

    return _Handler
