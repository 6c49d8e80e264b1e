"""The value scans of the ungrounded-result tier: money amounts, code-shaped words and
clock times.

Each scan is shaped for speed (a pattern that starts with a character set runs in C, a
time is tried only next to a colon); these pin that it finds what the plain scan would,
in the same order.
"""

from __future__ import annotations

import pytest

from guardtrace.collectors.replies.grounding import (
    _TIME_RE,
    _clock_times,
    _code_candidates,
    _money,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("The fare is $1,936.50 and the bag $35.", [("$1,936.50", "1,936.50"), ("$35", "35")]),
    ("That is 120 dollars, or USD 120.", [("120 dollars", "120"), ("USD 120", "120")]),
    # The form that starts first wins; the other, overlapping it, is not also counted.
    ("9 USD 1,000", [("9 USD", "9")]),
    ("$1,00010USD", [("$1,000", "1,000"), ("10USD", "10")]),
    # No currency code inside a word.
    ("XUSD 5 and FOOUSD 7", []),
    ("€20 then £30", [("€20", "20"), ("£30", "30")]),
])
def test_money_amounts_in_order(text, expected):
    assert _money(text, 256) == expected


def test_money_stops_at_the_limit():
    assert len(_money("$1 " * 1000, 256)) == 256
    assert len(_money("1 USD " * 1000, 256)) == 256


@pytest.mark.parametrize(("text", "expected"), [
    ("Reservation M05KNL on HAT227, card credit_card_4421486.",
     ["M05KNL", "HAT227", "credit_card_4421486"]),
    ("HAT227abc and xHAT227 are parts of longer words", []),
    ("A" * 45 + " is too long to be a code", []),
    ("paid with gift_card_7359776 then HAT023", ["gift_card_7359776", "HAT023"]),
    # 40 characters are a code, 41 a longer word; a letter of any script is part of it.
    ("A1" * 20 + " and " + "A1" * 20 + "B", ["A1" * 20]),
    ("éHAT227 HAT227é _HAT227 (HAT227)", ["HAT227"]),
])
def test_code_candidates_are_whole_words(text, expected):
    assert _code_candidates(text) == expected


@pytest.mark.parametrize("text", [
    "Departs 9:05, arrives 12:30 pm (local 23:59:59).",
    "12:12:12:12", "1:2:34 and 123:45 and 24:00 and 7:5",
    ":30 at the start, 09:15a.m. next, 11:59PM last",
    "::00:00::", "at ٢:30 in other digits", "",
])
def test_clock_times_are_what_a_scan_of_every_position_finds(text):
    found = [(m.span(), m.group()) for m in _clock_times(text)]
    assert found == [(m.span(), m.group()) for m in _TIME_RE.finditer(text)]
