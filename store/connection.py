"""Opening ClickHouse: the embedded engine (chDB) or a server, through one client API.

``chdb://DIR`` opens the real ClickHouse engine in this process through
clickhouse-connect's chDB backend; ``http(s)://user:password@host:port`` talks to a
server, over TLS for ``https`` with the settings of
:class:`~guardtrace.schemas.transport_security.ClickHouseTLS`. Everything above this
module is the same code for both.

A URL is printed only masked (:func:`masked_url`), and every error raised here passes
through the same masking, so no message shows a password, whatever the URL looks like.

clickhouse-connect (and chDB) are imported only when a client is opened: they come with
the ``server`` extra, and ``guardtrace --help`` or ``scan`` must work without it.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..schemas import environment_variables as env
from ..schemas.transport_security import MASK, ClickHouseTLS

__all__ = ["SERVER_EXTRA_HINT", "StoreConfig", "StoreError", "StoreLockedError",
           "masked_url", "open_client", "reader_url"]

# What to run when a server-side package is missing (the hooks-only install lacks them).
SERVER_EXTRA_HINT = "pip install 'guardtrace[server]'"

_DATABASE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# A query parameter whose value is a secret (password=, pwd=, access_token=, api_key=, ...).
_SECRET_PARAMETER = re.compile(
    r"(?i)([?&;][^=&#;]*(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key)[^=&#;]*=)([^&#;]*)")

logger = logging.getLogger("guardtrace.store")


class StoreError(RuntimeError):
    """ClickHouse could not be opened or reached; the message says what to do."""


class StoreLockedError(StoreError):
    """The embedded store's directory is held by another process."""


@dataclass(frozen=True)
class StoreConfig:
    """Where the data lives: URL, database, retention, and TLS for an https:// server."""

    url: str
    database: str
    ttl_events_days: int
    ttl_payloads_days: int
    tls: ClickHouseTLS = ClickHouseTLS()

    @classmethod
    def resolve(cls, url: str | None = None, database: str | None = None,
                ttl_events_days: int | None = None,
                ttl_payloads_days: int | None = None,
                environ: Mapping[str, str] | None = None,
                tls: ClickHouseTLS | None = None) -> StoreConfig:
        """Resolve from arguments, then ``GUARDTRACE_*`` variables, then defaults.

        Args:
            environ: Where variables are read (default: this process's environment).
            tls: TLS settings (default: the ``GUARDTRACE_CLICKHOUSE_*`` TLS variables).

        Raises:
            ConfigError: a database name that is not an identifier, a URL scheme other
                than chdb, http or https, a port that is not a number, an unusable TLS
                setting, or TLS settings with an http:// URL. URLs in the message are
                masked.
        """
        config = cls(
            url=env.read_str(env.CLICKHOUSE_URL, url, environ),
            database=env.read_str(env.CLICKHOUSE_DATABASE, database, environ),
            ttl_events_days=env.read_int(env.TTL_EVENTS_DAYS, ttl_events_days, environ,
                                         minimum=1),
            ttl_payloads_days=env.read_int(env.TTL_PAYLOADS_DAYS, ttl_payloads_days, environ,
                                           minimum=1),
            tls=ClickHouseTLS.resolve(environ) if tls is None else tls,
        )
        if not _DATABASE_NAME.match(config.database):
            raise env.ConfigError(
                f"{env.CLICKHOUSE_DATABASE.name} must be a plain identifier "
                f"(letters, digits, underscore), got {config.database!r}")
        config._check_url()
        return config

    def _check_url(self) -> None:
        try:
            parsed = urlparse(self.url)
            parsed.port  # noqa: B018 - parsing the port is the check
        except ValueError:
            # Not shown, not even masked: what does not parse cannot be told apart from a
            # password (in http://user:secret, "secret" parses as a port).
            raise env.ConfigError(
                f"{env.CLICKHOUSE_URL.name} does not parse as a URL (a port that is not a "
                "number, or an unclosed [ ]); it is not shown, as it may hold a password"
            ) from None
        if parsed.scheme not in ("chdb", "http", "https"):
            raise env.ConfigError(
                f"{env.CLICKHOUSE_URL.name} must start with chdb://, http:// or https://, "
                f"got {self.display_url!r}")
        if parsed.scheme == "http" and self.tls.configured:
            # Most likely https:// was meant: the password would travel in clear text.
            raise env.ConfigError(
                f"{', '.join(self.tls.setting_names())} apply to https:// URLs, but the "
                f"ClickHouse URL is {self.display_url}")

    @property
    def display_url(self) -> str:
        """The URL with any password replaced by ``***``, for logs and banners."""
        return masked_url(self.url)

    @property
    def embedded_path(self) -> Path | None:
        """The chDB directory for ``chdb://`` URLs, else None."""
        parsed = urlparse(self.url)
        if parsed.scheme != "chdb":
            return None
        # chdb://relative/dir and chdb:///absolute/dir both work.
        raw = unquote(parsed.netloc + parsed.path)
        return Path(raw).expanduser().resolve()


def reader_url(environ: Mapping[str, str] | None = None) -> str:
    """The URL of a reader that never writes (the dashboard).

    ``GUARDTRACE_DASHBOARD_CLICKHOUSE_URL`` (a read-only user on a server), else the
    pipeline's ``GUARDTRACE_CLICKHOUSE_URL``.
    """
    return (env.read_str(env.DASHBOARD_CLICKHOUSE_URL, None, environ)
            or env.read_str(env.CLICKHOUSE_URL, None, environ))


def masked_url(url: str) -> str:
    """``url`` with every password shown as ``***``, whatever its scheme or shape.

    Masks the password of the user info (``user:***@host``), also where it holds an
    ``@``, ``/`` or ``?`` that was not percent-encoded or the URL does not parse, and
    the value of every query parameter named like a secret (``password``, ``passwd``,
    ``pwd``, ``secret``, ``token``, ``api_key`` or a name containing one of them).
    """
    return _SECRET_PARAMETER.sub(rf"\1{MASK}", _mask_user_info(url))


def _user_info_end(rest: str) -> int:
    """Index of the ``@`` that ends the user info in ``rest`` (the URL after ``://``),
    or -1. The last ``@`` before the path, else the last before the query: a password
    may hold a ``?`` or ``/`` that was not percent-encoded."""
    slash = rest.find("/")
    at = rest.rfind("@", 0, len(rest) if slash < 0 else slash)
    if at < 0:
        at = re.split(r"[?#]", rest, maxsplit=1)[0].rfind("@")
    return at


def _mask_user_info(url: str) -> str:
    scheme, separator, rest = url.partition("://")
    if not separator:
        scheme, rest = "", url  # user:password@host, without a scheme
    at = _user_info_end(rest)
    user, colon, _ = rest[:max(at, 0)].partition(":")
    if at < 0 or not colon:
        return url
    return f"{scheme}{separator}{user}:{MASK}{rest[at:]}"


def _url_secrets(url: str) -> set[str]:
    """The secrets ``url`` holds, as written and percent-decoded."""
    _, separator, rest = url.partition("://")
    rest = rest if separator else url
    at = _user_info_end(rest)
    found = {value for _, value in _SECRET_PARAMETER.findall(url)}
    if at >= 0:
        found.add(rest[:at].partition(":")[2])
    return {form for secret in found if secret for form in (secret, unquote(secret))}


def _masked(text: str, url: str) -> str:
    """``text`` (an error message, which may quote the URL, its password or a client
    library's rendering of them) with every secret of ``url`` shown as ``***``."""
    for secret in sorted(_url_secrets(url), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return _SECRET_PARAMETER.sub(rf"\1{MASK}", text)


def open_client(config: StoreConfig) -> Any:
    """Open a clickhouse-connect client for ``config.url`` (database not yet required).

    Raises:
        StoreLockedError: the embedded directory is held by another process; the message
            names it and says what to do.
        StoreError: any other failure to open or reach ClickHouse (passwords masked).
    """
    path = config.embedded_path
    clickhouse_connect = _import_client("clickhouse_connect", config)
    if path is not None:
        _import_client("chdb", config)
        path.mkdir(parents=True, exist_ok=True)
        try:
            return clickhouse_connect.get_client(dsn=f"chdb://{path}")
        except Exception as exc:
            holder = _lock_holder(path)
            if holder is not None:
                raise StoreLockedError(
                    f"The embedded ClickHouse store at {path} is in use by another process "
                    f"({holder}). chDB allows one process per store directory: stop that "
                    f"process (guardtrace up / consume / dashboard), or set "
                    f"{env.CLICKHOUSE_URL.name}=chdb://<another dir>.") from None
            raise StoreError(_masked(
                f"Cannot open the embedded ClickHouse store at {path}: {exc}. Note that one "
                "process can open only one chdb directory.", config.url)) from exc
    parsed = urlparse(config.url)
    secure = parsed.scheme == "https"
    if secure and not config.tls.verify:
        logger.warning("the certificate of ClickHouse at %s is not verified (%s=false)",
                       config.display_url, env.CLICKHOUSE_TLS_VERIFY.name)
    try:
        return clickhouse_connect.get_client(
            host=parsed.hostname or "localhost",
            port=parsed.port or (8443 if secure else 8123),
            username=unquote(parsed.username or "default"),
            password=unquote(parsed.password or ""),
            secure=secure,
            connect_timeout=5,
            **(config.tls.client_settings() if secure else {}),
        )
    except Exception as exc:  # noqa: BLE001 - every failure to connect is a StoreError
        # from None: the cause's own message may quote the password.
        raise StoreError(_masked(f"Cannot reach ClickHouse at {config.display_url}: {exc}. "
                                 f"Check {env.CLICKHOUSE_URL.name}.", config.url)) from None


def _import_client(module: str, config: StoreConfig) -> Any:
    """Import a ClickHouse client package, or say which is missing and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise StoreError(f"opening {config.display_url} needs the Python package {module!r}, "
                         f"which is not installed: {SERVER_EXTRA_HINT}") from None


def _lock_holder(path: Path) -> str | None:
    """Describe the process holding ``path`` (ClickHouse writes its PID in ``status``)."""
    status = path / "status"
    try:
        text = status.read_text(errors="replace")
    except OSError:
        return None
    match = re.search(r"PID:\s*(\d+)", text)
    if not match:
        return None
    pid = int(match.group(1))
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # stale status file: the failure is something else
    except PermissionError:
        pass
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        cmdline = "unknown command"
    return f"PID {pid}: {cmdline}"
