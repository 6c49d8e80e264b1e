"""A cap on distinct ``agent`` label values per metric and module.

Hallucinated agent names are unbounded (the LLM invents them), and every distinct label
set is a time series held in memory by the SDK and by every backend downstream. The OTel
SDK has its own overflow (``otel.metric.overflow``), but it collapses *all* labels,
``module`` included; this limiter folds only ``agent`` into ``__other__``, so per-module
rates stay right, and counts each folded value in its own metric.
"""

from __future__ import annotations

import threading

from ...schemas.names import OVERFLOW_LABEL

__all__ = ["AgentLabelLimiter"]


class AgentLabelLimiter:
    """Admits at most ``cap`` distinct agent values per (metric, module).

    Args:
        cap: Distinct agent values admitted per metric and module (at least 1).
    """

    def __init__(self, cap: int = 1000) -> None:
        if cap < 1:
            raise ValueError(f"agent label cap must be at least 1, got {cap}")
        self.cap = cap
        self._seen: dict[tuple[str, str], set[str]] = {}
        self._overflow: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def admit(self, metric: str, module: str, agent: str) -> tuple[str, bool]:
        """Return the label to use for ``agent`` and whether it overflowed."""
        key = (metric, module)
        seen = self._seen.get(key)
        # Fast path without the lock: the common case is a value already admitted.
        if seen is not None and agent in seen:
            return agent, False
        with self._lock:
            seen = self._seen.setdefault(key, set())
            if agent in seen:
                return agent, False
            if len(seen) < self.cap:
                seen.add(agent)
                return agent, False
            self._overflow[key] = self._overflow.get(key, 0) + 1
            return OVERFLOW_LABEL, True

    def distinct(self, metric: str, module: str) -> int:
        """How many distinct agent values were admitted for this metric and module."""
        return len(self._seen.get((metric, module), ()))

    def overflowed(self, metric: str, module: str) -> int:
        """How many label uses were folded into ``__other__`` for this metric and module."""
        return self._overflow.get((metric, module), 0)
