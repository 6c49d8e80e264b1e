"""Spans of time as the rules file writes them: ``90s``, ``15m``, ``1h``, ``7d``."""

from __future__ import annotations

import math
import re

__all__ = ["format_duration", "parse_duration"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# One number and one unit: anchored, no nested repetition, so linear in its input.
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")


def parse_duration(text: str) -> float:
    """Seconds in ``text``, a number and a unit (``s``, ``m``, ``h`` or ``d``).

    Raises:
        ValueError: ``text`` is not of that form (the message quotes it).
    """
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(f"expected a duration such as 90s, 15m, 1h or 1d, got {text!r}")
    seconds = float(match[1]) * _UNITS[match[2]]
    if not math.isfinite(seconds):
        raise ValueError(f"duration {text!r} is too long")
    return seconds


def format_duration(seconds: float) -> str:
    """``seconds`` in the largest unit that divides it (``300`` -> ``5m``)."""
    for unit in ("d", "h", "m"):
        size = _UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
