"""The replicated rendering of the schema (`guardtrace migrate --cluster NAME`).

Pure rendering, no server: every migration rendered for a cluster, checked statement
by statement. That every rendered statement parses in the real ClickHouse engine is
checked in tests/integration/test_cluster_sql_parses.py.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from guardtrace.store.cluster_migrations import (
    SHARDING_KEYS,
    ClusterSchemaError,
    check_cluster_name,
    migrate_cluster,
    plan,
    render_sql,
    render_statement,
)
from guardtrace.store.connection import StoreConfig
from guardtrace.store.migrate import load_migrations, statements

CLUSTER = "gt_cluster"
DB = "guardtrace"
CONFIG = StoreConfig.resolve(url="chdb://unused", database=DB, ttl_events_days=30,
                             ttl_payloads_days=7)
_TABLE = re.compile(rf"^CREATE TABLE IF NOT EXISTS {DB}\.(\w+)\s", re.MULTILINE)
_VIEW = re.compile(rf"^CREATE MATERIALIZED VIEW IF NOT EXISTS {DB}\.(\w+)\s", re.MULTILINE)


def single_server_tables() -> dict[str, str]:
    """table -> engine name, from the plain (single-server) migrations."""
    engines = {}
    for migration in load_migrations():
        for sql in statements(migration.up, CONFIG):
            if match := _TABLE.match(sql):
                engines[match[1]] = re.search(r"ENGINE\s*=\s*(\w+)", sql)[1]  # type: ignore[index]
    return engines


def rendered(cluster: str = CLUSTER) -> list[str]:
    return [sql for step in plan(CONFIG, cluster) for sql in step.statements]


def by_name(sqls: list[str]) -> dict[str, str]:
    out = {}
    for sql in sqls:
        match = _TABLE.match(sql) or _VIEW.match(sql)
        if match:
            out[match[1]] = sql
    return out


# -- every migration -----------------------------------------------------------------------
@pytest.mark.parametrize("migration", load_migrations(), ids=lambda m: f"{m.version:04d}")
def test_every_statement_of_every_migration_has_a_rendering(migration: Any) -> None:
    for sql in statements(migration.up, CONFIG):
        out = render_statement(sql, DB, CLUSTER)
        assert out, sql
        for rendered_sql in out:
            assert f" ON CLUSTER {CLUSTER}" in rendered_sql, rendered_sql


@pytest.mark.parametrize("migration", load_migrations(), ids=lambda m: f"{m.version:04d}")
def test_each_table_becomes_a_replicated_local_table_and_a_distributed_one(
        migration: Any) -> None:
    for sql in statements(migration.up, CONFIG):
        match = _TABLE.match(sql)
        if not match:
            continue
        table = match[1]
        engine = re.search(r"ENGINE\s*=\s*(\w+)(?:\(([^()]*)\))?", sql)
        assert engine is not None
        local, distributed = render_statement(sql, DB, CLUSTER)
        assert local.startswith(f"CREATE TABLE IF NOT EXISTS {DB}.{table}_local ON CLUSTER "
                                f"{CLUSTER}\n")
        keeper = f"'/clickhouse/tables/{{shard}}/{DB}/{table}_local', '{{replica}}'"
        version_arg = f", {engine[2]}" if engine[2] else ""
        assert f"ENGINE = Replicated{engine[1]}({keeper}{version_arg})" in local
        # Everything after the engine is kept as written: PARTITION BY, ORDER BY, TTL.
        for clause in ("ORDER BY", "TTL", "PARTITION BY"):
            if clause in sql:
                assert sql[sql.index(clause):] in local, clause
        key = SHARDING_KEYS[table]
        args = f"'{CLUSTER}', '{DB}', '{table}_local'" + (f", {key}" if key else "")
        assert distributed == (f"CREATE TABLE IF NOT EXISTS {DB}.{table} ON CLUSTER {CLUSTER}\n"
                               f"AS {DB}.{table}_local\nENGINE = Distributed({args})")


def test_the_column_lists_are_kept_verbatim() -> None:
    for migration in load_migrations():
        for sql in statements(migration.up, CONFIG):
            if _TABLE.match(sql):
                columns = sql[sql.index("("):sql.rindex("ENGINE")].strip()
                local = render_statement(sql, DB, CLUSTER)[0]
                assert columns in local


def test_every_table_of_the_schema_is_distributed_under_its_own_name() -> None:
    # Readers and writers keep using the single-server names; only *_local is new.
    tables = by_name(rendered())
    for table, engine in single_server_tables().items():
        assert f"ENGINE = Distributed('{CLUSTER}'" in tables[table]
        assert f"ENGINE = Replicated{engine}(" in tables[f"{table}_local"]
    assert "ENGINE = Distributed(" in tables["schema_migrations"]
    assert "ENGINE = ReplicatedReplacingMergeTree(" in tables["schema_migrations_local"]


def test_the_expected_engines_appear() -> None:
    tables = by_name(rendered())
    expect = {"spans_local": "ReplicatedReplacingMergeTree",
              "span_events_local": "ReplicatedReplacingMergeTree",
              "metric_points_local": "ReplicatedReplacingMergeTree",
              "payloads_local": "ReplicatedReplacingMergeTree",
              "dead_letters_local": "ReplicatedReplacingMergeTree",
              "requests_local": "ReplicatedAggregatingMergeTree",
              "event_rollup_1m_local": "ReplicatedAggregatingMergeTree"}
    for table, engine in expect.items():
        assert f"ENGINE = {engine}('/clickhouse/tables/{{shard}}/{DB}/{table}', " \
               f"'{{replica}}'" in tables[table], table


def test_materialized_views_read_and_write_shard_local_tables_only() -> None:
    views = {name: sql for name, sql in by_name(rendered()).items() if name.endswith("_mv")}
    assert set(views) == {"requests_from_events_mv", "requests_from_spans_mv",
                          "requests_from_payloads_mv", "event_rollup_1m_mv"}
    for name, sql in views.items():
        assert f"{DB}.{name} ON CLUSTER {CLUSTER}\nTO {DB}." in sql
        referenced = set(re.findall(rf"\b{DB}\.(\w+)", sql)) - {name}
        assert referenced and all(t.endswith("_local") for t in referenced), (name, referenced)
    assert f"FROM {DB}.span_events_local" in views["requests_from_events_mv"]
    assert f"TO {DB}.requests_local" in views["requests_from_events_mv"]
    assert f"FROM {DB}.spans_local" in views["requests_from_spans_mv"]
    assert f"FROM {DB}.payloads_local" in views["requests_from_payloads_mv"]
    assert f"TO {DB}.event_rollup_1m_local" in views["event_rollup_1m_mv"]


def test_database_and_bookkeeping_come_first_and_on_the_cluster() -> None:
    steps = plan(CONFIG, CLUSTER)
    assert steps[0].label == "bookkeeping" and steps[0].migration is None
    database, local, distributed = steps[0].statements
    assert database == f"CREATE DATABASE IF NOT EXISTS {DB} ON CLUSTER {CLUSTER}"
    assert local.startswith(f"CREATE TABLE IF NOT EXISTS {DB}.schema_migrations_local ON "
                            f"CLUSTER {CLUSTER}")
    assert "ReplicatedReplacingMergeTree(" in local and "applied_at)" in local
    assert distributed.endswith(f"Distributed('{CLUSTER}', '{DB}', 'schema_migrations_local', "
                                "version)")
    assert [s.label for s in steps[1:]] == [f"{m.version:04d}_{m.name}"
                                             for m in load_migrations()]


def test_sharding_keys_are_deterministic_and_keep_a_request_on_one_shard() -> None:
    for table, key in SHARDING_KEYS.items():
        if key is not None:
            assert "rand" not in key.lower(), table  # a replay must meet its first copy
    # Every table that feeds `requests` routes a request-bearing row by its request id.
    for table in ("spans", "span_events", "payloads"):
        key = SHARDING_KEYS[table]
        assert key is not None
        assert key in ("cityHash64(request_id)",
                       "cityHash64(if(request_id != '', request_id, trace_id))"), table
    # Filled by views on each shard: no key, so writes through them fail on >1 shard.
    assert SHARDING_KEYS["requests"] is None and SHARDING_KEYS["event_rollup_1m"] is None


def test_ttls_and_database_placeholders_are_filled_as_migrate_fills_them() -> None:
    config = StoreConfig.resolve(url="chdb://unused", database="gt_other",
                                 ttl_events_days=12, ttl_payloads_days=3)
    sql = render_sql(config, CLUSTER)
    assert "INTERVAL 12 DAY" in sql and "INTERVAL 3 DAY" in sql
    assert "INTERVAL 30 DAY" not in sql
    assert "guardtrace." not in sql and "gt_other.spans_local" in sql
    assert "/clickhouse/tables/{shard}/gt_other/spans_local" in sql
    assert "{database}" not in sql and "{ttl_" not in sql


# -- names and unknown statements ----------------------------------------------------------
@pytest.mark.parametrize("name", ["gt_cluster", "default", "_c1", "Cluster2"])
def test_identifier_cluster_names_are_accepted(name: str) -> None:
    assert check_cluster_name(name) == name


@pytest.mark.parametrize("name", ["", "my-cluster", "1st", "a b", "c;DROP", "'{cluster}'"])
def test_other_cluster_names_are_a_clear_error(name: str) -> None:
    with pytest.raises(ClusterSchemaError, match="not a plain identifier"):
        check_cluster_name(name)
    with pytest.raises(ClusterSchemaError):
        plan(CONFIG, name)


@pytest.mark.parametrize("sql", [
    f"ALTER TABLE {DB}.spans ADD COLUMN x String",
    f"INSERT INTO {DB}.spans VALUES",
    f"CREATE VIEW IF NOT EXISTS {DB}.v AS SELECT 1",
])
def test_a_statement_without_a_rule_is_refused(sql: str) -> None:
    with pytest.raises(ClusterSchemaError, match="no cluster rendering"):
        render_statement(sql, DB, CLUSTER)


def test_a_new_table_needs_a_sharding_key() -> None:
    sql = f"CREATE TABLE IF NOT EXISTS {DB}.brand_new (id String) ENGINE = MergeTree ORDER BY id"
    with pytest.raises(ClusterSchemaError, match="brand_new.*no sharding key"):
        render_statement(sql, DB, CLUSTER)


def test_non_mergetree_engines_are_refused() -> None:
    sql = f"CREATE TABLE IF NOT EXISTS {DB}.spans (id String) ENGINE = Memory"
    with pytest.raises(ClusterSchemaError, match="engine Memory"):
        render_statement(sql, DB, CLUSTER)


def test_a_view_over_an_unknown_table_is_refused() -> None:
    sql = (f"CREATE MATERIALIZED VIEW IF NOT EXISTS {DB}.v_mv TO {DB}.requests AS "
           f"SELECT request_id FROM {DB}.somewhere_else")
    with pytest.raises(ClusterSchemaError, match="somewhere_else"):
        render_statement(sql, DB, CLUSTER)


# -- print and apply -----------------------------------------------------------------------
def test_single_server_print_is_exactly_what_migrate_runs() -> None:
    sql = render_sql(CONFIG)
    assert "ON CLUSTER" not in sql and "Replicated" not in sql and "Distributed" not in sql
    for migration in load_migrations():
        for statement in statements(migration.up, CONFIG):
            assert f"{statement};" in sql
    assert f"CREATE DATABASE IF NOT EXISTS {DB};" in sql
    assert f"CREATE TABLE IF NOT EXISTS {DB}.schema_migrations " in sql


class RecordingClient:
    """Records what migrate_cluster sends; reports the given versions as applied."""

    def __init__(self, applied: set[int]) -> None:
        self.applied = applied
        self.commands: list[str] = []
        self.inserts: list[tuple[str, list[Any], dict[str, Any]]] = []

    def command(self, sql: str, *args: Any, **kwargs: Any) -> None:
        self.commands.append(sql)

    def query(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        return SimpleNamespace(result_rows=[(v,) for v in sorted(self.applied)])

    def insert(self, table: str, rows: list[Any], column_names: list[str],
               settings: dict[str, Any] | None = None) -> None:
        self.inserts.append((table, rows, settings or {}))


def test_migrate_cluster_applies_only_what_is_new_and_records_it() -> None:
    migrations = load_migrations()
    client = RecordingClient(applied={migrations[0].version})
    applied = migrate_cluster(client, CONFIG, CLUSTER)
    assert [m.version for m in applied] == [m.version for m in migrations[1:]]
    # Bookkeeping on the cluster first, then the single-server IF NOT EXISTS no-ops.
    assert client.commands[0] == f"CREATE DATABASE IF NOT EXISTS {DB} ON CLUSTER {CLUSTER}"
    assert "schema_migrations_local ON CLUSTER" in client.commands[1]
    assert not any("spans_local" in sql and "CREATE TABLE" in sql and "AS " not in sql
                   for sql in client.commands), "0001 was applied already"
    assert [row[0][0] for _, row, _ in client.inserts] == [m.version for m in migrations[1:]]
    for table, _rows, settings in client.inserts:
        assert table == f"{DB}.schema_migrations"
        assert settings == {"distributed_foreground_insert": 1}


def test_migrate_cluster_refuses_a_bad_name_before_sending_anything() -> None:
    client = RecordingClient(applied=set())
    with pytest.raises(ClusterSchemaError):
        migrate_cluster(client, CONFIG, "no-dashes")
    assert client.commands == [] and client.inserts == []


# -- the command ---------------------------------------------------------------------------
def test_migrate_print_sql_for_a_cluster_connects_to_nothing(
        capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    from guardtrace.cli import main

    store = tmp_path / "never-created"
    code = main(["migrate", "--cluster", CLUSTER, "--print-sql",
                 "--clickhouse-url", f"chdb://{store}", "--database", DB])
    out = capsys.readouterr().out
    assert code == 0
    assert out == render_sql(CONFIG, CLUSTER)
    assert not store.exists()  # the embedded store was not even opened


def test_migrate_print_sql_without_a_cluster_prints_the_single_server_schema(
        capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    from guardtrace.cli import main

    code = main(["migrate", "--print-sql", "--clickhouse-url", f"chdb://{tmp_path}/s",
                 "--database", DB])
    assert code == 0
    assert capsys.readouterr().out == render_sql(CONFIG)


def test_migrate_with_a_bad_cluster_name_is_one_clear_error(
        capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    from guardtrace.cli import main

    code = main(["migrate", "--cluster", "my-cluster", "--print-sql",
                 "--clickhouse-url", f"chdb://{tmp_path}/s"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("guardtrace migrate: error: cluster name 'my-cluster' is not a plain "
                          "identifier")


def test_migrate_on_a_cluster_needs_a_server(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Any) -> None:
    from guardtrace.cli import main

    store = tmp_path / "s"
    code = main(["migrate", "--cluster", CLUSTER, "--clickhouse-url", f"chdb://{store}"])
    assert code == 1
    assert "--cluster needs a ClickHouse server" in capsys.readouterr().err
    assert not store.exists()
