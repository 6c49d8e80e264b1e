"""Concrete values in a reply that nothing in the conversation gave.

An agent that reports "your new reservation is ZX81QP" or "the total is $1,818" must
have read that id or price somewhere: a tool result, the user, or the system prompt. A
value found in none of them, and not arithmetic on values found there (a sum of prices,
a refund that is a difference, a fare times the passengers), was made up.

Values checked: money amounts, identifier-like codes (letters and digits together:
``HAT227``, ``M05KNL``, ``credit_card_4421486``; or a run of 8 digits or more: an order,
item or tracking number) and clock times. Other numbers are too often counts, years or
estimates said as such to be judged without reading; an amount said as an estimate
("about $46") needs only a seen amount it rounds.

Everything here is a single regex pass or a set lookup: linear in the reply and the
conversation.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from .write_outcomes import outcome_reports

__all__ = ["Grounds", "UngroundedValue", "find_misreported_outcomes", "find_ungrounded",
           "result_amounts"]

# Money: a currency sign or code before the amount, or "dollars"/"USD" after it. Two
# patterns, not one alternation: a pattern that starts with a literal or a character set
# lets the engine skip to the next sign in C (10x faster on a reply full of digits), and
# the suffix form, which must try every digit, runs only when its word occurs at all.
# Each pattern's groups are the amount as written and its digits.
_AMOUNT = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
# The signed form starts with a single set, "U" standing in for "USD" (checked just after
# it, with no word character before it: "XUSD 5" is no amount): the engine finds a set
# in C, but tries a branch such as "(?:[$€£]|USD ?)" at every position, several times
# slower. Most texts have dollars only; their pattern starts with a literal, which the
# engine finds faster still.
_SIGNED_MONEY_RE = re.compile(rf"([$€£U](?:(?<=U)(?<!\wU)SD ?|(?<!U))\s?({_AMOUNT}))")
_DOLLAR_MONEY_RE = re.compile(rf"(\$\s?({_AMOUNT}))")
_OTHER_SIGNS = ("€", "£", "USD")
_SUFFIXED_MONEY_RE = re.compile(rf"(({_AMOUNT})\s?(?:dollars|USD|usd)\b)")
_MONEY_SUFFIXES = ("dollars", "USD", "usd")
_WORD_RE = re.compile(r"[A-Za-z0-9_]+")
# Digits of a number in a source, after thousands separators are dropped ("1,936").
_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_DIGITS_RE = re.compile(r"0*(\d+(?:\.\d+)?)")  # "05" is 5
# Dates and clock times hold no amount: the 20 of "2024-05-20" or the 19 of "19:00" is no
# price a reply may state, nor a term of a total ("$260" is not 240 plus that day). They
# are read as times (see _Source.times), not as numbers.
_DATE_TIME_RE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?"
                           r"|\b\d{1,2}:\d{2}(?::\d{2})?")
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
# Totals: sums of up to this many amounts are tried (2**10 sums, computed once per
# source; the reply's own amounts: the 10 before a value).
_MAX_SUBSET_TERMS = 10
_TOTAL_TERMS = 10
# A reply's values examined at most, and how many amounts around each one count as its
# neighbours: bounds that keep a reply of thousands of numbers linear.
_MAX_VALUES = 256
_NEARBY = 12
_MAX_SUBSET_SUMS = 1024
_PERCENT_RE = re.compile(r"(\d{1,3}(?:\.\d{1,4})?)\s?(?:%|percent\b)")
# A calculator's result is a number: its first characters hold it.
_MAX_GUESS_CHARS = 256


def _money(text: str, limit: int) -> list[tuple[str, str]]:
    """The first ``limit`` money amounts of ``text``, in order: ``(as written, digits)``.

    The same amounts, in the same order, as one scan for either form would find: at each
    step the form whose next match starts first is taken, and both look on from its end.
    """
    if not any(suffix in text for suffix in _MONEY_SUFFIXES):  # the usual case: one form
        pattern = (_SIGNED_MONEY_RE if any(sign in text for sign in _OTHER_SIGNS)
                   else _DOLLAR_MONEY_RE)
        return [(m[1], m[2]) for m in itertools.islice(pattern.finditer(text), limit)]
    out: list[tuple[str, str]] = []
    signed: re.Match[str] | None = None
    suffix: re.Match[str] | None = None
    signed_done = suffix_done = False
    pos = 0
    while len(out) < limit:
        if not signed_done and (signed is None or signed.start() < pos):
            signed = _SIGNED_MONEY_RE.search(text, pos)
            signed_done = signed is None
        if not suffix_done and (suffix is None or suffix.start() < pos):
            suffix = _SUFFIXED_MONEY_RE.search(text, pos)
            suffix_done = suffix is None
        live = [m for m in (signed, suffix) if m is not None and m.start() >= pos]
        if not live:
            break
        taken = min(live, key=lambda m: m.start())
        out.append((taken[1], taken[2]))
        pos = taken.end()
    return out


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
# Words that may be codes (most words of a reply are not): whole words of 5-40 capitals
# and digits, and snake case ending in digits, looked for only when the reply has an
# underscore before digits. The first pattern starts with a single character set, so
# the engine skips in C to the next capital or digit (a pattern that starts with a
# repeat or a lookbehind is tried at every position); the lookbehind after the first
# character then checks the character before it is no word character.
_CAPS_CODE_RE = re.compile(r"[A-Z0-9](?<!\w[A-Z0-9])[A-Z0-9]{4,39}(?!\w)")
_SNAKE_CODE_RE = re.compile(r"\b[a-z][a-z_]{0,30}_\d{4,}\b")
_SNAKE_HINT_RE = re.compile(r"_\d{4}")


def _code_candidates(text: str) -> list[str]:
    """Words of ``text`` shaped like codes, in order."""
    if not _SNAKE_HINT_RE.search(text):
        return _CAPS_CODE_RE.findall(text)
    found = [(m.start(), m.group()) for m in _CAPS_CODE_RE.finditer(text)]
    found += [(m.start(), m.group()) for m in _SNAKE_CODE_RE.finditer(text)]
    found.sort()
    return [word for _, word in found]
# Units and versions in capitals are not ids either: "5GB", "4G", "2FA", "V2".
_UNIT_RE = re.compile(r"\d+(?:GB|MB|KB|TB|G|FA|K|M|X|AM|PM|ST|ND|RD|TH)|V\d+|[A-Z]\d")


# Digit runs this long are ids (order, item, tracking numbers), not counts or years.
_MIN_DIGIT_CODE = 8
# "about $46", "roughly $1,200": an estimate, checked against the seen amounts it rounds.
_ESTIMATE_RE = re.compile(r"(?:about|approximately|approx\.?|around|roughly|nearly|almost|"
                          r"~|just\s+(?:over|under)|more\s+than|less\s+than|up\s+to)\s*$",
                          re.IGNORECASE)
# Words one of which an estimate needs (substring tests in C, before any regex).
_ESTIMATE_WORDS = ("about", "approx", "around", "roughly", "nearly", "almost", "~", "over",
                   "under", "than", "up to")
_ESTIMATE_SHARE = 0.05


def _is_code(word: str) -> bool:
    if not _MIN_CODE <= len(word) <= _MAX_CODE:
        return False
    if word.isdigit():
        return len(word) >= _MIN_DIGIT_CODE
    return bool(_CODE_RE.fullmatch(word)) and not _UNIT_RE.fullmatch(word)


@dataclass(frozen=True, slots=True)
class UngroundedValue:
    """A value stated in a reply with no source.

    Attributes:
        kind: ``"money"``, ``"code"``, ``"time"``, ``"outcome"`` (money or a field a
            write's result does not bear out), or ``"guess"`` (a calculator's result on a
            number no source gave).
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
        self._texts: list[str] = []
        # The readings of `_texts`, looked up when a reply first asks about a value.
        self._sources: list[_Source] = []
        # How many of the sources each index has read: words, numbers (as cents, and as
        # operands of derivations) and times are read only when a reply first asks for
        # that kind of value.
        self._read_words = self._read_numbers = self._read_operands = self._read_times = 0
        self._read_percents = 0
        self._percents: set[int] = set()  # numbers the sources give as percentages
        self._words: set[str] = set()
        self._keys: set[int] = set()  # the sources' numbers, in cents
        self._recent: list[float] = []
        self._times: set[str] = set()
        self._results: list[str] = []
        self._totals: set[int] | None = None
        self._guesses: set[int] = set()  # calculator results of operands no one gave
        self._said: list[str] = []  # the agent's own earlier replies (read lazily)
        self._said_keys: set[int] = set()
        self._read_said = 0

    def add(self, text: str) -> None:
        """Take ``text`` (a tool result, a user message, a system prompt) as a source.

        Sources are read when a reply first asks about them: a reply that states no value
        costs nothing here.
        """
        if text:
            self._texts.append(text)

    def _new_sources(self, read: int) -> list[_Source]:
        """The sources after the first ``read``, each looked up once per conversation."""
        if len(self._sources) < len(self._texts):
            self._sources += [_SOURCES.get(text) for text in self._texts[len(self._sources):]]
        return self._sources[read:]

    def has_word(self, word: str) -> bool:
        """Whether ``word`` (lower-case) occurred as a word in the sources."""
        if self._read_words < len(self._texts):
            for source in self._new_sources(self._read_words):
                self._words.update(source.words())
            self._read_words = len(self._texts)
        return word in self._words

    def _recent_operands(self) -> list[float]:
        """The sources' latest numbers, as floats: the operands of sums and estimates
        (needed only for a value not seen as it is)."""
        if self._read_operands < len(self._texts):
            for source in self._new_sources(self._read_operands):
                self._recent = [*self._recent, *source.operands()][-_MAX_OPERANDS:]
            self._read_operands = len(self._texts)
        return self._recent

    def add_result(self, text: str) -> None:
        """Take a tool result as a source, keeping its money amounts for totals."""
        self.add(text)
        # Parsed only if a value needs a total (most replies' values are seen as they are).
        self._results = (self._results + [text])[-_MAX_SUBSET_TERMS:]
        self._totals = None

    def add_said(self, reply: str) -> None:
        """Take an earlier reply of the agent's: not a source for later replies, but
        what the agent computes with next (its values were judged when it said them)."""
        if reply:
            self._said.append(reply)

    def operand_known(self, value: float) -> bool:
        """Whether ``value`` is a number a source or the agent's own earlier reply gave,
        or a total of the latest results' amounts (the legs of a fare)."""
        if self.has_number(value) or self._results_total(value):
            return True
        for text in self._said[self._read_said:]:
            self._said_keys.update(_SOURCES.get(text).keys())
        self._read_said = len(self._said)
        return _key(abs(value)) in self._said_keys

    def has_percent(self, value: float) -> bool:
        """Whether a source gave ``value`` as a percentage ("15%", "15 percent")."""
        for text in self._texts[self._read_percents:]:
            if "%" in text or "percent" in text:
                self._percents.update(_key(float(m.group(1)))
                                      for m in _PERCENT_RE.finditer(text))
        self._read_percents = len(self._texts)
        return _key(value) in self._percents

    def add_guess(self, result: str) -> None:
        """Take the result of a calculation on a number no source gave: a reply stating
        it states a guess, however derivable it is from other values."""
        self._guesses.update(_Source(result[:_MAX_GUESS_CHARS]).keys())

    def guessed(self, value: float) -> bool:
        """Whether ``value`` is a guess's result that no source stated itself."""
        return (bool(self._guesses) and _key(abs(value)) in self._guesses
                and not self.has_number(value))

    def has_time(self, clock: str) -> bool:
        """Whether the clock time ``"HH:MM"`` occurred in the sources."""
        if self._read_times < len(self._texts):
            for source in self._new_sources(self._read_times):
                self._times.update(source.times())
            self._read_times = len(self._texts)
        return clock in self._times

    def has_number(self, value: float) -> bool:
        """Whether ``value`` (its absolute value) occurred as a number in the sources."""
        return _key(abs(value)) in self.number_keys()

    def number_keys(self) -> AbstractSet[int]:
        """The numbers of the sources so far, in cents (see `_key`); not to be changed."""
        if self._read_numbers < len(self._texts):
            for source in self._new_sources(self._read_numbers):
                self._keys.update(source.keys())
            self._read_numbers = len(self._texts)
        return self._keys

    def rounds(self, value: float) -> bool:
        """Whether a seen number is within an estimate's reach of ``value`` (5%, at
        least 1): "about $46" for 45.99."""
        reach = max(1.0, _ESTIMATE_SHARE * abs(value))
        return any(abs(abs(x) - abs(value)) <= reach for x in self._recent_operands())

    def derivable(self, value: float, extra: Sequence[float] = (),
                  before: Sequence[float] = ()) -> bool:
        """Whether ``value`` is a seen number, or one sum, difference, product, ratio or
        small multiple of seen numbers, or a total of the latest results' amounts or of
        the reply's own amounts just before it.

        Args:
            value: The number to account for.
            extra: Numbers of the reply around ``value``.
            before: The reply's amounts just before ``value`` (a total follows its terms).
        """
        if self.has_number(value):
            return True
        nearby = {_key(x) for x in extra}

        keys = self._keys  # read by has_number above

        def seen(x: float) -> bool:
            key = _key(abs(x))
            return key in nearby or key in keys

        for a in dict.fromkeys([*extra, *self._recent_operands()]):
            if seen(value - a) or seen(value + a):
                return True
            if a not in (0.0, 1.0) and a in extra and (seen(value / a) or seen(value * a)):
                return True
        if any(seen(value / k) for k in _SMALL_FACTORS):
            return True
        return self._results_total(value) or _key(value) in _subset_sums(before)

    def _results_total(self, value: float) -> bool:
        # A total of some of the amounts the latest results hold (fares of several legs
        # and passengers): subset sums, bounded so a long list costs little.
        if self._totals is None:
            amounts = [a for text in self._results for a in result_amounts(text)]
            self._totals = _subset_sums([abs(a) for a in amounts[-_MAX_SUBSET_TERMS:]])
        return _key(value) in self._totals


class _Source:
    """What one source says (its words, numbers and times), each read when a reply first
    asks for it, then kept. Two threads may both read one: the readings are pure, so
    either result is the same."""

    __slots__ = ("text", "_words", "_numbers", "_keys", "_operands", "_times")

    def __init__(self, text: str) -> None:
        self.text = text
        self._words: frozenset[str] | None = None
        self._numbers: tuple[str, ...] | None = None
        self._keys: frozenset[int] | None = None
        self._operands: tuple[float, ...] | None = None
        self._times: frozenset[str] | None = None

    def words(self) -> frozenset[str]:
        """The lower-cased words."""
        if self._words is None:
            self._words = frozenset(_WORD_RE.findall(self.text.lower()))
        return self._words

    def numbers(self) -> tuple[str, ...]:
        """The numbers, as digits, in order."""
        if self._numbers is None:
            # Numbers are kept as their digits (set building in C); a refund of -114 in
            # a ledger is "$114" in a reply, and "1,936" is 1936.
            text = _DATE_TIME_RE.sub(" ", self.text)
            self._numbers = tuple(_DIGITS_RE.findall(
                _THOUSANDS_RE.sub("", text) if "," in text else text))
        return self._numbers

    def keys(self) -> frozenset[int]:
        """The numbers in cents."""
        if self._keys is None:
            # Each number once, in cents: a lookup is one rounding and one set probe, not
            # a string per spelling ("1936", "1936.0", "1936.00").
            self._keys = frozenset(_key(v) for d in self.numbers()
                                   if (v := _number(d)) is not None)
        return self._keys

    def operands(self) -> tuple[float, ...]:
        """The last numbers as floats: the operands of sums and differences."""
        if self._operands is None:
            self._operands = tuple(v for d in self.numbers()[-_MAX_OPERANDS:]
                                   if (v := _number(d)) is not None)
        return self._operands

    def times(self) -> frozenset[str]:
        """Clock times ("14:05", "2:05 pm") and bare hours ("11am"), as "HH:MM"."""
        if self._times is None:
            times = {_clock(m) for m in _clock_times(self.text)}
            times.update(_clock(m) for m in _HOUR_RE.finditer(self.text))
            self._times = frozenset(times)
        return self._times


class _SourceReadings:
    """What each source says, read once and kept.

    An agent checks its conversation after every reply, and all but the newest messages
    are the same strings as last time. Kept by characters, least recently used first out,
    so any source, whatever its size, is read once per conversation while the cache holds
    at most ``budget`` characters of sources (and what was read from them).
    """

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._chars = 0
        self._entries: OrderedDict[str, _Source] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> _Source:
        """The readings of ``text``: kept ones, or new ones (read on first use)."""
        with self._lock:
            source = self._entries.get(text)
            if source is not None:
                self._entries.move_to_end(text)
                return source
            source = self._entries[text] = _Source(text)
            self._chars += len(text)
            while self._chars > self._budget and len(self._entries) > 1:
                evicted, _ = self._entries.popitem(last=False)
                self._chars -= len(evicted)
            return source


# Characters of sources whose readings are kept: a few long conversations' worth.
_SOURCE_CACHE_CHARS = 4 * 1024 * 1024
_SOURCES = _SourceReadings(_SOURCE_CACHE_CHARS)


def _clock_times(text: str) -> list[re.Match[str]]:
    """``list(_TIME_RE.finditer(text))``, trying the pattern only where a time can start:
    one or two characters before a colon (found by str.find in C), not at every
    character. Tried in order and each from the end of the last match, as finditer does;
    the pattern sees the characters before where it is tried, for its lookbehind."""
    out: list[re.Match[str]] = []
    end = 0
    colon = text.find(":")
    while colon >= 0:
        for start in (colon - 2, colon - 1):  # the hour is one or two characters
            if start >= end:
                found = _TIME_RE.match(text, start)
                if found is not None:
                    out.append(found)
                    end = found.end()
                    break
        colon = text.find(":", max(colon + 1, end))
    return out


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
    found = [(written, v) for written, digits in _money(reply, _MAX_VALUES)
             if (v := _number(digits)) is not None]
    amounts = [v for _, v in found]
    seen = grounds.number_keys() if found else frozenset()
    # Whether the reply estimates, and where each amount is written (each looked for
    # from where the one before it was found): read at the first amount not seen as it
    # is, since most replies' amounts all are (and most replies estimate nothing).
    estimates: bool | None = None
    at = placed = 0
    for i, (written, value) in enumerate(found):
        if value == 0 or _key(abs(value)) in seen:
            continue  # seen as it is (most values): no estimate or derivation to try
        if estimates is None:
            lowered = reply.lower()
            estimates = any(w in lowered for w in _ESTIMATE_WORDS)
        if estimates:
            for earlier, earlier_value in found[placed:i + 1]:
                if earlier_value != 0:
                    at = max(reply.find(earlier, at), at)
            placed = i + 1
            if _ESTIMATE_RE.search(reply, max(0, at - 24), at) and grounds.rounds(value):
                continue
        # The amounts around it in the reply: the legs a total adds up, the fare a
        # per-passenger price divides.
        nearby = amounts[max(0, i - _NEARBY):i] + amounts[i + 1:i + 1 + _NEARBY]
        if grounds.guessed(value):
            out.setdefault(written, UngroundedValue(
                "guess", f"{written} (calculated from a number no source gave)"))
        elif not grounds.derivable(value, nearby, amounts[max(0, i - _TOTAL_TERMS):i]):
            out.setdefault(written, UngroundedValue("money", written))
    money_digits: set[str] | None = None  # "$12345678" is money, not an id
    # Each word once (a reply names its reservation again and again): whether a word is
    # grounded does not depend on where it stands.
    for word in dict.fromkeys(_code_candidates(reply)):
        if word.lower() in skip or not _is_code(word):
            continue
        if word.isdigit():
            if money_digits is None:
                money_digits = {digits.replace(",", "") for _, digits in _money(
                    reply, _MAX_VALUES)}
            if word in money_digits:
                continue
        if not grounds.has_word(word.lower()):
            out.setdefault(word, UngroundedValue("code", word))
    if ":" in reply:
        for m in _clock_times(reply):
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
_CHARGE_RE = re.compile(r"\b(?:charged|paid|deducted|billed|additional\s+(?:cost|charge)s?)\b",
                        re.IGNORECASE)
_LISTED_OUTCOME_RE = re.compile(r"\b(?:total|cost|charged?|refund(?:ed)?|fees?|paid)\b",
                                re.IGNORECASE)
_PER_UNIT_RE = re.compile(r"\b(?:per|each|apiece|a\s+piece)\b", re.IGNORECASE)
_MAX_OUTCOME_AMOUNTS = 64


def _json_amounts(value: Any, key: str, out: list[float]) -> None:
    if isinstance(value, dict):
        inherited = bool(_AMOUNT_KEY_RE.search(key))
        for k, v in value.items():
            # {"prices": {"economy": 105}}: the numbers under an amount key are amounts.
            _json_amounts(v, key if inherited else str(k), out)
    elif isinstance(value, list):
        for v in value:
            _json_amounts(v, key, out)
    elif (isinstance(value, (int, float)) and not isinstance(value, bool)
          and _AMOUNT_KEY_RE.search(key)):
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
    """Money in paragraphs that report a write's outcome, which the write's result does
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
    # Of a list a report introduces, only lines stating what was charged, refunded or
    # totalled: a payment method's balance there describes the method, not an outcome.
    reports = outcome_reports(reply, listed=_LISTED_OUTCOME_RE.search)
    if not reports:
        return []
    keys = {_key(abs(a)) for a in (*amounts, *earlier)}
    positive = {_key(a) for a in (*amounts, *earlier) if a > 0}
    values = [abs(a) for a in amounts]
    totals = _subset_sums(values)
    out: dict[str, UngroundedValue] = {}
    examined = 0
    for sentence in reports:
        if examined >= _MAX_VALUES:
            break
        per_unit = bool(_PER_UNIT_RE.search(sentence))
        for text, digits in _money(sentence, _MAX_VALUES - examined):
            examined += 1
            value = _number(digits)
            if value is None or value == 0:
                continue
            target = _key(value)
            derived = target in keys or any(
                _key(value - a) in keys or _key(a - value) in keys for a in values)
            if not derived:
                derived = target in totals
            if not derived and per_unit:
                derived = any(_key(value * k) in keys for k in _SMALL_FACTORS)
            if not derived:
                out.setdefault(text, UngroundedValue("outcome", text))
            elif (target in keys and target not in positive
                  and _CHARGE_RE.search(sentence) and not re.search(
                      r"\brefund", sentence, re.IGNORECASE)):
                out.setdefault(text, UngroundedValue("outcome", text))  # refunded, not charged
    return list(out.values())


def _subset_sums(values: Sequence[float]) -> set[int]:
    sums: set[int] = {0}
    for x in values[-_MAX_SUBSET_TERMS:]:  # the latest: a total follows its terms
        sums |= {s + _key(x) for s in sums if len(sums) < _MAX_SUBSET_SUMS}
    return sums


