"""Reads about requests: one request's lookup row, trace and payloads; recent requests.

A request page first reads the request-id lookup ``requests`` (time range, trace ids),
then only that request's rows: ``span_events`` and ``payloads`` are ordered by request
id and ``spans`` by trace id, so each read is a primary-key range.

A request also owns the events stored under one of its trace ids in place of a request
id. Pipeline detection (consumers/pipeline_detection.py) files a finding under the LLM
span's trace id when the span with the request id is not in the same Kafka message
(exported later, by another process, or after a batch boundary); the consumer keeps no
state to fix that up later, so :func:`request_trace` reads the events under the request
id and under each of its trace ids (rows whose request id is their own trace id, so
another request sharing a trace lends nothing), one row per event id, and its summary
names what they add. The lookup row alone (:func:`find_request`) does not: joining it
cost every lookup a second read of the lookup table.

A payload's chunks are reassembled and the body checked against the size and sha256
the agent recorded before it split the body (:class:`PayloadIntegrity`): a payload with
chunks missing, or whose chunks do not add up to what was sent, is returned with that
state and a sentence saying so (:attr:`Payload.problem`), never as if it were whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from ..schemas import names
from ..schemas.request_ids import validate_request_id
from .query_sql import rows, sql, utc

__all__ = ["OUTCOMES", "Payload", "PayloadIntegrity", "RequestNotFound", "RequestSummary",
           "Trace", "TraceEvent", "TraceSpan", "find_request", "recent_requests",
           "request_payloads", "request_trace", "require_request", "validate_request_id"]
# validate_request_id is the one request-id rule (the hooks store ids by it too), in
# schemas.request_ids; re-exported here for the readers.

# Which guard events mark a request as having an outcome worth listing.
OUTCOMES: dict[str, tuple[str, ...]] = {
    "unrecoverable": (names.EVENT_HALLUCINATION_UNRECOVERABLE,),
    "recovered": (names.EVENT_HALLUCINATION_RECOVERED,),
    "hallucination": (names.EVENT_HALLUCINATION_DETECTED,),
    "fabrication": (names.EVENT_FABRICATION_DETECTED,),
    "verification": (names.EVENT_VERIFICATION_REQUIRED,),
    "nudged": (names.EVENT_VERIFICATION_NUDGED,),
    "bypassed": (names.EVENT_VERIFICATION_BYPASSED,),
    # Anything a person should look at: a hallucination, a fabrication, a skipped check.
    "problems": (names.EVENT_HALLUCINATION_DETECTED, names.EVENT_HALLUCINATION_UNRECOVERABLE,
                 names.EVENT_FABRICATION_DETECTED, names.EVENT_VERIFICATION_BYPASSED,
                 names.EVENT_VERIFICATION_NUDGED),
}

# The lookup row of one request: its partial rows (one per source and insert) merged.
_FIND_REQUEST = """
    SELECT request_id, min(first_seen), max(last_seen), groupUniqArrayArray(trace_ids),
           groupUniqArrayArray(event_names), groupUniqArrayArray(modules),
           groupUniqArrayArray(agents), groupUniqArrayArray(payload_kinds)
    FROM {requests}
    WHERE request_id = {{request_id:String}}
    GROUP BY request_id"""

# Point reads on the primary key. Duplicates from a replayed batch are dropped with
# LIMIT 1 BY the row identity (replayed rows are identical) rather than FINAL, and
# without a partition (day) bound: measured on 10M events, both made these reads
# slower, not faster (FINAL 5.1 vs 3.3 ms p50; a day bound 7.1 vs 5.1 ms).
_TRACE_SPANS = """
    SELECT trace_id, span_id, parent_span_id, name, service, start_time, end_time,
           duration_ns, status_code, status_message, attributes
    FROM {spans}
    WHERE trace_id IN {{trace_ids:Array(String)}}
    ORDER BY start_time, span_id
    LIMIT 1 BY trace_id, span_id"""
# The request's events and those stored under one of its trace ids: one range of the
# primary key each. One row per event id: a replay's copy, and the same finding stored
# twice (a GenAI call judged on its span and on its log event, under the request id and
# under the trace id), count once.
_TRACE_EVENTS = """
    SELECT event_id, timestamp, name, trace_id, span_id, module, agent, tier, service,
           attributes
    FROM {span_events}
    WHERE request_id IN {{request_ids:Array(String)}}
      AND (request_id = {{request_id:String}} OR request_id = trace_id)
    ORDER BY timestamp, event_id
    LIMIT 1 BY event_id"""
_PAYLOAD_CHUNKS = """
    SELECT payload_id, kind, timestamp, trace_id, span_id, chunk_index, chunk_count, body,
           body_bytes, body_sha256, truncated, redactions, attributes
    FROM {payloads}
    WHERE request_id = {{request_id:String}}
      AND ({{kind:String}} = '' OR kind = {{kind:String}})
    ORDER BY timestamp, payload_id, chunk_index
    LIMIT 1 BY payload_id, chunk_index"""
_RECENT_REQUESTS = """
    SELECT request_id, min(first_seen) AS first, max(last_seen) AS last,
           groupUniqArrayArray(trace_ids), groupUniqArrayArray(event_names) AS events,
           groupUniqArrayArray(modules) AS mods, groupUniqArrayArray(agents),
           groupUniqArrayArray(payload_kinds)
    FROM {requests}
    WHERE request_id IN (SELECT request_id FROM {requests}
                         WHERE last_seen >= {{since:DateTime64(9, 'UTC')}}
                           AND last_seen < {{until:DateTime64(9, 'UTC')}})
    GROUP BY request_id
    HAVING ({{any_outcome:UInt8}} OR hasAny(events, {{events:Array(String)}}))
       AND ({{module:String}} = '' OR has(mods, {{module:String}}))
    ORDER BY last DESC, request_id
    LIMIT {{limit:UInt32}}"""


class RequestNotFound(LookupError):
    """Nothing of the request is stored (yet); the message says where ids come from."""

    def __init__(self, request_id: str, database: str) -> None:
        self.request_id = request_id
        self.database = database
        super().__init__(f"no request {request_id!r} in database {database!r}. Ids appear "
                         "once the consumers have written the request's telemetry")


@dataclass(frozen=True)
class RequestSummary:
    """One row of the request-id lookup: when, which traces, what happened."""

    request_id: str
    first_seen: datetime
    last_seen: datetime
    trace_ids: tuple[str, ...]
    event_names: tuple[str, ...]
    modules: tuple[str, ...]
    agents: tuple[str, ...]
    payload_kinds: tuple[str, ...]


@dataclass(frozen=True)
class TraceSpan:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    service: str
    start_time: datetime
    end_time: datetime
    duration_ms: float
    status_code: str
    status_message: str
    attributes: dict[str, str]


@dataclass(frozen=True)
class TraceEvent:
    event_id: str
    timestamp: datetime
    name: str
    trace_id: str
    span_id: str
    module: str
    agent: str
    tier: str
    service: str
    attributes: dict[str, str]


@dataclass(frozen=True)
class Trace:
    """A request's spans and span events, each in time order.

    ``request`` is the lookup row with what the events filed under a trace id add (their
    names, modules and agents; see the module's docstring).
    """

    request: RequestSummary
    spans: tuple[TraceSpan, ...]
    events: tuple[TraceEvent, ...]

    def timeline(self) -> list[dict[str, Any]]:
        """Spans and events merged on one time axis (what `guardtrace trace` prints)."""
        items: list[dict[str, Any]] = []
        for span in self.spans:
            items.append({"time": span.start_time, "type": "span", "name": span.name,
                          "span_id": span.span_id, "parent_span_id": span.parent_span_id,
                          "duration_ms": span.duration_ms, "status": span.status_code,
                          "service": span.service, "attributes": span.attributes})
        for event in self.events:
            items.append({"time": event.timestamp, "type": "event", "name": event.name,
                          "span_id": event.span_id, "module": event.module,
                          "agent": event.agent, "tier": event.tier,
                          "attributes": event.attributes})
        items.sort(key=lambda item: (item["time"], item["type"] == "event"))
        return items


class PayloadIntegrity(StrEnum):
    """What a reader can vouch for in a reassembled payload body."""

    # Every chunk is stored and the body has the size and sha256 the agent recorded.
    VERIFIED = "verified"
    # Chunks are missing (still in flight, or lost on the way): the body is partial.
    INCOMPLETE = "incomplete"
    # Every chunk is stored, yet the body is not what the agent sent: it is corrupt.
    CHECKSUM_MISMATCH = "checksum mismatch"
    # Cut at the collector's payload limit: the recorded size and sha256 are those of the
    # original body, which is not stored, so there is nothing to compare.
    TRUNCATED = "truncated"
    # No sha256 recorded (a producer other than guardtrace's collector).
    UNCHECKED = "unchecked"


@dataclass(frozen=True)
class Payload:
    """One debug payload, its chunks reassembled and checked (see :attr:`integrity`)."""

    payload_id: str
    request_id: str
    kind: str
    timestamp: datetime
    trace_id: str
    span_id: str
    body: str
    body_bytes: int
    body_sha256: str
    truncated: bool
    redactions: int
    attributes: dict[str, str]
    chunks_present: int
    chunk_count: int
    integrity: PayloadIntegrity

    @property
    def complete(self) -> bool:
        """Every chunk has arrived (a payload still in flight has gaps)."""
        return self.chunks_present == self.chunk_count

    @property
    def problem(self) -> str | None:
        """Why the body cannot be trusted as what the agent sent, or None."""
        if self.integrity is PayloadIntegrity.INCOMPLETE:
            return (f"payload incomplete: {self.chunks_present} of {self.chunk_count} chunks "
                    "stored; the body is partial")
        if self.integrity is PayloadIntegrity.CHECKSUM_MISMATCH:
            return (f"checksum mismatch: the reassembled body "
                    f"({len(self.body.encode('utf-8')):,} bytes) is not the one the agent "
                    f"sent ({self.body_bytes:,} bytes, sha256 {self.body_sha256}); the body "
                    "is corrupt")
        return None


def _integrity(body: str, body_bytes: int, body_sha256: str, truncated: bool,
                      chunks_present: int, chunk_count: int) -> PayloadIntegrity:
    """Check a reassembled body against what the agent recorded before splitting it."""
    if chunks_present < chunk_count:
        return PayloadIntegrity.INCOMPLETE
    if truncated:
        return PayloadIntegrity.TRUNCATED
    if not body_sha256:
        return PayloadIntegrity.UNCHECKED
    data = body.encode("utf-8")
    if len(data) != body_bytes or hashlib.sha256(data).hexdigest() != body_sha256.lower():
        return PayloadIntegrity.CHECKSUM_MISMATCH
    return PayloadIntegrity.VERIFIED


def find_request(client: Any, database: str, request_id: str) -> RequestSummary | None:
    """The lookup row of ``request_id``, or None when nothing of it is stored."""
    found = rows(client, sql(_FIND_REQUEST, database), {"request_id": request_id})
    return _summary(found[0]) if found else None


def require_request(client: Any, database: str, request_id: str) -> RequestSummary:
    """The lookup row of ``request_id``; raise :class:`RequestNotFound` if there is none."""
    request = find_request(client, database, request_id)
    if request is None:
        raise RequestNotFound(request_id, database)
    return request


def _summary(row: Sequence[Any]) -> RequestSummary:
    """A lookup row (request id, first, last, then the five arrays) as a summary."""
    rid, first, last, traces, events, modules, agents, kinds = row
    return RequestSummary(rid, utc(first), utc(last), tuple(sorted(t for t in traces if t)),
                          tuple(sorted(events)), tuple(sorted(modules)), tuple(sorted(agents)),
                          tuple(sorted(kinds)))


def request_trace(client: Any, database: str, request: RequestSummary) -> Trace:
    """The spans of the request's traces and the request's span events, in time order.

    The events include those stored under one of the request's trace ids in place of a
    request id (see the module's docstring), each event id once; the trace's summary is
    ``request`` with what they add.
    """
    params = {"request_id": request.request_id, "trace_ids": list(request.trace_ids),
              "request_ids": [request.request_id, *request.trace_ids]}
    span_rows = (rows(client, sql(_TRACE_SPANS, database), params)
                 if request.trace_ids else [])
    event_rows = rows(client, sql(_TRACE_EVENTS, database), params)
    spans = tuple(TraceSpan(t, s, p, n, svc, utc(st), utc(et), d / 1e6, sc, sm, dict(a))
                  for t, s, p, n, svc, st, et, d, sc, sm, a in span_rows)
    events = tuple(TraceEvent(e, utc(ts), n, t, s, m, ag, tier, svc, dict(a))
                   for e, ts, n, t, s, m, ag, tier, svc, a in event_rows)
    return Trace(_with_events(request, events), spans, events)


def _with_events(request: RequestSummary, events: Sequence[TraceEvent]) -> RequestSummary:
    """``request`` naming the events it did not (those filed under a trace id)."""
    event_names = set(request.event_names) | {e.name for e in events}
    modules = set(request.modules) | {e.module for e in events if e.module}
    agents = set(request.agents) | {e.agent for e in events if e.agent}
    if (len(event_names), len(modules), len(agents)) == (
            len(request.event_names), len(request.modules), len(request.agents)):
        return request
    return replace(request, event_names=tuple(sorted(event_names)),
                   modules=tuple(sorted(modules)),
                   agents=tuple(sorted(agents)))


def request_payloads(client: Any, database: str, request_id: str,
                     kind: str | None = None) -> list[Payload]:
    """The request's debug payloads (optionally one kind), chunks joined, oldest first."""
    chunk_rows = rows(client, sql(_PAYLOAD_CHUNKS, database),
                      {"request_id": request_id, "kind": kind or ""})
    grouped: dict[str, list[Sequence[Any]]] = {}
    for row in chunk_rows:
        grouped.setdefault(row[0], []).append(row)
    payloads = []
    for payload_id, chunks in grouped.items():
        first = chunks[0]
        body = "".join(chunk[7] for chunk in chunks)
        body_bytes, body_sha256, truncated = int(first[8]), first[9], bool(first[10])
        chunk_count = int(first[6])
        payloads.append(Payload(
            payload_id=payload_id, request_id=request_id, kind=first[1],
            timestamp=utc(first[2]), trace_id=first[3], span_id=first[4], body=body,
            body_bytes=body_bytes, body_sha256=body_sha256, truncated=truncated,
            redactions=int(first[11]), attributes=dict(first[12]), chunks_present=len(chunks),
            chunk_count=chunk_count,
            integrity=_integrity(body, body_bytes, body_sha256, truncated, len(chunks),
                                 chunk_count)))
    return payloads


def recent_requests(client: Any, database: str, *, since: datetime,
                    until: datetime | None = None, outcome: str = "problems",
                    module: str | None = None, limit: int = 100) -> list[RequestSummary]:
    """Requests last seen in [since, until) with ``outcome``, newest first.

    Raises:
        ValueError: ``outcome`` is not one of :data:`OUTCOMES` (or ``all``).
    """
    if outcome != "all" and outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; choose one of "
                         f"{', '.join([*OUTCOMES, 'all'])}")
    found = rows(client, sql(_RECENT_REQUESTS, database), {
        "since": utc(since), "until": utc(until or datetime.now(UTC) + timedelta(days=1)),
        "any_outcome": int(outcome == "all"), "events": list(OUTCOMES.get(outcome, ())),
        "module": module or "", "limit": limit})
    return [_summary(row) for row in found]
