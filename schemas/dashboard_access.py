"""Who may read the dashboard: one rule for the command that serves it and the app that
gates each visit.

The dashboard shows every captured prompt and response, so serving it beyond this
machine needs sign-in, in either or both of two ways:

* a shared token (``GUARDTRACE_DASHBOARD_TOKEN``) for a small team;
* OIDC through Streamlit's ``st.login``, configured by the ``[auth]`` section of
  Streamlit's secrets and limited to the addresses and domains of
  ``GUARDTRACE_DASHBOARD_ALLOWED_EMAILS`` / ``_DOMAINS``: without an allow-list, anyone
  with an account at the provider could read.

Without either the dashboard serves loopback only: ``guardtrace dashboard`` and ``up``
refuse a wider address at start (:func:`serving_refusal`) and the app refuses a visitor
from elsewhere. Here because the CLI, which launches the dashboard, does not import it;
pure, so nothing here needs Streamlit.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from . import environment_variables as env

__all__ = ["DEFAULT_PROVIDER", "HOW_TO_SIGN_IN", "MIN_TOKEN_LENGTH", "AccessSettings", "SignIn",
           "is_loopback", "oidc_library_installed", "oidc_providers", "serving_refusal",
           "setup_problems"]

# Long enough that guessing is hopeless at the rate the app allows failed attempts.
MIN_TOKEN_LENGTH: Final = 16
# What st.login calls the provider whose credentials sit in [auth] itself.
DEFAULT_PROVIDER: Final = "default"
# The keys that hold a provider's credentials (Streamlit requires all three).
_PROVIDER_KEYS: Final = ("client_id", "client_secret", "server_metadata_url")
_LOOPBACK_NAMES: Final = frozenset({"localhost"})
HOW_TO_SIGN_IN: Final = (
    f"set {env.DASHBOARD_TOKEN.name} (a shared token of {MIN_TOKEN_LENGTH} characters or "
    "more, e.g. from `openssl rand -hex 24`), or configure OIDC sign-in (an [auth] section "
    f"in Streamlit's secrets.toml and {env.DASHBOARD_ALLOWED_EMAILS.name} or "
    f"{env.DASHBOARD_ALLOWED_DOMAINS.name})")


def is_loopback(address: str | None) -> bool:
    """Whether a listen (or peer) address is this machine only.

    An empty or missing address is not: Streamlit then listens on every interface.
    """
    text = (address or "").strip().lower().removeprefix("[").removesuffix("]")
    if text in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def _entries(text: str) -> frozenset[str]:
    """A comma-separated list, each entry trimmed and lower-cased (e-mail addresses and
    domains are compared without case); empty entries dropped."""
    return frozenset(entry.strip().lower() for entry in text.split(",") if entry.strip())


@dataclass(frozen=True)
class AccessSettings:
    """The dashboard's sign-in settings, from the environment.

    Attributes:
        token: The shared token; empty for none.
        allowed_emails: Addresses that may sign in with OIDC, lower case.
        allowed_domains: Domains whose addresses may sign in with OIDC, lower case,
            without a leading ``@``.
    """

    token: str = ""
    allowed_emails: frozenset[str] = frozenset()
    allowed_domains: frozenset[str] = frozenset()

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None) -> AccessSettings:
        source = os.environ if environ is None else environ
        return cls(
            # Surrounding whitespace dropped: a Secret made from a file often ends in a
            # newline, which nobody types.
            token=source.get(env.DASHBOARD_TOKEN.name, "").strip(),
            allowed_emails=_entries(env.read_str(env.DASHBOARD_ALLOWED_EMAILS, None, source)),
            allowed_domains=frozenset(
                domain.removeprefix("@") for domain in
                _entries(env.read_str(env.DASHBOARD_ALLOWED_DOMAINS, None, source))))

    @property
    def has_allow_list(self) -> bool:
        return bool(self.allowed_emails or self.allowed_domains)


def oidc_providers(auth_section: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The providers ``st.login`` can use with this ``[auth]`` section of the secrets.

    :data:`DEFAULT_PROVIDER` when the credentials sit in ``[auth]`` itself, then each
    ``[auth.NAME]`` subsection. Whether each is complete is Streamlit's to check.
    """
    if not auth_section:
        return ()
    named = sorted(name for name, value in auth_section.items() if isinstance(value, Mapping))
    own = any(key in auth_section for key in _PROVIDER_KEYS)
    return (DEFAULT_PROVIDER, *named) if own else tuple(named)


def oidc_library_installed() -> bool:
    """Whether Authlib, which ``st.login`` needs, can be imported (found, not imported)."""
    try:
        return importlib.util.find_spec("authlib") is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class SignIn:
    """The sign-in a dashboard offers.

    Attributes:
        token: Whether the shared token signs in.
        providers: The OIDC providers offered (none without an allow-list).
    """

    token: bool
    providers: tuple[str, ...]

    @classmethod
    def of(cls, settings: AccessSettings, providers: tuple[str, ...]) -> SignIn:
        return cls(token=bool(settings.token),
                   providers=providers if settings.has_allow_list else ())

    @property
    def required(self) -> bool:
        return self.token or bool(self.providers)


def setup_problems(settings: AccessSettings, providers: tuple[str, ...],
                   oidc_library: bool) -> list[str]:
    """What is wrong with the sign-in settings, whatever the address: each would leave the
    dashboard less protected than its operator meant, so each refuses the start."""
    problems = []
    if settings.token and len(settings.token) < MIN_TOKEN_LENGTH:
        problems.append(f"{env.DASHBOARD_TOKEN.name} is shorter than {MIN_TOKEN_LENGTH} "
                        "characters (generate one with `openssl rand -hex 24`)")
    for email in sorted(settings.allowed_emails):
        if email.count("@") != 1 or email.startswith("@") or email.endswith("@"):
            problems.append(f"{env.DASHBOARD_ALLOWED_EMAILS.name} has an entry that is not "
                            f"an e-mail address: {email!r}")
    for domain in sorted(settings.allowed_domains):
        if "@" in domain or "." not in domain:
            problems.append(f"{env.DASHBOARD_ALLOWED_DOMAINS.name} has an entry that is not "
                            f"a domain: {domain!r}")
    if settings.has_allow_list and not providers:
        problems.append(f"{env.DASHBOARD_ALLOWED_EMAILS.name} / "
                        f"{env.DASHBOARD_ALLOWED_DOMAINS.name} is set but Streamlit's secrets "
                        "have no [auth] section with a provider, so nobody could sign in")
    if providers and not settings.has_allow_list:
        problems.append(f"Streamlit's secrets have an [auth] section, but OIDC sign-in "
                        f"needs {env.DASHBOARD_ALLOWED_EMAILS.name} or "
                        f"{env.DASHBOARD_ALLOWED_DOMAINS.name}: without an allow-list anyone "
                        "with an account at the provider could read the dashboard")
    if providers and settings.has_allow_list and not oidc_library:
        problems.append("OIDC sign-in (st.login) needs Authlib: pip install 'guardtrace[oidc]'")
    return problems


def serving_refusal(address: str | None, sign_in: SignIn) -> str | None:
    """Why the dashboard may not listen on ``address`` with this sign-in, or None."""
    if sign_in.required or is_loopback(address):
        return None
    where = address or "every interface"
    return (f"the dashboard shows every captured prompt and response, and has no sign-in "
            f"configured: it serves loopback only (127.0.0.1, ::1, localhost), not "
            f"{where}. To serve beyond this machine, {HOW_TO_SIGN_IN}.")
