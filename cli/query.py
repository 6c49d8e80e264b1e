"""``guardtrace trace | payload | requests``: what happened to one request, from the shell.

All three read through :mod:`guardtrace.store.queries`, the same functions the
dashboard uses, so the CLI and the request page always agree. A request id that breaks
the request-id rule is a usage error (exit status 2) naming the problem, not a lookup
that finds nothing. The text format prints stored text through
:func:`~guardtrace.cli.terminal_text.terminal_safe`; ``--json`` prints it exactly.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from ..schemas.request_ids import InvalidRequestId, validate_request_id
from .support import (
    STORE_MODULES,
    CommandError,
    add_store_args,
    duration,
    open_store,
    positive_int,
)
from .terminal_text import terminal_safe

__all__ = ["register"]


def request_id_argument(text: str) -> str:
    """The argparse type of a request id: a bad one exits 2 with the rule's message."""
    try:
        return validate_request_id(text)
    except InvalidRequestId as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _open(args: argparse.Namespace) -> tuple[Any, str]:
    config, client = open_store(args)
    return client, config.database


def _lookup(client: Any, database: str, request_id: str) -> Any:
    from ..store.queries import RequestNotFound, require_request

    try:
        return require_request(client, database, request_id)
    except RequestNotFound as exc:
        raise CommandError(f"{exc}; list recent ones with "
                           f"`guardtrace requests --since 24h --outcome all`.") from None


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _print_json(data: Any) -> None:
    print(json.dumps(data, default=_json_default, sort_keys=True))


def _attributes_text(attributes: dict[str, str], skip: tuple[str, ...] = ()) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(attributes.items()) if k not in skip)


def _listed(values: tuple[str, ...], empty: str = "none") -> str:
    return ", ".join(values) or empty


# -- trace ---------------------------------------------------------------------------------
def cmd_trace(args: argparse.Namespace) -> int:
    from ..schemas import names
    from ..store.queries import request_trace

    client, database = _open(args)
    request = _lookup(client, database, args.request_id)
    trace = request_trace(client, database, request)
    timeline = trace.timeline()
    if args.json:
        _print_json({"request_id": request.request_id, "first_seen": request.first_seen,
                     "last_seen": request.last_seen, "trace_ids": list(request.trace_ids),
                     "modules": list(request.modules), "agents": list(request.agents),
                     "payload_kinds": list(request.payload_kinds), "timeline": timeline})
        return 0
    print(terminal_safe(
        f"request {request.request_id}  {request.first_seen:%Y-%m-%d %H:%M:%S.%f} UTC  "
        f"{len(trace.spans)} span(s), {len(trace.events)} event(s), "
        f"payloads: {_listed(request.payload_kinds)}"))
    print(terminal_safe(f"traces: {_listed(request.trace_ids)}"))
    start = timeline[0]["time"] if timeline else request.first_seen
    for item in timeline:
        offset_ms = (item["time"] - start).total_seconds() * 1000
        if item["type"] == "span":
            line = (f"span   {item['name']}  ({item['duration_ms']:.3f} ms, {item['status']}, "
                    f"{item['service']})")
        else:
            attrs = _attributes_text(item["attributes"],
                                     skip=(names.ATTR_REQUEST_ID, names.ATTR_MODULE))
            line = f"event  {item['name']}  [{item['module']}]  {attrs}"
        print(f"{offset_ms:>10.3f} ms  {terminal_safe(line)}")
    return 0


# -- payload -------------------------------------------------------------------------------
def cmd_payload(args: argparse.Namespace) -> int:
    from ..store.queries import PayloadIntegrity, request_payloads

    request_id = args.request_id
    client, database = _open(args)
    request = _lookup(client, database, request_id)
    payloads = request_payloads(client, database, request_id, kind=args.kind)
    if not payloads:
        kinds = _listed(request.payload_kinds, "none recorded")
        what = f"of kind {args.kind!r} " if args.kind else ""
        raise CommandError(terminal_safe(f"request {request_id!r} has no debug payloads "
                                         f"{what}(kinds stored for it: {kinds})"))
    if args.json:
        _print_json([{"payload_id": p.payload_id, "request_id": p.request_id, "kind": p.kind,
                      "timestamp": p.timestamp, "trace_id": p.trace_id, "span_id": p.span_id,
                      "body": p.body, "body_bytes": p.body_bytes, "body_sha256": p.body_sha256,
                      "truncated": p.truncated, "redactions": p.redactions,
                      "attributes": p.attributes, "complete": p.complete,
                      "integrity": p.integrity, "problem": p.problem}
                     for p in payloads])
        return 0
    for payload in payloads:
        marks = []
        if payload.redactions:
            marks.append(f"{payload.redactions} secret(s) redacted")
        if payload.truncated:
            marks.append(f"TRUNCATED (original {payload.body_bytes:,} bytes, sha256 "
                         f"{payload.body_sha256[:16]}…)")
        if not payload.complete:
            marks.append(f"INCOMPLETE ({payload.chunks_present}/{payload.chunk_count} chunks)")
        elif payload.integrity is PayloadIntegrity.CHECKSUM_MISMATCH:
            marks.append(f"CHECKSUM MISMATCH (not the body sent: {payload.body_bytes:,} bytes, "
                         f"sha256 {payload.body_sha256[:16]}…)")
        print(terminal_safe(f"=== {payload.kind}  {payload.timestamp:%Y-%m-%d %H:%M:%S} UTC  "
                            f"{payload.body_bytes:,} bytes  {payload.payload_id}"
                            + (f"  [{'; '.join(marks)}]" if marks else "")))
        sys.stdout.write(terminal_safe(payload.body, keep_newlines=True))
        sys.stdout.write("\n")
    return 0


# -- requests ------------------------------------------------------------------------------
def cmd_requests(args: argparse.Namespace) -> int:
    from ..store.queries import recent_requests

    client, database = _open(args)
    since = datetime.now(UTC) - timedelta(seconds=args.since)
    rows = recent_requests(client, database, since=since, outcome=args.outcome,
                           module=args.module, limit=args.limit)
    if args.json:
        _print_json([{"request_id": r.request_id, "first_seen": r.first_seen,
                      "last_seen": r.last_seen, "events": list(r.event_names),
                      "modules": list(r.modules), "agents": list(r.agents),
                      "payload_kinds": list(r.payload_kinds)} for r in rows])
        return 0
    if not rows:
        print(terminal_safe(f"no requests with outcome {args.outcome!r} in the last "
                            f"{_describe(args.since)}"
                            f"{f' in module {args.module!r}' if args.module else ''}"),
              file=sys.stderr)
        return 0
    print(f"{'last seen (UTC)':<20} {'request id':<36} events")
    for row in rows:
        events = ", ".join(name.removeprefix("llm.") for name in row.event_names)
        print(terminal_safe(f"{row.last_seen:%Y-%m-%d %H:%M:%S}  {row.request_id:<36} {events}"))
    return 0


def _describe(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def register(sub: Any) -> None:
    """Add the trace, payload and requests subcommands."""
    from ..store.queries import OUTCOMES

    p = sub.add_parser("trace", help="a request's spans and events in time order",
                       description="Print the spans and span events of one request on one "
                       "time axis, read through the request-id lookup table.")
    p.add_argument("request_id", type=request_id_argument,
                   help="the request id (as shown on the dashboard)")
    add_store_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_trace, needs=STORE_MODULES)

    p = sub.add_parser("payload", help="a request's debug payloads, reassembled",
                       description="Print the debug payloads (full prompt/response, allowed "
                       "tools, ...) of one request, chunks joined, with redaction and "
                       "truncation marks.")
    p.add_argument("request_id", type=request_id_argument,
                   help="the request id (as shown on the dashboard)")
    p.add_argument("--kind", default=None,
                   help="only payloads of this kind (e.g. hallucination_detection)")
    add_store_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_payload, needs=STORE_MODULES)

    p = sub.add_parser("requests", help="recent requests with a given outcome",
                       description="List requests seen recently whose guards reported an "
                       "outcome, newest first.")
    p.add_argument("--since", type=duration, default=3600.0, metavar="DURATION",
                   help="how far back: 90s, 15m, 1h, 7d (default 1h)")
    p.add_argument("--outcome", choices=[*OUTCOMES, "all"], default="problems",
                   help="which requests (default problems: hallucinated, unrecoverable, "
                        "fabricated, nudged or bypassed)")
    p.add_argument("--module", default=None, help="only requests of this module")
    p.add_argument("--limit", type=positive_int, default=50, help="at most this many (50)")
    add_store_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_requests, needs=STORE_MODULES)
