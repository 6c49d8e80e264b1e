"""Alerts against the real store: the metrics rules read, the alert_events table, and
``guardtrace alerts test`` over simulated traffic that went through Kafka and a consumer.

Each metric is checked against the store queried independently here, so an alert and
the numbers behind it agree with what is stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from guardtrace import collectors
from guardtrace.alerts import StoreMetricSource
from guardtrace.alerts.judge import window_start
from guardtrace.cli.main import main
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas import names
from guardtrace.simulator import SimulationConfig, run_simulation
from guardtrace.store import tables
from guardtrace.store.alert_events import AlertEvent, AlertEventWriter
from guardtrace.store.alert_queries import (
    alert_history,
    collector_drops_between,
    latest_alert_states,
)
from guardtrace.transport.broker import EmbeddedBroker
from tests.support.services import Pipeline, new_pipeline

pytestmark = [pytest.mark.timeout(240)]

POISON = [b"\x00\xffnot protobuf", b"garbage"]


@dataclass
class Seeded:
    pipeline: Pipeline
    chdb_dir: Path
    start: datetime  # before anything was sent

    def count(self, sql: str, **params: Any) -> int:
        return int(self.pipeline.scalar(sql, **params))

    def events(self, name: str, module: str | None = None) -> int:
        return self.count("SELECT count() FROM {db}.span_events FINAL WHERE name = {n:String} "
                          "AND ({m:String} = '' OR module = {m:String})", n=name, m=module or "")


@pytest.fixture(scope="module")
def seeded(broker: EmbeddedBroker, ch_client: Any, chdb_dir: Path) -> Iterator[Seeded]:
    pipeline = new_pipeline(broker, ch_client)
    start = window_start(datetime.now(UTC), 60)
    collectors.shutdown()
    collectors.configure(set_global=False, **pipeline.collector_settings())
    try:
        summary = run_simulation(SimulationConfig(requests=30, rate=None, seed=5))
    finally:
        collectors.shutdown()
    assert summary.ok, summary
    producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap)
    for value in POISON:
        producer.send(pipeline.consumer_config.spans_topic, key=b"poison", value=value)
    producer.flush()
    producer.close()
    assert pipeline.consume_until_idle(idle_s=1.0).dead_letters == len(POISON)
    yield Seeded(pipeline, chdb_dir, start)


def test_rates_read_what_the_store_holds(seeded: Seeded) -> None:
    source = StoreMetricSource(seeded.pipeline.client, seeded.pipeline.database)
    end = datetime.now(UTC) + timedelta(seconds=1)
    requests = seeded.count("SELECT uniqExact(request_id) FROM {db}.requests")
    fabrications = seeded.events(names.EVENT_FABRICATION_DETECTED)
    assert requests and fabrications, "the seed must exercise fabrications"
    fab = source.measure("fabrication_rate", seeded.start, end, None)
    assert (fab.value, fab.volume) == (pytest.approx(fabrications / requests), requests)
    assert fab.detail == f"{fabrications} fabrications / {requests} requests"

    recovered = seeded.events(names.EVENT_HALLUCINATION_RECOVERED)
    unrecoverable = seeded.events(names.EVENT_HALLUCINATION_UNRECOVERABLE)
    recovery = source.measure("recovery_rate", seeded.start, end, None)
    assert (recovery.value, recovery.volume) == (
        pytest.approx(recovered / (recovered + unrecoverable)), recovered + unrecoverable)
    lost = source.measure("unrecoverable_rate", seeded.start, end, None)
    assert lost.value == pytest.approx(unrecoverable / requests)

    required = seeded.events(names.EVENT_VERIFICATION_REQUIRED)
    bypassed = source.measure("verification_bypass_rate", seeded.start, end, None)
    assert bypassed.volume == required
    assert bypassed.value == pytest.approx(
        seeded.events(names.EVENT_VERIFICATION_BYPASSED) / required)

    # One module: its own events over the requests that touched it.
    module = str(seeded.pipeline.scalar(
        "SELECT module FROM {db}.span_events FINAL WHERE name = {n:String} "
        "GROUP BY module ORDER BY count() DESC LIMIT 1", n=names.EVENT_FABRICATION_DETECTED))
    in_module = seeded.count("SELECT uniqExact(request_id) FROM {db}.requests "
                             "WHERE has(modules, {m:String})", m=module)
    one = source.measure("fabrication_rate", seeded.start, end, module)
    assert (one.value, one.volume) == (
        pytest.approx(seeded.events(names.EVENT_FABRICATION_DETECTED, module) / in_module),
        in_module)
    assert module in source.modules(seeded.start)

    # Before the traffic, nothing: a rate of nothing is undefined, not 0.
    before = source.measure("fabrication_rate", seeded.start - timedelta(hours=1),
                            seeded.start, None)
    assert (before.value, before.volume) == (None, 0)


def test_dead_letters_are_counted_in_their_window(seeded: Seeded) -> None:
    source = StoreMetricSource(seeded.pipeline.client, seeded.pipeline.database)
    now = datetime.now(UTC) + timedelta(seconds=1)
    assert source.measure("dead_letters", seeded.start, now, None).value == len(POISON)
    assert source.measure("dead_letters", seeded.start - timedelta(hours=2),
                          seeded.start - timedelta(hours=1), None).value == 0


def test_collector_drops_rise_within_the_window_per_series_and_run(pipeline: Pipeline) -> None:
    now = datetime.now(UTC)
    run_1, run_2 = now - timedelta(hours=1), now - timedelta(minutes=2)

    def point(metric: str, started: datetime, minutes_ago: float, value: float,
              temporality: str = "cumulative", service: str = "agent-a") -> list[Any]:
        at = now - timedelta(minutes=minutes_ago)
        return [f"{metric}-{service}-{started:%H%M%S}-{minutes_ago}", metric, "sum", "1",
                service, "", "", started, at, value, 0, 0.0, [], [], 1, temporality,
                {"reason": "queue_full"}, {"service.name": service}]

    rows = [
        # Cumulative: 5 before the window, 12 inside it: 7 in the window ...
        point(names.METRIC_EXPORT_DROPPED, run_1, 20, 5),
        point(names.METRIC_EXPORT_DROPPED, run_1, 3, 12),
        # ... and the process restarted (a new start time): its 4 count whole.
        point(names.METRIC_EXPORT_DROPPED, run_2, 1, 4),
        # Delta points: those inside the window, summed.
        point(names.METRIC_PAYLOADS_DROPPED, run_1, 30, 10, "delta", "agent-b"),
        point(names.METRIC_PAYLOADS_DROPPED, run_1, 4, 2, "delta", "agent-b"),
        point(names.METRIC_PAYLOADS_DROPPED, run_1, 2, 3, "delta", "agent-b"),
        # Nothing new inside the window.
        point(names.METRIC_HOOK_ERRORS, run_1, 30, 9),
    ]
    pipeline.client.insert(f"{pipeline.database}.{tables.METRIC_POINTS}", rows,
                           column_names=list(tables.Columns.METRIC_POINTS))
    metrics = (names.METRIC_EXPORT_DROPPED, names.METRIC_PAYLOADS_DROPPED,
               names.METRIC_HOOK_ERRORS)
    start, end = now - timedelta(minutes=10), now + timedelta(seconds=1)
    assert collector_drops_between(pipeline.client, pipeline.database, metrics, start, end) \
        == {names.METRIC_EXPORT_DROPPED: 11, names.METRIC_PAYLOADS_DROPPED: 5,
            names.METRIC_HOOK_ERRORS: 0}
    drops = StoreMetricSource(pipeline.client, pipeline.database).measure(
        "collector_drops", start, end, None)
    assert drops.value == 16
    assert drops.detail == "16 dropped (export_dropped 11, payloads_dropped 5)"


def test_alert_events_round_trip_latest_state_and_replayed_writes(pipeline: Pipeline) -> None:
    described = [row[0] for row in pipeline.rows(f"DESCRIBE TABLE {{db}}.{tables.ALERT_EVENTS}")]
    assert [c for c in described if c != "inserted_at"] == list(tables.Columns.ALERT_EVENTS)

    # Recent: rows older than the table's TTL would be dropped on insert.
    t0 = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)
    replies, planning = {"module": "replies"}, {"module": "planning"}

    def event(seconds: int, labels: dict[str, str], state: str, previous: str) -> AlertEvent:
        return AlertEvent(t0 + timedelta(seconds=seconds), "fab", labels, state, previous,
                          "fabrication_rate", "fabrication_rate over 5m above 0.1",
                          0.4 if state != "resolved" else None, 0.1, 50, t0,
                          f"[{state.upper()}] fab")

    history = [event(0, replies, "pending", "inactive"), event(60, replies, "firing", "pending"),
               event(0, planning, "pending", "inactive"),
               event(120, replies, "resolved", "firing")]
    writer = AlertEventWriter(pipeline.client, pipeline.database)
    writer.write(history)
    writer.write(history[1:2])  # a retried insert: the same row, by its id
    shown = alert_history(pipeline.client, pipeline.database, t0, t0 + timedelta(hours=1))
    seen = [(e.timestamp, e.labels["module"], e.state) for e in shown]
    assert seen[:2] == [(t0 + timedelta(seconds=120), "replies", "resolved"),
                        (t0 + timedelta(seconds=60), "replies", "firing")]
    assert sorted(seen[2:]) == [(t0, "planning", "pending"), (t0, "replies", "pending")]
    assert shown[0].value is None and shown[1].value == 0.4 and shown[1].volume == 50
    assert shown[1] == history[1]
    latest = {e.labels["module"]: e.state
              for e in latest_alert_states(pipeline.client, pipeline.database)}
    assert latest == {"replies": "resolved", "planning": "pending"}
    assert alert_history(pipeline.client, pipeline.database, t0, t0 + timedelta(hours=1),
                         rule="other") == []


RULES = """
[[rule]]
name = "fabrications"
metric = "fabrication_rate"
above = 0.0001
window = "1h"
min_volume = 5
for = "5m"

[[rule]]
name = "recovery"
metric = "recovery_rate"
below = 0.0001
window = "1h"
min_volume = 1

[[rule]]
name = "too-few"
metric = "fabrication_rate"
above = 0.0001
window = "1h"
min_volume = 100000

[[rule]]
name = "lag"
metric = "consumer_lag"
above = 1000
"""


def test_alerts_test_prints_what_would_fire(seeded: Seeded, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    config = seeded.pipeline.consumer_config
    monkeypatch.setenv(env.CONSUMER_GROUP.name, config.group_id)
    for var, topic in ((env.SPANS_TOPIC, config.spans_topic),
                       (env.METRICS_TOPIC, config.metrics_topic),
                       (env.PAYLOADS_TOPIC, config.payloads_topic),
                       (env.LOGS_TOPIC, config.logs_topic)):
        monkeypatch.setenv(var.name, topic)
    store_args = ["--clickhouse-url", f"chdb://{seeded.chdb_dir}", "--database",
                  seeded.pipeline.database, "--bootstrap", seeded.pipeline.bootstrap]
    assert main(["alerts", "test", str(rules), *store_args]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"4 rule(s) from {rules}, evaluated once at ")
    # "VERDICT     rule labels: metric is value; condition; note", the verdict padded to 10.
    by_rule = {line[12:].split(":")[0].split()[0]: line for line in out[1:]}
    assert by_rule["fabrications"].startswith("WOULD FIRE")
    assert by_rule["fabrications"].endswith("fires once it holds for 5m")
    assert by_rule["recovery"].startswith("ok")
    assert by_rule["too-few"].startswith("NO VERDICT")
    assert "below the min volume of 100000" in by_rule["too-few"]
    assert by_rule["lag"].startswith("ok") and "consumer_lag is 0;" in by_rule["lag"]

    assert main(["alerts", "test", str(rules), *store_args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    fab = next(r for r in report["results"] if r["rule"] == "fabrications")
    requests = seeded.count("SELECT uniqExact(request_id) FROM {db}.requests")
    assert (fab["verdict"], fab["volume"], fab["threshold"]) == ("WOULD FIRE", requests, 0.0001)
    # Nothing was recorded: a test run is a dry run.
    assert latest_alert_states(seeded.pipeline.client, seeded.pipeline.database) == []

    rules.write_text(RULES.replace('metric = "recovery_rate"', 'metric = "recovery_rat"'))
    assert main(["alerts", "test", str(rules), *store_args]) == 1
    err = capsys.readouterr().err
    assert f"guardtrace alerts: error: alert rules {rules}: rule 'recovery' (#2), " \
           "field 'metric': must be one of" in err

