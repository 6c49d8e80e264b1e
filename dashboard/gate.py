"""The sign-in gate's decisions, apart from Streamlit: is this visit let in, and a token right.

:mod:`guardtrace.dashboard.auth` gathers what Streamlit knows about a visit into a
:class:`Visit`, asks :func:`decide`, and shows the sign-in or the pages accordingly.
Kept free of Streamlit so every rule here is tested with plain values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

# The shared token's rules live below the dashboard, where the HTTP API reads them too;
# re-exported here, where the dashboard's callers have always found them.
from ..schemas.access_tokens import (
    FailedAttempts,
    TokenCheck,
    bearer_token,
    check_token,
    token_matches,
)
from ..schemas.dashboard_access import AccessSettings, SignIn, is_loopback

__all__ = ["FailedAttempts", "Outcome", "TokenCheck", "Verdict", "Visit", "bearer_token",
           "check_token", "decide", "email_allowed", "token_matches"]


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
