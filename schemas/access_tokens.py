"""The shared token: read from a bearer header, compared in constant time, and failed
attempts limited per client address.

One rule for everything that serves stored data behind ``GUARDTRACE_DASHBOARD_TOKEN``:
the dashboard's sign-in (:mod:`guardtrace.dashboard.gate`) and the HTTP query API
(:mod:`guardtrace.api`). Here, below both, because neither may import the other.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["FAILURE_WINDOW_S", "MAX_CLIENTS", "MAX_FAILURES", "FailedAttempts", "TokenCheck",
           "bearer_token", "check_token", "token_matches"]

# Failed token attempts allowed per client address in a sliding window; beyond it the
# token is not even compared until the window has room again.
MAX_FAILURES = 5
FAILURE_WINDOW_S = 60.0
# Clients remembered at most; a flood of addresses cannot grow memory without bound.
MAX_CLIENTS = 10_000


def token_matches(given: str, expected: str) -> bool:
    """Whether ``given`` is the token, compared in constant time; never for an empty one."""
    if not expected:
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, or None.

    For a proxy or a script: a browser sends no such header on its own. The header's name
    and scheme are matched without case, as HTTP has them.
    """
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class FailedAttempts:
    """Failed token attempts per client address, in a sliding window (thread-safe: each
    browser session, and each API request, runs on a thread of its own).

    Args:
        limit: Failures allowed per client in ``window_s``.
        window_s: The window's length in seconds.
        clock: Seconds, monotonic (a fake one in tests).
        max_clients: Clients remembered at most; the longest-quiet are forgotten first.
    """

    def __init__(self, limit: int = MAX_FAILURES, window_s: float = FAILURE_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic,
                 max_clients: int = MAX_CLIENTS) -> None:
        self._limit = limit
        self._window_s = window_s
        self._clock = clock
        self._max_clients = max_clients
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> deque[float]:
        failures = self._failures.get(client, deque())
        while failures and failures[0] <= now - self._window_s:
            failures.popleft()
        return failures

    def retry_after(self, client: str) -> float:
        """Seconds until ``client`` may try again; 0 when it may now."""
        with self._lock:
            now = self._clock()
            failures = self._recent(client, now)
            if len(failures) < self._limit:
                return 0.0
            return failures[-self._limit] + self._window_s - now

    def record_failure(self, client: str) -> None:
        with self._lock:
            now = self._clock()
            failures = self._recent(client, now)
            failures.append(now)
            # Re-inserted last: the dict's order is then oldest activity first.
            self._failures.pop(client, None)
            self._failures[client] = failures
            while len(self._failures) > self._max_clients:
                del self._failures[next(iter(self._failures))]

    def clear(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)


@dataclass(frozen=True)
class TokenCheck:
    """The answer to one token attempt.

    Attributes:
        ok: The token was right.
        retry_after_s: When not ok and the client is over its limit: seconds to wait.
        compared: Whether the token was compared at all (not when over the limit).
    """

    ok: bool
    retry_after_s: float = 0.0
    compared: bool = True


def check_token(given: str, expected: str, attempts: FailedAttempts, client: str) -> TokenCheck:
    """Compare one attempt, unless ``client`` is over its limit; count a failure."""
    wait = attempts.retry_after(client)
    if wait > 0:
        return TokenCheck(ok=False, retry_after_s=wait, compared=False)
    if token_matches(given, expected):
        attempts.clear(client)
        return TokenCheck(ok=True)
    attempts.record_failure(client)
    return TokenCheck(ok=False, retry_after_s=attempts.retry_after(client))
