"""``guardtrace trace | payload | requests | stats``: what happened to one request, and
what the store holds, from the shell.

All four read through :mod:`guardtrace.store.queries`, the same functions the dashboard
uses, so the CLI and the request page always agree: straight from the store, or, while
a running ``guardtrace up`` holds the embedded store (which one process alone may open),
through the HTTP API that up serves (:mod:`guardtrace.api`), with the same output either
way. A request id that breaks the request-id rule is a usage error (exit status 2)
naming the problem, not a lookup that finds nothing. The text format prints stored text
through :func:`~guardtrace.cli.terminal_text.terminal_safe`; ``--json`` prints it exactly.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from ..schemas import environment_variables as env
from ..schemas.request_ids import InvalidRequestId, validate_request_id
from .support import (
    STORE_MODULES,
    CommandError,
    add_store_args,
    duration,
    positive_int,
)
from .terminal_text import terminal_safe

__all__ = ["MAX_LIMIT", "register"]

# The most requests `guardtrace requests` lists, the API's bound too (through it or not,
# the same list).
MAX_LIMIT = 10_000


def request_id_argument(text: str) -> str:
    """The argparse type of a request id: a bad one exits 2 with the rule's message."""
    try:
        return validate_request_id(text)
    except InvalidRequestId as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class Reads(Protocol):
    """What the commands read: :class:`guardtrace.api.StoreReads` (the store itself) or
    :class:`guardtrace.api.ApiClient` (the API of the ``up`` that holds it)."""

    database: str

    def trace(self, request_id: str) -> Any: ...

    def payloads(self, request_id: str, kind: str | None = None) -> tuple[Any, list[Any]]: ...

    def recent(self, since_s: float, outcome: str, module: str | None,
               limit: int) -> list[Any]: ...

    def stats(self) -> dict[str, Any]: ...


def _reads(args: argparse.Namespace) -> Reads:
    """The store of ``--clickhouse-url`` / ``--database``: through the API of a running
    ``guardtrace up`` that holds it, else opened here (checked to be migrated)."""
    from ..api.reads import StoreReads
    from ..api.running import RunningUp
    from ..store.access import open_migrated
    from ..store.connection import StoreConfig, StoreLockedError

    config = StoreConfig.resolve(url=args.clickhouse_url, database=args.database)
    store_dir = config.embedded_path
    running = RunningUp.read(store_dir) if store_dir is not None else None
    if running is None:
        return StoreReads(open_migrated(config), config.database)
    api_problem = _api_client_or_problem(running, config.database)
    if isinstance(api_problem, str):
        try:
            # A record outliving its up (killed, and its process id reused): the store
            # then opens, and the record means nothing.
            return StoreReads(open_migrated(config), config.database)
        except StoreLockedError:
            raise CommandError(f"guardtrace up (PID {running.pid}) holds the store at "
                               f"{store_dir}, and {api_problem}") from None
    return api_problem


def _api_client_or_problem(running: Any, database: str) -> Reads | str:
    """A client on ``running``'s API, checked to answer; or why it cannot serve."""
    from ..api.client import ApiClient, ApiFailed, ApiUnreachable
    from ..schemas.dashboard_access import AccessSettings

    if not running.api_url:
        return ("it serves no HTTP API (started with --api-port 0): query the store once it "
                "stops, or start it with an API port")
    if running.database != database:
        return (f"its API serves database {running.database!r}, not {database!r}: query "
                f"{database!r} once it stops")
    client = ApiClient(running.api_url, database, token=AccessSettings.resolve().token)
    try:
        client.ping()
    except ApiUnreachable as exc:
        return f"its HTTP API does not answer ({exc}); is it still starting, or stuck?"
    except ApiFailed as exc:
        raise CommandError(_api_failure(exc)) from None
    return client


def _api_failure(failure: Any) -> str:
    if failure.status in (401, 429):
        return (f"the HTTP API of guardtrace up at {failure.url} refused the request "
                f"({failure.message}): set {env.DASHBOARD_TOKEN.name} to the token up runs "
                "with")
    return (f"the HTTP API of guardtrace up at {failure.url} answered {failure.status}: "
            f"{failure.message}")


def _api_errors(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A failure of the API once a command has begun, as one clear line (exit status 1)."""
    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        from ..api.client import ApiFailed, ApiUnreachable

        try:
            return command(args)
        except ApiUnreachable as exc:
            raise CommandError(f"the HTTP API of guardtrace up stopped answering: {exc}") \
                from None
        except ApiFailed as exc:
            raise CommandError(_api_failure(exc)) from None

    return run


def _lookup(read: Callable[..., Any], request_id: str, *more: Any) -> Any:
    from ..store.queries import RequestNotFound

    try:
        return read(request_id, *more)
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
@_api_errors
def cmd_trace(args: argparse.Namespace) -> int:
    from ..schemas import names

    reads = _reads(args)
    trace = _lookup(reads.trace, args.request_id)
    request = trace.request
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
@_api_errors
def cmd_payload(args: argparse.Namespace) -> int:
    from ..store.queries import PayloadIntegrity

    request_id = args.request_id
    reads = _reads(args)
    request, payloads = _lookup(reads.payloads, request_id, args.kind)
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
@_api_errors
def cmd_requests(args: argparse.Namespace) -> int:
    rows = _reads(args).recent(args.since, args.outcome, args.module, args.limit)
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


# -- stats ---------------------------------------------------------------------------------
@_api_errors
def cmd_stats(args: argparse.Namespace) -> int:
    result = _reads(args).stats()
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(f"database {result['database']}")
        for table, count in result["tables"].items():
            print(f"  {table:<16} {count:>12,}")
        print("span events by name:")
        for name, count in result["events"].items():
            print(f"  {name:<45} {count:>12,}")
    return 0


def _describe(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _limit(text: str) -> int:
    """How many requests to list: 1 to :data:`MAX_LIMIT`."""
    value = positive_int(text)
    if value > MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_LIMIT:,}, got {value}")
    return value


def register(sub: Any) -> None:
    """Add the trace, payload, requests and stats subcommands."""
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
    p.add_argument("--limit", type=_limit, default=50,
                   help=f"at most this many (default 50, up to {MAX_LIMIT:,})")
    add_store_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_requests, needs=STORE_MODULES)

    p = sub.add_parser("stats", help="row counts per table and per event name",
                       description="Count rows per table (deduplicated) and span events per "
                       "event name in ClickHouse.")
    add_store_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_stats, needs=STORE_MODULES)
