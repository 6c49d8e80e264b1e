"""Tool calls written out as text instead of made.

A model that has lost track of its tool interface types the call into its reply: JSON
naming the tool; a ``<tool_call>``, ``<|tool_call|>``, ``<function=...>``, ``<invoke>`` or
``<TOOL_NAME>`` tag; the special tokens of DeepSeek, Kimi, Mistral or Functionary before
the name; a harmony ``to=functions.NAME`` line; an ``Action:`` line; or a
function-call expression (Gemini's ``print(default_api.NAME(...))`` included). These are
the formats open and hosted models are trained to emit, so a model that misses its
tool-calling channel writes one of them. Nothing runs, yet the reply reads as if the work were under way,
and a user (or a simulated one) takes it as done.

:func:`find_text_tool_calls` looks for these shapes **naming a tool of the catalog** (or,
without a catalog, in the unmistakable wrappers only: JSON with ``name`` and
``arguments``, ``<tool_call>``/``<function_call>`` tags). Mentioning a tool in prose ("I
used `get_user_details`") is not a call: a call needs its arguments or its wrapper.
The caller decides whether the message made real calls; a text call of a tool that the
same message really called is a duplicate rendering, not a fabrication.

All patterns are single passes with bounded or possessive-free repetition: linear time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from dataclasses import dataclass

from .candidate_patterns import CandidatePatterns

__all__ = ["TextToolCall", "find_text_tool_calls"]

_KEYS = r"(?:name|tool|tool_name|function|function_name|action|recipient_name|api|command)"
# {"name": "get_user_details", ...} or {'tool': 'x'} - the value is the tool.
_JSON_NAME_RE = re.compile(
    rf"""[{{,]\s*["']{_KEYS}["']\s*:\s*["'](?P<name>[\w.\-/:]{{1,80}})["']""")
# {"get_user_details": {...}} - the key is the tool.
_JSON_KEY_RE = re.compile(r"""\{\s*["'](?P<name>[\w.\-/:]{1,80})["']\s*:\s*[{\[]""")
# <tool_call>, <function_call>, <|tool_call|> (Phi), <function=NAME> (Llama 3.2),
# <invoke name="NAME"> (Anthropic's XML).
_TAG_RE = re.compile(
    r"""<(?:tool_call|function_call|tool_use|functioncall)\b[^>]{0,200}>"""
    r"""|<\|(?:tool_call|tool_calls|python_tag)\|>"""
    r"""|<function\s*=\s*["']?(?P<fn>[\w.\-/:]{1,80})"""
    r"""|<invoke\s+name\s*=\s*["'](?P<inv>[\w.\-/:]{1,80})["']""",
    re.IGNORECASE)
# Special tokens with the name right after them, as the model's own vocabulary writes
# a call: DeepSeek V3/R1 (<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME) and V3.1
# (<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>), Kimi K2 (<|tool_call_begin|>functions.NAME:0),
# Mistral's v11 tokenizer ([TOOL_CALLS]NAME[ARGS]) and Functionary v2
# (<|recipient|>NAME). Detokenisers write the ▁ as "_" or a space, the ｜ as "|".
_SPECIAL_TOKEN_RE = re.compile(
    r"""<[|｜]tool[▁_ ]call[▁_ ]begin[|｜]>\s{0,20}"""
    r"""(?:function\s{0,4}<[|｜]tool[▁_ ]sep[|｜]>\s{0,20})?(?P<begin>[\w.\-/]{1,80})"""
    r"""|\[TOOL_CALLS\]\s{0,20}(?P<mistral>[\w.\-/]{1,80})\s{0,4}\[(?:ARGS|CALL_ID)\]"""
    r"""|<\|recipient\|>\s{0,20}(?P<recipient>[\w.\-/]{1,80})""")
_SPECIAL_TOKEN_MARKS = ("<|", "<｜", "[TOOL_CALLS]")
# Functionary v3: ">>>NAME" on a line of its own, the JSON arguments on the next.
_ARROWS_RE = re.compile(r"""^>>>\s{0,4}(?P<name>[\w.\-/]{1,80})[ \t]*\r?\n[ \t]*\{""",
                        re.MULTILINE)
# The recipient line of OpenAI's harmony format: "to=functions.NAME".
_RECIPIENT_RE = re.compile(r"""\bto=(?P<name>functions\.[\w.\-/:]{1,80})""")
# What follows a bare wrapper when no JSON names the tool: the name itself, as GLM
# (<tool_call>NAME<arg_key>...) and Phi (<|tool_call|>NAME {...}) write it.
_BARE_NAME_RE = re.compile(r"""\s{0,20}[`"']?(?P<name>[\w.\-/:]{1,80})""")
# <NAME><param>value</param></NAME>: a tag named after a catalog tool whose content is
# one more tag or JSON (the XML tool format several open models were trained on). HTML's
# own elements are markup, whatever a catalog calls its tools.
_HTML_TAGS = frozenset({"a", "b", "body", "code", "div", "em", "head", "html", "i", "li",
                        "ol", "p", "pre", "script", "span", "strong", "style", "table",
                        "td", "th", "tr", "ul"})
_NAMED_TAG_RE = re.compile(r"""<(?P<name>[A-Za-z_][\w.\-]{0,80})>\s{0,20}[<{]""")
# Action: get_user_details / Action Input: {...} (ReAct) and "Tool: x" lines.
_ACTION_RE = re.compile(
    r"""^[ \t*#>-]{0,6}(?:action|tool|function|tool\s+call|calling)\s*:\s*[`'"]?"""
    r"""(?P<name>[\w.\-/:]{1,80})""",
    re.IGNORECASE | re.MULTILINE)
# get_user_details(user_id="x") / functions.get_user_details({...}) / [get_weather(city=...)]
_CALL_RE = re.compile(
    r"""(?<![\w.])(?:functions\.|tools\.)?(?P<name>[A-Za-z_][\w.\-]{0,80})\(\s*"""
    r"""(?P<args>(?:[A-Za-z_]\w{0,40}\s*=|["'{\[]|\)))""")
# A call expression counts only on a line of its own, in a code block, or as the whole
# message: in running prose "call get_user_details(...)" is description, not a call.
# Gemini prints its calls as ``print(default_api.NAME(...))``: the print is part of the
# line's lead.
_LINE_LEAD_RE = re.compile(r"^[\s*\-`>#\[0-9.)]*(?:print\(\s*)?")
_CODE_FENCE_RE = re.compile(r"```[^\n]*\n(?P<body>.*?)(?:```|\Z)", re.DOTALL)


# The shapes' patterns, whose candidates one pass over a reply finds: most replies have
# a colon or a parenthesis, and match none.
_SHAPE_PATTERNS = (_JSON_NAME_RE, _JSON_KEY_RE, _TAG_RE, _NAMED_TAG_RE, _SPECIAL_TOKEN_RE,
                   _ARROWS_RE, _RECIPIENT_RE, _ACTION_RE, _CALL_RE)
(_JSON_NAME, _JSON_KEY, _TAG, _NAMED_TAG, _SPECIAL_TOKEN, _ARROWS, _RECIPIENT, _ACTION,
 _CALL) = range(len(_SHAPE_PATTERNS))


@functools.cache
def _shape_candidates() -> CandidatePatterns:
    return CandidatePatterns(_SHAPE_PATTERNS)


@dataclass(frozen=True, slots=True)
class TextToolCall:
    """A tool call found in reply text.

    Attributes:
        name: The tool it names.
        shape: ``"json"``, ``"tag"``, ``"action"`` or ``"call"``.
        excerpt: The text of the call's start, as written.
    """

    name: str
    shape: str
    excerpt: str


# How much of a call's text its excerpt shows; two readings of one name closer than this
# are one call.
_EXCERPT_CHARS = 80
_SHAPES = ("json", "tag", "action", "call")


def _known(name: str | None, tools: Collection[str]) -> str | None:
    if not name:
        return None
    if name in tools:
        return name
    # "functions.get_weather", "default_api.get_weather", "mcp__srv__tool".
    last = re.split(r"__|[./:]", name)[-1]
    return last if last in tools else None


def _line_alone(text: str, start: int, end: int) -> bool:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    # What precedes the call on its line: list markers, numbering, quotes, a label.
    before = _LINE_LEAD_RE.sub("", text[line_start:start])
    return before == "" or before.endswith(":")


def find_text_tool_calls(text: str, tools: Collection[str]) -> list[TextToolCall]:
    """Tool calls written as text in ``text``.

    Args:
        text: The reply.
        tools: The catalog's tool names. Empty: only the wrappers that say "tool call"
            by themselves count (JSON with a name and arguments, ``<tool_call>`` tags).

    Returns:
        The calls found, in order (at most one per tool name and shape, and one per
        call written in two shapes, such as JSON inside a ``<tool_call>`` tag).
    """
    if not text:
        return []
    found: dict[tuple[str, str], tuple[int, TextToolCall]] = {}

    def add(name: str | None, shape: str, start: int) -> None:
        known = _known(name, tools) if tools else name
        if not known or (known, shape) in found:
            return
        # The same call read in a second shape (JSON inside a <tool_call> tag) is one
        # call, shown from where it starts.
        near = [(known, other) for other in _SHAPES if (known, other) in found
                and abs(found[(known, other)][0] - start) < _EXCERPT_CHARS]
        if any(found[key][0] <= start for key in near):
            return
        for key in near:
            del found[key]
        found[(known, shape)] = (start, TextToolCall(
            known, shape, " ".join(text[start:start + _EXCERPT_CHARS].split())))

    may = _shape_candidates().which(text)
    if "{" in text and _JSON_NAME in may:
        for m in _JSON_NAME_RE.finditer(text):
            if tools or re.search(r"""["'](?:arguments|parameters|args|input)["']\s*:""",
                                  text[m.end():m.end() + 400]):
                add(m.group("name"), "json", m.start())
    if "{" in text and tools and _JSON_KEY in may:
        for m in _JSON_KEY_RE.finditer(text):
            add(m.group("name"), "json", m.start())
    if "<" in text and _TAG in may:
        for m in _TAG_RE.finditer(text):
            name = m.group("fn") or m.group("inv")
            if name is None:
                inner = _JSON_NAME_RE.search(text, m.end(), m.end() + 400)
                name = inner.group("name") if inner else None
                if name is None and tools:
                    bare = _BARE_NAME_RE.match(text, m.end())
                    name = bare.group("name") if bare else None
                if name is None and not tools:
                    name = "<unknown>"
            add(name, "tag", m.start())
    if "<" in text and tools and _NAMED_TAG in may:
        closed: dict[str, bool] = {}  # one search for the closing tag per name
        for m in _NAMED_TAG_RE.finditer(text):
            name = m.group("name")
            if name not in tools or name in _HTML_TAGS:
                continue
            if name not in closed:
                closed[name] = f"</{name}>" in text
            if closed[name]:
                add(name, "tag", m.start())
    if _SPECIAL_TOKEN in may and any(mark in text for mark in _SPECIAL_TOKEN_MARKS):
        for m in _SPECIAL_TOKEN_RE.finditer(text):
            add(m.group("begin") or m.group("mistral") or m.group("recipient"), "tag",
                m.start())
    if tools and ">>>" in text and _ARROWS in may:
        for m in _ARROWS_RE.finditer(text):
            add(m.group("name"), "tag", m.start())
    if "to=" in text and _RECIPIENT in may:
        for m in _RECIPIENT_RE.finditer(text):
            add(m.group("name"), "tag", m.start())
    if tools and ":" in text and _ACTION in may:
        for m in _ACTION_RE.finditer(text):
            add(m.group("name"), "action", m.start())
    if tools and "(" in text and _CALL in may:
        fenced = [(m.start("body"), m.end("body")) for m in _CODE_FENCE_RE.finditer(text)]
        stripped = text.strip()
        for m in _CALL_RE.finditer(text):
            if _known(m.group("name"), tools) is None:
                continue
            in_code = any(s <= m.start() < e for s, e in fenced)
            whole = stripped.startswith(m.group(0).strip()) and len(stripped) < 600
            if in_code or whole or _line_alone(text, m.start(), m.end()):
                add(m.group("name"), "call", m.start())
    return [call for _, call in sorted(found.values(), key=lambda item: item[0])]
