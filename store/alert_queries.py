"""Reads for alerts: their state and history (``alert_events``), and the one metric the
other read modules have no query for, telemetry the collectors dropped within a window.

The alert rates themselves come from :mod:`.overview_queries` and dead letters from
:mod:`.pipeline_queries`, the reads the dashboard shows, so an alert and the page it
links to agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .alert_events import AlertEvent
from .query_sql import rows, sql, utc

__all__ = ["alert_history", "collector_drops_between", "latest_alert_states"]

_EVENT_COLUMNS = """event_id, timestamp, rule, labels, state, previous, metric, condition,
           value, threshold, volume, active_since, message"""
# The newest transition of each rule and label set is where that alert is now. A row
# written twice (a retried insert) has one id: LIMIT 1 BY collapses it like FINAL would.
_LATEST = """
    SELECT """ + _EVENT_COLUMNS + """
    FROM {alert_events}
    ORDER BY timestamp DESC, event_id
    LIMIT 1 BY rule, mapKeys(labels), mapValues(labels)"""
_HISTORY = """
    SELECT """ + _EVENT_COLUMNS + """
    FROM {alert_events}
    WHERE timestamp >= {{start:DateTime64(3, 'UTC')}} AND timestamp < {{end:DateTime64(3, 'UTC')}}
      AND ({{rule:String}} = '' OR rule = {{rule:String}})
    ORDER BY timestamp DESC, event_id
    LIMIT 1 BY event_id
    LIMIT {{limit:UInt32}}"""
# The collectors' drop counters, per series (process, labels) and per run of a process
# (start_time): cumulative ones rose by their last value in the window less their last
# value before it; delta ones by the sum of their points in the window.
_DROPS_BETWEEN = """
    SELECT metric_name, sum(rise) FROM (
        SELECT metric_name,
               if(any(temporality) = 'delta',
                  sumIf(value, timestamp >= {{start:DateTime64(9, 'UTC')}}),
                  if(countIf(timestamp >= {{start:DateTime64(9, 'UTC')}}) = 0, 0,
                     greatest(0, maxIf(value, timestamp >= {{start:DateTime64(9, 'UTC')}})
                                 - maxIf(value, timestamp < {{start:DateTime64(9, 'UTC')}}))))
                   AS rise
        FROM {metric_points} FINAL
        WHERE metric_name IN {{metrics:Array(String)}}
          AND timestamp < {{end:DateTime64(9, 'UTC')}}
        GROUP BY metric_name, service, attributes, resource_attributes, start_time)
    GROUP BY metric_name"""


def _event(row: Sequence[Any]) -> AlertEvent:
    (event_id, timestamp, rule, labels, state, previous, metric, condition, value, threshold,
     volume, active_since, message) = row
    return AlertEvent(
        timestamp=utc(timestamp), rule=str(rule), labels={str(k): str(v) for k, v in labels.items()},
        state=str(state), previous=str(previous), metric=str(metric), condition=str(condition),
        value=None if value is None else float(value),
        threshold=None if threshold is None else float(threshold),
        volume=None if volume is None else int(volume), active_since=utc(active_since),
        message=str(message), event_id=str(event_id))


def latest_alert_states(client: Any, database: str) -> list[AlertEvent]:
    """The newest transition of every rule and label set: where each alert is now.

    An alert whose newest transition is ``pending`` or ``firing`` is in that state; one
    whose newest is ``resolved`` or ``inactive`` is inactive.
    """
    return [_event(row) for row in rows(client, sql(_LATEST, database))]


def alert_history(client: Any, database: str, start: datetime, end: datetime,
                  rule: str | None = None, limit: int = 500) -> list[AlertEvent]:
    """Transitions in [start, end), newest first (of one rule, or of all)."""
    found = rows(client, sql(_HISTORY, database),
                 {"start": utc(start), "end": utc(end), "rule": rule or "", "limit": limit})
    return [_event(row) for row in found]


def collector_drops_between(client: Any, database: str, metrics: Sequence[str],
                            start: datetime, end: datetime) -> dict[str, int]:
    """How much each of the collectors' counters ``metrics`` rose in [start, end).

    :func:`~guardtrace.store.pipeline_queries.collector_drops` is the total since the
    agent processes started; an alert wants what was dropped lately.
    """
    found = {str(m): int(v) for m, v in rows(
        client, sql(_DROPS_BETWEEN, database),
        {"metrics": list(metrics), "start": utc(start), "end": utc(end)})}
    return {metric: found.get(metric, 0) for metric in metrics}
