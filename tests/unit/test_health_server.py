"""The consumer's health endpoints, over real HTTP on 127.0.0.1.

The server is given a stand-in with the attributes it reads from a TelemetryConsumer
(``last_poll_monotonic``, ``stats`` and ``stall``) and a hand-driven clock, so "the loop
stopped polling two minutes ago" needs no waiting.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from guardtrace.consumers.config import ConsumerStats
from guardtrace.consumers.health import HealthServer, Stall
from guardtrace.transport.broker import free_port
from tests.support.health_http import get_json


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class StandIn:
    """What HealthServer reads from a consumer, and nothing else."""

    last_poll_monotonic: float | None = None
    stats: ConsumerStats = field(default_factory=ConsumerStats)
    stall: Stall | None = None


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def consumer() -> StandIn:
    return StandIn()


@pytest.fixture
def server(consumer: StandIn, clock: FakeClock) -> Iterator[HealthServer]:
    instance = HealthServer(consumer, port=free_port(), host="127.0.0.1", stale_after_s=60,
                            clock=clock).start()
    yield instance
    instance.stop()


def get(server: HealthServer, path: str) -> tuple[int, dict[str, Any]]:
    return get_json(server.port, path)


def test_before_the_first_poll_it_is_alive_but_not_ready(server: HealthServer) -> None:
    assert get(server, "/healthz")[0] == 200
    code, body = get(server, "/readyz")
    assert code == 503
    assert body["status"] == "starting"
    assert body["seconds_since_poll"] is None


def test_ready_and_alive_once_the_loop_has_polled(server: HealthServer, consumer: StandIn,
                                                  clock: FakeClock) -> None:
    consumer.last_poll_monotonic = clock.now
    clock.now += 5
    assert get(server, "/readyz")[0] == 200
    code, body = get(server, "/healthz")
    assert code == 200
    assert body["status"] == "ok"
    assert body["seconds_since_poll"] == pytest.approx(5.0)


def test_a_loop_that_stopped_polling_is_reported_stale(server: HealthServer, consumer: StandIn,
                                                       clock: FakeClock) -> None:
    consumer.last_poll_monotonic = clock.now
    clock.now += 61
    code, body = get(server, "/healthz")
    assert code == 503
    assert body["status"] == "stale"
    # Readiness stays: it says the consumer started, liveness says it still runs.
    assert get(server, "/readyz")[0] == 200
    consumer.last_poll_monotonic = clock.now  # the loop came back
    assert get(server, "/healthz")[0] == 200


def test_a_consumer_that_never_polls_goes_stale_after_the_allowance(
        server: HealthServer, clock: FakeClock) -> None:
    clock.now += 61
    assert get(server, "/healthz")[0] == 503


def test_body_carries_the_consumer_counters(server: HealthServer, consumer: StandIn,
                                            clock: FakeClock) -> None:
    consumer.last_poll_monotonic = clock.now
    consumer.stats.records = 42
    consumer.stats.rows_written["span_events"] = 40
    consumer.stats.dead_letters = 2
    _, body = get(server, "/healthz")
    assert body["stats"]["records"] == 42
    assert body["stats"]["rows_written"] == {"span_events": 40}
    assert body["stats"]["dead_letters"] == 2


def test_unknown_paths_are_404_and_query_strings_are_ignored(server: HealthServer,
                                                             consumer: StandIn,
                                                             clock: FakeClock) -> None:
    consumer.last_poll_monotonic = clock.now
    assert get(server, "/metrics")[0] == 404
    assert get(server, "/healthz?verbose=1")[0] == 200


def test_stop_releases_the_port(consumer: StandIn) -> None:
    port = free_port()
    HealthServer(consumer, port=port, host="127.0.0.1").start().stop()
    again = HealthServer(consumer, port=port, host="127.0.0.1").start()
    try:
        assert again.port == port
    finally:
        again.stop()


# --- a consumer that keeps polling but cannot commit (dead letters failing) -------------
REASON = ("dead letters to guardtrace-dead-letters are not acknowledged, so no offset is "
          "committed: dead letter of guardtrace-spans[0]@25 not acknowledged: "
          "KafkaConnectionError: refused")


def test_a_polling_consumer_whose_dead_letters_fail_is_unhealthy_and_says_why(
        server: HealthServer, consumer: StandIn, clock: FakeClock) -> None:
    consumer.last_poll_monotonic = clock.now  # a consumer that polls
    consumer.stall = Stall(REASON, since_monotonic=clock.now)
    clock.now += 42
    consumer.last_poll_monotonic = clock.now  # it keeps polling all the while
    code, body = get(server, "/healthz")
    assert code == 503
    assert body["status"] == "stalled"
    assert body["stalled"] == {"reason": REASON, "seconds": pytest.approx(42.0)}
    # Readiness says it started, and shows the same reason.
    code, body = get(server, "/readyz")
    assert code == 200 and body["stalled"]["reason"] == REASON


def test_health_is_green_again_once_the_stall_ends(server: HealthServer, consumer: StandIn,
                                                   clock: FakeClock) -> None:
    consumer.last_poll_monotonic = clock.now  # a consumer that polls
    consumer.stall = Stall(REASON, since_monotonic=clock.now)
    assert get(server, "/healthz")[0] == 503
    consumer.stall = None
    code, body = get(server, "/healthz")
    assert code == 200
    assert body["status"] == "ok" and body["stalled"] is None


def test_a_stale_loop_is_reported_stale_even_when_stalled(
        server: HealthServer, consumer: StandIn, clock: FakeClock) -> None:
    consumer.last_poll_monotonic = clock.now  # a consumer that polls
    consumer.stall = Stall(REASON, since_monotonic=clock.now)
    clock.now += 61
    code, body = get(server, "/healthz")
    assert code == 503
    assert body["status"] == "stale"
    assert body["stalled"]["reason"] == REASON
