"""Which calls can back a claim: the right kind, and the right tool when the claim names one.

"Your bags have been added" is not made true by ``update_reservation_flights``: both
write, but the catalog has a tool about bags (``update_reservation_baggages``) and the
claim is about bags. So a claim is matched against the words of the catalog's tool names
(verbs and topics alike; ``bags`` matches ``baggages``, ``cancellation`` matches
``cancel``):

1. a call backs a claim only if its tool's kind fits (a read claim is also backed by a
   write whose result returns the record); a command runner (``bash``) or a tool of
   unknown kind fits anything;
2. a write claim is still unbacked when another tool of the catalog matches words of the claim
   that no fitting call's tool matches, while no fitting call's tool matches a word that
   other tool lacks: the claim names a different tool than the ones that ran.

Nothing here is specific to one catalog: the words come from the catalog's own names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from ...schemas.names import REASON_TOOL_NAME
from .claims import Claim
from .tool_kinds import BOTH, ToolKinds, name_words, ran_a_command
from .verbs import CONCESSION_VERBS, EXECUTE_VERBS, READ, WRITE, verb_kind

__all__ = ["ClaimMatcher"]

# Name words that say nothing about what a tool is about.
_GENERIC_WORDS = frozenset({
    "a", "all", "an", "and", "by", "current", "detail", "details", "for", "from",
    "id", "ids", "in", "info", "information", "item", "items", "new", "of", "on", "the",
    "to", "tool", "with", "my", "me", "v1", "v2", "api", "func", "function",
})
_WORD_RE = re.compile(r"[a-z]+")
# Reading that can be done on what is already in the context, with a reasoning tool
# (think, calculate) as the step: "I'll review the options and calculate the total".
_REASONING_READS = frozenset({"review", "examine", "study"})
_REASONING_TOOL_WORDS = frozenset({"think", "reason", "reflect", "calculate", "calc",
                                   "compute", "math", "scratchpad"})
# What forced verification's ``reason`` tool does: "I checked: there are three r's" after
# it ran is true, fresh or not.
_VERIFYING_READS = frozenset({"check", "recheck", "verify", "count", "review", "examine"})
_PER_RE = re.compile(r"\b(?:per|each|every)\s+[a-z]+")


def _similar(a: str, b: str) -> bool:
    # One word is the other with a suffix: "bags"/"baggages", "flight"/"flights",
    # "cancel"/"cancellation". Needs 3 shared leading letters covering most of the shorter.
    if a == b:
        return True
    shorter = min(len(a), len(b))
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common >= 3 and common >= 0.75 * shorter


def _claim_words(claim: Claim) -> set[str]:
    # "per passenger", "per night" are rates, not what the claim is about.
    words = set(_WORD_RE.findall(_PER_RE.sub(" ", claim.sentence)))
    words.add(claim.verb)
    # "rebooked" is booking again, "re-checked" checking again.
    words.update(w[2:] for w in list(words) if w.startswith("re") and len(w) > 5)
    return words


def _verbs_of(name: str) -> frozenset[str]:
    return frozenset(w for w in name_words(name) if verb_kind(w) is not None)


class ClaimMatcher:
    """Matches claims to the calls of one catalog.

    Args:
        kinds: The catalog's tool kinds.
        names: The catalog's tool names (claims are matched against these).
    """

    def __init__(self, kinds: ToolKinds, names: Iterable[str]) -> None:
        self.kinds = kinds
        self._words: dict[str, frozenset[str]] = {}
        for name in dict.fromkeys(names):
            self._words[name] = frozenset(w for w in name_words(name)
                                          if w not in _GENERIC_WORDS and len(w) > 2)

    def _matched(self, name: str, words: set[str]) -> frozenset[str]:
        tool_words = self._words.get(name)
        if tool_words is None:
            tool_words = frozenset(w for w in name_words(name) if w not in _GENERIC_WORDS)
        return frozenset(t for t in tool_words if any(_similar(w, t) for w in words))

    def backed(self, claim: Claim, calls: Sequence[str],
               call_kinds: Mapping[str, frozenset[str] | None] | None = None) -> bool:
        """Whether one of the ``calls`` (tool names that ran) backs ``claim``.

        Args:
            claim: The claim.
            calls: Names of the tools that ran.
            call_kinds: What those calls did, per tool, when their arguments told more
                than the tool's kind (an editor that only viewed); the tool's kind else.
        """
        fitting: list[str] = []
        words = _claim_words(claim)
        if claim.verb in EXECUTE_VERBS:
            return self._backs_run(words, calls, call_kinds)
        if claim.verb in CONCESSION_VERBS:
            return self._backs_concession(claim.verb, calls)
        if claim.kind == READ and claim.verb in _VERIFYING_READS and REASON_TOOL_NAME in calls:
            return True
        for name in dict.fromkeys(calls):
            kinds = (call_kinds[name] if call_kinds is not None and name in call_kinds
                     else self.kinds.of(name))
            if kinds is None or kinds == BOTH:
                return True  # unknown tools and command runners may do anything
            if claim.kind in kinds:
                fitting.append(name)
            elif claim.kind == READ and WRITE in kinds and self._matched(
                    name, words) - _verbs_of(name):
                return True  # a write that returns the record the claim is about
            elif (claim.kind == READ and not kinds and not claim.fresh
                  and claim.verb in _REASONING_READS and _REASONING_TOOL_WORDS & set(
                      name_words(name))):
                return True  # "I'll review the options" with a think/calculate step
        if not fitting:
            return False
        if claim.kind == READ:
            # What a lookup returns is wider than its tool's name: the reservation ids
            # come from the user's record, the lines from the customer's. Any read backs
            # a read claim.
            return True
        matched = {name: self._matched(name, words) for name in fitting}
        called_words = frozenset().union(*matched.values())
        for other in self._words:
            if other in matched or not self.kinds.backs(other, claim.kind):
                continue
            other_words = self._matched(other, words)
            if other_words - called_words and not any(m - other_words
                                                      for m in matched.values()):
                return False  # the claim is about `other`, which did not run
        return True

    def _backs_concession(self, verb: str, calls: Sequence[str]) -> bool:
        # "The change fee was waived": granted by a tool named for the concession
        # ("waive_fee", "apply_discount", "grant_exemption"), or one that may do anything;
        # an update of the reservation beside it does not waive its fee.
        for name in dict.fromkeys(calls):
            if self.kinds.of(name) in (None, BOTH):
                return True
            if any(_similar(verb, word) for word in name_words(name)):
                return True
        return False

    def _backs_run(self, words: set[str], calls: Sequence[str],
                   call_kinds: Mapping[str, frozenset[str] | None] | None) -> bool:
        # "I ran the tests": a command runner ran a command, or a tool named for what was
        # run ("run_tests", "search_flights" for "I ran a search"). An editor that viewed
        # and edited did both kinds of work, yet ran nothing.
        for name in dict.fromkeys(calls):
            own = self.kinds.of(name)
            did = (call_kinds[name] if call_kinds is not None and name in call_kinds
                   else own)
            if ran_a_command(own, did):
                return True
            if self._matched(name, words) - {"run"}:
                return True
        return False
