"""The API's errors: an HTTP status and a JSON body that says what went wrong."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["BAD_PARAMETER", "BAD_REQUEST_ID", "FORBIDDEN", "INTERNAL_ERROR", "MALFORMED_REQUEST",
           "METHOD_NOT_ALLOWED", "NOT_FOUND", "REQUEST_NOT_FOUND", "STORE_UNAVAILABLE",
           "TOO_MANY_ATTEMPTS", "UNAUTHORIZED", "ApiError"]

# The ``error`` field of an error body: a stable code a script can branch on.
BAD_PARAMETER: Final = "bad_parameter"
BAD_REQUEST_ID: Final = "bad_request_id"
REQUEST_NOT_FOUND: Final = "request_not_found"
NOT_FOUND: Final = "not_found"
METHOD_NOT_ALLOWED: Final = "method_not_allowed"
UNAUTHORIZED: Final = "unauthorized"
FORBIDDEN: Final = "forbidden"
TOO_MANY_ATTEMPTS: Final = "too_many_attempts"
STORE_UNAVAILABLE: Final = "store_unavailable"
# Not an answer of a path: an HTTP request the server could not read, and a server bug.
MALFORMED_REQUEST: Final = "malformed_request"
INTERNAL_ERROR: Final = "internal_error"


class ApiError(Exception):
    """A request the API answers with an error status instead of data.

    Args:
        status: The HTTP status.
        error: One of the codes of this module.
        message: What went wrong, for people.
        parameter: The query or path parameter at fault, when one is.
        headers: Extra response headers (``WWW-Authenticate``, ``Retry-After``, ``Allow``).
    """

    def __init__(self, status: int, error: str, message: str, *, parameter: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.parameter = parameter
        self.headers = dict(headers or {})

    def document(self) -> dict[str, Any]:
        """The JSON body: ``status``, ``error``, ``message`` and, if any, ``parameter``."""
        body: dict[str, Any] = {"status": self.status, "error": self.error,
                                "message": self.message}
        if self.parameter is not None:
            body["parameter"] = self.parameter
        return body
