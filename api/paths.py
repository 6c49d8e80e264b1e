"""The HTTP query API's paths, defined once: the server routes them, the client calls
them, the OpenAPI document describes them."""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

__all__ = ["AGENTS", "OPENAPI", "RATES", "REQUEST", "REQUESTS", "REQUEST_PAYLOADS", "STATS",
           "request_path"]

OPENAPI: Final = "/openapi.json"
REQUESTS: Final = "/v1/requests"
REQUEST: Final = "/v1/requests/{request_id}"
REQUEST_PAYLOADS: Final = "/v1/requests/{request_id}/payloads"
RATES: Final = "/v1/rates"
AGENTS: Final = "/v1/agents"
STATS: Final = "/v1/stats"


def request_path(template: str, request_id: str) -> str:
    """``template`` (:data:`REQUEST` or :data:`REQUEST_PAYLOADS`) for one request id.

    The id is percent-encoded whole: the request-id rule allows ``/``, which must not
    split the path.
    """
    return template.replace("{request_id}", quote(request_id, safe=""))
