"""What a webhook receives when an alert fires or resolves.

Two shapes, one per :attr:`~guardtrace.alerts.rules.Webhook.format`:

* ``slack``: ``{"text": "..."}``, one line, which Slack's incoming webhooks (and
  Mattermost's, and most chat tools') post as a message;
* ``json``: every field, for scripts and incident tools. The keys below are the
  contract; new keys may be added, none renamed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from .durations import format_duration
from .state import FIRING, PENDING, Transition

__all__ = ["NOTIFICATION_SOURCE", "Notification"]

NOTIFICATION_SOURCE: Final = "guardtrace"
# Slack reads &, < and > in text as markup (links, mentions): values are escaped.
_SLACK_ESCAPES: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


@dataclass(frozen=True)
class Notification:
    """An alert that fired or resolved, for its webhooks."""

    status: str  # "firing" or "resolved"
    rule: str
    metric: str
    labels: dict[str, str]
    condition: str
    value: float | None
    threshold: float | None
    volume: int | None
    detail: str
    description: str
    since: datetime
    at: datetime
    reason: str = ""

    @classmethod
    def of(cls, transition: Transition) -> Notification:
        verdict = transition.verdict
        return cls(status=transition.state, rule=transition.rule.name,
                   metric=transition.rule.metric, labels=dict(transition.labels),
                   condition=transition.rule.describe(), value=verdict.value,
                   threshold=verdict.threshold, volume=verdict.volume, detail=verdict.detail,
                   description=transition.rule.description, since=transition.since,
                   at=transition.at, reason=transition.reason)

    def text(self) -> str:
        """One line for people: what, where, how bad, since when."""
        where = "".join(f" {k}={v}" for k, v in sorted(self.labels.items()))
        value = "n/a" if self.value is None else f"{self.value:.4g}"
        text = f"[{self.status.upper()}] {self.rule}{where}: {self.metric} is {value}"
        if self.detail:
            text += f" ({self.detail})"
        began = f"{self.since:%Y-%m-%d %H:%M:%S} UTC"
        if self.status in (FIRING, PENDING):
            text += f"; rule: {self.condition}; holding since {began}"
        else:
            lasted = format_duration(max(0, round((self.at - self.since).total_seconds())))
            text += f"; clear of: {self.condition}; it held from {began} for {lasted}"
        if self.reason:
            text += f"; {self.reason}"
        if self.description:
            text += f". {self.description}"
        return text

    def body(self, form: str) -> dict[str, Any]:
        """The request body for a webhook of format ``form`` (``slack`` or ``json``)."""
        if form == "slack":
            return {"text": self.text().translate(_SLACK_ESCAPES)}
        return {"source": NOTIFICATION_SOURCE, "status": self.status, "rule": self.rule,
                "metric": self.metric, "labels": self.labels, "condition": self.condition,
                "value": self.value, "threshold": self.threshold, "volume": self.volume,
                "detail": self.detail, "description": self.description,
                "since": self.since.isoformat(), "at": self.at.isoformat(),
                "reason": self.reason, "text": self.text()}
