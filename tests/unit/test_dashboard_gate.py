"""The dashboard's sign-in rules, with plain values: the token, the allow-lists, the limit
on failed attempts, and which visits are let in.

Streamlit is not involved: :mod:`guardtrace.dashboard.gate` and
:mod:`guardtrace.schemas.dashboard_access` decide, the app only shows the answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from guardtrace.dashboard import gate
from guardtrace.dashboard.gate import (
    FailedAttempts,
    Outcome,
    Visit,
    bearer_token,
    check_token,
    decide,
    email_allowed,
    token_matches,
)
from guardtrace.schemas import access_tokens
from guardtrace.schemas import dashboard_access as access
from guardtrace.schemas import environment_variables as env
from guardtrace.schemas.dashboard_access import AccessSettings, SignIn

TOKEN = "correct-horse-battery-staple"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the token -----------------------------------------------------------------------------
def test_the_token_matches_exactly_and_an_empty_one_never() -> None:
    assert token_matches(TOKEN, TOKEN)
    assert token_matches(f" {TOKEN}\n", TOKEN)  # pasted with a newline
    assert not token_matches(TOKEN[:-1], TOKEN)
    assert not token_matches(TOKEN.upper(), TOKEN)
    assert not token_matches("", "")
    assert not token_matches(TOKEN, "")


def test_the_token_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []

    def recording_compare(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return a == b

    monkeypatch.setattr(access_tokens.hmac, "compare_digest", recording_compare)
    assert token_matches(TOKEN, TOKEN)
    assert compared == [(TOKEN.encode(), TOKEN.encode())]


@pytest.mark.parametrize(("headers", "expected"), [
    ({"Authorization": f"Bearer {TOKEN}"}, TOKEN),
    ({"authorization": f"bearer   {TOKEN} "}, TOKEN),
    ({"Authorization": f"Basic {TOKEN}"}, None),
    ({"Authorization": "Bearer "}, None),
    ({"Authorization": TOKEN}, None),
    ({"X-Token": TOKEN}, None),
    ({}, None),
])
def test_a_bearer_token_is_read_from_the_authorization_header(
        headers: dict[str, str], expected: str | None) -> None:
    assert bearer_token(headers) == expected


# -- the allow-lists -----------------------------------------------------------------------
ALLOW = AccessSettings(allowed_emails=frozenset({"ana@partner.org"}),
                       allowed_domains=frozenset({"example.com"}))


@pytest.mark.parametrize(("claims", "allowed"), [
    ({"email": "ana@partner.org", "email_verified": True}, True),
    ({"email": "Ana@Partner.org"}, True),  # no claim: the provider vouches itself
    ({"email": "bo@example.com", "email_verified": True}, True),
    ({"email": "bo@partner.org", "email_verified": True}, False),  # the address, not the domain
    ({"email": "bo@example.com", "email_verified": False}, False),
    ({"email": "bo@sub.example.com"}, False),  # a domain is exact, not its subdomains
    ({"email": "bo@notexample.com"}, False),
    ({"email": "bo@evil.org@example.com"}, False),
    ({"email": "example.com"}, False),
    ({"email": "@example.com"}, False),
    ({"name": "no e-mail"}, False),
    ({"email": ["bo@example.com"]}, False),
])
def test_the_allow_list_admits_listed_addresses_and_domains(claims: dict[str, Any],
                                                             allowed: bool) -> None:
    assert email_allowed(claims, ALLOW) is allowed


def test_an_empty_allow_list_admits_nobody() -> None:
    assert not email_allowed({"email": "bo@example.com", "email_verified": True},
                             AccessSettings())


def test_settings_are_read_from_the_environment_trimmed_and_lower_cased() -> None:
    settings = AccessSettings.resolve({
        env.DASHBOARD_TOKEN.name: f"  {TOKEN}\n",
        env.DASHBOARD_ALLOWED_EMAILS.name: " Ana@Partner.org, ,bo@example.com ",
        env.DASHBOARD_ALLOWED_DOMAINS.name: "@Example.com,corp.example.net",
    })
    assert settings.token == TOKEN
    assert settings.allowed_emails == {"ana@partner.org", "bo@example.com"}
    assert settings.allowed_domains == {"example.com", "corp.example.net"}
    assert settings.has_allow_list
    assert not AccessSettings.resolve({}).has_allow_list
    assert AccessSettings.resolve({}).token == ""


# -- failed attempts -----------------------------------------------------------------------
def test_failed_attempts_lock_a_client_out_for_the_rest_of_the_window() -> None:
    clock = FakeClock()
    attempts = FailedAttempts(limit=3, window_s=60, clock=clock)
    for _ in range(2):
        attempts.record_failure("10.0.0.1")
        clock.now += 10
    assert attempts.retry_after("10.0.0.1") == 0
    attempts.record_failure("10.0.0.1")  # the third, at t=1020
    assert attempts.retry_after("10.0.0.1") == 40  # the first (t=1000) leaves at t=1060
    clock.now += 30
    assert attempts.retry_after("10.0.0.1") == 10
    assert attempts.retry_after("10.0.0.2") == 0  # per client
    clock.now += 10
    assert attempts.retry_after("10.0.0.1") == 0


def test_a_locked_out_client_is_not_compared_even_with_the_right_token() -> None:
    clock = FakeClock()
    attempts = FailedAttempts(limit=2, window_s=60, clock=clock)
    first = check_token("guess-1", TOKEN, attempts, "10.0.0.1")
    assert (first.ok, first.compared, first.retry_after_s) == (False, True, 0)
    second = check_token("guess-2", TOKEN, attempts, "10.0.0.1")
    assert (second.ok, second.compared) == (False, True) and second.retry_after_s == 60
    locked = check_token(TOKEN, TOKEN, attempts, "10.0.0.1")
    assert (locked.ok, locked.compared) == (False, False)
    clock.now += 61
    assert check_token(TOKEN, TOKEN, attempts, "10.0.0.1").ok
    # A success clears the client's count.
    assert attempts.retry_after("10.0.0.1") == 0


def test_failed_attempts_remember_a_bounded_number_of_clients() -> None:
    clock = FakeClock()
    attempts = FailedAttempts(limit=1, window_s=60, clock=clock, max_clients=2)
    for client in ("a", "b", "c"):
        attempts.record_failure(client)
    assert attempts.retry_after("a") == 0  # the longest-quiet client was forgotten
    assert attempts.retry_after("b") > 0 and attempts.retry_after("c") > 0


# -- which visits are let in ---------------------------------------------------------------
def verdict(settings: AccessSettings, visit: Visit, providers: tuple[str, ...] = (),
            attempts: FailedAttempts | None = None) -> gate.Verdict:
    return decide(settings, SignIn.of(settings, providers), visit,
                  attempts or FailedAttempts(), "10.0.0.9")


@pytest.mark.parametrize(("server", "visitor", "outcome"), [
    ("127.0.0.1", None, Outcome.OPEN),
    ("localhost", None, Outcome.OPEN),
    (None, None, Outcome.OPEN),  # no address given: the visitor's decides
    ("127.0.0.1", "203.0.113.7", Outcome.UNPROTECTED),  # e.g. through a proxy elsewhere
    (None, "203.0.113.7", Outcome.UNPROTECTED),
    ("0.0.0.0", None, Outcome.UNPROTECTED),
])
def test_without_sign_in_only_local_visits_to_a_local_server_are_let_in(
        server: str | None, visitor: str | None, outcome: Outcome) -> None:
    assert verdict(AccessSettings(), Visit(server, remote_ip=visitor)).outcome is outcome


def test_with_a_token_a_visit_signs_in_even_on_loopback() -> None:
    settings = AccessSettings(token=TOKEN)
    assert verdict(settings, Visit("127.0.0.1")).outcome is Outcome.SIGN_IN
    signed_in = verdict(settings, Visit("0.0.0.0", "203.0.113.7", session_signed_in=True))
    assert (signed_in.outcome, signed_in.via) == (Outcome.SIGNED_IN, "token")


def test_a_bearer_header_signs_in_and_a_wrong_one_counts_as_a_failure() -> None:
    settings = AccessSettings(token=TOKEN)
    attempts = FailedAttempts(limit=2)
    right = verdict(settings, Visit("0.0.0.0", bearer=TOKEN), attempts=attempts)
    assert (right.outcome, right.via) == (Outcome.SIGNED_IN, "header")
    for _ in range(2):
        wrong = verdict(settings, Visit("0.0.0.0", bearer="not-it"), attempts=attempts)
        assert wrong.outcome is Outcome.SIGN_IN
        assert wrong.token_check is not None and wrong.token_check.compared
    assert attempts.retry_after("10.0.0.9") > 0
    locked = verdict(settings, Visit("0.0.0.0", bearer=TOKEN), attempts=attempts)
    assert locked.outcome is Outcome.SIGN_IN


def test_a_session_flag_means_nothing_without_a_token_configured() -> None:
    # Sign-in through OIDC only: a token flag from some earlier configuration is no key.
    settings = AccessSettings(allowed_domains=frozenset({"example.com"}))
    visit = Visit("0.0.0.0", session_signed_in=True, bearer=TOKEN)
    assert verdict(settings, visit, providers=("default",)).outcome is Outcome.SIGN_IN


def test_oidc_identities_are_let_in_only_from_the_allow_list() -> None:
    settings = AccessSettings(allowed_domains=frozenset({"example.com"}))
    allowed = verdict(settings, Visit("0.0.0.0", identity={
        "is_logged_in": True, "email": "Bo@Example.com", "email_verified": True}),
        providers=("google",))
    assert (allowed.outcome, allowed.via, allowed.email) == \
        (Outcome.SIGNED_IN, "oidc", "bo@example.com")
    outsider = verdict(settings, Visit("0.0.0.0", identity={
        "is_logged_in": True, "email": "eve@elsewhere.org", "email_verified": True}),
        providers=("google",))
    assert (outsider.outcome, outsider.email) == (Outcome.NOT_ALLOWED, "eve@elsewhere.org")
    logged_out = verdict(settings, Visit("0.0.0.0", identity={"is_logged_in": False}),
                         providers=("google",))
    assert logged_out.outcome is Outcome.SIGN_IN


def test_oidc_without_an_allow_list_offers_no_sign_in() -> None:
    # Any account at the provider would do: not sign-in at all.
    assert not SignIn.of(AccessSettings(), ("google",)).required
    assert SignIn.of(AccessSettings(allowed_emails=frozenset({"a@b.org"})),
                     ("google",)).providers == ("google",)


# -- the start-up rules (shared with the CLI) ----------------------------------------------
@pytest.mark.parametrize(("address", "loopback"), [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LOCALHOST", True), ("0.0.0.0", False), ("::", False),
    ("192.168.1.10", False), ("dashboard.example.com", False), ("", False), (None, False),
])
def test_loopback_addresses(address: str | None, loopback: bool) -> None:
    assert access.is_loopback(address) is loopback


def test_serving_beyond_loopback_is_refused_without_sign_in_naming_the_settings() -> None:
    refusal = access.serving_refusal("0.0.0.0", SignIn(token=False, providers=()))
    assert refusal is not None
    for name in (env.DASHBOARD_TOKEN.name, env.DASHBOARD_ALLOWED_EMAILS.name,
                 env.DASHBOARD_ALLOWED_DOMAINS.name, "[auth]"):
        assert name in refusal
    assert access.serving_refusal("127.0.0.1", SignIn(token=False, providers=())) is None
    assert access.serving_refusal("0.0.0.0", SignIn(token=True, providers=())) is None
    assert access.serving_refusal("0.0.0.0", SignIn(token=False, providers=("google",))) is None


def test_setup_problems_name_what_would_leave_the_dashboard_less_protected() -> None:
    def problems(settings: AccessSettings, providers: tuple[str, ...] = (),
                 library: bool = True) -> str:
        return " | ".join(access.setup_problems(settings, providers, library))

    assert problems(AccessSettings(token=TOKEN)) == ""
    assert "shorter than 16" in problems(AccessSettings(token="short"))
    assert TOKEN not in problems(AccessSettings(token=TOKEN[:10]))  # never echoed
    domains = AccessSettings(allowed_domains=frozenset({"example.com"}))
    assert "no [auth] section" in problems(domains)
    assert problems(domains, ("default",)) == ""
    assert "Authlib" in problems(domains, ("default",), library=False)
    assert "without an allow-list" in problems(AccessSettings(token=TOKEN), ("default",))
    assert "not an e-mail address" in problems(
        AccessSettings(allowed_emails=frozenset({"example.com"})), ("default",))
    assert "not a domain" in problems(
        AccessSettings(allowed_domains=frozenset({"bo@example.com"})), ("default",))


def test_oidc_providers_of_an_auth_section() -> None:
    assert access.oidc_providers(None) == ()
    assert access.oidc_providers({"redirect_uri": "x", "cookie_secret": "y"}) == ()
    assert access.oidc_providers({"redirect_uri": "x", "client_id": "c"}) == ("default",)
    assert access.oidc_providers({"redirect_uri": "x", "okta": {"client_id": "c"},
                                  "google": {"client_id": "g"}}) == ("google", "okta")
