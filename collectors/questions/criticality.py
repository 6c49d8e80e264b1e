"""The criticality gate: which questions must be verified before the model answers.

LLMs answer some questions confidently and wrongly because they pattern-match instead
of checking ("Which month is spelled with an X?" -> "October"). The gate runs a bank of
case-insensitive regexes (each compiled once) over the user's question and returns a
:class:`CriticalityDecision`; :mod:`guardtrace.collectors.questions.verification` turns a positive
decision into a forced ``reason`` tool call.

Scoring: each pattern carries a weight. The decision's ``score`` is the highest weight
among matching patterns, and that pattern supplies ``trigger_pattern`` and ``family``
(ties go to the earlier pattern in the bank). ``depth`` is the deepest depth among all
matches, so a question that also matches a weightier shallow pattern is never
under-verified. The gate fires when a pattern with a depth other than ``NONE`` matches
and the score reaches ``min_score``.

The bank itself, its families and what it stays quiet on, is in
:mod:`guardtrace.collectors.questions.pattern_bank`; a pattern's type in
:mod:`guardtrace.collectors.questions.criticality_pattern`.

Cost: every pattern is linear in its input (bounded gaps, no nested quantifiers), each
is tried only when one of its ``anchors`` occurs in the question, and the gate reads at
most the first 8 KB and the last 2 KB of it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..emit.internal import count_hook_error
from .criticality_pattern import CriticalityPattern, ReasoningDepth
from .pattern_bank import DEFAULT_PATTERNS, WHICH_WHAT_PATTERNS

__all__ = [
    "DEFAULT_PATTERNS",
    "NOT_REQUIRED",
    "WHICH_WHAT_PATTERNS",
    "CriticalityDecision",
    "CriticalityGate",
    "CriticalityPattern",
    "ReasoningDepth",
    "default_gate",
]


@dataclass(frozen=True)
class CriticalityDecision:
    """What the gate decided for one question.

    Attributes:
        should_reason: True if the model must call the reason tool before answering.
        depth: How deep the reasoning must go (``NONE`` when not required).
        score: The highest weight among matching patterns (0.0 when none matched).
        trigger_pattern: Source of the pattern that set the score, or None.
        family: Family of that pattern, or None.
        error_type: When the gate failed on the question, the exception's class name
            (the decision is then "not required"); None when it decided. Not part of
            equality: a failed assessment decides what :data:`NOT_REQUIRED` decides.
    """

    should_reason: bool
    depth: ReasoningDepth
    score: float
    trigger_pattern: str | None
    family: str | None
    error_type: str | None = field(default=None, compare=False)

    @classmethod
    def unassessed(cls, error: BaseException) -> CriticalityDecision:
        """The decision for a question the gate failed on: not required, and why."""
        return cls(False, ReasoningDepth.NONE, 0.0, None, None,
                   error_type=type(error).__qualname__)


NOT_REQUIRED = CriticalityDecision(False, ReasoningDepth.NONE, 0.0, None, None)

# The gate reads the first 8 KB and the last 2 KB of a question. A character-level
# question is a sentence the user wrote, before or after whatever they pasted ("count the
# words in this: ...", "... how many words is that?"); the bound keeps a megabyte of
# pasted text from costing seconds (the patterns are linear, but there are twenty).
_HEAD_CHARS = 8192
_TAIL_CHARS = 2048
# What joins the two ends: a pattern may cross a newline (\s) but no pattern takes "…",
# so nothing matches across the cut.
_CUT = "\n…\n"

# Curly quotes normalised to straight ones so the patterns need one form only.
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


class CriticalityGate:
    """Decides from the question text whether the model must verify before answering.

    Args:
        patterns: The pattern bank; :data:`DEFAULT_PATTERNS` when omitted. Extend it with
            ``DEFAULT_PATTERNS + (CriticalityPattern(...),)``.
        min_score: The lowest score that fires the gate; 0.5 mutes the opt-in
            ``which_what`` family (:data:`WHICH_WHAT_PATTERNS`, weight 0.4).

    Only the first 8 KB and the last 2 KB of a question are read, so a question costs at
    most a bounded, linear amount of matching whatever its length.
    """

    def __init__(self, patterns: Iterable[CriticalityPattern] | None = None, *,
                 min_score: float = 0.0) -> None:
        self.patterns: tuple[CriticalityPattern, ...] = (
            DEFAULT_PATTERNS if patterns is None else tuple(patterns))
        self.min_score = min_score

    def assess(self, question: str) -> CriticalityDecision:
        """Match ``question`` against the bank and return the decision.

        Never raises: on an internal error (e.g. a question that is not a string) the
        error is counted in ``guardtrace.hook_errors`` and a decision equal to
        :data:`NOT_REQUIRED` returned, with ``error_type`` set.
        """
        # `guarded` by hand: the fallback needs the exception, to say the gate failed.
        try:
            return self._assess(question)
        except Exception as exc:  # noqa: BLE001 - the contract is to never raise
            count_hook_error("CriticalityGate.assess", exc)
            return CriticalityDecision.unassessed(exc)

    def _assess(self, question: str) -> CriticalityDecision:
        text = question.translate(_QUOTES)
        if len(text) > _HEAD_CHARS + _TAIL_CHARS:
            text = f"{text[:_HEAD_CHARS]}{_CUT}{text[-_TAIL_CHARS:]}"
        lowered = text.lower()
        best: CriticalityPattern | None = None
        deepest = ReasoningDepth.NONE
        for pattern in self.patterns:
            if pattern.depth is ReasoningDepth.NONE or not pattern.matches(text, lowered):
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
