"""Names and argument names as words: split on separators and camelCase, lower-cased,
crudely stemmed. What suggestions and the name classifier compare."""

from __future__ import annotations

import re

__all__ = ["MAX_NAME_CHARS", "stem", "words"]

# Longer names and argument names are not attempts at a name: every tool-calling API
# caps names far below this (OpenAI at 64 characters, MCP clients similarly), so such a
# name gets no suggestion and no classification, and costs nothing to look at.
MAX_NAME_CHARS = 256

_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SPLIT_RE = re.compile(r"[^A-Za-z0-9]+")


def stem(token: str) -> str:
    """Crude English stemming so "files"/"file", "creating"/"create" compare equal."""
    if len(token) > 5 and token.endswith("ing"):
        token = token[:-3]
    elif len(token) > 4 and token.endswith("ed"):
        token = token[:-2]
    if len(token) > 4 and token.endswith("ies"):
        token = token[:-3] + "y"
    elif len(token) > 4 and token.endswith(("sses", "xes", "ches", "shes")):
        token = token[:-2]
    elif len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        token = token[:-1]
    if len(token) > 4 and token.endswith("e"):
        token = token[:-1]
    return token


def words(text: str) -> list[str]:
    """Split on separators and camelCase ("getHTTPStatus" -> get, http, status)."""
    out: list[str] = []
    for chunk in _SPLIT_RE.split(text):
        out.extend(w.lower() for w in _CAMEL_RE.findall(chunk))
    return out
