"""Redaction of secrets before anything leaves the agent process.

On by default: prompts and responses routinely contain API keys pasted by users, bearer
tokens from tool outputs and credentials in URLs. The default rules are deliberately
specific (prefixes and shapes of real credentials) so ordinary prose is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from guardtrace.schemas.names import REDACTION_MARKER_FORMAT

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

    def apply(self, text: str) -> tuple[str, int]:
        marker: str = self._marker  # type: ignore[attr-defined]
        groups: tuple[str, ...] = self._groups  # type: ignore[attr-defined]
        if not groups:
            return self.pattern.subn(marker, text)

        def replace(match: re.Match[str]) -> str:
            group = next(g for g in groups if match.group(g) is not None)
            start, end = match.span(group)
            whole = match.group(0)
            offset = match.start()
            return whole[: start - offset] + marker + whole[end - offset:]

        return self.pattern.subn(replace, text)


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

    def __post_init__(self) -> None:
        compiled = tuple(
            _Rule(kind, re.compile(pattern))
            for kind, pattern in {**self.rules, **self.extra_rules}.items()
        )
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_memo", {})

    def redact(self, text: str) -> str:
        """Return ``text`` with every secret replaced by its marker."""
        hit = self._memo.get(text)  # type: ignore[attr-defined]
        return hit[0] if hit is not None else self.redact_counted(text)[0]  # type: ignore[no-any-return]

    def redact_counted(self, text: str) -> tuple[str, int]:
        """Return the redacted text and how many secrets were replaced."""
        if not self.enabled or not text:
            return text, 0
        short = len(text) <= _MEMO_MAX_CHARS
        if short:
            hit = self._memo.get(text)  # type: ignore[attr-defined]
            if hit is not None:
                return hit  # type: ignore[no-any-return]
        original = text
        total = 0
        for rule in self._compiled:  # type: ignore[attr-defined]
            text, count = rule.apply(text)
            total += count
        if short:
            memo = self._memo  # type: ignore[attr-defined]
            if len(memo) >= _MEMO_ENTRIES:
                memo.clear()
            memo[original] = (text, total)
        return text, total
