"""The table and column names of ``store/tables.py`` are those the migrations create.

The SQL migration files keep their literal DDL; this is what keeps the two in step.
"""

from __future__ import annotations

import pytest

from guardtrace.store import tables
from guardtrace.store.cluster_migrations import SHARDING_KEYS
from guardtrace.store.query_sql import sql
from tests.support.services import Pipeline


def _columns(pipeline: Pipeline, table: str) -> list[str]:
    return [row[0] for row in pipeline.rows(f"DESCRIBE TABLE {{db}}.{table}")]


def test_every_named_table_exists_in_a_migrated_database(pipeline: Pipeline) -> None:
    created = {row[0] for row in pipeline.rows("SHOW TABLES FROM {db}")}
    assert set(tables.ALL) <= created
    # Materialized views aside, nothing is created that has no name here.
    assert {t for t in created if not t.endswith("_mv")} == set(tables.ALL)
    assert set(SHARDING_KEYS) == set(tables.ALL)


@pytest.mark.parametrize(("table", "columns"), [
    *tables.WRITTEN, (tables.SCHEMA_MIGRATIONS, tables.Columns.SCHEMA_MIGRATIONS)])
def test_inserted_columns_are_the_tables_columns_in_order(pipeline: Pipeline, table: str,
                                                         columns: tuple[str, ...]) -> None:
    described = _columns(pipeline, table)
    # Every column but those the table fills itself, in the order of the DDL.
    assert [c for c in described if c not in ("inserted_at", "applied_at")] == list(columns)


def test_query_templates_name_only_tables_that_exist(pipeline: Pipeline) -> None:
    for placeholder in tables.qualified(pipeline.database):
        query = sql(f"SELECT count() FROM {{{placeholder}}}", pipeline.database)
        assert pipeline.client.query(query).result_rows[0][0] >= 0
