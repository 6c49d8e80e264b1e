"""The consumer's Prometheus metrics: what each report does to the scrape, and /metrics.

Every check reads the metrics the way Prometheus does: the exposition text, parsed by
prometheus-client's own text-format parser. The consumer is not needed: the module's
methods are what the loop calls, and partition_lag gets a stand-in with the few
kafka-python calls it makes.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from guardtrace.consumers import metrics as m
from guardtrace.consumers.config import ConsumerStats
from guardtrace.consumers.dead_letters import DeadLetterNotDelivered
from guardtrace.consumers.health import HealthServer
from guardtrace.consumers.metrics import ConsumerMetrics, partition_lag
from guardtrace.transport.broker import free_port

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def samples(metrics: ConsumerMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a scrape: (sample name, labels) -> value."""
    body, content_type = metrics.exposition()
    assert content_type.startswith("text/plain; version=0.0.4")
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples}


def value(metrics: ConsumerMetrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, frozenset(labels.items())))


def test_a_first_scrape_has_every_metric_and_the_series_queries_expect_at_zero() -> None:
    metrics = ConsumerMetrics()
    metrics.topics(["otlp_spans", "otlp_metrics"])
    scraped = samples(metrics)
    names = {name for name, _ in scraped}
    for name in (m.RECORDS_CONSUMED, m.RECORDS_DROPPED, m.WRITE_RETRIES, m.WRITE_FAILURES,
                 m.LAST_COMMIT, m.BATCH_WRITE_SECONDS + "_count"):
        assert name in names, name
    assert scraped[(m.RECORDS_CONSUMED, frozenset({("topic", "otlp_spans")}))] == 0
    assert scraped[(m.WRITE_FAILURES, frozenset({("cause", "store")}))] == 0
    assert scraped[(m.RECORDS_DROPPED, frozenset({("reason", m.DROP_REVOKED)}))] == 0
    assert scraped[(m.LAST_COMMIT, frozenset())] == 0


def test_each_consumer_counts_in_a_registry_of_its_own() -> None:
    first, second = ConsumerMetrics(), ConsumerMetrics()
    first.consumed("otlp_spans", 5)
    second.consumed("otlp_spans", 2)
    assert value(first, m.RECORDS_CONSUMED, topic="otlp_spans") == 5
    assert value(second, m.RECORDS_CONSUMED, topic="otlp_spans") == 2
    # Nothing lands in prometheus-client's process-wide default registry.
    assert REGISTRY.get_sample_value(m.RECORDS_CONSUMED, {"topic": "otlp_spans"}) is None


def test_reports_move_their_counters() -> None:
    metrics = ConsumerMetrics(clock=lambda: 1_800_000_000.5)
    metrics.consumed("otlp_spans", 3)
    metrics.consumed("otlp_spans", 4)
    metrics.consumed("otlp_spans", 0)
    metrics.rows_written({"spans": 10, "span_events": 40})
    metrics.rows_written({"spans": 1})
    metrics.dead_letter("oversize record")
    metrics.dead_letter("oversize record")
    metrics.dropped(m.DROP_REVOKED, 7)
    metrics.dropped(m.DROP_ABANDONED, 2)
    metrics.write_retry()
    metrics.committed()
    assert value(metrics, m.RECORDS_CONSUMED, topic="otlp_spans") == 7
    assert value(metrics, m.ROWS_WRITTEN, table="spans") == 11
    assert value(metrics, m.ROWS_WRITTEN, table="span_events") == 40
    assert value(metrics, m.DEAD_LETTERS, reason_kind="oversize record") == 2
    assert value(metrics, m.RECORDS_DROPPED, reason=m.DROP_REVOKED) == 7
    assert value(metrics, m.RECORDS_DROPPED, reason=m.DROP_ABANDONED) == 2
    assert value(metrics, m.WRITE_RETRIES) == 1
    assert value(metrics, m.LAST_COMMIT) == 1_800_000_000.5


def test_dead_letter_reason_kinds_are_capped() -> None:
    metrics = ConsumerMetrics()
    for i in range(m.MAX_REASON_KINDS + 5):
        metrics.dead_letter(f"payload declares {i} bytes uncompressed")
    metrics.dead_letter("payload declares 0 bytes uncompressed")  # a kind already seen
    scraped = samples(metrics)
    kinds = {dict(labels)["reason_kind"]: count for (name, labels), count in scraped.items()
             if name == m.DEAD_LETTERS}
    assert len(kinds) == m.MAX_REASON_KINDS + 1
    assert kinds[m.OTHER_REASON_KIND] == 5
    assert kinds["payload declares 0 bytes uncompressed"] == 2
    assert sum(kinds.values()) == m.MAX_REASON_KINDS + 6


def test_a_successful_write_is_timed_and_a_failed_one_counted_by_cause() -> None:
    metrics = ConsumerMetrics()
    with metrics.timed_write():
        pass
    with pytest.raises(ConnectionError), metrics.timed_write():
        raise ConnectionError("ClickHouse unavailable")
    with pytest.raises(DeadLetterNotDelivered), metrics.timed_write():
        raise DeadLetterNotDelivered("not acknowledged")
    assert value(metrics, m.BATCH_WRITE_SECONDS + "_count") == 1
    assert value(metrics, m.BATCH_WRITE_SECONDS + "_bucket", le="+Inf") == 1
    assert value(metrics, m.WRITE_FAILURES, cause="store") == 1
    assert value(metrics, m.WRITE_FAILURES, cause="dead_letters") == 1


def test_lag_of_a_revoked_partition_is_removed_not_left_at_its_last_value() -> None:
    metrics = ConsumerMetrics()
    a, b = TopicPartition("otlp_spans", 0), TopicPartition("otlp_spans", 1)
    metrics.set_lag({a: 5, b: 9})
    assert value(metrics, m.LAG_RECORDS, topic="otlp_spans", partition="1") == 9
    metrics.set_lag({a: 0})
    assert value(metrics, m.LAG_RECORDS, topic="otlp_spans", partition="0") == 0
    assert value(metrics, m.LAG_RECORDS, topic="otlp_spans", partition="1") is None


def test_openmetrics_is_served_when_the_scraper_asks_for_it() -> None:
    metrics = ConsumerMetrics()
    metrics.consumed("otlp_spans", 1)
    body, content_type = metrics.exposition("application/openmetrics-text;version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")
    assert b'guardtrace_consumer_records_consumed_total{topic="otlp_spans"} 1.0' in body


@dataclass
class LagStandIn:
    """The kafka-python calls partition_lag makes, answering from dictionaries."""

    listed: dict[TopicPartition, int]
    highwaters: dict[TopicPartition, int | None]
    positions: dict[TopicPartition, int | None]
    timeouts: list[int | None] = field(default_factory=list)

    def assignment(self) -> set[TopicPartition]:
        return set(self.positions)

    def end_offsets(self, partitions: list[TopicPartition],
                    timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        self.timeouts.append(timeout_ms)
        return {tp: self.listed[tp] for tp in partitions}

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.highwaters[tp]

    def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int | None:
        self.timeouts.append(timeout_ms)
        return self.positions[tp]


def test_partition_lag_takes_the_true_log_end_and_leaves_out_unknown_positions() -> None:
    a, b, c = (TopicPartition("otlp_spans", i) for i in range(3))
    consumer = LagStandIn(
        # Tansu lists the last batch's base offset + 1 (a): the fetched high watermark wins.
        listed={a: 11, b: 40, c: 7}, highwaters={a: 20, b: None, c: 7},
        positions={a: 15, b: 45, c: None})
    assert partition_lag(consumer) == {a: 5, b: 0}
    # Every broker read is bounded: the loop's thread makes them.
    assert consumer.timeouts and all(t is not None and t <= 5_000 for t in consumer.timeouts)


def test_partition_lag_of_no_assignment_asks_the_broker_nothing() -> None:
    consumer = LagStandIn(listed={}, highwaters={}, positions={})
    assert partition_lag(consumer) == {}
    assert consumer.timeouts == []


# -- /metrics over real HTTP ---------------------------------------------------------------
@dataclass
class Observed:
    last_poll_monotonic: float | None = None
    stats: ConsumerStats = field(default_factory=ConsumerStats)
    metrics: Any = None


@pytest.fixture
def observed() -> Observed:
    return Observed(metrics=ConsumerMetrics())


@pytest.fixture
def server(observed: Observed) -> Iterator[HealthServer]:
    instance = HealthServer(observed, port=free_port(), host="127.0.0.1").start()
    yield instance
    instance.stop()


def http_get(port: int, path: str, accept: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers["Content-Type"], error.read().decode()


def test_metrics_are_served_beside_the_health_endpoints(server: HealthServer,
                                                        observed: Observed) -> None:
    observed.metrics.rows_written({"span_events": 12})
    code, content_type, text = http_get(server.port, "/metrics")
    assert code == 200 and content_type.startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    (sample,) = families["guardtrace_consumer_rows_written"].samples
    assert (sample.name, sample.labels, sample.value) == (m.ROWS_WRITTEN,
                                                         {"table": "span_events"}, 12)
    # Prometheus asks for OpenMetrics first; it gets it.
    code, content_type, text = http_get(server.port, "/metrics?x=1",
                                        "application/openmetrics-text;version=1.0.0,*/*;q=0.1")
    assert code == 200 and content_type.startswith("application/openmetrics-text")
    assert text.endswith("# EOF\n")
    code, _, text = http_get(server.port, "/nope")
    assert code == 404 and "/metrics" in text


def test_a_consumer_without_metrics_answers_404_with_a_reason(server: HealthServer,
                                                              observed: Observed) -> None:
    observed.metrics = None
    code, content_type, text = http_get(server.port, "/metrics")
    assert code == 404 and content_type == "application/json"
    assert "no metrics" in text
    assert http_get(server.port, "/healthz")[0] in (200, 503)  # the rest still answers


def test_the_readme_names_every_metric() -> None:
    section = README.split("## Prometheus and Grafana", 1)[1].split("\n## ", 1)[0]
    for name in m.METRIC_NAMES:
        assert f"`{name}`" in section, name
