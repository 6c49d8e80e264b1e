"""Stored text printed on a terminal: what acts on the terminal is shown as an escape, and
a request id that breaks the rule is a usage error before anything is read."""

from __future__ import annotations

import pytest

from guardtrace import cli
from guardtrace.cli.terminal_text import terminal_safe


@pytest.mark.parametrize(("stored", "shown"), [
    ("\x1b[2J\x1b]0;owned\x07", "\\x1b[2J\\x1b]0;owned\\x07"),  # clear screen, set title
    ("approved\rdenied", "approved\\rdenied"),                   # \r hides the start
    ("a\u202eb\u2066c", "a\\u202eb\\u2066c"),                     # bidi override, isolate
    ("nul\x00 del\x7f c1\x9b", "nul\\x00 del\\x7f c1\\x9b"),      # C1 CSI acts like ESC [
    ("lone \ud800", "lone \\ud800"),                              # would fail to print
    ("line\nnext\ttab", "line\\nnext\\ttab"),
])
def test_characters_that_act_on_a_terminal_are_shown_as_escapes(stored: str,
                                                                 shown: str) -> None:
    assert terminal_safe(stored) == shown


def test_ordinary_text_is_unchanged_and_bodies_keep_their_lines() -> None:
    text = "café 東京 \U0001f600 {\"k\": \"v\\\\n\"} [REDACTED:aws_key]"
    assert terminal_safe(text) == text
    assert terminal_safe("one\n\ttwo\r\n\x1b[0m", keep_newlines=True) == \
        "one\n\ttwo\\r\n\\x1b[0m"


@pytest.mark.parametrize("command", ["trace", "payload"])
@pytest.mark.parametrize("request_id", ["[Sign in](https://evil.example)", "x' OR '1'='1",
                                        "id\nwith newline", "\x1b[2J", "", "a" * 201])
def test_a_bad_request_id_exits_2_naming_the_problem(
        command: str, request_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    # No store is given or opened: the id is refused while the arguments are read.
    with pytest.raises(SystemExit) as exited:
        cli.main([command, request_id, "--clickhouse-url", "chdb:///nonexistent/never-opened"])
    _, err = capsys.readouterr()
    assert exited.value.code == 2
    # argparse's usage, then one line: the problem, the id quoted with its escapes.
    message = err.strip().splitlines()[-1]
    assert message.startswith(f"guardtrace {command}: error: argument request_id: ")
    assert "request id" in message and "Traceback" not in err and "\x1b" not in err
