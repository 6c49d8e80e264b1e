"""The dashboard's sign-in, in Streamlit: app.py calls :func:`admit` before any page.

Every page relies on it: app.py runs a page only for a visitor :func:`admit` lets in,
so a visitor who has not signed in gets the sign-in and nothing read from the store.
The rules are in :mod:`guardtrace.dashboard.gate` and
:mod:`guardtrace.schemas.dashboard_access`; this module gathers what Streamlit knows
about the visit and shows the answer.

The shared token is typed into a form (cleared once submitted; never shown back) and
remembered in the browser session, so each new tab or reload asks again. OIDC sign-in is
Streamlit's ``st.login``, whose cookie keeps the visitor signed in; the allow-list is
checked on every run.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from typing import Any

import streamlit as st

from ..schemas import dashboard_access as access
from ..schemas import environment_variables as env
from .gate import (
    FailedAttempts,
    Outcome,
    TokenCheck,
    Verdict,
    Visit,
    bearer_token,
    check_token,
    decide,
)

__all__ = ["admit"]

logger = logging.getLogger("guardtrace.dashboard.auth")

# Set in a browser session once its visitor gave the shared token.
SESSION_KEY = "guardtrace_signed_in_with_token"
# What a failed attempt costs its session: a script trying tokens is slowed, a person
# who mistyped barely notices. The per-address limit is FailedAttempts, in
# schemas/access_tokens.py.
FAILED_ATTEMPT_DELAY_S = 1.0
# Loopback visitors share one count (as all visitors behind one proxy share its address).
_LOOPBACK_CLIENT = "loopback"
# One count for the server process: a guesser opens a new session for each try.
_ATTEMPTS = FailedAttempts()


def _auth_section() -> Mapping[str, Any] | None:
    """The ``[auth]`` section of Streamlit's secrets, if there is one."""
    if not st.secrets.load_if_toml_exists():
        return None
    section = st.secrets.get("auth")
    return section if isinstance(section, Mapping) else None


def _remote_ip() -> str | None:
    """The visitor's address; None on loopback. Only a string counts: in Streamlit's
    test harness there is no connection, and the value is a stand-in object."""
    address = st.context.ip_address
    return address if isinstance(address, str) else None


def _visit(sign_in: access.SignIn) -> Visit:
    return Visit(
        server_address=st.get_option("server.address"),
        remote_ip=_remote_ip(),
        session_signed_in=bool(st.session_state.get(SESSION_KEY)),
        bearer=bearer_token(st.context.headers) if sign_in.token else None,
        identity=st.user.to_dict() if sign_in.providers else None)


def _slow_down_after(check: TokenCheck | None) -> None:
    if check is not None and check.compared and not check.ok:
        time.sleep(FAILED_ATTEMPT_DELAY_S)


def _token_form(settings: access.AccessSettings, client: str) -> None:
    # clear_on_submit: the typed token does not stay in the widget's state.
    with st.form("guardtrace-sign-in", clear_on_submit=True):
        given = st.text_input("Access token", type="password")
        submitted = st.form_submit_button("Sign in")
    if not submitted:
        return
    check = check_token(given, settings.token, _ATTEMPTS, client)
    if check.ok:
        st.session_state[SESSION_KEY] = True
        st.rerun()
    _slow_down_after(check)
    if check.retry_after_s > 0:
        st.error(f"Too many failed attempts from your address. Try again in "
                 f"{math.ceil(check.retry_after_s)} s.")
    else:
        st.error("That token is not right.")


def _show_sign_in(settings: access.AccessSettings, sign_in: access.SignIn, client: str,
                  verdict: Verdict) -> None:
    st.title("guardtrace")
    st.write("This dashboard shows captured prompts and responses. Sign in to see them.")
    if verdict.token_check is not None and not verdict.token_check.ok:
        st.warning("The token of the request's Authorization header was not accepted.")
    if sign_in.token:
        _token_form(settings, client)
    for provider in sign_in.providers:
        label = ("Sign in with single sign-on" if provider == access.DEFAULT_PROVIDER
                 else f"Sign in with {provider}")
        if st.button(label, key=f"guardtrace-login-{provider}"):
            st.login(None if provider == access.DEFAULT_PROVIDER else provider)


def _show_not_allowed(verdict: Verdict) -> None:
    st.title("guardtrace")
    st.error(f"Your account may not read this dashboard. An administrator can add its "
             f"address to {env.DASHBOARD_ALLOWED_EMAILS.name}, or its domain to "
             f"{env.DASHBOARD_ALLOWED_DOMAINS.name}.")
    st.text(f"Signed in as {verdict.email}")  # text: the provider's words, not Markdown
    if st.button("Sign out"):
        st.logout()


def _show_signed_in(verdict: Verdict) -> None:
    with st.sidebar:
        if verdict.via == "oidc":
            st.text(f"Signed in as {verdict.email}")
            if st.button("Sign out"):
                st.logout()
        elif verdict.via == "token":
            st.text("Signed in with the shared token")
            if st.button("Sign out"):
                del st.session_state[SESSION_KEY]
                st.rerun()


def admit() -> bool:
    """Whether this visitor may see the pages; when not, the sign-in (or why not) is shown.

    Reads nothing from the store.
    """
    settings = access.AccessSettings.resolve()
    providers = access.oidc_providers(_auth_section())
    problems = access.setup_problems(settings, providers, access.oidc_library_installed())
    if problems:
        # `guardtrace dashboard` refuses these at start; `streamlit run` gets here.
        logger.error("the dashboard's sign-in settings are unusable: %s", "; ".join(problems))
        st.error("The dashboard's sign-in settings are unusable; the problem is named in "
                 "its log.")
        return False
    sign_in = access.SignIn.of(settings, providers)
    client = _remote_ip() or _LOOPBACK_CLIENT
    verdict = decide(settings, sign_in, _visit(sign_in), _ATTEMPTS, client)
    _slow_down_after(verdict.token_check)
    if verdict.outcome is Outcome.OPEN:
        return True
    if verdict.outcome is Outcome.SIGNED_IN:
        _show_signed_in(verdict)
        return True
    if verdict.outcome is Outcome.NOT_ALLOWED:
        _show_not_allowed(verdict)
    elif verdict.outcome is Outcome.UNPROTECTED:
        st.error("This dashboard has no sign-in configured, so it serves visitors on its "
                 f"own machine only. To serve it beyond, {access.HOW_TO_SIGN_IN}.")
    else:
        _show_sign_in(settings, sign_in, client, verdict)
    return False
