"""The HTTP query API: the store's read side as JSON, for scripts and for the CLI while
``guardtrace up`` holds the embedded store.

A reader on top of the store, like the dashboard: it imports the store's read queries
and the schemas, never the consumers, the collectors, the dashboard or the CLI. The
server is the standard library's ``ThreadingHTTPServer`` (no framework to install);
its OpenAPI document is served at ``/openapi.json``.

* :mod:`.handlers`: what each path answers (:class:`QueryApi`), apart from HTTP;
* :mod:`.server`: serving it (:class:`ApiServer`), behind the dashboard's shared token;
* :mod:`.client`: the CLI's side of the wire (:class:`ApiClient`);
* :mod:`.running`: where a running ``guardtrace up`` serves it (:class:`RunningUp`).
"""

from .client import ApiClient, ApiFailed, ApiUnreachable
from .errors import ApiError
from .handlers import QueryApi
from .reads import StoreReads
from .running import RunningUp
from .server import ApiServer

__all__ = ["ApiClient", "ApiError", "ApiFailed", "ApiServer", "ApiUnreachable", "QueryApi",
           "RunningUp", "StoreReads"]
