"""Reading a health endpoint over real HTTP: the status and the JSON body, 503s included."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def get_json(port: int, path: str, timeout_s: float = 5.0) -> tuple[int, dict[str, Any]]:
    """``(status, JSON body)`` of ``GET http://127.0.0.1:<port><path>``.

    An error status (503 when unhealthy) is returned, not raised; a connection that
    fails raises OSError.
    """
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}",
                                    timeout=timeout_s) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())
