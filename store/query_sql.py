"""What every read query shares: filling a SQL template, running it, reading times as UTC."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from . import tables


def sql(template: str, database: str) -> str:
    """``template`` with its table placeholders (``{spans}``, ...) as ``database.table``.

    Query parameters are written ``{{name:Type}}`` in templates and reach ClickHouse as
    ``{name:Type}``: values always travel as parameters, never in the SQL text.
    """
    return template.format(**tables.qualified(database))


def rows(client: Any, query: str, parameters: dict[str, Any] | None = None) -> list[Sequence[Any]]:
    return list(client.query(query, parameters=parameters or {}).result_rows)


def utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
