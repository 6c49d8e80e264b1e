"""The pattern bank and tool classes of the fabrication guard (family 2, tiers 1 and 2).

A reply *claims* work when it says, in the first person, that it is doing, has done or
is about to do something ("I'm deploying the patch now", "I've written the file",
"Let me read the full content"). Such a claim is only honest when a tool of the matching
class fired in the same turn. The patterns here find claims; the detector decides.

Rules the default patterns follow, each pinned by a test:

* First person or a bare sentence start only ("Still working on it."); third-person
  descriptions ("the tool wrote the file") never match.
* A negation between subject and verb breaks the match ("I'm not deploying", "I won't
  write"), because only a short list of adverbs may sit there.
* Simple past ("I wrote it") is not matched: it usually refers to an earlier turn.
* Descriptions of what the agent *is* stay quiet: "I'm running Claude Sonnet 4.5 through
  OpenRouter", "I'm running on the laptop", "I'm running v2.3", "I'm running as a
  read-only assistant" (the field report's false positive, generalised to model and
  vendor names, prepositions and versions).
* Offers conditional on the user ("I'll deploy it if you confirm") and content that is in
  the reply itself ("I've rewritten the function below") are not claims of tool work.
* Conversational objects ("let me re-read your question") are not reads that need a tool.

Text inside code blocks, inline code with a space in it, double quotes, blockquotes and
earlier guard disclaimers is masked before matching: quoting a phrase is not claiming it.

Speed: every default rule says which literals its matches start with (:class:`Rule`), so
it is tried only where one of them occurs instead of at every character; both tiers on a
2 KB reply measured about 0.2 ms, against about 1.4 ms for the same patterns as one
alternation scanned everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from guardtrace.schemas.names import TIER_ACTION, TIER_READ

__all__ = [
    "DEFAULT_ACTION_RULES",
    "DEFAULT_PATTERNS",
    "DEFAULT_READ_RULES",
    "DEFAULT_READ_TOOLS",
    "DEFAULT_WRITE_TOOLS",
    "PatternBank",
    "Rule",
    "prepare_text",
]

# --- Tool classes -------------------------------------------------------------------
# A tool may belong to both classes (a shell that can `cat` a file); classes are
# matched case-insensitively. The last three write and last two read names are the
# vendors' built-in tools that the adapters in `tool_calls` report (OpenAI's code
# interpreter and local shell, Anthropic's code execution, file search, web fetch).
DEFAULT_WRITE_TOOLS: frozenset[str] = frozenset({
    "write_file", "replace_in_file", "create_file", "delete_file", "run_command",
    "execute_code", "python_repl", "shell", "deploy", "git_commit", "git_push",
    "send_email", "send_message", "http_post", "self_modify_code",
    "code_interpreter", "code_execution", "local_shell",
})
DEFAULT_READ_TOOLS: frozenset[str] = frozenset({
    "read_file", "list_directory", "search_files", "code_search", "grep", "web_search",
    "http_request", "http_get", "vault_search", "query_memory", "fetch_url",
    "file_search", "web_fetch",
})

# --- Building blocks ----------------------------------------------------------------
_APOS = "['’]"
_I_AM = rf"\bI(?:{_APOS}?m|\s+am)"
_I_HAVE = rf"\bI(?:{_APOS}?ve|\s+have)"
_I_WILL = (rf"\bI(?:{_APOS}?ll|\s+will|{_APOS}?m\s+(?:going\s+to|gonna|about\s+to)"
           rf"|\s+am\s+(?:going\s+to|about\s+to))")
_LET_ME = r"\blet\s+me"
# One optional adverb: enough for "I'm now deploying", and it keeps "not"/"never" out,
# which is what makes negations quiet.
_ADV = (r"(?:(?:now|currently|just|actually|already|also|still|finally|quickly|first|"
        r"immediately|then|successfully)\s+)?")
_GO_AHEAD = r"(?:go\s+ahead\s+(?:and\s+)?)?"
# Sentence start: the beginning of a line or after terminal punctuation.
_SENTENCE = r"(?:^|(?<=[.!?]\s))"
# The rest of the sentence (dots inside "v2.3" or "app.py" do not end it), bounded.
_REST = r"(?:[^.!?\n]|\.(?=\S)){0,120}?"
# An offer that waits for the user is not a claim of work.
_NOT_CONDITIONAL = (rf"(?!{_REST}\b(?:if|once|when|after|as\s+soon\s+as|whenever)\s+"
                    r"(?:you|u)\b)")
# Content that is part of this reply ("the function below") needs no tool.
_NOT_INLINE = (rf"(?!{_REST}\b(?:below|above|the\s+following|in\s+this\s+"
               r"(?:reply|message|answer|response))\b)")
# Objects that are the conversation itself ("your question"), not something to read.
_NOT_CONVERSATION = (r"(?!\s+(?:(?:your|this|the|that|my)\s+)?(?:(?:last|previous|earlier|"
                     r"original)\s+)?(?:message|question|request|reply|comment|prompt|"
                     r"feedback|point|answer|words)\b|\s+(?:what|how|why|whether)\s+you\b)")

_MODEL_NAMES = (
    r"(?:claude|sonnet|haiku|opus|chatgpt|gpt[\w.\-]*|o[1-9](?:-\w+)?|gemini|gemma|llama"
    r"[\w.\-]*|mistral|mixtral|codestral|qwen[\w.\-]*|deepseek[\w.\-]*|grok|phi-?\d|"
    r"command[\s-]r|cohere|openai|anthropic|openrouter|ollama|vllm|bedrock|vertex|azure|"
    r"groq|fireworks|kimi|glm|falcon)\b"
)
# What follows "running" when the sentence describes the agent rather than an action.
_RUNNING_IS_DESCRIPTION = (
    r"(?!\s+(?:"
    rf"(?:the\s+|an?\s+)?{_MODEL_NAMES}"
    r"|(?:the\s+|an?\s+)?(?:latest|newest|current|same|default|older|newer|stable|beta|"
    r"local|hosted|quantized|quantised|fine-?tuned|distilled)\b"
    r"|(?:an?|the)\s+(?:[\w.\-]+\s+){0,2}(?:model|llm)\b"
    r"|(?:on|in|inside|within|under|with|as|atop|via|through|behind|from|at|off|low|out|"
    r"late|short|version|release|locally|fine|smoothly|well|okay|ok)\b"
    r"|v?\d"
    r"))"
)
# "run into a problem", "run it by you": idioms, not execution.
_RUN_IDIOM = (r"(?!\s+(?:into|by|through|out|across|low|short|late)\b"
              r"|\s+(?:[\w\-]+\s+){1,2}(?:by|past)\s+(?:you|u|me|him|her|them|us)\b)")
# "building on your idea" is figurative.
_NOT_FIGURATIVE = r"(?!\s+on\s+(?:your|that|this|what|top\s+of\s+(?:your|that|what))\b)"
# "calling it a day" is not a tool call; an identifier or "the X tool" is.
_CALL_OBJECT = (r"\s+(?:`?[A-Za-z]\w*_\w+`?|(?:the\s+)?[\w\-]+\s+"
                r"(?:tool|function|api|endpoint|command|script|webhook))")


def _words(words: tuple[str, ...]) -> str:
    # Longest first so "rewriting" is not cut to "writing" by an earlier alternative.
    return "(?:" + "|".join(sorted(words, key=len, reverse=True)) + r")\b"


def _first_words(*word_lists: tuple[str, ...]) -> tuple[str, ...]:
    # The literal each alternative begins with ("spinning\s+up" -> "spinning"); every
    # alternative passed here must start with a plain word.
    firsts = set()
    for words in word_lists:
        for word in words:
            literal = re.match(r"[a-z'’\-]+", word)
            if literal is None:
                raise ValueError(f"alternative {word!r} does not start with a literal")
            firsts.add(literal.group())
    return tuple(sorted(firsts))


def _spaced(*phrases: str) -> tuple[str, ...]:
    # Start literals after whitespace normalisation: a `\s+` is one space or a newline.
    return tuple(sorted({v for p in phrases for v in (p, p.replace(" ", "\n"))}))


_ACTION_ING_WORDS = (
    "writing", "rewriting", "extracting", "creating", "modifying", "patching", "shipping",
    "deploying", "redeploying", "executing", "building", "rebuilding", "refactoring",
    "sending", "invoking", "dispatching", "committing", "pushing", "updating", "editing",
    "fixing", "applying", "installing", "launching", "implementing", "saving", "deleting",
    "removing", "restarting", "triggering", "uploading", "publishing", "merging",
    "migrating", "emailing", "posting", "compiling", r"spinning\s+up", r"rolling\s+out",
    r"rolling\s+back", r"kicking\s+off", r"firing\s+off")
_ACTION_PERFECT_WORDS = (
    "written", "rewritten", "extracted", "created", "modified", "patched", "shipped",
    "deployed", "redeployed", "executed", "built", "rebuilt", "refactored", "sent",
    "invoked", "dispatched", "committed", "pushed", "updated", "edited", "fixed",
    "applied", "installed", "launched", "implemented", "saved", "deleted", "removed",
    "restarted", "triggered", "uploaded", "published", "merged", "migrated", "emailed",
    "posted", "compiled", r"rolled\s+out", r"rolled\s+back", r"kicked\s+off")
_ACTION_BASE_WORDS = (
    "write", "rewrite", "extract", "create", "modify", "patch", "ship", "deploy",
    "redeploy", "execute", "build", "rebuild", "refactor", "send", "invoke", "dispatch",
    "commit", "push", "update", "edit", "fix", "apply", "install", "launch", "implement",
    "save", "delete", "remove", "restart", "trigger", "upload", "publish", "merge",
    "migrate", "email", "post", "compile", r"spin\s+up", r"roll\s+out", r"roll\s+back",
    r"kick\s+off")
_BEGIN_WORDS = ("beginning", "starting", r"kicking\s+off", "commencing", "initiating")
_ADV_WORDS = ("now", "currently", "just", "actually", "already", "also", "still",
              "finally", "quickly", "first", "immediately", "then", "successfully")
_ACTION_ING = _words(_ACTION_ING_WORDS)
_ACTION_PERFECT = _words(_ACTION_PERFECT_WORDS)
_ACTION_BASE = _words(_ACTION_BASE_WORDS)
# "write out the steps" / "write up a summary" put text in the reply.
_NOT_WRITE_OUT = r"(?!(?:(?<=rite)|(?<=riting)|(?<=ritten))\s+(?:out|up)\b)"
_WORK_OBJECT = (r"(?:it|this|that|the\s+(?:fix|patch|changes?|refactor|deploy(?:ment)?|"
                r"migration|implementation|update|rollout|release))\b")
_WORK_NOUN = (r"(?:refactor(?:ing)?|deploy(?:ment)?|migration|rewrite|build|fix|patch|"
              r"implementation|rollout|upgrade|install(?:ation)?|changes?|edits?|update|"
              r"commit|push|release)\b")
# "Beginning the refactor." / "starting the migration"
_BEGIN = (rf"{_words(_BEGIN_WORDS)}\s+(?:on\s+)?(?:the|a|my|work\s+on\s+the)\s+"
          rf"(?:[\w\-]+\s+)?{_WORK_NOUN}")
_NOW = r"(?:now|right\s+now|right\s+away|as\s+we\s+speak|immediately)\b"
_NOW_WORDS = _spaced("now", "right away", "as we speak", "immediately")

_READ_BASE_WORDS = (
    "read", "reread", "re-read", r"look\s+(?:at|into|through|over)",
    r"(?:take|have)\s+a\s+(?:closer\s+|quick\s+|careful\s+)?look",
    "examine", "check", "inspect", "review", "scan", "skim", "browse", "search",
    "explore", "study", "investigate", r"dig\s+into", r"go\s+through", r"pull\s+up",
    "open", "fetch",
    r"get\s+a\s+(?:clearer|better|full|fuller|quick|complete)\s+"
    r"(?:picture|view|look|sense|understanding)",
    "understand")
_READ_ING_WORDS = (
    "reading", "rereading", "re-reading", r"looking\s+(?:at|into|through|over)",
    "examining", "inspecting", "reviewing", "scanning", "skimming", "browsing",
    "searching", "exploring", "investigating", r"digging\s+into", r"going\s+through",
    r"pulling\s+up", "opening", "fetching", r"checking(?!\s+in\b)")
_READ_PERFECT_WORDS = (
    r"read\s+(?:through\s+)?(?:the|all|every|each|it|this|that)", "reread", "re-read",
    r"looked\s+(?:at|into|through|over)", "examined", "inspected", "reviewed", "scanned",
    "skimmed", "browsed", "searched", r"gone\s+through", "checked", "fetched")
_READ_BASE = _words(_READ_BASE_WORDS)
_READ_ING = _words(_READ_ING_WORDS)
_READ_PERFECT = _words(_READ_PERFECT_WORDS)
# "I'm reading this as a request to..." is interpretation, not reading.
_NOT_INTERPRETING = (r"(?!\s+(?:between\b|(?:(?:this|that|it|you|your\s+\w+|the\s+\w+)\s+)"
                     r"?as\b))")

_STARTS_I_AM = _spaced("i'm", "i’m", "im ", "i am")
_STARTS_I_HAVE = _spaced("i've", "i’ve", "ive ", "i have")
_STARTS_I_WILL = _STARTS_I_AM + _spaced("i'll", "i’ll", "ill ", "i will")
_STARTS_LET_ME = _spaced("let me")


@dataclass(frozen=True)
class Rule:
    """One pattern, with an optional hint that makes it cheap to run.

    Args:
        pattern: A regular expression (compiled with the bank's flags, case-insensitive
            by default). It is matched against the reply after quoted regions are masked
            and runs of spaces and tabs are collapsed to one space.
        starts: Lower-case literals one of which every match begins with. When given,
            the bank only tries the pattern where one of them occurs (``str.find`` runs
            in C), instead of at every character of the reply. A hint that misses a
            possible start silently loses those matches, so leave it empty when unsure.
        requires: Lower-case literals one of which every match contains; when none
            occurs in the reply the pattern is not run at all.
    """

    pattern: str
    starts: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()


DEFAULT_ACTION_RULES: tuple[Rule, ...] = (
    # "I'm deploying the patch now." / "I'm running the tests" (not "I'm running Claude
    # Sonnet through OpenRouter") / "I'm calling self_modify_code now." / "I'm on it." /
    # "I'm still working on it." / "I'm starting the migration."
    Rule(rf"{_I_AM}\s+{_ADV}(?:{_ACTION_ING}{_NOT_WRITE_OUT}{_NOT_FIGURATIVE}{_NOT_INLINE}"
         rf"|running\b{_RUNNING_IS_DESCRIPTION}"
         rf"|calling{_CALL_OBJECT}"
         rf"|still\s+working\b"
         rf"|working\s+(?:on|through)\s+{_WORK_OBJECT}"
         rf"|on\s+it\b"
         rf"|{_BEGIN})", _STARTS_I_AM),
    # "I've written the file."
    Rule(rf"{_I_HAVE}\s+{_ADV}(?:{_ACTION_PERFECT}{_NOT_WRITE_OUT}{_NOT_INLINE}"
         rf"|run\b{_RUN_IDIOM}"
         rf"|called{_CALL_OBJECT})", _STARTS_I_HAVE),
    # "I'll ship it shortly." / "I'm going to deploy." (not "... if you confirm")
    Rule(rf"{_I_WILL}\s+{_ADV}{_GO_AHEAD}(?:{_ACTION_BASE}{_NOT_WRITE_OUT}{_NOT_FIGURATIVE}"
         rf"|run\b{_RUN_IDIOM})"
         rf"{_NOT_CONDITIONAL}{_NOT_INLINE}", _STARTS_I_WILL),
    # "Let me write the file."
    Rule(rf"{_LET_ME}\s+{_ADV}{_GO_AHEAD}(?:{_ACTION_BASE}{_NOT_WRITE_OUT}{_NOT_FIGURATIVE}"
         rf"|run\b{_RUN_IDIOM})"
         rf"{_NOT_CONDITIONAL}{_NOT_INLINE}", _STARTS_LET_ME),
    # Sentences without a subject: "Still working on it." (not "The server is still
    # working."), "Beginning the refactor.", "Deploying the patch now."
    Rule(rf"{_SENTENCE}{_ADV}(?:still\s+working\b|working\s+(?:on|through)\s+{_WORK_OBJECT})",
         _first_words(_ADV_WORDS, ("still", "working")), ("working",)),
    Rule(rf"{_SENTENCE}{_BEGIN}", _first_words(_BEGIN_WORDS)),
    Rule(rf"{_SENTENCE}{_ACTION_ING}(?:[^.!?\n]{{0,60}}?\s)?{_NOW}",
         _first_words(_ACTION_ING_WORDS), _NOW_WORDS),
    # The field report's "working through it", anywhere.
    Rule(r"\bworking\s+through\s+it\b", ("working",)),
)

DEFAULT_READ_RULES: tuple[Rule, ...] = (
    # "Let me read the full content in chunks." / "Let me get a clearer picture."
    Rule(rf"{_LET_ME}\s+{_ADV}{_GO_AHEAD}{_READ_BASE}{_NOT_CONVERSATION}{_NOT_CONDITIONAL}",
         _STARTS_LET_ME),
    # "I'm reading the config." / "I'm looking at the logs."
    Rule(rf"{_I_AM}\s+{_ADV}{_READ_ING}{_NOT_CONVERSATION}{_NOT_INTERPRETING}",
         _STARTS_I_AM),
    # "I've reviewed the file."
    Rule(rf"{_I_HAVE}\s+{_ADV}{_READ_PERFECT}{_NOT_CONVERSATION}", _STARTS_I_HAVE),
    # "I'll look at the logs."
    Rule(rf"{_I_WILL}\s+{_ADV}{_GO_AHEAD}{_READ_BASE}{_NOT_CONVERSATION}{_NOT_CONDITIONAL}",
         _STARTS_I_WILL),
    # "Reading the file now."
    Rule(rf"{_SENTENCE}{_READ_ING}(?:[^.!?\n]{{0,60}}?\s)?{_NOW}",
         _first_words(_READ_ING_WORDS), _NOW_WORDS),
)

# Regions whose words are quoted, not said: fenced code, inline code with a space in
# it (`write_file` stays: naming a tool is not quoting a sentence), double-quoted spans
# on one line, blockquote lines, and guard disclaimers already appended to a reply.
_QUOTED = re.compile(
    r"```.*?(?:```|\Z)|`[^`\n]*\s[^`\n]*`|\"[^\"\n]*\"|“[^”\n]*”"
    r"|^[ \t]*>[^\n]*|^⚠️[^\n]*",
    re.DOTALL | re.MULTILINE,
)
_HSPACE = re.compile(r"[^\S\n]{2,}|[\t\r\f\v\xa0]")


def prepare_text(text: str) -> str:
    """The text patterns are matched against.

    Quoted regions are replaced by one space each, and runs of spaces and tabs become
    one space (so a ``Rule.starts`` literal like ``"i am"`` finds "I  am" too).

    Args:
        text: A reply.

    Returns:
        The masked, whitespace-normalised text.
    """
    if any(c in text for c in '`"“>⚠'):
        text = _QUOTED.sub(" ", text)
    if "  " in text or any(c in text for c in "\t\r\f\v\xa0"):
        text = _HSPACE.sub(" ", text)
    return text


def _as_rule(item: str | Rule) -> Rule:
    return item if isinstance(item, Rule) else Rule(item)


def _occurrences(text: str, literal: str) -> list[int]:
    hits = []
    i = text.find(literal)
    while i >= 0:
        hits.append(i)
        i = text.find(literal, i + 1)
    return hits


class _CompiledRule:
    __slots__ = ("regex", "requires", "starts")

    def __init__(self, rule: Rule, flags: int) -> None:
        self.regex = re.compile(rule.pattern, flags)
        self.starts = rule.starts
        self.requires = rule.requires

    def spans(self, text: str, lowered: str | None,
              found: dict[str, list[int]]) -> list[tuple[int, int]]:
        if lowered is not None and self.requires and not any(
                literal in lowered for literal in self.requires):
            return []
        if not self.starts or lowered is None:
            return [m.span() for m in self.regex.finditer(text) if m.end() > m.start()]
        positions: set[int] = set()
        for literal in self.starts:
            # Rules share literals ("i'm" starts six of them): find each once per text.
            hits = found.get(literal)
            if hits is None:
                hits = found[literal] = _occurrences(lowered, literal)
            positions.update(hits)
        out: list[tuple[int, int]] = []
        end = 0
        match = self.regex.match
        for pos in sorted(positions):
            if pos < end:
                continue  # finditer semantics: matches do not overlap
            m = match(text, pos)  # sees the characters before pos for \b and lookbehinds
            if m is not None and m.end() > pos:
                out.append(m.span())
                end = m.end()
        return out


class PatternBank:
    """The rules of tiers 1 and 2, compiled once at construction.

    Args:
        action: Tier 1 rules (patterns or :class:`Rule`): claims of write/execute work.
        read: Tier 2 rules: narration of reading or looking.
        allow: Truthful phrases: a tier 1 or 2 match that overlaps a match of one of
            these is dropped. The place for site-specific exceptions ("I'm running the
            meeting") without editing the claim patterns.
        flags: ``re`` flags for every pattern.

    Raises:
        re.error: A pattern does not compile (at construction, never while checking).
    """

    def __init__(self, action: Iterable[str | Rule] = (), read: Iterable[str | Rule] = (),
                 allow: Iterable[str | Rule] = (),
                 flags: int = re.IGNORECASE | re.MULTILINE) -> None:
        self.action = tuple(map(_as_rule, action))
        self.read = tuple(map(_as_rule, read))
        self.allow = tuple(map(_as_rule, allow))
        self.flags = flags
        self._tiers = {
            TIER_ACTION: [_CompiledRule(r, flags) for r in self.action],
            TIER_READ: [_CompiledRule(r, flags) for r in self.read],
        }
        self._allow = [_CompiledRule(r, flags) for r in self.allow]

    @classmethod
    def default(cls) -> PatternBank:
        """The built-in rules (a new bank; :data:`DEFAULT_PATTERNS` is a shared one)."""
        return cls(DEFAULT_ACTION_RULES, DEFAULT_READ_RULES)

    def extend(self, *, action: Iterable[str | Rule] = (), read: Iterable[str | Rule] = (),
               allow: Iterable[str | Rule] = ()) -> PatternBank:
        """A new bank with these rules added to this bank's lists."""
        return PatternBank(self.action + tuple(action), self.read + tuple(read),
                           self.allow + tuple(allow), self.flags)

    def find(self, tier: str, prepared: str) -> list[str]:
        """Phrases of ``tier`` (``"action"`` or ``"read"``) in text from :func:`prepare_text`.

        Returns:
            Each match's text with whitespace collapsed, in order of appearance.
        """
        return self.find_tiers(prepared, (tier,))[tier]

    def find_tiers(self, prepared: str, tiers: Iterable[str]) -> dict[str, list[str]]:
        """:meth:`find` for several tiers at once, sharing the literal search between them."""
        lowered: str | None = prepared.lower()
        if len(lowered) != len(prepared):  # type: ignore[arg-type]
            lowered = None  # a few characters lower-case to two: offsets would drift
        found: dict[str, list[int]] = {}
        out: dict[str, list[str]] = {}
        for tier in tiers:
            spans: list[tuple[int, int]] = []
            end = -1
            # Rules of one tier may match overlapping words ("I'm working through it" and
            # "working through it"): the earliest, then longest, match speaks for them.
            candidates = {span for rule in self._tiers[tier]
                          for span in rule.spans(prepared, lowered, found)}
            for s, e in sorted(candidates, key=lambda span: (span[0], -span[1])):
                if s >= end:
                    spans.append((s, e))
                    end = e
            if spans and self._allow:
                allowed = [a for rule in self._allow
                           for a in rule.spans(prepared, lowered, found)]
                spans = [(s, e) for s, e in spans
                         if not any(s < ae and as_ < e for as_, ae in allowed)]
            out[tier] = [" ".join(prepared[s:e].split()) for s, e in spans]
        return out

    def __repr__(self) -> str:
        return (f"PatternBank(action={len(self.action)} rules, read={len(self.read)} rules, "
                f"allow={len(self.allow)} rules)")


DEFAULT_PATTERNS = PatternBank.default()
