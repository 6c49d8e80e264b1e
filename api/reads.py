"""The reads the API serves and the CLI prints, straight from a store client.

Every one is a function of :mod:`guardtrace.store.queries`; this only puts them
together the way a request asks for them (a request's lookup row first, then its rows).
The CLI calls the same methods here when it opens the store itself, and on
:class:`~guardtrace.api.client.ApiClient` when a running ``guardtrace up`` holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..schemas import names
from ..store import queries
from ..store.queries import AgentRanking, Headline, Payload, RequestSummary, Trace
from .parameters import Window

__all__ = ["ModuleRates", "StoreReads"]


@dataclass(frozen=True)
class ModuleRates:
    """One module's headline rates and guard events in a window (``module`` None: all)."""

    module: str | None
    headline: Headline
    events: dict[str, int]


class StoreReads:
    """The read side of one store, as the API and the CLI ask for it.

    Args:
        client: A clickhouse-connect client on a migrated store.
        database: The guardtrace database.
    """

    def __init__(self, client: Any, database: str) -> None:
        self._client = client
        self.database = database

    def trace(self, request_id: str) -> Trace:
        """The request's lookup row, spans and span events.

        Raises:
            RequestNotFound: nothing of the request is stored.
        """
        request = queries.require_request(self._client, self.database, request_id)
        return queries.request_trace(self._client, self.database, request)

    def payloads(self, request_id: str,
                 kind: str | None = None) -> tuple[RequestSummary, list[Payload]]:
        """The request's lookup row and its debug payloads (of ``kind`` only, if given).

        Raises:
            RequestNotFound: nothing of the request is stored.
        """
        request = queries.require_request(self._client, self.database, request_id)
        return request, queries.request_payloads(self._client, self.database, request_id, kind)

    def recent(self, since_s: float, outcome: str, module: str | None,
               limit: int) -> list[RequestSummary]:
        """Requests last seen in the past ``since_s`` seconds with ``outcome``, newest first.

        Raises:
            ValueError: ``outcome`` is not one of :data:`~guardtrace.store.queries.OUTCOMES`
                or ``all``.
        """
        return queries.recent_requests(self._client, self.database,
                                       since=Window(since_s).start, outcome=outcome,
                                       module=module, limit=limit)

    def rates(self, start: datetime, end: datetime,
              module: str | None = None) -> tuple[ModuleRates, list[ModuleRates]]:
        """Headline rates over [start, end): all modules together, then each module (only
        ``module`` when one is given), from the rollups."""
        def of(name: str | None) -> ModuleRates:
            return ModuleRates(
                name, queries.headline_rates(self._client, self.database, start, end, name),
                queries.event_totals(self._client, self.database, start, end, name))

        listed = [module] if module else queries.modules(self._client, self.database, start)
        return of(module), [of(name) for name in listed]

    def top_agents(self, start: datetime, end: datetime, module: str | None = None,
                   event: str = names.EVENT_HALLUCINATION_DETECTED,
                   top: int = 10) -> AgentRanking:
        """The agents with the most ``event`` events in [start, end), from the rollups."""
        return queries.top_agents(self._client, self.database, start, end, module, top, event)

    def stats(self) -> dict[str, Any]:
        """Rows per table and span events per name (deduplicated), as ``guardtrace stats``."""
        return {"database": self.database,
                "tables": queries.table_counts(self._client, self.database),
                "events": queries.event_counts(self._client, self.database)}
