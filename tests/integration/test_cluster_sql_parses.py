"""The SQL of `guardtrace migrate --print-sql`, checked by the real ClickHouse engine.

There is no ClickHouse cluster (nor Keeper) here, so the replicated statements cannot
run. What can be checked is that ClickHouse's own parser accepts every one of them, as
written: ``formatQuery`` parses without executing. The single-server script is also
executed for real in a fresh database, so the printed SQL is known to be runnable.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from guardtrace.store.cluster_migrations import plan, render_sql
from guardtrace.store.connection import StoreConfig
from guardtrace.store.migrate import load_migrations

CONFIG = StoreConfig.resolve(url="chdb://unused", database="guardtrace")


def formatted(client: Any, sql: str) -> str:
    """ClickHouse's canonical text of ``sql``; raises if the engine cannot parse it."""
    return client.query("SELECT formatQuery({sql:String})",
                        parameters={"sql": sql}).result_rows[0][0]


def test_the_parser_rejects_broken_sql(ch_client: Any) -> None:
    # The check below is only worth something if formatQuery really parses.
    with pytest.raises(Exception, match="Syntax error"):
        formatted(ch_client, "CREATE TABLE t ON CLUSTER c AS u ENGINE = Distributed(")


@pytest.mark.parametrize("step", [s.label for s in plan(CONFIG, "gt_cluster")])
def test_every_replicated_statement_parses(ch_client: Any, step: str) -> None:
    statements = next(s for s in plan(CONFIG, "gt_cluster") if s.label == step).statements
    assert statements
    for sql in statements:
        canonical = formatted(ch_client, sql)
        # The parts the rendering exists for survive the parser unchanged.
        assert "ON CLUSTER gt_cluster" in canonical, canonical
        engine = re.search(r"ENGINE = (\w+)", canonical)
        if canonical.startswith("CREATE TABLE"):
            assert engine and engine[1].startswith(("Replicated", "Distributed")), canonical
        if "_local ON CLUSTER" in canonical:
            assert "'/clickhouse/tables/{shard}/guardtrace/" in canonical
            assert "'{replica}'" in canonical


def test_the_single_server_script_runs(ch_client: Any) -> None:
    database = f"gt_print_{uuid.uuid4().hex[:10]}"
    config = StoreConfig.resolve(url="chdb://unused", database=database)
    script = render_sql(config)
    sqls = [chunk.strip() for chunk in re.split(r";\s*$", script, flags=re.MULTILINE)]
    ran = 0
    for sql in sqls:
        body = "\n".join(line for line in sql.splitlines() if not line.startswith("--")).strip()
        if body:
            ch_client.command(body)
            ran += 1
    assert ran >= len(load_migrations())
    tables = {row[0] for row in ch_client.query(
        "SELECT name FROM system.tables WHERE database = {db:String}",
        parameters={"db": database}).result_rows}
    assert {"schema_migrations", "spans", "span_events", "metric_points", "payloads",
            "requests", "event_rollup_1m", "dead_letters"} <= tables
    ch_client.command(f"DROP DATABASE {database} SYNC")
