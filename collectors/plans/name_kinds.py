"""Names that are not attempts at a tool, so that no suggestion is made for them.

:func:`classify_unknown_name` tells two kinds apart:

* **abstentions**: the name says that no tool applies (``no_function``,
  ``out_of_domain``, ``None``, ``irrelevant``): a null word, a negation followed only by
  words about tools and answers, or "out of" a scope. Models trained to abstain this way
  answer a question no tool fits; that is an answer, not an invented tool.
* **placeholders**: the name says "some function" and nothing of its own (``func1``,
  ``function_name``, ``tools.call``, ``new_function``), or names the chat runtime rather
  than a tool (``python``, ``multi_tool_use.parallel``, role names such as
  ``assistant``), as tool-calling APIs leak them. Any suggestion for these would be a
  guess, so none is given.

Both families are defined by a small vocabulary of how names talk *about* tools (no,
none, function, tool, call ...), never by tool or domain words, so they carry over to
catalogues this module has never seen. A name that is in the allowed list is never
classified: the list always wins.
"""

from __future__ import annotations

from functools import lru_cache

from .name_words import MAX_NAME_CHARS
from .name_words import words as _words

__all__ = ["ABSTENTION", "PLACEHOLDER", "classify_unknown_name"]

#: :func:`classify_unknown_name` value for a name that says no tool applies.
ABSTENTION = "abstention"
#: :func:`classify_unknown_name` value for a name that stands for "some tool".
PLACEHOLDER = "placeholder"

# --- the vocabulary of names that talk about tools rather than name one ------------------
# Words that open a "no tool" name: negations and null words.
_NO_TOOL_LEADS = frozenset({
    "no", "not", "non", "none", "null", "nil", "nothing", "noop", "nop", "without",
    "cannot", "unable",
})
# Single words that say nothing fits: a negated "relevant/applicable/supported ...".
_NOTHING_FITS = frozenset({
    "irrelevant", "irrelevance", "inapplicable", "unsupported", "unavailable", "unrelated",
    "unanswerable", "abstain", "abstention", "refuse", "refusal", "decline",
})
# Words about tools, calls and answers (and the scope a request falls outside of) that
# may follow a negation in an abstention: "no_function", "no_relevant_tool_found",
# "not_applicable", "out_of_domain".
_TOOL_TALK = frozenset({
    "function", "functions", "func", "fn", "tool", "tools", "call", "calls", "action",
    "actions", "api", "op", "operation", "match", "matching", "matches", "answer",
    "response", "result", "relevant", "applicable", "available", "suitable",
    "appropriate", "supported", "possible", "needed", "required", "necessary", "found",
    "exist", "exists", "domain", "scope", "range", "context", "capability",
    "capabilities", "request", "query", "question", "task", "input", "above", "option",
    "options", "choice", "use", "fit", "fits", "selected", "here", "any",
})
# Words that make up a name standing for "some function": "func1", "tools.call".
_CALL_WORDS = frozenset({
    "func", "function", "functions", "fn", "f", "tool", "tools", "call", "calls", "method",
    "methods", "action", "api", "invoke", "execute", "run", "dispatch", "name",
})
# Filler that placeholders are padded with: "my_function", "new_function", "example_tool".
_PLACEHOLDER_FILLER = frozenset({
    "my", "new", "some", "example", "sample", "placeholder", "dummy", "generic", "unknown",
    "default", "your", "x", "foo", "bar", "baz",
})
# Names of the chat runtime that tool-calling APIs leak as tool names: the code
# interpreter ("python"), chat roles, and OpenAI's parallel-call wrapper namespace.
_RUNTIME_NAMES = frozenset({"python", "ipython", "assistant", "user", "system", "developer"})
_RUNTIME_PREFIXES = (("multi", "tool", "use"),)


# Glue skipped when a name is read as a phrase ("none_of_the_above"). Unlike the stopwords
# suggestions.py skips when matching descriptions, negations stay: here they carry the meaning.
_GLUE = frozenset({"a", "an", "the", "of", "to", "for", "is", "be", "this", "that", "all"})


@lru_cache(maxsize=4096)
def classify_unknown_name(name: str) -> str | None:
    """Whether a name that is not in the allowed list is not an attempt at a tool.

    Call it only for names missing from the allowed list: a catalogue may really hold a
    tool called ``python`` or ``no_op``, and then it is that tool.

    Args:
        name: The name the model used.

    Returns:
        :data:`ABSTENTION` when the name says no tool applies (``no_function``,
        ``out_of_domain``, ``None``), :data:`PLACEHOLDER` when it stands for "some tool"
        or names the chat runtime (``func1``, ``tools.call``, ``python``,
        ``multi_tool_use.parallel``), else None (an invented or misspelt tool).
    """
    if len(name) > MAX_NAME_CHARS:
        return None
    if name.strip().lower() in ("n/a", "na"):
        return ABSTENTION
    raw = _words(name)
    words = [w for w in raw if w not in _GLUE]
    if not words:
        return None
    rest = words[1:]
    if words[0] in _NO_TOOL_LEADS and all(w in _TOOL_TALK for w in rest):
        return ABSTENTION
    if words[0] in _NOTHING_FITS and all(w in _TOOL_TALK for w in rest):
        return ABSTENTION
    if raw[:2] == ["out", "of"] and rest and all(w in _TOOL_TALK for w in rest):
        return ABSTENTION  # "out_of_domain", "out_of_scope"
    content = [w for w in words if not w.isdigit()]
    if not content:
        return None
    if len(content) == 1 and content[0] in _RUNTIME_NAMES:
        return PLACEHOLDER
    if any(tuple(content[:len(p)]) == p for p in _RUNTIME_PREFIXES):
        return PLACEHOLDER
    if all(w in _CALL_WORDS or w in _PLACEHOLDER_FILLER for w in content):
        return PLACEHOLDER
    return None
