"""The seam between the consumer and ClickHouse: write one batch of rows per table.

The consumer only knows :class:`BatchWriter`; the real one inserts through
clickhouse-connect (embedded chDB or a server), and fault-injection tests wrap it.
"""

from __future__ import annotations

from typing import Any, Protocol

from . import tables
from .pandas_free_insert import pandas_free_insert
from .rows import DecodedRows

__all__ = ["INSERT_SETTINGS", "BatchWriter", "ClickHouseWriter"]


# Late or backfilled telemetry can span more than 100 days in one batch; ClickHouse then
# refuses the whole insert (max_partitions_per_insert_block), every retry, and the
# consumer would stall. Such an insert is legitimate: let ClickHouse warn, not throw.
INSERT_SETTINGS = {"throw_on_max_partitions_per_insert_block": 0}


class BatchWriter(Protocol):
    """Writes a batch; raises on any failure (the consumer then retries, uncommitted)."""

    def write(self, rows: DecodedRows) -> dict[str, int]:
        """Insert every non-empty table of ``rows``; return rows written per table."""
        ...


class ClickHouseWriter:
    """Inserts decoded rows with clickhouse-connect.

    Args:
        client: A clickhouse-connect client (chDB or HTTP).
        database: The guardtrace database.
    """

    def __init__(self, client: Any, database: str) -> None:
        self._client = client
        self._database = database

    def write(self, rows: DecodedRows) -> dict[str, int]:
        written = {}
        by_table = rows.by_table()
        # The rows are lists: clickhouse-connect need not import pandas to see that they
        # are no DataFrame (about 90 MB of RSS; see pandas_free_insert).
        with pandas_free_insert():
            for table, columns in tables.WRITTEN:  # in insert order
                table_rows = by_table[table]
                if table_rows:
                    self._client.insert(f"{self._database}.{table}", table_rows,
                                        column_names=list(columns), settings=INSERT_SETTINGS)
                    written[table] = len(table_rows)
        return written
