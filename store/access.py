"""Opening the store to read or write it: open, then check the schema is migrated.

The CLI's commands and the dashboard both open the store this way; the check writes
nothing (readers may connect as a read-only user, to whom ClickHouse refuses even
``CREATE ... IF NOT EXISTS``), and a store that is not migrated is one clear error.
"""

from __future__ import annotations

from typing import Any

from .connection import StoreConfig, StoreError, open_client
from .migrate import missing_versions

__all__ = ["SchemaNotMigrated", "open_migrated", "require_schema"]


class SchemaNotMigrated(StoreError):
    """The database lacks migrations this version of guardtrace needs."""

    def __init__(self, database: str, missing: set[int]) -> None:
        self.database = database
        self.missing = sorted(missing)
        super().__init__(f"database {database!r} is not migrated (missing versions "
                         f"{self.missing}); run `guardtrace migrate` first")


def require_schema(client: Any, database: str) -> None:
    """Raise :class:`SchemaNotMigrated` unless every shipped migration is applied."""
    missing = missing_versions(client, database)
    if missing:
        raise SchemaNotMigrated(database, missing)


def open_migrated(config: StoreConfig, client: Any = None) -> Any:
    """A client on ``config``'s store, checked to hold the whole schema.

    Args:
        config: The store.
        client: A client already open on it (a reader that keeps one across runs);
            default: open one.

    Raises:
        StoreError: ClickHouse could not be opened (or is locked by another process).
        SchemaNotMigrated: it is not migrated.
    """
    client = open_client(config) if client is None else client
    require_schema(client, config.database)
    return client
