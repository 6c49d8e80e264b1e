"""The criticality gate: which questions must be verified before the model answers.

LLMs answer some questions confidently and wrongly because they pattern-match instead
of checking ("Which month is spelled with an X?" -> "October"). The gate runs a bank of
precompiled, case-insensitive regexes over the user's question and returns a
:class:`CriticalityDecision`; :mod:`guardtrace.collectors.verification` turns a positive
decision into a forced ``reason`` tool call.

Scoring: each pattern carries a weight. The decision's ``score`` is the highest weight
among matching patterns, and that pattern supplies ``trigger_pattern`` and ``family``
(ties go to the earlier pattern in the bank). ``depth`` is the deepest depth among all
matches, so a question that also matches a weightier shallow pattern is never
under-verified. The gate fires when a pattern with a depth other than ``NONE`` matches
and the score reaches ``min_score``.

The ``which_what`` family ("which X is/has ...", "what X was/in ...") is the seed's
Wire 1 fix and deliberately broad: it also matches "which file is the config?" or
"what year was the tower built?". The field report chose recall over precision (a
missed October bug is a confident wrong answer; a false positive costs one extra tool
call), and so does the default bank, with two mitigations: the family has weight 0.4
and ``STANDARD`` depth, below the letter/counting families (0.85-0.9, ``VERIFY``), so
``CriticalityGate(min_score=0.5)`` mutes it without touching the rest; and a pronoun in
the noun slot ("what it is", "what else was") does not count.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from guardtrace.collectors.errors import (
    GuardInputError,
    record_label,
    require_object,
    require_text,
)
from guardtrace.collectors.telemetry import guarded

__all__ = [
    "DEFAULT_PATTERNS",
    "NOT_REQUIRED",
    "CriticalityDecision",
    "CriticalityGate",
    "CriticalityPattern",
    "ReasoningDepth",
    "default_gate",
    "scan_question_input",
]


class ReasoningDepth(enum.StrEnum):
    """How much reasoning a question needs before the model may answer.

    ``VERIFY`` is the seed's ``sase_verify``: the answer must be checked by
    enumeration (letters, items, counts). ``STANDARD`` asks for a reasoning pass.
    """

    NONE = "none"
    STANDARD = "standard"
    VERIFY = "verify"

    @property
    def rank(self) -> int:
        """Order of the depths, shallowest first (for taking the deepest of several)."""
        return _DEPTH_RANK[self]


_DEPTH_RANK = {ReasoningDepth.NONE: 0, ReasoningDepth.STANDARD: 1, ReasoningDepth.VERIFY: 2}


@dataclass(frozen=True)
class CriticalityPattern:
    """One entry of the gate's pattern bank.

    Args:
        family: Name of the question family, e.g. ``spelling`` (reported as ``family``).
        regex: The pattern source; compiled once, case-insensitive.
        depth: The reasoning depth a match demands.
        weight: The score a match contributes, 0.0-1.0.

    Raises:
        GuardInputError: The regex does not compile or the weight is out of range.
    """

    family: str
    regex: str
    depth: ReasoningDepth = ReasoningDepth.STANDARD
    weight: float = 0.5
    compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.weight <= 1.0:
            raise GuardInputError(
                f"criticality pattern {self.family!r}: weight {self.weight} not in 0..1")
        try:
            compiled = re.compile(self.regex, re.IGNORECASE)
        except re.error as exc:
            raise GuardInputError(
                f"criticality pattern {self.family!r}: invalid regex {self.regex!r}: {exc}"
            ) from exc
        object.__setattr__(self, "compiled", compiled)


@dataclass(frozen=True)
class CriticalityDecision:
    """What the gate decided for one question.

    Attributes:
        should_reason: True if the model must call the reason tool before answering.
        depth: How deep the reasoning must go (``NONE`` when not required).
        score: The highest weight among matching patterns (0.0 when none matched).
        trigger_pattern: Source of the pattern that set the score, or None.
        family: Family of that pattern, or None.
    """

    should_reason: bool
    depth: ReasoningDepth
    score: float
    trigger_pattern: str | None
    family: str | None


NOT_REQUIRED = CriticalityDecision(False, ReasoningDepth.NONE, 0.0, None, None)

_V = ReasoningDepth.VERIFY
_S = ReasoningDepth.STANDARD

# Text units a "how many"/"count the" question can be about. Kept to units of text so
# "how many users signed up" or "count the rows" (agent work, not a trick question)
# stay quiet.
_UNITS = r"(?:letters?|vowels?|consonants?|syllables?|words?|characters?|chars|digits?)"
# A single letter as people write it in these questions: quoted ('x', "x") or bare.
_QUOTED_LETTER = r"""['"][a-z]['"]"""

DEFAULT_PATTERNS: tuple[CriticalityPattern, ...] = (
    # -- spelling ------------------------------------------------------------------------
    CriticalityPattern("spelling", r"\bspel(?:led|t|ls?)\s+with(?:out)?\b", _V, 0.9),
    CriticalityPattern("spelling", r"\bhow\s+(?:to|do\s+(?:you|i|we)|would\s+you)\s+spell\b",
                       _V, 0.9),
    CriticalityPattern("spelling", r"\bspelling\s+of\b", _V, 0.9),
    CriticalityPattern(
        "spelling",
        r"\b(?:first|second|third|fourth|fifth|last|\d+(?:st|nd|rd|th))\s+letter\s+(?:of|in)\b",
        _V, 0.9),
    # -- counting ------------------------------------------------------------------------
    CriticalityPattern("counting", rf"\bhow\s+many\s+{_UNITS}", _V, 0.9),
    CriticalityPattern("counting", r"\bhow\s+many\s+times\s+(?:does|do|did|is|are)\b", _V, 0.9),
    # "how many r's", "how many 'r's", "how many Rs in strawberry". A bare letter needs
    # the "in" after it, or "how many is enough" would match.
    CriticalityPattern(
        "counting",
        rf"\bhow\s+many\s+(?:{_QUOTED_LETTER}(?:'?s)?|[a-z]'s\b"
        r"|[a-z]s?\s+(?:are\s+)?(?:there\s+)?in\b)",
        _V, 0.9),
    CriticalityPattern(
        "counting",
        rf"\bcount\s+(?:up\s+)?(?:the|all(?:\s+the)?)\s+(?:number\s+of\s+)?"
        rf"(?:{_UNITS}|occurrences?|instances?|times|[a-z]'s\b|{_QUOTED_LETTER})",
        _V, 0.9),
    CriticalityPattern("counting", rf"\bnumber\s+of\s+{_UNITS}\s+in\b", _V, 0.9),
    # -- letter/character containment ---------------------------------------------------
    CriticalityPattern(
        "containment",
        r"\bcontain(?:s|ing|ed)?\s+(?:the\s+|an?\s+)?(?:letters?|characters?|digits?)\b",
        _V, 0.85),
    CriticalityPattern(
        "containment",
        r"\b(?:has|have|had|with|without|includes?|including|uses?|using)\s+"
        r"(?:the\s+|an?\s+)?(?:letters?|characters?)\s+(?:['\"]?[a-z0-9]['\"]?)\b",
        _V, 0.85),
    # "has an X in it", "with a 'q' in its name".
    CriticalityPattern(
        "containment",
        rf"\b(?:has|have|had|with|without)\s+(?:the\s+|an?\s+)?(?:{_QUOTED_LETTER}|[a-z])\s+"
        r"in\s+(?:it|them|its\s+name|the\s+name|their\s+names?)\b",
        _V, 0.85),
    # "starts with the letter Q", "ends in 'y'", "begins with Q?". A bare letter must
    # end the clause, so "starts with a bang" stays quiet.
    CriticalityPattern(
        "containment",
        r"\b(?:starts?|starting|started|begins?|beginning|began|ends?|ending|ended)\s+"
        r"(?:with|in)\s+(?:the\s+|an?\s+)?"
        rf"(?:letters?\b|characters?\b|{_QUOTED_LETTER}|[a-z](?=\s*(?:[?.!,;:]|$)))",
        _V, 0.85),
    # -- which/what X is/has ... (the seed's Wire 1; broad, see module docstring) -------
    CriticalityPattern(
        "which_what",
        r"\bwhich\s+(?!(?:it|this|that|these|those|one|ones)\b)\w+\s+"
        r"(?:is|has|was|are|were|does)\b",
        _S, 0.4),
    CriticalityPattern(
        "which_what",
        r"\bwhat\s+(?!(?:it|this|that|these|those|he|she|they|we|you|i|else|there|here)\b)"
        r"\w+\s+(?:is|has|was|are|were|does|in)\b",
        _S, 0.4),
)

# Curly quotes normalised to straight ones so the patterns need one form only.
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def _not_required(*_args: Any, **_kwargs: Any) -> CriticalityDecision:
    return NOT_REQUIRED


class CriticalityGate:
    """Decides from the question text whether the model must verify before answering.

    Args:
        patterns: The pattern bank; :data:`DEFAULT_PATTERNS` when omitted. Extend it with
            ``DEFAULT_PATTERNS + (CriticalityPattern(...),)``.
        min_score: The lowest score that fires the gate; 0.5 mutes the broad
            ``which_what`` family of the default bank.

    The patterns have no nested quantifiers, so matching stays linear in the text length.
    """

    def __init__(self, patterns: Iterable[CriticalityPattern] | None = None, *,
                 min_score: float = 0.0) -> None:
        self.patterns: tuple[CriticalityPattern, ...] = (
            DEFAULT_PATTERNS if patterns is None else tuple(patterns))
        self.min_score = min_score

    @guarded(_not_required)
    def assess(self, question: str) -> CriticalityDecision:
        """Match ``question`` against the bank and return the decision.

        Never raises: on an internal error (e.g. a question that is not a string) the
        error is counted in ``guardtrace.hook_errors`` and :data:`NOT_REQUIRED` returned.
        """
        text = question.translate(_QUOTES)
        best: CriticalityPattern | None = None
        deepest = ReasoningDepth.NONE
        for pattern in self.patterns:
            if pattern.depth is ReasoningDepth.NONE or not pattern.compiled.search(text):
                continue
            if best is None or pattern.weight > best.weight:
                best = pattern
            if pattern.depth.rank > deepest.rank:
                deepest = pattern.depth
        if best is None or best.weight < self.min_score:
            return NOT_REQUIRED
        return CriticalityDecision(True, deepest, best.weight, best.regex, best.family)


@functools.cache
def default_gate() -> CriticalityGate:
    """The shared gate over :data:`DEFAULT_PATTERNS` (patterns compile once per process)."""
    return CriticalityGate()


def scan_question_input(obj: Mapping[str, Any],
                        gate: CriticalityGate | None = None) -> dict[str, Any]:
    """Assess one record of the offline scanner (``guardtrace scan questions``).

    Args:
        obj: ``{"id": ..., "question": "..."}``; ``id`` is optional and passed through.
        gate: The gate to use; :func:`default_gate` when omitted.

    Returns:
        ``{"id", "should_reason", "depth", "trigger_pattern"}`` with ``depth`` one of
        ``none``, ``standard``, ``verify`` and ``trigger_pattern`` None when quiet.

    Raises:
        GuardInputError: ``obj`` is not a mapping, or its ``question`` is missing or not
            a string.
    """
    require_object(obj, "question input must be an object with a 'question' string")
    question = require_text(obj, "question", record_label(obj, "question input"))
    decision = (gate or default_gate()).assess(question)
    return {
        "id": obj.get("id"),
        "should_reason": decision.should_reason,
        "depth": decision.depth.value,
        "trigger_pattern": decision.trigger_pattern,
    }
