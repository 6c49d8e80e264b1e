"""The sign-in gate inside the app, run by Streamlit's AppTest: no page runs, so nothing
reads the store, until the visitor gives the shared token or signs in with OIDC as an
address on the allow-list.

Every page opens the store first (``guardtrace.dashboard.data.store``); here that is a
recording fake, so "a page ran" is a fact to assert, not a guess from what is drawn.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from guardtrace.dashboard import auth, data
from guardtrace.dashboard.gate import FailedAttempts
from guardtrace.schemas import dashboard_access
from guardtrace.schemas import environment_variables as env

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
TOKEN = "a-team-token-of-some-length"


class StoreOpenings:
    """Stands in for ``store()``: counts the pages that got as far as reading, then stops
    them (there is no store behind this test)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> data.Store:
        self.count += 1
        st.text("a page read the store")
        st.stop()


@pytest.fixture
def openings(monkeypatch: pytest.MonkeyPatch) -> StoreOpenings:
    fake = StoreOpenings()
    monkeypatch.setattr(data, "store", fake)
    # A count of failed attempts of this test's own (the real one lives for the process).
    monkeypatch.setattr(auth, "_ATTEMPTS", FailedAttempts())
    for var in (env.DASHBOARD_TOKEN, env.DASHBOARD_ALLOWED_EMAILS, env.DASHBOARD_ALLOWED_DOMAINS):
        monkeypatch.delenv(var.name, raising=False)
    return fake


def texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text]


def sign_in(at: AppTest, token: str) -> AppTest:
    [field] = at.text_input
    field.input(token)
    [button] = [b for b in at.button if b.label == "Sign in"]
    return button.click().run()


def test_without_a_token_configured_the_pages_run_for_a_local_visit(
        openings: StoreOpenings) -> None:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    assert openings.count == 1
    assert not at.text_input  # no sign-in


def test_with_a_token_no_page_runs_until_it_is_given(openings: StoreOpenings,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.DASHBOARD_TOKEN.name, TOKEN)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    assert [t.label for t in at.text_input] == ["Access token"]
    assert openings.count == 0

    at = sign_in(at, "not-the-token-at-all")
    assert openings.count == 0
    assert [e.value for e in at.error] == ["That token is not right."]
    assert all("not-the-token" not in value for value in texts(at))

    at = sign_in(at, TOKEN)
    assert not at.exception
    assert openings.count == 1
    assert "Signed in with the shared token" in texts(at)
    assert not at.text_input  # the form is gone

    # Signing out closes the pages again.
    [sign_out] = [b for b in at.button if b.label == "Sign out"]
    at = sign_out.click().run()
    assert openings.count == 1
    assert [t.label for t in at.text_input] == ["Access token"]


# -- OIDC (st.login's identity, as AppTest seeds it) ---------------------------------------
AUTH = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
        "client_id": "guardtrace-test", "client_secret": "not-a-secret",
        "server_metadata_url": "https://accounts.example.com/.well-known/openid-configuration"}


@pytest.fixture
def oidc_app(openings: StoreOpenings, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv(env.DASHBOARD_ALLOWED_DOMAINS.name, "example.com")
    # st.login would need Authlib; nothing here presses the button.
    monkeypatch.setattr(dashboard_access, "oidc_library_installed", lambda: True)
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.secrets["auth"] = AUTH
    return at


def test_oidc_offers_the_providers_sign_in_and_runs_no_page(oidc_app: AppTest,
                                                             openings: StoreOpenings) -> None:
    oidc_app.user = {"is_logged_in": False}
    at = oidc_app.run()
    assert not at.exception
    assert [b.label for b in at.button] == ["Sign in with single sign-on"]
    assert openings.count == 0


def test_an_allowed_oidc_identity_sees_the_pages(oidc_app: AppTest,
                                                 openings: StoreOpenings) -> None:
    oidc_app.user = {"is_logged_in": True, "email": "Bo@example.com", "email_verified": True}
    at = oidc_app.run()
    assert not at.exception
    assert openings.count == 1
    assert "Signed in as bo@example.com" in texts(at)


def test_an_oidc_identity_outside_the_allow_list_sees_no_page(oidc_app: AppTest,
                                                              openings: StoreOpenings) -> None:
    oidc_app.user = {"is_logged_in": True, "email": "eve@elsewhere.org", "email_verified": True}
    at = oidc_app.run()
    assert not at.exception
    assert openings.count == 0
    assert "may not read this dashboard" in at.error[0].value
    assert "Signed in as eve@elsewhere.org" in texts(at)
    assert [b.label for b in at.button] == ["Sign out"]
