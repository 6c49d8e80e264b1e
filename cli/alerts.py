"""``guardtrace alerts test | run``: check alert rules against the store, or evaluate them
as a service of their own (a cluster's; ``guardtrace up --alert-rules FILE`` runs the
same evaluator beside its consumer).

Both load the rules file first: a file that does not validate exits 1 with every problem
named (rule and field) before anything is opened. ``test`` evaluates once, records
nothing and notifies no one, and prints what would fire; ``run`` evaluates every
``GUARDTRACE_ALERT_INTERVAL_SECONDS`` until SIGINT or SIGTERM, writes the transitions to
``alert_events`` and posts to the rules' webhooks.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..schemas import environment_variables as env
from .support import (
    STORE_MODULES,
    CommandError,
    add_kafka_args,
    add_store_args,
    open_store,
    positive_float,
)
from .terminal_text import terminal_safe

if TYPE_CHECKING:
    from ..alerts import AlertService, Evaluation, LagTarget, RuleSet
    from ..schemas.transport_security import KafkaSecurity
    from ..store.connection import StoreConfig

__all__ = ["register", "start_alerts"]


def _lag_target(bootstrap: str | None, group: str | None = None,
                topics: tuple[str, ...] | None = None,
                security: KafkaSecurity | None = None) -> LagTarget:
    from ..alerts import LagTarget
    from ..schemas.transport_security import KafkaSecurity
    from ..transport.topics import TopicSet

    return LagTarget(env.read_str(env.KAFKA_BOOTSTRAP, bootstrap),
                     env.read_str(env.CONSUMER_GROUP, group),
                     topics or TopicSet.resolve().consumed,
                     KafkaSecurity.resolve() if security is None else security)


# -- guardtrace up -------------------------------------------------------------------------
def load_up_rules(path: str | None) -> RuleSet | None:
    """The rules ``up`` evaluates (``--alert-rules``, else ``GUARDTRACE_ALERT_RULES``), or
    None when neither names a file.

    Raises:
        AlertRulesError: the file does not validate (a ConfigError: exit 1, nothing started).
    """
    from ..alerts import load_rules

    chosen = env.read_str(env.ALERT_RULES, path)
    # Absolute: the dashboard is handed the same file, whatever its working directory.
    return load_rules(Path(chosen).expanduser().resolve()) if chosen else None


def start_alerts(rules: RuleSet, store: StoreConfig, bootstrap: str, group: str,
                 topics: tuple[str, ...], security: KafkaSecurity) -> AlertService:
    """Start the evaluator of ``up``: the pipeline it runs, given explicitly."""
    from ..alerts import AlertService, AlertSettings
    from ..store.connection import open_client

    settings = AlertSettings.resolve(
        rules.source, store=store, lag=_lag_target(bootstrap, group, topics, security))
    # Its own client: the consumer's and the dashboard's are theirs (one chDB store
    # opened in this process, as many clients on it as readers and writers).
    return AlertService(settings, open_client(store), rules).start()


# -- guardtrace alerts test ----------------------------------------------------------------
def _verdict_word(rule: Any, verdict: Any) -> str:
    if verdict.error:
        return "ERROR"
    if verdict.holds:
        return "WOULD FIRE"
    if verdict.value is None or verdict.threshold is None:
        return "NO VERDICT"
    return "ok"


def _report(rules: RuleSet, evaluation: Evaluation) -> list[dict[str, Any]]:
    from ..alerts.durations import format_duration

    report = []
    for rule, verdict in evaluation.verdicts:
        word = _verdict_word(rule, verdict)
        note = verdict.error or verdict.detail
        if word == "WOULD FIRE" and rule.for_s > 0:
            note += f"; fires once it holds for {format_duration(rule.for_s)}"
        report.append({"verdict": word, "rule": rule.name, "labels": dict(verdict.labels),
                       "metric": rule.metric, "condition": rule.describe(),
                       "value": verdict.value, "threshold": verdict.threshold,
                       "volume": verdict.volume, "note": note,
                       "notify": list(rule.notify)})
    return report


def cmd_test(args: argparse.Namespace) -> int:
    from ..alerts import AlertEvaluator, StoreMetricSource, load_rules

    rules = load_rules(args.rules)  # invalid: ConfigError, exit 1 with every problem
    config, client = open_store(args)
    evaluator = AlertEvaluator(rules, StoreMetricSource(client, config.database,
                                                        _lag_target(args.bootstrap)))
    evaluation = evaluator.evaluate()
    report = _report(rules, evaluation)
    if args.json:
        print(json.dumps({"rules": rules.source, "at": evaluation.at.isoformat(),
                          "database": config.database, "results": report}, sort_keys=True))
    else:
        print(f"{len(rules.rules)} rule(s) from {rules.source}, evaluated once at "
              f"{evaluation.at:%Y-%m-%d %H:%M:%S} UTC on database {config.database} "
              "(nothing recorded, no one notified):")
        for row in report:
            labels = " ".join(f"{k}={v}" for k, v in sorted(row["labels"].items()))
            value = "n/a" if row["value"] is None else f"{row['value']:.4g}"
            print(terminal_safe(f"{row['verdict']:<10}  {row['rule']}"
                                f"{' ' + labels if labels else ''}: {row['metric']} is {value}; "
                                f"{row['condition']}; {row['note']}"))
    return 1 if evaluation.errors else 0


# -- guardtrace alerts run -----------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    from ..alerts import AlertService, AlertSettings, load_rules
    from ..store.access import open_migrated
    from ..store.connection import StoreConfig

    settings = AlertSettings.resolve(
        args.rules, interval_s=args.interval,
        store=StoreConfig.resolve(url=args.clickhouse_url, database=args.database),
        lag=_lag_target(args.bootstrap))
    rules = load_rules(settings.rules_path)
    client = open_migrated(settings.store)
    stop = threading.Event()

    def stop_on_signal(_signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, stop_on_signal)
    signal.signal(signal.SIGINT, stop_on_signal)
    service = AlertService(settings, client, rules).start()
    try:
        print(f"guardtrace alerts: {len(rules.rules)} rule(s) from {rules.source}, evaluated "
              f"every {settings.interval_s:g} s on {settings.store.display_url} (database "
              f"{settings.store.database}); undeliverable notifications go to "
              f"{settings.dead_letter_log}. Ctrl-C stops it.", flush=True)
        while not stop.wait(1.0):
            if not service.alive():
                raise CommandError("the alert evaluator stopped unexpectedly (see the log)")
    finally:
        service.stop()
    print(f"stopped after {service.evaluations} evaluation(s); "
          f"{service.delivery.delivered} notification(s) delivered, "
          f"{service.delivery.dead_lettered} dead-lettered.", flush=True)
    return 0


def register(sub: Any) -> None:
    """Add the alerts subcommand (test, run)."""
    p = sub.add_parser("alerts", help="alert rules on the stored rates: test them, or run them",
                       description="Alert rules live in one TOML file ([[rule]] and "
                       "[[webhook]] tables; the README's Alerts section and "
                       "deploy/alerts.example.toml show every field). `guardtrace up "
                       "--alert-rules FILE` evaluates them beside its consumer.")
    commands = p.add_subparsers(dest="alerts_command", required=True, metavar="COMMAND")

    t = commands.add_parser(
        "test", help="validate the rules and evaluate them once against the store",
        description="Validate RULES (exit 1 naming every problem), then evaluate each rule "
        "once against the stored data and print what would fire, with the numbers behind "
        "it. Records nothing, notifies no one. Exit 1 if a metric could not be read.")
    t.add_argument("rules", metavar="RULES", help="the rules file (TOML)")
    add_store_args(t)
    add_kafka_args(t)
    t.add_argument("--json", action="store_true", help="print the results as JSON")
    t.set_defaults(func=cmd_test, needs=STORE_MODULES)

    r = commands.add_parser(
        "run", help="evaluate the rules every interval and notify (a service of its own)",
        description="Evaluate RULES every interval against the store, record every alert "
        "transition in alert_events and post firing and resolved notifications to the "
        "rules' webhooks (retried, then appended to "
        f"${env.ALERT_DEAD_LETTER_LOG.name}). An edited rules file is picked up at the "
        "next evaluation (one that does not validate is logged and not used). For a "
        "cluster: run one of these beside the consumers, with a ClickHouse user that may "
        "insert. SIGINT/SIGTERM stop it.")
    r.add_argument("rules", metavar="RULES", help="the rules file (TOML)")
    add_store_args(r)
    add_kafka_args(r)
    r.add_argument("--interval", type=positive_float, default=None, metavar="SECONDS",
                   help=f"seconds between evaluations (default "
                        f"${env.ALERT_INTERVAL_SECONDS.name} or "
                        f"{env.ALERT_INTERVAL_SECONDS.default})")
    r.set_defaults(func=cmd_run, needs=STORE_MODULES)
