"""The alert evaluator's writes: one ``alert_events`` row per alert state transition.

Its own writer, not the consumers' (:mod:`.writer` inserts what the consumers decode
from Kafka): alert transitions are made by the evaluator, which writes them itself. The
row's id is a hash of what makes the transition (rule, labels, state entered, time), so
an insert retried after a failure that had in fact landed leaves one row, not two.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import tables

__all__ = ["AlertEvent", "AlertEventWriter"]


@dataclass(frozen=True)
class AlertEvent:
    """One alert state transition, as stored.

    Attributes:
        state: The state entered: pending, firing, resolved (firing -> inactive) or
            inactive (pending -> inactive, before it fired).
        previous: The state left.
        condition: The rule as people read it ("fabrication_rate over 10m above 0.2").
        active_since: When the condition started to hold (the episode's start).
        message: The notification's text (or why the alert ended).
    """

    timestamp: datetime
    rule: str
    labels: Mapping[str, str]
    state: str
    previous: str
    metric: str
    condition: str
    value: float | None
    threshold: float | None
    volume: int | None
    active_since: datetime
    message: str = ""
    event_id: str = field(default="")

    def __post_init__(self) -> None:
        if not self.event_id:
            identity = "\x1f".join([self.rule, *(f"{k}={v}" for k, v in sorted(self.labels.items())),
                                    self.state, self.timestamp.isoformat()])
            object.__setattr__(self, "event_id",
                               hashlib.blake2b(identity.encode(), digest_size=16).hexdigest())

    def row(self) -> list[Any]:
        """The row in the order of :attr:`guardtrace.store.tables.Columns.ALERT_EVENTS`."""
        return [self.event_id, self.timestamp, self.rule, dict(self.labels), self.state,
                self.previous, self.metric, self.condition, self.value, self.threshold,
                self.volume, self.active_since, self.message]


class AlertEventWriter:
    """Inserts alert transitions with clickhouse-connect.

    Args:
        client: A clickhouse-connect client (chDB or HTTP) allowed to insert.
        database: The guardtrace database.
    """

    def __init__(self, client: Any, database: str) -> None:
        self._client = client
        self._database = database

    def write(self, events: Sequence[AlertEvent]) -> int:
        """Insert ``events`` (one insert); return how many. Raises on any failure."""
        if events:
            self._client.insert(f"{self._database}.{tables.ALERT_EVENTS}",
                                [event.row() for event in events],
                                column_names=list(tables.Columns.ALERT_EVENTS))
        return len(events)
