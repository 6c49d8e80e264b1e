"""What each path of the API answers, apart from HTTP: a method, a target (path and
query) and the request's headers in, a status, a JSON body and headers out.

Every answer is JSON. Input is checked before the store is read: a malformed request
id is a 400 (the one request-id rule, :mod:`guardtrace.schemas.request_ids`), an
unknown one a 404, a bad query parameter a 400 naming it; the store being unavailable
is a 503. Nothing a client sends is a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from ..schemas import names
from ..schemas.request_ids import InvalidRequestId, validate_request_id
from ..store.queries import OUTCOMES, RequestNotFound
from . import documents, openapi, paths
from .access import ApiAccess
from .errors import (
    BAD_REQUEST_ID,
    INTERNAL_ERROR,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    REQUEST_NOT_FOUND,
    ApiError,
)
from .parameters import DEFAULT_LIMIT, DEFAULT_TOP, MAX_LIMIT, MAX_TOP, QueryParameters
from .store_link import StoreLink

__all__ = ["Answer", "QueryApi"]

logger = logging.getLogger("guardtrace.api")

_INTERNAL_ERROR = {"status": 500, "error": INTERNAL_ERROR,
                   "message": "the server failed; the reason is in its log"}


@dataclass(frozen=True)
class Answer:
    """One response: its status, its JSON body and any extra headers."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class QueryApi:
    """The API's answers, over one store.

    Args:
        store: The store to read.
        access: Who may read (default: loopback visitors only, no token).
    """

    def __init__(self, store: StoreLink, access: ApiAccess | None = None) -> None:
        self._store = store
        self._access = access or ApiAccess("")
        self._document = openapi.document(token_required=self._access.token_required)
        # path template -> (query parameters it takes, what answers it)
        self._routes: dict[str, tuple[tuple[str, ...], Callable[..., Any]]] = {
            paths.OPENAPI: ((), self._openapi),
            paths.REQUESTS: (("since", "outcome", "module", "limit"), self._recent),
            paths.REQUEST: ((), self._trace),
            paths.REQUEST_PAYLOADS: (("kind",), self._payloads),
            paths.RATES: (("since", "module"), self._rates),
            paths.AGENTS: (("since", "module", "event", "top"), self._agents),
            paths.STATS: ((), self._stats),
        }

    def answer(self, method: str, target: str, headers: Mapping[str, str],
               peer: str | None = None) -> Answer:
        """The response to one request.

        Args:
            method: The HTTP method.
            target: The request target: path, then ``?`` and the query, if any.
            headers: The request's headers.
            peer: The client's address (None: in-process).
        """
        try:
            path, _, query = target.partition("?")
            template, request_id = _route(path)
            if template not in self._routes:
                raise ApiError(404, NOT_FOUND, f"no such path; the API's paths are in "
                               f"{paths.OPENAPI}")
            if method != "GET":
                raise ApiError(405, METHOD_NOT_ALLOWED, "the API answers GET only",
                               headers={"Allow": "GET"})
            self._access.check(headers, peer)
            allowed, handler = self._routes[template]
            parameters = QueryParameters(query, allowed)
            if request_id is None:
                return Answer(200, handler(parameters))
            return Answer(200, handler(_request_id(request_id), parameters))
        except ApiError as error:
            return Answer(error.status, error.document(), error.headers)
        except Exception:  # a bug must still answer JSON (and be logged), not drop the socket
            logger.exception("the API failed on %s %s", method, target[:200])
            return Answer(500, dict(_INTERNAL_ERROR))

    # -- the paths ----------------------------------------------------------------------------
    def _openapi(self, _parameters: QueryParameters) -> Any:
        return self._document

    def _trace(self, request_id: str, _parameters: QueryParameters) -> Any:
        trace = self._store.read(lambda reads: _found(reads.trace, request_id))
        return documents.trace_document(trace)

    def _payloads(self, request_id: str, parameters: QueryParameters) -> Any:
        kind = parameters.text("kind")
        request, payloads = self._store.read(
            lambda reads: _found(reads.payloads, request_id, kind))
        return documents.payloads_document(request, payloads)

    def _recent(self, parameters: QueryParameters) -> Any:
        window = parameters.window()
        outcome = parameters.choice("outcome", (*OUTCOMES, "all"), "problems")
        module = parameters.text("module")
        limit = parameters.integer("limit", DEFAULT_LIMIT, MAX_LIMIT)
        found = self._store.read(
            lambda reads: reads.recent(window.seconds, outcome, module, limit))
        return documents.recent_document(window.start, outcome, module, found)

    def _rates(self, parameters: QueryParameters) -> Any:
        window = parameters.window()
        module = parameters.text("module")
        total, modules = self._store.read(
            lambda reads: reads.rates(window.start, window.end, module))
        return documents.rates_document(window.start, window.end, total, modules)

    def _agents(self, parameters: QueryParameters) -> Any:
        window = parameters.window()
        module = parameters.text("module")
        event = parameters.choice("event", names.GUARD_EVENTS,
                                  names.EVENT_HALLUCINATION_DETECTED)
        top = parameters.integer("top", DEFAULT_TOP, MAX_TOP)
        ranking = self._store.read(
            lambda reads: reads.top_agents(window.start, window.end, module, event, top))
        return documents.agents_document(window.start, window.end, module, event, ranking)

    def _stats(self, _parameters: QueryParameters) -> Any:
        return self._store.read(lambda reads: reads.stats())


def _route(path: str) -> tuple[str, str | None]:
    """The path template ``path`` matches and its request id (still percent-encoded), or
    ``path`` itself and None. Split before decoding: an id may hold an encoded ``/``."""
    parts = path.split("/")
    prefix = paths.REQUESTS.split("/")
    if len(parts) in (4, 5) and parts[:3] == prefix:
        if len(parts) == 4:
            return paths.REQUEST, parts[3]
        if parts[4] == paths.REQUEST_PAYLOADS.rsplit("/", 1)[1]:
            return paths.REQUEST_PAYLOADS, parts[3]
    return path, None


def _request_id(encoded: str) -> str:
    try:
        return validate_request_id(unquote(encoded, errors="strict"))
    except (InvalidRequestId, UnicodeDecodeError) as exc:
        message = (str(exc) if isinstance(exc, InvalidRequestId)
                   else "not a request id: its percent-encoding is not UTF-8")
        raise ApiError(400, BAD_REQUEST_ID, message, parameter="request_id") from None


def _found(read: Callable[..., Any], request_id: str, *args: Any) -> Any:
    try:
        return read(request_id, *args)
    except RequestNotFound as exc:
        raise ApiError(404, REQUEST_NOT_FOUND, str(exc), parameter="request_id") from None
