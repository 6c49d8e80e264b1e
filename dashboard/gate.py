"""The sign-in gate's decisions, apart from Streamlit: is this visit let in, and a token right.

:mod:`guardtrace.dashboard.auth` gathers what Streamlit knows about a visit into a
:class:`Visit`, asks :func:`decide`, and shows the sign-in or the pages accordingly.
Kept free of Streamlit so every rule here is tested with plain values.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..schemas.dashboard_access import AccessSettings, SignIn, is_loopback

__all__ = ["FailedAttempts", "Outcome", "TokenCheck", "Verdict", "Visit", "bearer_token",
           "check_token", "decide", "email_allowed", "token_matches"]

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

    For a proxy or a script in front of the dashboard: a browser sends no such header on
    its own. The header's name and scheme are matched without case, as HTTP has them.
    """
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def email_allowed(claims: Mapping[str, Any], settings: AccessSettings) -> bool:
    """Whether an OIDC identity's e-mail is on the allow-list.

    An address the provider says is unverified is refused: anyone can put any address
    on an account at some providers. A provider that sends no ``email_verified`` claim
    vouches for its addresses itself (a company directory), so none is required.
    """
    email = claims.get("email")
    if not isinstance(email, str) or claims.get("email_verified") is False:
        return False
    email = email.strip().lower()
    local, at, domain = email.partition("@")
    if not (local and at and domain) or "@" in domain:
        return False
    return email in settings.allowed_emails or domain in settings.allowed_domains


class FailedAttempts:
    """Failed token attempts per client address, in a sliding window (thread-safe: each
    browser session runs its script on a thread of its own).

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


class Outcome(Enum):
    OPEN = "open"                # no sign-in configured, and a loopback-only visit
    SIGNED_IN = "signed in"      # the token (this session or a header) or an allowed OIDC user
    SIGN_IN = "sign in"          # show the sign-in
    NOT_ALLOWED = "not allowed"  # signed in with OIDC, but not on the allow-list
    UNPROTECTED = "unprotected"  # no sign-in configured, and served or visited from afar


@dataclass(frozen=True)
class Visit:
    """What the gate knows about one run of the app.

    Attributes:
        server_address: The address the server was told to listen on; None when it was
            told none (Streamlit then listens on every interface).
        remote_ip: The visitor's address as the server saw it; None on loopback, or
            when there is no connection to see (a test harness runs the app in-process).
        session_signed_in: The shared token was given earlier in this browser session.
        bearer: The token of an ``Authorization: Bearer`` header, if one came.
        identity: The OIDC identity's claims when signed in with ``st.login``.
    """

    server_address: str | None
    remote_ip: str | None = None
    session_signed_in: bool = False
    bearer: str | None = None
    identity: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Verdict:
    """The gate's answer.

    Attributes:
        outcome: Let in, or what to show instead.
        via: How a signed-in visitor signed in: ``token`` (in this session's sign-in
            form), ``header`` (a bearer token) or ``oidc``.
        email: The OIDC identity's e-mail, lower case (signed in or not allowed).
        token_check: The check of a bearer token, when one was compared (a failure is
            counted, and the visitor slowed, like a wrong token in the form).
    """

    outcome: Outcome
    via: str = ""
    email: str = ""
    token_check: TokenCheck | None = None


def decide(settings: AccessSettings, sign_in: SignIn, visit: Visit,
           attempts: FailedAttempts, client: str) -> Verdict:
    """Let ``visit`` in, or say what to show it instead."""
    if not sign_in.required:
        # The visitor's own address decides even when the server was started some other
        # way than the CLI (which refuses a wider address): `streamlit run` listens on
        # every interface unless told otherwise.
        served_locally = visit.server_address is None or is_loopback(visit.server_address)
        visitor_local = visit.remote_ip is None or is_loopback(visit.remote_ip)
        return Verdict(Outcome.OPEN if served_locally and visitor_local
                       else Outcome.UNPROTECTED)
    if sign_in.token and visit.session_signed_in:
        return Verdict(Outcome.SIGNED_IN, via="token")
    checked = None
    if sign_in.token and visit.bearer is not None:
        checked = check_token(visit.bearer, settings.token, attempts, client)
        if checked.ok:
            return Verdict(Outcome.SIGNED_IN, via="header", token_check=checked)
    identity = visit.identity or {}
    if sign_in.providers and identity.get("is_logged_in"):
        email = str(identity.get("email") or "").strip().lower()
        outcome = Outcome.SIGNED_IN if email_allowed(identity, settings) else Outcome.NOT_ALLOWED
        return Verdict(outcome, via="oidc", email=email, token_check=checked)
    return Verdict(Outcome.SIGN_IN, token_check=checked)
