"""The overview's reads: guard events per minute, headline rates, top agents, modules.

Every read here but ``requests_seen`` reads the per-minute rollup ``event_rollup_1m``
(one row per minute, name, module, tier and agent), never the raw events, so the
overview stays fast at size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..schemas import names
from .query_sql import rows, sql, utc

__all__ = ["AgentRanking", "Headline", "event_rates", "event_totals", "headline_rates",
           "modules", "requests_seen", "top_agents"]

# Every rollup read takes [start, end) and an optional module ('' for all).
_WINDOW = """
      AND minute >= toStartOfMinute({{start:DateTime('UTC')}})
      AND minute < {{end:DateTime('UTC')}}
      AND ({{module:String}} = '' OR module = {{module:String}})"""
_EVENT_RATES = """
    SELECT minute, name, tier, uniqMerge(events)
    FROM {event_rollup_1m}
    WHERE name IN {{names:Array(String)}}""" + _WINDOW + """
    GROUP BY minute, name, tier
    ORDER BY minute, name, tier"""
_EVENT_TOTALS = """
    SELECT name, uniqMerge(events)
    FROM {event_rollup_1m}
    WHERE 1""" + _WINDOW + """
    GROUP BY name"""
_MODULES = """
    SELECT DISTINCT module FROM {event_rollup_1m}
    WHERE minute >= toStartOfMinute({{since:DateTime('UTC')}}) AND module != ''
    ORDER BY module"""
# The inner filter narrows to requests with a lookup row starting in the window before
# grouping (grouping all of a large table first took ~4x longer); the outer one keeps
# only those whose *earliest* row is in the window.
_REQUESTS_SEEN = """
    SELECT count() FROM (
        SELECT request_id, min(first_seen) AS first, groupUniqArrayArray(modules) AS mods
        FROM {requests}
        WHERE request_id IN (
            SELECT request_id FROM {requests}
            WHERE first_seen >= {{start:DateTime64(9, 'UTC')}}
              AND first_seen < {{end:DateTime64(9, 'UTC')}})
        GROUP BY request_id)
    WHERE first >= {{start:DateTime64(9, 'UTC')}} AND first < {{end:DateTime64(9, 'UTC')}}
      AND ({{module:String}} = '' OR has(mods, {{module:String}}))"""
_AGENTS_FROM = """
    FROM {event_rollup_1m}
    WHERE name = {{name:String}} AND agent != ''""" + _WINDOW
_TOP_AGENTS = """
    SELECT agent, uniqMerge(events) AS n""" + _AGENTS_FROM + """
    GROUP BY agent ORDER BY n DESC, agent LIMIT {{top_n:UInt32}}"""
_AGENT_TOTALS = """
    SELECT uniqExact(agent), uniqMerge(events)""" + _AGENTS_FROM


def _window(start: datetime, end: datetime, module: str | None) -> dict[str, Any]:
    return {"start": utc(start), "end": utc(end), "module": module or ""}


def event_rates(client: Any, database: str, start: datetime, end: datetime,
                module: str | None = None,
                event_names: Iterable[str] = names.GUARD_EVENTS) -> list[tuple[datetime, str, str, int]]:
    """Guard events per minute: ``(minute, name, tier, count)`` in [start, end), from rollups."""
    found = rows(client, sql(_EVENT_RATES, database),
                 {**_window(start, end, module), "names": list(event_names)})
    return [(utc(m), str(n), str(t), int(c)) for m, n, t, c in found]


def event_totals(client: Any, database: str, start: datetime, end: datetime,
                 module: str | None = None) -> dict[str, int]:
    """Guard events per name in [start, end), from rollups."""
    found = rows(client, sql(_EVENT_TOTALS, database), _window(start, end, module))
    return {str(n): int(c) for n, c in found}


def modules(client: Any, database: str, since: datetime) -> list[str]:
    """Modules that emitted guard events since ``since`` (for the module filter)."""
    return [str(r[0]) for r in rows(client, sql(_MODULES, database), {"since": utc(since)})]


def requests_seen(client: Any, database: str, start: datetime, end: datetime,
                  module: str | None = None) -> int:
    """Requests first seen in [start, end) (optionally in one module)."""
    return int(rows(client, sql(_REQUESTS_SEEN, database), _window(start, end, module))[0][0])


@dataclass(frozen=True)
class Headline:
    """The overview's headline numbers for one period (None when undefined)."""

    recovery_rate: float | None  # recovered / (recovered + unrecoverable)
    unrecoverable_rate: float | None  # unrecoverable / requests seen
    recovered: int
    unrecoverable: int
    detected: int
    requests: int


def headline_rates(client: Any, database: str, start: datetime, end: datetime,
                   module: str | None = None) -> Headline:
    """Recovery and unrecoverable rates for [start, end)."""
    totals = event_totals(client, database, start, end, module)
    recovered = totals.get(names.EVENT_HALLUCINATION_RECOVERED, 0)
    unrecoverable = totals.get(names.EVENT_HALLUCINATION_UNRECOVERABLE, 0)
    requests = requests_seen(client, database, start, end, module)
    settled = recovered + unrecoverable
    return Headline(
        recovery_rate=recovered / settled if settled else None,
        unrecoverable_rate=unrecoverable / requests if requests else None,
        recovered=recovered, unrecoverable=unrecoverable,
        detected=totals.get(names.EVENT_HALLUCINATION_DETECTED, 0), requests=requests)


@dataclass(frozen=True)
class AgentRanking:
    """Top agents by hallucinations, the rest folded into ``__other__``."""

    top: tuple[tuple[str, int], ...]
    other_count: int  # events of the agents beyond the top N
    other_agents: int  # how many distinct agents were folded
    total_agents: int

    def rows(self) -> list[tuple[str, int]]:
        """The ranking as rows, ``__other__`` last when anything was folded."""
        ranked = list(self.top)
        if self.other_agents:
            ranked.append((names.OVERFLOW_LABEL, self.other_count))
        return ranked


def top_agents(client: Any, database: str, start: datetime, end: datetime,
               module: str | None = None, top_n: int = 10,
               event_name: str = names.EVENT_HALLUCINATION_DETECTED) -> AgentRanking:
    """The ``top_n`` agents with the most ``event_name`` events in [start, end)."""
    params = {**_window(start, end, module), "name": event_name, "top_n": top_n}
    top = rows(client, sql(_TOP_AGENTS, database), params)
    total_agents, total_events = rows(client, sql(_AGENT_TOTALS, database), params)[0]
    top_rows = tuple((str(a), int(n)) for a, n in top)
    return AgentRanking(top=top_rows,
                        other_count=max(0, int(total_events) - sum(n for _, n in top_rows)),
                        other_agents=max(0, int(total_agents) - len(top_rows)),
                        total_agents=int(total_agents))
