"""Query parameters: each read by one rule; a bad one is a 400 that names it.

The rules' patterns and bounds are written into the OpenAPI document from here, so what
the document promises is what the server accepts. Every pattern is linear in its input
(no nested or adjacent overlapping repetition).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Final
from urllib.parse import parse_qsl

from .errors import BAD_PARAMETER, ApiError

__all__ = ["DEFAULT_LIMIT", "DEFAULT_SINCE", "DEFAULT_TOP", "DURATION_PATTERN", "EPOCH",
           "INTEGER_PATTERN", "MAX_LIMIT", "MAX_PARAMETERS", "MAX_TEXT_CHARS", "MAX_TOP",
           "TEXT_PATTERN", "QueryParameters", "Window"]

DEFAULT_SINCE: Final = "1h"
DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 10_000
DEFAULT_TOP: Final = 10
MAX_TOP: Final = 100
MAX_TEXT_CHARS: Final = 200
# More would be a mistake or an attack: no path takes more than four.
MAX_PARAMETERS: Final = 20
# A positive number of seconds (s, the default), minutes, hours, days or weeks: 90s, 15m,
# 1h, 1.5h, 7d. Its first digit is not 0, so it is never zero.
DURATION_PATTERN: Final = r"^[1-9][0-9]{0,8}(\.[0-9]{1,6})?[smhdw]?$"
# A module name or payload kind: any text but control characters (it is only ever a
# query parameter of a read, compared for equality).
TEXT_PATTERN: Final = r"^[^\x00-\x1f\x7f]+$"
# ASCII digits only: int() would also take " 5", "+5" and other scripts' digits.
INTEGER_PATTERN: Final = r"^[0-9]{1,9}$"
# The earliest time ClickHouse's DateTime holds: a window reaching further back starts here.
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(DURATION_PATTERN)
_TEXT = re.compile(TEXT_PATTERN)
_INTEGER = re.compile(INTEGER_PATTERN)
# How much of a rejected name or value an error message quotes.
_QUOTED_CHARS = 60


def _quoted(text: str) -> str:
    return repr(text[:_QUOTED_CHARS] + ("..." if len(text) > _QUOTED_CHARS else ""))


class Window:
    """The time window [start, end) a ``since`` duration names, ending now."""

    def __init__(self, seconds: float, now: datetime | None = None) -> None:
        self.end = now or datetime.now(UTC)
        reach = (self.end - EPOCH).total_seconds()
        self.start = EPOCH if seconds >= reach else self.end - timedelta(seconds=seconds)
        self.seconds = seconds


class QueryParameters:
    """The query string of one request, checked against the parameters its path takes.

    Raises:
        ApiError: 400 for a parameter the path does not take, one given twice, or more
            than :data:`MAX_PARAMETERS` of them.
    """

    def __init__(self, query: str, allowed: Iterable[str]) -> None:
        names = tuple(allowed)
        try:
            pairs = parse_qsl(query, keep_blank_values=True, max_num_fields=MAX_PARAMETERS)
        except ValueError:
            raise ApiError(400, BAD_PARAMETER,
                           f"more than {MAX_PARAMETERS} query parameters") from None
        self._values: dict[str, str] = {}
        for name, value in pairs:
            if name not in names:
                taken = ", ".join(names) or "none"
                raise ApiError(400, BAD_PARAMETER, f"unknown parameter {_quoted(name)}; this "
                               f"path takes: {taken}", parameter=name[:_QUOTED_CHARS])
            if name in self._values:
                raise ApiError(400, BAD_PARAMETER, f"parameter {name!r} is given more than "
                               "once", parameter=name)
            self._values[name] = value

    def _raw(self, name: str) -> str | None:
        return self._values.get(name)

    def window(self, name: str = "since", default: str = DEFAULT_SINCE) -> Window:
        """A duration (``90s``, ``15m``, ``1h``, ``7d``, ``2w``) as the window ending now."""
        text = self._raw(name)
        text = default if text is None else text
        if not _DURATION.fullmatch(text):
            raise ApiError(400, BAD_PARAMETER, f"{name} must be a positive duration such as "
                           f"90s, 15m, 1h, 7d or 2w (a bare number is seconds), got "
                           f"{_quoted(text)}", parameter=name)
        unit = text[-1] if text[-1] in _UNITS else "s"
        number = float(text[:-1] if text[-1] in _UNITS else text)
        return Window(number * _UNITS[unit])

    def integer(self, name: str, default: int, maximum: int) -> int:
        """A whole number in [1, maximum]."""
        text = self._raw(name)
        if text is None:
            return default
        if not _INTEGER.fullmatch(text) or not 1 <= int(text) <= maximum:
            raise ApiError(400, BAD_PARAMETER, f"{name} must be a whole number from 1 to "
                           f"{maximum}, got {_quoted(text)}", parameter=name)
        return int(text)

    def choice(self, name: str, choices: Iterable[str], default: str) -> str:
        """One of ``choices``, exactly."""
        options = tuple(choices)
        text = self._raw(name)
        if text is None:
            return default
        if text not in options:
            raise ApiError(400, BAD_PARAMETER, f"{name} must be one of {', '.join(options)}, "
                           f"got {_quoted(text)}", parameter=name)
        return text

    def text(self, name: str) -> str | None:
        """Free text of at most :data:`MAX_TEXT_CHARS` characters, none of them control
        characters; None when absent."""
        text = self._raw(name)
        if text is None:
            return None
        if len(text) > MAX_TEXT_CHARS or not _TEXT.fullmatch(text):
            raise ApiError(400, BAD_PARAMETER, f"{name} must be 1 to {MAX_TEXT_CHARS} "
                           f"characters without control characters, got {_quoted(text)}",
                           parameter=name)
        return text
