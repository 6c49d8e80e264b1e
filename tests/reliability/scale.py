"""Sizes of the fault-injection runs: small enough for CI, or the full issue-5 sizes.

``GUARDTRACE_RELIABILITY_FULL=1`` selects the full sizes (200,000 events through the
SIGKILL test, a 30 s ClickHouse outage, ...); without it every test fits CI.
"""

from __future__ import annotations

import os

FULL = os.environ.get("GUARDTRACE_RELIABILITY_FULL", "").strip().lower() in ("1", "true", "yes")


def size(ci: int, full: int) -> int:
    """``full`` with GUARDTRACE_RELIABILITY_FULL=1, else ``ci``."""
    return full if FULL else ci


def seconds(ci: float, full: float) -> float:
    """``full`` with GUARDTRACE_RELIABILITY_FULL=1, else ``ci``."""
    return full if FULL else ci
