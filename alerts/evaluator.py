"""One evaluation of every rule: judge, step each alert, record the transitions, notify.

:class:`AlertEvaluator` is the logic with its seams explicit (where metrics come from,
where transitions are written, where notifications go), so it runs the same inside
``guardtrace up``, in ``guardtrace alerts run`` and in tests. What it promises:

* every transition is written to ``alert_events``; an insert that fails is kept and
  tried again at the next evaluation (and what is still unwritten when it stops goes to
  the dead-letter log), so the history has no holes;
* firing and resolving are handed to the notifier (pending is recorded, not sent);
* alerts left pending or firing by a previous run are taken over (:meth:`restore`), so
  a restart neither fires an alert a second time nor forgets to resolve one;
* editing the rules file ends the alerts of rules (or label sets) no longer defined,
  a firing one with a resolved notification.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from ..store.alert_events import AlertEvent
from .delivery import DeadLetterLog
from .judge import judge
from .notifications import Notification
from .rules import Rule, RuleSet, Webhook
from .sources import MetricSource
from .state import FIRING, INACTIVE, PENDING, RESOLVED, AlertTracker, Labels, Transition, Verdict

__all__ = ["AlertEvaluator", "Evaluation", "Notifier", "TransitionRecorder"]

logger = logging.getLogger("guardtrace.alerts")

# Transitions kept for a store that refuses writes; beyond, they go to the dead-letter log.
_MAX_UNWRITTEN = 10_000


class TransitionRecorder(Protocol):
    """Writes transitions (the real one: :class:`~guardtrace.store.alert_events.AlertEventWriter`)."""

    def write(self, events: Sequence[AlertEvent]) -> int:
        """Insert ``events``; raise on any failure."""
        ...


class Notifier(Protocol):
    """Sends notifications (the real one: :class:`~guardtrace.alerts.delivery.WebhookDelivery`)."""

    def submit(self, webhook: Webhook, notification: Notification) -> None:
        """Take ``notification`` for ``webhook``; never raise."""
        ...


@dataclass(frozen=True)
class Evaluation:
    """What one evaluation found and did."""

    at: datetime
    verdicts: list[tuple[Rule, Verdict]] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)

    @property
    def errors(self) -> list[tuple[Rule, Verdict]]:
        return [(rule, verdict) for rule, verdict in self.verdicts if verdict.error]


def event_of(transition: Transition) -> AlertEvent:
    """The ``alert_events`` row of ``transition``."""
    verdict = transition.verdict
    return AlertEvent(
        timestamp=transition.at, rule=transition.rule.name, labels=dict(transition.labels),
        state=transition.state, previous=transition.previous, metric=transition.rule.metric,
        condition=transition.rule.describe(), value=verdict.value, threshold=verdict.threshold,
        volume=verdict.volume, active_since=transition.since,
        message=Notification.of(transition).text())


def _millis(moment: datetime) -> datetime:
    # alert_events keeps milliseconds: the time a transition is known by is that one.
    return moment.astimezone(UTC).replace(microsecond=moment.microsecond // 1000 * 1000)


class AlertEvaluator:
    """Evaluates a rule set against a metric source.

    Args:
        rules: The validated rules.
        source: Where metrics are read.
        recorder: Where transitions are written (None: nowhere, ``alerts test``).
        notifier: Where firing and resolved notifications go (None: nowhere).
        dead_letters: Where transitions the store never took are kept at :meth:`close`.
    """

    def __init__(self, rules: RuleSet, source: MetricSource,
                 recorder: TransitionRecorder | None = None, notifier: Notifier | None = None,
                 dead_letters: DeadLetterLog | None = None) -> None:
        self._rules = rules
        self._source = source
        self._recorder = recorder
        self._notifier = notifier
        self._dead_letters = dead_letters
        self.tracker = AlertTracker()
        self._unwritten: list[AlertEvent] = []

    @property
    def rules(self) -> RuleSet:
        return self._rules

    @property
    def unwritten(self) -> int:
        """Transitions waiting for the store to take them."""
        return len(self._unwritten)

    def restore(self, latest: Iterable[AlertEvent], now: datetime | None = None) -> int:
        """Take over the alerts a previous run left pending or firing.

        Args:
            latest: The newest transition of every rule and label set
                (:func:`~guardtrace.store.alert_queries.latest_alert_states`).

        Returns:
            How many alerts were taken over. One whose rule is gone from the file is
            closed in the history instead (its webhooks are gone with it: logged).
        """
        now = _millis(now or datetime.now(UTC))
        by_name = {rule.name: rule for rule in self._rules.rules}
        taken, closed = 0, []
        for event in latest:
            if event.state not in (PENDING, FIRING):
                continue
            labels: Labels = tuple(sorted(event.labels.items()))
            if event.rule in by_name:
                self.tracker.restore(event.rule, labels, event.state, event.active_since)
                taken += 1
                continue
            if event.state == FIRING:
                logger.warning("alert %s %s was firing when the evaluator last stopped and its "
                               "rule is no longer in %s: it is closed without a resolved "
                               "notification", event.rule, dict(labels), self._rules.source)
            closed.append(AlertEvent(
                timestamp=now, rule=event.rule, labels=event.labels,
                state=RESOLVED if event.state == FIRING else INACTIVE, previous=event.state,
                metric=event.metric, condition=event.condition, value=None, threshold=None,
                volume=None, active_since=event.active_since,
                message="the rule is no longer in the rules file"))
        self._record(closed)
        return taken

    def replace_rules(self, rules: RuleSet, now: datetime | None = None) -> list[Transition]:
        """Evaluate ``rules`` from now on; end the alerts of rules that are gone."""
        now = _millis(now or datetime.now(UTC))
        kept = {rule.name for rule in rules.rules}
        ended = []
        for rule in self._rules.rules:
            if rule.name in kept:
                continue
            for labels in self.tracker.labels_of(rule.name):
                transition = self.tracker.end(rule, labels, now,
                                              "the rule was removed from the rules file")
                if transition is not None:
                    ended.append(transition)
        self._after(ended, self._rules)
        self._rules = rules
        return ended

    def evaluate(self, now: datetime | None = None) -> Evaluation:
        """Judge every rule at ``now`` (default: the current time), step its alerts,
        record the transitions and hand firing and resolved ones to the notifier."""
        now = _millis(now or datetime.now(UTC))
        evaluation = Evaluation(now)
        for rule in self._rules.rules:
            tracked = self.tracker.labels_of(rule.name)
            verdicts = judge(rule, self._source, now, tracked)
            judged = {verdict.labels for verdict in verdicts}
            for verdict in verdicts:
                evaluation.verdicts.append((rule, verdict))
                if verdict.error:
                    logger.warning("alert rule %s %s not evaluated: %s", rule.name,
                                   dict(verdict.labels), verdict.error)
                transition = self.tracker.step(rule, verdict, now)
                if transition is not None:
                    evaluation.transitions.append(transition)
            for labels in tracked:
                if labels not in judged:  # the rule was edited to cover other label sets
                    transition = self.tracker.end(rule, labels, now, "the rule no longer "
                                                  "covers these labels")
                    if transition is not None:
                        evaluation.transitions.append(transition)
        self._after(evaluation.transitions, self._rules)
        return evaluation

    def close(self) -> None:
        """Try the unwritten transitions once more; dead-letter what the store refuses."""
        self._record([])
        if self._unwritten and self._dead_letters is not None:
            for event in self._unwritten:
                self._dead_letters.append({"kind": "alert_event", "error": "the store did "
                                           "not take this transition", **_event_record(event)})
            logger.error("%d alert transitions the store did not take are kept in %s",
                         len(self._unwritten), self._dead_letters.path)
            self._unwritten.clear()

    # -- recording and notifying --------------------------------------------------------------
    def _after(self, transitions: list[Transition], rules: RuleSet) -> None:
        for transition in transitions:
            logger.info("alert %s %s: %s -> %s", transition.rule.name, dict(transition.labels),
                        transition.previous, transition.state)
        self._record([event_of(t) for t in transitions])
        if self._notifier is None:
            return
        for transition in transitions:
            if transition.notifies:
                notification = Notification.of(transition)
                for webhook in rules.targets(transition.rule):
                    self._notifier.submit(webhook, notification)

    def _record(self, events: list[AlertEvent]) -> None:
        if self._recorder is None:
            return
        pending = self._unwritten + events
        if not pending:
            return
        try:
            self._recorder.write(pending)
        except Exception as exc:  # noqa: BLE001 - any store failure: kept, tried again
            logger.error("alert transitions not written to the store (%d waiting; tried "
                         "again at the next evaluation): %s", len(pending), exc)
            overflow = len(pending) - _MAX_UNWRITTEN
            dead_letters = self._dead_letters
            if overflow > 0:
                if dead_letters is None:
                    logger.error("%d alert transitions dropped: the store refuses them and "
                                 "no dead-letter log is set", overflow)
                else:
                    for event in pending[:overflow]:
                        dead_letters.append({"kind": "alert_event",
                                             "error": f"the store refused it: {exc}",
                                             **_event_record(event)})
                pending = pending[overflow:]
            self._unwritten = pending
        else:
            self._unwritten = []


def _event_record(event: AlertEvent) -> dict[str, object]:
    return {"event_id": event.event_id, "time": event.timestamp.isoformat(),
            "rule": event.rule, "labels": dict(event.labels), "state": event.state,
            "previous": event.previous, "metric": event.metric, "condition": event.condition,
            "value": event.value, "threshold": event.threshold, "volume": event.volume,
            "active_since": event.active_since.isoformat(), "message": event.message}
