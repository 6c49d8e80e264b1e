"""The one-pass prefilters of the reply guards: they may say "maybe" wrongly, never "no".

:class:`CandidatePatterns` lets the typed-call finder skip every shape that RE2's looser
copy says cannot match, and :class:`CandidateWords` lets the claim finder skip every
pattern none of whose needed words occur. A copy that matched less than its pattern, or
a word set that missed a word, would silently drop a finding, so both are checked
against what they stand for on generated texts, on the dev set's real messages, and
construct by construct (the converter also on the claim patterns, the richest regexes
the guards have); and the guards' verdicts are compared with the prefilters and without
them (as without google-re2).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardtrace.collectors.replies import candidate_patterns, claims, text_tool_calls
from guardtrace.collectors.replies.candidate_patterns import (
    EVERY,
    UNFOLDED_LETTERS,
    CandidatePatterns,
    CandidateWords,
    looser_re2,
)
from guardtrace.collectors.replies.claim_patterns import claim_patterns
from guardtrace.collectors.replies.conversation_guard import ReplyVerdict, judge_conversation
from tests.support.realdata import conversations

CLAIM_PATTERNS = [pattern for pattern, *_ in claim_patterns()]
SHAPE_PATTERNS = list(text_tool_calls._SHAPE_PATTERNS)
ALL_PATTERNS = CLAIM_PATTERNS + SHAPE_PATTERNS
CLAIM_SET = CandidatePatterns(CLAIM_PATTERNS)  # the converter's hardest inputs
SHAPE_SET = CandidatePatterns(SHAPE_PATTERNS)
NEEDED = sorted({word for *_, needs, _ in claim_patterns() for word in needs})
CLAIM_WORDS = CandidateWords(NEEDED)


def _looser_matches(pattern: re.Pattern[str], text: str) -> bool:
    copy = looser_re2(pattern)
    assert copy is not None, pattern.pattern
    return re2.compile(copy).search(text) is not None


@contextmanager
def without_prefilter() -> Iterator[None]:
    """The guards as they run without google-re2: every pattern a candidate."""
    saved = claims._claim_words, text_tool_calls._shape_candidates
    every_word = CandidateWords(NEEDED, use_re2=False)
    every_shape = CandidatePatterns(SHAPE_PATTERNS, use_re2=False)
    claims._claim_words = lambda: every_word
    text_tool_calls._shape_candidates = lambda: every_shape
    try:
        yield
    finally:
        claims._claim_words, text_tool_calls._shape_candidates = saved


# -- the conversion, construct by construct ------------------------------------------------

@pytest.mark.parametrize(("pattern", "text"), [
    # Lookarounds are left out: the copy matches where the pattern's assertion fails too.
    (r"(?<=\w)'s\s+been", "it's been"),
    (r"run\b(?!\s+into)", "I've run the tests"),
    # Word boundaries and end anchors only narrow.
    (r"\bnow\b$", "right now"),
    # Python's \w, \d and \s hold non-ASCII characters; RE2's do not.
    (r"caf\w", "café"),
    (r"\d+", "٣"),
    (r"a\sb", "a\u00a0b"),
    (r"a\sb", "a\x1cb"),
    # A negated class keeps only its ASCII exclusions.
    (r"[^\W\d]", "é"),
    (r"x[^\s]y", "xéy"),
    # Possessive, lazy and atomic forms are greedy and plain in RE2.
    (r"a++b", "aab"),
    (r"a{1,3}?b", "aab"),
    (r"(?>ab|a)c", "abc"),
    # A start anchor keeps its meaning, with MULTILINE too.
    (r"(?m)^- added", "ok\n- added"),
])
def test_each_construct_matches_where_the_pattern_does(pattern: str, text: str) -> None:
    compiled = re.compile(pattern, re.IGNORECASE)
    assert compiled.search(text)
    assert _looser_matches(compiled, text)


def test_copies_keep_the_case_insensitive_letters_and_a_start_anchor() -> None:
    copy = looser_re2(re.compile(r"^Let me", re.IGNORECASE | re.MULTILINE))
    assert copy is not None and copy.startswith("(?im)")
    assert re2.compile(copy).search("ok\nLET ME")
    assert not re2.compile(copy).search("ok, let me")  # not at a line's start


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?P<x>a)(?(x)b|c)", r"(?i:a)b",
                                     r"a{2000}"])
def test_a_construct_not_converted_makes_its_pattern_always_a_candidate(
        pattern: str) -> None:
    compiled = re.compile(pattern)
    assert looser_re2(compiled) is None
    candidates = CandidatePatterns([compiled, re.compile("zzz")])
    found = candidates.which("nothing like either")
    assert 0 in found and 1 not in found


def test_every_claim_and_typed_call_pattern_is_converted() -> None:
    # One left unconverted would cost a scan per reply, unnoticed.
    assert [p.pattern[:60] for p in ALL_PATTERNS if looser_re2(p) is None] == []


# -- texts RE2 cannot read as Python does --------------------------------------------------

def test_only_the_pinned_letters_are_ascii_to_python_and_not_to_re2() -> None:
    python, copy = re.compile("[a-z]", re.IGNORECASE), re2.compile("(?i)[a-z]")
    ascii_letters = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    differ = set()
    for code in range(0x80, 0x10000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        folds_apart = bool(python.fullmatch(char)) and not copy.fullmatch(char)
        # Taken for a letter by either engine, yet no ASCII word character to RE2's \b.
        lowers_to_ascii = bool(ascii_letters & set(char.lower()))
        if folds_apart or lowers_to_ascii or (python.fullmatch(char) and copy.fullmatch(char)):
            differ.add(char)
    assert differ == set(UNFOLDED_LETTERS)


@pytest.mark.parametrize("text", ["İ've cancelled it", "ı've cancelled it",
                                  "I'ſe cancelled it", "\u212aindly hold on",
                                  "I've cancelled it \ud800"])
def test_a_text_re2_cannot_read_as_python_does_is_not_prefiltered(text: str) -> None:
    assert SHAPE_SET.which(text) is EVERY
    assert CLAIM_WORDS.which(text) is EVERY


def test_without_re2_everything_is_a_candidate() -> None:
    assert CandidatePatterns(SHAPE_PATTERNS, use_re2=False).which("nothing") is EVERY
    assert CandidateWords(NEEDED, use_re2=False).which("nothing") is EVERY
    assert candidate_patterns.RE2_AVAILABLE  # the test extra installs it: both ways run


def test_a_reply_with_no_typed_call_leaves_no_shape_to_run() -> None:
    found = SHAPE_SET.which(
        "Here are the flights. HAT220 leaves at 19:20 and costs $288 (economy). Which one?")
    assert all(i not in found for i in range(len(SHAPE_PATTERNS)))
    assert SHAPE_SET.which('{"name": "search_flights", "arguments": {}}') != frozenset()


def _holds(text: str, word: str) -> bool:
    return claims._Reading(text).holds_any((word,))


@pytest.mark.parametrize(("text", "word"), [
    ("I   am\nchecking", "i am"),  # any whitespace run is one space
    ("I\u00a0AM checking", "i am"),  # a non-ASCII space too
    ("Right NOW.", "\\bnow\\b"),
    ("as per the rules", "per "),
    ("- item", "-"),
])
def test_the_word_set_finds_what_the_substring_tests_find(text: str, word: str) -> None:
    assert _holds(text, word)
    assert word in CandidateWords([word]).which(text)


def test_a_word_inside_a_longer_word_is_no_whole_word() -> None:
    assert "\\bnow\\b" not in CandidateWords(["\\bnow\\b"]).which("let me know")
    assert not _holds("let me know", "\\bnow\\b")


# -- the copies against their patterns -----------------------------------------------------

# Pieces of the claims and calls the patterns look for, and of what surrounds them, so
# that generated texts often come close to a match (random letters almost never do).
_PIECES = ["I", "we", "I've", "I’ve", "we're", "I'm", "I'll", "let me", "have", "has",
           "been", "now", "just", "successfully", "cancelled", "updated", "checked",
           "checking", "booked", "booking", "the", "your", "reservation", "was", "able",
           "to", "cancel", "process", "proceed", "with", "✅", "-", "*", "1.", "**",
           "Status:", "Action:", "search_flights", "(", ")", "{", "}", "\"name\"", ":",
           "<tool_call>", "<", ">", "=", "'", "\"", ",", ".", "!", "?", "\n", " ", "  ",
           "\t", "é", "\u00a0", "’", "ſ", "K", "٣", "0", "42"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=30).map(" ".join)
       | st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)
       | st.text(max_size=60))
def test_a_copy_matches_wherever_its_pattern_matches(text: str) -> None:
    for patterns, found in ((CLAIM_PATTERNS, CLAIM_SET.which(text)),
                            (SHAPE_PATTERNS, SHAPE_SET.which(text))):
        for index, pattern in enumerate(patterns):
            if pattern.search(text):
                assert index in found, (pattern.pattern[:80], text)
    words = CLAIM_WORDS.which(text)
    reading = claims._Reading(text)
    for word in NEEDED:
        if reading.holds_any((word,)):
            assert word in words, (word, text)


def _dev_texts() -> Iterator[str]:
    for conversation in conversations().values():
        for message in conversation["messages"]:
            if isinstance(message.get("content"), str) and message["content"].strip():
                yield message["content"]


def test_on_the_dev_sets_messages_nothing_that_occurs_is_skipped() -> None:
    skipped = []
    checked = 0
    for text in _dev_texts():
        masked = claims.mask_quoted(text)
        for patterns, found, seen in ((CLAIM_PATTERNS, CLAIM_SET.which(masked), masked),
                                      (SHAPE_PATTERNS, SHAPE_SET.which(text), text)):
            for index, pattern in enumerate(patterns):
                if index not in found and pattern.search(seen):
                    skipped.append((pattern.pattern[:60], seen[:80]))
        words, reading = CLAIM_WORDS.which(masked), claims._Reading(masked)
        skipped += [(word, masked[:80]) for word in NEEDED
                    if word not in words and reading.holds_any((word,))]
        checked += 1
    assert checked > 5_000
    assert skipped == []


def test_the_guards_verdicts_on_the_dev_set_are_the_same_without_the_prefilter() -> None:
    def verdicts() -> list[ReplyVerdict]:
        return [verdict for c in conversations().values()
                for verdict in judge_conversation(c["messages"], c.get("tools"))]

    with_prefilter = verdicts()
    with without_prefilter():
        assert verdicts() == with_prefilter
    assert sum(1 for v in with_prefilter if v.flagged) > 50  # the dev set's flags are in it
