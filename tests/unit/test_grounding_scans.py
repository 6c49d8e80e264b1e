"""The value scans of the ungrounded-result tier: money amounts and code-shaped words.

Each scan is split for speed (a pattern that starts with a character set runs in C); these
pin that the split finds what one scan for either form would, in the same order.
"""

from __future__ import annotations

import pytest

from guardtrace.collectors.replies.grounding import _code_candidates, _money


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
])
def test_code_candidates_are_whole_words(text, expected):
    assert _code_candidates(text) == expected
