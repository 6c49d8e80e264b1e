"""The API's OpenAPI 3.1 document, written from the same constants the handlers check
against, so it says exactly what they do.

Served at ``/openapi.json``; ``tests/unit/test_api_openapi.py`` runs schemathesis on it
against a live server (every response must be one the document describes).
"""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..schemas import names
from ..schemas.request_ids import ALLOWED_PUNCTUATION, MAX_LENGTH, RULE
from ..store.queries import OUTCOMES, PayloadIntegrity
from . import errors, paths
from .parameters import (
    DEFAULT_LIMIT,
    DEFAULT_SINCE,
    DEFAULT_TOP,
    DURATION_PATTERN,
    MAX_LIMIT,
    MAX_TEXT_CHARS,
    MAX_TOP,
    TEXT_PATTERN,
)

__all__ = ["document"]

# The request-id rule as a pattern: "-" last in the class, where it is literal.
_ID_CLASS = "A-Za-z0-9" + ALLOWED_PUNCTUATION.replace("-", "") + "-"
REQUEST_ID_PATTERN = f"^[A-Za-z0-9][{_ID_CLASS}]{{0,{MAX_LENGTH - 1}}}$"

_STRING: dict[str, Any] = {"type": "string"}
_TIME: dict[str, Any] = {"type": "string", "format": "date-time"}
_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
_STRINGS: dict[str, Any] = {"type": "array", "items": _STRING}
_ATTRIBUTES: dict[str, Any] = {"type": "object", "additionalProperties": _STRING}
_COUNTS: dict[str, Any] = {"type": "object", "additionalProperties": _COUNT}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """A closed object: every property required but ``optional``, no others allowed."""
    return {"type": "object", "properties": properties,
            "required": [name for name in properties if name not in optional],
            "additionalProperties": False}


_SCHEMAS: dict[str, Any] = {
    "Error": _object({
        "status": {"type": "integer"},
        "error": {"type": "string", "enum": [
            errors.BAD_PARAMETER, errors.BAD_REQUEST_ID, errors.REQUEST_NOT_FOUND,
            errors.NOT_FOUND, errors.METHOD_NOT_ALLOWED, errors.UNAUTHORIZED, errors.FORBIDDEN,
            errors.TOO_MANY_ATTEMPTS, errors.STORE_UNAVAILABLE]},
        "message": _STRING,
        "parameter": {"type": "string", "description": "The parameter at fault."},
    }, optional=("parameter",)),
    "RequestSummary": _object({
        "request_id": _STRING, "first_seen": _TIME, "last_seen": _TIME,
        "trace_ids": _STRINGS, "event_names": _STRINGS, "modules": _STRINGS,
        "agents": _STRINGS, "payload_kinds": _STRINGS}),
    "Span": _object({
        "trace_id": _STRING, "span_id": _STRING, "parent_span_id": _STRING, "name": _STRING,
        "service": _STRING, "start_time": _TIME, "end_time": _TIME,
        "duration_ms": {"type": "number", "minimum": 0}, "status_code": _STRING,
        "status_message": _STRING, "attributes": _ATTRIBUTES}),
    "Event": _object({
        "event_id": _STRING, "timestamp": _TIME, "name": _STRING, "trace_id": _STRING,
        "span_id": _STRING, "module": _STRING, "agent": _STRING, "tier": _STRING,
        "service": _STRING, "attributes": _ATTRIBUTES}),
    "Trace": _object({
        "request": _ref("RequestSummary"),
        "spans": {"type": "array", "items": _ref("Span")},
        "events": {"type": "array", "items": _ref("Event")}}),
    "Payload": _object({
        "payload_id": _STRING, "request_id": _STRING, "kind": _STRING, "timestamp": _TIME,
        "trace_id": _STRING, "span_id": _STRING,
        "body": {"type": "string", "description": "The body, chunks joined, redacted at the "
                 "agent; partial when not complete."},
        "body_bytes": {**_COUNT, "description": "The size the agent recorded (of the "
                       "original body when truncated)."},
        "body_sha256": _STRING, "truncated": {"type": "boolean"}, "redactions": _COUNT,
        "attributes": _ATTRIBUTES, "chunks_present": _COUNT, "chunk_count": _COUNT,
        "complete": {"type": "boolean"},
        "integrity": {"type": "string", "enum": [state.value for state in PayloadIntegrity],
                      "description": "What the reassembled body was checked to be against "
                      "the size and sha256 the agent recorded."},
        "problem": {"type": ["string", "null"],
                    "description": "Why the body cannot be trusted, or null."}}),
    "Payloads": _object({
        "request": _ref("RequestSummary"),
        "payloads": {"type": "array", "items": _ref("Payload")}}),
    "RecentRequests": _object({
        "since": _TIME, "outcome": {"type": "string", "enum": [*OUTCOMES, "all"]},
        "module": {"type": ["string", "null"]},
        "requests": {"type": "array", "items": _ref("RequestSummary")}}),
    "Rates": _object({
        "module": {"type": ["string", "null"], "description": "null: every module."},
        "requests": {**_COUNT, "description": "Requests first seen in the window."},
        "detected": _COUNT, "recovered": _COUNT, "unrecoverable": _COUNT,
        "recovery_rate": {"type": ["number", "null"], "minimum": 0, "maximum": 1,
                          "description": "recovered / (recovered + unrecoverable); null "
                          "when both are 0."},
        "unrecoverable_rate": {"type": ["number", "null"], "minimum": 0,
                               "description": "unrecoverable / requests; null without "
                               "requests."},
        "events": {**_COUNTS, "description": "Guard events per event name."}}),
    "RatesByModule": _object({
        "start": _TIME, "end": _TIME, "total": _ref("Rates"),
        "modules": {"type": "array", "items": _ref("Rates")}}),
    "AgentRanking": _object({
        "start": _TIME, "end": _TIME, "module": {"type": ["string", "null"]},
        "event": {"type": "string", "enum": list(names.GUARD_EVENTS)},
        "top": {"type": "array", "items": _object({"agent": _STRING, "count": _COUNT})},
        "other": _object({"agents": _COUNT, "count": _COUNT}),
        "total_agents": _COUNT}),
    "Stats": _object({"database": _STRING, "tables": _COUNTS, "events": _COUNTS}),
}

_PARAMETERS: dict[str, Any] = {
    "RequestId": {"name": "request_id", "in": "path", "required": True,
                  "description": f"A request id: {RULE}; percent-encode a '/' in it.",
                  "schema": {"type": "string", "pattern": REQUEST_ID_PATTERN}},
    "Since": {"name": "since", "in": "query", "required": False,
              "description": "The window, ending now: a positive duration in seconds (s, "
              "the default), minutes, hours, days or weeks.",
              "schema": {"type": "string", "pattern": DURATION_PATTERN,
                         "default": DEFAULT_SINCE}},
    "Module": {"name": "module", "in": "query", "required": False,
               "description": "Only this module.",
               "schema": {"type": "string", "pattern": TEXT_PATTERN, "minLength": 1,
                          "maxLength": MAX_TEXT_CHARS}},
    "Outcome": {"name": "outcome", "in": "query", "required": False,
                "description": "Which requests: those whose guards reported this outcome "
                "(problems: hallucinated, unrecoverable, fabricated, nudged or bypassed).",
                "schema": {"type": "string", "enum": [*OUTCOMES, "all"],
                           "default": "problems"}},
    "Limit": {"name": "limit", "in": "query", "required": False,
              "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                         "default": DEFAULT_LIMIT}},
    "Kind": {"name": "kind", "in": "query", "required": False,
             "description": "Only payloads of this kind (e.g. hallucination_detection).",
             "schema": {"type": "string", "pattern": TEXT_PATTERN, "minLength": 1,
                        "maxLength": MAX_TEXT_CHARS}},
    "Event": {"name": "event", "in": "query", "required": False,
              "schema": {"type": "string", "enum": list(names.GUARD_EVENTS),
                         "default": names.EVENT_HALLUCINATION_DETECTED}},
    "Top": {"name": "top", "in": "query", "required": False,
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_TOP,
                       "default": DEFAULT_TOP}},
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": _ref("Error")}}}


_RESPONSES: dict[str, Any] = {
    "BadRequest": _error("A malformed request id, or a query parameter that is unknown, "
                         "given twice or out of its rule (``parameter`` names it)."),
    "RequestNotFound": _error("Nothing of the request is stored (yet)."),
    "Unauthorized": _error("No token, or not the right one."),
    "Forbidden": _error("No token is configured, and the client is not on the server's "
                        "machine."),
    "TooManyAttempts": _error("Too many failed token attempts from the client's address."),
    "StoreUnavailable": _error("The store cannot be opened, is not migrated, or did not "
                               "answer."),
}


def _operation(operation_id: str, summary: str, schema: str, parameters: tuple[str, ...],
               *, request: bool = False, token_required: bool,
               description: str = "") -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {"description": "OK",
                "content": {"application/json": {"schema": _ref(schema)}}},
        "400": {"$ref": "#/components/responses/BadRequest"},
        "503": {"$ref": "#/components/responses/StoreUnavailable"},
    }
    if request:
        responses["404"] = {"$ref": "#/components/responses/RequestNotFound"}
    if token_required:
        responses["401"] = {"$ref": "#/components/responses/Unauthorized"}
        responses["429"] = {"$ref": "#/components/responses/TooManyAttempts"}
    else:
        responses["403"] = {"$ref": "#/components/responses/Forbidden"}
    operation = {"operationId": operation_id, "summary": summary,
                 "parameters": [{"$ref": f"#/components/parameters/{name}"}
                                for name in parameters],
                 "responses": dict(sorted(responses.items()))}
    if description:
        operation["description"] = description
    return {"get": operation}


def document(token_required: bool) -> dict[str, Any]:
    """The OpenAPI document of an API that does (or does not) require the shared token."""
    def op(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return _operation(*args, token_required=token_required, **kwargs)

    spec: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "guardtrace query API", "version": __version__,
                 "description": "The stored guard telemetry as JSON: one request's spans, "
                 "events and debug payloads, recent requests by outcome, rates per module "
                 "and top agents. Errors are JSON too: an `error` code, a `message` and, "
                 "for a bad parameter, its name."},
        "paths": {
            paths.REQUESTS: op("listRequests", "Recent requests by outcome, newest first",
                               "RecentRequests", ("Since", "Outcome", "Module", "Limit")),
            paths.REQUEST: op("getRequest", "One request's lookup row, spans and span events "
                              "in time order", "Trace", ("RequestId",), request=True),
            paths.REQUEST_PAYLOADS: op(
                "getRequestPayloads", "One request's debug payloads, chunks joined and "
                "checked", "Payloads", ("RequestId", "Kind"), request=True,
                description="Each body is checked against the size and sha256 the agent "
                "recorded: `integrity` says what it is, `problem` why it cannot be trusted."),
            paths.RATES: op("getRates", "Recovery and unrecoverable rates and guard events, "
                            "over all modules and per module", "RatesByModule",
                            ("Since", "Module")),
            paths.AGENTS: op("getTopAgents", "The agents with the most events of one name",
                             "AgentRanking", ("Since", "Module", "Event", "Top")),
            paths.STATS: op("getStats", "Rows per table and span events per name", "Stats",
                            ()),
        },
        "components": {"schemas": _SCHEMAS, "parameters": _PARAMETERS,
                       "responses": _RESPONSES},
    }
    if token_required:
        spec["components"]["securitySchemes"] = {
            "sharedToken": {"type": "http", "scheme": "bearer",
                            "description": "GUARDTRACE_DASHBOARD_TOKEN, the dashboard's "
                            "shared token."}}
        spec["security"] = [{"sharedToken": []}]
    return spec
