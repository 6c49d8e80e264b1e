"""The API's JSON documents, both ways: what the server writes from the store's read
models, and what the client reads back into the same models.

The CLI prints from the models (:mod:`guardtrace.store.request_queries`), so a model read
back from a document must be the one the store gave: every field travels, times as ISO
8601 in UTC with their microseconds, and :meth:`from_document` of :meth:`document` is
the identity (``tests/unit/test_api_handlers.py`` pins that).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..store.queries import (
    AgentRanking,
    Payload,
    PayloadIntegrity,
    RequestSummary,
    Trace,
    TraceEvent,
    TraceSpan,
)
from .reads import ModuleRates

__all__ = ["agents_document", "payload_document", "payload_from", "payloads_document",
           "payloads_from", "rates_document", "recent_document", "recent_from",
           "summary_document", "summary_from", "trace_document", "trace_from"]


def _time(value: datetime) -> str:
    return value.isoformat()


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


# -- one request's lookup row ---------------------------------------------------------------
def summary_document(request: RequestSummary) -> dict[str, Any]:
    return {"request_id": request.request_id, "first_seen": _time(request.first_seen),
            "last_seen": _time(request.last_seen), "trace_ids": list(request.trace_ids),
            "event_names": list(request.event_names), "modules": list(request.modules),
            "agents": list(request.agents), "payload_kinds": list(request.payload_kinds)}


def summary_from(document: dict[str, Any]) -> RequestSummary:
    return RequestSummary(
        request_id=document["request_id"], first_seen=_parse_time(document["first_seen"]),
        last_seen=_parse_time(document["last_seen"]), trace_ids=tuple(document["trace_ids"]),
        event_names=tuple(document["event_names"]), modules=tuple(document["modules"]),
        agents=tuple(document["agents"]), payload_kinds=tuple(document["payload_kinds"]))


# -- a trace --------------------------------------------------------------------------------
def _span_document(span: TraceSpan) -> dict[str, Any]:
    return {"trace_id": span.trace_id, "span_id": span.span_id,
            "parent_span_id": span.parent_span_id, "name": span.name, "service": span.service,
            "start_time": _time(span.start_time), "end_time": _time(span.end_time),
            "duration_ms": span.duration_ms, "status_code": span.status_code,
            "status_message": span.status_message, "attributes": dict(span.attributes)}


def _span_from(document: dict[str, Any]) -> TraceSpan:
    return TraceSpan(
        trace_id=document["trace_id"], span_id=document["span_id"],
        parent_span_id=document["parent_span_id"], name=document["name"],
        service=document["service"], start_time=_parse_time(document["start_time"]),
        end_time=_parse_time(document["end_time"]), duration_ms=float(document["duration_ms"]),
        status_code=document["status_code"], status_message=document["status_message"],
        attributes=dict(document["attributes"]))


def _event_document(event: TraceEvent) -> dict[str, Any]:
    return {"event_id": event.event_id, "timestamp": _time(event.timestamp),
            "name": event.name, "trace_id": event.trace_id, "span_id": event.span_id,
            "module": event.module, "agent": event.agent, "tier": event.tier,
            "service": event.service, "attributes": dict(event.attributes)}


def _event_from(document: dict[str, Any]) -> TraceEvent:
    return TraceEvent(
        event_id=document["event_id"], timestamp=_parse_time(document["timestamp"]),
        name=document["name"], trace_id=document["trace_id"], span_id=document["span_id"],
        module=document["module"], agent=document["agent"], tier=document["tier"],
        service=document["service"], attributes=dict(document["attributes"]))


def trace_document(trace: Trace) -> dict[str, Any]:
    """``request`` (the lookup row), ``spans`` and ``events``, each in time order."""
    return {"request": summary_document(trace.request),
            "spans": [_span_document(span) for span in trace.spans],
            "events": [_event_document(event) for event in trace.events]}


def trace_from(document: dict[str, Any]) -> Trace:
    return Trace(summary_from(document["request"]),
                 tuple(_span_from(span) for span in document["spans"]),
                 tuple(_event_from(event) for event in document["events"]))


# -- payloads -------------------------------------------------------------------------------
def payload_document(payload: Payload) -> dict[str, Any]:
    """A payload with its body, its integrity and, when the body cannot be trusted, why."""
    return {"payload_id": payload.payload_id, "request_id": payload.request_id,
            "kind": payload.kind, "timestamp": _time(payload.timestamp),
            "trace_id": payload.trace_id, "span_id": payload.span_id, "body": payload.body,
            "body_bytes": payload.body_bytes, "body_sha256": payload.body_sha256,
            "truncated": payload.truncated, "redactions": payload.redactions,
            "attributes": dict(payload.attributes), "chunks_present": payload.chunks_present,
            "chunk_count": payload.chunk_count, "complete": payload.complete,
            "integrity": payload.integrity.value, "problem": payload.problem}


def payload_from(document: dict[str, Any]) -> Payload:
    # complete and problem are derived from the fields below; they are not stored twice.
    return Payload(
        payload_id=document["payload_id"], request_id=document["request_id"],
        kind=document["kind"], timestamp=_parse_time(document["timestamp"]),
        trace_id=document["trace_id"], span_id=document["span_id"], body=document["body"],
        body_bytes=int(document["body_bytes"]), body_sha256=document["body_sha256"],
        truncated=bool(document["truncated"]), redactions=int(document["redactions"]),
        attributes=dict(document["attributes"]),
        chunks_present=int(document["chunks_present"]),
        chunk_count=int(document["chunk_count"]),
        integrity=PayloadIntegrity(document["integrity"]))


def payloads_document(request: RequestSummary, payloads: list[Payload]) -> dict[str, Any]:
    """``request`` (the lookup row, which names the kinds stored) and ``payloads``."""
    return {"request": summary_document(request),
            "payloads": [payload_document(payload) for payload in payloads]}


def payloads_from(document: dict[str, Any]) -> tuple[RequestSummary, list[Payload]]:
    return (summary_from(document["request"]),
            [payload_from(payload) for payload in document["payloads"]])


# -- lists and rates ------------------------------------------------------------------------
def recent_document(since: datetime, outcome: str, module: str | None,
                    requests: list[RequestSummary]) -> dict[str, Any]:
    return {"since": _time(since), "outcome": outcome, "module": module,
            "requests": [summary_document(request) for request in requests]}


def recent_from(document: dict[str, Any]) -> list[RequestSummary]:
    return [summary_from(request) for request in document["requests"]]


def _rates_row(rates: ModuleRates) -> dict[str, Any]:
    headline = rates.headline
    return {"module": rates.module, "requests": headline.requests,
            "detected": headline.detected, "recovered": headline.recovered,
            "unrecoverable": headline.unrecoverable, "recovery_rate": headline.recovery_rate,
            "unrecoverable_rate": headline.unrecoverable_rate, "events": dict(rates.events)}


def rates_document(start: datetime, end: datetime, total: ModuleRates,
                   modules: list[ModuleRates]) -> dict[str, Any]:
    """The window, its rates over every module (or the one asked for), then per module."""
    return {"start": _time(start), "end": _time(end), "total": _rates_row(total),
            "modules": [_rates_row(rates) for rates in modules]}


def agents_document(start: datetime, end: datetime, module: str | None, event: str,
                    ranking: AgentRanking) -> dict[str, Any]:
    """The top agents by ``event``, and what the agents beyond them add up to."""
    return {"start": _time(start), "end": _time(end), "module": module, "event": event,
            "top": [{"agent": agent, "count": count} for agent, count in ranking.top],
            "other": {"agents": ranking.other_agents, "count": ranking.other_count},
            "total_agents": ranking.total_agents}
