"""Every ClickHouse query of the Grafana dashboard runs against a real, migrated store.

deploy/grafana/dashboards/guardtrace.json is read as Grafana provisions it; each SQL
target has the ClickHouse plugin's macros expanded the way the plugin expands them
(grafana/clickhouse-datasource, pkg/macros/macros.go) and the dashboard's ``database``
variable filled in, then runs as the read-only dashboard user would (``readonly=2``) on
the embedded ClickHouse engine, over guard events written through the real decode and
write path. Each query must return the columns its panel shows, and the right numbers.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kafka import TopicPartition
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardtrace.consumers.dead_letters import dead_letter_row
from guardtrace.consumers.decode import decode_spans
from guardtrace.schemas import names
from guardtrace.store.rows import DecodedRows
from guardtrace.store.writer import ClickHouseWriter
from guardtrace.transport.broker import EmbeddedBroker
from tests.support.services import new_pipeline

from .conftest import Pipeline

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "dashboards" / \
    "guardtrace.json"
CLICKHOUSE_PLUGIN = "grafana-clickhouse-datasource"

# The columns each panel's query returns, in order; a time series starts with ``time``.
EXPECTED_COLUMNS = {
    "Hallucinations detected per minute, by module": ["time", "module", "events_per_minute"],
    "Fabrications detected per minute, by module": ["time", "module", "events_per_minute"],
    "Verifications required per minute, by module": ["time", "module", "events_per_minute"],
    "Hallucination recovery rate, by module": ["time", "module", "recovery_rate"],
    "Verification bypass rate, by module": ["time", "module", "bypass_rate"],
    "Top agents": ["agent", "hallucinations", "fabrications", "verification_bypasses"],
    "Dead letters, by reason": ["time", "reason_kind", "dead_letters"],
    "Dead letters, latest reason per kind": ["reason_kind", "source_topic", "dead_letters",
                                             "last_seen", "last_reason"],
}

# One-argument macros take a bare column name here; an expression would need the plugin's
# own argument parser, so it fails the test instead of being expanded wrongly.
_FUNCTION_MACRO = re.compile(r"\$__(\w+)\(([^()]*)\)")
_COLUMN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*")
_PLAIN_MACRO = re.compile(r"\$__(\w+)\b")


def expand(sql: str, database: str, start_s: int, end_s: int, interval_s: int) -> str:
    """The SQL the plugin sends for a time range [start_s, end_s] and a panel interval.

    Only the macros the dashboard uses; any other ``$`` left over fails the test.
    """
    def function_macro(match: re.Match[str]) -> str:
        name, argument = match[1], match[2]
        column = _COLUMN.fullmatch(argument)
        assert column, f"$__{name}: argument {argument!r} is not a column name"
        if name == "timeFilter":
            return (f"{column[1]} >= toDateTime({start_s}) AND "
                    f"{column[1]} <= toDateTime({end_s})")
        if name == "timeInterval":
            return f"toStartOfInterval(toDateTime({column[1]}), INTERVAL {interval_s} second)"
        raise AssertionError(f"macro $__{name}(...) is not expanded by this test")

    def plain_macro(match: re.Match[str]) -> str:
        if match[1] == "interval_s":
            return str(interval_s)
        raise AssertionError(f"macro $__{match[1]} is not expanded by this test")

    sql = _FUNCTION_MACRO.sub(function_macro, sql)
    sql = _PLAIN_MACRO.sub(plain_macro, sql)
    sql = sql.replace("${database}", database)
    assert "$" not in sql, f"an unexpanded macro or variable is left: {sql}"
    return sql


def clickhouse_targets() -> list[tuple[str, dict[str, Any]]]:
    """(panel title, target) of every ClickHouse query in the dashboard."""
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target) for panel in dashboard["panels"]
            for target in panel.get("targets", [])
            if target["datasource"]["type"] == CLICKHOUSE_PLUGIN]


# -- a store with a few guard events ---------------------------------------------------------
# One hour-aligned hour, an hour ago: every event falls in one bucket of an hourly panel.
HOUR_START = (int(time.time()) // 3600 - 1) * 3600
EVENT_S = HOUR_START + 600
EVENTS = [  # (module, agent, event name, how many)
    (names.MODULE_PLANNING, "planner-a", names.EVENT_HALLUCINATION_DETECTED, 2),
    (names.MODULE_PLANNING, "planner-b", names.EVENT_HALLUCINATION_DETECTED, 1),
    (names.MODULE_PLANNING, "planner-a", names.EVENT_HALLUCINATION_RECOVERED, 2),
    (names.MODULE_PLANNING, "planner-b", names.EVENT_HALLUCINATION_UNRECOVERABLE, 1),
    (names.MODULE_REPLIES, "writer", names.EVENT_FABRICATION_DETECTED, 4),
    (names.MODULE_VERIFICATION, "quiz", names.EVENT_VERIFICATION_REQUIRED, 4),
    (names.MODULE_VERIFICATION, "quiz", names.EVENT_VERIFICATION_COMPLETED, 3),
    (names.MODULE_VERIFICATION, "quiz", names.EVENT_VERIFICATION_BYPASSED, 1),
]


def seed(pipeline: Pipeline) -> None:
    """Guard events through the real path (OTLP spans, the decoder, the writer) and one
    dead letter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(names.INSTRUMENTATION_NAME)
    at_ns = EVENT_S * 1_000_000_000
    for number, (module, agent, event, count) in enumerate(EVENTS):
        for i in range(count):
            request_id = f"grafana-{number}-{i}"
            with tracer.start_as_current_span("guard", start_time=at_ns, attributes={
                    names.ATTR_REQUEST_ID: request_id}) as span:
                span.add_event(event, {names.ATTR_REQUEST_ID: request_id,
                                       names.ATTR_MODULE: module, names.ATTR_AGENT: agent},
                               timestamp=at_ns + i)
    provider.shutdown()
    rows = decode_spans(encode_spans(exporter.get_finished_spans()).SerializeToString())
    record = SimpleNamespace(key=None, value=b"\x00\xffnot protobuf", offset=7, headers=[],
                             timestamp=EVENT_S * 1000)
    rows.extend(DecodedRows(dead_letters=[dead_letter_row(
        TopicPartition(pipeline.topics.spans, 0), record,
        "not an OTLP spans request (protobuf decode failed: truncated)")]))
    ClickHouseWriter(pipeline.client, pipeline.database).write(rows)


@pytest.fixture(scope="module")
def seeded(broker: EmbeddedBroker, ch_client: Any) -> Pipeline:
    # Read-only queries: one seeded database serves every test of the module.
    pipeline = new_pipeline(broker, ch_client)
    seed(pipeline)
    return pipeline


def run(pipeline: Pipeline, sql: str) -> Any:
    # readonly=2: what the dashboard's ClickHouse user has (clickhouse/users.d).
    return pipeline.client.query(sql, settings={"readonly": 2})


def test_the_dashboard_has_the_panels_this_test_checks() -> None:
    assert {title for title, _ in clickhouse_targets()} == set(EXPECTED_COLUMNS)


@pytest.mark.parametrize("interval_s", [15, 3600])
def test_every_clickhouse_query_runs_and_returns_its_panels_columns(seeded: Pipeline,
                                                                   interval_s: int) -> None:
    start, end = HOUR_START - 3600, HOUR_START + 3600
    for title, target in clickhouse_targets():
        result = run(seeded, expand(target["rawSql"], seeded.database, start, end, interval_s))
        assert list(result.column_names) == EXPECTED_COLUMNS[title], title
        assert result.result_rows, f"{title}: no rows over the seeded events"
        if target["format"] == 0:  # a time series: Grafana needs a DateTime first column
            assert result.column_types[0].name.startswith("DateTime"), title
        else:
            assert target["format"] == 1, title


def results(pipeline: Pipeline, interval_s: int = 3600) -> dict[str, list[tuple[Any, ...]]]:
    start, end = HOUR_START - 3600, HOUR_START + 3600
    return {title: run(pipeline, expand(target["rawSql"], pipeline.database, start, end,
                                        interval_s)).result_rows
            for title, target in clickhouse_targets()}


def test_the_queries_count_the_seeded_events(seeded: Pipeline) -> None:
    found = results(seeded)
    hour = 60  # an hourly bucket holds 60 minutes: events per minute = count / 60

    def per_module(title: str) -> dict[str, float]:
        return {module: value for _, module, value in found[title]}

    assert per_module("Hallucinations detected per minute, by module") == \
        {names.MODULE_PLANNING: pytest.approx(3 / hour)}
    assert per_module("Fabrications detected per minute, by module") == \
        {names.MODULE_REPLIES: pytest.approx(4 / hour)}
    assert per_module("Verifications required per minute, by module") == \
        {names.MODULE_VERIFICATION: pytest.approx(4 / hour)}
    assert per_module("Hallucination recovery rate, by module") == \
        {names.MODULE_PLANNING: pytest.approx(2 / 3)}
    assert per_module("Verification bypass rate, by module") == \
        {names.MODULE_VERIFICATION: pytest.approx(1 / 4)}
    assert found["Top agents"] == [("writer", 0, 4, 0), ("planner-a", 2, 0, 0),
                                   ("planner-b", 1, 0, 0), ("quiz", 0, 0, 1)]
    ((_, kind, count),) = found["Dead letters, by reason"]
    assert (kind, count) == ("not an OTLP spans request", 1)
    ((kind, topic, count, _, reason),) = found["Dead letters, latest reason per kind"]
    assert (kind, topic, count) == ("not an OTLP spans request", seeded.topics.spans, 1)
    assert reason.startswith("not an OTLP spans request (")


def test_minute_buckets_add_up_to_the_same_counts(seeded: Pipeline) -> None:
    # A 15 s panel interval still buckets by the rollup's minute: per-minute values are
    # the counts themselves.
    found = results(seeded, interval_s=15)
    assert sum(v for _, _, v in found["Hallucinations detected per minute, by module"]) == 3
    assert sum(v for _, _, v in found["Fabrications detected per minute, by module"]) == 4


def test_a_time_range_without_events_returns_no_rows(seeded: Pipeline) -> None:
    start, end = HOUR_START - 7 * 86400, HOUR_START - 6 * 86400
    for title, target in clickhouse_targets():
        result = run(seeded, expand(target["rawSql"], seeded.database, start, end, 60))
        assert result.result_rows == [], title
