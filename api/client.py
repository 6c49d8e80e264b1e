"""The CLI's side of the API: the same reads as :class:`~guardtrace.api.reads.StoreReads`,
over HTTP, returning the same models (read back from the documents).

Used by ``guardtrace trace | payload | requests | stats`` while a running ``guardtrace
up`` holds the embedded store. Proxies are never used: the API's address is where up
said it listens (this machine, most often), not a destination on the internet.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlencode

from ..store.queries import Payload, RequestNotFound, RequestSummary, Trace
from . import documents, paths
from .errors import REQUEST_NOT_FOUND

__all__ = ["ApiClient", "ApiFailed", "ApiUnreachable"]


class ApiUnreachable(Exception):
    """The API did not answer (refused, timed out, not HTTP)."""


class ApiFailed(Exception):
    """The API answered with an error.

    Attributes:
        url: The API's base URL.
        status: The HTTP status.
        error: The error code of the body (``bad_parameter``, ...), or ``""``.
        message: The body's message (or what was wrong with the answer).
    """

    def __init__(self, url: str, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.error = error
        self.message = message


class ApiClient:
    """Reads a store through its API.

    Args:
        base_url: ``http://host:port`` of the API.
        database: The database the API serves (named in not-found errors).
        token: The shared token to send, if any.
        timeout_s: Per request (a payload may be megabytes).
    """

    def __init__(self, base_url: str, database: str, token: str = "",
                 timeout_s: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.database = database
        self._token = token
        self._timeout_s = timeout_s
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def get(self, path: str, parameters: dict[str, Any] | None = None) -> Any:
        """The JSON document at ``path``.

        Raises:
            ApiUnreachable: no answer.
            ApiFailed: an error status (or an answer that is not JSON).
        """
        query = {k: v for k, v in (parameters or {}).items() if v is not None}
        url = self.base_url + path + (f"?{urlencode(query)}" if query else "")
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self._token:
            request.add_header("Authorization", f"Bearer {self._token}")
        try:
            with self._opener.open(request, timeout=self._timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            raise _failure(self.base_url, exc.code, exc.read()) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiUnreachable(f"{self.base_url} did not answer: {reason}") from None
        try:
            return json.loads(body)
        except ValueError:
            raise ApiFailed(self.base_url, 200, "", "the answer is not JSON") from None

    def ping(self) -> None:
        """Check that the API answers (and takes our token), by reading its document."""
        self.get(paths.OPENAPI)

    def trace(self, request_id: str) -> Trace:
        """As :meth:`StoreReads.trace`; raises RequestNotFound for an unknown id."""
        return documents.trace_from(self._request(paths.REQUEST, request_id))

    def payloads(self, request_id: str,
                 kind: str | None = None) -> tuple[RequestSummary, list[Payload]]:
        """As :meth:`StoreReads.payloads`; raises RequestNotFound for an unknown id."""
        return documents.payloads_from(
            self._request(paths.REQUEST_PAYLOADS, request_id, {"kind": kind}))

    def recent(self, since_s: float, outcome: str, module: str | None,
               limit: int) -> list[RequestSummary]:
        """As :meth:`StoreReads.recent`."""
        return documents.recent_from(self.get(paths.REQUESTS, {
            "since": _seconds(since_s), "outcome": outcome, "module": module,
            "limit": limit}))

    def stats(self) -> dict[str, Any]:
        """As :meth:`StoreReads.stats`."""
        result: dict[str, Any] = self.get(paths.STATS)
        return result

    def _request(self, template: str, request_id: str,
                 parameters: dict[str, Any] | None = None) -> Any:
        try:
            return self.get(paths.request_path(template, request_id), parameters)
        except ApiFailed as exc:
            if exc.status == 404 and exc.error == REQUEST_NOT_FOUND:
                raise RequestNotFound(request_id, self.database) from None
            raise


def _seconds(value: float) -> str:
    """A number of seconds as the API's ``since`` takes it (no exponent, no trailing 0)."""
    return f"{value:.6f}".rstrip("0").rstrip(".") + "s"


def _failure(url: str, status: int, body: bytes) -> ApiFailed:
    try:
        document = json.loads(body)
        return ApiFailed(url, status, str(document.get("error", "")),
                         str(document.get("message", "")))
    except (ValueError, AttributeError):
        return ApiFailed(url, status, "", f"HTTP status {status}")
