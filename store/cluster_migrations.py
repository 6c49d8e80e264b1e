"""``guardtrace migrate --cluster NAME``: the same schema, replicated and sharded.

The numbered SQL files describe one ClickHouse server. On a cluster every statement is
rendered into its replicated form, explicitly and statement by statement:

* ``CREATE DATABASE db`` gains ``ON CLUSTER NAME``.
* ``CREATE TABLE db.t (...) ENGINE = XMergeTree(args) ...`` becomes two tables:
  ``db.t_local ON CLUSTER NAME`` with ``ReplicatedXMergeTree('/clickhouse/tables/{shard}/
  db/t_local', '{replica}', args)``, which holds the rows of one shard, and ``db.t ON
  CLUSTER NAME AS db.t_local ENGINE = Distributed(NAME, db, t_local, key)``, which spans
  all shards. ``{shard}`` and ``{replica}`` are server macros (the Altinity operator
  defines both); everything else in the statement (columns, codecs, ORDER BY, TTL) is
  kept as written.
* ``CREATE MATERIALIZED VIEW db.v TO db.t AS SELECT ... FROM db.s`` becomes ``db.v ON
  CLUSTER NAME TO db.t_local AS SELECT ... FROM db.s_local``: a view fires on the insert
  into the shard's local table and writes that shard's local target, so rollups are
  computed where the rows live.
* ``schema_migrations`` (the bookkeeping) is rendered the same way, so every node sees
  which versions are applied.

Why the names stay the same for readers and writers: the Distributed table keeps the
name the single-server schema uses (``spans``, ``span_events``, ...), so consumers,
``guardtrace stats`` and the dashboard run unchanged. Consumers write to the Distributed
tables, which route each row to its shard; the writer's ClickHouse profile sets
``distributed_foreground_insert=1`` (deploy/README.md), so an insert returns only once
the shards have the rows and the consumer never commits Kafka offsets for rows that are
still queued on one node's disk.

Why the sharding keys are what they are: deduplication (ReplacingMergeTree and
``FINAL``) works within a shard only, so a row replayed after a consumer crash must land
on the same shard as its first copy. Every key is therefore a deterministic function of
the row's own columns, never ``rand()``. Beyond that, one request stays on one shard: a
request-id lookup (events, payloads and the ``requests`` row) is answered by one shard,
and ``requests ... FINAL`` is exact because all of a request's partial rows meet there.

Anything the renderer does not recognise is an error naming the statement, never a
guess: a new kind of migration statement needs a rule here (and a test).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from . import tables
from .connection import StoreConfig
from .migrate import Migration, applied_versions, load_migrations, record_applied, statements

__all__ = ["LOCAL_SUFFIX", "SHARDING_KEYS", "ClusterSchemaError", "PlannedMigration",
           "check_cluster_name", "migrate_cluster", "plan", "render_sql",
           "render_statement"]

LOCAL_SUFFIX = "_local"
# Keeper path of each replicated table; {shard} and {replica} are expanded by the server.
_KEEPER_PATH = "/clickhouse/tables/{{shard}}/{database}/{table}"

# Distributed sharding key per table (see the module docstring for why each is a
# function of the row's identity). None: the table is filled only by materialized views
# on each shard and never written through its Distributed table; without a key, a stray
# INSERT into it fails (on more than one shard) instead of bypassing the views.
SHARDING_KEYS: dict[str, str | None] = {
    # Spans and events carry the request id when the agent set one; spans without it
    # (and their events) follow their trace. Spans with a request id feed `requests`.
    tables.SPANS: "cityHash64(if(request_id != '', request_id, trace_id))",
    tables.SPAN_EVENTS: "cityHash64(if(request_id != '', request_id, trace_id))",
    tables.PAYLOADS: "cityHash64(request_id)",
    tables.METRIC_POINTS: "cityHash64(point_id)",
    # Log records follow their request, else their trace (beside the trace's spans), and
    # a record with neither its own id.
    tables.LOG_RECORDS: ("cityHash64(if(request_id != '', request_id, "
                         "if(trace_id != '', trace_id, record_id)))"),
    tables.DEAD_LETTERS: "cityHash64(dead_letter_id)",
    # Written by one evaluator; read whole (latest state per rule and labels), any shard.
    tables.ALERT_EVENTS: "cityHash64(event_id)",
    tables.SCHEMA_MIGRATIONS: "version",
    tables.REQUESTS: None,
    tables.EVENT_ROLLUP_1M: None,
}

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CREATE_DATABASE = re.compile(r"^CREATE DATABASE (?P<ine>IF NOT EXISTS )?(?P<db>\w+)$")
# Columns run from the first "(" to the last ")" before ENGINE (they nest: Map(...),
# CODEC(...)); engine arguments must be flat, which every MergeTree engine's are.
_CREATE_TABLE = re.compile(
    r"^CREATE TABLE (?P<ine>IF NOT EXISTS )?(?P<db>\w+)\.(?P<table>\w+)\s*"
    r"(?P<columns>\(.*\))\s*"
    r"ENGINE\s*=\s*(?P<engine>\w+)(?:\((?P<args>[^()]*)\))?"
    r"(?P<rest>.*)$", re.DOTALL)
_CREATE_VIEW = re.compile(
    r"^CREATE MATERIALIZED VIEW (?P<ine>IF NOT EXISTS )?(?P<db>\w+)\.(?P<view>\w+)\s+"
    r"TO\s+(?P<target_db>\w+)\.(?P<target>\w+)\s+"
    r"AS\s+(?P<select>SELECT\b.*)$", re.DOTALL)


class ClusterSchemaError(ValueError):
    """The cluster name is not usable, or a statement has no replicated rendering."""


def check_cluster_name(name: str) -> str:
    """Return ``name`` if it is a plain identifier, as ``ON CLUSTER`` gets it unquoted.

    Raises:
        ClusterSchemaError: it is not (letters, digits, underscore; not a digit first).
    """
    if not _IDENTIFIER.match(name or ""):
        raise ClusterSchemaError(
            f"cluster name {name!r} is not a plain identifier (letters, digits and "
            "underscore, not starting with a digit); use the name under <remote_servers> "
            "in the server config (SELECT DISTINCT cluster FROM system.clusters)")
    return name


def render_statement(statement: str, database: str, cluster: str) -> list[str]:
    """The replicated rendering of one statement of a migration (placeholders filled).

    Args:
        statement: One statement as :func:`guardtrace.store.migrate.statements`
            yields it.
        database: The database the statement was filled in for.
        cluster: The cluster name (checked with :func:`check_cluster_name`).

    Returns:
        One statement, or two for a table (the local replicated one, then the
        Distributed one over it).

    Raises:
        ClusterSchemaError: the statement is of a kind there is no rule for, names a
            table missing from :data:`SHARDING_KEYS`, or uses a non-MergeTree engine.
    """
    cluster = check_cluster_name(cluster)
    text = statement.strip().rstrip(";").strip()
    if match := _CREATE_DATABASE.match(text):
        _same_database(match["db"], database, text)
        return [f"CREATE DATABASE {match['ine'] or ''}{database} ON CLUSTER {cluster}"]
    if match := _CREATE_TABLE.match(text):
        return _render_table(match, database, cluster, text)
    if match := _CREATE_VIEW.match(text):
        return [_render_view(match, database, cluster, text)]
    raise ClusterSchemaError(
        f"no cluster rendering for this statement (only CREATE DATABASE, CREATE TABLE "
        f"with a MergeTree engine and CREATE MATERIALIZED VIEW ... TO have one; add a "
        f"rule to store/cluster_migrations.py):\n{_head(text)}")


def _render_table(match: re.Match[str], database: str, cluster: str, text: str) -> list[str]:
    _same_database(match["db"], database, text)
    table, engine = match["table"], match["engine"]
    if table not in SHARDING_KEYS:
        raise ClusterSchemaError(
            f"table {table!r} has no sharding key: add it to SHARDING_KEYS in "
            f"store/cluster_migrations.py (a deterministic function of the row's "
            f"identity, so a replayed row meets its first copy on the same shard)")
    if not engine.endswith("MergeTree") or engine.startswith("Replicated"):
        raise ClusterSchemaError(
            f"table {table!r} uses engine {engine}; only non-replicated MergeTree engines "
            f"are rendered (into their Replicated twin)")
    local = f"{table}{LOCAL_SUFFIX}"
    keeper_path = _KEEPER_PATH.format(database=database, table=local)
    engine_args = [f"'{keeper_path}'", "'{replica}'"]
    if match["args"] and match["args"].strip():
        engine_args.append(match["args"].strip())
    ine = match["ine"] or ""
    local_sql = (f"CREATE TABLE {ine}{database}.{local} ON CLUSTER {cluster}\n"
                 f"{match['columns']}\n"
                 f"ENGINE = Replicated{engine}({', '.join(engine_args)}){match['rest']}")
    distributed_args = [f"'{cluster}'", f"'{database}'", f"'{local}'"]
    key = SHARDING_KEYS[table]
    if key is not None:
        distributed_args.append(key)
    distributed_sql = (f"CREATE TABLE {ine}{database}.{table} ON CLUSTER {cluster}\n"
                       f"AS {database}.{local}\n"
                       f"ENGINE = Distributed({', '.join(distributed_args)})")
    return [local_sql, distributed_sql]


def _render_view(match: re.Match[str], database: str, cluster: str, text: str) -> str:
    _same_database(match["db"], database, text)
    _same_database(match["target_db"], database, text)
    target = _local_name(match["target"], text)

    def to_local(reference: re.Match[str]) -> str:
        return f"{database}.{_local_name(reference[1], text)}"

    # Every table the SELECT reads becomes its shard-local table: the view must see the
    # rows inserted on this shard, once, not the whole cluster through Distributed.
    select = re.sub(rf"\b{re.escape(database)}\.(\w+)\b", to_local, match["select"])
    return (f"CREATE MATERIALIZED VIEW {match['ine'] or ''}{database}.{match['view']} "
            f"ON CLUSTER {cluster}\nTO {database}.{target} AS\n{select}")


def _local_name(table: str, text: str) -> str:
    if table not in SHARDING_KEYS:
        raise ClusterSchemaError(f"materialized view refers to {table!r}, which is not a "
                                 f"table this schema creates:\n{_head(text)}")
    return f"{table}{LOCAL_SUFFIX}"


def _same_database(found: str, database: str, text: str) -> None:
    if found != database:
        raise ClusterSchemaError(f"statement names database {found!r}, expected "
                                 f"{database!r}:\n{_head(text)}")


def _head(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + " ..."


# -- the whole schema ---------------------------------------------------------------------
@dataclass(frozen=True)
class PlannedMigration:
    """The statements one step runs: the bookkeeping (``migration`` None) or a migration."""

    label: str
    statements: tuple[str, ...]
    migration: Migration | None = None


class _StatementRecorder:
    """Stands in for a client: records the DDL it is sent, answers reads with no rows.

    Used to take the bookkeeping statements from
    :func:`guardtrace.store.migrate.applied_versions` itself, so the replicated
    bookkeeping follows any change to the single-server one.
    """

    def __init__(self) -> None:
        self.commands: list[str] = []

    def command(self, sql: str, *args: Any, **kwargs: Any) -> None:
        self.commands.append(sql)

    def query(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        return SimpleNamespace(result_rows=[])


def _bookkeeping_statements(database: str) -> list[str]:
    recorder = _StatementRecorder()
    applied_versions(recorder, database)
    return recorder.commands


def plan(config: StoreConfig, cluster: str | None = None,
         migrations: Sequence[Migration] | None = None) -> list[PlannedMigration]:
    """Every statement a migration of an empty database runs, step by step.

    Args:
        config: Database name and TTLs (the URL is not used; nothing is contacted).
        cluster: Render for this cluster, or None for the single-server schema.
        migrations: Which migrations (default: all shipped, in version order).

    Raises:
        ClusterSchemaError: a bad cluster name or a statement with no rendering.
    """
    if cluster is not None:
        check_cluster_name(cluster)

    def render(sql: str) -> list[str]:
        return [sql] if cluster is None else render_statement(sql, config.database, cluster)

    steps = [PlannedMigration(
        "bookkeeping", tuple(s for sql in _bookkeeping_statements(config.database)
                             for s in render(sql)))]
    for migration in load_migrations() if migrations is None else migrations:
        steps.append(PlannedMigration(
            f"{migration.version:04d}_{migration.name}",
            tuple(s for sql in statements(migration.up, config) for s in render(sql)),
            migration))
    return steps


def render_sql(config: StoreConfig, cluster: str | None = None) -> str:
    """The SQL of :func:`plan` as one script (``guardtrace migrate --print-sql``)."""
    where = f"on cluster {cluster} (replicated, sharded)" if cluster else "(one server)"
    lines = [f"-- guardtrace schema for database {config.database} {where}.",
             ("-- Every migration is listed; `guardtrace migrate` runs only the versions "
              "not yet in"),
             ("-- schema_migrations, and records each one there after its statements "
              "succeed."), ""]
    for step in plan(config, cluster):
        lines.append(f"-- {step.label}")
        for sql in step.statements:
            lines.extend([f"{sql};", ""])
    return "\n".join(lines)


# The bookkeeping row is read back right away (the next migrate, `require_schema`):
# wait until the shard has it rather than leave it queued on this node.
_INSERT_SETTINGS = {"distributed_foreground_insert": 1}


def migrate_cluster(client: Any, config: StoreConfig, cluster: str) -> list[Migration]:
    """Apply every migration not yet applied, rendered for ``cluster``; return those applied.

    Connect to any node of the cluster with a user allowed ``ON CLUSTER`` DDL. Every
    statement is ``IF NOT EXISTS`` and runs on all nodes, so an interrupted run can
    simply be run again.

    Raises:
        ClusterSchemaError: a bad cluster name or a statement with no rendering (before
            anything is sent).
    """
    steps = plan(config, cluster)  # renders everything first: fail before any DDL
    for sql in steps[0].statements:
        client.command(sql)
    # Its own single-server bookkeeping statements are no-ops now: the names exist.
    done = applied_versions(client, config.database)
    applied = []
    for step in steps[1:]:
        migration = step.migration
        assert migration is not None
        if migration.version in done:
            continue
        for sql in step.statements:
            client.command(sql)
        record_applied(client, config.database, migration, settings=_INSERT_SETTINGS)
        applied.append(migration)
    return applied
