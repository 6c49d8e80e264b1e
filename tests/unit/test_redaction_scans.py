"""Redaction's targeted scans return exactly what one regex pass per rule returns.

collectors/redaction.py runs the default rules only where they can match (texts with
their literal, runs of non-whitespace, keyword positions); the reference is
``pattern.subn`` over the whole text, rule after rule. They are compared on text built
to hit the edges: secrets next to and inside words, every whitespace character, the
non-ASCII letters IGNORECASE equates with ASCII ones, JSON-escaped bodies, markers.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from guardtrace.collectors.emit.redaction import (
    _SCANS,
    DEFAULT_RULES,
    Redactor,
    _Anchored,
    _gate,
    _Runs,
)

FRAGMENTS = [
    "sk-ant-abcdefghijklmnop1234", "sk-proj-AAAAAAAAAAAAAAAAAAAA", "sk-short",
    "xsk-abcdefghijklmnopqr", "AKIAABCDEFGHIJKLMNOP", "AKIA1234", "ghp_" + "a" * 36,
    "gho_" + "B" * 31, "github_pat_" + "x" * 40,
    "xoxb-1234567890-abc", "AIza" + "Z" * 35, "glpat-" + "q" * 20,
    "Bearer abcdef123456789", "bearer\n tok3n_value_xyz", "BEARER authentication", "Bearer",
    "https://user:p4ss@host.example/x", "postgres://admin:hunter22@db:5432", "a://b:c@d", "://",
    "ftp://x@y", "HTTPS://U:P@H", "password: hunter2secret", 'API_KEY="abcdef12345"',
    "api-key = zzzzzzzz9", "passwd=abc", "secret: consistency", "token: expired", "token=abc_123!",
    "access_key:\tAKIAXYZ12345", "Secret = 'x1y2z3w4'", "tokens", "apiKey:q1w2e3r4t5",
    "jane.doe+tag@example.co.uk", "a@b.c", "@", "mail@host", "user@@example.com",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----", "-----BEGIN ",
    "[REDACTED:api_key]", "pa\u017fsword: s3cr3tvalue", "\u212aey", "ap\u0131_key=abcdef123",
    "\u0130", "tok\u0130n=abc123456", "caf\u00e9", "\u2019", "\U0001f600", "\\n", '\\"', '"', "'",
    ":", "=", "/", "-", "_", ".", ",", ";", "x", "word", "1234567890",
]
WHITESPACE = [" ", "\n", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2028",
              "\u3000", "  "]

texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.sampled_from(WHITESPACE),
                           st.text(max_size=4)), max_size=40).map("".join)


def reference(redactor: Redactor, text: str) -> tuple[str, int]:
    total = 0
    for rule in redactor._compiled:  # type: ignore[attr-defined]
        text, count = rule.subn(text)
        total += count
    return text, total


@settings(max_examples=1500, deadline=None)
@given(texts)
def test_scans_equal_whole_text_passes(text: str) -> None:
    redactor = Redactor()
    assert redactor.redact_counted(text) == reference(redactor, text)


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, min_size=1, max_size=5))
def test_long_and_json_escaped_texts(parts: list[str]) -> None:
    redactor = Redactor()
    text = " filler words here\n".join(parts) * 3
    escaped = text.encode("unicode_escape").decode("ascii")
    for candidate in (text, escaped, text.replace(" ", "")):
        assert redactor.redact_counted(candidate) == reference(redactor, candidate)


def test_every_rule_is_scanned_only_as_shipped() -> None:
    assert set(_SCANS) == set(DEFAULT_RULES)
    custom = Redactor(rules={"email": r"\b[a-z]+@[a-z]+\b"})
    assert custom._compiled[0]._scan is None  # type: ignore[attr-defined]
    assert custom.redact_counted("me@host") == ("[REDACTED:email]", 1)


def test_run_literals_of_case_insensitive_rules_have_no_letters() -> None:
    # Runs are found with a case-sensitive str.find.
    for kind, scan in _SCANS.items():
        if isinstance(scan, _Runs) and re.compile(DEFAULT_RULES[kind]).flags & re.IGNORECASE:
            assert not any(c.isalpha() for literal in scan.literals for c in literal)


def test_literal_gates_are_characters_of_their_literals() -> None:
    # A literal is looked for only when its gate character is in the text: sound only if
    # the gate is part of the literal.
    for scan in _SCANS.values():
        for gate, literal in getattr(scan, "_gated", ()):
            assert len(gate) == 1 and gate in literal
    assert _gate("sk-") == "-" and _gate("AKIA") == "K" and _gate("xox") == "x"


@settings(max_examples=500, deadline=None)
@given(texts)
def test_every_match_of_a_keyword_rule_holds_a_required_character(text: str) -> None:
    # _Anchored skips texts with none of ``requires``: every match must hold one.
    for kind, scan in _SCANS.items():
        if isinstance(scan, _Anchored) and scan.requires:
            for match in re.finditer(DEFAULT_RULES[kind], text):
                assert any(char in match.group(0) for char in scan.requires)


def test_prose_without_gate_characters_is_left_alone_and_matches_the_reference() -> None:
    redactor = Redactor()
    prose = ("Akia the bearer of news said the token count grew; access to the api "
             "was passworded, secrets kept.\n") * 500
    assert redactor.redact_counted(prose) == reference(redactor, prose) == (prose, 0)
    # The same prose with secrets in it: every rule still fires.
    seeded = prose + "password=hunter22 Bearer abc123def456 sk-" + "a" * 20 + " a@b.io"
    assert redactor.redact_counted(seeded) == reference(redactor, seeded)
    assert redactor.redact_counted(seeded)[1] == 4
