"""Timing for the linear-time tests: the best of a few runs, in this thread's CPU time.

The tests assert ratios ("4x the input costs well under 16x the time"), never absolute
times. On a shared 2-CPU machine wall-clock time also counts every other process's work:
at a load average of 5 the same rule measured x9 for x4 input in wall-clock time and x4
in CPU time. The CPU time of the calling thread is what "linear in its input" is about.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["cpu_seconds"]


def cpu_seconds(call: Callable[[], object], repeats: int = 1) -> float:
    """The least CPU time of this thread over ``repeats`` calls of ``call``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        call()
        best = min(best, time.thread_time() - start)
    return best
