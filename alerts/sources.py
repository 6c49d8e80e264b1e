"""Where alert metrics are read: the store's own read queries, and the broker for lag.

:class:`MetricSource` is the seam: the evaluator asks it for one metric over one window
and module; :class:`StoreMetricSource` answers from what the pipeline already stores
(the overview's rollup reads, the dead-letter and collector-drop reads) and from the
broker (consumer lag, as the health page reads it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ..schemas import names
from ..schemas.transport_security import KafkaSecurity
from ..store import alert_queries, overview_queries, pipeline_queries
from ..transport.lag import read_consumer_lag

__all__ = ["LagTarget", "Measurement", "MetricSource", "MetricUnavailable",
           "StoreMetricSource"]


class MetricUnavailable(RuntimeError):
    """A metric could not be read (the broker is unreachable, ...); the message says why."""


@dataclass(frozen=True)
class Measurement:
    """A metric's value over one window.

    Attributes:
        value: None when undefined (a rate with a zero denominator).
        volume: A rate's denominator (what ``min_volume`` counts); None otherwise.
        detail: The numbers behind the value, for people.
    """

    value: float | None
    volume: int | None = None
    detail: str = ""


class MetricSource(Protocol):
    """Reads the metrics rules watch."""

    def measure(self, metric: str, start: datetime, end: datetime,
                module: str | None) -> Measurement:
        """``metric`` over [start, end), for one module or (None) all of them.

        Raises:
            MetricUnavailable: it cannot be read now.
        """
        ...

    def now(self, metric: str) -> Measurement:
        """A gauge's current value (consumer lag). Raises MetricUnavailable."""
        ...

    def modules(self, since: datetime) -> list[str]:
        """Modules that emitted guard events since ``since`` (for per-module rules)."""
        ...


@dataclass(frozen=True)
class LagTarget:
    """The consumer group whose lag ``consumer_lag`` reads, and how to reach its broker."""

    bootstrap: str
    group: str
    topics: tuple[str, ...]
    security: KafkaSecurity | None = None


# rate -> (numerator event, denominator event or None for requests seen, words for both)
_RATES: dict[str, tuple[str, str | None, str, str]] = {
    "fabrication_rate": (names.EVENT_FABRICATION_DETECTED, None, "fabrications", "requests"),
    "unrecoverable_rate": (names.EVENT_HALLUCINATION_UNRECOVERABLE, None, "unrecoverable",
                           "requests"),
    "verification_bypass_rate": (names.EVENT_VERIFICATION_BYPASSED,
                                 names.EVENT_VERIFICATION_REQUIRED, "bypassed", "required"),
}


class StoreMetricSource:
    """Metrics from the store's read queries, and consumer lag from the broker.

    Args:
        client: A clickhouse-connect client on the store.
        database: The guardtrace database.
        lag: Where consumer lag is read (None: ``consumer_lag`` is unavailable).
    """

    def __init__(self, client: Any, database: str, lag: LagTarget | None = None) -> None:
        self._client = client
        self._database = database
        self._lag = lag

    def measure(self, metric: str, start: datetime, end: datetime,
                module: str | None) -> Measurement:
        try:
            return self._measure(metric, start, end, module)
        except MetricUnavailable:
            raise
        except Exception as exc:  # any store failure: this reading is not made
            raise MetricUnavailable(f"cannot read {metric} from the store: "
                                    f"{type(exc).__name__}: {exc}") from exc

    def _measure(self, metric: str, start: datetime, end: datetime,
                 module: str | None) -> Measurement:
        client, database = self._client, self._database
        if metric == "recovery_rate":
            totals = overview_queries.event_totals(client, database, start, end, module)
            recovered = totals.get(names.EVENT_HALLUCINATION_RECOVERED, 0)
            settled = recovered + totals.get(names.EVENT_HALLUCINATION_UNRECOVERABLE, 0)
            return Measurement(recovered / settled if settled else None, settled,
                               f"{recovered} recovered / {settled} settled")
        if metric in _RATES:
            numerator, denominator, top, bottom = _RATES[metric]
            totals = overview_queries.event_totals(client, database, start, end, module)
            count = totals.get(numerator, 0)
            total = (totals.get(denominator, 0) if denominator is not None else
                     overview_queries.requests_seen(client, database, start, end, module))
            return Measurement(count / total if total else None, total,
                               f"{count} {top} / {total} {bottom}")
        if metric == "dead_letters":
            count = (_dead_letters_since(client, database, start)
                     - _dead_letters_since(client, database, end))
            return Measurement(float(count), None, f"{count} dead letters")
        if metric == "collector_drops":
            drops = alert_queries.collector_drops_between(
                client, database, pipeline_queries.DROP_METRICS, start, end)
            total = sum(drops.values())
            parts = ", ".join(f"{name.removeprefix('guardtrace.')} {n}"
                              for name, n in drops.items() if n)
            return Measurement(float(total), None, f"{total} dropped" +
                               (f" ({parts})" if parts else ""))
        raise MetricUnavailable(f"{metric} is not measured over a window")

    def now(self, metric: str) -> Measurement:
        if metric != "consumer_lag":
            raise MetricUnavailable(f"{metric} has no current value")
        if self._lag is None:
            raise MetricUnavailable("consumer_lag needs the Kafka bootstrap and consumer group")
        lag = read_consumer_lag(self._lag.bootstrap, self._lag.group, self._lag.topics,
                                self._lag.security)
        if lag.error is not None:
            raise MetricUnavailable(f"cannot read the lag of group {lag.group} at "
                                    f"{lag.bootstrap}: {lag.error}")
        return Measurement(float(lag.total), None,
                           f"{lag.total} records behind over {len(lag.partitions)} partitions")

    def modules(self, since: datetime) -> list[str]:
        try:
            return overview_queries.modules(self._client, self._database, since)
        except Exception as exc:  # any store failure: this reading is not made
            raise MetricUnavailable(f"cannot list modules from the store: {exc}") from exc


def _dead_letters_since(client: Any, database: str, since: datetime) -> int:
    if since >= datetime.now(UTC):
        return 0
    summary: Sequence[dict[str, Any]] = pipeline_queries.dead_letter_summary(
        client, database, since)
    return sum(int(row["count"]) for row in summary)
