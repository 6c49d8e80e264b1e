"""Suggest the allowed tool names closest to an invented one.

When a planner names a tool, agent or capability it was not given, the finding is
more useful with "did you mean" names: a person sees what the planner was reaching
for, and the retry feedback points the planner at a real tool instead of leaving it to
guess again. This module is the ranking engine; the entry points are
:meth:`~guardtrace.collectors.allowed_tools.AllowedTools.suggest` and
:func:`~guardtrace.collectors.allowed_tools.suggest_tools` (re-exported by
:mod:`guardtrace.collectors.plan_validation`), which parse the allowed list first. The
engine knows nothing about allowed-list forms, so it imports nothing from them.

There are no hard-coded maps (no synonym lists, no "time means clock" tables): tool
catalogues are open-ended and domain-specific, and any map would be wrong for the next
one. Suggestions come only from generic normalisation of names and from statistics of
the allowed list itself, so renaming a real tool moves the suggestions with it.

How ranking works:

1. Normalise every name: split on separators and camelCase, lower-case, crudely stem
   English plurals and ``-ing``/``-ed`` forms, drop version suffixes (``-v2``), and
   set aside structural words (``tool``, ``agent``, ``service`` ...) that say what kind
   of thing a name is rather than what it does, and glue words (``the``, ``for`` ...).
2. Weight tokens by rarity across the allowed list (IDF), and double the weight of a
   name's last content word, its head ("list_files" is about files).
3. Score each allowed name against the invented one, keeping the best of: 1.0 for the
   same normalised name, 0.95 when the content words are the same (only structural
   words or their order differ), a whole-name typo ratio, a weighted Dice overlap of
   tokens (near-equal tokens count as typos), and how much of the invented name the
   candidate's descriptions and capabilities cover (discounted, as looser evidence).
   Anything short of identical is capped at 0.99.
4. Keep candidates that score at least ``_MIN_SCORE`` and at least ``_RELATIVE_CUT``
   of the best one, best first (ties in the allowed list's order), at most ``limit``.
   Nothing plausibly close gives no suggestion rather than a bad one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from difflib import SequenceMatcher
from functools import lru_cache

__all__ = [
    "MAX_SUGGESTIONS",
    "SuggestionIndex",
]

#: How many names are suggested at most, unless a caller asks for another limit.
MAX_SUGGESTIONS = 3
# A candidate is suggested only if it scores at least this (1.0 = same name once case,
# separators, camelCase, plurals and version suffixes are normalised away) ...
_MIN_SCORE = 0.45
# ... and at least this fraction of the best candidate's score, so one near-exact match
# is not padded with weak ones.
_RELATIVE_CUT = 0.7
# Words that say what kind of thing a name is, not what it does: "weather-tool" and
# "time-tool" share "tool" without being alike. Structural vocabulary of tool naming,
# not a domain map.
_STRUCTURAL_WORDS = frozenset({
    "tool", "agent", "service", "svc", "api", "server", "function", "fn", "plugin", "mcp",
})
# Glue words that carry no meaning when matching a name against descriptions.
_STOPWORDS = frozenset({
    "a", "an", "the", "of", "to", "for", "in", "on", "at", "by", "and", "or", "with",
    "from", "into", "is", "are", "be", "it", "its", "this", "that", "as", "if", "not",
    "do", "doe", "does", "can", "will", "all", "any", "you", "your", "use", "used",
})
# The last content word of a name is usually its head ("list_files" is about files,
# "calculation-agent" about calculation), so sharing it counts for more than sharing a
# verb or a qualifier: "list_files" is closer to "organize_files" than "create_folder"
# is to "create_keynote".
_HEAD_WEIGHT = 2.0
# Descriptions are looser evidence than names, so their matches rank below name matches.
_DESCRIPTION_FACTOR = 0.9
_TYPO_RATIO = 0.8

_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SPLIT_RE = re.compile(r"[^A-Za-z0-9]+")
_VERSION_RE = re.compile(r"^v?\d+$")


# --- name normalisation and similarity -------------------------------------------------

def _stem(token: str) -> str:
    """Crude English stemming so "files"/"file", "creating"/"create" compare equal."""
    if len(token) > 5 and token.endswith("ing"):
        token = token[:-3]
    elif len(token) > 4 and token.endswith("ed"):
        token = token[:-2]
    if len(token) > 4 and token.endswith("ies"):
        token = token[:-3] + "y"
    elif len(token) > 4 and token.endswith(("sses", "xes", "ches", "shes")):
        token = token[:-2]
    elif len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        token = token[:-1]
    if len(token) > 4 and token.endswith("e"):
        token = token[:-1]
    return token


def _words(text: str) -> list[str]:
    """Split on separators and camelCase ("getHTTPStatus" -> get, http, status)."""
    out: list[str] = []
    for chunk in _SPLIT_RE.split(text):
        out.extend(w.lower() for w in _CAMEL_RE.findall(chunk))
    return out


@lru_cache(maxsize=4096)  # planners see the same tool names request after request
def _name_tokens(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(all stems without versions, content stems without structural and glue words)."""
    words = _words(name)
    # "v2" splits into "v", "2": versions say which release, not which tool.
    kept = [w for i, w in enumerate(words)
            if not (w.isdigit() or _VERSION_RE.match(w)
                    or (w == "v" and i + 1 < len(words) and words[i + 1].isdigit()))]
    stems = tuple(_stem(w) for w in kept)
    content = tuple(t for t in stems if t not in _STRUCTURAL_WORDS and t not in _STOPWORDS)
    return stems, content or stems


def _weights(tokens: Sequence[str], idf: Mapping[str, float], unseen: float) -> dict[str, float]:
    weights: dict[str, float] = {}
    last = len(tokens) - 1
    for i, token in enumerate(tokens):
        w = idf.get(token, unseen) * (_HEAD_WEIGHT if i == last else 1.0)
        weights[token] = max(weights.get(token, 0.0), w)
    return weights


@lru_cache(maxsize=65536)  # vocabularies are small and repeat across candidates
def _similarity(a: str, b: str) -> float:
    return SequenceMatcher(None, a, b).ratio()


def _token_match(token: str, others: Iterable[str]) -> tuple[float, str | None]:
    """(1.0, token) for an equal stem, (ratio, other) for a likely typo ("wether"),
    else (0.0, None)."""
    best, partner = 0.0, None
    for other in others:
        if token == other:
            return 1.0, other
        # ratio <= 2*min/(len sum): skip pairs whose lengths alone rule a typo out.
        if (len(token) >= 4 and len(other) >= 4
                and 2 * min(len(token), len(other)) >= _TYPO_RATIO * (len(token) + len(other))):
            ratio = _similarity(token, other)
            if ratio >= _TYPO_RATIO and ratio > best:
                best, partner = ratio, other
    return best, partner


@lru_cache(maxsize=4096)
def _text_tokens(text: str) -> frozenset[str]:
    return frozenset(t for t in (_stem(w) for w in _words(text)) if t not in _STOPWORDS)


class _Candidate:
    __slots__ = ("label", "canonical", "content", "joined", "bag")

    def __init__(self, label: str, name: str, text: str) -> None:
        self.label = label
        stems, self.content = _name_tokens(name)
        self.canonical = "_".join(stems)
        self.joined = "".join(self.content)
        self.bag = frozenset(self.content) | _text_tokens(text)


class SuggestionIndex:
    """Normalised candidates plus token rarity (IDF), built once per allowed list.

    Building it normalises every candidate once; :meth:`rank` then scores a name
    against all of them. :class:`~guardtrace.collectors.allowed_tools.AllowedTools`
    builds one for its names and one per agent for its capabilities, lazily.

    Args:
        items: ``(label, name, text)`` per candidate: ``label`` is what :meth:`rank`
            returns, ``name`` is what is compared, ``text`` is descriptive text
            (descriptions, capability names) searched as looser evidence; may be empty.
    """

    def __init__(self, items: Iterable[tuple[str, str, str]]) -> None:
        self.candidates = [_Candidate(*item) for item in items]
        n = len(self.candidates)
        df: dict[str, int] = {}
        for cand in self.candidates:
            for token in cand.bag:
                df[token] = df.get(token, 0) + 1
        # Tokens shared by many allowed names ("get", "create") say little about which
        # one was meant; rare ones ("files") say a lot.
        self.idf = {t: math.log((n + 1) / (c + 1)) + 1.0 for t, c in df.items()}
        self.unseen = math.log(n + 1) + 1.0

    def rank(self, name: str, limit: int) -> tuple[str, ...]:
        """The candidate labels closest to ``name``, best first; only plausibly close ones.

        Args:
            name: The invented name to find neighbours for.
            limit: At most this many labels.

        Returns:
            Up to ``limit`` labels; empty when nothing scores high enough.
        """
        stems, content = _name_tokens(name)
        canonical = "_".join(stems)
        joined = "".join(content)
        h_weights = _weights(content, self.idf, self.unseen)
        h_total = sum(h_weights.values()) or 1.0
        scored: list[tuple[float, int, str]] = []
        for order, cand in enumerate(self.candidates):
            score = self._score(canonical, content, joined, h_weights, h_total, cand)
            if score >= _MIN_SCORE:
                scored.append((score, order, cand.label))
        if not scored:
            return ()
        scored.sort(key=lambda s: (-s[0], s[1]))
        best = scored[0][0]
        return tuple(label for score, _, label in scored[:limit]
                     if score >= best * _RELATIVE_CUT)

    def _score(self, canonical: str, content: tuple[str, ...], joined: str,
               h_weights: Mapping[str, float], h_total: float, cand: _Candidate) -> float:
        if canonical == cand.canonical:
            return 1.0
        if set(content) == set(cand.content):
            return 0.95  # differ only in structural words: "weather-agent"/"weather-tool"
        score = 0.0
        # Whole-name typo or missing separator: "getweather" vs "get_weather".
        if joined and cand.joined and 2 * min(len(joined), len(cand.joined)) >= 0.85 * (
                len(joined) + len(cand.joined)):
            ratio = SequenceMatcher(None, joined, cand.joined).ratio()
            if ratio >= 0.85:
                score = 0.95 * ratio
        # Weighted Dice over name tokens, rare tokens and the head word counting more.
        c_weights = _weights(cand.content, self.idf, self.unseen)
        shared = 0.0
        for token, weight in h_weights.items():
            match, partner = _token_match(token, c_weights)
            if partner is not None:
                shared += (weight + c_weights[partner]) * match
        dice = shared / (h_total + sum(c_weights.values()))
        score = max(score, dice)
        # How much of the invented name the candidate's description/capabilities cover:
        # how "create_folder" finds organize_files ("... creates the folder ...").
        if len(cand.bag) > len(cand.content):
            covered = sum(w * _token_match(t, cand.bag)[0] for t, w in h_weights.items())
            score = max(score, _DESCRIPTION_FACTOR * covered / h_total)
        return min(score, 0.99)
