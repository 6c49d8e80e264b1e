"""The dashboard's one Markdown escape: a code span that nothing inside can close."""

from __future__ import annotations

import re

import pytest

from guardtrace.dashboard.safe_render import literal


@pytest.mark.parametrize("text", [
    "[Sign in](https://evil.example)", "![x](https://evil.example/p.png)", "`code`",
    "a `` b ``` c", "```", "ends with `", "line\n# heading\n\n- item", "cr\rlf\r\n",
    ":material/lock: :red[alert] $x^2$ <b>bold</b> https://evil.example *em*", " padded ",
])
def test_a_literal_is_one_code_span_holding_the_text(text: str) -> None:
    shown = literal(text)
    fence = re.match("`+", shown)
    assert fence is not None and shown.endswith(" " + fence[0])
    inner = shown[len(fence[0]) + 1:-len(fence[0]) - 1]
    # Nothing inside is as long a run of backticks as the fence: nothing closes it early.
    assert all(len(run) < len(fence[0]) for run in re.findall("`+", inner))
    # One line (a line break would let the next line start a heading or a list), and
    # otherwise the text exactly (CommonMark strips the one space added on each side).
    assert "\n" not in shown and "\r" not in shown
    assert inner == re.sub("\r\n|\r|\n", " ", text)


def test_empty_text_is_no_markdown_at_all() -> None:
    assert literal("") == ""
