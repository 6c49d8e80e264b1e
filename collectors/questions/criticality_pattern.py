"""A pattern of the criticality gate's bank, and the reasoning depth a match demands.

A pattern is a case-insensitive regex with a family, a weight and the literal anchors that
must occur before it is tried. It compiles on first use, not when it is built, for the
bank guardtrace ships (pattern_bank.py: twenty-odd patterns that would otherwise cost tens
of milliseconds on every ``import guardtrace.collectors``); a pattern an application
builds itself is checked at construction, so a typo fails loudly there.
"""

from __future__ import annotations

import enum
import re
import threading
from dataclasses import InitVar, dataclass, field

from ..errors import GuardInputError

__all__ = ["CriticalityPattern", "ReasoningDepth"]

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
# Guards the first compile of a deferred pattern when gates in several threads meet it.
_COMPILE_LOCK = threading.Lock()


@dataclass(frozen=True)
class CriticalityPattern:
    """One entry of the gate's pattern bank.

    Args:
        family: Name of the question family, e.g. ``spelling`` (reported as ``family``).
        regex: The pattern source; compiled once, case-insensitive.
        depth: The reasoning depth a match demands.
        weight: The score a match contributes, 0.0-1.0.
        anchors: Literal substrings (any case) of which the question must contain at
            least one before the regex is tried: a cheap check that skips most patterns
            on most text. Each must be necessary (a pattern that could match without any
            of them would wrongly be skipped); empty means always try the regex.
        compile_now: Compile (and so check) the regex now; False defers it to the first
            match (the shipped bank, whose every regex the unit tests compile).

    Raises:
        GuardInputError: The regex does not compile (checked now unless ``compile_now``
            is False) or the weight is out of range.
    """

    family: str
    regex: str
    depth: ReasoningDepth = ReasoningDepth.STANDARD
    weight: float = 0.5
    anchors: tuple[str, ...] = ()
    compile_now: InitVar[bool] = True
    _compiled: re.Pattern[str] | None = field(default=None, init=False, repr=False,
                                              compare=False)

    def __post_init__(self, compile_now: bool) -> None:
        if not 0.0 <= self.weight <= 1.0:
            raise GuardInputError(
                f"criticality pattern {self.family!r}: weight {self.weight} not in 0..1")
        object.__setattr__(self, "anchors", tuple(a.lower() for a in self.anchors))
        if compile_now:
            object.__setattr__(self, "_compiled", self._compile())

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled regex, compiled by the first caller (once, whatever the threads)."""
        compiled = self._compiled
        if compiled is None:
            with _COMPILE_LOCK:
                compiled = self._compiled
                if compiled is None:
                    compiled = self._compile()
                    object.__setattr__(self, "_compiled", compiled)
        return compiled

    def _compile(self) -> re.Pattern[str]:
        try:
            return re.compile(self.regex, re.IGNORECASE)
        except re.error as exc:
            raise GuardInputError(
                f"criticality pattern {self.family!r}: invalid regex {self.regex!r}: {exc}"
            ) from exc

    def matches(self, text: str, lowered: str) -> bool:
        """Whether the pattern matches ``text`` (``lowered`` is ``text.lower()``)."""
        if self.anchors and not any(anchor in lowered for anchor in self.anchors):
            return False
        return self.compiled.search(text) is not None
