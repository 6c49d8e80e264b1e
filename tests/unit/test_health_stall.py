"""``/healthz`` of a consumer that keeps polling but cannot commit (dead letters failing).

Over real HTTP on 127.0.0.1, with a stand-in for the consumer (the attributes the server
reads) and a hand-driven clock, as in test_health_server.py.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from guardtrace.consumers.config import ConsumerStats
from guardtrace.consumers.health import HealthServer, Stall
from guardtrace.transport.broker import free_port

REASON = ("dead letters to guardtrace-dead-letters are not acknowledged, so no offset is "
          "committed: dead letter of guardtrace-spans[0]@25 not acknowledged: "
          "KafkaConnectionError: refused")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class StandIn:
    last_poll_monotonic: float | None = None
    stats: ConsumerStats = field(default_factory=ConsumerStats)
    stall: Stall | None = None


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def consumer(clock: FakeClock) -> StandIn:
    return StandIn(last_poll_monotonic=clock.now)


@pytest.fixture
def server(consumer: StandIn, clock: FakeClock) -> Iterator[HealthServer]:
    instance = HealthServer(consumer, port=free_port(), host="127.0.0.1", stale_after_s=60,
                            clock=clock).start()
    yield instance
    instance.stop()


def get(server: HealthServer, path: str) -> tuple[int, dict[str, Any]]:
    url = f"http://127.0.0.1:{server.port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def test_a_polling_consumer_whose_dead_letters_fail_is_unhealthy_and_says_why(
        server: HealthServer, consumer: StandIn, clock: FakeClock) -> None:
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
    consumer.stall = Stall(REASON, since_monotonic=clock.now)
    assert get(server, "/healthz")[0] == 503
    consumer.stall = None
    code, body = get(server, "/healthz")
    assert code == 200
    assert body["status"] == "ok" and body["stalled"] is None


def test_a_stale_loop_is_reported_stale_even_when_stalled(
        server: HealthServer, consumer: StandIn, clock: FakeClock) -> None:
    consumer.stall = Stall(REASON, since_monotonic=clock.now)
    clock.now += 61
    code, body = get(server, "/healthz")
    assert code == 503
    assert body["status"] == "stale"
    assert body["stalled"]["reason"] == REASON
