"""Opening ClickHouse: the embedded engine (chDB) or a server, through one client API.

``chdb://DIR`` opens the real ClickHouse engine in this process through
clickhouse-connect's chDB backend; ``http(s)://user:password@host:port`` talks to a
server. Everything above this module is the same code for both.

clickhouse-connect (and chDB) are imported only when a client is opened: they come with
the ``server`` extra, and ``guardtrace --help`` or ``scan`` must work without it.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..schemas import environment_variables as env

__all__ = ["SERVER_EXTRA_HINT", "StoreConfig", "StoreError", "StoreLockedError",
           "masked_url", "open_client", "reader_url"]

# What to run when a server-side package is missing (the hooks-only install lacks them).
SERVER_EXTRA_HINT = "pip install 'guardtrace[server]'"

_DATABASE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class StoreError(RuntimeError):
    """ClickHouse could not be opened or reached; the message says what to do."""


class StoreLockedError(StoreError):
    """The embedded store's directory is held by another process."""


@dataclass(frozen=True)
class StoreConfig:
    """Where the data lives: URL, database, retention."""

    url: str
    database: str
    ttl_events_days: int
    ttl_payloads_days: int

    @classmethod
    def resolve(cls, url: str | None = None, database: str | None = None,
                ttl_events_days: int | None = None,
                ttl_payloads_days: int | None = None,
                environ: Mapping[str, str] | None = None) -> StoreConfig:
        """Resolve from arguments, then ``GUARDTRACE_*`` variables, then defaults.

        Args:
            environ: Where variables are read (default: this process's environment).

        Raises:
            ConfigError: a database name that is not an identifier, or a URL scheme
                other than chdb, http or https.
        """
        config = cls(
            url=env.read_str(env.CLICKHOUSE_URL, url, environ),
            database=env.read_str(env.CLICKHOUSE_DATABASE, database, environ),
            ttl_events_days=env.read_int(env.TTL_EVENTS_DAYS, ttl_events_days, environ,
                                         minimum=1),
            ttl_payloads_days=env.read_int(env.TTL_PAYLOADS_DAYS, ttl_payloads_days, environ,
                                           minimum=1),
        )
        if not _DATABASE_NAME.match(config.database):
            raise env.ConfigError(
                f"{env.CLICKHOUSE_DATABASE.name} must be a plain identifier "
                f"(letters, digits, underscore), got {config.database!r}")
        scheme = urlparse(config.url).scheme
        if scheme not in ("chdb", "http", "https"):
            raise env.ConfigError(
                f"{env.CLICKHOUSE_URL.name} must start with chdb://, http:// or https://, "
                f"got {config.url!r}")
        return config

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
    """``url`` with the password (if any) replaced by ``***``."""
    parsed = urlparse(url)
    if not parsed.password:
        return url
    netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@", 1)
    return parsed._replace(netloc=netloc).geturl()


def open_client(config: StoreConfig) -> Any:
    """Open a clickhouse-connect client for ``config.url`` (database not yet required).

    Raises:
        StoreLockedError: the embedded directory is held by another process; the message
            names it and says what to do.
        StoreError: any other failure to open or reach ClickHouse.
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
            raise StoreError(f"Cannot open the embedded ClickHouse store at {path}: {exc}. "
                             "Note that one process can open only one chdb directory.") from exc
    parsed = urlparse(config.url)
    try:
        return clickhouse_connect.get_client(
            host=parsed.hostname or "localhost",
            port=parsed.port or (8443 if parsed.scheme == "https" else 8123),
            username=unquote(parsed.username or "default"),
            password=unquote(parsed.password or ""),
            secure=parsed.scheme == "https",
            connect_timeout=5,
        )
    except Exception as exc:
        raise StoreError(f"Cannot reach ClickHouse at {parsed.hostname}:{parsed.port}: {exc}. "
                         f"Check {env.CLICKHOUSE_URL.name}.") from exc


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
