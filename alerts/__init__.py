"""Alerts on what the pipeline stores, delivered to webhooks.

Rules live in one TOML file (:mod:`.rules`, validated whole when loaded); each watches a
metric (:mod:`.metrics`) read through the store's own read queries or the broker
(:mod:`.sources`), judged over a window (:mod:`.judge`). Each rule and label set is an
alert with a state (:mod:`.state`: pending, firing, resolved, with ``for`` and
``clear_for``), stepped every evaluation (:mod:`.evaluator`), its transitions kept in
``alert_events`` and its firing and resolving posted to webhooks with retries and a
dead-letter log (:mod:`.notifications`, :mod:`.delivery`). :mod:`.service` runs it all
every interval, inside ``guardtrace up`` or as ``guardtrace alerts run``.

A reader of the store: it imports the store's read queries and its own writer of
``alert_events``, consumer lag from the transport, and nothing of the consumers, the
collectors, the dashboard or the CLI.
"""

from .delivery import DeadLetterLog, RetryPolicy, WebhookDelivery
from .evaluator import AlertEvaluator, Evaluation
from .judge import judge
from .metrics import METRICS, MODULES, MetricSpec
from .notifications import Notification
from .rules import AlertRulesError, Condition, Rule, RuleSet, Webhook, load_rules, parse_rules
from .service import AlertService, AlertSettings
from .sources import LagTarget, Measurement, MetricSource, MetricUnavailable, StoreMetricSource
from .state import (
    FIRING,
    INACTIVE,
    PENDING,
    RESOLVED,
    AlertState,
    AlertTracker,
    Transition,
    Verdict,
)

__all__ = [
    "FIRING", "INACTIVE", "METRICS", "MODULES", "PENDING", "RESOLVED", "AlertEvaluator",
    "AlertRulesError", "AlertService", "AlertSettings", "AlertState", "AlertTracker",
    "Condition", "DeadLetterLog", "Evaluation", "LagTarget", "Measurement", "MetricSource",
    "MetricSpec", "MetricUnavailable", "Notification", "RetryPolicy", "Rule", "RuleSet",
    "StoreMetricSource", "Transition", "Verdict", "Webhook", "WebhookDelivery", "judge",
    "load_rules", "parse_rules",
]
