"""Stored text made safe to print on a terminal.

What the CLI prints from the store (payload bodies, event attributes, agent names) was
written by agents and models, and by anyone who can produce to the topics. Written raw,
an ANSI escape sequence could recolour, clear or retitle the terminal, a ``\\r`` could
hide the start of a line behind its end, and a bidirectional override could reorder
what is read (Trojan Source). Such characters are printed as their Python escapes
(``\\x1b``, ``\\r``, ``\\u202e``), so they stay visible and nothing acts on them; ``--json``
output stays exact (JSON escapes them itself).
"""

from __future__ import annotations

import re

__all__ = ["terminal_safe"]

# Control characters (C0, DEL, C1), lone surrogates (not encodable: printing one would
# fail) and the bidirectional embedding, override and isolate controls.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every character that acts on a terminal written as its escape.

    Args:
        keep_newlines: Leave ``\\n`` and ``\\t`` as they are (for multi-line text such as
            a payload body); otherwise they are escaped too, keeping a value on its line.
    """
    if keep_newlines:
        return _UNSAFE.sub(lambda m: m[0] if m[0] in "\n\t" else _escape(m[0]), text)
    return _UNSAFE.sub(lambda m: _escape(m[0]), text)


def _escape(char: str) -> str:
    # repr writes each of these as \xNN or \uNNNN (\t, \n, \r as themselves).
    return repr(char)[1:-1]
