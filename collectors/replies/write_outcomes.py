"""What a write's result says it did, and replies that report otherwise.

A write's result usually echoes the record it changed. When the call asked for a field
value (``"cabin": "business"``) and the result shows another (``"cabin": "economy"``),
that part of the write did not take, whatever else the tool reports. A reply that then
states the requested value as the outcome ("your reservation has been upgraded to
business class") reports a result the tool contradicted: the same invented result as a
price no tool returned.

Only what the call and its result both name is compared: top-level scalar fields of a
JSON object argument and a JSON object result. Fields the result does not echo say
nothing either way. Values compare as numbers when both are numbers, else as their
words, where one value's words starting the other's is the same value ("2024-05-20" and
"2024-05-20T00:00:00"; but "economy" is not "basic_economy").

The sentences that report a write's outcome are read here too; the money check of
:mod:`.grounding` uses them as well.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .claims import sentences

__all__ = ["UnappliedField", "after_write", "find_contradicted_fields", "may_report_outcome",
           "outcome_reports", "settle_fields", "unapplied_fields"]

# Reported as done, in the past: "has been charged", "was upgraded", "successfully booked".
_OUTCOME_VERBS = (r"(?:charged|refunded|credited|processed|applied|paid|deducted|billed|"
                  r"issued|returned|waived|updated|modified|changed|upgraded|downgraded|"
                  r"booked|cancell?ed|confirmed|made)")
_OUTCOME_RE = re.compile(
    rf"\b(?:(?:has|have|had)\s+(?:\w+\s+)?been|was|were|(?:i|we)(?:['’]ve|\s+have)|"
    rf"successfully)\s+(?:\w+\s+)?{_OUTCOME_VERBS}\b", re.IGNORECASE)
_PARAGRAPH_RE = re.compile(r"\n[ \t]*\n")
_VALUE_WORD_RE = re.compile(r"[a-z0-9]+")
# A field value a reply can state in words: short text with a letter in it. Bare numbers
# are left out (a "3" is in too many sentences to be read as the field's value).
_MAX_VALUE_CHARS = 64
_LETTER_RE = re.compile(r"[a-z]")
# Fields compared per write, and a result read at most this far: the guards run on the
# agent's thread.
_MAX_FIELDS = 32
_MAX_RESULT_CHARS = 256 * 1024


@dataclass(frozen=True, slots=True)
class UnappliedField:
    """A field a write asked for that its result does not show.

    Attributes:
        name: The field, as the call and the result name it.
        requested: The value the call sent, as text.
        result: The value the result shows, as text.
    """

    name: str
    requested: str
    result: str

    @property
    def evidence(self) -> str:
        return f"{self.name}: {self.requested} (result: {self.result})"


def _object(text: str) -> dict[str, Any] | None:
    text = text.strip()
    if not text.startswith("{") or len(text) > _MAX_RESULT_CHARS:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _words(value: Any) -> list[str]:
    return _VALUE_WORD_RE.findall(str(value).lower())


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    wa, wb = _words(a), _words(b)
    shorter, longer = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    return longer[:len(shorter)] == shorter


def _statable(value: Any) -> bool:
    text = str(value)
    return (isinstance(value, str) and 0 < len(text) <= _MAX_VALUE_CHARS
            and bool(_LETTER_RE.search(text.lower())))


def unapplied_fields(arguments: str, result: str) -> list[UnappliedField]:
    """The fields a write asked for that its result shows with another value.

    Args:
        arguments: The call's arguments (JSON text).
        result: The call's result text.

    Returns:
        One entry per top-level field both name, with scalar values that differ, of
        which the requested one can be stated in words; empty when either side is not a
        JSON object.
    """
    return _unapplied(_object(arguments), _object(result))


def settle_fields(pending: Sequence[UnappliedField], result: str) -> list[UnappliedField]:
    """``pending`` without the fields a later write's ``result`` shows as requested (a
    retry that took)."""
    return _settled(pending, _object(result)) if pending else []


def after_write(pending: Sequence[UnappliedField], arguments: str, result: str
                ) -> list[UnappliedField]:
    """The fields still unapplied after a write: ``pending`` settled by its ``result``,
    then what it asked for and its result does not show (the result read once)."""
    shown = _object(result)
    return _settled(pending, shown) + _unapplied(_object(arguments), shown)


def _unapplied(args: dict[str, Any] | None, shown: dict[str, Any] | None
               ) -> list[UnappliedField]:
    if not args or not shown:
        return []
    out: list[UnappliedField] = []
    for name, requested in list(args.items())[:_MAX_FIELDS]:
        if name not in shown or not _statable(requested):
            continue
        value = shown[name]
        if _scalar(value) and not _same(requested, value):
            out.append(UnappliedField(str(name), str(requested), str(value)))
    return out


def _settled(pending: Sequence[UnappliedField], shown: dict[str, Any] | None
             ) -> list[UnappliedField]:
    if not shown:
        return list(pending)
    return [f for f in pending
            if not (f.name in shown and _scalar(shown[f.name])
                    and _same(f.requested, shown[f.name]))]


def _phrase(value: str) -> re.Pattern[str]:
    # "basic_economy" is written "basic economy", "basic-economy" or as sent.
    words = _words(value)
    return re.compile(r"\b" + r"[\s_\-]+".join(map(re.escape, words)) + r"\b",
                      re.IGNORECASE)


def find_contradicted_fields(reply: str, unapplied: Sequence[UnappliedField]
                             ) -> list[UnappliedField]:
    """The fields ``reply`` reports as done with the value the write asked for, where
    the write's result showed another.

    A mention counts only in the sentences that report a write's outcome (and the list
    such a sentence introduces), and only outside a mention of the value the result
    showed ("still in basic economy" does not state "economy").
    """
    if not unapplied:
        return []
    reports = outcome_reports(reply, listed=None)
    if not reports:
        return []
    found: dict[tuple[str, str], UnappliedField] = {}
    for item in unapplied:
        if (item.name, item.requested) in found:
            continue
        requested, shown = _phrase(item.requested), _phrase(item.result)
        for sentence in reports:
            if requested.search(shown.sub(" ", sentence)):
                found[(item.name, item.requested)] = item
                break
    return list(found.values())


def may_report_outcome(reply: str) -> bool:
    """Whether ``reply`` has a sentence reporting a write's outcome at all: without one,
    neither outcome check can find anything (a cheap test that lets callers skip them)."""
    return _OUTCOME_RE.search(reply) is not None


def outcome_reports(reply: str, listed: Callable[[str], object] | None = None) -> list[str]:
    """The sentences that report what writes did: every sentence of a paragraph that
    says a write happened ("The reservations have been downgraded ... You will save a
    total of $7,222"), not only the one with the verb.

    Args:
        reply: The assistant's text.
        listed: Which lines of a list such a paragraph introduces ("...updated with the
            following details:") count as reports; None: every line.
    """
    reports: list[str] = []
    introduced = False  # the paragraph before was a report ending in ":"
    for paragraph in _PARAGRAPH_RE.split(reply):
        parts = [sentence for _, sentence in sentences(paragraph)]
        reporting = any(_OUTCOME_RE.search(sentence) for sentence in parts)
        if reporting:
            reports += parts
        elif introduced:
            reports += [line for part in parts for line in part.splitlines()
                        if listed is None or listed(line)]
        introduced = (reporting or introduced) and paragraph.rstrip().endswith(":")
    return reports

