"""The alert evaluator as a running service: ``guardtrace up`` with a rules file, and
``guardtrace alerts run``.

Every ``interval_s`` (60 s unless ``GUARDTRACE_ALERT_INTERVAL_SECONDS`` says otherwise)
on a daemon thread: re-read the rules file if it changed (an edit that does not validate
is logged, naming its problems, and the rules in force stay), evaluate, record, notify.
On start it takes over the alerts a previous run left pending or firing; on stop it
hands what is still queued to the webhooks, within a bound, and dead-letters the rest.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..schemas import environment_variables as env
from ..schemas.transport_security import KafkaSecurity
from ..store.alert_events import AlertEventWriter
from ..store.alert_queries import latest_alert_states
from ..store.connection import StoreConfig
from ..transport.topics import TopicSet
from .delivery import DeadLetterLog, RetryPolicy, WebhookDelivery
from .evaluator import AlertEvaluator, Evaluation
from .rules import AlertRulesError, RuleSet, load_rules, parse_rules
from .sources import LagTarget, StoreMetricSource

__all__ = ["AlertService", "AlertSettings"]

logger = logging.getLogger("guardtrace.alerts")

# On stop, queued notifications get this long to be delivered before they are dead-lettered.
_STOP_DELIVERY_S = 15.0


@dataclass(frozen=True)
class AlertSettings:
    """Everything the evaluator needs, resolved once.

    Attributes:
        rules_path: The rules file (re-read when it changes).
        interval_s: Seconds between evaluations.
        dead_letter_log: Where undeliverable notifications are appended.
        store: The store read and written (alert_events).
        lag: The consumer group ``consumer_lag`` reads.
    """

    rules_path: Path
    interval_s: float
    dead_letter_log: Path
    store: StoreConfig
    lag: LagTarget

    @classmethod
    def resolve(cls, rules_path: str | None = None, *, interval_s: float | None = None,
                store: StoreConfig | None = None, lag: LagTarget | None = None,
                environ: Mapping[str, str] | None = None) -> AlertSettings:
        """Resolve from arguments, then ``GUARDTRACE_*`` variables, then defaults.

        Args:
            store: The store (default: resolved from the variables).
            lag: The consumer group and broker (default: resolved from the variables).

        Raises:
            ConfigError: no rules file, or a setting is unusable (the message names it).
        """
        path = env.read_str(env.ALERT_RULES, rules_path, environ)
        if not path:
            raise env.ConfigError(f"no alert rules file: give one, or set "
                                  f"{env.ALERT_RULES.name}")
        if lag is None:
            lag = LagTarget(env.read_str(env.KAFKA_BOOTSTRAP, None, environ),
                            env.read_str(env.CONSUMER_GROUP, None, environ),
                            TopicSet.resolve(environ=environ).consumed,
                            KafkaSecurity.resolve(environ))
        return cls(
            rules_path=Path(path).expanduser().resolve(),
            interval_s=env.read_float(env.ALERT_INTERVAL_SECONDS, interval_s, environ,
                                      minimum=0.1),
            dead_letter_log=Path(env.read_str(env.ALERT_DEAD_LETTER_LOG, None, environ)),
            store=store or StoreConfig.resolve(environ=environ),
            lag=lag)


class AlertService:
    """Evaluates the rules every interval on a daemon thread.

    Args:
        settings: Resolved settings.
        client: A clickhouse-connect client on ``settings.store`` allowed to insert.
        rules: The rules, already loaded (default: loaded from ``settings.rules_path``).
        policy: Webhook retries (default: :class:`RetryPolicy`'s).
    """

    def __init__(self, settings: AlertSettings, client: Any, rules: RuleSet | None = None,
                 policy: RetryPolicy | None = None) -> None:
        self.settings = settings
        self._client = client
        rules = rules or load_rules(settings.rules_path)
        self._seen_digest = _digest(settings.rules_path)
        self.delivery = WebhookDelivery(DeadLetterLog(settings.dead_letter_log), policy)
        self.evaluator = AlertEvaluator(
            rules, StoreMetricSource(client, settings.store.database, settings.lag),
            AlertEventWriter(client, settings.store.database), self.delivery,
            self.delivery.dead_letters)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.evaluations = 0

    def start(self) -> AlertService:
        """Take over the alerts left pending or firing, then evaluate on a thread.

        Raises:
            Exception: the store's alert history cannot be read (nothing started).
        """
        taken = self.evaluator.restore(latest_alert_states(self._client,
                                                           self.settings.store.database))
        if taken:
            logger.info("took over %d alert(s) pending or firing from the previous run", taken)
        self._thread = threading.Thread(target=self._run, name="guardtrace-alerts",
                                        daemon=True)
        self._thread.start()
        return self

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop evaluating; deliver or dead-letter what is queued; flush unwritten history."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self.evaluator.close()
        self.delivery.close(_STOP_DELIVERY_S)

    def run_once(self, now: datetime | None = None) -> Evaluation:
        """Pick up an edited rules file, then evaluate once."""
        self._reload(now)
        evaluation = self.evaluator.evaluate(now)
        self.evaluations += 1
        return evaluation

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.run_once()
            except Exception:  # the service outlives one failed evaluation
                logger.exception("alert evaluation failed; the next one is in %.0f s",
                                 self.settings.interval_s)
            self._stop.wait(max(0.0, self.settings.interval_s - (time.monotonic() - started)))

    def _reload(self, now: datetime | None) -> None:
        path = self.settings.rules_path
        digest = _digest(path)
        if digest == self._seen_digest:
            return
        self._seen_digest = digest
        try:
            if digest is None:
                raise AlertRulesError(str(path), ["cannot be read (was it removed?)"])
            rules = parse_rules(path.read_text(encoding="utf-8"), str(path))
        except (AlertRulesError, OSError, UnicodeDecodeError) as exc:
            logger.error("the edited alert rules are not used, the rules in force stay: %s",
                         exc)
            return
        self.evaluator.replace_rules(rules, now)
        logger.info("alert rules reloaded from %s: %d rule(s)", path, len(rules.rules))


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
