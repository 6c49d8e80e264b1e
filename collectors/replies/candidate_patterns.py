"""Which of many regexes can match a text, found in one pass.

The reply guards run dozens of patterns (the claim patterns alone are 37, with verb
alternations of hundreds of forms) over every reply, and on most replies all but one or
two find nothing. Trying each costs a scan of the reply per pattern. With google-re2
installed, :class:`CandidatePatterns` compiles a *looser* copy of every pattern into one
RE2 set, whose automaton reads the reply once and says which copies match anywhere; only
their patterns need running. A 2 KB reply costs the set about 7 µs, against about 150 µs
for trying the 37 claim patterns one by one.

Looser, so never wrong: each copy matches at least every text its pattern matches
(:func:`looser_re2`). What RE2 lacks is left out, which only widens a copy: lookarounds,
word boundaries and end anchors are dropped, possessive and lazy repeats become greedy,
atomic groups plain ones. Where RE2's meaning is narrower than Python's it is widened:
``\\w``, ``\\d`` and ``\\s`` match only ASCII in RE2, so the copy lets every non-ASCII
character through (and a negated class keeps only its ASCII exclusions). Two letters fold
to ``i`` in Python's case-insensitive matching but not in RE2's (``İ`` and ``ı``, pinned by
a test over every character of the Basic Multilingual Plane); a text holding one is not
prefiltered, nor is one that is no valid UTF-8 (a lone surrogate). A pattern with a
construct the conversion does not know (a back-reference) is always a candidate.

Without google-re2 (it is optional for the hooks: ``guardtrace[fast]``) every pattern is a
candidate and the guards give the same verdicts, more slowly; the tests run both ways.
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

__all__ = ["EVERY", "RE2_AVAILABLE", "CandidatePatterns", "looser_re2"]

RE2_AVAILABLE = _re2 is not None

# Characters Python's case-insensitive matching takes for an ASCII letter and RE2's does
# not (tests/unit/test_candidate_patterns.py pins that there are no others).
UNFOLDED_LETTERS = ("İ", "ı")

# RE2 bounds a counted repeat at 1000; a larger bound is written as unbounded (looser).
_RE2_MAX_REPEAT = 1000
# The automaton's memory: the 37 claim patterns' set needs a few MB; more only lets it keep
# more of its states between texts.
_RE2_MAX_MEM = 64 << 20

_NON_ASCII = r"\x{80}-\x{10ffff}"
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
    """Every index: what :meth:`CandidatePatterns.which` says when it cannot tell."""

    __slots__ = ()

    def __contains__(self, index: object) -> bool:
        return True


EVERY: Container[int] = _Every()


class CandidatePatterns:
    """Which of ``patterns`` may match a text (see the module's docstring).

    Answers are indices into ``patterns``, not the patterns: hashing a compiled pattern
    hashes its whole program, which for the claim patterns costs more than running one.

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
        options = _re2.Options()
        options.max_mem = _RE2_MAX_MEM
        options.log_errors = False
        matcher = _re2.Set.SearchSet(options)
        for copy in looser:
            # Added in order, so the set's indices are the patterns'; one never matched
            # stands in for a pattern that is always a candidate.
            matcher.Add(copy if copy is not None else _NEVER)
        matcher.Compile()
        self._set = matcher

    def which(self, text: str) -> Container[int]:
        """The indices of the patterns that may match ``text``: a set, or
        :data:`EVERY` when this cannot tell (no RE2, or a text RE2 does not read as
        Python does)."""
        if self._set is None or any(letter in text for letter in UNFOLDED_LETTERS):
            return EVERY
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: RE2 reads only valid UTF-8
            return EVERY
        found = self._set.Match(encoded)
        return self._always.union(found) if found else self._always
