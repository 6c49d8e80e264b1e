"""The life of one alert: inactive -> pending -> firing -> resolved, per rule and label set.

A rule's condition must hold at every evaluation for ``for`` before the alert fires (one
evaluation where it does not sends it back to inactive), and a firing alert must stay
clear for ``clear_for`` before it resolves (the condition holding again meanwhile starts
the wait over). That second wait is what keeps a metric hovering at its threshold from
sending a firing and a resolved notification every evaluation.

An evaluation that could not read the metric changes nothing: an alert neither fires nor
resolves on a reading that was not made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from .rules import Rule

__all__ = ["FIRING", "INACTIVE", "PENDING", "RESOLVED", "TRANSITION_STATES", "AlertState",
           "AlertTracker", "Labels", "Transition", "Verdict"]

# The states of an alert, and of the transitions recorded in alert_events (whose `state`
# column holds the state entered: "resolved" is firing -> inactive, told apart from a
# pending alert that went back to inactive without firing).
INACTIVE: Final = "inactive"
PENDING: Final = "pending"
FIRING: Final = "firing"
RESOLVED: Final = "resolved"
TRANSITION_STATES: Final = (PENDING, FIRING, RESOLVED, INACTIVE)

# A label set, sorted: () for a rule over everything, (("module", "replies"),) per module.
Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Verdict:
    """One evaluation of a rule for one label set.

    Attributes:
        holds: The condition holds (False also when the volume is too low to judge).
        value: The metric's value (None: undefined, e.g. a rate of nothing).
        threshold: What it was compared with (for a baseline rule, factor x baseline).
        volume: What ``min_volume`` counts (rates), else None.
        detail: The numbers behind the value, for people ("12 fabrications / 140 requests").
        error: The metric could not be read (the state is left as it is).
    """

    labels: Labels
    holds: bool
    value: float | None = None
    threshold: float | None = None
    volume: int | None = None
    detail: str = ""
    error: str | None = None


@dataclass
class AlertState:
    """Where one alert is.

    Attributes:
        since: When the condition started to hold (the pending or firing episode's start).
        clear_since: A firing alert's condition has not held since then (None: it holds).
    """

    state: str = INACTIVE
    since: datetime | None = None
    clear_since: datetime | None = None
    last: Verdict | None = None


@dataclass(frozen=True)
class Transition:
    """An alert entered ``state`` (pending, firing, resolved or inactive) at ``at``."""

    rule: Rule
    labels: Labels
    previous: str
    state: str
    at: datetime
    since: datetime
    verdict: Verdict
    reason: str = ""

    @property
    def notifies(self) -> bool:
        """Firing and resolving are told to the rule's webhooks; pending is not."""
        return self.state in (FIRING, RESOLVED)


@dataclass
class AlertTracker:
    """Every alert's state, keyed by rule name and label set."""

    states: dict[tuple[str, Labels], AlertState] = field(default_factory=dict)

    def state(self, rule: str, labels: Labels = ()) -> AlertState:
        return self.states.get((rule, labels), AlertState())

    def labels_of(self, rule: str) -> list[Labels]:
        """Label sets of ``rule`` that are pending or firing."""
        return [labels for (name, labels), state in self.states.items()
                if name == rule and state.state != INACTIVE]

    def restore(self, rule: str, labels: Labels, state: str, since: datetime) -> None:
        """Take over an alert left pending or firing (by a previous run, from alert_events)."""
        if state in (PENDING, FIRING):
            self.states[(rule, labels)] = AlertState(state, since)

    def step(self, rule: Rule, verdict: Verdict, now: datetime) -> Transition | None:
        """Advance the alert of ``rule`` and ``verdict.labels`` by one evaluation.

        Returns:
            The transition made, or None when the alert stays where it was.
        """
        key = (rule.name, verdict.labels)
        current = self.states.get(key) or AlertState()
        if verdict.error is not None:
            return None
        current.last = verdict
        previous = current.state
        if previous == INACTIVE:
            if not verdict.holds:
                return None
            current.since = now
            current.state = FIRING if rule.for_s <= 0 else PENDING
        elif previous == PENDING:
            if not verdict.holds:
                current.state = INACTIVE
            elif _elapsed(current.since, now) >= rule.for_s:
                current.state = FIRING
            else:
                return None
        else:  # firing
            if verdict.holds:
                current.clear_since = None
                return None
            current.clear_since = current.clear_since or now
            if _elapsed(current.clear_since, now) < rule.clear_for_s:
                return None
            current.state = INACTIVE
        since = current.since or now
        self.states[key] = current
        if current.state == INACTIVE:
            del self.states[key]
        entered = RESOLVED if previous == FIRING else current.state
        return Transition(rule, verdict.labels, previous, entered, now, since, verdict)

    def end(self, rule: Rule, labels: Labels, now: datetime,
            reason: str) -> Transition | None:
        """End an alert whose rule or label set is no longer evaluated (the rules file was
        edited): a firing one resolves (and is told, so no one waits for a resolve that
        would never come), a pending one goes back to inactive.

        Returns:
            The transition, or None if the alert was inactive.
        """
        current = self.states.pop((rule.name, labels), None)
        if current is None or current.state == INACTIVE:
            return None
        verdict = current.last or Verdict(labels, holds=False)
        return Transition(rule, labels, current.state,
                          RESOLVED if current.state == FIRING else INACTIVE, now,
                          current.since or now, verdict, reason=reason)

    def rules(self) -> set[str]:
        """Names of the rules with an alert pending or firing."""
        return {name for name, _ in self.states}


def _elapsed(start: datetime | None, now: datetime) -> float:
    return 0.0 if start is None else (now - start).total_seconds()
