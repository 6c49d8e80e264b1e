"""guardtrace's own health signals: rate-limited warnings, internal counters, hook errors.

Shared by the guards' emit path (telemetry.py) and the export path (export/, the SDK
limits): a producer that cannot reach Kafka, or a payload the sink drops, is logged and
counted here without the export path importing the guards' telemetry module.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import metrics, trace

from ... import __version__
from ...schemas import names
from . import state as _state
from .guard_counters import ObservedCounter

__all__ = ["count_hook_error", "count_internal", "instruments", "internal_totals",
           "log_rate_limited"]

logger = logging.getLogger("guardtrace.collectors")

# Errors repeat in bursts (Kafka down, a queue full): one warning per kind per minute.
_ERROR_LOG_INTERVAL_S = 60.0
_last_error_log: dict[str, float] = {}


def log_rate_limited(key: str, message: str, *args: Any) -> None:
    """Log a warning at most once per interval for ``key`` (errors repeat in bursts)."""
    now = time.monotonic()
    if now - _last_error_log.get(key, -_ERROR_LOG_INTERVAL_S) >= _ERROR_LOG_INTERVAL_S:
        _last_error_log[key] = now
        logger.warning(message, *args)


class _Instruments:
    """Tracer, meter and counters for one state generation, created on first use."""

    def __init__(self) -> None:
        self._generation = -1
        self._lock = threading.Lock()
        self._tracer: Any = None
        self._meter: Any = None
        self._counters: dict[str, Any] = {}
        self._guard_counters: dict[str, ObservedCounter] = {}

    def _refresh(self) -> None:
        """Rebuild tracer, meter and counters if the telemetry state was swapped."""
        state = _state.current()
        if state.generation != self._generation:
            with self._lock:
                if state.generation != self._generation:
                    tp = state.tracer_provider or trace.get_tracer_provider()
                    mp = state.meter_provider or metrics.get_meter_provider()
                    self._tracer = tp.get_tracer(names.INSTRUMENTATION_NAME, __version__)
                    self._meter = mp.get_meter(names.INSTRUMENTATION_NAME, __version__)
                    self._counters = {}
                    self._guard_counters = {}
                    self._generation = state.generation

    def tracer(self) -> Any:
        self._refresh()
        return self._tracer

    def counter(self, name: str) -> Any:
        self._refresh()
        counter = self._counters.get(name)
        if counter is None:
            counter = self._meter.create_counter(name)
            self._counters[name] = counter
        return counter

    def guard_counter(self, name: str) -> ObservedCounter:
        """A guard's counter: totals kept in-process, observed by the SDK when it collects
        (guard_counters.py says why). guardtrace's own counters (drops, hook errors) are
        rare and stay synchronous: :meth:`counter`."""
        self._refresh()
        counter = self._guard_counters.get(name)
        if counter is None:
            with self._lock:  # one observable instrument per name, whoever asks first
                counter = self._guard_counters.get(name)
                if counter is None:
                    counter = ObservedCounter(self._meter, name, _counter_warning)
                    self._guard_counters[name] = counter
        return counter


def _counter_warning(message: str) -> None:
    log_rate_limited("guard-counter", "guardtrace: %s", message)


# One set per process: the guards' counters and guardtrace's own share the meter.
instruments = _Instruments()


_internal_totals: dict[tuple[str, str], int] = {}
_internal_lock = threading.Lock()


def count_hook_error(where: str, exc: BaseException) -> None:
    """Log (rate-limited) and count a hook's internal failure; never raises.

    Tallied in-process too (keyed by the failing operation), so that a swallowed error
    stays visible where the counter is not exported: the test suite fails on one.
    """
    log_rate_limited(f"hook:{where}", "guardtrace hook %s failed and was skipped: %r", where, exc)
    with _internal_lock:
        key = (names.METRIC_HOOK_ERRORS, where)
        _internal_totals[key] = _internal_totals.get(key, 0) + 1
    with contextlib.suppress(Exception):  # counting must not raise either
        instruments.counter(names.METRIC_HOOK_ERRORS).add(1, {names.ATTR_OPERATION: where})


def count_internal(metric: str, value: int, attributes: Mapping[str, str]) -> None:
    """Add to one of guardtrace's own counters (drops, sends); never raises.

    Besides the OTel counter, a process-local tally is kept (see :func:`internal_totals`):
    when Kafka is down the counter cannot be exported, yet the agent, ``emit-test`` and
    tests still need to see that telemetry was dropped.
    """
    reason = str(attributes.get(names.ATTR_REASON, ""))
    with _internal_lock:
        _internal_totals[(metric, reason)] = _internal_totals.get((metric, reason), 0) + value
    with contextlib.suppress(Exception):  # the tally above is kept whatever OTel does
        instruments.counter(metric).add(value, dict(attributes))


def internal_totals(metric: str | None = None) -> dict[str, int]:
    """Process-lifetime totals of guardtrace's own counters, keyed ``metric`` or
    ``metric{reason}`` (``hook_errors{operation}``); with ``metric``, only its entries."""
    with _internal_lock:
        items = list(_internal_totals.items())
    out: dict[str, int] = {}
    for (name, reason), total in items:
        if metric is None or name == metric:
            out[f"{name}{{{reason}}}" if reason else name] = total
    return out
