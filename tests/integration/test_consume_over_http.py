"""The consumer against ClickHouse over HTTP, as in a deployment: migrations, inserts and
reads through clickhouse-connect's HTTP client, to the HTTP stand-in
(tests/support/clickhouse_http_standin.py) in a process of its own.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clickhouse_connect
import pytest

from guardtrace import collectors
from guardtrace.collectors.emit.telemetry import GuardTelemetry
from guardtrace.consumers.pipeline import PipelineConfig, open_pipeline
from guardtrace.schemas import names
from guardtrace.transport.broker import EmbeddedBroker
from tests.support.clickhouse_http_standin import RunningStandin, running_standin

from .conftest import Pipeline

pytestmark = [pytest.mark.usefixtures("collectors_reset")]


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStandin]:
    with running_standin(tmp_path_factory.mktemp("standin") / "store") as server:
        yield server


def _client(url: str, **settings: Any) -> Any:
    host, port = url.removeprefix("http://").split(":")
    return clickhouse_connect.get_client(host=host, port=int(port), **settings)


def test_the_consumer_writes_every_event_once_through_http(
        broker: EmbeddedBroker, standin: RunningStandin) -> None:
    suffix = uuid.uuid4().hex[:10]
    config = PipelineConfig.resolve(
        clickhouse_url=standin.url, database=f"gt_{suffix}", bootstrap=broker.bootstrap,
        group_id=f"group-{suffix}", spans_topic=f"spans-{suffix}",
        metrics_topic=f"metrics-{suffix}", payloads_topic=f"payloads-{suffix}",
        logs_topic=f"logs-{suffix}", dead_letter_topic=f"dead-{suffix}",
        batch_max_rows=200, batch_max_seconds=0.5,
        session_timeout_ms=3000, heartbeat_interval_ms=1000)
    pipeline = Pipeline(open_pipeline(config, partitions=2))  # migrates over HTTP
    telemetry = collectors.configure(set_global=False, **pipeline.collector_settings())
    guard = GuardTelemetry(names.MODULE_PLANNING, "hallucination_detection")
    tracer = telemetry.tracer_provider.get_tracer("test")
    for i in range(300):
        request_id = f"req-{i}"
        with tracer.start_as_current_span("plan", attributes={names.ATTR_REQUEST_ID: request_id}):
            guard.event(names.EVENT_HALLUCINATION_DETECTED, request_id,
                        {names.ATTR_AGENT: f"tool-{i % 5}", names.ATTR_HALL_RETRY: 1})
            guard.payload(request_id, names.PAYLOAD_KIND_HALLUCINATION,
                          {"prompt": f"plan request {i}\n\x00", "response": "time-tool-v1"})
    assert telemetry.force_flush(30)

    stats = pipeline.consume_until_idle()

    assert stats.dead_letters == 0
    assert stats.batches > 1  # several inserts, each its own request
    assert pipeline.scalar("SELECT uniqExact(event_id) FROM {db}.span_events") == 300
    assert pipeline.scalar("SELECT count() FROM {db}.span_events") == 300
    assert sorted(r[0] for r in pipeline.rows(
        "SELECT DISTINCT agent FROM {db}.span_events")) == [f"tool-{i}" for i in range(5)]
    body = pipeline.scalar(
        "SELECT body FROM {db}.payloads FINAL WHERE request_id = {rid:String}", rid="req-7")
    assert json.loads(body)["prompt"] == "plan request 7\n\x00"


@pytest.mark.parametrize("compress", ["lz4", "zstd", "gzip", False])
def test_inserts_of_many_blocks_arrive_whole_in_every_encoding(
        standin: RunningStandin, compress: str | bool) -> None:
    # 300-byte strings make clickhouse-connect cut the insert into blocks of ~7,000 rows,
    # each compressed as a frame of its own: every frame must be read, not the first.
    client = _client(standin.url, compress=compress)
    table = f"default.blocks_{uuid.uuid4().hex[:8]}"
    client.command(f"CREATE TABLE {table} (n UInt64, s String) ENGINE = MergeTree ORDER BY n")
    rows = [[n, f"{n:0300d}"] for n in range(30_000)]
    client.insert(table, rows, column_names=["n", "s"])
    count, total, last = client.query(f"SELECT count(), sum(n), max(s) FROM {table}").result_rows[0]
    assert (count, total, last) == (30_000, sum(range(30_000)), f"{29_999:0300d}")


def test_errors_come_back_as_a_server_reports_them(standin: RunningStandin,
                                                    tmp_path: Path) -> None:
    client = _client(standin.url)
    with pytest.raises(Exception, match="UNKNOWN_DATABASE") as raised:
        client.query("SELECT 1 FROM no_such_database.t")
    assert getattr(raised.value, "code", None) == 81
    with pytest.raises(Exception, match="UNKNOWN_SETTING"):
        client.query("SELECT 1", settings={"no_such_setting": 1})
    assert client.query("SELECT 2").result_rows == [(2,)]  # the failures left nothing set
