"""Who may read the API: the dashboard's shared token, by the same rules.

The API serves every captured prompt and response, as the dashboard does, so the same
rule holds (:mod:`guardtrace.schemas.dashboard_access`): with ``GUARDTRACE_DASHBOARD_TOKEN``
set, every request must carry it as ``Authorization: Bearer <token>`` (compared in
constant time, failed attempts limited per client address and each slowed, as at the
dashboard's sign-in: :mod:`guardtrace.schemas.access_tokens`); without it the API serves
this machine only, refusing a wider listen address at start and any visitor from
elsewhere. OIDC sign-in is a browser's; a script has the token.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

from ..schemas import dashboard_access as access
from ..schemas import environment_variables as env
from ..schemas.access_tokens import FailedAttempts, bearer_token, check_token
from .errors import FORBIDDEN, TOO_MANY_ATTEMPTS, UNAUTHORIZED, ApiError

__all__ = ["FAILED_ATTEMPT_DELAY_S", "ApiAccess", "serving_refusal"]

# As at the dashboard's sign-in: a script trying tokens is slowed, a typo barely noticed.
FAILED_ATTEMPT_DELAY_S = 1.0
# Loopback visitors share one count (as all visitors behind one proxy share its address).
_LOOPBACK_CLIENT = "loopback"
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="guardtrace"'}


def serving_refusal(address: str, token: str) -> str | None:
    """Why the API may not listen on ``address`` with this token, or None.

    A token shorter than the dashboard's minimum is refused wherever the API listens.
    """
    if token and len(token) < access.MIN_TOKEN_LENGTH:
        return (f"{env.DASHBOARD_TOKEN.name} is shorter than {access.MIN_TOKEN_LENGTH} "
                "characters (generate one with `openssl rand -hex 24`)")
    if token or access.is_loopback(address):
        return None
    return (f"the HTTP API serves every captured prompt and response and signs in with the "
            f"shared token only: without {env.DASHBOARD_TOKEN.name} it serves loopback only "
            f"(127.0.0.1, ::1, localhost), not {address or 'every interface'}. Set "
            f"{env.DASHBOARD_TOKEN.name} ({access.MIN_TOKEN_LENGTH} characters or more, e.g. "
            "from `openssl rand -hex 24`), or keep the API on 127.0.0.1.")


class ApiAccess:
    """Admits or refuses one request.

    Args:
        token: The shared token; empty for none (loopback visitors only).
        attempts: Failed attempts per client (one count for the server's life).
        failed_attempt_delay_s: How long a wrong token is held before its answer.
        sleep: Waits that long (replaceable in tests).
    """

    def __init__(self, token: str, attempts: FailedAttempts | None = None,
                 failed_attempt_delay_s: float = FAILED_ATTEMPT_DELAY_S,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.token = token
        self._attempts = attempts or FailedAttempts()
        self._delay_s = failed_attempt_delay_s
        self._sleep = sleep

    @property
    def token_required(self) -> bool:
        return bool(self.token)

    def check(self, headers: Mapping[str, str], peer: str | None) -> None:
        """Return if the request may be answered, else raise.

        Args:
            headers: The request's headers.
            peer: The client's address as the server saw it (None: in-process).

        Raises:
            ApiError: 401 without the right token, 429 past the failed-attempt limit,
                403 from beyond loopback when no token is configured.
        """
        remote = peer is not None and not access.is_loopback(peer)
        if not self.token:
            if remote:
                raise ApiError(403, FORBIDDEN, "this API has no token configured, so it "
                               "answers its own machine only; its operator can set "
                               f"{env.DASHBOARD_TOKEN.name}, which you then send as "
                               "`Authorization: Bearer <token>`")
            return
        given = bearer_token(headers)
        if given is None:
            raise ApiError(401, UNAUTHORIZED, "send the shared token "
                           f"({env.DASHBOARD_TOKEN.name}) as `Authorization: Bearer <token>`",
                           headers=_CHALLENGE)
        client = peer if remote and peer else _LOOPBACK_CLIENT
        checked = check_token(given, self.token, self._attempts, client)
        if checked.ok:
            return
        if checked.compared and self._delay_s > 0:
            self._sleep(self._delay_s)
        if not checked.compared:
            wait = max(1, math.ceil(checked.retry_after_s))
            raise ApiError(429, TOO_MANY_ATTEMPTS, "too many failed attempts from your "
                           f"address; try again in {wait} s",
                           headers={"Retry-After": str(wait)})
        raise ApiError(401, UNAUTHORIZED, "the token of the Authorization header was not "
                       "accepted", headers=_CHALLENGE)
