"""Concrete values in a reply that nothing in the conversation gave.

An agent that reports "your new reservation is ZX81QP" or "the total is $1,818" must
have read that id or price somewhere: a tool result, the user, or the system prompt. A
value found in none of them, and not arithmetic on values found there (a sum of prices,
a refund that is a difference, a fare times the passengers), was made up.

Values checked: money amounts, identifier-like codes (letters and digits together:
``HAT227``, ``M05KNL``, ``credit_card_4421486``) and clock times. Other numbers are too
often counts, years or estimates said as such to be judged without reading.

Everything here is a single regex pass or a set lookup: linear in the reply and the
conversation.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from guardtrace.collectors.claims import sentences as _split_sentences

__all__ = ["Grounds", "UngroundedValue", "find_misreported_outcomes", "find_ungrounded",
           "result_amounts"]

_MONEY_RE = re.compile(r"(?:\$|USD\s?|€|£)\s?(?P<n>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
                       r"|(?P<m>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\s?(?:dollars|usd)\b",
                       re.IGNORECASE)
_NUMBER_RE = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\w)|(?<![\w])-?\d+(?:\.\d+)?")
_WORD_RE = re.compile(r"[A-Za-z0-9_]+")
_TIME_RE = re.compile(r"(?<![\d:])(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?::[0-5]\d)?"
                      r"\s?(?P<ap>[ap]\.?m\b\.?)?", re.IGNORECASE)
# "11am", "3 p.m.": hours people write without minutes (ground a "11:00 AM" later).
_HOUR_RE = re.compile(r"\b(?P<h>1[0-2]|0?\d)\s?(?P<ap>[ap]\.?m\b\.?)", re.IGNORECASE)
# Word shapes of codes: letters and digits mixed, 5-40 characters.
_MAX_CODE = 40
_MIN_CODE = 5
# Numbers kept for derivations: the most recent ones (a conversation's tool results can
# hold thousands of numbers; pair checks over all of them would cost too much).
_MAX_OPERANDS = 400
_SMALL_FACTORS = tuple(range(2, 10))
_MAX_SUBSET_TERMS = 16
# A reply's values examined at most, and how many amounts around each one count as its
# neighbours: bounds that keep a reply of thousands of numbers linear.
_MAX_VALUES = 256
_NEARBY = 12
_MAX_SUBSET_SUMS = 4096


def _number(text: str) -> float | None:
    # Digit runs longer than any amount (hashes, ids) are not numbers to derive from.
    if len(text) > 18:
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _key(value: float) -> int:
    return round(value * 100)


# The shapes of record ids: capitals and digits ("HAT227", "M05KNL", "L1001") or a
# snake-case prefix and a long number ("credit_card_4421486"). Lower-case words with
# digits are mostly names of things ("base64", "utf8", "python3"), not results.
_CODE_RE = re.compile(r"(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*\d)[A-Z0-9]+|[a-z]+(?:_[a-z]+)*_\d{4,}")
# Units and versions in capitals are not ids either: "5GB", "4G", "2FA", "V2".
_UNIT_RE = re.compile(r"\d+(?:GB|MB|KB|TB|G|FA|K|M|X|AM|PM|ST|ND|RD|TH)|V\d+|[A-Z]\d")


def _is_code(word: str) -> bool:
    if not _MIN_CODE <= len(word) <= _MAX_CODE:
        return False
    return bool(_CODE_RE.fullmatch(word)) and not _UNIT_RE.fullmatch(word)


@dataclass(frozen=True, slots=True)
class UngroundedValue:
    """A value stated in a reply with no source.

    Attributes:
        kind: ``"money"``, ``"code"``, ``"time"``, or ``"outcome"`` (money a write's result
            does not bear out).
        text: The value as written.
    """

    kind: str
    text: str


class Grounds:
    """What the conversation has said so far: the text and the numbers in it.

    Feed it every system, user and tool message before the reply (:meth:`add`), then ask
    :meth:`find_ungrounded` about the reply.
    """

    def __init__(self) -> None:
        self._words: set[str] = set()
        self._numbers: set[int] = set()
        self._recent: list[float] = []
        self._times: set[str] = set()
        self._amounts: list[float] = []

    def add(self, text: str) -> None:
        """Take ``text`` (a tool result, a user message, a system prompt) as a source."""
        if not text:
            return
        self._words.update(_WORD_RE.findall(text.lower()))
        for m in _NUMBER_RE.finditer(text):
            value = _number(m.group())
            if value is not None:
                # A refund of -114 in a ledger is "$114" in a reply.
                self._numbers.add(_key(abs(value)))
                self._recent.append(abs(value))
        if len(self._recent) > 4 * _MAX_OPERANDS:
            self._recent = self._recent[-_MAX_OPERANDS:]
        if ":" in text:
            for m in _TIME_RE.finditer(text):
                self._times.add(_clock(m))
        for m in _HOUR_RE.finditer(text):
            self._times.add(_clock(m))

    def has_word(self, word: str) -> bool:
        """Whether ``word`` (lower-case) occurred as a word in the sources."""
        return word in self._words

    def add_result(self, text: str) -> None:
        """Take a tool result as a source, keeping its money amounts for totals."""
        self.add(text)
        self._amounts = (self._amounts + result_amounts(text))[-_MAX_SUBSET_TERMS:]

    def has_time(self, clock: str) -> bool:
        """Whether the clock time ``"HH:MM"`` occurred in the sources."""
        return clock in self._times

    def has_number(self, value: float) -> bool:
        return _key(value) in self._numbers

    def derivable(self, value: float, extra: Sequence[float] = ()) -> bool:
        """Whether ``value`` is a seen number, or one sum, difference, product, ratio or
        small multiple of seen numbers (``extra``: numbers of the reply itself)."""
        target = _key(value)
        if target in self._numbers:
            return True
        operands = list(dict.fromkeys([*extra, *self._recent[-_MAX_OPERANDS:]]))
        keys = self._numbers | {_key(x) for x in extra}
        for a in operands:
            if _key(value - a) in keys or _key(value + a) in keys or _key(a - value) in keys:
                return True
            if a not in (0.0, 1.0) and a in extra and (_key(value / a) in keys
                                                       or _key(value * a) in keys):
                return True
        for k in _SMALL_FACTORS:
            if _key(value / k) in keys:
                return True
        # A total of some of the amounts the reply lists or the latest results hold (fares
        # of several legs and passengers): subset sums, bounded so a long list costs little.
        return target in _subset_sums(extra) or target in _subset_sums(self._amounts)


def _clock(m: re.Match[str]) -> str:
    hour = int(m.group("h"))
    minute = int(m.groupdict().get("m") or 0)
    ap = (m.group("ap") or "").lower().replace(".", "")
    if ap == "pm" and hour < 12:
        hour += 12
    elif ap == "am" and hour == 12:
        hour = 0
    return f"{hour:02d}:{minute:02d}"


def find_ungrounded(reply: str, grounds: Grounds,
                    ignore: Iterable[str] = ()) -> list[UngroundedValue]:
    """Values in ``reply`` that ``grounds`` does not account for.

    Args:
        reply: The assistant's text.
        grounds: The conversation's sources so far.
        ignore: Lower-case words never to report (the tool names of the catalog, which
            the model knows without a result).

    Returns:
        The ungrounded values, in order, each once.
    """
    out: dict[str, UngroundedValue] = {}
    skip = set(ignore)
    found = [(m, v) for m in itertools.islice(_MONEY_RE.finditer(reply), _MAX_VALUES)
             if (v := _number(m.group("n") or m.group("m"))) is not None]
    amounts = [v for _, v in found]
    for i, (m, value) in enumerate(found):
        if value == 0:
            continue
        # The amounts around it in the reply: the legs a total adds up, the fare a
        # per-passenger price divides.
        nearby = amounts[max(0, i - _NEARBY):i] + amounts[i + 1:i + 1 + _NEARBY]
        if not grounds.derivable(value, nearby):
            out.setdefault(m.group().strip(), UngroundedValue("money", m.group().strip()))
    for m in _WORD_RE.finditer(reply):
        word = m.group()
        if word.lower() in skip or not _is_code(word):
            continue
        if not grounds.has_word(word.lower()):
            out.setdefault(word, UngroundedValue("code", word))
    if ":" in reply:
        for m in _TIME_RE.finditer(reply):
            if not grounds.has_time(_clock(m)):
                out.setdefault(m.group().strip(), UngroundedValue("time", m.group().strip()))
    return list(out.values())


# --- outcomes of writes ---------------------------------------------------------------
# Keys of a write's JSON result whose numbers are money: what was charged, refunded, owed.
_AMOUNT_KEY_RE = re.compile(r"amount|price|total|cost|fee|charge|refund|paid|balance|payment",
                            re.IGNORECASE)
# Error and status texts state amounts in prose: "total price is 1002".
_AMOUNT_PROSE_RE = re.compile(
    r"(?:amount|price|total|cost|fee|charge|refund|paid|balance)\D{0,20}?(-?\d[\d,]*(?:\.\d+)?)",
    re.IGNORECASE)
# Sentences that report what a write did with money.
# Reported as done, in the past: "has been charged", "was refunded", "processed".
_OUTCOME_VERBS = (r"(?:charged|refunded|credited|processed|applied|paid|deducted|billed|"
                  r"issued|returned|waived)")
_OUTCOME_RE = re.compile(
    rf"\b(?:(?:has|have|had)\s+(?:\w+\s+)?been|was|were|(?:i|we)(?:['’]ve|\s+have)|"
    rf"successfully)\s+(?:\w+\s+)?{_OUTCOME_VERBS}\b", re.IGNORECASE)
_CHARGE_RE = re.compile(r"\b(?:charged|paid|deducted|billed|additional\s+(?:cost|charge)s?)\b",
                        re.IGNORECASE)
_PER_UNIT_RE = re.compile(r"\b(?:per|each|apiece|a\s+piece)\b", re.IGNORECASE)
_MAX_OUTCOME_AMOUNTS = 64


def _json_amounts(value: Any, key: str, out: list[float]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _json_amounts(v, str(k), out)
    elif isinstance(value, list):
        for v in value:
            _json_amounts(v, key, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if _AMOUNT_KEY_RE.search(key):
            out.append(float(value))


def result_amounts(result: str) -> list[float]:
    """The money amounts of a write's result: numbers under amount-like keys of its JSON,
    or after amount words in prose ("total price is 1002")."""
    out: list[float] = []
    text = result.strip()
    if text[:1] in "[{":
        try:
            _json_amounts(json.loads(text), "", out)
            return out[-_MAX_OUTCOME_AMOUNTS:]
        except ValueError:
            pass
    for m in _AMOUNT_PROSE_RE.finditer(text):
        value = _number(m.group(1))
        if value is not None:
            out.append(value)
    return out[-_MAX_OUTCOME_AMOUNTS:]


def find_misreported_outcomes(reply: str, amounts: Sequence[float],
                              earlier: Sequence[float] = ()) -> list[UngroundedValue]:
    """Money in sentences that report a write's outcome, which the write's result does
    not bear out.

    Args:
        reply: The assistant's text.
        amounts: The money amounts of the results of the writes this turn made before
            the reply (:func:`result_amounts`); empty: nothing to check against.
        earlier: Amounts of earlier turns' writes: restating one is not misreporting.

    Returns:
        Amounts stated as charged, refunded, processed or totalled that are neither an
        amount of the results, nor a sum or difference of two, nor (for "per passenger"
        amounts) a share of one, or that are said to be charged when the results only
        refunded them.
    """
    if not amounts:
        return []
    keys = {_key(abs(a)) for a in (*amounts, *earlier)}
    positive = {_key(a) for a in (*amounts, *earlier) if a > 0}
    values = [abs(a) for a in amounts]
    totals = _subset_sums(values)
    out: dict[str, UngroundedValue] = {}
    examined = 0
    for _, sentence in _sentences(reply):
        if examined >= _MAX_VALUES or not _OUTCOME_RE.search(sentence):
            continue
        per_unit = bool(_PER_UNIT_RE.search(sentence))
        for m in itertools.islice(_MONEY_RE.finditer(sentence), _MAX_VALUES - examined):
            examined += 1
            value = _number(m.group("n") or m.group("m"))
            if value is None or value == 0:
                continue
            target = _key(value)
            derived = target in keys or any(
                _key(value - a) in keys or _key(a - value) in keys for a in values)
            if not derived:
                derived = target in totals
            if not derived and per_unit:
                derived = any(_key(value * k) in keys for k in _SMALL_FACTORS)
            text = m.group().strip()
            if not derived:
                out.setdefault(text, UngroundedValue("outcome", text))
            elif (target in keys and target not in positive
                  and _CHARGE_RE.search(sentence) and not re.search(
                      r"\brefund", sentence, re.IGNORECASE)):
                out.setdefault(text, UngroundedValue("outcome", text))  # refunded, not charged
    return list(out.values())


def _subset_sums(values: Sequence[float]) -> set[int]:
    sums: set[int] = {0}
    for x in values[:_MAX_SUBSET_TERMS]:
        sums |= {s + _key(x) for s in sums if len(sums) < _MAX_SUBSET_SUMS}
    return sums


def _sentences(text: str) -> list[tuple[int, str]]:
    return _split_sentences(text)
