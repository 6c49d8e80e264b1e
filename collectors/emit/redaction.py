"""Redaction of secrets before anything leaves the agent process.

On by default: prompts and responses routinely contain API keys pasted by users, bearer
tokens from tool outputs and credentials in URLs. The default rules are deliberately
specific (prefixes and shapes of real credentials) so ordinary prose is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...schemas.names import REDACTION_MARKER_FORMAT

__all__ = ["DEFAULT_RULES", "Redactor"]

# name -> pattern. A rule with groups named `secret...` replaces only the one that
# matched, so the text around it ("Authorization: Bearer", "https://user:") stays
# readable.
DEFAULT_RULES: Mapping[str, str] = {
    "private_key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    "api_key": (
        r"\b(?:sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"
        r"|AKIA[0-9A-Z]{16}"
        r"|gh[pousr]_[A-Za-z0-9]{30,}"
        r"|github_pat_[A-Za-z0-9_]{30,}"
        r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
        r"|AIza[0-9A-Za-z_\-]{35}"
        r"|glpat-[A-Za-z0-9_\-]{20,})"
    ),
    # A token, not a word: at least 10 characters with a digit in them, so prose such
    # as "Bearer authentication" stays readable.
    "bearer_token": r"(?i)\bbearer\s+(?P<secret>(?=[A-Za-z_\-\.=~+/]*\d)[A-Za-z0-9_\-\.=~+/]{10,})",
    "url_password": r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:(?P<secret>[^\s@/]+)@",
    # key = value, key: value and JSON/dict forms ("password": "..."). After password,
    # passwd, api_key or access_key any value is a secret; after the everyday words
    # secret and token it must look like a credential (a digit or symbol inside), so
    # "the secret: consistency" and "token: expired" stay prose.
    "secret_assignment": (
        r"(?i)\b(?:(?:api[_-]?key|password|passwd|access[_-]?key)[\"']?\s*[:=]\s*[\"']?"
        r"(?P<secret>[^\s\"',;]{6,})"
        r"|(?:secret|token)[\"']?\s*[:=]\s*[\"']?"
        r"(?P<secret_token>(?=[^\s\"',;]*[0-9_\-!@#$%^&*+=/~][^\s\"',;]*)[^\s\"',;]{6,}))"
    ),
    "email": r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b",
}


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]

    def __post_init__(self) -> None:
        # Computed once: apply() runs for every string attribute of every guard event.
        object.__setattr__(self, "_marker", REDACTION_MARKER_FORMAT.format(kind=self.kind))
        object.__setattr__(self, "_groups", tuple(
            g for g in self.pattern.groupindex if g.startswith("secret")))
        # A scan strategy only for a default rule left as shipped (see _SCANS).
        scan = _SCANS.get(self.kind) if DEFAULT_RULES.get(self.kind) == self.pattern.pattern \
            else None
        object.__setattr__(self, "_scan", scan)

    def replacement(self, match: re.Match[str]) -> str:
        """The text that replaces ``match``: the marker, or the match with its secret
        group replaced by the marker."""
        marker: str = self._marker  # type: ignore[attr-defined]
        groups: tuple[str, ...] = self._groups  # type: ignore[attr-defined]
        if not groups:
            return marker
        group = next(g for g in groups if match.group(g) is not None)
        start, end = match.span(group)
        whole = match.group(0)
        offset = match.start()
        return whole[: start - offset] + marker + whole[end - offset:]

    def apply(self, text: str, folds: _Folds | None = None) -> tuple[str, int]:
        scan: _Scan | None = self._scan  # type: ignore[attr-defined]
        if scan is None:
            return self.subn(text)
        try:
            return scan.apply(self, text, folds or _Folds())
        except _UnfoldableError:
            return self.subn(text)

    def subn(self, text: str) -> tuple[str, int]:
        """The reference: one regex pass over the whole text."""
        if not self._groups:  # type: ignore[attr-defined]
            return self.pattern.subn(self._marker, text)  # type: ignore[attr-defined]
        return self.pattern.subn(self.replacement, text)


# --- scanning only where a default rule can match -------------------------------------
#
# One regex pass of each rule over a 100 KB prompt took 2-4 ms (12 ms for all six, 8 MB/s
# on the payload worker). Every match of a default rule contains a literal (an "@", a
# "://", "sk-", "bearer", ...), and for most rules cannot contain whitespace, so each
# scan below looks only where a match can be and returns exactly what ``subn`` over the
# whole text returns (the unit tests compare them on adversarial text):
#
# * _Literal: no required literal in the text, no match; else the whole-text pass.
# * _Runs: matches have no whitespace, so each lies inside one run of non-whitespace
#   characters; only runs holding a literal are matched, each on its own (a run's
#   neighbours are whitespace or the text's ends, so \b behaves as in the whole text).
# * _Anchored: every match starts with a keyword (case-insensitive), so the pattern is
#   tried only at keyword positions, left to right, as subn would. A rule whose every
#   match also holds one of a few characters (":" or "=" after a secret's name) is not
#   looked at in a text that has none of them.
#
# A literal is first looked for by its rarest character (a "-", "_", ":" or "@", an
# uppercase K, a "z"): when that is absent, the literal cannot be there either, and the
# check cost one memchr instead of a substring search (100 KB: 3 us against 60 us).
# Prose often lacks "-", "_" and ":"; code and JSON seldom do, and gain nothing here.
#
# Case-insensitive keywords are looked for in a folded copy: lower(), after mapping the
# four non-ASCII characters that ``re.IGNORECASE`` equates with ASCII letters (İ ı ſ K).
# The copy has the text's length (U+0130 is the one character whose lower() is longer,
# and it is mapped first), so a keyword's position in it is its position in the text.
# It is made once per text for all keyword rules (:class:`_Folds`).
_FOLD = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))

# Characters by how common they are in prose, most common first; any other character
# (punctuation, most capitals) counts as rarer than all of them.
_COMMON_CHARS = "etaoinsrhldcumfpgwybvTIAkSWHBMCxjqz"


def _folded(text: str) -> str:
    if not text.isascii():
        for special, letter in _FOLD:  # str.replace: a C scan (translate() is per char)
            text = text.replace(special, letter)
    folded = text.lower()
    if len(folded) != len(text):  # not expected (see above); stay exact regardless
        raise _UnfoldableError
    return folded


class _UnfoldableError(Exception):
    pass


class _Folds:
    """The folded copy of the text being redacted, made once for all keyword rules.

    Rules run one after the other on the text the previous one returned; while none
    replaces anything, that is the same object, and its folded copy is reused.
    """

    __slots__ = ("_folded", "_text")

    def __init__(self) -> None:
        self._text: str | None = None
        self._folded = ""

    def of(self, text: str) -> str:
        if text is not self._text:
            self._folded = _folded(text)
            self._text = text
        return self._folded


def _gate(literal: str) -> str:
    """The character of ``literal`` least likely to be in a text (see _COMMON_CHARS)."""
    return max(literal, key=lambda c: _COMMON_CHARS.find(c) % (len(_COMMON_CHARS) + 1))


def _gated(literals: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((_gate(literal), literal) for literal in literals)


class _Scan:
    def apply(self, rule: _Rule, text: str, folds: _Folds) -> tuple[str, int]:
        raise NotImplementedError


@dataclass(frozen=True)
class _Literal(_Scan):
    literals: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_gated", _gated(self.literals))

    def apply(self, rule: _Rule, text: str, folds: _Folds) -> tuple[str, int]:
        gated: tuple[tuple[str, str], ...] = self._gated  # type: ignore[attr-defined]
        if any(gate in text and literal in text for gate, literal in gated):
            return rule.subn(text)
        return text, 0


@dataclass(frozen=True)
class _Runs(_Scan):
    literals: tuple[str, ...]  # case-sensitive (no letters for IGNORECASE rules)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_gated", _gated(self.literals))

    def apply(self, rule: _Rule, text: str, folds: _Folds) -> tuple[str, int]:
        runs: list[tuple[int, int]] = []
        gated: tuple[tuple[str, str], ...] = self._gated  # type: ignore[attr-defined]
        for gate, literal in gated:
            if gate not in text:
                continue
            at = text.find(literal)
            while at != -1:
                start = at
                while start > 0 and not text[start - 1].isspace():
                    start -= 1
                space = _SPACE.search(text, at)
                end = space.start() if space else len(text)
                runs.append((start, end))
                at = text.find(literal, end)
        if not runs:
            return text, 0
        pieces: list[str] = []
        total = done = 0
        for start, end in sorted(set(runs)):
            if start < done:
                continue  # the same run, found through another literal
            replaced, count = rule.subn(text[start:end])
            if count:
                pieces.append(text[done:start])
                pieces.append(replaced)
                done = end
                total += count
        if not total:
            return text, 0
        pieces.append(text[done:])
        return "".join(pieces), total


@dataclass(frozen=True)
class _Anchored(_Scan):
    keywords: tuple[str, ...]  # lower case; the rule is case-insensitive
    # Every match holds one of these characters (none of them changed by IGNORECASE);
    # empty: no such condition.
    requires: tuple[str, ...] = ()

    def apply(self, rule: _Rule, text: str, folds: _Folds) -> tuple[str, int]:
        if self.requires and not any(char in text for char in self.requires):
            return text, 0
        folded = folds.of(text)
        starts: list[int] = []
        for keyword in self.keywords:
            at = folded.find(keyword)
            while at != -1:
                starts.append(at)
                at = folded.find(keyword, at + 1)
        if not starts:
            return text, 0
        pieces: list[str] = []
        done = total = 0
        for at in sorted(starts):
            if at < done:
                continue
            match = rule.pattern.match(text, at)
            if match is not None:
                pieces.append(text[done:at])
                pieces.append(rule.replacement(match))
                done = match.end()
                total += 1
        if not total:
            return text, 0
        pieces.append(text[done:])
        return "".join(pieces), total


_SPACE = re.compile(r"\s")
_SCANS: Mapping[str, _Scan] = {
    "private_key": _Literal(("-----BEGIN ",)),
    "api_key": _Runs(("sk-", "AKIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
                      "xox", "AIza", "glpat-")),
    "bearer_token": _Anchored(("bearer",)),
    "url_password": _Runs(("://",)),
    # Both alternatives need a ":" or "=" between the name and the value.
    "secret_assignment": _Anchored(("api", "passw", "access", "secret", "token"),
                                   requires=(":", "=")),
    "email": _Runs(("@",)),
}


# Short texts (attribute values: module, tier, agent, matched phrase, tool names) repeat
# from call to call, so their result is remembered; each rule is a regex pass, and all
# of them cost a guard event several times what the OTel SDK spends on it. Bounded:
# cleared when full, and long texts (payload bodies) are never remembered.
_MEMO_MAX_CHARS = 256
_MEMO_ENTRIES = 4096


@dataclass(frozen=True)
class Redactor:
    """Replaces secrets in text with ``[REDACTED:<kind>]`` markers.

    Args:
        rules: Rule name -> regular expression. Defaults to :data:`DEFAULT_RULES`.
        extra_rules: Rules added to ``rules`` (how a deployment extends redaction).
        enabled: With False, :meth:`redact` returns text unchanged.
    """

    rules: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_RULES))
    extra_rules: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True
    # Set once by __post_init__ (the dataclass is frozen).
    _compiled: tuple[_Rule, ...] = field(init=False, repr=False, compare=False)
    _memo: dict[str, tuple[str, int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compiled = tuple(
            _Rule(kind, re.compile(pattern))
            for kind, pattern in {**self.rules, **self.extra_rules}.items()
        )
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_memo", {})

    def redact(self, text: str) -> str:
        """Return ``text`` with every secret replaced by its marker."""
        hit = self._memo.get(text)
        return hit[0] if hit is not None else self.redact_counted(text)[0]

    def redact_counted(self, text: str) -> tuple[str, int]:
        """Return the redacted text and how many secrets were replaced."""
        if not self.enabled or not text:
            return text, 0
        short = len(text) <= _MEMO_MAX_CHARS
        if short:
            hit = self._memo.get(text)
            if hit is not None:
                return hit
        original = text
        total = 0
        folds = _Folds()
        for rule in self._compiled:
            text, count = rule.apply(text, folds)
            total += count
        if short:
            memo = self._memo
            if len(memo) >= _MEMO_ENTRIES:
                memo.clear()
            memo[original] = (text, total)
        return text, total
