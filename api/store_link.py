"""The API's way to the store: opened on first use, checked to be migrated, and any
failure to open or read it a 503 that says so (the store, not the request, is at fault).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..store.access import require_schema
from ..store.connection import StoreConfig, StoreError, open_client
from .errors import STORE_UNAVAILABLE, ApiError
from .reads import StoreReads

__all__ = ["StoreLink"]

logger = logging.getLogger("guardtrace.api")

T = TypeVar("T")


class StoreLink:
    """Opens the store once and runs reads on it.

    Args:
        config: The store to read.
        client: A client already open on it; default: open one on first use (a client of
            its own, as the dashboard has: the embedded engine allows several in the one
            process that holds the store).
    """

    def __init__(self, config: StoreConfig, client: Any = None) -> None:
        self.config = config
        self._client = client
        self._checked = False
        self._lock = threading.Lock()

    @property
    def database(self) -> str:
        return self.config.database

    def _reads(self) -> StoreReads:
        with self._lock:
            if not self._checked:
                try:
                    if self._client is None:
                        self._client = open_client(self.config)
                    require_schema(self._client, self.config.database)
                except StoreError as exc:
                    # guardtrace's own words (what to do, passwords masked): said as they are.
                    raise ApiError(503, STORE_UNAVAILABLE, f"the store is unavailable: {exc}",
                                   headers={"Retry-After": "5"}) from None
                self._checked = True
            return StoreReads(self._client, self.config.database)

    def read(self, reading: Callable[[StoreReads], T]) -> T:
        """``reading(reads)``; a store that cannot be opened or does not answer is a 503.

        Raises:
            ApiError: 503 when the store cannot be opened, is not migrated, or fails a read.
        """
        from clickhouse_connect.driver.exceptions import ClickHouseError

        try:
            return reading(self._reads())
        except (ClickHouseError, OSError) as exc:
            # The engine's own message may hold SQL or the server's details: logged, and
            # the client is told only where to look.
            logger.warning("a read of %s failed: %s", self.config.display_url, exc)
            raise ApiError(503, STORE_UNAVAILABLE, f"the store at {self.config.display_url} "
                           "did not answer the read; the reason is in the server's log",
                           headers={"Retry-After": "5"}) from None
