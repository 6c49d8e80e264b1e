"""``guardtrace migrate``: apply the numbered SQL files under ``schemas/migrations``.

Files are ``NNNN_name.up.sql`` with ``.down.sql`` twins; statements are separated by
``;`` at a line end and may use ``{database}``, ``{ttl_events_days}`` and
``{ttl_payloads_days}``. Applied versions are recorded in ``schema_migrations``;
running again applies only what is new, and every statement is ``IF NOT EXISTS``, so a
migration interrupted half-way can simply be run again.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from . import tables
from .connection import StoreConfig
from .pandas_free_insert import pandas_free_insert

__all__ = ["Migration", "applied_versions", "load_migrations", "migrate", "missing_versions",
           "record_applied", "statements"]

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.(up|down)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One numbered schema change."""

    version: int
    name: str
    up: str
    down: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.up.encode()).hexdigest()[:16]


def load_migrations() -> list[Migration]:
    """All migrations shipped in the package, in version order."""
    folder = resources.files("guardtrace.schemas").joinpath("migrations")
    parts: dict[int, dict[str, str]] = {}
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match:
            version = int(match.group(1))
            parts.setdefault(version, {"name": match.group(2)})[match.group(3)] = \
                entry.read_text(encoding="utf-8")
    return [Migration(v, p["name"], p.get("up", ""), p.get("down", ""))
            for v, p in sorted(parts.items())]


def statements(sql: str, config: StoreConfig) -> list[str]:
    """Split a migration file into statements with its placeholders filled in."""
    filled = sql.format(database=config.database, ttl_events_days=config.ttl_events_days,
                        ttl_payloads_days=config.ttl_payloads_days)
    out = []
    for chunk in re.split(r";\s*$", filled, flags=re.MULTILINE):
        body = "\n".join(line for line in chunk.splitlines()
                         if not line.strip().startswith("--")).strip()
        if body:
            out.append(body)
    return out


def _ensure_bookkeeping(client: Any, database: str) -> None:
    version, name, checksum = tables.Columns.SCHEMA_MIGRATIONS
    client.command(f"CREATE DATABASE IF NOT EXISTS {database}")
    client.command(
        f"CREATE TABLE IF NOT EXISTS {database}.{tables.SCHEMA_MIGRATIONS} "
        f"({version} UInt32, {name} String, {checksum} String, "
        "applied_at DateTime64(3, 'UTC') DEFAULT now64(3)) "
        f"ENGINE = ReplacingMergeTree(applied_at) ORDER BY {version}")


def _recorded_versions(client: Any, database: str) -> set[int]:
    rows = client.query(f"SELECT {tables.Columns.SCHEMA_MIGRATIONS[0]} "
                        f"FROM {database}.{tables.SCHEMA_MIGRATIONS} FINAL").result_rows
    return {int(r[0]) for r in rows}


def record_applied(client: Any, database: str, migration: Migration,
                   settings: dict[str, Any] | None = None) -> None:
    """Record ``migration`` as applied (after its statements succeeded)."""
    # A consumer started with --migrate inserts here first: importing pandas here would
    # cost it as much as importing it in the writer (see pandas_free_insert).
    with pandas_free_insert():
        client.insert(f"{database}.{tables.SCHEMA_MIGRATIONS}",
                      [[migration.version, migration.name, migration.checksum]],
                      column_names=list(tables.Columns.SCHEMA_MIGRATIONS),
                      **({"settings": settings} if settings else {}))


def applied_versions(client: Any, database: str) -> set[int]:
    """Versions recorded as applied in ``database``."""
    _ensure_bookkeeping(client, database)
    return _recorded_versions(client, database)


def missing_versions(client: Any, database: str) -> set[int]:
    """Shipped migration versions not applied in ``database``, without writing anything.

    Readers (the dashboard, the query commands) call this: on a server they connect as a
    read-only user, and ClickHouse refuses even ``CREATE ... IF NOT EXISTS`` to them.
    """
    shipped = {m.version for m in load_migrations()}
    exists = client.query(f"EXISTS TABLE {database}.{tables.SCHEMA_MIGRATIONS}").result_rows
    if not exists or not int(exists[0][0]):
        return shipped
    return shipped - _recorded_versions(client, database)


def migrate(client: Any, config: StoreConfig) -> list[Migration]:
    """Apply every migration not yet applied; return those applied now."""
    done = applied_versions(client, config.database)
    applied = []
    for migration in load_migrations():
        if migration.version in done:
            continue
        for statement in statements(migration.up, config):
            client.command(statement)
        record_applied(client, config.database, migration)
        applied.append(migration)
    return applied
