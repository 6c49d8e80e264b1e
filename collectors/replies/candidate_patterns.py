"""Which of many regexes, or of many needed words, can occur in a text, found in one pass.

The reply guards run dozens of patterns over every reply, and on most replies all but a
few find nothing. With google-re2 installed, one RE2 set reads the reply once and says
which may: :class:`CandidatePatterns` for the typed-call shapes (a *looser* copy of each
pattern, :func:`looser_re2`), :class:`CandidateWords` for the words the claim patterns
need (one substring test per word otherwise: 81 scans of the reply).

Why the claim patterns themselves are not in a set: their looser copies (37 patterns
with verb alternations of hundreds of forms) make an automaton whose states RE2 builds
as new text needs them, and real replies keep needing new ones: measured on the dev
set's replies, the first pass cost 90 to 190 µs a reply against 6 to 10 µs once built,
and reached 20 µs only after some 10,000 replies and 20 MB of cache (with an 8 MB cache
it never did: 150 µs a reply). Sets of words and of the small shape patterns stay near
their warm cost from the first reply (3 to 30 µs).

Looser, so never wrong: a copy matches at least every text its pattern matches, and a
word set finds at least every word the substring tests would. What RE2 lacks is left
out of a copy, which only widens it: lookarounds, word boundaries and end anchors are
dropped, possessive and lazy repeats become greedy, atomic groups plain ones. Where RE2's
meaning is narrower than Python's it is widened: ``\\w``, ``\\d`` and ``\\s`` match only
ASCII in RE2, so the copy lets every non-ASCII character through (and a negated class
keeps only its ASCII exclusions). Four characters are taken for ASCII letters by
Python's case-insensitive matching or lower-casing but not as RE2 takes them (``İ``,
``ı``, ``ſ`` and the Kelvin sign, pinned by a test over the Basic Multilingual Plane): a
text holding one is not prefiltered, nor is one that is no valid UTF-8 (a lone
surrogate). A pattern with a construct the conversion does not know is always a
candidate.

Without google-re2 (it is optional for the hooks: ``guardtrace[fast]``) nothing is
prefiltered and the guards give the same verdicts, more slowly; the tests run both ways.
"""

from __future__ import annotations

import re
from collections.abc import Container, Sequence
from re import _constants as sre  # type: ignore[attr-defined]  # the stdlib's own parser
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

try:  # optional: pip install guardtrace[fast]
    import re2 as _re2
except ImportError:  # every pattern is then a candidate
    _re2 = None

__all__ = ["EVERY", "RE2_AVAILABLE", "CandidatePatterns", "CandidateWords", "looser_re2"]

RE2_AVAILABLE = _re2 is not None

# Characters that Python's case-insensitive matching or lower-casing takes for an ASCII
# letter, and RE2 does not (or not next to a word boundary): texts holding one are not
# prefiltered (tests/unit/test_candidate_patterns.py pins that there are no others).
UNFOLDED_LETTERS = ("İ", "ı", "ſ", "\u212a")

# RE2 bounds a counted repeat at 1000; a larger bound is written as unbounded (looser).
_RE2_MAX_REPEAT = 1000
# RE2's memory for a set's program and the automaton states it keeps: the sets here stay
# near their warm cost within it (the word set measured on 10,000 real replies).
_RE2_MAX_MEM = 8 << 20

_NON_ASCII = r"\x{80}-\x{10ffff}"
# A run of whitespace as str.split() sees it, widened to any non-ASCII character.
_SPACE_RUN = r"[\t\n\x0b\x0c\r \x1c-\x1f\x{80}-\x{10ffff}]+"
_ANY_CHAR = r"\x00-\x{10ffff}"
_ASCII_SPACE = r"\t\n\x0b\x0c\r \x1c-\x1f"  # what str.isspace() holds below 128
_ASCII_WORD = "0-9A-Za-z_"
# For each class shorthand, as RE2 class contents: a superset of what Python's matches
# (used where the class is a plain one), and a subset (inside a negated class, whose
# complement must come out a superset).
_SHORTHANDS: dict[Any, tuple[str, str]] = {
    sre.CATEGORY_DIGIT: ("0-9" + _NON_ASCII, "0-9"),
    sre.CATEGORY_NOT_DIGIT: (_ANY_CHAR, r"\x00-/:-\x7f"),
    sre.CATEGORY_SPACE: (_ASCII_SPACE + _NON_ASCII, _ASCII_SPACE),
    sre.CATEGORY_NOT_SPACE: (_ANY_CHAR, r"\x00-\x08\x0e-\x1b!-\x7f"),
    sre.CATEGORY_WORD: (_ASCII_WORD + _NON_ASCII, _ASCII_WORD),
    sre.CATEGORY_NOT_WORD: (_ANY_CHAR, r"\x00-/:-@\[-\^`\{-\x7f"),
}
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)
_START_ANCHORS = {sre.AT_BEGINNING: "^", sre.AT_BEGINNING_STRING: r"\A"}
_NEVER = rf"[^{_ANY_CHAR}]"  # an RE2 pattern that matches nothing


class _Unsupported(Exception):
    """A construct :func:`looser_re2` does not convert."""


def looser_re2(pattern: re.Pattern[str]) -> str | None:
    """An RE2 pattern that matches somewhere in every text where ``pattern`` matches
    somewhere (and in some others); None when ``pattern`` uses a construct this does not
    convert (a back-reference, a conditional group, scoped flags)."""
    if pattern.flags & re.ASCII or not isinstance(pattern.pattern, str):
        return None
    try:
        body = _sequence(sre_parse.parse(pattern.pattern, pattern.flags))
    except _Unsupported:
        return None
    flags = "".join(letter for flag, letter in ((re.IGNORECASE, "i"), (re.MULTILINE, "m"),
                                               (re.DOTALL, "s")) if pattern.flags & flag)
    return f"(?{flags}){body}" if flags else body


def _char(code: int) -> str:
    return rf"\x{{{code:x}}}"


def _class(items: list[tuple[Any, Any]]) -> str:
    negated = any(op is sre.NEGATE for op, _ in items)
    parts = []
    for op, value in items:
        if op is sre.NEGATE:
            continue
        if op is sre.LITERAL:
            parts.append(_char(value))
        elif op is sre.RANGE:
            parts.append(f"{_char(value[0])}-{_char(value[1])}")
        elif op is sre.CATEGORY and value in _SHORTHANDS:
            parts.append(_SHORTHANDS[value][1 if negated else 0])
        else:
            raise _Unsupported(op)
    if not parts:  # "[^\W]"-like classes may come out empty: match any character
        return f"[{_ANY_CHAR}]"
    return f"[{'^' if negated else ''}{''.join(parts)}]"


def _sequence(items: Any) -> str:
    out: list[str] = []
    for op, value in items:
        if op is sre.LITERAL:
            out.append(_char(value))
        elif op is sre.NOT_LITERAL:
            out.append(f"[^{_char(value)}]")
        elif op is sre.ANY:
            out.append(".")  # "." means the same in both, with or without DOTALL
        elif op is sre.IN:
            out.append(_class(value))
        elif op is sre.CATEGORY and value in _SHORTHANDS:
            out.append(f"[{_SHORTHANDS[value][0]}]")
        elif op is sre.BRANCH:
            out.append("(?:" + "|".join(_sequence(branch) for branch in value[1]) + ")")
        elif op is sre.SUBPATTERN:
            _group, add_flags, del_flags, inner = value
            if add_flags or del_flags:
                raise _Unsupported("scoped flags")
            out.append(f"(?:{_sequence(inner)})")
        elif op is sre.ATOMIC_GROUP:
            out.append(f"(?:{_sequence(value)})")
        elif op in _REPEATS:
            low, high, inner = value
            if low > _RE2_MAX_REPEAT:
                raise _Unsupported("repeat")
            bound = "" if high is sre.MAXREPEAT or high > _RE2_MAX_REPEAT else str(high)
            out.append(f"(?:{_sequence(inner)}){{{low},{bound}}}")
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            continue  # a lookaround only narrows where a pattern matches
        elif op is sre.AT:
            out.append(_START_ANCHORS.get(value, ""))  # boundaries and ends only narrow
        else:
            raise _Unsupported(op)
    return "".join(out)


class _Every:
    """Everything: what ``which`` says when it cannot tell."""

    __slots__ = ()

    def __contains__(self, item: object) -> bool:
        return True


EVERY: Container[Any] = _Every()


def _new_set(patterns: Sequence[str]) -> Any:
    options = _re2.Options()
    options.max_mem = _RE2_MAX_MEM
    options.log_errors = False
    matcher = _re2.Set.SearchSet(options)
    for pattern in patterns:  # added in order: the set's indices are the caller's
        matcher.Add(pattern)
    matcher.Compile()
    return matcher


def _encoded(text: str) -> bytes | None:
    """``text`` as RE2 reads it; None when RE2 cannot read it as Python does."""
    if any(letter in text for letter in UNFOLDED_LETTERS):
        return None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: RE2 reads only valid UTF-8
        return None


class CandidatePatterns:
    """Which of ``patterns`` may match a text (see the module's docstring).

    Answers are indices into ``patterns``, not the patterns: hashing a compiled pattern
    hashes its whole program, which for a large one costs more than running it.

    Args:
        patterns: The patterns.
        use_re2: False: never tell (every pattern is a candidate), as without google-re2.
    """

    __slots__ = ("_always", "_set")

    def __init__(self, patterns: Sequence[re.Pattern[str]],
                 use_re2: bool = RE2_AVAILABLE) -> None:
        self._set: Any = None
        looser = [looser_re2(p) for p in patterns]
        self._always = frozenset(i for i, copy in enumerate(looser) if copy is None)
        if _re2 is None or not use_re2 or len(self._always) == len(looser):
            return
        # One never matched stands in for a pattern that is always a candidate.
        self._set = _new_set([copy if copy is not None else _NEVER for copy in looser])

    def which(self, text: str) -> Container[int]:
        """The indices of the patterns that may match ``text``: a set, or
        :data:`EVERY` when this cannot tell (no RE2, or a text RE2 does not read as
        Python does)."""
        encoded = _encoded(text) if self._set is not None else None
        if encoded is None:
            return EVERY
        found = self._set.Match(encoded)
        return self._always.union(found) if found else self._always


class CandidateWords:
    """Which of ``words`` may occur in a text, as the claim finder's substring tests
    look for them: in the lower-cased text with every run of whitespace one space, and
    as a whole word when written between ``\\b``s.

    Args:
        words: The words, lower-case, in that notation.
        use_re2: False: never tell (every word may occur), as without google-re2.
    """

    __slots__ = ("_set", "_words")

    def __init__(self, words: Sequence[str], use_re2: bool = RE2_AVAILABLE) -> None:
        self._words = tuple(words)
        self._set: Any = None
        if _re2 is not None and use_re2 and self._words:
            self._set = _new_set([_word_pattern(word) for word in self._words])

    def which(self, text: str) -> Container[str]:
        """The words that may occur in ``text``: a set, or :data:`EVERY` when this
        cannot tell."""
        encoded = _encoded(text) if self._set is not None else None
        if encoded is None:
            return EVERY
        found = self._set.Match(encoded)
        return frozenset(self._words[i] for i in found) if found else frozenset()


def _word_pattern(word: str) -> str:
    """RE2 for ``word`` (see :class:`CandidateWords`) in the text as written: any case,
    any whitespace run for a space; a whole word's ``\\b`` kept, which for a word whose
    ends are ASCII letters holds wherever Python's Unicode boundary does."""
    whole = word.startswith("\\b") and word.endswith("\\b")
    core = word[2:-2] if whole else word
    body = _SPACE_RUN.join(re.escape(part) for part in core.split(" "))
    if whole and re.fullmatch(r"[a-z0-9_]+(?: [a-z0-9_]+)*", core):
        body = rf"\b{body}\b"
    return f"(?i){body}"
