"""Suggest the allowed tool names closest to an invented one.

When a planner names a tool, agent or capability it was not given, the finding is
more useful with "did you mean" names: a person sees what the planner was reaching
for, and the retry feedback points the planner at a real tool instead of leaving it to
guess again. This module is the ranking engine; the entry points are
:meth:`~guardtrace.collectors.plans.allowed_tools.AllowedTools.suggest` and
:func:`~guardtrace.collectors.plans.allowed_tools.suggest_tools` (re-exported by
:mod:`guardtrace.collectors.plans.validation`), which parse the allowed list first. The
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
   candidate's descriptions, capabilities and parameter names cover (discounted, as
   looser evidence: ``movie_details.extra_info`` is after the tool taking ``extra_info``).
   Anything short of identical is capped at 0.99.
4. When the call carries arguments and a candidate declares its parameters (a JSON
   schema), weigh how well the arguments fit: the rarity-weighted share of the call's
   argument names the tool knows, and the share of its required parameters the call
   gives. Names alone cannot tell synonyms apart (``circle.calculate_perimeter`` is
   nearer in name to ``rectangle.calculate_perimeter``); a ``diameter`` argument that
   only ``circle.calculate_circumference`` takes can. The fit and the name score are
   averaged; a candidate whose normalised name is the invented one keeps 1.0.
5. Keep candidates that score at least ``_MIN_SCORE`` and at least ``_RELATIVE_CUT``
   of the best one, best first (ties in the allowed list's order), at most ``limit``.
   Nothing plausibly close gives no suggestion rather than a bad one.

Names that are not attempts at a tool (abstentions such as ``no_function``, and
placeholders such as ``func1`` or ``python``) get no suggestion: see
:mod:`~guardtrace.collectors.plans.name_kinds`. A name that is in the allowed list is
never classified: the list always wins.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any

from .name_kinds import ABSTENTION, PLACEHOLDER, classify_unknown_name
from .name_words import MAX_NAME_CHARS as _MAX_NAME_CHARS
from .name_words import stem as _stem
from .name_words import words as _words

__all__ = [
    "ABSTENTION",
    "MAX_SUGGESTIONS",
    "PLACEHOLDER",
    "ParameterNames",
    "SuggestionIndex",
    "argument_names",
    "classify_unknown_name",
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
# Descriptions are searched only this far: the words that say what a tool does come
# first, and a bound keeps a pathological catalogue cheap.
_MAX_TEXT_CHARS = 4096
# How much the fit of the call's arguments to a tool's parameters counts against the
# name score (0.5: as much as the name). Arguments are what the model meant to pass, so
# they identify the tool as well as its name does, and better for synonyms.
_ARGUMENT_WEIGHT = 0.5

_VERSION_RE = re.compile(r"^v?\d+$")


# --- name normalisation and similarity -------------------------------------------------

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


# --- arguments against parameters ---------------------------------------------------------

@lru_cache(maxsize=4096)
def _key(name: str) -> str:
    """An argument or parameter name as stems joined by "_", without case and separators
    ("fromUnit" = "from_unit", "cities" = "city")."""
    return "_".join(_stem(w) for w in _words(name))


@lru_cache(maxsize=65536)
def _key_match(key: str, parameter: str) -> float:
    """1.0 for the same normalised name, else the Dice overlap of their words
    ("city" against "city_name": 0.67), so a renamed argument still counts in part."""
    if key == parameter:
        return 1.0
    a, b = set(key.split("_")), set(parameter.split("_"))
    shared = len(a & b)
    return 2.0 * shared / (len(a) + len(b)) if shared else 0.0


class ParameterNames:
    """The parameter names a tool's JSON schema declares, normalised for matching.

    Args:
        properties: Every parameter name (``properties`` of the schema).
        required: The required ones.
    """

    __slots__ = ("properties", "required")

    def __init__(self, properties: Iterable[str], required: Iterable[str] = ()) -> None:
        self.properties = frozenset(
            k for k in map(_key, (p for p in properties if len(p) <= _MAX_NAME_CHARS)) if k)
        self.required = frozenset(
            k for k in map(_key, (r for r in required if len(r) <= _MAX_NAME_CHARS)) if k
        ) & self.properties

    @classmethod
    def from_schema(cls, schema: Any) -> ParameterNames | None:
        """Read an object JSON schema; None when it declares no ``properties`` mapping."""
        if not isinstance(schema, Mapping):
            return None
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            # A schema without properties declares no parameters only if it says so.
            return cls(()) if schema.get("type") == "object" and not properties else None
        required = schema.get("required")
        names = [k for k in properties if isinstance(k, str)]
        req = [k for k in required if isinstance(k, str)] if isinstance(required, list) else []
        return cls(names, req)


def argument_names(arguments: Any) -> frozenset[str]:
    """The normalised argument names of a call (empty when it has none or they are not
    a mapping: positional or free-text input says nothing about parameter names)."""
    if not isinstance(arguments, Mapping):
        return frozenset()
    return frozenset(k for k in (_key(a) for a in arguments
                                 if isinstance(a, str) and len(a) <= _MAX_NAME_CHARS) if k)


class _Candidate:
    __slots__ = ("label", "canonical", "content", "joined", "bag", "params")

    def __init__(self, label: str, name: str, text: str | Iterable[str],
                 params: ParameterNames | None = None) -> None:
        self.label = label
        # Bounded, like invented names: no real tool name comes near the bound.
        stems, self.content = _name_tokens(name[:_MAX_NAME_CHARS])
        self.canonical = "_".join(stems)
        self.joined = "".join(self.content)
        pieces = (text,) if isinstance(text, str) else text
        self.bag = frozenset(self.content).union(
            *(_text_tokens(piece[:_MAX_TEXT_CHARS]) for piece in pieces))
        self.params = params


class SuggestionIndex:
    """Normalised candidates plus token rarity (IDF), built once per allowed list.

    Building it normalises every candidate once; :meth:`rank` then scores a name
    against all of them. :class:`~guardtrace.collectors.plans.allowed_tools.AllowedTools`
    builds one for its names and one per agent for its capabilities, lazily.

    Args:
        items: ``(label, name, text)`` or ``(label, name, text, parameters)`` per
            candidate: ``label`` is what :meth:`rank` returns, ``name`` is what is
            compared, ``text`` is descriptive text (descriptions, capability names; a
            string or several) searched as looser evidence (may be empty), ``parameters`` the
            :class:`ParameterNames` of the tool's input schema, or None when unknown.
    """

    def __init__(self, items: Iterable[tuple[Any, ...]]) -> None:
        self.candidates = [_Candidate(*item) for item in items]
        n = len(self.candidates)
        df: dict[str, int] = {}
        key_df: dict[str, int] = {}
        for cand in self.candidates:
            for token in cand.bag:
                df[token] = df.get(token, 0) + 1
            for key in cand.params.properties if cand.params else ():
                key_df[key] = key_df.get(key, 0) + 1
        # Tokens shared by many allowed names ("get", "create") say little about which
        # one was meant; rare ones ("files") say a lot. The same holds for parameter
        # names ("name", "date" against "diameter").
        self.idf = {t: math.log((n + 1) / (c + 1)) + 1.0 for t, c in df.items()}
        self.key_idf = {k: math.log((n + 1) / (c + 1)) + 1.0 for k, c in key_df.items()}
        self.unseen = math.log(n + 1) + 1.0

    def rank(self, name: str, limit: int, arguments: Any = None) -> tuple[str, ...]:
        """The candidate labels closest to ``name``, best first; only plausibly close ones.

        Args:
            name: The invented name to find neighbours for.
            limit: At most this many labels.
            arguments: The call's arguments (a mapping; its keys are matched against
                each candidate's parameters), or None.

        Returns:
            Up to ``limit`` labels; empty when nothing scores high enough, for
            abstentions and placeholders (:func:`classify_unknown_name`), and for names
            longer than any tool-calling API allows.
        """
        if len(name) > _MAX_NAME_CHARS or classify_unknown_name(name) is not None:
            return ()
        stems, content = _name_tokens(name)
        canonical = "_".join(stems)
        joined = "".join(content)
        h_weights = _weights(content, self.idf, self.unseen)
        h_total = sum(h_weights.values()) or 1.0
        keys = argument_names(arguments)
        scored: list[tuple[float, int, str]] = []
        for order, cand in enumerate(self.candidates):
            score = self._score(canonical, content, joined, h_weights, h_total, cand)
            if keys and cand.params is not None and score < 1.0:
                fit = self._fit(keys, cand.params)
                score = (1.0 - _ARGUMENT_WEIGHT) * score + _ARGUMENT_WEIGHT * fit
            if score >= _MIN_SCORE:
                scored.append((score, order, cand.label))
        if not scored:
            return ()
        scored.sort(key=lambda s: (-s[0], s[1]))
        best = scored[0][0]
        return tuple(label for score, _, label in scored[:limit]
                     if score >= best * _RELATIVE_CUT)

    def _fit(self, keys: frozenset[str], params: ParameterNames) -> float:
        """How well a call's argument names fit a tool's parameters, 0..1.

        The rarity-weighted share of the argument names the tool declares, discounted
        by up to half for required parameters the call leaves out (models do omit some,
        so a missing one is weaker evidence than an unknown one).
        """
        total = known = 0.0
        for key in keys:
            weight = self.key_idf.get(key, self.unseen)
            total += weight
            if key in params.properties:
                known += weight
            elif params.properties:
                known += weight * max(_key_match(key, p) for p in params.properties)
        if not total:
            return 0.0
        given = 1.0
        if params.required:
            given = sum(1.0 if r in keys else max((_key_match(k, r) for k in keys),
                                                  default=0.0)
                        for r in params.required) / len(params.required)
        return (known / total) * (0.5 + 0.5 * given)

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
